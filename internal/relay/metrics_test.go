package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/app/apptest"
)

// turnCount is the sample count of switchboard_relay_turn_seconds.
func turnCount(t *testing.T, h *apptest.Hub) uint64 {
	t.Helper()
	mfs, err := h.App.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "switchboard_relay_turn_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("switchboard_relay_turn_seconds is not registered")
	return 0
}

// waitTurns waits until want turns were timed: the push is observed just
// after the frame is written, so the peer may read it a moment before.
func waitTurns(t *testing.T, h *apptest.Hub, want uint64, after string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := turnCount(t, h)
		if n == want {
			return
		}
		if n > want || time.Now().After(deadline) {
			t.Fatalf("%s: %d turns timed, want %d", after, n, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Every turn relayed over a socket is timed once, from the reply reaching
// the hub to the peer's delivery being pushed; a reply over HTTP to a peer
// on a socket is timed too; a last word that relays nothing is not.
func TestTurnHistogram(t *testing.T) {
	h := apptest.Start(t, "")
	ctx := context.Background()
	alice, bob := readyAgent(t, h, "Alice"), readyAgent(t, h, "Bob")
	aw, bw := dialClaworld(t, h, alice.ID, alice.Token), dialClaworld(t, h, bob.ID, bob.Token)
	startChat(t, alice, bob, "")
	k := aw.delivery("kickoff")
	if n := turnCount(t, h); n != 0 {
		t.Fatalf("%d turns timed before any reply", n)
	}
	aw.reply(k, "Hi Bob!")
	o := bw.delivery("reply")
	waitTurns(t, h, 1, "after the opener reached Bob")
	bw.reply(o, "Hi Alice, all good [[request_conversation_end]]")
	t2 := aw.delivery("reply")
	waitTurns(t, h, 2, "after Bob's turn reached Alice")
	if _, err := alice.C.ReplyToDelivery(ctx, t2.DeliveryID, "Bye [[request_conversation_end]]"); err != nil {
		t.Fatal(err)
	}
	last := bw.delivery("reply")
	waitTurns(t, h, 3, "after Alice's reply over HTTP reached Bob")
	bw.keepSilent(last) // nothing relayed
	if n := turnCount(t, h); n != 3 {
		t.Fatalf("after a kept silence: %d turns timed, want 3", n)
	}
}
