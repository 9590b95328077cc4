package bus_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

type env struct {
	t     *testing.T
	ctx   context.Context
	db    *store.DB
	clock *clock.Fake
	reg   *agent.Registry
	bus   *bus.Service
	// a small team: command C1 with PM P1 (workers W1, W2) and PM P2 (worker W3); a second command C2.
	C1, C2, P1, P2, W1, W2, W3 agent.Agent
}

func newEnv(t *testing.T, db *store.DB, cfg bus.Config) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), db: db, clock: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	e.reg = agent.New(db, e.clock)
	e.bus = bus.New(db, e.reg, e.clock, nil, cfg, nil)
	mk := func(name, parent string) agent.Agent {
		a, _, err := e.reg.Create(e.ctx, agent.CreateParams{DisplayName: name, ParentID: parent})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	e.C1 = mk("C1", "")
	e.C2 = mk("C2", "")
	e.P1 = mk("P1", e.C1.ID)
	e.P2 = mk("P2", e.C1.ID)
	e.W1 = mk("W1", e.P1.ID)
	e.W2 = mk("W2", e.P1.ID)
	e.W3 = mk("W3", e.P2.ID)
	return e
}

func (e *env) envelope(from, to string, typ protocol.MessageType, payload any) *protocol.Envelope {
	return &protocol.Envelope{From: protocol.Address{Agent: from}, To: protocol.Address{Agent: to}, Type: typ, Payload: protocol.MustJSON(payload)}
}

func (e *env) send(en *protocol.Envelope) (bus.Result, error) {
	e.t.Helper()
	if err := e.bus.Prepare(en, ""); err != nil {
		return bus.Result{}, err
	}
	return e.bus.Send(e.ctx, en)
}

func (e *env) mustSend(en *protocol.Envelope) bus.Result {
	e.t.Helper()
	r, err := e.send(en)
	if err != nil {
		e.t.Fatalf("send: %v", err)
	}
	return r
}

func (e *env) request(from, to, action string) *protocol.Envelope {
	return e.envelope(from, to, protocol.TypeRequest, map[string]any{"action": action})
}

func (e *env) claim(agentID string, limit int) []bus.Delivery {
	e.t.Helper()
	ds, err := e.bus.Claim(e.ctx, agentID, bus.ClaimOptions{Limit: limit})
	if err != nil {
		e.t.Fatalf("claim: %v", err)
	}
	return ds
}

func (e *env) sweep() {
	e.t.Helper()
	if err := e.bus.Sweep(e.ctx, e.clock.Now().Add(-time.Hour)); err != nil {
		e.t.Fatalf("sweep: %v", err)
	}
}

func (e *env) depth(agentID string) int {
	n, err := e.bus.Depth(e.ctx, agentID)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func decode(t *testing.T, d bus.Delivery) *protocol.Envelope {
	t.Helper()
	env, err := d.Decode()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func wantCode(t *testing.T, err error, class protocol.Class, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s %s, got success", class, code)
	}
	pe := protocol.AsError(err)
	if pe.Class != class || pe.Code != code {
		t.Fatalf("want %s %s, got %s %s: %v", class, code, pe.Class, pe.Code, err)
	}
}

func TestPriorityThenArrival(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		order := []protocol.Priority{protocol.PriorityLow, protocol.PriorityNormal, protocol.PriorityCritical, protocol.PriorityHigh, protocol.PriorityNormal, protocol.PriorityCritical}
		for i, p := range order {
			en := e.envelope(e.C1.ID, e.C2.ID, protocol.TypeNotification, map[string]any{"event": "n", "message": fmt.Sprint(i)})
			en.Priority = p
			e.mustSend(en)
			e.clock.Advance(time.Millisecond)
		}
		var got []string
		for _, d := range e.claim(e.C2.ID, 100) {
			n, _ := decode(t, d).Notification()
			got = append(got, n.Message)
		}
		if want := "2,5,3,1,4,0"; strings.Join(got, ",") != want {
			t.Fatalf("order %v, want %s", got, want)
		}
	})
}

