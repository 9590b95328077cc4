package bus

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Delivery is one envelope handed to one agent (optionally pinned to one of
// its sessions), with the lease under which the consumer holds it.
type Delivery struct {
	DeliveryID string          `json:"deliveryId"`
	SessionKey string          `json:"sessionKey"`
	LeaseUntil time.Time       `json:"leaseUntil"`
	Attempt    int             `json:"attempt"`
	Envelope   json.RawMessage `json:"envelope"`

	AgentID    string    `json:"-"`
	MessageRef string    `json:"-"`
	Sender     string    `json:"-"`
	Priority   int       `json:"-"`
	CreatedAt  time.Time `json:"-"`
	AcceptedAt time.Time `json:"-"`
}

// Decode parses the delivery's envelope.
func (d Delivery) Decode() (*protocol.Envelope, error) {
	var env protocol.Envelope
	if err := json.Unmarshal(d.Envelope, &env); err != nil {
		return nil, fmt.Errorf("delivery %s: %w", d.DeliveryID, err)
	}
	return &env, nil
}

// ClaimOptions select and lease deliveries.
type ClaimOptions struct {
	// Session limits the claim to deliveries addressed to this session or
	// to no session; "" claims every delivery of the agent.
	Session string
	Limit   int           // at most this many (default 10, max 100)
	Lease   time.Duration // lease length (default Config.LeaseDuration)
	// Overdue claims only deliveries past their priority's target.
	Overdue bool
}

func (s *Service) normalizeClaim(o *ClaimOptions) {
	if o.Limit <= 0 {
		o.Limit = 10
	}
	if o.Limit > 100 {
		o.Limit = 100
	}
	if o.Lease <= 0 {
		o.Lease = s.cfg.LeaseDuration
	}
}

// Claim leases up to opts.Limit available deliveries of agentID, highest
// priority first, then oldest. It never blocks.
func (s *Service) Claim(ctx context.Context, agentID string, opts ClaimOptions) ([]Delivery, error) {
	s.normalizeClaim(&opts)
	var out []Delivery
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		out, err = s.claimTx(ctx, tx, agentID, opts)
		return err
	})
	return out, err
}

// claimSQL is the claim's statement (arguments: lease end, now, now, then
// agent, now, now, the session if any, the overdue limits if asked).
func claimSQL(o ClaimOptions, skipLocked string) string {
	// The unary + keeps SQLite's planner off the availability and expiry
	// indexes, which without statistics it may prefer: they would read
	// every agent's queued deliveries and sort them, where the claim index
	// reads this agent's in delivery order.
	where := `agent_id = ? AND state = 'queued' AND +available_at <= ? AND +expires_at > ?`
	if o.Session != "" {
		where += ` AND (session = ? OR session = '')`
	}
	if o.Overdue {
		where += ` AND (` + overdueClause() + `)`
	}
	// The limit (1–100, see normalizeClaim) is part of the SQL text: SQLite
	// re-prepares a statement whenever a bound LIMIT changes value, and a
	// connection's free prefetch slots change with every claim.
	return `UPDATE bus_deliveries SET state = 'leased', lease_until = ?, attempt = attempt + 1, updated_at = ?,
		first_delivered_at = CASE WHEN first_delivered_at = 0 THEN ? ELSE first_delivered_at END
		WHERE id IN (SELECT id FROM bus_deliveries WHERE ` + where + ` ORDER BY priority, id LIMIT ` + strconv.Itoa(o.Limit) + skipLocked + `)
		RETURNING id, message_id, session, attempt, priority, created_at`
}

