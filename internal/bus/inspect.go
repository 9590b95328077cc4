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

// DeliveryInfo is a delivery as an operator inspects it: where it stands
// (state, attempt, lease, TTL, dead-letter reason) and which message it
// carries. Read-only views (the web console) use it; consumers use Claim.
type DeliveryInfo struct {
	DeliveryID string    `json:"deliveryId"`
	AgentID    string    `json:"agentId"`
	SessionKey string    `json:"sessionKey,omitempty"`
	State      string    `json:"state"` // queued | leased | processed | dead | replayed
	Attempt    int       `json:"attempt"`
	Priority   string    `json:"priority"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	ExpiresAt  time.Time `json:"expiresAt"`
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
	DeadReason string    `json:"deadReason,omitempty"`
	LastError  string    `json:"lastError,omitempty"`
	ReplayedAs string    `json:"replayedAs,omitempty"`
	// MsgID is the envelope id the sender chose; TraceID, Sender and Type
	// come from the envelope too.
	MsgID   string `json:"msgId"`
	TraceID string `json:"traceId"`
	Sender  string `json:"sender"`
	Type    string `json:"type"`
	// Envelope is filled by Delivery only (lists leave it out).
	Envelope json.RawMessage `json:"envelope,omitempty"`
}

const infoCols = `d.id, d.agent_id, d.session, d.state, d.attempt, d.priority, d.created_at, d.updated_at, d.expires_at, d.lease_until,
	d.dead_reason, d.last_error, d.replayed_as, m.client_id, m.trace_id, m.sender, m.type`

func scanInfo(row interface{ Scan(...any) error }, extra ...any) (DeliveryInfo, error) {
	var d DeliveryInfo
	var prio int
	var created, updated, expires, lease int64
	dest := []any{&d.DeliveryID, &d.AgentID, &d.SessionKey, &d.State, &d.Attempt, &prio, &created, &updated, &expires, &lease,
		&d.DeadReason, &d.LastError, &d.ReplayedAs, &d.MsgID, &d.TraceID, &d.Sender, &d.Type}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return d, err
	}
	d.Priority = priorityName(prio)
	d.CreatedAt, d.UpdatedAt, d.ExpiresAt = store.FromMillis(created), store.FromMillis(updated), store.FromMillis(expires)
	if lease > 0 && d.State == "leased" {
		d.LeaseUntil = store.FromMillis(lease)
	}
	return d, nil
}

// RecentDeliveries returns an agent's newest deliveries in any state,
// newest first, without their envelopes (limit defaults to 50, at most 500).
func (s *Service) RecentDeliveries(ctx context.Context, agentID string, limit int) ([]DeliveryInfo, error) {
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	rows, err := s.db.Query(ctx, `SELECT `+infoCols+` FROM bus_deliveries d JOIN bus_messages m ON m.id = d.message_id
		WHERE d.agent_id = ? ORDER BY d.created_at DESC, d.id DESC LIMIT `+fmt.Sprint(limit), agentID)
	if err != nil {
		return nil, fmt.Errorf("recent deliveries: %w", err)
	}
	defer rows.Close()
	out := []DeliveryInfo{}
	for rows.Next() {
		d, err := scanInfo(rows)
		if err != nil {
			return nil, fmt.Errorf("recent deliveries: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Delivery returns one delivery with its envelope and its message log
// rows. An agent sees only the deliveries addressed to it (what it sent
// shows in its traces); anything else answers E002 delivery_not_found, so
// ids cannot be probed.
func (s *Service) Delivery(ctx context.Context, id, viewer string, admin bool) (DeliveryInfo, []LogRow, error) {
	var env string
	d, err := scanInfo(s.db.QueryRow(ctx, `SELECT `+infoCols+`, m.envelope FROM bus_deliveries d JOIN bus_messages m ON m.id = d.message_id WHERE d.id = ?`, id), &env)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !admin && d.AgentID != viewer) {
		return DeliveryInfo{}, nil, protocol.NotFound("delivery_not_found", "no delivery "+id+" of yours")
	}
	if err != nil {
		return DeliveryInfo{}, nil, fmt.Errorf("delivery %s: %w", id, err)
	}
	d.Envelope = json.RawMessage(env)
	h, err := s.deliveryHistory(ctx, id)
	if err != nil {
		return DeliveryInfo{}, nil, err
	}
	return d, h, nil
}

// pendingByAgent counts the queued and leased deliveries of each agent.
// Each state is read from its partial index (availability for queued,
// lease for leased): grouping by agent_id directly, SQLite would scan the
// claim index, which holds every delivery ever made.
const pendingByAgent = `SELECT agent_id, COUNT(*) FROM (
	SELECT agent_id FROM bus_deliveries WHERE state = 'queued'
	UNION ALL SELECT agent_id FROM bus_deliveries WHERE state = 'leased') AS p GROUP BY agent_id`

// QueueDepths returns the pending (queued or leased) deliveries of every
// agent that has any, the numbers the queue-depth threshold looks at.
func (s *Service) QueueDepths(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.Query(ctx, pendingByAgent)
	if err != nil {
		return nil, fmt.Errorf("queue depths: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var a string
		var n int
		if err := rows.Scan(&a, &n); err != nil {
			return nil, fmt.Errorf("queue depths: %w", err)
		}
		out[a] = n
	}
	return out, rows.Err()
}