func TestRoutingRules(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		allowed := [][2]agent.Agent{
			{e.C1, e.C2}, {e.C1, e.P1}, {e.P1, e.C1}, {e.P1, e.W1}, {e.W1, e.P1},
		}
		for _, pair := range allowed {
			if _, err := e.send(e.request(pair[0].ID, pair[1].ID, "task.assign")); err != nil {
				t.Errorf("%s -> %s refused: %v", pair[0].DisplayName, pair[1].DisplayName, err)
			}
		}
		forbidden := []struct {
			from, to agent.Agent
			rule     string
			path     string
		}{
			{e.W1, e.W2, "worker->worker", "your PM " + e.P1.ID},
			{e.P1, e.P2, "pm->pm", "command agent " + e.C1.ID},
			{e.C1, e.W1, "command->worker", "PM " + e.P1.ID},
			{e.W1, e.C1, "worker->command", "your PM"},
			{e.P1, e.W3, "pm->worker", "PM " + e.P2.ID},
			{e.W3, e.P1, "worker->pm", "your PM " + e.P2.ID},
			{e.C2, e.P1, "command->pm", e.C1.ID},
		}
		for _, f := range forbidden {
			before := e.depth(f.to.ID)
			_, err := e.send(e.request(f.from.ID, f.to.ID, "task.assign"))
			wantCode(t, err, protocol.ClassPermission, "forbidden_route")
			msg := protocol.AsError(err).Message
			if !strings.Contains(msg, f.rule) || !strings.Contains(msg, f.path) {
				t.Errorf("%s: message %q should name the rule and the allowed path (%s)", f.rule, msg, f.path)
			}
			if e.depth(f.to.ID) != before {
				t.Errorf("%s: a forbidden message was stored", f.rule)
			}
		}
	})
}

func TestBroadcastFanOutRespectsRules(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		en := e.envelope(e.P1.ID, protocol.Broadcast, protocol.TypeNotification, map[string]any{"event": "standup"})
		en.To.Tier = protocol.TierWorker
		r := e.mustSend(en)
		if r.Deliveries != 2 {
			t.Fatalf("deliveries = %d, want 2 (only P1's workers)", r.Deliveries)
		}
		if e.depth(e.W1.ID) != 1 || e.depth(e.W2.ID) != 1 || e.depth(e.W3.ID) != 0 {
			t.Fatal("fan-out reached the wrong workers")
		}
		en = e.envelope(e.W1.ID, protocol.Broadcast, protocol.TypeNotification, map[string]any{"event": "x"})
		en.To.Tier = protocol.TierWorker
		_, err := e.send(en)
		wantCode(t, err, protocol.ClassUnavailable, "no_recipients")
	})
}

func TestDuplicateIDReturnsOriginal(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		en := e.request(e.C1.ID, e.C2.ID, "a")
		en.ID = "msg-dup-1"
		r1 := e.mustSend(en)
		en2 := e.request(e.C1.ID, e.C2.ID, "b")
		en2.ID = "msg-dup-1"
		r2 := e.mustSend(en2)
		if !r2.Duplicate || r2.ID != r1.ID || r2.TraceID != r1.TraceID || r2.Deliveries != 1 {
			t.Fatalf("r1 %+v r2 %+v", r1, r2)
		}
		if e.depth(e.C2.ID) != 1 {
			t.Fatal("duplicate stored twice")
		}
		// The same id from another sender is a different message.
		en3 := e.request(e.C2.ID, e.C1.ID, "c")
		en3.ID = "msg-dup-1"
		if r3 := e.mustSend(en3); r3.Duplicate {
			t.Fatal("same id from another sender treated as duplicate")
		}
	})
}

