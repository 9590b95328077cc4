// Package apptest starts real hubs for end-to-end tests: the same program
// `switchboard serve` runs, on a free loopback port, over a fresh SQLite file
// or PostgreSQL schema, with clients for the admin and for new agents.
package apptest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// AdminToken is the fixed admin token of test hubs.
const AdminToken = "sba_test_admin_token"

// Hub is a running test hub.
type Hub struct {
	App   *app.App
	URL   string
	Admin *client.Client
	t     testing.TB
	cfg   app.Config
}

// Options adjust a test hub's configuration before it starts.
type Options func(*app.Config)

// Each runs fn once per store backend against a fresh hub.
func Each(t *testing.T, fn func(t *testing.T, h *Hub), opts ...Options) {
	t.Helper()
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		fn(t, Start(t, dsn, opts...))
	})
}

// Start starts a hub on dsn (a SQLite path or PostgreSQL URL; "" for a
// temporary SQLite file) and stops it when t ends.
func Start(t testing.TB, dsn string, opts ...Options) *Hub {
	t.Helper()
	dir := t.TempDir()
	cfg := app.Config{
		Addr:       "127.0.0.1:0",
		DataDir:    dir,
		AdminToken: AdminToken,
		Onboarding: "open",
		Logger:     testLogger(),
		Out:        io.Discard,
	}
	cfg.DB = dsn
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatalf("start hub: %v", err)
	}
	if err := a.Start(); err != nil {
		a.Close()
		t.Fatalf("start hub: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	h := &Hub{App: a, URL: a.URL(), Admin: client.New(a.URL(), AdminToken), t: t, cfg: cfg}
	if err := h.Admin.WaitHealthy(ctx); err != nil {
		t.Fatalf("hub not healthy: %v", err)
	}
	return h
}

// Restart stops the hub gracefully and starts the program again on the
// same store, data directory and address, as an operator restarting
// `switchboard serve` would. Clients keep working (sockets reconnect).
func (h *Hub) Restart() {
	h.t.Helper()
	if err := h.App.Close(); err != nil {
		h.t.Fatalf("stop hub: %v", err)
	}
	cfg := h.cfg
	cfg.Addr = strings.TrimPrefix(h.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg)
	if err != nil {
		h.t.Fatalf("restart hub: %v", err)
	}
	// The old listener's port is free at once on Linux and macOS; allow a
	// moment where it is not.
	for attempt := 0; ; attempt++ {
		if err = a.Start(); err == nil || attempt == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		a.Close()
		h.t.Fatalf("restart hub: %v", err)
	}
	h.t.Cleanup(func() { a.Close() })
	h.App = a
	if err := h.Admin.WaitHealthy(ctx); err != nil {
		h.t.Fatalf("hub not healthy after restart: %v", err)
	}
}

// Client returns a client for token.
func (h *Hub) Client(token string) *client.Client { return client.New(h.URL, token) }

// NewAgent creates an agent and returns it with a client holding its token.
func (h *Hub) NewAgent(name string, p ...client.CreateAgentParams) (client.CreatedAgent, *client.Client) {
	h.t.Helper()
	var params client.CreateAgentParams
	if len(p) > 0 {
		params = p[0]
	}
	params.DisplayName = name
	a, err := h.Admin.CreateAgent(context.Background(), params)
	if err != nil {
		h.t.Fatalf("create agent %s: %v", name, err)
	}
	return a, h.Client(a.Token)
}

func testLogger() *slog.Logger {
	if os.Getenv("SWITCHBOARD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
