package busbench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" driver, to create and drop the bench schema

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Switchboard is the system under test: the real hub (internal/app, the
// program `switchboard serve` runs) started in this process on a loopback
// port, over a fresh SQLite file or a fresh PostgreSQL schema. Each agent
// connects one WebSocket with the Go SDK (native dialect switchboard.v1),
// sends with `send` frames (the hub answers `ok` after the commit), receives
// pushed `delivery` frames and acks with `ack` frames (answered `ok` after
// the commit).
type Switchboard struct {
	// Postgres is a PostgreSQL URL; empty runs on SQLite.
	Postgres string
	// Prefetch is the socket's prefetch (unacked deliveries pushed at once).
	Prefetch int
	// Size is the target size of the whole envelope as stored and pushed.
	Size int
	// Logger receives the hub's warnings (nil: stderr, warnings only).
	Logger *slog.Logger

	dir    string
	schema string
	hub    *app.App
	ids    []string
	socks  []*client.Socket
	pad    int
	before store.Stats
	// acceptedBefore and pushedBefore are the hub's counters at the start.
	acceptedBefore, pushedBefore float64
	cancel                       context.CancelFunc
	wg                           sync.WaitGroup
	pending                      sync.WaitGroup
}

// benchAdminToken is the fixed admin token of bench hubs.
const benchAdminToken = "sba_bench_admin_token"

// Name implements System.
func (*Switchboard) Name() string { return "switchboard" }

// Store implements System.
func (s *Switchboard) Store() string {
	if s.Postgres != "" {
		return "postgres"
	}
	return "sqlite"
}

// Start implements System.
func (s *Switchboard) Start(ctx context.Context, n int, h Handler) error {
	var err error
	if s.dir, err = tempDir("switchboard"); err != nil {
		return err
	}
	dsn := ""
	if s.Postgres != "" {
		if dsn, err = s.createSchema(ctx); err != nil {
			return err
		}
	}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	s.hub, err = app.New(ctx, app.Config{
		Addr: "127.0.0.1:0", DataDir: s.dir, DB: dsn, AdminToken: benchAdminToken, Onboarding: "open",
		Logger: log, Out: io.Discard,
	})
	if err != nil {
		return err
	}
	if err := s.hub.Start(); err != nil {
		return err
	}
	url := s.hub.URL()
	admin := client.New(url, benchAdminToken)
	if err := admin.WaitHealthy(ctx); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		a, err := admin.CreateAgent(ctx, client.CreateAgentParams{DisplayName: fmt.Sprintf("bench-%d", i)})
		if err != nil {
			return fmt.Errorf("create agent: %w", err)
		}
		s.ids = append(s.ids, a.ID)
		prefetch := s.Prefetch
		if h.Delivered == nil {
			prefetch = 1 // sending only: keep the pushes out of the measurement
		}
		sock, err := client.New(url, a.Token).Connect(ctx, client.ConnectOptions{Prefetch: prefetch, Buffer: 2 * prefetch})
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		s.socks = append(s.socks, sock)
	}
	s.pad = s.payloadSize()
	s.before = s.hub.DB.Stats()
	s.acceptedBefore, s.pushedBefore = s.counter("switchboard_bus_accepted_total"), s.counter("switchboard_bus_pushed_on_accept_total")
	cctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for i := 0; i < len(s.socks) && h.Delivered != nil; i++ {
		s.wg.Add(1)
		go s.consume(cctx, s.socks[i], h)
	}
	return nil
}

func (s *Switchboard) consume(ctx context.Context, sock *client.Socket, h Handler) {
	defer s.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-sock.Deliveries():
			h.Delivered(d.Envelope)
			s.pending.Add(1)
			go func() {
				defer s.pending.Done()
				actx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if _, err := sock.Ack(actx, d); err != nil {
					if ctx.Err() == nil {
						h.Failed(fmt.Errorf("ack: %w", err))
					}
					return
				}
				h.Acked(d.Envelope)
			}()
		}
	}
}

// payloadSize is the body size that makes the stored envelope about Size
// bytes: the hub adds the version, ids, addresses, type, priority,
// timestamp and ttl around the payload.
func (s *Switchboard) payloadSize() int {
	env := protocol.Envelope{Version: protocol.Version, ID: protocol.NewID(protocol.PrefixMessage), TraceID: protocol.NewID(protocol.PrefixTrace),
		From: protocol.Address{Agent: s.ids[0], Tier: protocol.TierCommand}, To: protocol.Address{Agent: s.ids[0], Tier: protocol.TierCommand},
		Type: protocol.TypeNotification, Priority: protocol.PriorityNormal, Timestamp: time.Now().UTC(), TTL: 3600,
		Payload: json.RawMessage(`{}`)}
	b, _ := json.Marshal(env)
	return max(s.Size-(len(b)-2), 0)
}

// Send implements System.
func (s *Switchboard) Send(ctx context.Context, from, to int, st Stamp) error {
	env := &client.Envelope{To: client.Address{Agent: s.ids[to]}, Type: protocol.TypeNotification, Payload: st.Body(s.pad)}
	_, err := s.socks[from].Send(ctx, env)
	return err
}

// Notes implements System: the group committer's batching during the run.
func (s *Switchboard) Notes() string {
	st := s.hub.DB.Stats()
	b, r := st.Batches-s.before.Batches, st.Requests-s.before.Requests
	if b == 0 {
		return "no commits"
	}
	out := fmt.Sprintf("%d commits, %d write requests, %.1f requests/commit", b, r, float64(r)/float64(b))
	if acc := s.counter("switchboard_bus_accepted_total") - s.acceptedBefore; acc > 0 {
		out += fmt.Sprintf(", %.0f %% pushed on accept", 100*(s.counter("switchboard_bus_pushed_on_accept_total")-s.pushedBefore)/acc)
	}
	if s.Postgres != "" {
		out += "; the PostgreSQL server's CPU is not counted in CPU/op"
	}
	return out
}

// counter sums a counter of the hub's metrics over its labels (0 when the
// hub has no such metric).
func (s *Switchboard) counter(name string) float64 {
	mfs, err := s.hub.Metrics.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// Close implements System.
func (s *Switchboard) Close() error {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	s.pending.Wait()
	for _, sock := range s.socks {
		sock.Close()
	}
	var err error
	if s.hub != nil {
		err = s.hub.Close()
	}
	if s.schema != "" {
		s.dropSchema()
	}
	os.RemoveAll(s.dir)
	return err
}

var schemaSeq atomic.Int64

func (s *Switchboard) createSchema(ctx context.Context) (string, error) {
	db, err := sql.Open("pgx", s.Postgres)
	if err != nil {
		return "", err
	}
	defer db.Close()
	s.schema = fmt.Sprintf("sbbench_%d_%d", os.Getpid(), schemaSeq.Add(1))
	if _, err := db.ExecContext(ctx, `DROP SCHEMA IF EXISTS "`+s.schema+`" CASCADE`); err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA "`+s.schema+`"`); err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	return store.PostgresSchemaURL(s.Postgres, s.schema)
}

func (s *Switchboard) dropSchema() {
	db, err := sql.Open("pgx", s.Postgres)
	if err != nil {
		return
	}
	defer db.Close()
	_, _ = db.ExecContext(context.Background(), `DROP SCHEMA IF EXISTS "`+s.schema+`" CASCADE`)
}