func (s *Service) claimTx(ctx context.Context, tx *store.Tx, agentID string, o ClaimOptions) ([]Delivery, error) {
	now := s.clock.Now()
	nowMs := store.Millis(now)
	args := []any{agentID, nowMs, nowMs}
	if o.Session != "" {
		args = append(args, o.Session)
	}
	if o.Overdue {
		args = append(args, overdueArgs(now)...)
	}
	leaseUntil := store.Millis(now.Add(o.Lease))
	q := claimSQL(o, s.db.SkipLocked())
	all := append([]any{leaseUntil, nowMs, nowMs}, args...)
	rows, err := tx.Query(ctx, q, all...)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	var ds []Delivery
	for rows.Next() {
		var d Delivery
		var created int64
		if err := rows.Scan(&d.DeliveryID, &d.MessageRef, &d.SessionKey, &d.Attempt, &d.Priority, &created); err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim: %w", err)
		}
		d.AgentID = agentID
		d.CreatedAt = store.FromMillis(created)
		d.LeaseUntil = store.FromMillis(leaseUntil)
		ds = append(ds, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if len(ds) == 0 {
		return nil, nil
	}
	sort.Slice(ds, func(i, j int) bool {
		if ds[i].Priority != ds[j].Priority {
			return ds[i].Priority < ds[j].Priority
		}
		return ds[i].DeliveryID < ds[j].DeliveryID
	})
	if err := s.loadEnvelopes(ctx, tx, ds); err != nil {
		return nil, err
	}
	for i := range ds {
		d := &ds[i]
		env, _ := d.Decode()
		latency := now.Sub(d.AcceptedAt)
		entry := logEntry{at: now, level: "info", msgID: envID(env), traceID: envTrace(env), from: d.Sender, to: agentID, typ: envType(env),
			status: "delivered", latency: latency, deliveryID: d.DeliveryID, attempt: d.Attempt}
		if err := s.logRow(ctx, tx, entry); err != nil {
			return nil, err
		}
		if d.Attempt == 1 {
			pr := priorityName(d.Priority)
			tx.AfterCommit(func() { s.metrics.deliveryLatency.WithLabelValues(pr).Observe(latency.Seconds()) })
			if IsSystem(d.Sender) {
				if h, ok := s.system(d.Sender); ok && h.OnDelivered != nil {
					if err := h.OnDelivered(ctx, tx, *d); err != nil {
						return nil, err
					}
				}
			}
		} else {
			tx.AfterCommit(func() { s.metrics.redelivered.Inc() })
		}
	}
	return ds, nil
}

func (s *Service) loadEnvelopes(ctx context.Context, q store.Q, ds []Delivery) error {
	ids := make([]any, 0, len(ds))
	seen := map[string]bool{}
	for _, d := range ds {
		if !seen[d.MessageRef] {
			seen[d.MessageRef] = true
			ids = append(ids, d.MessageRef)
		}
	}
	rows, err := q.Query(ctx, `SELECT id, sender, envelope, accepted_at FROM bus_messages WHERE id IN (`+store.InClause(len(ids))+`)`, ids...)
	if err != nil {
		return fmt.Errorf("load envelopes: %w", err)
	}
	defer rows.Close()
	type msg struct {
		sender   string
		env      string
		accepted int64
	}
	m := make(map[string]msg, len(ids))
	for rows.Next() {
		var id string
		var x msg
		if err := rows.Scan(&id, &x.sender, &x.env, &x.accepted); err != nil {
			return fmt.Errorf("load envelopes: %w", err)
		}
		m[id] = x
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range ds {
		x := m[ds[i].MessageRef]
		ds[i].Sender = x.sender
		ds[i].Envelope = json.RawMessage(x.env)
		ds[i].AcceptedAt = store.FromMillis(x.accepted)
	}
	return nil
}

// Receive claims deliveries, waiting up to wait for one to arrive when the
// inbox is empty (long poll). It returns an empty slice on timeout.
func (s *Service) Receive(ctx context.Context, agentID string, opts ClaimOptions, wait time.Duration) ([]Delivery, error) {
	sub := s.waiters.subscribe(agentID)
	defer sub.cancel()
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		ds, err := s.Claim(ctx, agentID, opts)
		if err != nil || len(ds) > 0 || wait <= 0 {
			return ds, err
		}
		select {
		case <-sub.ch:
		case <-timeout:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Subscribe returns a channel that receives a signal whenever new
// deliveries may be available for agentID (on this node or, with
// PostgreSQL, any node), and a function to stop.
func (s *Service) Subscribe(agentID string) (<-chan struct{}, func()) {
	sub := s.waiters.subscribe(agentID)
	return sub.ch, sub.cancel
}

// Settle is the outcome of ack, nack or extend.
type Settle struct {
	DeliveryID     string    `json:"deliveryId"`
	State          string    `json:"state"`
	Attempt        int       `json:"attempt"`
	LeaseUntil     time.Time `json:"leaseUntil,omitzero"`
	AlreadyApplied bool      `json:"alreadyApplied,omitempty"`
}

type deliveryRow struct {
	id, messageRef, agentID, session, state string
	attempt, priority                       int
	leaseUntil, createdAt, expiresAt        int64
}

func (s *Service) lockDelivery(ctx context.Context, tx *store.Tx, agentID, id string, admin bool) (deliveryRow, error) {
	var d deliveryRow
	q := `SELECT id, message_id, agent_id, session, state, attempt, priority, lease_until, created_at, expires_at FROM bus_deliveries WHERE id = ?`
	if tx.Dialect() == store.Postgres {
		q += " FOR UPDATE"
	}
	err := tx.QueryRow(ctx, q, id).Scan(&d.id, &d.messageRef, &d.agentID, &d.session, &d.state, &d.attempt, &d.priority, &d.leaseUntil, &d.createdAt, &d.expiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return d, protocol.NotFound("delivery_not_found", "no delivery "+id)
	}
	if err != nil {
		return d, fmt.Errorf("read delivery: %w", err)
	}
	if d.agentID != agentID && !admin {
		return d, protocol.Forbidden("not_your_delivery", "delivery "+id+" belongs to another agent; an agent can settle only its own deliveries")
	}
	return d, nil
}

// SettleOptions identify the lease being settled.
type SettleOptions struct {
	// Attempt is the attempt number the consumer received; 0 means the
	// current attempt, which must still hold an unexpired lease. A stale
	// attempt (the delivery was redelivered since) is refused.
	Attempt int
	Admin   bool // the admin may settle any agent's delivery
}

// check refuses attempt numbers no delivery can have, before any lookup.
func (o SettleOptions) check() error {
	if o.Attempt < 0 {
		return protocol.Invalid("attempt", "must be the attempt number you received (1 or more), or 0 for the current lease")
	}
	return nil
}

func leaseError(d deliveryRow, o SettleOptions, now time.Time) error {
	if o.Attempt != 0 && o.Attempt != d.attempt {
		return &protocol.Error{Class: protocol.ClassInvalid, Code: "stale_attempt", Status: 409,
			Message:    fmt.Sprintf("attempt %d of delivery %s is stale: it was redelivered (current attempt %d); the newer attempt wins", o.Attempt, d.id, d.attempt),
			NextAction: "drop this copy; the current holder settles it"}
	}
	if d.state != "leased" {
		return &protocol.Error{Class: protocol.ClassInvalid, Code: "delivery_not_leased", Status: 409,
			Message:    fmt.Sprintf("delivery %s is %s, not leased", d.id, d.state),
			NextAction: "claim it again from the inbox if it is still queued"}
	}
	if o.Attempt == 0 && store.FromMillis(d.leaseUntil).Before(now) {
		return &protocol.Error{Class: protocol.ClassInvalid, Code: "lease_expired", Status: 409,
			Message:    fmt.Sprintf("the lease on delivery %s expired at %s; it will be redelivered", d.id, store.FromMillis(d.leaseUntil).Format(time.RFC3339)),
			NextAction: "extend leases before they expire, or pass the attempt number you received to settle a late copy"}
	}
	return nil
}

// Ack marks a delivery processed. Repeating an ack of the same attempt is
// "already applied", never an error.
func (s *Service) Ack(ctx context.Context, agentID, id string, o SettleOptions) (Settle, error) {
	var out Settle
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		out, err = s.AckTx(ctx, tx, agentID, id, o)
		return err
	})
	return out, err
}

// AckTx acknowledges inside the caller's transaction (a relay reply records
// the turn and acks the delivery it answers atomically).
func (s *Service) AckTx(ctx context.Context, tx *store.Tx, agentID, id string, o SettleOptions) (Settle, error) {
	if err := o.check(); err != nil {
		return Settle{}, err
	}
	now := s.clock.Now()
	d, err := s.lockDelivery(ctx, tx, agentID, id, o.Admin)
	if err != nil {
		return Settle{}, err
	}
	if d.state == "acked" && (o.Attempt == 0 || o.Attempt == d.attempt) {
		return Settle{DeliveryID: id, State: "acked", Attempt: d.attempt, AlreadyApplied: true}, nil
	}
	if err := leaseError(d, o, now); err != nil {
		return Settle{}, err
	}
	if _, err := tx.Exec(ctx, `UPDATE bus_deliveries SET state = 'acked', lease_until = 0, updated_at = ? WHERE id = ?`, store.Millis(now), id); err != nil {
		return Settle{}, fmt.Errorf("ack: %w", err)
	}
	m, err := s.messageMeta(ctx, tx, d.messageRef)
	if err != nil {
		return Settle{}, err
	}
	latency := now.Sub(m.acceptedAt)
	if err := s.logRow(ctx, tx, logEntry{at: now, level: "info", msgID: m.clientID, traceID: m.traceID, from: m.sender, to: d.agentID, typ: m.typ,
		status: "processed", latency: latency, deliveryID: id, attempt: d.attempt}); err != nil {
		return Settle{}, err
	}
	pr := priorityName(d.priority)
	tx.AfterCommit(func() { s.metrics.observeProcessed(pr, latency) })
	return Settle{DeliveryID: id, State: "acked", Attempt: d.attempt}, nil
}

// NackOptions give the reason and the redelivery delay of a nack.
type NackOptions struct {
	SettleOptions
	Delay time.Duration
	Error string
}

// Nack gives a delivery back: it is redelivered after Delay, or dead-lettered
// when it has used up its attempts.
func (s *Service) Nack(ctx context.Context, agentID, id string, o NackOptions) (Settle, error) {
	if err := o.check(); err != nil {
		return Settle{}, err
	}
	var out Settle
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		now := s.clock.Now()
		d, err := s.lockDelivery(ctx, tx, agentID, id, o.Admin)
		if err != nil {
			return err
		}
		if (d.state == "queued" || d.state == "dead") && (o.Attempt == 0 || o.Attempt == d.attempt) && d.attempt > 0 {
			out = Settle{DeliveryID: id, State: d.state, Attempt: d.attempt, AlreadyApplied: true}
			return nil
		}
		if err := leaseError(d, o.SettleOptions, now); err != nil {
			return err
		}
		m, err := s.messageMeta(ctx, tx, d.messageRef)
		if err != nil {
			return err
		}
		errText := truncate(o.Error, 2000)
		if err := s.logRow(ctx, tx, logEntry{at: now, level: "warn", msgID: m.clientID, traceID: m.traceID, from: m.sender, to: d.agentID, typ: m.typ,
			status: "failed", latency: now.Sub(m.acceptedAt), deliveryID: id, attempt: d.attempt, detail: errText}); err != nil {
			return err
		}
		tx.AfterCommit(func() { s.metrics.observeFailed() })
		if d.attempt >= s.cfg.MaxAttempts {
			if err := s.killTx(ctx, tx, d, m, "max_attempts", errText, now); err != nil {
				return err
			}
			out = Settle{DeliveryID: id, State: "dead", Attempt: d.attempt}
			return nil
		}
		avail := now.Add(o.Delay)
		if _, err := tx.Exec(ctx, `UPDATE bus_deliveries SET state = 'queued', lease_until = 0, available_at = ?, last_error = ?, updated_at = ? WHERE id = ?`,
			store.Millis(avail), errText, store.Millis(now), id); err != nil {
			return fmt.Errorf("nack: %w", err)
		}
		if o.Delay <= 0 {
			tx.Notify(wakeChannel, d.agentID)
		}
		out = Settle{DeliveryID: id, State: "queued", Attempt: d.attempt}
		return nil
	})
	return out, err
}

