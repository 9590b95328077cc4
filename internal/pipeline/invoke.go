package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/pipeline/lint"
	"github.com/switchboard-hub/switchboard/internal/pipeline/plan"
	"github.com/switchboard-hub/switchboard/internal/pipeline/skill"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// InvokeRequest asks for a direct invocation (the seed's
// `/skill-b input='{…}'`): a running step runs another skill as a child
// execution and receives its standard output.
type InvokeRequest struct {
	Owner       string // "" = any execution (trusted caller)
	ExecutionID string // the execution whose step invokes
	SkillID     string // the invoking step; it must be running
	Attempt     int    // the invoking step's current attempt (0 = not checked)
	Caller      string // the agent calling, which must run the invoking step ("" = trusted)
	Skill       string // the skill to run
	Input       json.RawMessage
	// IdempotencyKey makes a repeated invocation return the first child.
	IdempotencyKey string

	replyTo *replyTo
}

// replyTo is where a child execution's result goes when it was requested
// over the bus.
type replyTo struct {
	Agent     string `json:"agent"`
	RequestID string `json:"requestId"`
}

// Invoke starts a child execution running one skill with the given input.
// The skill is looked up in the invoking execution's pinned skills, then
// in its ancestors', then in the owner's registry. Invocations nest at most
// Options.MaxDepth deep, and a skill may not invoke a skill already on its
// invocation chain (E003 invocation_depth / invocation_cycle). Use Wait on
// the returned id to get the result (Execution.Result).
func (e *Engine) Invoke(ctx context.Context, req InvokeRequest) (*Execution, error) {
	id, err := e.invoke(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.Get(ctx, req.Owner, id)
}

func (e *Engine) invoke(ctx context.Context, req InvokeRequest) (string, error) {
	if !lint.ValidID(req.Skill) {
		return "", protocol.Invalid("skill", "required: the id of the skill to invoke")
	}
	input, _, err := e.decodeInput(req.Input)
	if err != nil {
		return "", err
	}
	var childID string
	err = e.write(ctx, func(tx *store.Tx) error {
		var err error
		childID, err = e.invokeTx(ctx, tx, req, input)
		return err
	})
	return childID, err
}

// invokeTx starts the child execution inside tx; input is already checked.
func (e *Engine) invokeTx(ctx context.Context, tx *store.Tx, req InvokeRequest, input json.RawMessage) (string, error) {
	now := e.clock.Now()
	if req.IdempotencyKey != "" {
		var existing string
		err := tx.QueryRow(ctx, `SELECT id FROM pipeline_executions WHERE owner = (SELECT owner FROM pipeline_executions WHERE id = ?) AND idem_key = ?`,
			req.ExecutionID, req.IdempotencyKey).Scan(&existing)
		if err == nil {
			return existing, nil
		}
		if !isNoRows(err) {
			return "", err
		}
	}
	parent, err := e.open(ctx, tx, req.ExecutionID, lockWait, now)
	if err != nil {
		return "", err
	}
	if parent == nil || (req.Owner != "" && parent.x.Owner != req.Owner) {
		return "", protocol.NotFound("execution_not_found", fmt.Sprintf("no execution %s", req.ExecutionID))
	}
	st := parent.steps[req.SkillID]
	if st == nil || st.Status != StatusRunning || parent.x.Status != StatusRunning {
		return "", protocol.Conflict("step_not_running", fmt.Sprintf("step %s of execution %s is not running; only a running step may invoke a skill", req.SkillID, req.ExecutionID))
	}
	if req.Attempt != 0 && req.Attempt != st.Attempt {
		return "", protocol.Conflict("stale_attempt", fmt.Sprintf("attempt %d of step %s was superseded by attempt %d", req.Attempt, req.SkillID, st.Attempt))
	}
	if req.Caller != "" && req.Caller != parent.plan.Steps[req.SkillID].Skill.Run.Agent {
		return "", protocol.Forbidden("not_assignee", fmt.Sprintf("step %s runs on %s; %s cannot invoke skills on its behalf", req.SkillID, parent.plan.Steps[req.SkillID].Skill.Run.Agent, req.Caller))
	}
	chain, plans, err := e.chain(ctx, tx, parent, req.SkillID)
	if err != nil {
		return "", err
	}
	if slices.Contains(chain, req.Skill) {
		path := append(slices.Clone(chain), req.Skill)
		slices.Reverse(path[:len(path)-1])
		return "", &protocol.Error{Class: protocol.ClassInvalid, Code: "invocation_cycle", Status: 422,
			Message:    fmt.Sprintf("invoking %s would form a cycle: %s", req.Skill, strings.Join(path, " → ")),
			NextAction: "invoke a skill that is not already on the invocation chain"}
	}
	depth := parent.x.Depth + 1
	if depth > e.opts.MaxDepth {
		return "", &protocol.Error{Class: protocol.ClassInvalid, Code: "invocation_depth", Status: 422,
			Message:    fmt.Sprintf("invoking %s would nest %d invocations deep; the limit is %d", req.Skill, depth, e.opts.MaxDepth),
			NextAction: "do the work in this step instead of invoking another skill"}
	}
	s := findSkill(plans, req.Skill)
	if s == nil {
		reg, err := e.registrySkills(ctx, tx, parent.x.Owner, []string{req.Skill})
		if err != nil {
			return "", err
		}
		if rec := reg[req.Skill]; rec != nil {
			s = rec.Skill
		}
	}
	if s == nil {
		return "", protocol.NotFound("skill_not_found", fmt.Sprintf("no skill %q in this pipeline or the owner's registry", req.Skill))
	}
	if s.Run.Manual() {
		return "", protocol.Unprocessable("skill_not_runnable", fmt.Sprintf("skill %s has no run (agent or exec) and cannot be invoked", req.Skill))
	}
	var reply string
	if req.replyTo != nil {
		reply = string(mustEncode(req.replyTo))
	}
	return e.create(ctx, createArgs{owner: parent.x.Owner, plan: plan.Single(s), input: input, idemKey: req.IdempotencyKey,
		meta: map[string]any{"parent_execution_id": parent.x.ID, "parent_skill_id": req.SkillID}, parentID: parent.x.ID,
		parentSkill: req.SkillID, depth: depth, replyTo: reply, traceID: parent.x.TraceID, inTx: tx})
}

// chain returns the skills on the invocation chain ending at the invoking
// step (innermost first) and the plans of the execution and its ancestors.
func (e *Engine) chain(ctx context.Context, tx *store.Tx, r *run, invoking string) ([]string, []*plan.Plan, error) {
	chain := []string{invoking}
	plans := []*plan.Plan{r.plan}
	x := r.x
	for i := 0; x.ParentID != "" && i <= e.opts.MaxDepth; i++ {
		chain = append(chain, x.ParentSkill)
		px, err := e.getExec(ctx, tx, x.ParentID, lockNone)
		if err != nil {
			return nil, nil, err
		}
		if px == nil {
			break
		}
		p, err := e.planFor(ctx, tx, px.DefHash)
		if err != nil {
			return nil, nil, err
		}
		plans = append(plans, p)
		x = px
	}
	return chain, plans, nil
}

func findSkill(plans []*plan.Plan, id string) *skill.Skill {
	for _, p := range plans {
		if st := p.Steps[id]; st != nil {
			return st.Skill
		}
	}
	return nil
}

// HandleRequest serves requests addressed to SystemAgent. The one action
// is skill.invoke:
//
//	params: {execution_id, skill_id, attempt, skill, input}
//
// sent by the agent running step skill_id. The engine answers through the
// bus: a response {requestId, status: success|failure, result: the child's
// standard output} when the child execution ends, or at once an error
// envelope (E001/E002/E003) when the invocation is refused. A repeated
// request id does not start a second child. A non-nil return is a
// transient failure: deliver the request again.
func (e *Engine) HandleRequest(ctx context.Context, env *protocol.Envelope) error {
	if env == nil || env.Type != protocol.TypeRequest {
		return protocol.Invalid("type", "HandleRequest takes request envelopes")
	}
	return e.write(ctx, func(tx *store.Tx) error { return e.HandleRequestTx(ctx, tx, env) })
}

// HandleRequestTx is HandleRequest inside the caller's transaction (the
// bus adapter's OnMessage hook): the child execution starts, or the error
// answer is enqueued, atomically with the request's acceptance.
func (e *Engine) HandleRequestTx(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
	if env == nil || env.Type != protocol.TypeRequest {
		return protocol.Invalid("type", "HandleRequest takes request envelopes")
	}
	req, input, refusal := e.parseInvoke(env)
	if refusal == nil {
		_, err := e.invokeTx(ctx, tx, req, input)
		var perr *protocol.Error
		if !errors.As(err, &perr) {
			return err
		}
		refusal = perr
	}
	return e.answerError(ctx, tx, env, refusal)
}

// parseInvoke reads a skill.invoke request; a defect is returned as the
// refusal to answer with.
func (e *Engine) parseInvoke(env *protocol.Envelope) (InvokeRequest, json.RawMessage, error) {
	p, err := env.Request()
	if err != nil {
		return InvokeRequest{}, nil, protocol.Invalid("payload", "not a request payload")
	}
	if p.Action != ActionSkillInvoke {
		return InvokeRequest{}, nil, protocol.Invalid("payload.action", fmt.Sprintf("the pipeline engine serves %q only", ActionSkillInvoke))
	}
	var params struct {
		ExecutionID string          `json:"execution_id"`
		SkillID     string          `json:"skill_id"`
		Attempt     int             `json:"attempt"`
		Skill       string          `json:"skill"`
		Input       json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(p.Params, &params); err != nil {
		return InvokeRequest{}, nil, protocol.JSONError(err)
	}
	fe := protocol.FieldErrors{}
	if params.ExecutionID == "" {
		fe.Add("payload.params.execution_id", "required: the execution of the invoking step")
	}
	if params.SkillID == "" {
		fe.Add("payload.params.skill_id", "required: the invoking step")
	}
	if !lint.ValidID(params.Skill) {
		fe.Add("payload.params.skill", "required: the id of the skill to invoke")
	}
	if err := fe.Err(); err != nil {
		return InvokeRequest{}, nil, err
	}
	input, _, err := e.decodeInput(params.Input)
	if err != nil {
		return InvokeRequest{}, nil, err
	}
	return InvokeRequest{ExecutionID: params.ExecutionID, SkillID: params.SkillID, Attempt: params.Attempt,
		Caller: env.From.Agent, Skill: params.Skill, Input: params.Input, IdempotencyKey: "invoke:" + env.ID,
		replyTo: &replyTo{Agent: env.From.Agent, RequestID: env.ID}}, input, nil
}

// answerError enqueues an error envelope answering a refused request.
func (e *Engine) answerError(ctx context.Context, tx *store.Tx, req *protocol.Envelope, cause error) error {
	pe := protocol.AsError(cause)
	msg := pe.Message
	if len(msg) > protocol.MaxMessageLen {
		msg = msg[:protocol.MaxMessageLen]
	}
	payload := mustEncode(obj{{"requestId", req.ID}, {"code", pe.Class}, {"message", msg}, {"recoverable", pe.Class.Recoverable()}, {"suggestion", pe.NextAction}})
	env := e.envelope(req.From.Agent, req.TraceID, protocol.TypeError, payload, nil, e.clock.Now(), e.opts.EventTTL)
	return e.send(ctx, tx, env)
}

// replyToInvoker answers the agent that invoked this (child) execution.
func (r *run) replyToInvoker() error {
	if r.x.ReplyTo == "" {
		return nil
	}
	var to replyTo
	if err := json.Unmarshal([]byte(r.x.ReplyTo), &to); err != nil {
		return fmt.Errorf("pipeline: reply_to of %s: %w", r.x.ID, err)
	}
	status := protocol.StatusFailure
	var result json.RawMessage
	var last *stepRow
	if len(r.order) > 0 {
		last = r.order[len(r.order)-1]
	}
	switch {
	case last != nil && last.Status == StatusCompleted:
		status, result = protocol.StatusSuccess, json.RawMessage(last.Output)
	case last != nil && last.Output != "":
		result = json.RawMessage(last.Output)
	default:
		se := &SkillError{Code: CodeInvokeFailure, Message: fmt.Sprintf("the invoked execution %s ended with status %s", r.x.ID, r.x.Status)}
		if last != nil && last.Error != "" {
			_ = json.Unmarshal([]byte(last.Error), se)
		}
		result = failedOutput(se, r.now)
	}
	payload := mustEncode(obj{{"requestId", to.RequestID}, {"status", status}, {"result", result}})
	meta := mustEncode(obj{{"executionId", r.x.ID}})
	env := r.e.envelope(to.Agent, r.x.TraceID, protocol.TypeResponse, payload, meta, r.now, r.e.opts.EventTTL)
	if err := r.e.send(r.ctx, r.tx, env); err != nil {
		var perr *protocol.Error
		if !errors.As(err, &perr) {
			return err
		}
		r.e.log.Warn("invocation result refused by the bus", "to", to.Agent, "execution", r.x.ID, "err", err)
	}
	return nil
}
