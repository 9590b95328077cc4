package bus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/store"
)

// Liveness of an agent or session.
const (
	Online  = "online"
	Stale   = "stale"
	Offline = "offline"
)

// Presence kinds: how an agent is attached.
const (
	KindSocket = "socket"
	KindPoll   = "poll"
)

// SessionPresence is the liveness of one session of an agent.
type SessionPresence struct {
	Session   string    `json:"session"`
	Kind      string    `json:"kind"`
	Connected bool      `json:"connected"`
	Status    string    `json:"status,omitempty"`
	LastSeen  time.Time `json:"lastSeen"`
	Liveness  string    `json:"liveness"`
}

// AgentPresence is the liveness of an agent: the best of its sessions.
type AgentPresence struct {
	AgentID  string            `json:"agentId"`
	Liveness string            `json:"liveness"`
	LastSeen time.Time         `json:"lastSeen,omitzero"`
	Sessions []SessionPresence `json:"sessions"`
}

// presenceCache batches heartbeats: they update memory at once and reach
// the store once per sweep, so ten thousand idle sockets cost one write
// transaction per second, not hundreds.
type presenceCache struct {
	mu    sync.Mutex
	dirty map[presenceKey]presenceBeat
}

type presenceKey struct{ agent, session string }

type presenceBeat struct {
	kind, status string
	at           time.Time
}

func newPresenceCache() *presenceCache { return &presenceCache{dirty: map[presenceKey]presenceBeat{}} }

func (s *Service) liveness(kind string, connected bool, lastSeen, now time.Time) string {
	age := now.Sub(lastSeen)
	if kind == KindSocket && !connected {
		return Offline
	}
	switch {
	case age <= 3*s.cfg.HeartbeatInterval:
		return Online
	case age <= s.cfg.PollCeiling:
		return Stale
	}
	return Offline
}

// Heartbeat records that agentID (optionally one session) is alive. Socket
// connections heartbeat with kind socket; polls and POST /v1/heartbeat use
// kind poll. status is the agent's self-reported status, if any.
func (s *Service) Heartbeat(agentID, session, kind, status string) {
	s.presence.mu.Lock()
	s.presence.dirty[presenceKey{agentID, session}] = presenceBeat{kind: kind, status: truncate(status, 200), at: s.clock.Now()}
	s.presence.mu.Unlock()
}

// FlushPresence writes batched heartbeats to the store.
func (s *Service) FlushPresence(ctx context.Context) error {
	s.presence.mu.Lock()
	beats := s.presence.dirty
	s.presence.dirty = map[presenceKey]presenceBeat{}
	s.presence.mu.Unlock()
	if len(beats) == 0 {
		return nil
	}
	return s.db.Write(ctx, func(tx *store.Tx) error {
		for k, b := range beats {
			// A socket heartbeat refreshes the row its connection wrote; a
			// poll creates or refreshes a poll row without touching a socket's
			// connected flag.
			_, err := tx.Exec(ctx, `INSERT INTO bus_presence (agent_id, session, kind, node, connected, status, last_seen, connected_at)
				VALUES (?, ?, ?, '', ?, ?, ?, 0)
				ON CONFLICT (agent_id, session) DO UPDATE SET last_seen = excluded.last_seen,
					status = CASE WHEN excluded.status = '' THEN bus_presence.status ELSE excluded.status END,
					kind = CASE WHEN bus_presence.connected THEN bus_presence.kind ELSE excluded.kind END`,
				k.agent, k.session, b.kind, false, b.status, store.Millis(b.at))
			if err != nil {
				return fmt.Errorf("flush presence: %w", err)
			}
		}
		return nil
	})
}

// Connected records a socket connection for agentID's session (holder
// identifies the connection, so a replaced connection's late disconnect does
// not mark its successor offline).
func (s *Service) Connected(ctx context.Context, agentID, session, holder string) error {
	now := store.Millis(s.clock.Now())
	s.metrics.connected.Inc()
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO bus_presence (agent_id, session, kind, node, connected, status, last_seen, connected_at)
			VALUES (?, ?, 'socket', ?, ?, '', ?, ?)
			ON CONFLICT (agent_id, session) DO UPDATE SET kind = 'socket', node = excluded.node, connected = excluded.connected,
				last_seen = excluded.last_seen, connected_at = excluded.connected_at`,
			agentID, session, holder, true, now, now)
		if err != nil {
			return fmt.Errorf("presence connect: %w", err)
		}
		return nil
	})
}

// Disconnected records that the connection holder of agentID's session is
// gone.
func (s *Service) Disconnected(ctx context.Context, agentID, session, holder string) error {
	now := store.Millis(s.clock.Now())
	s.metrics.connected.Dec()
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE bus_presence SET connected = ?, last_seen = ? WHERE agent_id = ? AND session = ? AND node = ?`,
			false, now, agentID, session, holder)
		if err != nil {
			return fmt.Errorf("presence disconnect: %w", err)
		}
		return nil
	})
}

