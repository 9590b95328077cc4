package bus_test

import (
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// A system sender completes its delivery whatever its lease state; a
// completed delivery is never pushed again and completing twice is a no-op.
func TestCompleteTx(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{LeaseDuration: 10 * time.Second})
		send := func() string {
			env := &protocol.Envelope{From: protocol.Address{Agent: "system:test"}, To: protocol.Address{Agent: e.W1.ID}, Type: protocol.TypeNotification,
				Payload: protocol.MustJSON(map[string]any{"event": "x"})}
			if _, err := e.bus.SendSystem(e.ctx, env); err != nil {
				t.Fatal(err)
			}
			return env.ID
		}
		complete := func(id string) bool {
			var changed bool
			err := db.Write(e.ctx, func(tx *store.Tx) error {
				var err error
				changed, err = e.bus.CompleteTx(e.ctx, tx, id)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return changed
		}
		send()
		d := e.claim(e.W1.ID, 1)[0]
		e.clock.Advance(11 * time.Second)
		e.sweep() // the lease ran out: queued again
		if !complete(d.DeliveryID) || complete(d.DeliveryID) {
			t.Fatal("complete: want changed once")
		}
		e.clock.Advance(time.Hour)
		e.sweep()
		if len(e.claim(e.W1.ID, 1)) != 0 || e.depth(e.W1.ID) != 0 {
			t.Fatal("completed delivery came back")
		}
		err := db.Write(e.ctx, func(tx *store.Tx) error { _, err := e.bus.CompleteTx(e.ctx, tx, "dlv_missing"); return err })
		wantCode(t, err, protocol.ClassUnavailable, "delivery_not_found")
	})
}
