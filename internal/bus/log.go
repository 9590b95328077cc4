package bus

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// LogRow is one transition in the message log, in the seed's log format
// plus the delivery it concerns.
type LogRow struct {
	Timestamp  time.Time `json:"timestamp"`
	Level      string    `json:"level"`
	MsgID      string    `json:"msgId"`
	TraceID    string    `json:"traceId"`
	From       string    `json:"from"`
	To         string    `json:"to"`
	Type       string    `json:"type"`
	Status     string    `json:"status"` // sent, delivered, processed, failed, expired, dead, replayed
	LatencyMs  int64     `json:"latencyMs"`
	DeliveryID string    `json:"deliveryId,omitempty"`
	Attempt    int       `json:"attempt,omitempty"`
	Detail     string    `json:"detail,omitempty"`
}

type logEntry struct {
	at                                           time.Time
	level, msgID, traceID, from, to, typ, status string
	latency                                      time.Duration
	deliveryID                                   string
	attempt                                      int
	detail                                       string
}

func (s *Service) logRow(ctx context.Context, tx *store.Tx, e logEntry) error {
	_, err := tx.Exec(ctx, `INSERT INTO bus_log (at, level, msg_id, trace_id, from_agent, to_agent, type, status, latency_ms, delivery_id, attempt, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		store.Millis(e.at), e.level, e.msgID, e.traceID, e.from, e.to, e.typ, e.status, e.latency.Milliseconds(), e.deliveryID, e.attempt, e.detail)
	if err != nil {
		return fmt.Errorf("message log: %w", err)
	}
	return nil
}

// Trace returns the message log of a trace in order. An agent sees only
// the rows it sent or received; the admin sees all. An empty answer is an
// E002 trace_not_found (so agents cannot probe other agents' traces).
func (s *Service) Trace(ctx context.Context, traceID, viewer string, admin bool) ([]LogRow, error) {
	q := `SELECT at, level, msg_id, trace_id, from_agent, to_agent, type, status, latency_ms, delivery_id, attempt, detail FROM bus_log WHERE trace_id = ?`
	args := []any{traceID}
	if !admin {
		q += ` AND (from_agent = ? OR to_agent = ?)`
		args = append(args, viewer, viewer)
	}
	q += ` ORDER BY id LIMIT 5000`
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer rows.Close()
	out := []LogRow{}
	for rows.Next() {
		var r LogRow
		var at int64
		if err := rows.Scan(&at, &r.Level, &r.MsgID, &r.TraceID, &r.From, &r.To, &r.Type, &r.Status, &r.LatencyMs, &r.DeliveryID, &r.Attempt, &r.Detail); err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		r.Timestamp = store.FromMillis(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, &protocol.Error{Class: protocol.ClassUnavailable, Code: "trace_not_found", Status: 404,
			Message: "no message log rows for trace " + traceID + " that you may see", NextAction: "check the trace id (it is echoed in every send result)"}
	}
	return out, nil
}

// TraceOfMessage finds the trace id of a message by its envelope id, for
// looking up traces by message id. Envelope ids are unique per sender only,
// so an agent's lookup considers just the messages it sent or received
// (its own first, then the newest); the admin's takes the newest of all.
func (s *Service) TraceOfMessage(ctx context.Context, msgID, viewer string, admin bool) (string, error) {
	q := `SELECT m.trace_id FROM bus_messages m WHERE m.client_id = ? ORDER BY m.accepted_at DESC LIMIT 1`
	args := []any{msgID}
	if !admin {
		q = `SELECT m.trace_id FROM bus_messages m WHERE m.client_id = ?
			AND (m.sender = ? OR EXISTS (SELECT 1 FROM bus_deliveries d WHERE d.message_id = m.id AND d.agent_id = ?))
			ORDER BY CASE WHEN m.sender = ? THEN 0 ELSE 1 END, m.accepted_at DESC LIMIT 1`
		args = append(args, viewer, viewer, viewer)
	}
	var t string
	err := s.db.QueryRow(ctx, q, args...).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return "", protocol.NotFound("message_not_found", "no message with id "+msgID+" that you sent or received")
	}
	if err != nil {
		return "", fmt.Errorf("trace of message %s: %w", msgID, err)
	}
	return t, nil
}

func envID(e *protocol.Envelope) string {
	if e == nil {
		return ""
	}
	return e.ID
}

func envTrace(e *protocol.Envelope) string {
	if e == nil {
		return ""
	}
	return e.TraceID
}

func envType(e *protocol.Envelope) string {
	if e == nil {
		return ""
	}
	return string(e.Type)
}

// DeadLetter is a dead delivery with its reason and history.
type DeadLetter struct {
	DeliveryID string          `json:"deliveryId"`
	AgentID    string          `json:"agentId"`
	SessionKey string          `json:"sessionKey,omitempty"`
	Reason     string          `json:"reason"` // expired | max_attempts
	LastError  string          `json:"lastError,omitempty"`
	Attempts   int             `json:"attempts"`
	DeadAt     time.Time       `json:"deadAt"`
	ReplayedAs string          `json:"replayedAs,omitempty"`
	Envelope   json.RawMessage `json:"envelope"`
	History    []LogRow        `json:"history"`
}

// DeadLetterFilter narrows ListDeadLetters.
type DeadLetterFilter struct {
	AgentID string // "" = all (admin only)
	Reason  string
	Limit   int
}

// ListDeadLetters returns dead deliveries, newest first, with their history.
func (s *Service) ListDeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	q := `SELECT d.id, d.agent_id, d.session, d.dead_reason, d.last_error, d.attempt, d.updated_at, d.replayed_as, m.envelope
		FROM bus_deliveries d JOIN bus_messages m ON m.id = d.message_id WHERE d.state IN ('dead', 'replayed')`
	var args []any
	if f.AgentID != "" {
		q += ` AND d.agent_id = ?`
		args = append(args, f.AgentID)
	}
	if f.Reason != "" {
		q += ` AND d.dead_reason = ?`
		args = append(args, f.Reason)
	}
	q += fmt.Sprintf(` ORDER BY d.updated_at DESC, d.id DESC LIMIT %d`, f.Limit)
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	out := []DeadLetter{}
	for rows.Next() {
		var d DeadLetter
		var at int64
		var env string
		if err := rows.Scan(&d.DeliveryID, &d.AgentID, &d.SessionKey, &d.Reason, &d.LastError, &d.Attempts, &at, &d.ReplayedAs, &env); err != nil {
			rows.Close()
			return nil, fmt.Errorf("dead letters: %w", err)
		}
		d.DeadAt = store.FromMillis(at)
		d.Envelope = json.RawMessage(env)
		out = append(out, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		h, err := s.deliveryHistory(ctx, out[i].DeliveryID)
		if err != nil {
			return nil, err
		}
		out[i].History = h
	}
	return out, nil
}

func (s *Service) deliveryHistory(ctx context.Context, deliveryID string) ([]LogRow, error) {
	rows, err := s.db.Query(ctx, `SELECT at, level, msg_id, trace_id, from_agent, to_agent, type, status, latency_ms, delivery_id, attempt, detail
		FROM bus_log WHERE delivery_id = ? ORDER BY id`, deliveryID)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer rows.Close()
	out := []LogRow{}
	for rows.Next() {
		var r LogRow
		var at int64
		if err := rows.Scan(&at, &r.Level, &r.MsgID, &r.TraceID, &r.From, &r.To, &r.Type, &r.Status, &r.LatencyMs, &r.DeliveryID, &r.Attempt, &r.Detail); err != nil {
			return nil, err
		}
		r.Timestamp = store.FromMillis(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Replay puts a dead delivery back in its agent's inbox as a new delivery
// (fresh attempts, a fresh TTL counted from now). Only the recipient or the
// admin may replay. Replaying twice is refused: the first replay wins.
func (s *Service) Replay(ctx context.Context, actor string, admin bool, id string) (Settle, error) {
	var out Settle
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		now := s.clock.Now()
		d, err := s.lockDelivery(ctx, tx, actor, id, admin)
		if err != nil {
			return err
		}
		if d.state == "replayed" {
			var as string
			_ = tx.QueryRow(ctx, `SELECT replayed_as FROM bus_deliveries WHERE id = ?`, id).Scan(&as)
			return &protocol.Error{Class: protocol.ClassInvalid, Code: "already_replayed", Status: 409,
				Message: "delivery " + id + " was already replayed as " + as, Extra: map[string]any{"replayedAs": as}}
		}
		if d.state != "dead" {
			return protocol.Conflict("not_dead", "delivery "+id+" is "+d.state+", not a dead letter")
		}
		m, err := s.messageMeta(ctx, tx, d.messageRef)
		if err != nil {
			return err
		}
		var env protocol.Envelope
		if err := json.Unmarshal([]byte(m.envelope), &env); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		ttl := time.Duration(env.TTL) * time.Second
		if ttl <= 0 {
			ttl = s.cfg.DefaultTTL
		}
		newID := protocol.NewID(protocol.PrefixDelivery)
		if _, err := tx.Exec(ctx, `INSERT INTO bus_deliveries (id, message_id, agent_id, session, priority, state, available_at, expires_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)`, newID, d.messageRef, d.agentID, d.session, d.priority, store.Millis(now), store.Millis(now.Add(ttl)), store.Millis(now), store.Millis(now)); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE bus_deliveries SET state = 'replayed', replayed_as = ?, updated_at = ? WHERE id = ?`, newID, store.Millis(now), id); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if err := s.logRow(ctx, tx, logEntry{at: now, level: "info", msgID: m.clientID, traceID: m.traceID, from: m.sender, to: d.agentID, typ: m.typ,
			status: "replayed", latency: now.Sub(m.acceptedAt), deliveryID: newID, detail: "replay of " + id}); err != nil {
			return err
		}
		tx.Notify(wakeChannel, d.agentID)
		out = Settle{DeliveryID: newID, State: "queued"}
		return nil
	})
	return out, err
}
