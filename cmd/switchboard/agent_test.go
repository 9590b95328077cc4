package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-hub/switchboard/internal/runner"
)

// runCLI runs the root command with args and returns its error and stderr.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	g = globals{}
	t.Setenv("SWITCHBOARD_TOKEN", "")
	t.Setenv("SWITCHBOARD_SERVER", "")
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return errOut.String(), err
}

func TestAgentRunFlagErrors(t *testing.T) {
	dir := t.TempDir()
	badScript := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(badScript, []byte("kickof: typo\n"), 0o644)
	t.Setenv("SB_TEST_EMPTY_KEY", "")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"agent", "run", "--token", "t"}, "exactly one driver"},
		{[]string{"agent", "run", "--token", "t", "--exec", "cat", "--script", "x.yaml"}, "exactly one driver"},
		{[]string{"agent", "run", "--exec", "cat"}, "agent's own token"},
		{[]string{"agent", "run", "--token", "t", "--openai-base-url", "http://x/v1"}, "model is required"},
		{[]string{"agent", "run", "--token", "t", "--openai-base-url", "http://x/v1", "--model", "m", "--api-key-env", "SB_TEST_EMPTY_KEY"}, "SB_TEST_EMPTY_KEY"},
		{[]string{"agent", "run", "--token", "t", "--script", badScript}, "bad.yaml"},
		{[]string{"agent", "run", "--token", "t", "--script", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
	}
	for _, tc := range tests {
		_, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestAgentRunStopsOnAuthRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		_, _, _ = ws.Read(r.Context())
		_ = ws.Write(r.Context(), websocket.MessageText, []byte(`{"event":"error","data":{"code":"unauthorized","reason":"unknown token"}}`))
		ws.Close(4003, "unauthorized")
	}))
	defer srv.Close()
	script := filepath.Join(t.TempDir(), "s.yaml")
	_ = os.WriteFile(script, []byte("replies: [hi]\n"), 0o644)
	logs, err := runCLI(t, "agent", "run", "--server", srv.URL, "--token", "tok", "--script", script)
	if !errors.Is(err, runner.ErrUnauthorized) {
		t.Fatalf("got %v, want ErrUnauthorized", err)
	}
	if !strings.Contains(logs, "agent runner starting") {
		t.Errorf("no readable log lines on stderr:\n%s", logs)
	}
}
