package bus_test

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

func TestRecentDeliveriesAndInspection(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{MaxAttempts: 1})
		first := e.mustSend(e.request(e.C1.ID, e.C2.ID, "first"))
		second := e.mustSend(e.request(e.C1.ID, e.C2.ID, "second"))
		e.mustSend(e.request(e.C2.ID, e.C1.ID, "other way"))

		d := e.claim(e.C2.ID, 1)[0]
		if _, err := e.bus.Nack(e.ctx, e.C2.ID, d.DeliveryID, bus.NackOptions{Error: "boom"}); err != nil {
			t.Fatal(err)
		}

		got, err := e.bus.RecentDeliveries(e.ctx, e.C2.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("C2 has %d deliveries, want 2: %+v", len(got), got)
		}
		states := map[string]bus.DeliveryInfo{}
		for _, g := range got {
			if g.AgentID != e.C2.ID || g.Sender != e.C1.ID || g.Type != "request" || g.Envelope != nil || g.TraceID == "" {
				t.Fatalf("list row %+v", g)
			}
			states[g.DeliveryID] = g
		}
		dead := states[d.DeliveryID]
		if dead.State != "dead" || dead.DeadReason != "max_attempts" || dead.LastError != "boom" || dead.Attempt != 1 {
			t.Fatalf("nacked delivery %+v", dead)
		}
		if one, _ := e.bus.RecentDeliveries(e.ctx, e.C2.ID, 1); len(one) != 1 {
			t.Fatalf("limit 1 gave %d", len(one))
		}

		// The recipient and the admin may open it; the sender and others may not.
		id := first.DeliveryIDs[0]
		if d.DeliveryID == id {
			id = second.DeliveryIDs[0]
		}
		info, hist, err := e.bus.Delivery(e.ctx, id, e.C2.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		var en protocol.Envelope
		if err := json.Unmarshal(info.Envelope, &en); err != nil || en.From.Agent != e.C1.ID || info.State != "queued" || info.Priority != "normal" {
			t.Fatalf("delivery %+v (%v)", info, err)
		}
		if len(hist) == 0 || hist[0].Status != "sent" {
			t.Fatalf("history %+v", hist)
		}
		if _, _, err := e.bus.Delivery(e.ctx, id, "", true); err != nil {
			t.Fatalf("admin: %v", err)
		}
		for _, viewer := range []string{e.C1.ID, e.W1.ID} {
			_, _, err := e.bus.Delivery(e.ctx, id, viewer, false)
			wantCode(t, err, protocol.ClassUnavailable, "delivery_not_found")
		}
		_, _, err = e.bus.Delivery(e.ctx, "dlv_missing", "", true)
		wantCode(t, err, protocol.ClassUnavailable, "delivery_not_found")

		depths, err := e.bus.QueueDepths(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if depths[e.C2.ID] != 1 || depths[e.C1.ID] != 1 || len(depths) != 2 {
			t.Fatalf("depths %v", depths)
		}
	})
}