func TestSendRefusals(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		_, err := e.send(e.request(e.C1.ID, "agt_missing", "x"))
		wantCode(t, err, protocol.ClassUnavailable, "unknown_recipient")

		old := e.request(e.C1.ID, e.C2.ID, "x")
		old.Timestamp = e.clock.Now().Add(-2 * time.Hour)
		old.TTL = 60
		_, err = e.send(old)
		wantCode(t, err, protocol.ClassInvalid, "message_expired")

		tier := e.request(e.C1.ID, e.C2.ID, "x")
		tier.From.Tier = protocol.TierWorker
		_, err = e.send(tier)
		wantCode(t, err, protocol.ClassInvalid, "tier_mismatch")

		resp := e.envelope(e.C2.ID, e.C1.ID, protocol.TypeResponse, map[string]any{"requestId": "never-sent", "status": "success"})
		_, err = e.send(resp)
		wantCode(t, err, protocol.ClassInvalid, "unknown_request")

		sys := e.request("system:relay", e.C1.ID, "x")
		_, err = e.send(sys)
		wantCode(t, err, protocol.ClassPermission, "system_sender")

		if e.depth(e.C1.ID) != 0 || e.depth(e.C2.ID) != 0 {
			t.Fatal("refused sends stored deliveries")
		}
	})
}

// A response must answer a request that was delivered to the responder; a
// request that was sent but never delivered cannot be answered yet, and
// nobody else can answer it.
func TestRequestResponse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		req := e.request(e.C1.ID, e.C2.ID, "status.query")
		e.mustSend(req)
		resp := func(from string) *protocol.Envelope {
			return e.envelope(from, e.C1.ID, protocol.TypeResponse, map[string]any{"requestId": req.ID, "status": "success", "result": map[string]any{"ok": true}})
		}
		_, err := e.send(resp(e.C2.ID))
		wantCode(t, err, protocol.ClassInvalid, "unknown_request") // not delivered yet
		e.claim(e.C2.ID, 1)
		_, err = e.send(resp(e.P1.ID))
		wantCode(t, err, protocol.ClassInvalid, "unknown_request") // not delivered to P1
		e.mustSend(resp(e.C2.ID))
		ds := e.claim(e.C1.ID, 10)
		if len(ds) != 1 {
			t.Fatalf("requester got %d deliveries", len(ds))
		}
		p, _ := decode(t, ds[0]).Response()
		if p.RequestID != req.ID || p.Status != protocol.StatusSuccess {
			t.Fatalf("response %+v", p)
		}
	})
}

func TestDeadlineYieldsE004(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		deadline := e.clock.Now().Add(time.Minute)
		req := e.envelope(e.C1.ID, e.C2.ID, protocol.TypeRequest, map[string]any{"action": "slow", "deadline": deadline})
		e.mustSend(req)
		answered := e.envelope(e.C1.ID, e.C2.ID, protocol.TypeRequest, map[string]any{"action": "fast", "deadline": deadline})
		e.mustSend(answered)
		e.claim(e.C2.ID, 10)
		e.mustSend(e.envelope(e.C2.ID, e.C1.ID, protocol.TypeResponse, map[string]any{"requestId": answered.ID, "status": "success"}))
		for _, d := range e.claim(e.C1.ID, 10) { // the response
			if _, err := e.bus.Ack(e.ctx, e.C1.ID, d.DeliveryID, bus.SettleOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		e.sweep()
		if n := len(e.claim(e.C1.ID, 10)); n != 0 {
			t.Fatalf("E004 before the deadline: %d", n)
		}
		e.clock.Advance(2 * time.Minute)
		e.sweep()
		e.sweep() // idempotent: one error envelope only
		ds := e.claim(e.C1.ID, 10)
		if len(ds) != 1 {
			for _, d := range ds {
				t.Logf("%s", d.Envelope)
			}
			t.Fatalf("got %d deliveries, want one E004", len(ds))
		}
		en := decode(t, ds[0])
		p, _ := en.ErrorPayload()
		if en.Type != protocol.TypeError || p.Code != protocol.ClassTimeout || p.RequestID != req.ID || en.TraceID != req.TraceID || !p.Recoverable {
			t.Fatalf("E004 envelope %+v payload %+v", en, p)
		}
	})
}

