package relay

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// turnTimer times the hub's part of a relayed turn: from a reply reaching
// the hub to the delivery carrying it to the peer being written to the
// peer's socket (after its durable commit). The relay notes the reply's
// arrival when it creates the peer's delivery, inside the transaction (so
// the note exists before the commit wakes the peer's connection); the
// Claworld dialect reports the push.
//
// Notes whose delivery is never pushed on this node (the peer is on HTTP,
// offline, or connected to another node, or the transaction failed) are
// forgotten after one to two rotation periods, so memory stays bounded by
// the turns of the last two minutes.
type turnTimer struct {
	hist prometheus.Histogram

	mu        sync.Mutex
	cur, prev map[string]time.Time // deliveryId → reply received
	rotated   time.Time
	observe   func(time.Duration) // benchmarks: every sample, exactly
}

// turnRotation is how long an unpushed note is kept at least.
const turnRotation = time.Minute

func newTurnTimer() *turnTimer {
	return &turnTimer{
		hist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchboard_relay_turn_seconds",
			Help: "Hub overhead per relayed turn: from a reply reaching the hub to the peer's delivery, committed, being written to the peer's socket.",
			Buckets: []float64{.0005, .001, .002, .003, .004, .005, .0075, .01, .015, .025, .05, .1, .25, .5, 1, 2.5, 5, 10,
				30, 60},
		}),
		cur: map[string]time.Time{}, prev: map[string]time.Time{}, rotated: time.Now(),
	}
}

// start notes that deliveryID carries a reply the hub received at at.
func (t *turnTimer) start(deliveryID string, at time.Time) {
	now := time.Now()
	t.mu.Lock()
	if now.Sub(t.rotated) >= turnRotation {
		t.prev, t.cur, t.rotated = t.cur, make(map[string]time.Time, len(t.cur)), now
	}
	t.cur[deliveryID] = at
	t.mu.Unlock()
}

// pushed observes the turn carried by deliveryID, if one was noted here;
// a redelivery of the same delivery is not observed again.
func (t *turnTimer) pushed(deliveryID string) {
	t.mu.Lock()
	at, ok := t.cur[deliveryID]
	if ok {
		delete(t.cur, deliveryID)
	} else if at, ok = t.prev[deliveryID]; ok {
		delete(t.prev, deliveryID)
	}
	observe := t.observe
	t.mu.Unlock()
	if !ok {
		return
	}
	d := time.Since(at)
	t.hist.Observe(d.Seconds())
	if observe != nil {
		observe(d)
	}
}

// RegisterMetrics registers the relay's Prometheus collectors with reg:
// switchboard_relay_turn_seconds.
func (s *Service) RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(s.turns.hist)
}

type receivedKey struct{}

// withReceived records in ctx when the hub received the answer being
// handled, for the turn histogram.
func withReceived(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, receivedKey{}, at)
}

// receivedAt is the time recorded by withReceived.
func receivedAt(ctx context.Context) (time.Time, bool) {
	at, ok := ctx.Value(receivedKey{}).(time.Time)
	return at, ok
}
