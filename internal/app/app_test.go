package app_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
)

func newApp(t *testing.T, dir string, out io.Writer) (*app.App, error) {
	t.Helper()
	return app.New(context.Background(), app.Config{Addr: "127.0.0.1:0", DataDir: dir, Out: out})
}

// A second hub on the same data directory is refused with a clear message
// and leaves the first one (and its database) untouched.
func TestSecondServeOnSameDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	a, err := newApp(t, dir, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, err = newApp(t, dir, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "in use by another switchboard") || !strings.Contains(err.Error(), "--data") {
		t.Fatalf("second start: %v", err)
	}
	tok, _ := os.ReadFile(app.AdminTokenPath(dir))
	c := client.New(a.URL(), strings.TrimSpace(string(tok)))
	if _, err := c.CreateAgent(context.Background(), client.CreateAgentParams{DisplayName: "still works"}); err != nil {
		t.Fatalf("first hub broken after refused second start: %v", err)
	}
}

// The admin token is generated and printed on first start only, saved with
// owner-only permissions, and data survives a restart.
func TestFirstStartAdminTokenAndRestart(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	a, err := newApp(t, dir, &out)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	a.PrintBanner()
	tok := a.AdminToken
	if tok == "" || !strings.Contains(out.String(), tok) || !strings.Contains(out.String(), "listening on http://127.0.0.1:") {
		t.Fatalf("banner: %s", out.String())
	}
	st, err := os.Stat(app.AdminTokenPath(dir))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v %v", st, err)
	}
	created, err := client.New(a.URL(), tok).CreateAgent(context.Background(), client.CreateAgentParams{DisplayName: "Keep"})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()

	out.Reset()
	b, err := newApp(t, dir, &out)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.PrintBanner()
	if b.AdminToken != "" || strings.Contains(out.String(), tok) {
		t.Fatalf("admin token printed again on restart: %s", out.String())
	}
	got, err := client.New(b.URL(), tok).Agent(context.Background(), created.ID)
	if err != nil || got.DisplayName != "Keep" {
		t.Fatalf("agent after restart: %+v %v", got, err)
	}
	if _, err := client.New(b.URL(), created.Token).Agent(context.Background(), created.ID); err != nil {
		t.Fatalf("agent token after restart: %v", err)
	}
}
