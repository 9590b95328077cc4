package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/clock"
)

const lease = 30 * time.Second

// socketHub is a hub on a fake clock (leases, nack delays and presence age
// only when the test says so) with a consumer socket and a sender.
type socketHub struct {
	h        *apptest.Hub
	clock    *clock.Fake
	ctx      context.Context
	consumer client.CreatedAgent
	sock     *client.Socket
	sender   *client.Client
	since    time.Time
}

func newSocketHub(t *testing.T, opts client.ConnectOptions) *socketHub {
	t.Helper()
	fake := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	h := apptest.Start(t, "", func(c *app.Config) {
		c.Clock = fake
		c.Bus.LeaseDuration = lease
		c.Bus.SweepInterval = time.Hour // the test sweeps itself
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	consumer, cc := h.NewAgent("Consumer")
	_, sc := h.NewAgent("Sender")
	sock, err := cc.Connect(ctx, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { sock.Close() })
	return &socketHub{h: h, clock: fake, ctx: ctx, consumer: consumer, sock: sock, sender: sc, since: fake.Now()}
}

// send has the sender notify the consumer and returns the message id.
func (s *socketHub) send(t *testing.T, text string) string {
	t.Helper()
	payload, _ := json.Marshal(map[string]string{"event": "note", "message": text})
	res, err := s.sender.Send(s.ctx, &client.Envelope{To: client.Address{Agent: s.consumer.ID}, Type: "notification", Payload: payload})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return res.ID
}

// advance moves the clock and runs one bus sweep, as the hub's sweeper would.
func (s *socketHub) advance(t *testing.T, d time.Duration) {
	t.Helper()
	s.clock.Advance(d)
	if err := s.h.App.Bus.Sweep(s.ctx, s.since); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	s.since = s.clock.Now()
}

func (s *socketHub) receive(t *testing.T, what string) client.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	d, err := s.sock.Receive(ctx)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return d
}

// nothing checks that no delivery reaches the socket for a moment.
func (s *socketHub) nothing(t *testing.T, what string) {
	t.Helper()
	select {
	case d := <-s.sock.Deliveries():
		t.Fatalf("%s: delivery %s attempt %d arrived", what, d.DeliveryID, d.Attempt)
	case <-time.After(300 * time.Millisecond):
	}
}

func text(t *testing.T, d client.Delivery) string {
	t.Helper()
	env, err := d.Decode()
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(env.Payload, &p)
	return p.Message
}

// Nack with a delay gives the delivery back: it stays away until the delay
// has passed, then the socket receives it again as attempt 2, and the ack of
// attempt 2 settles it.
func TestSocketNackRedeliversAfterDelay(t *testing.T) {
	s := newSocketHub(t, client.ConnectOptions{})
	s.send(t, "try me later")
	d := s.receive(t, "first delivery")
	if d.Attempt != 1 || text(t, d) != "try me later" {
		t.Fatalf("first delivery: attempt %d %q", d.Attempt, text(t, d))
	}
	st, err := s.sock.Nack(s.ctx, d, 20*time.Second, "busy right now")
	if err != nil {
		t.Fatalf("nack: %v", err)
	}
	if st.DeliveryID != d.DeliveryID || st.State != "queued" || st.Attempt != 1 {
		t.Fatalf("nack answer %+v", st)
	}
	s.advance(t, 10*time.Second)
	s.nothing(t, "halfway through the nack delay")

	s.advance(t, 11*time.Second)
	again := s.receive(t, "redelivery after the delay")
	if again.DeliveryID != d.DeliveryID || again.Attempt != 2 || text(t, again) != "try me later" {
		t.Fatalf("redelivery: %s attempt %d %q, want %s attempt 2", again.DeliveryID, again.Attempt, text(t, again), d.DeliveryID)
	}
	// The nack's reason is on the delivery's trace.
	tr, err := s.h.Admin.Trace(s.ctx, d.DeliveryID)
	if err == nil {
		found := false
		for _, r := range tr.Rows {
			found = found || (r.Status == "failed" && r.Detail == "busy right now")
		}
		if !found {
			t.Errorf("trace has no failed row with the nack reason: %+v", tr.Rows)
		}
	}
	if _, err := s.sock.Ack(s.ctx, d); err == nil {
		t.Fatal("ack of the stale attempt 1 accepted")
	}
	if st, err := s.sock.Ack(s.ctx, again); err != nil || st.State != "acked" {
		t.Fatalf("ack of attempt 2: %+v %v", st, err)
	}
}

// Extend lengthens the lease: at the old expiry the extended delivery is
// not taken back (its attempt-1 ack still settles it), while a delivery
// that was not extended is redelivered as attempt 2.
func TestSocketExtendKeepsTheLease(t *testing.T) {
	s := newSocketHub(t, client.ConnectOptions{})
	s.send(t, "long job")
	s.send(t, "short job")
	first := map[string]client.Delivery{}
	for range 2 {
		d := s.receive(t, "first deliveries")
		first[text(t, d)] = d
	}
	long, short := first["long job"], first["short job"]
	if long.Attempt != 1 || short.Attempt != 1 {
		t.Fatalf("attempts %d %d", long.Attempt, short.Attempt)
	}
	if want := s.clock.Now().Add(lease); !long.LeaseUntil.Equal(want) {
		t.Fatalf("pushed with lease until %s, want %s", long.LeaseUntil, want)
	}
	st, err := s.sock.Extend(s.ctx, long, 5*time.Minute)
	if err != nil {
		t.Fatalf("extend: %v", err)
	}
	if want := s.clock.Now().Add(5 * time.Minute); st.State != "leased" || st.Attempt != 1 || !st.LeaseUntil.Equal(want) {
		t.Fatalf("extend answer %+v, want leased until %s", st, want)
	}

	s.advance(t, lease+time.Second) // past the original lease
	again := s.receive(t, "the unextended delivery after its lease")
	if again.DeliveryID != short.DeliveryID || again.Attempt != 2 {
		t.Fatalf("redelivered %s attempt %d, want %s attempt 2", again.DeliveryID, again.Attempt, short.DeliveryID)
	}
	s.nothing(t, "the extended delivery at its old expiry")
	if st, err := s.sock.Ack(s.ctx, long); err != nil || st.State != "acked" || st.Attempt != 1 {
		t.Fatalf("ack of the extended delivery: %+v %v", st, err)
	}
	if st, err := s.sock.Ack(s.ctx, again); err != nil || st.State != "acked" {
		t.Fatalf("ack of the redelivery: %+v %v", st, err)
	}
}

type presence struct {
	Liveness string `json:"liveness"`
	Sessions []struct {
		Session   string    `json:"session"`
		Kind      string    `json:"kind"`
		Connected bool      `json:"connected"`
		Status    string    `json:"status"`
		LastSeen  time.Time `json:"lastSeen"`
		Liveness  string    `json:"liveness"`
	} `json:"sessions"`
}

// Heartbeat reports the socket's status and freshness: presence shows the
// session online with the status; once the heartbeats are old the agent is
// no longer online, and a new heartbeat makes it online again with its new
// status and time.
func TestSocketHeartbeatUpdatesPresence(t *testing.T) {
	s := newSocketHub(t, client.ConnectOptions{Session: "worker-1", Heartbeat: time.Hour})
	get := func() presence {
		t.Helper()
		var p presence
		if err := s.h.Admin.Do(s.ctx, "GET", "/v1/agents/"+s.consumer.ID+"/presence", nil, nil, &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Sessions) != 1 || p.Sessions[0].Session != "worker-1" || p.Sessions[0].Kind != "socket" || !p.Sessions[0].Connected {
			t.Fatalf("presence sessions %+v", p.Sessions)
		}
		return p
	}
	if err := s.sock.Heartbeat(s.ctx, "indexing"); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	p := get()
	if p.Liveness != "online" || p.Sessions[0].Status != "indexing" || !p.Sessions[0].LastSeen.Equal(s.clock.Now()) {
		t.Fatalf("after a heartbeat: %+v", p)
	}
	s.advance(t, 10*time.Minute) // far beyond three heartbeat intervals
	if p := get(); p.Liveness == "online" {
		t.Fatalf("still online with heartbeats ten minutes old: %+v", p)
	}
	if err := s.sock.Heartbeat(s.ctx, "idle"); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	p = get()
	if p.Liveness != "online" || p.Sessions[0].Status != "idle" || !p.Sessions[0].LastSeen.Equal(s.clock.Now()) {
		t.Fatalf("after the second heartbeat: %+v", p)
	}
}
