package bus

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Thresholds are the alert limits of the spec (defaults from the seed):
// crossing one marks the hub degraded on /readyz with the reason.
type Thresholds struct {
	Latency    time.Duration // p95 accept→processed over Window (default 5s)
	QueueDepth int           // pending deliveries of any one agent (default 100)
	ErrorRate  float64       // failed / (processed + failed) over Window (default 0.01)
	Window     time.Duration // evaluation window (default 5 min)
}

func (t *Thresholds) setDefaults() {
	if t.Latency <= 0 {
		t.Latency = 5 * time.Second
	}
	if t.QueueDepth <= 0 {
		t.QueueDepth = 100
	}
	if t.ErrorRate <= 0 {
		t.ErrorRate = 0.01
	}
	if t.Window <= 0 {
		t.Window = 5 * time.Minute
	}
}

// Metrics are the bus's Prometheus collectors plus the sliding windows the
// thresholds are evaluated on.
type Metrics struct {
	accepted          *prometheus.CounterVec
	deliveryLatency   *prometheus.HistogramVec
	processingLatency *prometheus.HistogramVec
	processed         prometheus.Counter
	failed            prometheus.Counter
	expired           prometheus.Counter
	redelivered       prometheus.Counter
	pushedOnAccept    prometheus.Counter
	dead              *prometheus.CounterVec
	queueDepth        *prometheus.GaugeVec
	errorRate         prometheus.Gauge
	connected         prometheus.Gauge
	overdue           *prometheus.GaugeVec

	mu      sync.Mutex
	samples []sample // recent processing latencies and failures

	state Health
}

type sample struct {
	at      time.Time
	latency time.Duration
	failed  bool
}

// NewMetrics creates the bus collectors and registers them with reg (nil
// registers nothing, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}
	m := &Metrics{
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_bus_accepted_total", Help: "Envelopes accepted, by type."}, []string{"type"}),
		deliveryLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchboard_bus_delivery_latency_seconds",
			Help: "Time from acceptance to first delivery, by priority.", Buckets: buckets}, []string{"priority"}),
		processingLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchboard_bus_processing_latency_seconds",
			Help: "Time from acceptance to ack, by priority.", Buckets: buckets}, []string{"priority"}),
		processed:   prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_processed_total", Help: "Deliveries acknowledged."}),
		failed:      prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_failed_total", Help: "Deliveries nacked."}),
		expired:     prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_expired_total", Help: "Deliveries whose TTL ran out."}),
		redelivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_redelivered_total", Help: "Deliveries handed out again after a nack or an expired lease."}),
		pushedOnAccept: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_pushed_on_accept_total",
			Help: "Deliveries leased inside their accept's transaction and pushed to a socket on this node right after its commit."}),
		dead:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_bus_dead_total", Help: "Deliveries dead-lettered, by reason."}, []string{"reason"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchboard_bus_queue_depth", Help: "Pending (queued or leased) deliveries per agent."}, []string{"agent"}),
		errorRate:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchboard_bus_error_rate", Help: "Failed / (processed + failed) over the threshold window."}),
		connected:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchboard_bus_connected_sockets", Help: "Agent sockets connected to this node."}),
		overdue:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchboard_bus_overdue_deliveries", Help: "Pending deliveries past their priority's target."}, []string{"priority"}),
	}
	if reg != nil {
		reg.MustRegister(m.accepted, m.deliveryLatency, m.processingLatency, m.processed, m.failed, m.expired, m.redelivered, m.pushedOnAccept, m.dead,
			m.queueDepth, m.errorRate, m.connected, m.overdue)
	}
	return m
}

const maxSamples = 20000

func (m *Metrics) observeProcessed(priority string, latency time.Duration) {
	m.processed.Inc()
	m.processingLatency.WithLabelValues(priority).Observe(latency.Seconds())
	m.addSample(sample{at: time.Now(), latency: latency})
}

func (m *Metrics) observeFailed() {
	m.failed.Inc()
	m.addSample(sample{at: time.Now(), failed: true})
}

func (m *Metrics) addSample(s sample) {
	m.mu.Lock()
	if len(m.samples) >= maxSamples {
		m.samples = append(m.samples[:0], m.samples[maxSamples/2:]...)
	}
	m.samples = append(m.samples, s)
	m.mu.Unlock()
}

// Health is the result of the last threshold evaluation.
type Health struct {
	CheckedAt     time.Time         `json:"checkedAt"`
	P95Latency    time.Duration     `json:"-"`
	P95LatencyMs  int64             `json:"p95LatencyMs"`
	MaxQueueDepth int               `json:"maxQueueDepth"`
	DeepestAgent  string            `json:"deepestAgent,omitempty"`
	ErrorRate     float64           `json:"errorRate"`
	Overdue       map[string]int    `json:"overdue"`
	Reasons       map[string]string `json:"reasons,omitempty"`
}

