package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
)

// mustRun executes the CLI against a hub and returns what it printed,
// failing the test on an error.
func mustRun(t *testing.T, h *apptest.Hub, token string, args ...string) string {
	t.Helper()
	out, err := run(t, h, token, "", args...)
	if err != nil {
		t.Fatalf("switchboard %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func runJSON(t *testing.T, h *apptest.Hub, token string, v any, args ...string) {
	t.Helper()
	out := mustRun(t, h, token, append([]string{"--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("switchboard %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// The CLI mirrors the social API for owners and scripts: onboarding with an
// invite, profiles, a world, a request answered from the inbox, and the
// admin acting for an agent with --as.
func TestSocialCLI(t *testing.T) {
	h := apptest.Start(t, "")
	var inv client.Invite
	runJSON(t, h, apptest.AdminToken, &inv, "invites", "create", "--uses", "2", "--note", "cli")
	var alice, bob client.Activation
	runJSON(t, h, "", &alice, "onboard", "Alice", "--invite", inv.Code, "--human", "Mia", "--agent-profile", "Alice likes trails")
	runJSON(t, h, "", &bob, "onboard", "Bob", "--invite", inv.Code)
	if out := mustRun(t, h, bob.AppToken, "account"); !strings.Contains(out, "account_profile_incomplete") {
		t.Fatalf("account view: %s", out)
	}
	mustRun(t, h, bob.AppToken, "account", "profile", "--human", "Leo", "--agent", "Bob runs mountain trails")
	if out := mustRun(t, h, bob.AppToken, "account", "policy", "--contact", "manual_review"); !strings.Contains(out, "approval_required") {
		t.Fatalf("policy alias: %s", out)
	}
	if out := mustRun(t, h, bob.AppToken, "account", "share-card"); !strings.HasPrefix(out, "Bob#"+bob.AgentCode+"\n") {
		t.Fatalf("share card: %q", out)
	}
	var w client.World
	runJSON(t, h, alice.AppToken, &w, "worlds", "create", "Trail Club", "--context", "Share routes.", "--tag", "running", "--max-turns", "8")
	if w.Policy.MaxTurns != 8 || len(w.Tags) != 1 {
		t.Fatalf("world %+v", w)
	}
	mustRun(t, h, apptest.AdminToken, "worlds", "join", w.WorldID, "--as", bob.AgentID, "--profile", "I run mountain trails")
	if out := mustRun(t, h, alice.AppToken, "worlds", "candidates", w.WorldID); !strings.Contains(out, "Bob#"+bob.AgentCode) {
		t.Fatalf("candidates: %s", out)
	}
	if out := mustRun(t, h, alice.AppToken, "search", "trails", "--scope", "mixed"); !strings.Contains(out, "Trail Club") || !strings.Contains(out, "Bob#") {
		t.Fatalf("search: %s", out)
	}
	var req client.ChatRequest
	runJSON(t, h, alice.AppToken, &req, "chat", "request", "Bob#"+strings.ToLower(bob.AgentCode), "--message", "Ask about their favourite trail.", "--world", w.WorldID)
	if req.Status != "pending" {
		t.Fatalf("request %+v", req)
	}
	var in client.Inbox
	runJSON(t, h, bob.AppToken, &in, "chat", "inbox", "--direction", "inbound")
	if in.Counts.Filtered.PendingInbound != 1 || in.PendingRequests[0].ChatRequestID != req.ChatRequestID {
		t.Fatalf("inbox %+v", in.Counts)
	}
	if out := mustRun(t, h, bob.AppToken, "chat", "accept", req.ChatRequestID); !strings.Contains(out, "wait_for_sender_runtime_availability") {
		t.Fatalf("accept: %s", out)
	}
	if out := mustRun(t, h, alice.AppToken, "chat", "close", req.Conversation.SessionKey); !strings.Contains(out, "closed") {
		t.Fatalf("close: %s", out)
	}
	runJSON(t, h, apptest.AdminToken, &in, "chat", "inbox", "--as", alice.AgentID)
	if in.Counts.Global.Closed != 1 || in.Counts.Global.Chats != 1 {
		t.Fatalf("admin --as inbox %+v", in.Counts.Global)
	}
	if out := mustRun(t, h, alice.AppToken, "worlds", "close", w.WorldID); !strings.Contains(out, "closed") {
		t.Fatalf("close world: %s", out)
	}
}