// The newer attempt wins: after a lease expires and the delivery is
// redelivered, the first consumer's ack is refused.
func TestLeaseExpiryAndStaleAck(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{LeaseDuration: 30 * time.Second})
		e.mustSend(e.request(e.C1.ID, e.C2.ID, "x"))
		first := e.claim(e.C2.ID, 1)[0]
		if first.Attempt != 1 {
			t.Fatalf("attempt %d", first.Attempt)
		}
		if len(e.claim(e.C2.ID, 1)) != 0 {
			t.Fatal("leased delivery claimed twice")
		}
		e.clock.Advance(31 * time.Second)
		_, err := e.bus.Ack(e.ctx, e.C2.ID, first.DeliveryID, bus.SettleOptions{})
		wantCode(t, err, protocol.ClassInvalid, "lease_expired")
		e.sweep()
		second := e.claim(e.C2.ID, 1)[0]
		if second.DeliveryID != first.DeliveryID || second.Attempt != 2 {
			t.Fatalf("redelivery %+v", second)
		}
		_, err = e.bus.Ack(e.ctx, e.C2.ID, first.DeliveryID, bus.SettleOptions{Attempt: 1})
		wantCode(t, err, protocol.ClassInvalid, "stale_attempt")
		_, err = e.bus.Ack(e.ctx, e.C1.ID, second.DeliveryID, bus.SettleOptions{Attempt: 2})
		wantCode(t, err, protocol.ClassPermission, "not_your_delivery")
		s, err := e.bus.Ack(e.ctx, e.C2.ID, second.DeliveryID, bus.SettleOptions{Attempt: 2})
		if err != nil || s.State != "acked" || s.AlreadyApplied {
			t.Fatalf("ack %+v %v", s, err)
		}
		s, err = e.bus.Ack(e.ctx, e.C2.ID, second.DeliveryID, bus.SettleOptions{Attempt: 2})
		if err != nil || !s.AlreadyApplied {
			t.Fatalf("repeat ack %+v %v", s, err)
		}
		_, err = e.bus.Ack(e.ctx, e.C2.ID, "dlv_missing", bus.SettleOptions{})
		wantCode(t, err, protocol.ClassUnavailable, "delivery_not_found")
		// An attempt number no delivery can have is bad input, not a stale copy.
		_, err = e.bus.Ack(e.ctx, e.C2.ID, second.DeliveryID, bus.SettleOptions{Attempt: -1})
		wantCode(t, err, protocol.ClassInvalid, "invalid_attempt")
		_, err = e.bus.Nack(e.ctx, e.C2.ID, second.DeliveryID, bus.NackOptions{SettleOptions: bus.SettleOptions{Attempt: -2}})
		wantCode(t, err, protocol.ClassInvalid, "invalid_attempt")
		_, err = e.bus.Extend(e.ctx, e.C2.ID, second.DeliveryID, time.Minute, bus.SettleOptions{Attempt: -1})
		wantCode(t, err, protocol.ClassInvalid, "invalid_attempt")
		e.clock.Advance(time.Hour)
		e.sweep()
		if len(e.claim(e.C2.ID, 1)) != 0 || e.depth(e.C2.ID) != 0 {
			t.Fatal("acked delivery came back")
		}
	})
}

func TestExtendKeepsLease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{LeaseDuration: 30 * time.Second})
		e.mustSend(e.request(e.C1.ID, e.C2.ID, "x"))
		d := e.claim(e.C2.ID, 1)[0]
		e.clock.Advance(20 * time.Second)
		if _, err := e.bus.Extend(e.ctx, e.C2.ID, d.DeliveryID, time.Minute, bus.SettleOptions{Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(30 * time.Second)
		e.sweep()
		if _, err := e.bus.Ack(e.ctx, e.C2.ID, d.DeliveryID, bus.SettleOptions{}); err != nil {
			t.Fatalf("ack within extended lease: %v", err)
		}
		_, err := e.bus.Extend(e.ctx, e.C2.ID, d.DeliveryID, 2*bus.MaxExtend, bus.SettleOptions{})
		wantCode(t, err, protocol.ClassInvalid, "invalid_seconds")
	})
}

