package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Run sweeps until ctx ends: expired leases are requeued (or dead-lettered
// after MaxAttempts), expired deliveries are dead-lettered, delayed
// deliveries that became available wake their consumers, and requests whose
// deadline passed unanswered get an E004 error envelope. On PostgreSQL every
// node sweeps; the row locks make it safe.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	last := s.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Sweep(ctx, last); err != nil && ctx.Err() == nil {
				s.log.Warn("bus sweep failed", "err", err)
			}
			last = s.clock.Now()
		}
	}
}

// sweepBatch bounds the rows one sweep transaction touches, so a backlog
// never holds the writer for long.
const sweepBatch = 500

// Sweep runs one sweep. since is the time of the previous sweep: deliveries
// whose nack delay ended after it are announced to their consumers.
func (s *Service) Sweep(ctx context.Context, since time.Time) error {
	if err := s.FlushPresence(ctx); err != nil {
		return err
	}
	for {
		n, err := s.sweepOnce(ctx)
		if err != nil {
			return err
		}
		if n < sweepBatch {
			break
		}
	}
	if err := s.sweepDeadlines(ctx); err != nil {
		return err
	}
	return s.wakeDelayed(ctx, since)
}

// sweepDue selects deliveries whose lease or TTL ran out (arguments: now
// four times, then the limit). The lease and expiry indexes are partial
// (leased rows; queued and leased rows); given the OR of the two tests and
// a LIMIT of sweepBatch, SQLite walks the primary key in id order through
// every delivery ever made instead of reading them. The UNION reads each
// index on its own; the outer condition repeats the test so that
// PostgreSQL checks it again on a row it locks after a concurrent change.
const sweepDue = `SELECT id, message_id, agent_id, session, state, attempt, priority, lease_until, created_at, expires_at FROM bus_deliveries
	WHERE id IN (SELECT id FROM bus_deliveries WHERE state = 'leased' AND lease_until <= ?
		UNION ALL SELECT id FROM bus_deliveries WHERE state IN ('queued', 'leased') AND expires_at <= ?)
	AND ((state = 'leased' AND lease_until <= ?) OR (state IN ('queued', 'leased') AND expires_at <= ?))
	ORDER BY id LIMIT ?`

func (s *Service) sweepOnce(ctx context.Context) (int, error) {
	var touched int
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		now := s.clock.Now()
		nowMs := store.Millis(now)
		rows, err := tx.Query(ctx, sweepDue+s.db.SkipLocked(), nowMs, nowMs, nowMs, nowMs, sweepBatch)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		var ds []deliveryRow
		for rows.Next() {
			var d deliveryRow
			if err := rows.Scan(&d.id, &d.messageRef, &d.agentID, &d.session, &d.state, &d.attempt, &d.priority, &d.leaseUntil, &d.createdAt, &d.expiresAt); err != nil {
				rows.Close()
				return fmt.Errorf("sweep: %w", err)
			}
			ds = append(ds, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		touched = len(ds)
		for _, d := range ds {
			m, err := s.messageMeta(ctx, tx, d.messageRef)
			if err != nil {
				return err
			}
			switch {
			case d.expiresAt <= nowMs:
				if err := s.logRow(ctx, tx, logEntry{at: now, level: "warn", msgID: m.clientID, traceID: m.traceID, from: m.sender, to: d.agentID, typ: m.typ,
					status: "expired", latency: now.Sub(m.acceptedAt), deliveryID: d.id, attempt: d.attempt}); err != nil {
					return err
				}
				tx.AfterCommit(func() { s.metrics.expired.Inc() })
				if err := s.killTx(ctx, tx, d, m, "expired", "", now); err != nil {
					return err
				}
			case d.attempt >= s.cfg.MaxAttempts:
				if err := s.killTx(ctx, tx, d, m, "max_attempts", "lease expired on the last attempt", now); err != nil {
					return err
				}
			default:
				if _, err := tx.Exec(ctx, `UPDATE bus_deliveries SET state = 'queued', lease_until = 0, available_at = ?, last_error = 'lease expired', updated_at = ? WHERE id = ?`,
					nowMs, nowMs, d.id); err != nil {
					return fmt.Errorf("requeue: %w", err)
				}
				tx.Notify(wakeChannel, d.agentID)
			}
		}
		return nil
	})
	return touched, err
}

