package relay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/relay"
)

// Documents and ChatReports show each side what it was sent and filed; the
// admin sees both sides; a third agent sees nothing (404, not 403).
func TestDocumentsAndChatReports(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := context.Background()
		alice, bob, carol := readyAgent(t, h, "Alice"), readyAgent(t, h, "Bob"), readyAgent(t, h, "Carol")
		aw := dialClaworld(t, h, alice.ID, alice.Token)
		bw := dialClaworld(t, h, bob.ID, bob.Token)
		req := startChat(t, alice, bob, "")
		k := aw.delivery("kickoff")
		aw.reply(k, "Hi Bob, how was your weekend?")
		o := bw.delivery("reply")
		if _, err := bob.C.FileReport(ctx, client.ReportInput{Source: req.ChatRequestID, ReportText: "Alice asked about my weekend."}); err != nil {
			t.Fatal(err)
		}
		r := h.App.Relay

		mine, err := r.Documents(ctx, alice.ID, false, req.ChatRequestID)
		if err != nil {
			t.Fatal(err)
		}
		if len(mine) != 1 || mine[0].Kind != relay.KindKickoff || mine[0].DeliveryID != k.DeliveryID || mine[0].AgentID != alice.ID ||
			mine[0].Status != relay.StatusReplied || mine[0].ContextText != k.Payload.ContextText || mine[0].CommandText == "" || mine[0].Text == "" {
			t.Fatalf("alice's documents %+v", mine)
		}
		if !strings.Contains(mine[0].ContextText, "Say hello and ask about their weekend") {
			t.Fatal("the sender's kickoff document should carry its brief")
		}
		theirs, err := r.Documents(ctx, bob.ID, false, req.ChatRequestID)
		if err != nil {
			t.Fatal(err)
		}
		if len(theirs) != 1 || theirs[0].DeliveryID != o.DeliveryID || theirs[0].Kind != relay.KindOpener || theirs[0].Status != relay.StatusPending ||
			theirs[0].ContextText != o.Payload.ContextText || strings.Contains(theirs[0].ContextText, "Say hello and ask") {
			t.Fatalf("bob's documents %+v", theirs)
		}
		both, err := r.Documents(ctx, "", true, req.ChatRequestID)
		if err != nil || len(both) != 2 || both[0].DeliveryID != k.DeliveryID || both[1].DeliveryID != o.DeliveryID {
			t.Fatalf("admin documents %+v %v", both, err)
		}

		reps, err := r.ChatReports(ctx, bob.ID, false, req.ChatRequestID)
		if err != nil || len(reps) != 1 || reps[0].AgentID != bob.ID || reps[0].ReportText != "Alice asked about my weekend." || reps[0].Directive != "announce" {
			t.Fatalf("bob's reports %+v %v", reps, err)
		}
		if reps, err := r.ChatReports(ctx, alice.ID, false, req.ChatRequestID); err != nil || len(reps) != 0 {
			t.Fatalf("alice sees bob's report: %+v %v", reps, err)
		}
		if reps, err := r.ChatReports(ctx, "", true, req.ChatRequestID); err != nil || len(reps) != 1 {
			t.Fatalf("admin reports %+v %v", reps, err)
		}

		for _, call := range []func() error{
			func() error { _, err := r.Documents(ctx, carol.ID, false, req.ChatRequestID); return err },
			func() error { _, err := r.ChatReports(ctx, carol.ID, false, req.ChatRequestID); return err },
			func() error { _, err := r.Documents(ctx, "", true, "req_missing"); return err },
		} {
			if err := call(); protocol.CodeOf(err) != "conversation_not_found" || protocol.AsError(err).HTTPStatus() != 404 {
				t.Fatalf("want 404 conversation_not_found, got %v", err)
			}
		}
	})
}