func TestNackDelayMaxAttemptsDeadLetterReplay(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{MaxAttempts: 3})
		e.mustSend(e.request(e.C1.ID, e.C2.ID, "flaky"))
		d := e.claim(e.C2.ID, 1)[0]
		if _, err := e.bus.Nack(e.ctx, e.C2.ID, d.DeliveryID, bus.NackOptions{Delay: time.Minute, Error: "busy"}); err != nil {
			t.Fatal(err)
		}
		if s, err := e.bus.Nack(e.ctx, e.C2.ID, d.DeliveryID, bus.NackOptions{SettleOptions: bus.SettleOptions{Attempt: 1}}); err != nil || !s.AlreadyApplied {
			t.Fatalf("repeat nack %+v %v", s, err)
		}
		if len(e.claim(e.C2.ID, 1)) != 0 {
			t.Fatal("claimed before the nack delay")
		}
		e.clock.Advance(61 * time.Second)
		for attempt := 2; attempt <= 3; attempt++ {
			d = e.claim(e.C2.ID, 1)[0]
			if d.Attempt != attempt {
				t.Fatalf("attempt %d, want %d", d.Attempt, attempt)
			}
			if _, err := e.bus.Nack(e.ctx, e.C2.ID, d.DeliveryID, bus.NackOptions{Error: fmt.Sprintf("fail %d", attempt)}); err != nil {
				t.Fatal(err)
			}
		}
		if len(e.claim(e.C2.ID, 1)) != 0 {
			t.Fatal("delivered after max attempts")
		}
		dl, err := e.bus.ListDeadLetters(e.ctx, bus.DeadLetterFilter{AgentID: e.C2.ID})
		if err != nil || len(dl) != 1 {
			t.Fatalf("dead letters %+v %v", dl, err)
		}
		if dl[0].Reason != "max_attempts" || dl[0].Attempts != 3 || dl[0].LastError != "fail 3" {
			t.Fatalf("dead letter %+v", dl[0])
		}
		var statuses []string
		for _, h := range dl[0].History {
			statuses = append(statuses, h.Status)
		}
		if want := "sent,delivered,failed,delivered,failed,delivered,failed,dead"; strings.Join(statuses, ",") != want {
			t.Fatalf("history %v", statuses)
		}
		if other, _ := e.bus.ListDeadLetters(e.ctx, bus.DeadLetterFilter{AgentID: e.C1.ID}); len(other) != 0 {
			t.Fatal("dead letter listed for the wrong agent")
		}
		_, err = e.bus.Replay(e.ctx, e.C1.ID, false, dl[0].DeliveryID)
		wantCode(t, err, protocol.ClassPermission, "not_your_delivery")
		r, err := e.bus.Replay(e.ctx, e.C2.ID, false, dl[0].DeliveryID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.bus.Replay(e.ctx, e.C2.ID, false, dl[0].DeliveryID)
		wantCode(t, err, protocol.ClassInvalid, "already_replayed")
		d = e.claim(e.C2.ID, 1)[0]
		if d.DeliveryID != r.DeliveryID || d.Attempt != 1 {
			t.Fatalf("replayed delivery %+v", d)
		}
	})
}

func TestTTLExpiryNeverDelivered(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		en := e.request(e.C1.ID, e.C2.ID, "x")
		en.TTL = 60
		e.mustSend(en)
		e.clock.Advance(61 * time.Second)
		if len(e.claim(e.C2.ID, 1)) != 0 {
			t.Fatal("expired message delivered")
		}
		e.sweep()
		dl, _ := e.bus.ListDeadLetters(e.ctx, bus.DeadLetterFilter{AgentID: e.C2.ID, Reason: "expired"})
		if len(dl) != 1 {
			t.Fatalf("dead letters %+v", dl)
		}
		rows, err := e.bus.Trace(e.ctx, en.TraceID, "", true)
		if err != nil {
			t.Fatal(err)
		}
		var st []string
		for _, r := range rows {
			st = append(st, r.Status)
		}
		if strings.Join(st, ",") != "sent,expired,dead" {
			t.Fatalf("trace %v", st)
		}
	})
}

