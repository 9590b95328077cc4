package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/telegram/tgfake"
)

// runOutErr executes the CLI with args against hub h and returns stdout and stderr.
func runOutErr(t *testing.T, h *apptest.Hub, token string, args ...string) (string, string, error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"--server", h.URL, "--token", token}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// The telegram commands drive a hosted bot end to end: add-bot prints the
// bot id alone (or the bot with --json), reply sends with controls, policy
// and list show the state, remove stops hosting.
func TestTelegramCommands(t *testing.T) {
	h := apptest.Start(t, "")
	fake := tgfake.New()
	t.Cleanup(fake.Close)
	tg := fake.AddBot("cli_bot")
	alice := tgfake.User{ID: 5001, FirstName: "Alice", LanguageCode: "en"}
	chat := tg.PrivateChat(alice)
	ag, _ := h.NewAgent("runtime")

	if _, _, err := runOutErr(t, h, apptest.AdminToken, "telegram", "add-bot", "--token-env", "SB_TEST_UNSET_TOKEN", "--agent", ag.ID); err == nil ||
		!strings.Contains(err.Error(), "SB_TEST_UNSET_TOKEN") {
		t.Fatalf("add-bot with an unset variable: %v", err)
	}
	t.Setenv("SB_TEST_BOT_TOKEN", tg.Token)
	out, errOut, err := runOutErr(t, h, apptest.AdminToken, "telegram", "add-bot", "--token-env", "SB_TEST_BOT_TOKEN",
		"--agent", ag.ID, "--api-url", fake.URL())
	if err != nil {
		t.Fatalf("add-bot: %v\n%s", err, errOut)
	}
	botID := strings.TrimSpace(out)
	if !strings.HasPrefix(botID, "bot_") || strings.Contains(botID, "\n") || !strings.Contains(errOut, "@cli_bot") {
		t.Fatalf("add-bot printed %q / %q", out, errOut)
	}
	if strings.Contains(out+errOut, strings.SplitN(tg.Token, ":", 2)[1]) {
		t.Fatal("add-bot printed the token")
	}

	out, _, err = runOutErr(t, h, apptest.AdminToken, "--json", "telegram", "reply", botID, "--chat", "5001", "Done. Anything else?")
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	var res struct {
		MessageIDs []int `json:"messageIds"`
		Controls   bool  `json:"controls"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.MessageIDs) != 1 || !res.Controls {
		t.Fatalf("reply --json: %q %v", out, err)
	}
	if m, ok := tg.Message(chat, res.MessageIDs[0]); !ok || len(m.Keyboard) != 2 || m.Text != "Done. Anything else?" {
		t.Fatalf("sent message %+v", m)
	}

	out, _, err = runOutErr(t, h, apptest.AdminToken, "telegram", "policy", botID, "--chat", "5001")
	if err != nil || !strings.Contains(out, "lastChoice        none") || !strings.Contains(out, botID+":5001") {
		t.Fatalf("policy: %q %v", out, err)
	}
	out, _, err = runOutErr(t, h, apptest.AdminToken, "--json", "telegram", "policy", "--key", botID+":5001")
	if err != nil || !strings.Contains(out, `"lastChoice": "none"`) {
		t.Fatalf("policy --key: %q %v", out, err)
	}
	if _, _, err := runOutErr(t, h, apptest.AdminToken, "telegram", "policy", botID); err == nil {
		t.Fatal("policy without --chat must fail")
	}

	out, _, err = runOutErr(t, h, apptest.AdminToken, "telegram", "list")
	if err != nil || !strings.Contains(out, botID) || !strings.Contains(out, "@cli_bot") || !strings.Contains(out, ag.ID) {
		t.Fatalf("list: %q %v", out, err)
	}
	out, _, err = runOutErr(t, h, apptest.AdminToken, "telegram", "remove", botID)
	if err != nil || !strings.Contains(out, "removed "+botID) {
		t.Fatalf("remove: %q %v", out, err)
	}
	out, _, err = runOutErr(t, h, apptest.AdminToken, "--json", "telegram", "list")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after remove: %q %v", out, err)
	}
}
