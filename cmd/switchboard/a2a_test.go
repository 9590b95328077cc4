package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/app/apptest"
)

func TestA2ACLI(t *testing.T) {
	h := apptest.Start(t, "")
	ag, cl := h.NewAgent("Booker")
	tok := cl.Token
	out := mustRun(t, h, tok, "a2a", "enable", "--description", "Books tables", "--skill", "book:Book:Books a table")
	if !strings.Contains(out, "/a2a/agents/"+ag.ID+"/.well-known/agent-card.json") || !strings.Contains(out, "skill book: Book") {
		t.Fatalf("enable:\n%s", out)
	}
	var caller struct{ CallerID, Token string }
	runJSON(t, h, tok, &caller, "a2a", "issue", "partner")
	if !strings.HasPrefix(caller.Token, "sbc_") {
		t.Fatalf("issue: %+v", caller)
	}
	if out := mustRun(t, h, tok, "a2a", "callers"); !strings.Contains(out, caller.CallerID) || !strings.Contains(out, "active") {
		t.Fatalf("callers:\n%s", out)
	}
	mustRun(t, h, tok, "a2a", "revoke", caller.CallerID)
	if out := mustRun(t, h, tok, "a2a", "callers"); !strings.Contains(out, "revoked") {
		t.Fatalf("after revoke:\n%s", out)
	}
	// The admin acts for a named agent.
	if out := mustRun(t, h, apptest.AdminToken, "a2a", "disable", "--agent", ag.ID); !strings.Contains(out, "disabled") {
		t.Fatalf("disable:\n%s", out)
	}
	if _, err := run(t, h, apptest.AdminToken, "", "a2a", "show"); err == nil {
		t.Fatal("admin without --agent accepted")
	}
	if _, err := run(t, h, tok, "", "a2a", "enable", "--skill", "bad"); err == nil {
		t.Fatal("malformed --skill accepted")
	}
}

// switchboard mcp speaks MCP on stdio: initialize, list the tools, call one.
func TestMCPStdio(t *testing.T) {
	h := apptest.Start(t, "")
	_, cl := h.NewAgent("Tooly")
	t.Setenv("TEST_AGENT_TOKEN", cl.Token)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"account","arguments":{"action":"view"}}}`,
	}, "\n") + "\n"
	out := runStdio(t, h, in, 3, "mcp", "--token-env", "TEST_AGENT_TOKEN")
	replies := map[float64]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			if id, ok := m["id"].(float64); ok {
				replies[id] = m
			}
		}
	}
	tools, _ := replies[2]["result"].(map[string]any)["tools"].([]any)
	if len(tools) != 9 {
		t.Fatalf("tools/list: %d tools\n%s", len(tools), out)
	}
	res, _ := replies[3]["result"].(map[string]any)
	if res == nil || res["isError"] == true || !strings.Contains(mustJSONString(res), `\"status\":\"ok\"`) {
		t.Fatalf("tools/call: %v", replies[3])
	}
	os.Unsetenv("TEST_AGENT_TOKEN")
	if _, err := run(t, h, "", "", "mcp", "--token-env", "NO_SUCH_VAR_FOR_TEST"); err == nil || !strings.Contains(err.Error(), "NO_SUCH_VAR_FOR_TEST") {
		t.Fatalf("missing token: %v", err)
	}
}

// runStdio runs a command whose stdin stays open (as an MCP host keeps it)
// until the reply with id lastID was written, then closes it.
func runStdio(t *testing.T, h *apptest.Hub, in string, lastID int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	out := &lockedBuffer{}
	root := newRoot()
	root.SetOut(out)
	root.SetErr(io.Discard)
	root.SetIn(pr)
	root.SetArgs(append([]string{"--server", h.URL}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	_, _ = io.WriteString(pw, in)
	want := fmt.Sprintf(`"id":%d`, lastID)
	for !strings.Contains(out.String(), want) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	pw.Close()
	<-done
	return out.String()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func mustJSONString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
