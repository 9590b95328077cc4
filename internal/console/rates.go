package console

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bus metrics the rates are derived from: first deliveries (the delivery
// latency histogram counts one sample per delivery handed to a consumer
// for the first time) and acknowledgements.
const (
	metricDelivered = "switchboard_bus_delivery_latency_seconds"
	metricAcked     = "switchboard_bus_processed_total"
	rateWindow      = 10 * time.Second
	minSampleGap    = 500 * time.Millisecond
)

// rates turns the bus's counters into per-second rates over the last few
// seconds of this node. Samples are taken when a page asks (the overview's
// live stream asks once a second), so nothing runs when nobody looks.
type rates struct {
	g       prometheus.Gatherer
	mu      sync.Mutex
	samples []rateSample
}

type rateSample struct {
	at               time.Time
	delivered, acked float64
}

// Rates are deliveries and acknowledgements per second; OK is false until
// two samples a second apart exist.
type Rates struct {
	Delivered, Acked float64
	Window           time.Duration
	OK               bool
}

func newRates(g prometheus.Gatherer) *rates { return &rates{g: g} }

func (r *rates) observe(now time.Time) Rates {
	if r == nil || r.g == nil {
		return Rates{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.samples); n == 0 || now.Sub(r.samples[n-1].at) >= minSampleGap {
		if s, ok := r.sample(now); ok {
			r.samples = append(r.samples, s)
		}
	}
	cut := now.Add(-rateWindow)
	i := 0
	for i < len(r.samples)-2 && r.samples[i+1].at.Before(cut) {
		i++
	}
	r.samples = r.samples[i:]
	if len(r.samples) < 2 {
		return Rates{}
	}
	first, last := r.samples[0], r.samples[len(r.samples)-1]
	dt := last.at.Sub(first.at)
	if dt < time.Second {
		return Rates{}
	}
	return Rates{Delivered: (last.delivered - first.delivered) / dt.Seconds(), Acked: (last.acked - first.acked) / dt.Seconds(), Window: dt.Round(time.Second), OK: true}
}

func (r *rates) sample(now time.Time) (rateSample, bool) {
	mfs, err := r.g.Gather()
	if err != nil && len(mfs) == 0 {
		return rateSample{}, false
	}
	s := rateSample{at: now}
	for _, mf := range mfs {
		switch mf.GetName() {
		case metricDelivered:
			for _, m := range mf.GetMetric() {
				s.delivered += float64(m.GetHistogram().GetSampleCount())
			}
		case metricAcked:
			for _, m := range mf.GetMetric() {
				s.acked += m.GetCounter().GetValue()
			}
		}
	}
	return s, true
}
