// Package a2a makes Switchboard agents reachable by standard Agent2Agent
// (A2A) clients, and lets agents reach external A2A agents.
//
// An agent opts in (Enable) and issues bearer tokens to its callers
// (IssueCaller). Its Agent Card, JSON-RPC and HTTP+JSON endpoints (A2A 1.0)
// and a JSON-RPC endpoint for A2A 0.3 clients are then served under
// /a2a/agents/{agentId}. The protocol work is done by the official a2a-go
// SDK; this package supplies what is ours: authentication, per-caller rate
// limits, a task store and push-config store on the hub's database, and an
// executor that turns each incoming message into a durable bus request to
// the agent from the system sender "system:a2a". The agent answers with an
// ordinary response envelope, may stream progress notifications, and may be
// offline when the message arrives: the request waits in its inbox for the
// configured wait, and the task completes when it answers.
package a2a

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"golang.org/x/time/rate"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// SystemID is the bus sender of every request an A2A message becomes.
const SystemID = "system:a2a"

// Action is the request action the agent receives for an A2A message.
const Action = "a2a.message"

// CancelEvent is the notification event an agent receives when a caller
// cancels a task it is working on.
const CancelEvent = "a2a.canceled"

// CallerTokenPrefix starts every caller token, so a leaked token is
// recognisable and never mistaken for an agent token.
const CallerTokenPrefix = "sbc_"

// Limits on what an agent may put on its card.
const (
	MaxDescription = 2000
	MaxSkills      = 32
	MaxCallerName  = 80
)

// Config tunes the A2A surface. Zero values take the documented defaults.
type Config struct {
	// Wait is how long an incoming message waits for the agent to answer
	// (it may be offline and answer after reconnecting); the task fails
	// with a clear message after it. Default 1h.
	Wait time.Duration
	// RatePerMinute and Burst limit each caller's requests (default 120
	// per minute, burst 30).
	RatePerMinute int
	Burst         int
	// AllowPrivatePush lets push notifications reach loopback and private
	// addresses. Off by default: a caller could otherwise make the hub
	// probe its own network (SSRF).
	AllowPrivatePush bool
	// PushTimeout bounds one push notification POST (default 10s).
	PushTimeout time.Duration
	// SweepInterval is how often answers that no live execution picked up
	// (after a restart) are applied to their tasks (default 5s).
	SweepInterval time.Duration
	// OrphanGrace is how long an answer (or a passed deadline) waits for the
	// live execution that should apply it before the sweeper does (default
	// 10s). A live execution applies it within a second, so only answers
	// whose execution died with a restart wait that long.
	OrphanGrace time.Duration
	// PublicURL is the base URL clients use to reach the hub; the card's
	// interface URLs are built from it (default: the request's host).
	PublicURL string
	// Version is the hub version shown on cards.
	Version string
}

