package bus

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Consumer is a socket on this node that can take a delivery the moment it
// is accepted. Leasing a delivery inside the accept's transaction and
// pushing it right after that commit spares the delivery a second commit
// (the consumer's claim in a later batch) — half of an idle inbox's
// accept→delivery latency — and the writer the claim's work.
//
// Every method is called on the store's writer goroutine (Push after the
// commit, the others inside the transaction) and must not block.
type Consumer interface {
	// Session is the session the consumer is bound to; "" receives the
	// deliveries of every session of the agent, like a claim without one.
	Session() string
	// Lease is the lease length of deliveries pushed to the consumer; 0
	// takes Config.LeaseDuration.
	Lease() time.Duration
	// Reserve takes a prefetch slot for a delivery about to be leased to
	// this consumer. It refuses when the consumer is full, closing, or in
	// the middle of a claim of its own (a delivery it is about to claim
	// would otherwise be overtaken by a newer one pushed at once).
	Reserve() bool
	// Release gives the reserved slot back: the accept did not commit.
	Release()
	// Push hands over the leased delivery once the accept has committed.
	// If the consumer is gone by then, the lease runs out and the sweeper
	// requeues the delivery, as after any lost push.
	Push(d Delivery)
}

// consumers are the local sockets, by agent id.
type consumers struct {
	mu    sync.RWMutex
	byAgt map[string][]Consumer
}

// AddConsumer registers a local socket of agentID for push on accept; the
// returned function removes it. A consumer also keeps claiming what is
// queued for it (at connect, after a lease ran out, after a nack, from
// other nodes): push on accept only skips the claim when the inbox is empty.
func (s *Service) AddConsumer(agentID string, c Consumer) (remove func()) {
	s.consumers.mu.Lock()
	s.consumers.byAgt[agentID] = append(s.consumers.byAgt[agentID], c)
	s.consumers.mu.Unlock()
	return func() {
		s.consumers.mu.Lock()
		defer s.consumers.mu.Unlock()
		list := s.consumers.byAgt[agentID]
		for i, x := range list {
			if x == c {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(s.consumers.byAgt, agentID)
		} else {
			s.consumers.byAgt[agentID] = list
		}
	}
}

// reserveConsumer finds a local consumer of agentID that would receive a
// delivery addressed to session and reserves one of its prefetch slots. A
// consumer bound to that very session is preferred to one for all sessions.
func (s *Service) reserveConsumer(agentID, session string) Consumer {
	s.consumers.mu.RLock()
	defer s.consumers.mu.RUnlock()
	list := s.consumers.byAgt[agentID]
	if len(list) == 0 {
		return nil
	}
	if session != "" {
		for _, c := range list {
			if c.Session() == session && c.Reserve() {
				return c
			}
		}
		for _, c := range list {
			if c.Session() == "" && c.Reserve() {
				return c
			}
		}
		return nil
	}
	for _, c := range list {
		if c.Reserve() {
			return c
		}
	}
	return nil
}

// queuedAhead finds a queued, available delivery of an agent of the same
// or a higher priority (arguments: agent, priority rank, now, now). It
// reads the claim index as the claim does (see claimTx for the unary +).
const queuedAhead = `SELECT 1 FROM bus_deliveries WHERE agent_id = ? AND state = 'queued' AND priority <= ? AND +available_at <= ? AND +expires_at > ?`

// pushTarget decides, inside the accept's transaction, whether a delivery
// of priority rank to (agentID, session) is leased to a local consumer at
// once. It is, when a consumer has a free prefetch slot and nothing it
// could claim comes first (a queued, available delivery of the same or a
// higher priority): otherwise the delivery is queued and the consumer's
// claim takes the inbox in order. The slot is given back if the
// transaction does not commit.
func (s *Service) pushTarget(ctx context.Context, tx *store.Tx, agentID, session string, rank int, now time.Time) (Consumer, error) {
	c := s.reserveConsumer(agentID, session)
	if c == nil {
		return nil, nil
	}
	nowMs := store.Millis(now)
	q := queuedAhead
	args := []any{agentID, rank, nowMs, nowMs}
	if cs := c.Session(); cs != "" {
		q += ` AND (session = ? OR session = '')`
		args = append(args, cs)
	}
	var one int
	err := tx.QueryRow(ctx, q+` LIMIT 1`, args...).Scan(&one)
	switch {
	case err == nil:
		c.Release() // older deliveries wait: the consumer claims them in order
		return nil, nil
	case !errors.Is(err, sql.ErrNoRows):
		c.Release()
		return nil, fmt.Errorf("push on accept: %w", err)
	}
	tx.OnRollback(c.Release)
	return c, nil
}

// leaseOnAccept is the claim's bookkeeping for a delivery leased inside
// its accept: the delivered log row and the latency metric. Deliveries of
// system senders are never pushed this way (see accept), so no
// OnDelivered hook runs here.
func (s *Service) leaseOnAccept(ctx context.Context, tx *store.Tx, c Consumer, d Delivery, env *protocol.Envelope, now time.Time) error {
	if err := s.logRow(ctx, tx, logEntry{at: now, level: "info", msgID: env.ID, traceID: env.TraceID, from: env.From.Agent, to: d.AgentID,
		typ: string(env.Type), status: "delivered", deliveryID: d.DeliveryID, attempt: d.Attempt}); err != nil {
		return err
	}
	pr := priorityName(d.Priority)
	tx.AfterCommit(func() {
		s.metrics.deliveryLatency.WithLabelValues(pr).Observe(0)
		s.metrics.pushedOnAccept.Inc()
		c.Push(d)
	})
	return nil
}

// rawEnvelope is the stored form of an envelope, which a claim hands out.
func rawEnvelope(env *protocol.Envelope) (json.RawMessage, error) {
	raw, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	return raw, nil
}
