package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/pipeline/plan"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Execution is the API view of an execution.
type Execution struct {
	ID                string          `json:"execution_id"`
	Owner             string          `json:"owner"`
	PipelineID        string          `json:"pipeline_id"`
	DefinitionHash    string          `json:"definition_hash"`
	DefinitionVersion string          `json:"definition_version,omitempty"`
	TraceID           string          `json:"trace_id"`
	Status            Status          `json:"status"`
	Pipeline          []string        `json:"pipeline"`
	CurrentSkill      string          `json:"current_skill,omitempty"`
	Input             json.RawMessage `json:"input"`
	Metadata          json.RawMessage `json:"metadata"`
	ParentID          string          `json:"parent_execution_id,omitempty"`
	ParentSkill       string          `json:"parent_skill_id,omitempty"`
	Depth             int             `json:"depth,omitempty"`
	Steps             []StepState     `json:"steps,omitempty"`
	CreatedAt         time.Time       `json:"created_at"`
	StartedAt         *time.Time      `json:"started_at,omitempty"`
	CompletedAt       *time.Time      `json:"completed_at,omitempty"`
	UpdatedAt         time.Time       `json:"updated_at"`
	Version           int64           `json:"version"`
	LastEventSeq      int64           `json:"last_event_seq"`
}

// StepState is the API view of one step.
type StepState struct {
	SkillID       string          `json:"skill_id"`
	Status        Status          `json:"status"`
	Attempt       int             `json:"attempt"`
	Agent         string          `json:"agent,omitempty"`
	Upstream      []string        `json:"upstream,omitempty"`
	Approval      *plan.Approval  `json:"approval,omitempty"`
	Input         json.RawMessage `json:"input"`
	Output        json.RawMessage `json:"output"`
	Error         *SkillError     `json:"error"`
	StartedAt     *time.Time      `json:"started_at,omitempty"`
	CompletedAt   *time.Time      `json:"completed_at,omitempty"`
	NextAttemptAt *time.Time      `json:"next_attempt_at,omitempty"`
}

// Result is the standard output of the execution's last completed step —
// for a direct invocation, the invoked skill's output. It is nil when no
// step completed.
func (x *Execution) Result() json.RawMessage {
	for i := len(x.Steps) - 1; i >= 0; i-- {
		if x.Steps[i].Status == StatusCompleted {
			return x.Steps[i].Output
		}
	}
	return nil
}

func tptr(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := store.FromMillis(ms)
	return &t
}

// visible loads an execution the caller may see: owner "" sees every
// execution (admin), anyone else only their own. Others get E002.
func (e *Engine) visible(ctx context.Context, owner, id string) (*execRow, error) {
	x, err := e.getExec(ctx, e.db, id, lockNone)
	if err != nil {
		return nil, err
	}
	if x == nil || (owner != "" && x.Owner != owner) {
		return nil, protocol.NotFound("execution_not_found", fmt.Sprintf("no execution %s", id))
	}
	return x, nil
}

// Get returns an execution with its steps. owner "" reads any execution.
func (e *Engine) Get(ctx context.Context, owner, id string) (*Execution, error) {
	x, err := e.visible(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	p, err := e.planFor(ctx, e.db, x.DefHash)
	if err != nil {
		return nil, err
	}
	steps, err := getSteps(ctx, e.db, id)
	if err != nil {
		return nil, err
	}
	return e.view(x, p, steps), nil
}

func (e *Engine) view(x *execRow, p *plan.Plan, steps []*stepRow) *Execution {
	v := &Execution{ID: x.ID, Owner: x.Owner, PipelineID: x.PipelineID, DefinitionHash: x.DefHash, DefinitionVersion: x.DefVersion,
		TraceID: x.TraceID, Status: x.Status, Pipeline: p.Order, Input: json.RawMessage(x.Input), Metadata: json.RawMessage(x.Metadata),
		ParentID: x.ParentID, ParentSkill: x.ParentSkill, Depth: x.Depth, CreatedAt: store.FromMillis(x.CreatedAt),
		StartedAt: tptr(x.StartedAt), CompletedAt: tptr(x.CompletedAt), UpdatedAt: store.FromMillis(x.UpdatedAt),
		Version: x.Version, LastEventSeq: x.EventSeq}
	v.CurrentSkill = currentSkill(steps)
	for _, st := range steps {
		ps := p.Steps[st.SkillID]
		s := StepState{SkillID: st.SkillID, Status: st.Status, Attempt: st.Attempt, Upstream: ps.Upstream, Approval: ps.Approval,
			Input: stepInput(st, ps, x), Output: rawOrNull(st.Output), StartedAt: tptr(st.StartedAt), CompletedAt: tptr(st.CompletedAt),
			NextAttemptAt: tptr(st.NextAttemptAt), Agent: ps.Skill.Run.Agent}
		if st.Error != "" {
			var se SkillError
			if json.Unmarshal([]byte(st.Error), &se) == nil {
				s.Error = &se
			}
		}
		v.Steps = append(v.Steps, s)
	}
	return v
}

// stepInput is the resolved input of a started step, and otherwise the
// template it will be resolved from (the execution's input when the step
// has no input mapping).
func stepInput(st *stepRow, ps *plan.Step, x *execRow) json.RawMessage {
	switch {
	case st.Input != "":
		return json.RawMessage(st.Input)
	case ps.Input != nil:
		return ps.Input
	}
	return json.RawMessage(x.Input)
}

// currentSkill is the first step (in pipeline order) that is in flight,
// or "" when none is.
func currentSkill(steps []*stepRow) string {
	for _, st := range steps {
		switch st.Status {
		case StatusRunning, StatusRetrying, StatusWaitingInput:
			return st.SkillID
		}
	}
	return ""
}

// ListFilter selects executions for List.
type ListFilter struct {
	Owner      string // "" = every owner (admin)
	Status     Status // "" = any
	PipelineID string // "" = any
	Before     string // page backwards from this execution id (ids sort by creation)
	Limit      int    // default 50, at most 500
}

// List returns executions, newest first, without their steps.
func (e *Engine) List(ctx context.Context, f ListFilter) ([]*Execution, error) {
	var where []string
	var args []any
	if f.Owner != "" {
		where, args = append(where, "owner = ?"), append(args, f.Owner)
	}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, string(f.Status))
	}
	if f.PipelineID != "" {
		where, args = append(where, "pipeline_id = ?"), append(args, f.PipelineID)
	}
	if f.Before != "" {
		where, args = append(where, "id < ?"), append(args, f.Before)
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	q := `SELECT ` + execCols + ` FROM pipeline_executions`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, f.Limit)
	rows, err := e.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("pipeline: list: %w", err)
	}
	defer rows.Close()
	var xs []*execRow
	for rows.Next() {
		x, err := scanExec(rows)
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]*Execution, 0, len(xs))
	for _, x := range xs {
		p, err := e.planFor(ctx, e.db, x.DefHash)
		if err != nil {
			return nil, err
		}
		v := e.view(x, p, nil)
		out = append(out, v)
	}
	return out, nil
}