// sweepDeadlines answers requests whose deadline passed with an E004 error
// envelope from the bus to the requester.
func (s *Service) sweepDeadlines(ctx context.Context) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		now := s.clock.Now()
		rows, err := tx.Query(ctx, `SELECT id, sender, client_id, trace_id, envelope FROM bus_messages
			WHERE deadline_state = 'pending' AND deadline_at <= ? ORDER BY deadline_at LIMIT ?`+s.db.SkipLocked(), store.Millis(now), sweepBatch)
		if err != nil {
			return fmt.Errorf("deadlines: %w", err)
		}
		type req struct{ id, sender, clientID, traceID, env string }
		var reqs []req
		for rows.Next() {
			var r req
			if err := rows.Scan(&r.id, &r.sender, &r.clientID, &r.traceID, &r.env); err != nil {
				rows.Close()
				return err
			}
			reqs = append(reqs, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range reqs {
			if _, err := tx.Exec(ctx, `UPDATE bus_messages SET deadline_state = 'timed_out' WHERE id = ?`, r.id); err != nil {
				return err
			}
			var orig protocol.Envelope
			_ = json.Unmarshal([]byte(r.env), &orig)
			errEnv := &protocol.Envelope{
				ID: protocol.NewID(protocol.PrefixMessage), TraceID: r.traceID,
				From: protocol.Address{Agent: "system:bus"}, To: protocol.Address{Agent: r.sender, Session: orig.From.Session},
				Type: protocol.TypeError, Priority: orig.Priority,
				Payload: protocol.MustJSON(protocol.ErrorPayload{RequestID: r.clientID, Code: protocol.ClassTimeout, Recoverable: true,
					Message:    fmt.Sprintf("no response to request %s (to %s) by its deadline", r.clientID, orig.To.Agent),
					Suggestion: "retry with a later deadline, or check that the recipient is online"}),
			}
			if IsSystem(r.sender) {
				// A system requester learns of its timeout through its hooks.
				if h, ok := s.system(r.sender); ok && h.OnMessage != nil {
					if err := h.OnMessage(ctx, tx, errEnv); err != nil {
						return err
					}
				}
				continue
			}
			if _, err := s.SendSystemTx(ctx, tx, errEnv); err != nil {
				return fmt.Errorf("deadline error envelope: %w", err)
			}
		}
		return nil
	})
}

// wakeDelayed tells consumers about deliveries whose nack delay ended.
func (s *Service) wakeDelayed(ctx context.Context, since time.Time) error {
	now := s.clock.Now()
	rows, err := s.db.Query(ctx, `SELECT DISTINCT agent_id FROM bus_deliveries WHERE state = 'queued' AND available_at > ? AND available_at <= ?`,
		store.Millis(since), store.Millis(now))
	if err != nil {
		return fmt.Errorf("wake delayed: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		s.waiters.wake(id)
	}
	return rows.Err()
}

// overdueClause matches deliveries older than their priority's target.
func overdueClause() string {
	return `(priority = 0 AND created_at < ?) OR (priority = 1 AND created_at < ?) OR (priority = 2 AND created_at < ?) OR (priority = 3 AND created_at < ?)`
}

func overdueArgs(now time.Time) []any {
	out := make([]any, 0, 4)
	for _, p := range []protocol.Priority{protocol.PriorityCritical, protocol.PriorityHigh, protocol.PriorityNormal, protocol.PriorityLow} {
		out = append(out, store.Millis(now.Add(-p.Target())))
	}
	return out
}