func TestSessionSends(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		fail := e.request(e.C1.ID, e.C2.ID, "now")
		fail.To.Session = "live"
		fail.To.IfOffline = protocol.OfflineFail
		_, err := e.send(fail)
		wantCode(t, err, protocol.ClassUnavailable, "session_offline")
		if e.depth(e.C2.ID) != 0 {
			t.Fatal("fail-fast send was stored")
		}
		queued := e.request(e.C1.ID, e.C2.ID, "later")
		queued.To.Session = "live"
		e.mustSend(queued)
		if err := e.bus.Connected(e.ctx, e.C2.ID, "live", "conn-1"); err != nil {
			t.Fatal(err)
		}
		fail.ID = ""
		e.mustSend(fail)
		// A claim for another session does not see them; one for "live" does.
		if ds, _ := e.bus.Claim(e.ctx, e.C2.ID, bus.ClaimOptions{Session: "other"}); len(ds) != 0 {
			t.Fatalf("other session claimed %d", len(ds))
		}
		ds, _ := e.bus.Claim(e.ctx, e.C2.ID, bus.ClaimOptions{Session: "live", Limit: 10})
		if len(ds) != 2 || ds[0].SessionKey != "live" {
			t.Fatalf("session claim %+v", ds)
		}
		// A replaced connection's late disconnect does not mark the session offline.
		if err := e.bus.Connected(e.ctx, e.C2.ID, "live", "conn-2"); err != nil {
			t.Fatal(err)
		}
		if err := e.bus.Disconnected(e.ctx, e.C2.ID, "live", "conn-1"); err != nil {
			t.Fatal(err)
		}
		fail.ID = ""
		e.mustSend(fail)
		if err := e.bus.Disconnected(e.ctx, e.C2.ID, "live", "conn-2"); err != nil {
			t.Fatal(err)
		}
		fail.ID = ""
		_, err = e.send(fail)
		wantCode(t, err, protocol.ClassUnavailable, "session_offline")
	})
}

func TestPresenceLiveness(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		get := func(id string) bus.AgentPresence {
			t.Helper()
			m, err := e.bus.Presence(e.ctx, []string{id})
			if err != nil {
				t.Fatal(err)
			}
			return m[id]
		}
		if l := get(e.C1.ID).Liveness; l != bus.Offline {
			t.Fatalf("never seen: %s", l)
		}
		e.bus.Heartbeat(e.C1.ID, "", bus.KindPoll, "working")
		if l := get(e.C1.ID).Liveness; l != bus.Online {
			t.Fatalf("after heartbeat (unflushed): %s", l)
		}
		if err := e.bus.FlushPresence(e.ctx); err != nil {
			t.Fatal(err)
		}
		p := get(e.C1.ID)
		if p.Liveness != bus.Online || len(p.Sessions) != 1 || p.Sessions[0].Status != "working" {
			t.Fatalf("after flush: %+v", p)
		}
		e.clock.Advance(2 * time.Minute)
		if l := get(e.C1.ID).Liveness; l != bus.Stale {
			t.Fatalf("after 2 min: %s", l)
		}
		e.clock.Advance(20 * time.Minute)
		if l := get(e.C1.ID).Liveness; l != bus.Offline {
			t.Fatalf("after 22 min: %s", l)
		}
		e.bus.Connected(e.ctx, e.C2.ID, "", "c")
		if l := get(e.C2.ID).Liveness; l != bus.Online {
			t.Fatalf("socket connected: %s", l)
		}
		e.bus.Disconnected(e.ctx, e.C2.ID, "", "c")
		if l := get(e.C2.ID).Liveness; l != bus.Offline {
			t.Fatalf("socket disconnected: %s", l)
		}
	})
}

