package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// HandleReply applies an agent's answer to a step's task.assign request.
// The bus calls it for every response or error envelope addressed to
// SystemAgent; payload.requestId names the request (the id of the request
// envelope the engine sent).
//
// A response's payload.result must be the standard output; anything else
// fails the attempt with MALFORMED_OUTPUT (retried like any failure). An
// error envelope fails the attempt with the code of its class (E003 →
// VALIDATION_ERROR, never retried; E004 → TIMEOUT; …).
//
// Return values tell the bus what to do with the envelope:
//   - nil: applied, or a repeat of an answer already applied (ack it);
//   - *protocol.Error: refused for good (ack it and log): unknown request
//     (E002 unknown_request), an answer from another agent than the one the
//     task went to (E001 not_assignee), an answer to a superseded attempt
//     (E003 stale_attempt) or to an attempt that already ended by timeout
//     or cancellation (E003 attempt_settled);
//   - any other error: transient (store), deliver it again later.
func (e *Engine) HandleReply(ctx context.Context, env *protocol.Envelope) error {
	reqID, err := replyRequestID(env)
	if err != nil {
		return err
	}
	// Correlate on the read pool first, so refusals cost the writer nothing.
	if _, err := e.correlate(ctx, e.db, env, reqID); err != nil {
		return err
	}
	return e.write(ctx, func(tx *store.Tx) error { return e.applyReplyTx(ctx, tx, env, reqID) })
}

// HandleReplyTx is HandleReply inside the caller's transaction. The hub's
// bus adapter calls it from its OnMessage hook, so an answer is applied in
// the very transaction that accepts it: a crash keeps both or neither, and
// a refusal (the same *protocol.Error values as HandleReply) refuses the
// agent's send, which tells the agent its answer was not applied. Unlike
// HandleReply it cannot retry a lost write race itself; such an error
// fails the send, and the sender retries it.
func (e *Engine) HandleReplyTx(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
	reqID, err := replyRequestID(env)
	if err != nil {
		return err
	}
	return e.applyReplyTx(ctx, tx, env, reqID)
}

// replyRequestID returns the request id a reply answers.
func replyRequestID(env *protocol.Envelope) (string, error) {
	if env == nil {
		return "", protocol.Invalid("envelope", "required")
	}
	var reqID string
	switch env.Type {
	case protocol.TypeResponse:
		p, err := env.Response()
		if err != nil {
			return "", protocol.Invalid("payload", "not a response payload: "+err.Error())
		}
		reqID = p.RequestID
	case protocol.TypeError:
		p, err := env.ErrorPayload()
		if err != nil {
			return "", protocol.Invalid("payload", "not an error payload: "+err.Error())
		}
		reqID = p.RequestID
	default:
		return "", protocol.Invalid("type", "the pipeline engine accepts response and error envelopes as replies")
	}
	if reqID == "" {
		return "", protocol.Invalid("payload.requestId", "required: the id of the task.assign request this answers")
	}
	return reqID, nil
}

// correlate finds the task a reply answers and checks who answers it.
func (e *Engine) correlate(ctx context.Context, q store.Q, env *protocol.Envelope, reqID string) (*requestRow, error) {
	req, err := getRequest(ctx, q, reqID)
	if err != nil {
		return nil, err
	}
	if req == nil {
		return nil, &protocol.Error{Class: protocol.ClassUnavailable, Code: "unknown_request", Status: 404,
			Message: fmt.Sprintf("no pipeline task has request id %s (it may have been pruned)", reqID)}
	}
	if env.From.Agent != req.AgentID {
		return nil, protocol.Forbidden("not_assignee", fmt.Sprintf("task %s was assigned to %s; %s cannot answer it", reqID, req.AgentID, env.From.Agent))
	}
	return req, nil
}

