package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// pushedOnAccept reads the hub's switchboard_bus_pushed_on_accept_total.
func pushedOnAccept(t *testing.T, h *apptest.Hub) float64 {
	t.Helper()
	mfs, err := h.App.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "switchboard_bus_pushed_on_accept_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no switchboard_bus_pushed_on_accept_total metric")
	return 0
}

func receive(t *testing.T, s *client.Socket) client.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := s.Receive(ctx)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return d
}

func eventOf(t *testing.T, d client.Delivery) string {
	t.Helper()
	env, err := d.Decode()
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Event string `json:"event"`
	}
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.Event
}

// pushUntilOnAccept sends notifications to the socket's agent one at a
// time, receiving and acking each, until one is pushed on accept (a send
// that lands while the socket claims its inbox is queued and claimed
// instead, so the first ones may take that path). It returns that one.
func pushUntilOnAccept(t *testing.T, h *apptest.Hub, send func(ev string), s *client.Socket) client.Delivery {
	t.Helper()
	for i := range 20 {
		before := pushedOnAccept(t, h)
		ev := fmt.Sprintf("w%d", i)
		send(ev)
		d := receive(t, s)
		if got := eventOf(t, d); got != ev || d.Attempt != 1 {
			t.Fatalf("received %s attempt %d, want %s attempt 1", got, d.Attempt, ev)
		}
		if _, err := s.Ack(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		if pushedOnAccept(t, h) > before {
			return d
		}
	}
	t.Fatal("no send was pushed on accept")
	return client.Delivery{}
}

// A send to an agent whose socket has room is leased in the accept's
// transaction and pushed after its commit: attempt 1, in the message log.
// Beyond the socket's prefetch deliveries queue, and they come before any
// newer one once slots free up.
func TestPushOnAcceptOverSocket(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxT(t)
		_, ac := h.NewAgent("Alice")
		b, bc := h.NewAgent("Bob")
		bs := connect(t, bc, client.ConnectOptions{Prefetch: 2})
		send := func(ev string) {
			t.Helper()
			if _, err := ac.Send(ctx, client.NewNotification(b.ID, ev, "")); err != nil {
				t.Fatalf("send %s: %v", ev, err)
			}
		}
		// The pushed delivery's story is the claimed one's.
		d := pushUntilOnAccept(t, h, send, bs)
		_, hist, err := h.App.Bus.Delivery(ctx, d.DeliveryID, "", true)
		if err != nil {
			t.Fatal(err)
		}
		var statuses []string
		for _, r := range hist {
			statuses = append(statuses, fmt.Sprintf("%s/%d", r.Status, r.Attempt))
		}
		if strings.Join(statuses, ",") != "sent/0,delivered/1,processed/1" {
			t.Fatalf("log of a delivery pushed on accept: %v", statuses)
		}

		before := pushedOnAccept(t, h)
		for _, ev := range []string{"m0", "m1", "m2", "m3"} {
			send(ev)
		}
		d0, d1 := receive(t, bs), receive(t, bs)
		// The window is full: nothing more comes until an ack.
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if d, err := bs.Receive(wctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a third delivery came with prefetch 2: %s %v", eventOf(t, d), err)
		}
		cancel()
		if _, err := bs.Ack(ctx, d0); err != nil {
			t.Fatal(err)
		}
		d2 := receive(t, bs)
		send("m4") // m3 is still queued: m4 comes after it
		for _, d := range []client.Delivery{d1, d2} {
			if _, err := bs.Ack(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, d := range []client.Delivery{d0, d1, d2, receive(t, bs), receive(t, bs)} {
			got = append(got, eventOf(t, d))
		}
		if strings.Join(got, ",") != "m0,m1,m2,m3,m4" {
			t.Fatalf("order %v", got)
		}
		if n := pushedOnAccept(t, h) - before; n > 2 {
			t.Fatalf("%v deliveries pushed on accept with a window of 2", n)
		}
	})
}

// With several nodes, a socket on another node still gets what a node
// accepts for it (through the store's notification and that node's
// claim), and a node pushes on accept only to its own sockets of the
// addressed session.
func TestPushOnAcceptAcrossNodes(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		if !strings.HasPrefix(dsn, "postgres") {
			t.Skip("several nodes need PostgreSQL")
		}
		nodeA := apptest.Start(t, dsn)
		nodeB := apptest.Start(t, dsn)
		ctx := ctxT(t)
		_, sc := nodeA.NewAgent("Sender")
		r, _ := nodeA.NewAgent("Receiver")
		onA := connect(t, nodeA.Client(r.Token), client.ConnectOptions{Session: "s1"})
		onB := connect(t, nodeB.Client(r.Token), client.ConnectOptions{Session: "s2"})
		send := func(node *apptest.Hub, session, ev string) {
			t.Helper()
			n := client.NewNotification(r.ID, ev, "")
			n.To.Session = session
			if _, err := node.Client(sc.Token).Send(ctx, n); err != nil {
				t.Fatalf("send %s: %v", ev, err)
			}
		}
		beforeA, beforeB := pushedOnAccept(t, nodeA), pushedOnAccept(t, nodeB)
		send(nodeA, "s2", "a-to-s2") // accepted on A, for the socket on B
		if d := receive(t, onB); eventOf(t, d) != "a-to-s2" || d.Attempt != 1 {
			t.Fatalf("node B got %s attempt %d", eventOf(t, d), d.Attempt)
		}
		send(nodeB, "s1", "b-to-s1") // accepted on B, for the socket on A
		if d := receive(t, onA); eventOf(t, d) != "b-to-s1" {
			t.Fatalf("node A got %s", eventOf(t, d))
		}
		if pushedOnAccept(t, nodeA) != beforeA || pushedOnAccept(t, nodeB) != beforeB {
			t.Fatal("a node pushed on accept to a socket of another node's session")
		}
		// Accepted where its socket is, it is pushed on accept.
		pushUntilOnAccept(t, nodeA, func(ev string) { send(nodeA, "s1", ev) }, onA)
	})
}
