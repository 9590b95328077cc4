package bus_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// fakeConsumer is a socket with a prefetch window, as the gateway's
// connections present themselves to the bus.
type fakeConsumer struct {
	session  string
	lease    time.Duration
	mu       sync.Mutex
	room     int
	claiming bool
	reserved int
	pushed   []bus.Delivery
}

func (f *fakeConsumer) Session() string      { return f.session }
func (f *fakeConsumer) Lease() time.Duration { return f.lease }
func (f *fakeConsumer) Reserve() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claiming || f.room-f.reserved <= 0 {
		return false
	}
	f.reserved++
	return true
}
func (f *fakeConsumer) Release() {
	f.mu.Lock()
	f.reserved--
	f.mu.Unlock()
}
func (f *fakeConsumer) Push(d bus.Delivery) {
	f.mu.Lock()
	f.reserved--
	f.room--
	f.pushed = append(f.pushed, d)
	f.mu.Unlock()
}

func (f *fakeConsumer) got() []bus.Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bus.Delivery(nil), f.pushed...)
}

func (e *env) note(from, to, msg string, p protocol.Priority) *protocol.Envelope {
	en := e.envelope(from, to, protocol.TypeNotification, map[string]any{"event": "n", "message": msg})
	en.Priority = p
	return en
}

func messages(t *testing.T, ds []bus.Delivery) string {
	t.Helper()
	var out []string
	for _, d := range ds {
		n, _ := decode(t, d).Notification()
		out = append(out, n.Message)
	}
	return strings.Join(out, ",")
}

// A send to an agent whose socket on this node has room and nothing queued
// is leased inside the accept (attempt 1, the socket's lease, a delivered
// log row) and handed to the socket once committed; it is acked like a
// claimed one.
func TestPushOnAcceptLeasesAndLogs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		c := &fakeConsumer{room: 4, lease: 90 * time.Second}
		defer e.bus.AddConsumer(e.W1.ID, c)()
		res := e.mustSend(e.note(e.P1.ID, e.W1.ID, "hi", protocol.PriorityNormal))
		got := c.got()
		if len(got) != 1 {
			t.Fatalf("pushed %d deliveries, want 1", len(got))
		}
		d := got[0]
		if d.DeliveryID != res.DeliveryIDs[0] || d.Attempt != 1 || !d.LeaseUntil.Equal(e.clock.Now().Add(90*time.Second).Truncate(time.Millisecond)) {
			t.Fatalf("pushed %+v, want %s attempt 1 leased 90s", d, res.DeliveryIDs[0])
		}
		if env := decode(t, d); env.ID != res.ID || env.From.Agent != e.P1.ID {
			t.Fatalf("pushed envelope %+v", env)
		}
		info, hist, err := e.bus.Delivery(e.ctx, d.DeliveryID, "", true)
		if err != nil {
			t.Fatal(err)
		}
		if info.State != "leased" || info.Attempt != 1 || !info.LeaseUntil.Equal(d.LeaseUntil) {
			t.Fatalf("stored %+v", info)
		}
		var statuses []string
		for _, r := range hist {
			statuses = append(statuses, fmt.Sprintf("%s/%d", r.Status, r.Attempt))
		}
		if strings.Join(statuses, ",") != "sent/0,delivered/1" {
			t.Fatalf("log %v", statuses)
		}
		// Nothing is left to claim, and the ack of attempt 1 settles it.
		if ds := e.claim(e.W1.ID, 10); len(ds) != 0 {
			t.Fatalf("claimed %d after push", len(ds))
		}
		if s, err := e.bus.Ack(e.ctx, e.W1.ID, d.DeliveryID, bus.SettleOptions{Attempt: 1}); err != nil || s.State != "acked" {
			t.Fatalf("ack: %+v %v", s, err)
		}
		// A lease that runs out (the socket died before the push) is
		// redelivered as attempt 2.
		e.mustSend(e.note(e.P1.ID, e.W1.ID, "lost", protocol.PriorityNormal))
		if len(c.got()) != 2 {
			t.Fatalf("second send not pushed")
		}
		e.clock.Advance(91 * time.Second)
		e.sweep()
		ds := e.claim(e.W1.ID, 10)
		if len(ds) != 1 || ds[0].Attempt != 2 || messages(t, ds) != "lost" {
			t.Fatalf("redelivery %+v", ds)
		}
	})
}

