package relay

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func sampleCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// A noted delivery is observed once, whichever generation holds it; notes
// never pushed are forgotten after two rotations, so memory stays bounded.
func TestTurnTimer(t *testing.T) {
	tt := newTurnTimer()
	var got []time.Duration
	tt.observe = func(d time.Duration) { got = append(got, d) }

	tt.start("dlv_a", time.Now().Add(-3*time.Millisecond))
	tt.pushed("dlv_a")
	tt.pushed("dlv_a") // a redelivery is not a second turn
	tt.pushed("dlv_unknown")
	if len(got) != 1 || got[0] < 3*time.Millisecond || sampleCount(t, tt.hist) != 1 {
		t.Fatalf("observations %v, histogram count %d", got, sampleCount(t, tt.hist))
	}

	tt.start("dlv_old", time.Now())
	tt.rotated = tt.rotated.Add(-turnRotation) // one rotation later: still known
	tt.start("dlv_new", time.Now())
	if _, ok := tt.prev["dlv_old"]; !ok {
		t.Fatal("a note was dropped after one rotation")
	}
	tt.pushed("dlv_old")
	tt.start("dlv_gone", time.Now())
	tt.rotated = tt.rotated.Add(-turnRotation)
	tt.start("dlv_x", time.Now())
	tt.rotated = tt.rotated.Add(-turnRotation)
	tt.start("dlv_y", time.Now())
	tt.pushed("dlv_gone")
	if len(got) != 2 {
		t.Fatalf("observations %v: dlv_old once, dlv_gone forgotten", got)
	}
	if n := len(tt.cur) + len(tt.prev); n != 2 {
		t.Fatalf("%d notes kept, want the last two rotations' 2", n)
	}
}