func TestTraceVisibility(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		en := e.request(e.C1.ID, e.C2.ID, "x")
		e.mustSend(en)
		d := e.claim(e.C2.ID, 1)[0]
		e.clock.Advance(250 * time.Millisecond)
		if _, err := e.bus.Ack(e.ctx, e.C2.ID, d.DeliveryID, bus.SettleOptions{}); err != nil {
			t.Fatal(err)
		}
		rows, err := e.bus.Trace(e.ctx, en.TraceID, e.C1.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		var st []string
		for _, r := range rows {
			st = append(st, r.Status)
			if r.MsgID != en.ID || r.From != e.C1.ID || r.To != e.C2.ID || r.Type != "request" {
				t.Fatalf("row %+v", r)
			}
		}
		if strings.Join(st, ",") != "sent,delivered,processed" || rows[2].LatencyMs != 250 {
			t.Fatalf("rows %+v", rows)
		}
		_, err = e.bus.Trace(e.ctx, en.TraceID, e.P1.ID, false)
		wantCode(t, err, protocol.ClassUnavailable, "trace_not_found")

		// Lookups by message id: envelope ids are unique per sender only, so
		// each agent finds the message it sent or received under that id.
		mine := e.request(e.C2.ID, e.C1.ID, "y")
		mine.ID, mine.TraceID = en.ID, "trace-of-c2"
		e.mustSend(mine)
		for _, c := range []struct {
			viewer string
			admin  bool
			want   string
		}{{e.C1.ID, false, en.TraceID}, {e.C2.ID, false, "trace-of-c2"}, {"", true, "trace-of-c2"}} {
			got, err := e.bus.TraceOfMessage(e.ctx, en.ID, c.viewer, c.admin)
			if err != nil || got != c.want {
				t.Errorf("TraceOfMessage as %q: %q %v, want %q", c.viewer, got, err, c.want)
			}
		}
		_, err = e.bus.TraceOfMessage(e.ctx, en.ID, e.P1.ID, false)
		wantCode(t, err, protocol.ClassUnavailable, "message_not_found")
	})
}

func TestSystemHooks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{MaxAttempts: 1})
		var got []string
		e.bus.RegisterSystem("system:test", bus.SystemHooks{
			OnMessage: func(ctx context.Context, tx *store.Tx, en *protocol.Envelope) error {
				got = append(got, "message:"+string(en.Type))
				return nil
			},
			OnDelivered: func(ctx context.Context, tx *store.Tx, d bus.Delivery) error {
				got = append(got, "delivered:"+d.AgentID)
				return nil
			},
			OnDead: func(ctx context.Context, tx *store.Tx, d bus.Delivery, reason string) error {
				got = append(got, "dead:"+reason)
				return nil
			},
		})
		// System sends bypass routing rules (command -> worker is forbidden for agents).
		req := &protocol.Envelope{From: protocol.Address{Agent: "system:test"}, To: protocol.Address{Agent: e.W1.ID, Session: "conversation:x"}, Type: protocol.TypeRequest,
			Payload: protocol.MustJSON(map[string]any{"action": "relay.turn", "params": map[string]any{"text": "hi"}})}
		if _, err := e.bus.SendSystem(e.ctx, req); err != nil {
			t.Fatal(err)
		}
		d := e.claim(e.W1.ID, 1)[0]
		if d.SessionKey != "conversation:x" {
			t.Fatalf("session %q", d.SessionKey)
		}
		e.mustSend(e.envelope(e.W1.ID, "system:test", protocol.TypeResponse, map[string]any{"requestId": req.ID, "status": "success", "result": map[string]any{"text": "hello"}}))
		_, err := e.send(e.envelope(e.W1.ID, "system:nobody", protocol.TypeNotification, map[string]any{"event": "x"}))
		wantCode(t, err, protocol.ClassUnavailable, "unknown_recipient")
		if _, err := e.bus.Nack(e.ctx, e.W1.ID, d.DeliveryID, bus.NackOptions{Error: "no"}); err != nil {
			t.Fatal(err)
		}
		if want := "delivered:" + e.W1.ID + ",message:response,dead:max_attempts"; strings.Join(got, ",") != want {
			t.Fatalf("hooks %v, want %s", got, want)
		}
	})
}

