package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/pipeline/skill"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Subscription delivers an owner's pipeline events to an agent as bus
// notifications. Front-matter subscriptions (events.subscribe of a skill
// run by an agent) need no row; these are the ones made through the API.
type Subscription struct {
	ID          string    `json:"id"`
	AgentID     string    `json:"agent_id"`
	Owner       string    `json:"owner"`
	Event       string    `json:"event"`                  // an event type, "*", "skill:*" or "pipeline:*"
	PipelineID  string    `json:"pipeline_id,omitempty"`  // only this pipeline's executions
	ExecutionID string    `json:"execution_id,omitempty"` // only this execution
	CreatedAt   time.Time `json:"created_at"`
}

// SubscribeRequest subscribes an agent to events of the owner's executions.
// The caller (HTTP layer) decides that the agent may see them.
type SubscribeRequest struct {
	AgentID     string
	Owner       string
	Events      []string
	PipelineID  string
	ExecutionID string
}

// Subscribe records one subscription per event pattern; subscribing twice
// returns the existing rows.
func (e *Engine) Subscribe(ctx context.Context, req SubscribeRequest) ([]Subscription, error) {
	fe := protocol.FieldErrors{}
	if !protocol.ValidID(req.AgentID) {
		fe.Add("agent_id", "required: the agent that receives the notifications")
	}
	if len(req.Events) == 0 {
		fe.Add("events", "name at least one event (or \"*\")")
	}
	for i, ev := range req.Events {
		if !skill.ValidEventPattern(ev) {
			fe.Add(fmt.Sprintf("events[%d]", i), fmt.Sprintf("unknown event %q; use one of %v, *, skill:* or pipeline:*", ev, skill.Events))
		}
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	if req.ExecutionID != "" {
		if _, err := e.visible(ctx, req.Owner, req.ExecutionID); err != nil {
			return nil, err
		}
	}
	now := e.clock.Now()
	err := e.write(ctx, func(tx *store.Tx) error {
		for _, ev := range req.Events {
			if _, err := tx.Exec(ctx, `INSERT INTO pipeline_subscriptions (id, agent_id, owner, event, pipeline_id, execution_id, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, owner, event, pipeline_id, execution_id) DO NOTHING`,
				protocol.NewID("sub_"), req.AgentID, req.Owner, ev, req.PipelineID, req.ExecutionID, store.Millis(now)); err != nil {
				return fmt.Errorf("pipeline: subscribe: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	all, err := e.Subscriptions(ctx, req.AgentID)
	if err != nil {
		return nil, err
	}
	var out []Subscription
	for _, s := range all {
		for _, ev := range req.Events {
			if s.Owner == req.Owner && s.Event == ev && s.PipelineID == req.PipelineID && s.ExecutionID == req.ExecutionID {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// Subscriptions lists an agent's API subscriptions.
func (e *Engine) Subscriptions(ctx context.Context, agentID string) ([]Subscription, error) {
	rows, err := e.db.Query(ctx, `SELECT id, agent_id, owner, event, pipeline_id, execution_id, created_at FROM pipeline_subscriptions
WHERE agent_id = ? ORDER BY id`, agentID)
	if err != nil {
		return nil, fmt.Errorf("pipeline: subscriptions: %w", err)
	}
	defer rows.Close()
	var out []Subscription
	for rows.Next() {
		var s Subscription
		var at int64
		if err := rows.Scan(&s.ID, &s.AgentID, &s.Owner, &s.Event, &s.PipelineID, &s.ExecutionID, &at); err != nil {
			return nil, err
		}
		s.CreatedAt = store.FromMillis(at)
		out = append(out, s)
	}
	return out, rows.Err()
}

// Unsubscribe deletes one of the agent's subscriptions (E002 if absent).
func (e *Engine) Unsubscribe(ctx context.Context, agentID, id string) error {
	var n int64
	err := e.write(ctx, func(tx *store.Tx) error {
		res, err := tx.Exec(ctx, `DELETE FROM pipeline_subscriptions WHERE agent_id = ? AND id = ?`, agentID, id)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return protocol.NotFound("subscription_not_found", fmt.Sprintf("agent %s has no subscription %s", agentID, id))
	}
	return nil
}
