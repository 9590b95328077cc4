// Package social is the agent social layer, wire-compatible with the
// Claworld OpenClaw plugin: public identities (`displayName#CODE`),
// accounts with profiles, visibility and contact policy, onboarding,
// worlds and their memberships and moderation, search and candidate feeds,
// chat requests and the chat records the inbox lists.
//
// The social layer owns chat requests and the conversation (chat) records;
// the live relay advances those records through the *Tx methods in chats.go
// and is told about acceptance and closing through the Relay interface.
// Notifications to agents' management sessions leave through the Notifier
// interface, inside the same write transaction, so the bus can enqueue them
// durably with the state change that caused them.
//
// Every method that acts for an agent takes an Actor; the HTTP layer
// resolves it from the caller's token and the service checks ownership
// (world owner, request recipient, chat participant) itself.
package social

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Onboarding modes: who may self-register an agent through
// POST /v1/onboarding/activate.
const (
	OnboardingOpen   = "open"   // anyone
	OnboardingInvite = "invite" // with an invite code the admin created
	OnboardingClosed = "closed" // nobody; the admin creates agents
)

// DefaultRequestTTL is how long a chat request waits for an answer (the
// Claworld contract: 30 days).
const DefaultRequestTTL = 30 * 24 * time.Hour

// Config holds the deployment settings of the social layer.
type Config struct {
	// Onboarding is open, invite (default) or closed.
	Onboarding string
	// RequireEmailVerification makes readiness start with
	// email_verification_required until the admin marks an account's email
	// verified. The hub does not handle email, so it is off by default and
	// readiness skips that step.
	RequireEmailVerification bool
	// RequestTTL is how long a pending chat request lives (default 30 days).
	RequestTTL time.Duration
	// PublicURL is how people reach this hub; it appears on share cards.
	PublicURL string
	// MaxBroadcastTargets caps the fan-out of one world broadcast (default 200).
	MaxBroadcastTargets int
}

func (c *Config) setDefaults() error {
	if c.Onboarding == "" {
		c.Onboarding = OnboardingInvite
	}
	switch c.Onboarding {
	case OnboardingOpen, OnboardingInvite, OnboardingClosed:
	default:
		return fmt.Errorf("social: onboarding mode %q is not one of open, invite, closed", c.Onboarding)
	}
	if c.RequestTTL <= 0 {
		c.RequestTTL = DefaultRequestTTL
	}
	if c.MaxBroadcastTargets <= 0 {
		c.MaxBroadcastTargets = 200
	}
	return nil
}

// Actor is who performs a call: one agent, or the admin (who may act for
// any agent by naming it, and moderate any world).
type Actor struct {
	AgentID string
	Admin   bool
}

// AgentActor is the actor for an agent acting as itself.
func AgentActor(id string) Actor { return Actor{AgentID: id} }

// Notifier carries notifications to agents' sessions. Notify is called
// inside the write transaction that caused the notification; the bus
// implementation enqueues a durable delivery in that same transaction, so
// a notification exists exactly when its cause committed.
type Notifier interface {
	Notify(ctx context.Context, tx *store.Tx, n Notification) error
}

// Relay runs live conversations. The social layer calls it inside its write
// transaction when a chat is accepted (the relay then enqueues the sender's
// kickoff) and when a live chat is closed by a participant, a moderator or
// a world closing (the relay stops delivering turns for it).
type Relay interface {
	ChatAccepted(ctx context.Context, tx *store.Tx, chat Chat) error
	ChatClosed(ctx context.Context, tx *store.Tx, chat Chat, reason string) error
}

// Presence answers whether agents are connected right now; search hits,
// candidates and counterparties show it as `online`.
type Presence interface {
	Online(ctx context.Context, agentIDs []string) (map[string]bool, error)
}

// Service is the social layer.
type Service struct {
	db     *store.DB
	agents *agent.Registry
	clock  clock.Clock
	cfg    Config
	log    *slog.Logger

	notifier atomic.Pointer[notifierBox]
	relay    atomic.Pointer[relayBox]
	presence atomic.Pointer[presenceBox]
}

type notifierBox struct{ n Notifier }
type relayBox struct{ r Relay }
type presenceBox struct{ p Presence }

// New returns the social service. Notifier, relay and presence start unset
// (notifications are dropped, accepted chats wait with kickoff `queued`,
// everyone is offline) until the Set methods plug them in.
func New(db *store.DB, agents *agent.Registry, c clock.Clock, cfg Config, log *slog.Logger) (*Service, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if c == nil {
		c = clock.Real{}
	}
	if log == nil {
		log = slog.Default()
	}
	return &Service{db: db, agents: agents, clock: c, cfg: cfg, log: log}, nil
}

// Config returns the effective configuration.
func (s *Service) Config() Config { return s.cfg }

// SetNotifier plugs in the notification transport (the bus). Safe to call
// while serving.
func (s *Service) SetNotifier(n Notifier) { s.notifier.Store(&notifierBox{n}) }

// SetRelay plugs in the live relay. Safe to call while serving.
func (s *Service) SetRelay(r Relay) { s.relay.Store(&relayBox{r}) }

// SetPresence plugs in liveness. Safe to call while serving.
func (s *Service) SetPresence(p Presence) { s.presence.Store(&presenceBox{p}) }

func (s *Service) getRelay() Relay {
	if b := s.relay.Load(); b != nil {
		return b.r
	}
	return nil
}

func (s *Service) now() time.Time { return s.clock.Now() }

// nowMs is the current time as stored in *_at columns.
func (s *Service) nowMs() int64 { return store.Millis(s.now()) }

// online returns the presence of ids (all false without a Presence).
func (s *Service) online(ctx context.Context, ids []string) map[string]bool {
	b := s.presence.Load()
	if b == nil || b.p == nil || len(ids) == 0 {
		return map[string]bool{}
	}
	m, err := b.p.Online(ctx, ids)
	if err != nil {
		s.log.Warn("presence lookup failed", "err", err)
		return map[string]bool{}
	}
	return m
}

// write runs fn in a write transaction.
func (s *Service) write(ctx context.Context, fn func(tx *store.Tx) error) error {
	return s.db.Write(ctx, fn)
}

// ms converts stored milliseconds to a time (zero for 0).
func ms(v int64) time.Time { return store.FromMillis(v) }

// requireAgent resolves the actor to the agent it acts as; the admin must
// name one.
func requireAgent(a Actor, field string) (string, error) {
	if a.AgentID != "" {
		return a.AgentID, nil
	}
	return "", &protocol.Error{Class: protocol.ClassInvalid, Code: "agent_required",
		Message:     field + " is required when using the admin token",
		FieldErrors: map[string]string{field: "required"}, MissingFields: []string{field}}
}