func (c *Config) setDefaults() {
	if c.Wait <= 0 {
		c.Wait = time.Hour
	}
	if c.RatePerMinute <= 0 {
		c.RatePerMinute = 120
	}
	if c.Burst <= 0 {
		c.Burst = 30
	}
	if c.PushTimeout <= 0 {
		c.PushTimeout = 10 * time.Second
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = 5 * time.Second
	}
	if c.OrphanGrace <= 0 {
		c.OrphanGrace = 10 * time.Second
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
}

// Service is the A2A surface of the hub.
type Service struct {
	db     *store.DB
	bus    *bus.Service
	agents *agent.Registry
	clock  clock.Clock
	log    *slog.Logger
	cfg    Config
	push   push.Sender // webhook sender of every agent's tasks

	hmu      sync.Mutex
	handlers map[string]*agentHandler

	lmu      sync.Mutex
	limiters map[string]*rate.Limiter

	wmu     sync.Mutex
	waiters map[string]chan struct{} // request id → wake-up of its live execution
}

// New builds the service and registers the system sender on the bus.
func New(db *store.DB, b *bus.Service, agents *agent.Registry, c clock.Clock, log *slog.Logger, cfg Config) *Service {
	cfg.setDefaults()
	if c == nil {
		c = clock.Real{}
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Service{db: db, bus: b, agents: agents, clock: c, log: log, cfg: cfg, push: newPushSender(cfg),
		handlers: map[string]*agentHandler{}, limiters: map[string]*rate.Limiter{}, waiters: map[string]chan struct{}{}}
	b.RegisterSystem(SystemID, bus.SystemHooks{OnMessage: s.onMessage, OnDead: s.onDead})
	db.Listen(eventChannel, s.wake)
	return s
}

// Config returns the effective configuration.
func (s *Service) Config() Config { return s.cfg }

// Skill is one entry of an agent's card: what it can do for a caller.
type Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags,omitempty"`
	Examples    []string `json:"examples,omitempty"`
}

// Settings are an agent's A2A opt-in and card content.
type Settings struct {
	AgentID     string    `json:"agentId"`
	Enabled     bool      `json:"enabled"`
	Description string    `json:"description"`
	Skills      []Skill   `json:"skills"`
	CardURL     string    `json:"cardUrl,omitempty"`
	UpdatedAt   time.Time `json:"updatedAt,omitzero"`
}

// SettingsInput is the body of PUT /v1/agents/{id}/a2a.
type SettingsInput struct {
	Enabled     bool    `json:"enabled"`
	Description string  `json:"description"`
	Skills      []Skill `json:"skills,omitempty"`
}

func (in *SettingsInput) validate() error {
	fe := protocol.FieldErrors{}
	in.Description = strings.TrimSpace(in.Description)
	if in.Enabled && in.Description == "" {
		fe.Add("description", "required when enabled: one or two sentences that tell callers what this agent does")
	}
	if utf8.RuneCountInString(in.Description) > MaxDescription {
		fe.Add("description", fmt.Sprintf("at most %d characters", MaxDescription))
	}
	if len(in.Skills) > MaxSkills {
		fe.Add("skills", fmt.Sprintf("at most %d skills", MaxSkills))
	}
	seen := map[string]bool{}
	for i := range in.Skills {
		sk := &in.Skills[i]
		sk.ID, sk.Name, sk.Description = strings.TrimSpace(sk.ID), strings.TrimSpace(sk.Name), strings.TrimSpace(sk.Description)
		p := fmt.Sprintf("skills[%d]", i)
		if !protocol.ValidID(sk.ID) {
			fe.Add(p+".id", "required: letters, digits, '.', '_', ':' or '-'")
		} else if seen[sk.ID] {
			fe.Add(p+".id", "duplicate skill id "+sk.ID)
		}
		seen[sk.ID] = true
		if sk.Name == "" || utf8.RuneCountInString(sk.Name) > 100 {
			fe.Add(p+".name", "required, at most 100 characters")
		}
		if sk.Description == "" || utf8.RuneCountInString(sk.Description) > MaxDescription {
			fe.Add(p+".description", fmt.Sprintf("required, at most %d characters", MaxDescription))
		}
		if len(sk.Tags) > 16 || len(sk.Examples) > 16 {
			fe.Add(p, "at most 16 tags and 16 examples")
		}
	}
	return fe.Err()
}

// SetSettings enables, disables or updates an agent's A2A card. Errors:
// E003 for invalid input (the field errors say which), agent_not_found.
func (s *Service) SetSettings(ctx context.Context, agentID string, in SettingsInput) (Settings, error) {
	if err := in.validate(); err != nil {
		return Settings{}, err
	}
	if _, err := s.agents.Get(ctx, agentID); err != nil {
		return Settings{}, err
	}
	if in.Skills == nil {
		in.Skills = []Skill{}
	}
	skills, _ := json.Marshal(in.Skills)
	now := s.clock.Now()
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO a2a_agents (agent_id, enabled, description, skills, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (agent_id) DO UPDATE SET enabled = excluded.enabled, description = excluded.description, skills = excluded.skills, updated_at = excluded.updated_at`,
			agentID, in.Enabled, in.Description, string(skills), store.Millis(now))
		return err
	})
	if err != nil {
		return Settings{}, fmt.Errorf("save a2a settings: %w", err)
	}
	return Settings{AgentID: agentID, Enabled: in.Enabled, Description: in.Description, Skills: in.Skills,
		CardURL: s.CardURL("", agentID), UpdatedAt: now}, nil
}

// GetSettings returns an agent's A2A settings (disabled with no card when
// it never opted in).
func (s *Service) GetSettings(ctx context.Context, agentID string) (Settings, error) {
	st := Settings{AgentID: agentID, Skills: []Skill{}}
	var skills string
	var enabled bool
	var updated int64
	err := s.db.QueryRow(ctx, `SELECT enabled, description, skills, updated_at FROM a2a_agents WHERE agent_id = ?`, agentID).
		Scan(&enabled, &st.Description, &skills, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return Settings{}, fmt.Errorf("load a2a settings: %w", err)
	}
	st.Enabled = enabled
	st.UpdatedAt = store.FromMillis(updated)
	if err := json.Unmarshal([]byte(skills), &st.Skills); err != nil {
		return Settings{}, fmt.Errorf("decode skills of %s: %w", agentID, err)
	}
	if st.Enabled {
		st.CardURL = s.CardURL("", agentID)
	}
	return st, nil
}

// notEnabled is the answer for an agent that has not opted in (or does not
// exist): the same either way, so callers cannot probe agent ids.
func notEnabled(agentID string) *protocol.Error {
	return &protocol.Error{Class: protocol.ClassUnavailable, Code: "a2a_not_enabled", Status: 404,
		Message:    "agent " + agentID + " is not reachable over A2A",
		NextAction: "the agent (or the admin) enables it with PUT /v1/agents/{id}/a2a {enabled: true, description}"}
}

// BaseURL is where an agent's A2A endpoints live, given the hub's base URL
// (the configured public URL wins over the request's).
func (s *Service) BaseURL(hub, agentID string) string {
	if s.cfg.PublicURL != "" {
		hub = s.cfg.PublicURL
	}
	return strings.TrimRight(hub, "/") + "/a2a/agents/" + agentID
}

// CardURL is the URL of an agent's Agent Card.
func (s *Service) CardURL(hub, agentID string) string {
	return s.BaseURL(hub, agentID) + "/.well-known/agent-card.json"
}

// Caller is an external client allowed to talk to one agent.
type Caller struct {
	ID        string    `json:"callerId"`
	AgentID   string    `json:"agentId"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	// Token is set only in the answer that created the caller.
	Token string `json:"token,omitempty"`
}

// IssueCaller creates a caller of agentID and returns its token (shown
// once; the hub keeps only a hash).
func (s *Service) IssueCaller(ctx context.Context, agentID, name string) (Caller, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > MaxCallerName {
		e := protocol.Invalid("name", fmt.Sprintf("required, at most %d characters: who the token is for", MaxCallerName))
		e.MissingFields = []string{"name"}
		return Caller{}, e
	}
	if _, err := s.agents.Get(ctx, agentID); err != nil {
		return Caller{}, err
	}
	c := Caller{ID: protocol.NewID(protocol.PrefixCaller), AgentID: agentID, Name: name, CreatedAt: s.clock.Now(),
		Token: protocol.RandomToken(CallerTokenPrefix, 24)}
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO a2a_callers (id, agent_id, name, token_hash, created_at) VALUES (?, ?, ?, ?, ?)`,
			c.ID, agentID, name, agent.HashToken(c.Token), store.Millis(c.CreatedAt))
		return err
	})
	if err != nil {
		return Caller{}, fmt.Errorf("save caller: %w", err)
	}
	return c, nil
}

// ListCallers lists an agent's callers, newest first, revoked ones included.
func (s *Service) ListCallers(ctx context.Context, agentID string) ([]Caller, error) {
	rows, err := s.db.Query(ctx, `SELECT id, name, created_at, revoked_at FROM a2a_callers WHERE agent_id = ? ORDER BY created_at DESC, id DESC`, agentID)
	if err != nil {
		return nil, fmt.Errorf("list callers: %w", err)
	}
	defer rows.Close()
	out := []Caller{}
	for rows.Next() {
		c := Caller{AgentID: agentID}
		var created, revoked int64
		if err := rows.Scan(&c.ID, &c.Name, &created, &revoked); err != nil {
			return nil, err
		}
		c.CreatedAt = store.FromMillis(created)
		if revoked > 0 {
			c.RevokedAt = store.FromMillis(revoked)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// RevokeCaller stops a caller's token from working. Revoking twice is
// "already applied" (the first revocation time is kept). Errors:
// caller_not_found.
func (s *Service) RevokeCaller(ctx context.Context, agentID, callerID string) (Caller, error) {
	now := s.clock.Now()
	var c Caller
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var created, revoked int64
		err := tx.QueryRow(ctx, `SELECT name, created_at, revoked_at FROM a2a_callers WHERE id = ? AND agent_id = ?`, callerID, agentID).
			Scan(&c.Name, &created, &revoked)
		if errors.Is(err, sql.ErrNoRows) {
			return protocol.NotFound("caller_not_found", "no caller "+callerID+" of agent "+agentID)
		}
		if err != nil {
			return err
		}
		c.ID, c.AgentID, c.CreatedAt = callerID, agentID, store.FromMillis(created)
		if revoked > 0 {
			c.RevokedAt = store.FromMillis(revoked)
			return nil
		}
		c.RevokedAt = now
		_, err = tx.Exec(ctx, `UPDATE a2a_callers SET revoked_at = ? WHERE id = ?`, store.Millis(now), callerID)
		return err
	})
	if err != nil {
		return Caller{}, err
	}
	s.lmu.Lock()
	delete(s.limiters, callerID)
	s.lmu.Unlock()
	return c, nil
}

// authenticate resolves a caller token of agentID. Any failure is the same
// E001 so tokens of other agents cannot be told apart from wrong ones.
func (s *Service) authenticate(ctx context.Context, agentID, token string) (Caller, error) {
	var c Caller
	var revoked int64
	err := s.db.QueryRow(ctx, `SELECT id, name, revoked_at FROM a2a_callers WHERE token_hash = ? AND agent_id = ?`,
		agent.HashToken(token), agentID).Scan(&c.ID, &c.Name, &revoked)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && revoked > 0) {
		return Caller{}, protocol.Unauthenticated("unknown or revoked A2A caller token for this agent")
	}
	if err != nil {
		return Caller{}, fmt.Errorf("authenticate caller: %w", err)
	}
	c.AgentID = agentID
	return c, nil
}

// allow applies the caller's rate limit.
func (s *Service) allow(callerID string) bool {
	s.lmu.Lock()
	l, ok := s.limiters[callerID]
	if !ok {
		l = rate.NewLimiter(rate.Limit(float64(s.cfg.RatePerMinute)/60), s.cfg.Burst)
		s.limiters[callerID] = l
	}
	s.lmu.Unlock()
	return l.Allow()
}
