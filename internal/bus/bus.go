// Package bus is the spine of the hub: every envelope accepted for an agent
// becomes a durable delivery in that agent's inbox (optionally pinned to one
// of its sessions), ordered by priority then arrival, leased to a consumer,
// acknowledged or redelivered, expired by TTL, dead-lettered after too many
// attempts, and logged at every transition.
//
// Agents send through Send (authenticated, subject to the tier routing
// rules). Subsystems of the hub send as system senders ("system:relay",
// "system:pipeline", ...) through SendSystemTx inside their own transaction,
// bypassing tier rules, and receive the replies addressed to them through
// the hooks they register with RegisterSystem.
package bus

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

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// SystemPrefix starts the agent ids of the hub's own senders.
const SystemPrefix = "system:"

// IsSystem reports whether id names a system sender.
func IsSystem(id string) bool { return strings.HasPrefix(id, SystemPrefix) }

// Config tunes the bus. Zero values take the defaults documented on each field.
type Config struct {
	DefaultTTL    time.Duration // TTL of envelopes that give none (default 1h)
	LeaseDuration time.Duration // how long a claim holds a delivery (default 60s)
	MaxAttempts   int           // deliveries after which a delivery is dead-lettered (default 10)
	SweepInterval time.Duration // lease expiry, TTL and deadline sweep period (default 1s)
	Rules         Rules         // tier routing table (default DefaultRules)
	Thresholds    Thresholds    // alert thresholds for /readyz
	// HeartbeatInterval is how often socket agents heartbeat (default 15s);
	// an agent unseen for three intervals is stale.
	HeartbeatInterval time.Duration
	// PollCeiling is the longest a polling agent may stay silent before it
	// counts as offline (default 15 min, the seed's heartbeat period).
	PollCeiling time.Duration
}

func (c *Config) setDefaults() {
	if c.DefaultTTL <= 0 {
		c.DefaultTTL = time.Hour
	}
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = 60 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 10
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = time.Second
	}
	if c.Rules == nil {
		c.Rules = DefaultRules()
	}
	c.Thresholds.setDefaults()
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 15 * time.Second
	}
	if c.PollCeiling <= 0 {
		c.PollCeiling = 15 * time.Minute
	}
}

