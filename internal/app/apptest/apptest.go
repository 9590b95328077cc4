// Package apptest starts real hubs for end-to-end tests: the same program
// `switchboard serve` runs, on a free loopback port, over a fresh SQLite file
// or PostgreSQL schema, with clients for the admin and for new agents.
package apptest

import (
	"context"
	"fmt"
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
		// Tests drive agents far faster than any real one; rate limits
		// have their own test.
		NoRateLimits: true,
		Logger:       testLogger(),
		Out:          io.Discard,
	}
	cfg.DB = dsn
	for _, o := range opts {
		o(&cfg)
	}
	h := &Hub{t: t, cfg: cfg}
	h.start()
	t.Cleanup(func() { h.App.Close() })
	return h
}

func (h *Hub) start() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := app.New(ctx, h.cfg)
	if err != nil {
		h.t.Fatalf("start hub: %v", err)
	}
	// On a restart the old listener's port is free at once on Linux and
	// macOS; allow a moment where it is not.
	for attempt := 0; ; attempt++ {
		if err = a.Start(); err == nil || attempt == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		a.Close()
		h.t.Fatalf("start hub: %v", err)
	}
	h.App, h.URL = a, a.URL()
	h.Admin = client.New(h.URL, AdminToken)
	if err := h.Admin.WaitHealthy(ctx); err != nil {
		h.t.Fatalf("hub not healthy: %v", err)
	}
}

// Restart stops the hub gracefully and starts it again on the same data
// directory, store and address, as an operator restarting the process
// would. Clients keep working: the URL does not change.
func (h *Hub) Restart() {
	h.t.Helper()
	addr := h.App.URL()[len("http://"):]
	h.App.Close()
	h.cfg.Addr = addr
	h.start()
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

// BusSnapshot renders the bus state a refused request must not change:
// every delivery with its agent, state, attempt, lease, availability,
// replay link and last error, and the number of messages and log rows.
// Tests compare snapshots taken before and after a bad request.
func (h *Hub) BusSnapshot() string {
	h.t.Helper()
	ctx := context.Background()
	var b strings.Builder
	rows, err := h.App.DB.Query(ctx, `SELECT id, agent_id, state, attempt, lease_until, available_at, replayed_as, last_error FROM bus_deliveries ORDER BY id`)
	if err != nil {
		h.t.Fatalf("bus snapshot: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, agentID, state, replayed, lastErr string
		var attempt int
		var lease, avail int64
		if err := rows.Scan(&id, &agentID, &state, &attempt, &lease, &avail, &replayed, &lastErr); err != nil {
			h.t.Fatalf("bus snapshot: %v", err)
		}
		fmt.Fprintf(&b, "%s %s %s %d %d %d %s %q\n", id, agentID, state, attempt, lease, avail, replayed, lastErr)
	}
	if err := rows.Err(); err != nil {
		h.t.Fatalf("bus snapshot: %v", err)
	}
	for _, table := range []string{"bus_messages", "bus_log"} {
		var n int
		if err := h.App.DB.QueryRow(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
			h.t.Fatalf("bus snapshot: %v", err)
		}
		fmt.Fprintf(&b, "%s=%d\n", table, n)
	}
	return b.String()
}
