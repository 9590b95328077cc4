package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-hub/switchboard/internal/pipeline/ref"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Cancel stops an execution: steps in flight become cancelled (their agents
// get a task.cancelled notification and local commands are killed),
// pipeline:cancelled is emitted, and running child executions (direct
// invocations) are cancelled too. Cancelling a cancelled execution is a
// no-op; cancelling a finished one is E003 execution_finished.
func (e *Engine) Cancel(ctx context.Context, owner, id, reason string) (*Execution, error) {
	if reason == "" {
		reason = "cancelled on request"
	}
	err := e.write(ctx, func(tx *store.Tx) error {
		return e.cancelIn(ctx, tx, owner, id, reason, 0)
	})
	if err != nil {
		return nil, err
	}
	return e.Get(ctx, owner, id)
}

func (e *Engine) cancelIn(ctx context.Context, tx *store.Tx, owner, id, reason string, depth int) error {
	r, err := e.open(ctx, tx, id, lockWait, e.clock.Now())
	if err != nil {
		return err
	}
	if r == nil || (owner != "" && r.x.Owner != owner) {
		return protocol.NotFound("execution_not_found", fmt.Sprintf("no execution %s", id))
	}
	switch {
	case r.x.Status == StatusCancelled:
		return nil
	case r.x.Status.Terminal():
		return protocol.Conflict("execution_finished", fmt.Sprintf("execution %s already ended with status %s", id, r.x.Status))
	}
	if err := r.finish(StatusCancelled, nil, reason); err != nil {
		return err
	}
	if err := r.save(); err != nil {
		return err
	}
	if depth >= 16 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT id FROM pipeline_executions WHERE parent_id = ? AND status IN ('pending', 'running')`, id)
	if err != nil {
		return err
	}
	var children []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return err
		}
		children = append(children, c)
	}
	rows.Close()
	for _, c := range children {
		if err := e.cancelIn(ctx, tx, "", c, "the invoking execution "+id+" was cancelled", depth+1); err != nil {
			return err
		}
	}
	return nil
}

// ResumeRequest answers an approval gate.
type ResumeRequest struct {
	Owner       string          // "" = any execution (admin)
	ExecutionID string          //
	SkillID     string          // the step waiting_input
	Data        json.RawMessage // any JSON (empty = {})
	// Actor is the agent resuming, or "" for the owner or an admin. An agent
	// may resume only if the step's approval lists it, or it is the agent
	// that runs the step's skill.
	Actor string
}

// Resume releases a step waiting at its approval gate. For a skill with a
// run, Data is added to the step's input as "approval" and the skill is
// dispatched; for a skill without one, the step completes with the
// standard output {success: true, data: Data}. Errors: E002 for an unknown
// execution, E003 not_waiting when the step is not waiting_input, E001
// not_approver for an agent that may not approve.
func (e *Engine) Resume(ctx context.Context, req ResumeRequest) (*Execution, error) {
	data := bytes.TrimSpace(req.Data)
	if len(data) == 0 {
		data = []byte("{}")
	}
	if len(data) > e.opts.MaxInputBytes {
		return nil, protocol.Invalid("data", fmt.Sprintf("is %d bytes; the limit is %d", len(data), e.opts.MaxInputBytes))
	}
	dv, err := ref.Decode(data)
	if err != nil {
		return nil, protocol.Invalid("data", "not valid JSON: "+err.Error())
	}
	err = e.write(ctx, func(tx *store.Tx) error {
		now := e.clock.Now()
		r, err := e.open(ctx, tx, req.ExecutionID, lockWait, now)
		if err != nil {
			return err
		}
		if r == nil || (req.Owner != "" && r.x.Owner != req.Owner) {
			return protocol.NotFound("execution_not_found", fmt.Sprintf("no execution %s", req.ExecutionID))
		}
		st := r.steps[req.SkillID]
		if st == nil {
			return protocol.NotFound("step_not_found", fmt.Sprintf("execution %s has no step %q", req.ExecutionID, req.SkillID))
		}
		if st.Status != StatusWaitingInput {
			return protocol.Conflict("not_waiting", fmt.Sprintf("step %s is %s, not waiting_input; only a step at its approval gate can be resumed", req.SkillID, st.Status))
		}
		ps := r.plan.Steps[req.SkillID]
		if req.Actor != "" && !slices.Contains(ps.Approval.Agents, req.Actor) && req.Actor != ps.Skill.Run.Agent {
			return protocol.Forbidden("not_approver", fmt.Sprintf("agent %s may not approve step %s; its approvers are the owner and %v", req.Actor, req.SkillID, ps.Approval.Agents))
		}
		by := req.Actor
		if by == "" {
			by = "owner"
		}
		if ps.Skill.Run.Manual() {
			dur := now.Sub(store.FromMillis(st.StartedAt))
			out := mustEncode(obj{{"success", true}, {"data", json.RawMessage(data)},
				{"metadata", obj{{"processed_at", now.UTC().Format(time.RFC3339)}, {"duration_ms", dur.Milliseconds()}, {"resumed_by", by}}},
				{"errors", []SkillError{}}})
			r.complete(st, out)
		} else {
			in, _ := ref.Decode([]byte(st.Input))
			m, _ := in.(map[string]any)
			if m == nil {
				m = map[string]any{}
			}
			m["approval"] = dv
			raw, err := ref.Encode(m)
			if err != nil {
				return protocol.Invalid("data", err.Error())
			}
			st.Input = string(raw)
			if err := r.dispatch(st); err != nil {
				return err
			}
		}
		if err := r.advance(); err != nil {
			return err
		}
		return r.save()
	})
	if err != nil {
		return nil, err
	}
	return e.Get(ctx, req.Owner, req.ExecutionID)
}