// SystemHooks are how a subsystem learns what happens to the messages it
// sends as a system sender. Every hook runs inside the bus's transaction,
// so the subsystem's own bookkeeping commits atomically with it. Hooks must
// not call store.DB.Write.
type SystemHooks struct {
	// OnMessage receives envelopes addressed to the system sender: responses
	// and errors answering its requests, and notifications.
	OnMessage func(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error
	// OnDelivered runs when one of its deliveries is first handed to the
	// recipient.
	OnDelivered func(ctx context.Context, tx *store.Tx, d Delivery) error
	// OnDead runs when one of its deliveries is dead-lettered.
	OnDead func(ctx context.Context, tx *store.Tx, d Delivery, reason string) error
	// AcceptRequests lets agents send request envelopes to the system
	// sender (the pipeline engine serves skill.invoke this way). OnMessage
	// receives them and answers later through SendSystemTx; the answer
	// settles the request's deadline like an agent's answer does.
	AcceptRequests bool
}

// Service is the bus.
type Service struct {
	db      *store.DB
	agents  *agent.Registry
	clock   clock.Clock
	log     *slog.Logger
	cfg     Config
	waiters *waiters
	metrics *Metrics
	node    string

	smu     sync.RWMutex
	systems map[string]SystemHooks

	presence *presenceCache
	takers   takers
}

// New builds the bus over db. Call Start to run its sweeper.
func New(db *store.DB, agents *agent.Registry, c clock.Clock, log *slog.Logger, cfg Config, m *Metrics) *Service {
	cfg.setDefaults()
	if c == nil {
		c = clock.Real{}
	}
	if log == nil {
		log = slog.Default()
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	s := &Service{db: db, agents: agents, clock: c, log: log, cfg: cfg, waiters: newWaiters(), metrics: m,
		systems: map[string]SystemHooks{}, node: db.NodeID()}
	s.presence = newPresenceCache()
	db.Listen(wakeChannel, func(agentID string) {
		if agentID == "*" {
			s.waiters.wakeAll()
			return
		}
		s.waiters.wake(agentID)
	})
	return s
}

// Config returns the effective configuration.
func (s *Service) Config() Config { return s.cfg }

// Metrics returns the bus metrics (for the readiness check and the console).
func (s *Service) Metrics() *Metrics { return s.metrics }

// RegisterSystem installs the hooks of a system sender ("system:relay").
func (s *Service) RegisterSystem(id string, h SystemHooks) {
	if !IsSystem(id) {
		panic("bus.RegisterSystem: id must start with " + SystemPrefix)
	}
	s.smu.Lock()
	s.systems[id] = h
	s.smu.Unlock()
}

func (s *Service) system(id string) (SystemHooks, bool) {
	s.smu.RLock()
	defer s.smu.RUnlock()
	h, ok := s.systems[id]
	return h, ok
}

const wakeChannel = "bus_wake"

// Result is the answer to an accepted envelope.
type Result struct {
	ID         string `json:"id"`
	TraceID    string `json:"traceId"`
	Deliveries int    `json:"deliveries"`
	// DeliveryIDs names the deliveries created, one per recipient.
	DeliveryIDs []string `json:"deliveryIds,omitempty"`
	// Duplicate is true when (from, id) was accepted before; the result is
	// the original one and nothing new was stored.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Prepare fills what the client may omit (id, traceId, version, priority,
// timestamp, ttl) and validates the envelope.
func (s *Service) Prepare(env *protocol.Envelope, traceHint string) error {
	if env.ID == "" {
		env.ID = protocol.NewID(protocol.PrefixMessage)
	}
	if env.TraceID == "" {
		env.TraceID = traceHint
		if env.TraceID == "" {
			env.TraceID = protocol.NewID(protocol.PrefixTrace)
		}
	}
	env.Normalize(s.clock.Now(), int(s.cfg.DefaultTTL/time.Second))
	return env.Validate()
}

// Send accepts an envelope from an agent. The caller has authenticated the
// sender; env.From.Agent must be that agent (checked by the API layer).
// It applies the routing rules, fans out broadcasts, dedupes (from, id), and
// durably creates one delivery per recipient before returning.
func (s *Service) Send(ctx context.Context, env *protocol.Envelope) (Result, error) {
	if IsSystem(env.From.Agent) {
		return Result{}, protocol.Forbidden("system_sender", "from.agent: system senders are reserved for the hub")
	}
	if err := env.Validate(); err != nil {
		return Result{}, err
	}
	var res Result
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		res, err = s.accept(ctx, tx, env, false)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	if !res.Duplicate {
		s.metrics.accepted.WithLabelValues(string(env.Type)).Inc()
	}
	return res, nil
}

// SendSystemTx enqueues an envelope from a system sender inside the
// caller's transaction: no routing rules, same durability. The envelope is
// prepared (ids, defaults) and validated here.
func (s *Service) SendSystemTx(ctx context.Context, tx *store.Tx, env *protocol.Envelope) (Result, error) {
	if !IsSystem(env.From.Agent) {
		return Result{}, fmt.Errorf("bus.SendSystemTx: from.agent %q is not a system sender", env.From.Agent)
	}
	if err := s.Prepare(env, ""); err != nil {
		return Result{}, err
	}
	res, err := s.accept(ctx, tx, env, true)
	if err == nil && !res.Duplicate {
		tx.AfterCommit(func() { s.metrics.accepted.WithLabelValues(string(env.Type)).Inc() })
	}
	return res, err
}

// SendSystem is SendSystemTx in a transaction of its own.
func (s *Service) SendSystem(ctx context.Context, env *protocol.Envelope) (Result, error) {
	var res Result
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		res, err = s.SendSystemTx(ctx, tx, env)
		return err
	})
	return res, err
}

func (s *Service) accept(ctx context.Context, tx *store.Tx, env *protocol.Envelope, system bool) (Result, error) {
	now := s.clock.Now()
	// A repeat of (from, id) answers with the original result.
	var stored string
	err := tx.QueryRow(ctx, `SELECT result FROM bus_messages WHERE sender = ? AND client_id = ?`, env.From.Agent, env.ID).Scan(&stored)
	if err == nil {
		var r Result
		if jerr := json.Unmarshal([]byte(stored), &r); jerr != nil {
			return Result{}, fmt.Errorf("stored result of %s: %w", env.ID, jerr)
		}
		r.Duplicate = true
		return r, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Result{}, fmt.Errorf("dedupe lookup: %w", err)
	}
	if !env.ExpiresAt().After(now) {
		return Result{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "message_expired",
			Message:     fmt.Sprintf("the envelope expired at %s (timestamp + ttl) before it reached the hub; expired messages are never delivered", env.ExpiresAt().Format(time.RFC3339)),
			FieldErrors: map[string]string{"ttl": "timestamp + ttl is in the past"}, NextAction: "send it again with a current timestamp or a longer ttl"}
	}

	var sender agent.Agent
	if !system {
		sender, err = s.agent(ctx, tx, env.From.Agent)
		if err != nil {
			if protocol.CodeOf(err) == "agent_not_found" {
				return Result{}, protocol.Forbidden("unknown_sender", "from.agent is not a registered agent")
			}
			return Result{}, err
		}
		if env.From.Tier == "" {
			env.From.Tier = sender.Tier
		} else if env.From.Tier != sender.Tier {
			return Result{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "tier_mismatch",
				Message:     fmt.Sprintf("from.tier is %s but agent %s is registered as %s", env.From.Tier, sender.ID, sender.Tier),
				FieldErrors: map[string]string{"from.tier": "must be " + string(sender.Tier) + " or omitted"}}
		}
	}

	// A system sender answering an agent's request (to a system recipient
	// that accepts requests) settles that request's deadline.
	if system && !IsSystem(env.To.Agent) {
		if err := s.settleSystemAnswer(ctx, tx, env); err != nil {
			return Result{}, err
		}
	}

	// Replies are checked against the request they answer.
	var request *requestRef
	if !system && (env.Type == protocol.TypeResponse || env.Type == protocol.TypeError) {
		reqID := ""
		if env.Type == protocol.TypeResponse {
			p, _ := env.Response()
			reqID = p.RequestID
		} else {
			p, _ := env.ErrorPayload()
			reqID = p.RequestID
		}
		if reqID != "" || env.Type == protocol.TypeResponse {
			request, err = s.findRequest(ctx, tx, env.To.Agent, reqID, env.From.Agent)
			if err != nil {
				return Result{}, err
			}
		}
	}

	// System recipients: hand the envelope to the subsystem in this tx.
	if IsSystem(env.To.Agent) {
		h, ok := s.system(env.To.Agent)
		if !ok || h.OnMessage == nil {
			return Result{}, protocol.NotFound("unknown_recipient", "to.agent: no system recipient "+env.To.Agent)
		}
		if env.Type == protocol.TypeRequest && !h.AcceptRequests {
			return Result{}, protocol.Invalid("type", env.To.Agent+" accepts responses, errors and notifications, not requests")
		}
		res := Result{ID: env.ID, TraceID: env.TraceID, Deliveries: 0}
		if err := s.insertMessage(ctx, tx, env, now, res, request); err != nil {
			return Result{}, err
		}
		if err := h.OnMessage(ctx, tx, env); err != nil {
			return Result{}, err
		}
		s.logRow(ctx, tx, logEntry{at: now, level: "info", msgID: env.ID, traceID: env.TraceID, from: env.From.Agent, to: env.To.Agent, typ: string(env.Type), status: "processed"})
		return res, nil
	}

	recipients, err := s.recipients(ctx, tx, env, sender, system, request != nil)
	if err != nil {
		return Result{}, err
	}
	if env.To.Session != "" && env.To.IfOffline == protocol.OfflineFail {
		live, err := s.sessionLive(ctx, tx, recipients[0].ID, env.To.Session, now)
		if err != nil {
			return Result{}, err
		}
		if !live {
			return Result{}, &protocol.Error{Class: protocol.ClassUnavailable, Code: "session_offline",
				Message:    fmt.Sprintf("session %q of %s is not connected and the sender asked to fail fast (to.ifOffline = fail)", env.To.Session, recipients[0].ID),
				NextAction: "retry later, or send with to.ifOffline = queue to leave it in the inbox"}
		}
	}
	res := Result{ID: env.ID, TraceID: env.TraceID, Deliveries: len(recipients), DeliveryIDs: make([]string, len(recipients))}
	for i := range recipients {
		res.DeliveryIDs[i] = protocol.NewID(protocol.PrefixDelivery)
	}
	msgRef, raw, err := s.insertMessageRef(ctx, tx, env, now, res, request)
	if err != nil {
		return Result{}, err
	}
	rank := env.Priority.Rank()
	expires := store.Millis(env.ExpiresAt())
	for i, r := range recipients {
		id := res.DeliveryIDs[i]
		// A socket of the recipient on this node with room takes the
		// delivery as it commits; otherwise it is queued for a claim.
		taker, leaseUntil, taken := s.reserve(r.ID, env.To.Session, id, now)
		state, attempt, lease, first := "queued", 0, int64(0), int64(0)
		if taken {
			state, attempt, lease, first = "leased", 1, store.Millis(leaseUntil), store.Millis(now)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO bus_deliveries (id, message_id, agent_id, session, priority, state, available_at, lease_until, attempt, expires_at, created_at, updated_at, first_delivered_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, msgRef, r.ID, env.To.Session, rank, state, store.Millis(now), lease, attempt, expires, store.Millis(now), store.Millis(now), first); err != nil {
			return Result{}, fmt.Errorf("insert delivery: %w", err)
		}
		if err := s.logRow(ctx, tx, logEntry{at: now, level: "info", msgID: env.ID, traceID: env.TraceID, from: env.From.Agent, to: r.ID, typ: string(env.Type), status: "sent", deliveryID: id}); err != nil {
			return Result{}, err
		}
		if !taken {
			tx.Notify(wakeChannel, r.ID)
			continue
		}
		d := Delivery{DeliveryID: id, SessionKey: env.To.Session, LeaseUntil: store.FromMillis(lease), Attempt: 1, Envelope: raw,
			AgentID: r.ID, MessageRef: msgRef, Sender: env.From.Agent, Priority: rank, CreatedAt: store.FromMillis(store.Millis(now)), AcceptedAt: store.FromMillis(store.Millis(now))}
		if err := s.delivered(ctx, tx, d, env, now); err != nil {
			return Result{}, err
		}
		tx.AfterCommit(func() { taker.Take(d) })
	}
	return res, nil
}

// delivered records the first hand-over of a delivery taken as it was
// accepted, as a claim records it: the "delivered" log row, the delivery
// latency, and the system sender's OnDelivered hook — run last in the
// transaction, so the hook sees the rows its subsystem writes about the
// delivery after sending it.
func (s *Service) delivered(ctx context.Context, tx *store.Tx, d Delivery, env *protocol.Envelope, now time.Time) error {
	if err := s.logRow(ctx, tx, logEntry{at: now, level: "info", msgID: env.ID, traceID: env.TraceID, from: d.Sender, to: d.AgentID, typ: string(env.Type),
		status: "delivered", deliveryID: d.DeliveryID, attempt: 1}); err != nil {
		return err
	}
	pr := priorityName(d.Priority)
	tx.AfterCommit(func() { s.metrics.deliveryLatency.WithLabelValues(pr).Observe(0) })
	if IsSystem(d.Sender) {
		if h, ok := s.system(d.Sender); ok && h.OnDelivered != nil {
			tx.Lastly(func() error { return h.OnDelivered(ctx, tx, d) })
		}
	}
	return nil
}

// recipients resolves to.agent (or a broadcast) into the agents that get a
// delivery, enforcing the routing rules for agent senders.
func (s *Service) recipients(ctx context.Context, tx *store.Tx, env *protocol.Envelope, sender agent.Agent, system, isReply bool) ([]agent.Agent, error) {
	if env.To.Agent == protocol.Broadcast {
		all, err := s.agents.ListTx(ctx, tx, agent.Filter{Tier: env.To.Tier})
		if err != nil {
			return nil, err
		}
		var out []agent.Agent
		for _, a := range all {
			if a.Disabled || a.ID == env.From.Agent {
				continue
			}
			if !system && s.cfg.Rules.Check(sender, a) != nil {
				continue
			}
			out = append(out, a)
		}
		if len(out) == 0 {
			return nil, &protocol.Error{Class: protocol.ClassUnavailable, Code: "no_recipients",
				Message:    fmt.Sprintf("the broadcast to tier %s reaches no agent the sender may send to under the routing rules", env.To.Tier),
				NextAction: "check the tier, or address agents directly"}
		}
		return out, nil
	}
	to, err := s.agent(ctx, tx, env.To.Agent)
	if err != nil {
		if protocol.CodeOf(err) == "agent_not_found" {
			return nil, &protocol.Error{Class: protocol.ClassUnavailable, Code: "unknown_recipient", Status: 404,
				Message: "to.agent: no agent with id " + env.To.Agent, FieldErrors: map[string]string{"to.agent": "unknown agent"},
				NextAction: "check the recipient id (GET /v1/agents lists agents)"}
		}
		return nil, err
	}
	if to.Disabled {
		return nil, protocol.Errorf(protocol.ClassUnavailable, "recipient_disabled", "to.agent: agent %s is disabled", to.ID)
	}
	if env.To.Tier != "" && env.To.Tier != to.Tier {
		return nil, &protocol.Error{Class: protocol.ClassInvalid, Code: "tier_mismatch",
			Message:     fmt.Sprintf("to.tier is %s but agent %s is %s", env.To.Tier, to.ID, to.Tier),
			FieldErrors: map[string]string{"to.tier": "must be " + string(to.Tier) + " or omitted"}}
	}
	env.To.Tier = to.Tier
	// A reply to a request that was delivered travels back on the edge the
	// request came through; rules apply to new conversations.
	if !system && !isReply {
		if err := s.cfg.Rules.Check(sender, to); err != nil {
			return nil, err
		}
	}
	return []agent.Agent{to}, nil
}

type requestRef struct {
	messageID string
}

// settleSystemAnswer marks the agent's request that a system response or
// error answers as answered, so the deadline sweep does not also time it out.
func (s *Service) settleSystemAnswer(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
	var reqID string
	switch env.Type {
	case protocol.TypeResponse:
		p, _ := env.Response()
		reqID = p.RequestID
	case protocol.TypeError:
		p, _ := env.ErrorPayload()
		reqID = p.RequestID
	}
	if reqID == "" {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE bus_messages SET deadline_state = 'answered' WHERE sender = ? AND client_id = ? AND type = 'request' AND deadline_state = 'pending'`,
		env.To.Agent, reqID); err != nil {
		return fmt.Errorf("mark request answered: %w", err)
	}
	return nil
}

// findRequest checks that reqID names a request sent by requester and
// delivered to responder.
func (s *Service) findRequest(ctx context.Context, tx *store.Tx, requester, reqID, responder string) (*requestRef, error) {
	var ref requestRef
	err := tx.QueryRow(ctx, `SELECT m.id FROM bus_messages m
		WHERE m.sender = ? AND m.client_id = ? AND m.type = 'request'
		AND EXISTS (SELECT 1 FROM bus_deliveries d WHERE d.message_id = m.id AND d.agent_id = ? AND d.attempt > 0)`,
		requester, reqID, responder).Scan(&ref.messageID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &protocol.Error{Class: protocol.ClassInvalid, Code: "unknown_request", Status: 422,
			Message:     fmt.Sprintf("payload.requestId %q names no request from %s that was delivered to you", reqID, requester),
			FieldErrors: map[string]string{"payload.requestId": "no such request delivered to the responder"},
			NextAction:  "answer a request you received: use its envelope id as requestId and its sender as to.agent"}
	}
	if err != nil {
		return nil, fmt.Errorf("find request: %w", err)
	}
	return &ref, nil
}

func (s *Service) insertMessage(ctx context.Context, tx *store.Tx, env *protocol.Envelope, now time.Time, res Result, req *requestRef) error {
	_, _, err := s.insertMessageRef(ctx, tx, env, now, res, req)
	return err
}

func (s *Service) insertMessageRef(ctx context.Context, tx *store.Tx, env *protocol.Envelope, now time.Time, res Result, req *requestRef) (string, json.RawMessage, error) {
	raw, err := json.Marshal(env)
	if err != nil {
		return "", nil, fmt.Errorf("encode envelope: %w", err)
	}
	resJSON, _ := json.Marshal(res)
	var deadline int64
	deadlineState := ""
	if env.Type == protocol.TypeRequest {
		if p, err := env.Request(); err == nil && p.Deadline != nil {
			deadline = store.Millis(*p.Deadline)
			deadlineState = "pending"
		}
	}
	reqRef := ""
	if req != nil {
		reqRef = req.messageID
		if _, err := tx.Exec(ctx, `UPDATE bus_messages SET deadline_state = 'answered' WHERE id = ? AND deadline_state = 'pending'`, req.messageID); err != nil {
			return "", nil, fmt.Errorf("mark request answered: %w", err)
		}
	}
	id := protocol.NewID(protocol.PrefixMessage)
	_, err = tx.Exec(ctx, `INSERT INTO bus_messages (id, sender, client_id, trace_id, type, priority, envelope, accepted_at, expires_at, request_ref, deadline_at, deadline_state, result)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, env.From.Agent, env.ID, env.TraceID, string(env.Type), env.Priority.Rank(), string(raw), store.Millis(now), store.Millis(env.ExpiresAt()),
		reqRef, deadline, deadlineState, string(resJSON))
	if err != nil {
		if store.IsUniqueViolation(err) {
			return "", nil, protocol.Conflict("duplicate_id", "an envelope with this id from this sender is being accepted concurrently; retry to get its result")
		}
		return "", nil, fmt.Errorf("insert message: %w", err)
	}
	return id, raw, nil
}

// agent returns a registered agent. Tier and parent never change after
// creation, so the routing data can come from a per-process cache.
func (s *Service) agent(ctx context.Context, tx *store.Tx, id string) (agent.Agent, error) {
	return s.agents.GetTx(ctx, tx, id)
}