// StateVersion is the "version" member of an exported state.json.
const StateVersion = "1.0.0"

// StateJSON exports executions in the seed's state.json shape:
//
//	{"version": "1.0.0", "current_execution": ID, "executions": {ID: {execution_id, status,
//	 started_at, completed_at?, pipeline, current_skill, data: {SKILL: {status, started_at?,
//	 completed_at?, input, output, error}}, metadata}}}
//
// indented with two spaces. current_execution is the last id given.
// Statuses beyond the seed's are documented in the package comment.
func (e *Engine) StateJSON(ctx context.Context, owner string, ids ...string) ([]byte, error) {
	if len(ids) == 0 {
		return nil, protocol.Invalid("execution_id", "name at least one execution")
	}
	execs := obj{}
	for _, id := range ids {
		x, err := e.Get(ctx, owner, id)
		if err != nil {
			return nil, err
		}
		execs = append(execs, kv{x.ID, stateOf(x)})
	}
	doc := obj{{"version", StateVersion}, {"current_execution", ids[len(ids)-1]}, {"executions", execs}}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("pipeline: export state: %w", err)
	}
	return buf.Bytes(), nil
}

func stateTime(t *time.Time) string { return t.UTC().Format(time.RFC3339) }

func stateOf(x *Execution) obj {
	started := x.CreatedAt
	if x.StartedAt != nil {
		started = *x.StartedAt
	}
	o := obj{{"execution_id", x.ID}, {"status", x.Status}, {"started_at", stateTime(&started)}}
	if x.CompletedAt != nil {
		o = append(o, kv{"completed_at", stateTime(x.CompletedAt)})
	}
	var current any
	if x.CurrentSkill != "" {
		current = x.CurrentSkill
	}
	o = append(o, kv{"pipeline", x.Pipeline}, kv{"current_skill", current})
	data := obj{}
	for _, st := range x.Steps {
		d := obj{{"status", st.Status}}
		if st.StartedAt != nil {
			d = append(d, kv{"started_at", stateTime(st.StartedAt)})
		}
		if st.CompletedAt != nil {
			d = append(d, kv{"completed_at", stateTime(st.CompletedAt)})
		}
		var serr any
		if st.Error != nil {
			serr = st.Error
		}
		d = append(d, kv{"input", st.Input}, kv{"output", st.Output}, kv{"error", serr})
		data = append(data, kv{st.SkillID, d})
	}
	return append(o, kv{"data", data}, kv{"metadata", x.Metadata})
}

// Wait blocks until the execution reaches a terminal status (or ctx ends)
// and returns it; it is what `pipeline run --wait` and direct invocations
// through the API use.
func (e *Engine) Wait(ctx context.Context, owner, id string) (*Execution, error) {
	ch := e.addWaiter(id)
	defer e.removeWaiter(id, ch)
	// Notifications can be missed across a lost PostgreSQL listener; poll
	// as a fallback.
	t := time.NewTicker(4 * e.opts.PollInterval)
	defer t.Stop()
	for {
		x, err := e.Get(ctx, owner, id)
		if err != nil {
			return nil, err
		}
		if x.Status.Terminal() {
			return x, nil
		}
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			return x, ctx.Err()
		}
	}
}

// addWaiter registers a channel signalled whenever execution id changes.
func (e *Engine) addWaiter(id string) chan struct{} {
	ch := make(chan struct{}, 1)
	e.mu.Lock()
	if e.waiters[id] == nil {
		e.waiters[id] = map[chan struct{}]struct{}{}
	}
	e.waiters[id][ch] = struct{}{}
	e.mu.Unlock()
	return ch
}

func (e *Engine) removeWaiter(id string, ch chan struct{}) {
	e.mu.Lock()
	delete(e.waiters[id], ch)
	if len(e.waiters[id]) == 0 {
		delete(e.waiters, id)
	}
	e.mu.Unlock()
}
