package bus_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// fakeTaker takes up to room deliveries and records what it is handed.
type fakeTaker struct {
	mu       sync.Mutex
	room     int
	reserved []string
	taken    []bus.Delivery
}

func (f *fakeTaker) Lease() time.Duration { return 2 * time.Minute }

func (f *fakeTaker) Reserve(id, session string, until time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.room == 0 {
		return false
	}
	f.room--
	f.reserved = append(f.reserved, id)
	return true
}

func (f *fakeTaker) Take(d bus.Delivery) {
	f.mu.Lock()
	f.taken = append(f.taken, d)
	f.mu.Unlock()
}

func deliveryState(t *testing.T, db *store.DB, id string) (state string, attempt int, lease int64) {
	t.Helper()
	if err := db.QueryRow(context.Background(), `SELECT state, attempt, lease_until FROM bus_deliveries WHERE id = ?`, id).Scan(&state, &attempt, &lease); err != nil {
		t.Fatal(err)
	}
	return
}

// A taker with room gets a new delivery leased to it by the accepting
// transaction and handed over after the commit, with the log and hooks of
// a claim; one without room leaves it queued for a claim. A delivery whose
// transaction fails is never handed over.
func TestTakerGetsDeliveriesAsTheyCommit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		var hooked []string
		e.bus.RegisterSystem("system:test", bus.SystemHooks{OnDelivered: func(ctx context.Context, tx *store.Tx, d bus.Delivery) error {
			// The hook runs last in the transaction: it sees what the sender wrote after sending.
			var n int
			if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM bus_log WHERE detail = ?`, "written after the send").Scan(&n); err != nil {
				return err
			}
			hooked = append(hooked, d.DeliveryID+map[bool]string{true: " saw the sender's row", false: " too early"}[n > 0])
			return nil
		}})
		ft := &fakeTaker{room: 1}
		remove := e.bus.AddTaker(e.W1.ID, "", ft)

		// An agent's send: handed over.
		r := e.mustSend(e.envelope(e.P1.ID, e.W1.ID, protocol.TypeNotification, map[string]any{"event": "one"}))
		id := r.DeliveryIDs[0]
		if len(ft.taken) != 1 || ft.taken[0].DeliveryID != id || ft.taken[0].Attempt != 1 || ft.taken[0].AgentID != e.W1.ID ||
			ft.taken[0].Sender != e.P1.ID || !ft.taken[0].LeaseUntil.Equal(e.clock.Now().Add(2*time.Minute).Truncate(time.Millisecond)) {
			t.Fatalf("taken %+v", ft.taken)
		}
		if en := decode(t, ft.taken[0]); en.ID == "" || en.From.Agent != e.P1.ID {
			t.Fatalf("envelope of the taken delivery %+v", en)
		}
		if st, att, lease := deliveryState(t, db, id); st != "leased" || att != 1 || lease == 0 {
			t.Fatalf("taken delivery stored %s attempt %d lease %d", st, att, lease)
		}
		if ds := e.claim(e.W1.ID, 10); len(ds) != 0 {
			t.Fatalf("a taken delivery was claimed again: %+v", ds)
		}
		var delivered int
		db.QueryRow(e.ctx, `SELECT COUNT(*) FROM bus_log WHERE delivery_id = ? AND status = 'delivered' AND attempt = 1`, id).Scan(&delivered)
		if delivered != 1 {
			t.Fatalf("%d delivered log rows", delivered)
		}

		// No room: queued, for a claim.
		r2 := e.mustSend(e.envelope(e.P1.ID, e.W1.ID, protocol.TypeNotification, map[string]any{"event": "two"}))
		if len(ft.taken) != 1 {
			t.Fatalf("handed over without room: %+v", ft.taken)
		}
		if st, _, _ := deliveryState(t, db, r2.DeliveryIDs[0]); st != "queued" {
			t.Fatalf("refused delivery is %s", st)
		}

		// A system sender's hook runs after the sender's own rows.
		ft.room = 2
		var sys string
		err := db.Write(e.ctx, func(tx *store.Tx) error {
			res, err := e.bus.SendSystemTx(e.ctx, tx, &protocol.Envelope{From: protocol.Address{Agent: "system:test"}, To: protocol.Address{Agent: e.W1.ID},
				Type: protocol.TypeNotification, Payload: protocol.MustJSON(map[string]any{"event": "sys"})})
			if err != nil {
				return err
			}
			sys = res.DeliveryIDs[0]
			_, err = tx.Exec(e.ctx, `INSERT INTO bus_log (at, level, msg_id, trace_id, from_agent, to_agent, type, status, latency_ms, delivery_id, attempt, detail)
				VALUES (0, 'info', '', '', '', '', '', 'x', 0, '', 0, 'written after the send')`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(hooked) != 1 || hooked[0] != sys+" saw the sender's row" || len(ft.taken) != 2 {
			t.Fatalf("hook %v, taken %d", hooked, len(ft.taken))
		}

		// A failed transaction hands nothing over.
		boom := errors.New("boom")
		err = db.Write(e.ctx, func(tx *store.Tx) error {
			if _, err := e.bus.SendSystemTx(e.ctx, tx, &protocol.Envelope{From: protocol.Address{Agent: "system:test"}, To: protocol.Address{Agent: e.W1.ID},
				Type: protocol.TypeNotification, Payload: protocol.MustJSON(map[string]any{"event": "lost"})}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) || len(ft.taken) != 2 || len(ft.reserved) != 3 {
			t.Fatalf("after a failed transaction: %v, %d taken, %d reserved", err, len(ft.taken), len(ft.reserved))
		}

		// Sessions: a taker of one session is not offered another's.
		remove()
		other := &fakeTaker{room: 5}
		defer e.bus.AddTaker(e.W1.ID, "conversation:a", other)()
		en := e.envelope(e.P1.ID, e.W1.ID, protocol.TypeNotification, map[string]any{"event": "b"})
		en.To.Session = "conversation:b"
		e.mustSend(en)
		en = e.envelope(e.P1.ID, e.W1.ID, protocol.TypeNotification, map[string]any{"event": "a"})
		en.To.Session = "conversation:a"
		e.mustSend(en)
		e.mustSend(e.envelope(e.P1.ID, e.W1.ID, protocol.TypeNotification, map[string]any{"event": "any session"}))
		if len(other.taken) != 2 || other.taken[0].SessionKey != "conversation:a" || other.taken[1].SessionKey != "" {
			t.Fatalf("session taker got %+v", other.taken)
		}
	})
}