// Presence returns the liveness of the given agents (all sessions).
func (s *Service) Presence(ctx context.Context, agentIDs []string) (map[string]AgentPresence, error) {
	out := make(map[string]AgentPresence, len(agentIDs))
	for _, id := range agentIDs {
		out[id] = AgentPresence{AgentID: id, Liveness: Offline, Sessions: []SessionPresence{}}
	}
	if len(agentIDs) == 0 {
		return out, nil
	}
	now := s.clock.Now()
	args := make([]any, len(agentIDs))
	for i, id := range agentIDs {
		args[i] = id
	}
	rows, err := s.db.Query(ctx, `SELECT agent_id, session, kind, connected, status, last_seen FROM bus_presence WHERE agent_id IN (`+store.InClause(len(args))+`) ORDER BY agent_id, session`, args...)
	if err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	defer rows.Close()
	seen := map[presenceKey]bool{}
	for rows.Next() {
		var sp SessionPresence
		var agentID string
		var last int64
		if err := rows.Scan(&agentID, &sp.Session, &sp.Kind, &sp.Connected, &sp.Status, &last); err != nil {
			return nil, err
		}
		sp.LastSeen = store.FromMillis(last)
		seen[presenceKey{agentID, sp.Session}] = true
		s.mergeBeat(&sp, agentID)
		sp.Liveness = s.liveness(sp.Kind, sp.Connected, sp.LastSeen, now)
		add(out, agentID, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Heartbeats not flushed yet.
	s.presence.mu.Lock()
	var pending []struct {
		k presenceKey
		b presenceBeat
	}
	for k, b := range s.presence.dirty {
		if _, ok := out[k.agent]; ok && !seen[k] {
			pending = append(pending, struct {
				k presenceKey
				b presenceBeat
			}{k, b})
		}
	}
	s.presence.mu.Unlock()
	for _, p := range pending {
		sp := SessionPresence{Session: p.k.session, Kind: p.b.kind, Status: p.b.status, LastSeen: p.b.at}
		sp.Liveness = s.liveness(sp.Kind, false, sp.LastSeen, now)
		add(out, p.k.agent, sp)
	}
	return out, nil
}

func (s *Service) mergeBeat(sp *SessionPresence, agentID string) {
	s.presence.mu.Lock()
	defer s.presence.mu.Unlock()
	// A beat not yet flushed is newer than the stored row even when both
	// carry the same instant (a status sent right after connecting).
	if b, ok := s.presence.dirty[presenceKey{agentID, sp.Session}]; ok && !b.at.Before(sp.LastSeen) {
		sp.LastSeen = b.at
		if b.status != "" {
			sp.Status = b.status
		}
	}
}

func rank(l string) int {
	switch l {
	case Online:
		return 2
	case Stale:
		return 1
	}
	return 0
}

func add(out map[string]AgentPresence, agentID string, sp SessionPresence) {
	ap := out[agentID]
	ap.Sessions = append(ap.Sessions, sp)
	if rank(sp.Liveness) > rank(ap.Liveness) {
		ap.Liveness = sp.Liveness
	}
	if sp.LastSeen.After(ap.LastSeen) {
		ap.LastSeen = sp.LastSeen
	}
	out[agentID] = ap
}

// sessionLive reports whether a realtime send to (agentID, session) can be
// pushed now: a connected socket for that session, or one for all sessions.
func (s *Service) sessionLive(ctx context.Context, tx *store.Tx, agentID, session string, now time.Time) (bool, error) {
	var n int
	err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM bus_presence WHERE agent_id = ? AND (session = ? OR session = '') AND connected = ? AND last_seen > ?`,
		agentID, session, true, store.Millis(now.Add(-3*s.cfg.HeartbeatInterval))).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("session presence: %w", err)
	}
	return n > 0, nil
}
