package console

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRates(t *testing.T) {
	reg := prometheus.NewRegistry()
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metricDelivered}, []string{"priority"})
	acked := prometheus.NewCounter(prometheus.CounterOpts{Name: metricAcked})
	reg.MustRegister(lat, acked)
	r := newRates(reg)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := r.observe(t0); got.OK {
		t.Fatalf("one sample gave a rate: %+v", got)
	}
	for i := 0; i < 10; i++ {
		lat.WithLabelValues([]string{"high", "normal"}[i%2]).Observe(0.01)
	}
	acked.Add(4)
	if got := r.observe(t0.Add(300 * time.Millisecond)); got.OK {
		t.Fatalf("samples too close gave a rate: %+v", got)
	}
	got := r.observe(t0.Add(2 * time.Second))
	if !got.OK || got.Delivered != 5 || got.Acked != 2 || got.Window != 2*time.Second {
		t.Fatalf("rates %+v", got)
	}
	// Old samples leave the window: with no new traffic the rate drops to 0.
	r.observe(t0.Add(20 * time.Second))
	if got := r.observe(t0.Add(25 * time.Second)); !got.OK || got.Delivered != 0 {
		t.Fatalf("rates after idle %+v", got)
	}
	if got := newRates(nil).observe(t0); got.OK {
		t.Fatal("no gatherer, no rate")
	}
}