// applyReplyTx applies a reply under the execution's lock. A repeat of the
// answer that settled the attempt is a no-op.
func (e *Engine) applyReplyTx(ctx context.Context, tx *store.Tx, env *protocol.Envelope, reqID string) error {
	req, err := e.correlate(ctx, tx, env, reqID)
	if err != nil {
		return err
	}
	now := e.clock.Now()
	r, err := e.open(ctx, tx, req.ExecutionID, lockWait, now)
	if err != nil {
		return err
	}
	if r == nil {
		return protocol.NotFound("unknown_execution", fmt.Sprintf("execution %s no longer exists", req.ExecutionID))
	}
	// Re-read under the execution lock: a concurrent reply may have settled it.
	if req, err = getRequest(ctx, tx, reqID); err != nil || req == nil {
		return err
	}
	if req.SettledBy != "" && req.SettledBy == env.ID {
		return nil // a repeat of the answer already applied
	}
	st := r.steps[req.SkillID]
	if st == nil {
		return protocol.NotFound("unknown_step", fmt.Sprintf("execution %s has no step %s", req.ExecutionID, req.SkillID))
	}
	if st.Attempt != req.Attempt {
		return &protocol.Error{Class: protocol.ClassInvalid, Code: "stale_attempt", Status: 409,
			Message:    fmt.Sprintf("this answers attempt %d of skill %s, which was superseded by attempt %d; it was not applied", req.Attempt, req.SkillID, st.Attempt),
			NextAction: "drop this result; the current attempt carries its own request id"}
	}
	if req.SettledAt != 0 || st.Status != StatusRunning || st.RequestID != reqID {
		outcome := req.Outcome
		if outcome == "" {
			outcome = string(st.Status)
		}
		return &protocol.Error{Class: protocol.ClassInvalid, Code: "attempt_settled", Status: 409,
			Message: fmt.Sprintf("attempt %d of skill %s already ended (%s); this answer was not applied", req.Attempt, req.SkillID, outcome)}
	}
	outcome := r.applyReply(st, env, now.Sub(store.FromMillis(req.CreatedAt)))
	if err := settleRequest(ctx, tx, reqID, env.ID, outcome, store.Millis(now)); err != nil {
		return err
	}
	if err := r.advance(); err != nil {
		return err
	}
	return r.save()
}

// applyReply turns a reply envelope into the step's outcome and returns a
// one-word label of it for the request log.
func (r *run) applyReply(st *stepRow, env *protocol.Envelope, dur time.Duration) string {
	agent := env.From.Agent
	if env.Type == protocol.TypeError {
		p, _ := env.ErrorPayload()
		code, retry := classCode(p.Code)
		se := skillErr(code, "agent %s answered attempt %d with error %s: %s", agent, st.Attempt, p.Code, p.Message).withDetails(p.Suggestion)
		r.failAttempt(st, se, "", retry && p.Recoverable)
		return "error"
	}
	p, _ := env.Response()
	if len(bytes.TrimSpace(p.Result)) == 0 || bytes.Equal(bytes.TrimSpace(p.Result), []byte("null")) {
		if p.Status == protocol.StatusSuccess {
			r.failAttempt(st, skillErr(CodeMalformed, "agent %s answered success without a result; payload.result must be the standard output {success, data, metadata, errors}", agent), "", true)
			return "malformed"
		}
		r.failAttempt(st, errorFromPayload(p.Error, agent), "", true)
		return "failed"
	}
	norm, out, perr := parseOutput(p.Result, r.e.opts.MaxOutputBytes, r.now, dur)
	if perr != nil {
		perr.Message = fmt.Sprintf("agent %s: %s", agent, perr.Message)
		r.failAttempt(st, perr, "", true)
		return "malformed"
	}
	return r.applyOutput(st, norm, out)
}

// applyOutput records a well-formed standard output: success completes the
// step; failure fails the attempt (retried unless an error code is
// non-retryable).
func (r *run) applyOutput(st *stepRow, norm json.RawMessage, out *Output) string {
	if out.Success {
		r.complete(st, norm)
		return "completed"
	}
	retry := true
	for _, e := range out.Errors {
		if slices.Contains(r.e.opts.NonRetryable, e.Code) {
			retry = false
		}
	}
	se := out.Errors[0]
	r.failAttempt(st, &se, string(norm), retry)
	return "failed"
}

// errorFromPayload reads a failure response's payload.error: a SkillError
// object, or a plain string.
func errorFromPayload(raw json.RawMessage, agent string) *SkillError {
	var se SkillError
	if json.Unmarshal(raw, &se) == nil && se.Message != "" {
		if se.Code == "" {
			se.Code = CodeAgentError
		}
		return &se
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return skillErr(CodeAgentError, "agent %s reported failure: %s", agent, s)
	}
	return skillErr(CodeAgentError, "agent %s reported failure without a result or error", agent)
}
