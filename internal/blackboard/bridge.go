// Package blackboard bridges the hub's inboxes to a directory, so agents
// that can only read and write files take part in the bus. It is the seed's
// "blackboard" layout, kept in step with the hub by a client of its HTTP API:
//
//	<dir>/<agent>/inbox/<msg-id>.json      an envelope delivered to the agent
//	<dir>/<agent>/processed/<msg-id>.json  moved here by the agent: the bridge acks it
//	<dir>/<agent>/outbox/<name>.json       dropped here by the agent: sent as the agent
//	<dir>/<agent>/sent/<name>.json         sent, with <name>.result.json beside it
//	<dir>/<agent>/rejected/<name>.json     refused, with <name>.error.json beside it
//	<dir>/<agent>/.deliveries/<msg-id>.json the bridge's own record of each mirrored delivery
//
// Inbox files hold exactly the envelope, as the seed's agents expect; the
// delivery it came with (id, attempt, lease) is kept in .deliveries, which
// makes a restarted bridge pick up where it stopped: a redelivered message
// rewrites the same file instead of adding a second one. While a file stays
// in inbox/ the bridge keeps extending its lease; moving it to processed/
// (or deleting it, in which case the bridge files it in processed/) acks it.
//
// Every file the bridge writes appears atomically (a temporary file that
// starts with "." and is renamed into place), and agents must do the same
// in outbox/: only names ending in .json that do not start with "." are
// read. An outbox file the hub refuses, or that is not a valid envelope,
// is moved to rejected/ with the structured error beside it — never lost,
// never retried forever.
package blackboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/clock"
)

// The folders of an agent's blackboard.
const (
	InboxDir      = "inbox"
	ProcessedDir  = "processed"
	OutboxDir     = "outbox"
	SentDir       = "sent"
	RejectedDir   = "rejected"
	DeliveriesDir = ".deliveries"
)

// Options configure a bridge. Zero values take the documented defaults.
type Options struct {
	// Dir is the blackboard root; one folder per agent id is kept under it.
	Dir string
	// Agents are the agents to mirror. Empty mirrors every enabled agent the
	// token can see, re-listed on every pass: with the admin token that is
	// every agent; with an agent token, set it to that agent.
	Agents []string
	// Lease is how long a mirrored delivery is leased at a time; the bridge
	// extends it while the file is still in inbox/ (default 5 min, at most 1 h).
	Lease time.Duration
	// Interval is the pause between passes of Run (default 1 s).
	Interval time.Duration
	// MaxPending bounds the files an agent's inbox/ holds: no more are
	// claimed until the agent processes some (default 1000).
	MaxPending int
	// SendRetries is how many passes an outbox file is retried when the hub
	// answers with a server error before it is rejected (default 5).
	// Unreachable hubs are waited for without limit.
	SendRetries int
	Logger      *slog.Logger
	Clock       clock.Clock
}

// Stats count what one pass did.
type Stats struct {
	Mirrored int `json:"mirrored"` // deliveries written to inbox/
	Acked    int `json:"acked"`    // deliveries acknowledged (moved to processed/ or deleted)
	Extended int `json:"extended"` // leases extended
	Sent     int `json:"sent"`     // outbox files sent
	Rejected int `json:"rejected"` // outbox files moved to rejected/
}

func (s *Stats) add(o Stats) {
	s.Mirrored += o.Mirrored
	s.Acked += o.Acked
	s.Extended += o.Extended
	s.Sent += o.Sent
	s.Rejected += o.Rejected
}

// Bridge mirrors inboxes to a directory and sends what agents drop in
// their outboxes. One bridge per directory: two bridges on one directory
// would race on its files.
type Bridge struct {
	c    *client.Client
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	failures map[string]int // outbox path → server errors so far
}

// New returns a bridge that talks to the hub through c. With the admin
// token it may mirror any agent and send as any agent; with an agent's own
// token, only that agent.
func New(c *client.Client, opts Options) (*Bridge, error) {
	if opts.Dir == "" {
		return nil, errors.New("blackboard: a directory is required")
	}
	if opts.Lease <= 0 {
		opts.Lease = 5 * time.Minute
	}
	if opts.Lease < 10*time.Second || opts.Lease > time.Hour {
		return nil, fmt.Errorf("blackboard: lease %s must be between 10s and 1h", opts.Lease)
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 1000
	}
	if opts.SendRetries <= 0 {
		opts.SendRetries = 5
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if err := os.MkdirAll(opts.Dir, 0o777); err != nil {
		return nil, fmt.Errorf("blackboard: %w", err)
	}
	return &Bridge{c: c, opts: opts, log: opts.Logger, failures: map[string]int{}}, nil
}

// Run syncs every Interval until ctx ends. A pass that fails (the hub is
// down) is logged and retried on the next tick.
func (b *Bridge) Run(ctx context.Context) error {
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	for {
		if st, err := b.Sync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			b.log.Warn("blackboard sync failed", "err", err)
		} else if st != (Stats{}) {
			b.log.Info("blackboard sync", "mirrored", st.Mirrored, "acked", st.Acked, "extended", st.Extended, "sent", st.Sent, "rejected", st.Rejected)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sync makes one pass over every agent: settle what agents processed,
// extend leases of what is still in inbox/, claim and mirror new
// deliveries, then send outbox files. It goes on with the other agents
// when one fails and returns the first error.
func (b *Bridge) Sync(ctx context.Context) (Stats, error) {
	agents := b.opts.Agents
	if len(agents) == 0 {
		list, err := b.c.Agents(ctx, "", "")
		if err != nil {
			return Stats{}, fmt.Errorf("list agents: %w", err)
		}
		for _, a := range list {
			if !a.Disabled {
				agents = append(agents, a.ID)
			}
		}
	}
	var total Stats
	var first error
	for _, id := range agents {
		st, err := b.syncAgent(ctx, id)
		total.add(st)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("agent %s: %w", id, err)
			}
			if ctx.Err() != nil {
				break
			}
		}
	}
	return total, first
}

func (b *Bridge) syncAgent(ctx context.Context, agentID string) (Stats, error) {
	if !validName(agentID) {
		return Stats{}, fmt.Errorf("agent id %q cannot be a folder name", agentID)
	}
	a := agentDir{root: filepath.Join(b.opts.Dir, agentID), id: agentID}
	for _, d := range []string{InboxDir, ProcessedDir, OutboxDir, SentDir, RejectedDir, DeliveriesDir} {
		if err := os.MkdirAll(a.path(d), 0o777); err != nil {
			return Stats{}, err
		}
	}
	var st Stats
	err := b.settle(ctx, a, &st)
	if err == nil {
		err = b.mirror(ctx, a, &st)
	}
	if oerr := b.sendOutbox(ctx, a, &st); err == nil {
		err = oerr
	}
	return st, err
}

// agentDir is one agent's folder.
type agentDir struct {
	root, id string
}

func (a agentDir) path(parts ...string) string {
	return filepath.Join(append([]string{a.root}, parts...)...)
}