// MaxExtend bounds one lease extension.
const MaxExtend = time.Hour

// Extend lengthens the current lease to at least now+by.
func (s *Service) Extend(ctx context.Context, agentID, id string, by time.Duration, o SettleOptions) (Settle, error) {
	if by <= 0 || by > MaxExtend {
		return Settle{}, protocol.Invalid("seconds", fmt.Sprintf("must be between 1 and %d", int(MaxExtend/time.Second)))
	}
	if err := o.check(); err != nil {
		return Settle{}, err
	}
	var out Settle
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		now := s.clock.Now()
		d, err := s.lockDelivery(ctx, tx, agentID, id, o.Admin)
		if err != nil {
			return err
		}
		if err := leaseError(d, o, now); err != nil {
			return err
		}
		until := now.Add(by)
		if cur := store.FromMillis(d.leaseUntil); cur.After(until) {
			until = cur
		}
		if _, err := tx.Exec(ctx, `UPDATE bus_deliveries SET lease_until = ?, updated_at = ? WHERE id = ?`, store.Millis(until), store.Millis(now), id); err != nil {
			return fmt.Errorf("extend: %w", err)
		}
		out = Settle{DeliveryID: id, State: "leased", Attempt: d.attempt, LeaseUntil: store.FromMillis(store.Millis(until))}
		return nil
	})
	return out, err
}