// Health returns the last evaluation.
func (m *Metrics) Health() Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// Evaluate recomputes queue depths, overdue counts, the error rate and the
// latency percentile, updates the gauges, and records which thresholds are
// crossed. A crossing is logged once, when it starts.
func (s *Service) Evaluate(ctx context.Context) (Health, error) {
	now := s.clock.Now()
	th := s.cfg.Thresholds
	h := Health{CheckedAt: now, Overdue: map[string]int{}, Reasons: map[string]string{}}

	rows, err := s.db.Query(ctx, pendingByAgent)
	if err != nil {
		return h, fmt.Errorf("queue depth: %w", err)
	}
	depths := map[string]int{}
	for rows.Next() {
		var a string
		var n int
		if err := rows.Scan(&a, &n); err != nil {
			rows.Close()
			return h, err
		}
		depths[a] = n
	}
	rows.Close()
	s.metrics.queueDepth.Reset()
	for a, n := range depths {
		s.metrics.queueDepth.WithLabelValues(a).Set(float64(n))
		if n > h.MaxQueueDepth || (n == h.MaxQueueDepth && a < h.DeepestAgent) {
			h.MaxQueueDepth, h.DeepestAgent = n, a
		}
	}

	args := overdueArgs(now)
	for i, p := range []protocol.Priority{protocol.PriorityCritical, protocol.PriorityHigh, protocol.PriorityNormal, protocol.PriorityLow} {
		var n int
		if err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM bus_deliveries WHERE state IN ('queued', 'leased') AND priority = ? AND created_at < ?`, p.Rank(), args[i]).Scan(&n); err != nil {
			return h, fmt.Errorf("overdue: %w", err)
		}
		h.Overdue[string(p)] = n
		s.metrics.overdue.WithLabelValues(string(p)).Set(float64(n))
	}

	m := s.metrics
	m.mu.Lock()
	cut := time.Now().Add(-th.Window)
	keep := m.samples[:0]
	var lat []time.Duration
	var failed, ok int
	for _, sm := range m.samples {
		if sm.at.Before(cut) {
			continue
		}
		keep = append(keep, sm)
		if sm.failed {
			failed++
		} else {
			ok++
			lat = append(lat, sm.latency)
		}
	}
	m.samples = keep
	prev := m.state
	m.mu.Unlock()
	if failed+ok > 0 {
		h.ErrorRate = float64(failed) / float64(failed+ok)
	}
	m.errorRate.Set(h.ErrorRate)
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		h.P95Latency = lat[(len(lat)*95)/100]
		if (len(lat)*95)/100 >= len(lat) {
			h.P95Latency = lat[len(lat)-1]
		}
		h.P95LatencyMs = h.P95Latency.Milliseconds()
	}

	if h.P95Latency > th.Latency {
		h.Reasons["latency"] = fmt.Sprintf("p95 accept→processed latency %s exceeds %s", h.P95Latency.Round(time.Millisecond), th.Latency)
	}
	if h.MaxQueueDepth >= th.QueueDepth {
		h.Reasons["queueDepth"] = fmt.Sprintf("agent %s has %d pending deliveries (threshold %d)", h.DeepestAgent, h.MaxQueueDepth, th.QueueDepth)
	}
	if failed+ok >= 20 && h.ErrorRate >= th.ErrorRate {
		h.Reasons["errorRate"] = fmt.Sprintf("error rate %.1f%% over the last %s exceeds %.1f%%", h.ErrorRate*100, th.Window, th.ErrorRate*100)
	}
	for k, r := range h.Reasons {
		if _, was := prev.Reasons[k]; !was {
			s.log.Warn("bus threshold crossed", "threshold", k, "reason", r)
		}
	}
	for k := range prev.Reasons {
		if _, still := h.Reasons[k]; !still {
			s.log.Info("bus threshold recovered", "threshold", k)
		}
	}
	m.mu.Lock()
	m.state = h
	m.mu.Unlock()
	return h, nil
}

// ReadinessReason summarizes crossed thresholds for /readyz ("" when healthy).
func (s *Service) ReadinessReason(context.Context) string {
	h := s.metrics.Health()
	if len(h.Reasons) == 0 {
		return ""
	}
	keys := make([]string, 0, len(h.Reasons))
	for k := range h.Reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = h.Reasons[k]
	}
	return strings.Join(parts, "; ")
}

// Monitor evaluates thresholds every interval until ctx ends.
func (s *Service) Monitor(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.Evaluate(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("bus threshold evaluation failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Depth returns the number of pending deliveries of agentID.
func (s *Service) Depth(ctx context.Context, agentID string) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM bus_deliveries WHERE agent_id = ? AND state IN ('queued', 'leased')`, agentID).Scan(&n)
	return n, err
}