// The socket's prefetch window bounds push on accept: beyond it deliveries
// queue for the socket's claim.
func TestPushOnAcceptRespectsPrefetch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		c := &fakeConsumer{room: 2}
		defer e.bus.AddConsumer(e.W1.ID, c)()
		for i := range 4 {
			e.mustSend(e.note(e.P1.ID, e.W1.ID, fmt.Sprint(i), protocol.PriorityNormal))
		}
		if got := messages(t, c.got()); got != "0,1" {
			t.Fatalf("pushed %q, want 0,1", got)
		}
		if got := messages(t, e.claim(e.W1.ID, 10)); got != "2,3" {
			t.Fatalf("queued %q, want 2,3", got)
		}
		// A consumer in the middle of a claim takes nothing on accept.
		c2 := &fakeConsumer{room: 5, claiming: true}
		defer e.bus.AddConsumer(e.W2.ID, c2)()
		e.mustSend(e.note(e.P1.ID, e.W2.ID, "x", protocol.PriorityNormal))
		if len(c2.got()) != 0 || c2.reserved != 0 {
			t.Fatalf("claiming consumer got %d (reserved %d)", len(c2.got()), c2.reserved)
		}
	})
}

// Push on accept never overtakes the inbox: while deliveries of the same
// or a higher priority are queued for the socket, a new one queues behind
// them; a more urgent one than everything queued goes at once, as a claim
// would take it first.
func TestPushOnAcceptKeepsOrder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		e.mustSend(e.note(e.P1.ID, e.W1.ID, "old-normal", protocol.PriorityNormal))
		e.clock.Advance(time.Millisecond)
		c := &fakeConsumer{room: 10}
		defer e.bus.AddConsumer(e.W1.ID, c)()
		e.mustSend(e.note(e.P1.ID, e.W1.ID, "new-normal", protocol.PriorityNormal))
		e.mustSend(e.note(e.P1.ID, e.W1.ID, "new-low", protocol.PriorityLow))
		if got := messages(t, c.got()); got != "" {
			t.Fatalf("pushed %q past a queued delivery", got)
		}
		e.mustSend(e.note(e.P1.ID, e.W1.ID, "new-high", protocol.PriorityHigh))
		if got := messages(t, c.got()); got != "new-high" {
			t.Fatalf("pushed %q, want new-high", got)
		}
		ds := e.claim(e.W1.ID, 10)
		if got := messages(t, ds); got != "old-normal,new-normal,new-low" {
			t.Fatalf("claimed %q", got)
		}
		// A delivery not yet available (nacked with a delay) does not hold
		// back a new one.
		if _, err := e.bus.Nack(e.ctx, e.W1.ID, ds[0].DeliveryID, bus.NackOptions{Delay: time.Minute}); err != nil {
			t.Fatal(err)
		}
		e.mustSend(e.note(e.P1.ID, e.W1.ID, "fresh", protocol.PriorityNormal))
		if got := messages(t, c.got()); got != "new-high,fresh" {
			t.Fatalf("pushed %q", got)
		}
	})
}

// A socket bound to a session takes deliveries for that session and for
// none; a delivery pinned to another session queues for that session's
// consumer. A system sender's message always queues.
func TestPushOnAcceptSessionsAndSystemSenders(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, bus.Config{})
		c := &fakeConsumer{room: 10, session: "s1"}
		defer e.bus.AddConsumer(e.W1.ID, c)()
		for _, s := range []string{"s2", "s1", ""} {
			en := e.note(e.P1.ID, e.W1.ID, "to-"+s, protocol.PriorityNormal)
			en.To.Session = s
			e.mustSend(en)
		}
		if got := messages(t, c.got()); got != "to-s1,to-" {
			t.Fatalf("pushed %q, want to-s1,to-", got)
		}
		ds, err := e.bus.Claim(e.ctx, e.W1.ID, bus.ClaimOptions{Session: "s2"})
		if err != nil || messages(t, ds) != "to-s2" {
			t.Fatalf("s2 claim %q %v", messages(t, ds), err)
		}
		sys := &protocol.Envelope{From: protocol.Address{Agent: "system:test"}, To: protocol.Address{Agent: e.W1.ID},
			Type: protocol.TypeNotification, Payload: protocol.MustJSON(map[string]any{"event": "n", "message": "sys"})}
		if _, err := e.bus.SendSystem(e.ctx, sys); err != nil {
			t.Fatal(err)
		}
		if got := messages(t, c.got()); got != "to-s1,to-" {
			t.Fatalf("system message pushed on accept: %q", got)
		}
		if got := messages(t, e.claim(e.W1.ID, 10)); got != "sys" {
			t.Fatalf("claimed %q, want sys", got)
		}
	})
}