type messageMeta struct {
	clientID, traceID, sender, typ string
	acceptedAt                     time.Time
	envelope                       string
}

func (s *Service) messageMeta(ctx context.Context, q store.Q, ref string) (messageMeta, error) {
	var m messageMeta
	var acc int64
	err := q.QueryRow(ctx, `SELECT client_id, trace_id, sender, type, accepted_at, envelope FROM bus_messages WHERE id = ?`, ref).
		Scan(&m.clientID, &m.traceID, &m.sender, &m.typ, &acc, &m.envelope)
	if err != nil {
		return m, fmt.Errorf("read message %s: %w", ref, err)
	}
	m.acceptedAt = store.FromMillis(acc)
	return m, nil
}

// killTx moves a delivery to the dead letters and tells its system sender.
func (s *Service) killTx(ctx context.Context, tx *store.Tx, d deliveryRow, m messageMeta, reason, detail string, now time.Time) error {
	if _, err := tx.Exec(ctx, `UPDATE bus_deliveries SET state = 'dead', dead_reason = ?, last_error = CASE WHEN ? = '' THEN last_error ELSE ? END, lease_until = 0, updated_at = ? WHERE id = ?`,
		reason, detail, detail, store.Millis(now), d.id); err != nil {
		return fmt.Errorf("dead-letter: %w", err)
	}
	if err := s.logRow(ctx, tx, logEntry{at: now, level: "error", msgID: m.clientID, traceID: m.traceID, from: m.sender, to: d.agentID, typ: m.typ,
		status: "dead", latency: now.Sub(m.acceptedAt), deliveryID: d.id, attempt: d.attempt, detail: reason + ifNotEmpty(": ", detail)}); err != nil {
		return err
	}
	tx.AfterCommit(func() { s.metrics.dead.WithLabelValues(reason).Inc() })
	if IsSystem(m.sender) {
		if h, ok := s.system(m.sender); ok && h.OnDead != nil {
			del := Delivery{DeliveryID: d.id, SessionKey: d.session, Attempt: d.attempt, Envelope: json.RawMessage(m.envelope),
				AgentID: d.agentID, MessageRef: d.messageRef, Sender: m.sender, Priority: d.priority, CreatedAt: store.FromMillis(d.createdAt), AcceptedAt: m.acceptedAt}
			if err := h.OnDead(ctx, tx, del, reason); err != nil {
				return err
			}
		}
	}
	return nil
}