func TestThresholdsDegradeReadiness(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{Thresholds: bus.Thresholds{QueueDepth: 5}})
		if h, err := e.bus.Evaluate(e.ctx); err != nil || len(h.Reasons) != 0 || e.bus.ReadinessReason(e.ctx) != "" {
			t.Fatalf("healthy: %+v %v", h, err)
		}
		for i := 0; i < 5; i++ {
			e.mustSend(e.request(e.C1.ID, e.C2.ID, "x"))
		}
		h, err := e.bus.Evaluate(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		reason := e.bus.ReadinessReason(e.ctx)
		if h.MaxQueueDepth != 5 || h.DeepestAgent != e.C2.ID || !strings.Contains(reason, e.C2.ID) || !strings.Contains(reason, "threshold 5") {
			t.Fatalf("health %+v reason %q", h, reason)
		}
		// Overdue: a normal-priority delivery older than 30 minutes.
		e.clock.Advance(31 * time.Minute)
		h, _ = e.bus.Evaluate(e.ctx)
		if h.Overdue["normal"] != 5 {
			t.Fatalf("overdue %+v", h.Overdue)
		}
		en := e.request(e.C1.ID, e.C2.ID, "fresh")
		en.Priority = protocol.PriorityLow
		e.mustSend(en)
		ds, err := e.bus.Claim(e.ctx, e.C2.ID, bus.ClaimOptions{Overdue: true, Limit: 100})
		if err != nil || len(ds) != 5 {
			t.Fatalf("overdue claim %d %v", len(ds), err)
		}
	})
}

func TestReceiveWakesOnCommit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		got := make(chan []bus.Delivery, 1)
		go func() {
			ds, _ := e.bus.Receive(e.ctx, e.C2.ID, bus.ClaimOptions{}, 30*time.Second)
			got <- ds
		}()
		time.Sleep(50 * time.Millisecond)
		e.mustSend(e.request(e.C1.ID, e.C2.ID, "wake"))
		select {
		case ds := <-got:
			if len(ds) != 1 {
				t.Fatalf("got %d", len(ds))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("long poll was not woken by the commit")
		}
	})
}

// A system recipient that accepts requests gets them through OnMessage and
// answers later with SendSystemTx; the answer settles the request's
// deadline, so the sweep does not also send an E004. A system recipient
// that does not accept requests refuses them.
func TestSystemRecipientAcceptsRequests(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		var got []*protocol.Envelope
		e.bus.RegisterSystem("system:svc", bus.SystemHooks{AcceptRequests: true,
			OnMessage: func(ctx context.Context, tx *store.Tx, en *protocol.Envelope) error {
				got = append(got, en)
				return nil
			}})
		e.bus.RegisterSystem("system:quiet", bus.SystemHooks{OnMessage: func(context.Context, *store.Tx, *protocol.Envelope) error { return nil }})
		deadline := e.clock.Now().Add(time.Minute)
		answered := e.envelope(e.W1.ID, "system:svc", protocol.TypeRequest, map[string]any{"action": "do", "deadline": deadline})
		unanswered := e.envelope(e.W1.ID, "system:svc", protocol.TypeRequest, map[string]any{"action": "do", "deadline": deadline})
		e.mustSend(answered)
		e.mustSend(unanswered)
		if len(got) != 2 || got[0].ID != answered.ID || got[0].Type != protocol.TypeRequest {
			t.Fatalf("OnMessage got %+v", got)
		}
		_, err := e.send(e.request(e.W1.ID, "system:quiet", "do"))
		wantCode(t, err, protocol.ClassInvalid, "invalid_type")
		resp := &protocol.Envelope{From: protocol.Address{Agent: "system:svc"}, To: protocol.Address{Agent: e.W1.ID}, Type: protocol.TypeResponse,
			Payload: protocol.MustJSON(map[string]any{"requestId": answered.ID, "status": "success"})}
		if _, err := e.bus.SendSystem(e.ctx, resp); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(2 * time.Minute)
		e.sweep()
		var timeouts []string
		for _, d := range e.claim(e.W1.ID, 10) {
			en := decode(t, d)
			if en.Type == protocol.TypeError {
				p, _ := en.ErrorPayload()
				timeouts = append(timeouts, p.RequestID)
			}
		}
		if len(timeouts) != 1 || timeouts[0] != unanswered.ID {
			t.Fatalf("E004 for %v, want only the unanswered request %s", timeouts, unanswered.ID)
		}
	})
}