func ifNotEmpty(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func priorityName(rank int) string {
	for _, p := range protocol.Priorities {
		if p.Rank() == rank {
			return string(p)
		}
	}
	return string(protocol.PriorityNormal)
}

// ---- waiters --------------------------------------------------------------

// waiters wakes local consumers (sockets, long polls) of an agent when a
// commit may have made deliveries available.
type waiters struct {
	mu   sync.Mutex
	subs map[string]map[*waiter]struct{}
}

type waiter struct {
	ch     chan struct{}
	cancel func()
}

func newWaiters() *waiters { return &waiters{subs: map[string]map[*waiter]struct{}{}} }

func (w *waiters) subscribe(agentID string) *waiter {
	wt := &waiter{ch: make(chan struct{}, 1)}
	w.mu.Lock()
	if w.subs[agentID] == nil {
		w.subs[agentID] = map[*waiter]struct{}{}
	}
	w.subs[agentID][wt] = struct{}{}
	w.mu.Unlock()
	wt.cancel = func() {
		w.mu.Lock()
		delete(w.subs[agentID], wt)
		if len(w.subs[agentID]) == 0 {
			delete(w.subs, agentID)
		}
		w.mu.Unlock()
	}
	return wt
}

func (w *waiters) wake(agentID string) {
	w.mu.Lock()
	for wt := range w.subs[agentID] {
		select {
		case wt.ch <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
}

func (w *waiters) wakeAll() {
	w.mu.Lock()
	for _, set := range w.subs {
		for wt := range set {
			select {
			case wt.ch <- struct{}{}:
			default:
			}
		}
	}
	w.mu.Unlock()
}

// Wake signals local consumers of agentID (used after out-of-band changes).
func (s *Service) Wake(agentID string) { s.waiters.wake(agentID) }

// CompleteTx marks a delivery processed whatever its lease state (queued
// again after a lost lease, or leased by any connection), inside the
// caller's transaction. System senders use it when the recipient answered
// through another path (a Claworld reply over HTTP, say), so the delivery
// is never pushed again. Completing an acked delivery is a no-op; a dead
// one is left dead. It reports whether anything changed.
func (s *Service) CompleteTx(ctx context.Context, tx *store.Tx, id string) (bool, error) {
	now := s.clock.Now()
	var d deliveryRow
	var m messageMeta
	var accepted int64
	// The delivery with what the log needs of its message, in one read.
	q := `SELECT d.id, d.message_id, d.agent_id, d.session, d.state, d.attempt, d.priority, d.lease_until, d.created_at, d.expires_at,
		m.client_id, m.trace_id, m.sender, m.type, m.accepted_at
		FROM bus_deliveries d JOIN bus_messages m ON m.id = d.message_id WHERE d.id = ?`
	if tx.Dialect() == store.Postgres {
		q += " FOR UPDATE OF d"
	}
	err := tx.QueryRow(ctx, q, id).Scan(&d.id, &d.messageRef, &d.agentID, &d.session, &d.state, &d.attempt, &d.priority, &d.leaseUntil, &d.createdAt, &d.expiresAt,
		&m.clientID, &m.traceID, &m.sender, &m.typ, &accepted)
	if errors.Is(err, sql.ErrNoRows) {
		return false, protocol.NotFound("delivery_not_found", "no delivery "+id)
	}
	if err != nil {
		return false, fmt.Errorf("read delivery: %w", err)
	}
	if d.state != "queued" && d.state != "leased" {
		return false, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE bus_deliveries SET state = 'acked', lease_until = 0, updated_at = ? WHERE id = ?`, store.Millis(now), id); err != nil {
		return false, fmt.Errorf("complete: %w", err)
	}
	latency := now.Sub(store.FromMillis(accepted))
	if err := s.logRow(ctx, tx, logEntry{at: now, level: "info", msgID: m.clientID, traceID: m.traceID, from: m.sender, to: d.agentID, typ: m.typ,
		status: "processed", latency: latency, deliveryID: id, attempt: d.attempt}); err != nil {
		return false, err
	}
	pr := priorityName(d.priority)
	tx.AfterCommit(func() { s.metrics.observeProcessed(pr, latency) })
	return true, nil
}

// ExtendTx lengthens the lease of a leased delivery to at least now+by,
// for system senders whose recipients acknowledge receipt in their own
// dialect (a Claworld "accepted" frame). Deliveries in other states are
// left alone.
func (s *Service) ExtendTx(ctx context.Context, tx *store.Tx, id string, by time.Duration) error {
	now := s.clock.Now()
	_, err := tx.Exec(ctx, `UPDATE bus_deliveries SET lease_until = CASE WHEN lease_until > ? THEN lease_until ELSE ? END, updated_at = ?
		WHERE id = ? AND state = 'leased'`, store.Millis(now.Add(by)), store.Millis(now.Add(by)), store.Millis(now), id)
	if err != nil {
		return fmt.Errorf("extend: %w", err)
	}
	return nil
}
