package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/pipeline/plan"
	"github.com/switchboard-hub/switchboard/internal/pipeline/ref"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// SkillError is a step's error in the seed's SkillError shape.
type SkillError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Field   string          `json:"field,omitempty"`
	Details json.RawMessage `json:"details,omitempty"`
	Stack   string          `json:"stack,omitempty"`
}

func skillErr(code, format string, args ...any) *SkillError {
	return &SkillError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (se *SkillError) withDetails(s string) *SkillError {
	if s != "" {
		se.Details = mustEncode(s)
	}
	return se
}

func (se *SkillError) json() string { return string(mustEncode(se)) }

// run is one transaction's view of an execution: it loads the execution and
// its steps, applies transitions in memory, and writes back only what
// changed.
type run struct {
	e     *Engine
	ctx   context.Context
	tx    *store.Tx
	now   time.Time
	x     *execRow
	plan  *plan.Plan
	steps map[string]*stepRow
	order []*stepRow

	input   any
	outputs map[string]any // decoded outputs, for references
	events  []pendingEvent
	subs    []subRow
	after   []func()
	loadErr error // a failure of fill where it cannot be returned
}

// fill loads the JSON columns of a lean step.
func (r *run) fill(st *stepRow) error {
	if !st.lean {
		return nil
	}
	err := r.tx.QueryRow(r.ctx, `SELECT input, output, error FROM pipeline_steps WHERE execution_id = ? AND skill_id = ?`,
		st.ExecutionID, st.SkillID).Scan(&st.Input, &st.Output, &st.Error)
	if err != nil {
		return fmt.Errorf("pipeline: load step %s/%s: %w", st.ExecutionID, st.SkillID, err)
	}
	st.lean = false
	return nil
}

// fillAll loads the JSON columns of every lean step in one query.
func (r *run) fillAll() error {
	lean := 0
	for _, st := range r.order {
		if st.lean {
			lean++
		}
	}
	if lean == 0 {
		return nil
	}
	rows, err := r.tx.Query(r.ctx, `SELECT skill_id, input, output, error FROM pipeline_steps WHERE execution_id = ? AND status IN `+terminalSQL, r.x.ID)
	if err != nil {
		return fmt.Errorf("pipeline: load steps of %s: %w", r.x.ID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, in, out, serr string
		if err := rows.Scan(&id, &in, &out, &serr); err != nil {
			return err
		}
		if st := r.steps[id]; st != nil && st.lean {
			st.Input, st.Output, st.Error, st.lean = in, out, serr, false
		}
	}
	return rows.Err()
}

// open loads an execution inside tx. It returns nil (no error) when the
// execution does not exist or, with lockSkip, another node holds it.
func (e *Engine) open(ctx context.Context, tx *store.Tx, id string, m lockMode, now time.Time) (*run, error) {
	x, err := e.getExec(ctx, tx, id, m)
	if err != nil || x == nil {
		return nil, err
	}
	p, err := e.planFor(ctx, tx, x.DefHash)
	if err != nil {
		return nil, err
	}
	steps, err := getStepsLean(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	r := &run{e: e, ctx: ctx, tx: tx, now: now, x: x, plan: p, steps: map[string]*stepRow{}, order: steps, outputs: map[string]any{}}
	for _, st := range steps {
		r.steps[st.SkillID] = st
	}
	if r.input, err = ref.Decode([]byte(x.Input)); err != nil {
		return nil, fmt.Errorf("pipeline: execution %s input: %w", id, err)
	}
	return r, nil
}

// Input implements ref.Source.
func (r *run) Input() any { return r.input }

// Step implements ref.Source.
func (r *run) Step(id string) (string, any, bool) {
	st, ok := r.steps[id]
	if !ok {
		return "", nil, false
	}
	if st.Status != StatusCompleted {
		return string(st.Status), nil, true
	}
	out, ok := r.outputs[id]
	if !ok {
		if err := r.fill(st); err != nil {
			r.loadErr = err
		}
		out, _ = ref.Decode([]byte(st.Output))
		r.outputs[id] = out
	}
	return string(st.Status), out, true
}

func (r *run) ms() int64 { return store.Millis(r.now) }

func (r *run) touch(st *stepRow) {
	st.dirty = true
	st.UpdatedAt = r.ms()
}

// save writes changed steps, the events, and the execution row (guarded by
// its version), and schedules the after-commit work.
func (r *run) save() error {
	if r.loadErr != nil {
		return r.loadErr
	}
	for _, st := range r.order {
		if !st.dirty {
			continue
		}
		if st.lean {
			return fmt.Errorf("pipeline: step %s/%s changed after it ended", st.ExecutionID, st.SkillID)
		}
		var err error
		if st.isNew {
			err = insertStep(r.ctx, r.tx, st)
		} else {
			err = updateStep(r.ctx, r.tx, st)
		}
		if err != nil {
			return err
		}
		st.dirty, st.isNew = false, false
	}
	if err := r.flushEvents(); err != nil {
		return err
	}
	r.x.WakeAt = r.nextWake()
	r.x.UpdatedAt = r.ms()
	if err := updateExec(r.ctx, r.tx, r.x); err != nil {
		return err
	}
	r.tx.Notify(notifyChannel, r.x.ID)
	for _, fn := range r.after {
		r.tx.AfterCommit(fn)
	}
	r.after = nil
	return nil
}

// nextWake is when the scheduler must next look at the execution: the
// earliest retry, agent deadline or exec lease expiry (0: nothing timed).
func (r *run) nextWake() int64 {
	if r.x.Status.Terminal() {
		return 0
	}
	var next int64
	consider := func(t int64) {
		if t > 0 && (next == 0 || t < next) {
			next = t
		}
	}
	for _, st := range r.order {
		switch st.Status {
		case StatusRunning:
			consider(st.LeaseUntil)
		case StatusRetrying:
			consider(st.NextAttemptAt)
		case StatusPending:
			if r.x.Status == StatusPending {
				consider(r.ms())
			}
		}
	}
	return next
}

// advance moves the execution as far as it can go now.
func (r *run) advance() error {
	if r.x.Status.Terminal() {
		return nil
	}
	if r.x.Status == StatusPending {
		r.x.Status = StatusRunning
		r.x.StartedAt = r.ms()
		r.emit(EventPipelineStarted, "", obj{{"execution_id", r.x.ID}, {"pipeline", r.plan.Order}})
	}
	if failed := r.hardFailure(); failed != nil {
		return r.finish(StatusFailed, failed, "")
	}
	for progress := true; progress; {
		progress = false
		for _, st := range r.order {
			var err error
			switch st.Status {
			case StatusRunning:
				if st.LeaseUntil > 0 && st.LeaseUntil <= r.ms() {
					r.expire(st)
					progress = true
				}
			case StatusRetrying:
				if st.NextAttemptAt <= r.ms() {
					err = r.dispatch(st)
					progress = true
				}
			case StatusPending:
				if r.ready(st) {
					err = r.start(st)
					progress = true
				}
			}
			if err != nil {
				return err
			}
			// Only the step just handled can have changed; checking it
			// alone keeps a transition linear in the number of steps.
			if st.Status == StatusFailed && !r.plan.Steps[st.SkillID].AllowFailure {
				return r.finish(StatusFailed, st, "")
			}
		}
	}
	partial, done := false, true
	for _, st := range r.order {
		switch {
		case st.Status == StatusFailed:
			partial = true
		case !st.Status.Terminal():
			done = false
		}
	}
	if done {
		if partial {
			return r.finish(StatusPartial, nil, "")
		}
		return r.finish(StatusCompleted, nil, "")
	}
	return nil
}

// ready reports whether every upstream of st has finished in a way that
// lets st start.
func (r *run) ready(st *stepRow) bool {
	for _, u := range r.plan.Steps[st.SkillID].Upstream {
		us := r.steps[u]
		switch {
		case us.Status == StatusCompleted || us.Status == StatusSkipped:
		case us.Status == StatusFailed && r.plan.Steps[u].AllowFailure:
		default:
			return false
		}
	}
	return true
}

// hardFailure returns a failed step that is not allowed to fail, if any.
func (r *run) hardFailure() *stepRow {
	for _, st := range r.order {
		if st.Status == StatusFailed && !r.plan.Steps[st.SkillID].AllowFailure {
			return st
		}
	}
	return nil
}

// template is the step's input template as a decoded value; a step without
// an input mapping receives the execution's input.
func (r *run) template(id string) (any, error) {
	raw := r.plan.Steps[id].Input
	if raw == nil {
		return "<<ref:input>>", nil
	}
	return ref.Decode(raw)
}

// start evaluates the step's condition, resolves its input and either
// parks it at its approval gate or dispatches it.
func (r *run) start(st *stepRow) error {
	ps := r.plan.Steps[st.SkillID]
	if ps.When != "" {
		cond, err := ref.ParseWhen(ps.When)
		if err == nil {
			var ok bool
			ok, err = cond.Eval(r)
			if err == nil && !ok {
				st.Status = StatusSkipped
				st.StartedAt, st.CompletedAt = 0, r.ms()
				r.touch(st)
				r.emit(EventSkillSkipped, st.SkillID, obj{{"skill_id", st.SkillID}, {"execution_id", r.x.ID}, {"when", ps.When}})
				return nil
			}
		}
		if err != nil {
			r.failAtStart(st, skillErr(CodeValidation, "when: %v", err))
			return nil
		}
	}
	tmpl, err := r.template(st.SkillID)
	if err != nil {
		r.failAtStart(st, skillErr(CodeValidation, "input template: %v", err))
		return nil
	}
	in, err := ref.Resolve(tmpl, r)
	if err != nil {
		se := skillErr(CodeValidation, "%v", err)
		var re *ref.Error
		if errors.As(err, &re) && re.Field != "" {
			se.Field = re.Field
		}
		r.failAtStart(st, se)
		return nil
	}
	m, ok := in.(map[string]any)
	if !ok {
		r.failAtStart(st, skillErr(CodeValidation, "the resolved input is not a JSON object"))
		return nil
	}
	if problems := ps.Skill.Validate(m); len(problems) > 0 {
		r.failAtStart(st, skillErr(CodeValidation, "%s", strings.Join(problems, "; ")))
		return nil
	}
	raw, err := ref.Encode(in)
	if err != nil {
		r.failAtStart(st, skillErr(CodeValidation, "input: %v", err))
		return nil
	}
	st.Input = string(raw)
	st.StartedAt = r.ms()
	r.touch(st)
	if ps.Approval != nil {
		st.Status = StatusWaitingInput
		msg := ps.Approval.Message
		if msg == "" {
			msg = fmt.Sprintf("skill %s is waiting for approval: resume it with data", st.SkillID)
		}
		r.emit(EventSkillWaitingInput, st.SkillID, obj{{"skill_id", st.SkillID}, {"execution_id", r.x.ID}, {"message", msg}}, ps.Approval.Agents...)
		return nil
	}
	return r.dispatch(st)
}

func (r *run) failAtStart(st *stepRow, se *SkillError) {
	if st.StartedAt == 0 {
		st.StartedAt = r.ms()
	}
	r.failStep(st, se, "")
}

func (r *run) timeout(id string) time.Duration {
	ps := r.plan.Steps[id]
	switch {
	case ps.Timeout > 0:
		return time.Duration(ps.Timeout)
	case ps.Skill.Run.Timeout > 0:
		return time.Duration(ps.Skill.Run.Timeout)
	}
	return r.e.opts.DefaultTimeout
}

func (r *run) retries(id string) int {
	ps := r.plan.Steps[id]
	switch {
	case ps.Retries != nil:
		return *ps.Retries
	case ps.Skill.Run.Retries != nil:
		return *ps.Skill.Run.Retries
	}
	return r.e.opts.DefaultRetries
}

// IdempotencyKey is the key every attempt of a step carries to its
// executor: the same for all attempts, so a worker can recognise a repeat.
func IdempotencyKey(executionID, skillID string) string { return executionID + ":" + skillID }

// dispatch starts the next attempt of a step.
func (r *run) dispatch(st *stepRow) error {
	ps := r.plan.Steps[st.SkillID]
	st.Attempt++
	st.Status = StatusRunning
	st.Error, st.Output = "", ""
	st.NextAttemptAt = 0
	if st.StartedAt == 0 {
		st.StartedAt = r.ms()
	}
	r.touch(st)
	timeout := r.timeout(st.SkillID)
	r.emit(EventSkillStarted, st.SkillID, obj{{"skill_id", st.SkillID}, {"execution_id", r.x.ID}})
	switch {
	case ps.Skill.Run.Agent != "":
		return r.dispatchAgent(st, ps, timeout)
	case len(ps.Skill.Run.Exec) > 0:
		st.LeaseOwner = r.e.node
		st.LeaseUntil = store.Millis(r.now.Add(r.e.opts.LeaseDuration))
		l := launch{execID: r.x.ID, skillID: st.SkillID, attempt: st.Attempt, argv: ps.Skill.Run.Exec, dir: ps.Skill.Dir,
			input: []byte(st.Input), timeout: timeout, traceID: r.x.TraceID, started: r.now}
		r.after = append(r.after, func() { r.e.launch(l) })
		return nil
	}
	// A manual skill only runs through Resume; reaching here is a bug.
	r.failStep(st, skillErr(CodeValidation, "skill %s has no run; it can only complete through an approval", st.SkillID), "")
	return nil
}

func (r *run) dispatchAgent(st *stepRow, ps *plan.Step, timeout time.Duration) error {
	agent := ps.Skill.Run.Agent
	if r.e.bus == nil {
		r.failStep(st, skillErr(CodeNoBus, "skill %s runs on agent %s but the hub has no bus configured", st.SkillID, agent), "")
		return nil
	}
	deadline := r.now.Add(timeout)
	reqID := protocol.NewID(protocol.PrefixMessage)
	params := obj{{"execution_id", r.x.ID}, {"skill_id", st.SkillID}, {"attempt", st.Attempt},
		{"input", json.RawMessage(st.Input)}, {"instructions", ps.Skill.Body}}
	payload := mustEncode(obj{{"action", ActionTaskAssign}, {"params", params}, {"deadline", deadline.UTC().Format(time.RFC3339Nano)}})
	meta := mustEncode(obj{{"idempotencyKey", IdempotencyKey(r.x.ID, st.SkillID)}, {"executionId", r.x.ID},
		{"skillId", st.SkillID}, {"attempt", st.Attempt}, {"pipelineId", r.x.PipelineID}})
	env := r.e.envelope(agent, r.x.TraceID, protocol.TypeRequest, payload, meta, r.now, timeout)
	env.ID = reqID
	if err := env.Validate(); err != nil {
		code := CodeInputTooBig
		if len(payload) <= protocol.MaxPayloadBytes {
			code = CodeValidation
		}
		r.failStep(st, skillErr(code, "the task for %s cannot be sent: %v", agent, err), "")
		return nil
	}
	if _, err := r.tx.Exec(r.ctx, `INSERT INTO pipeline_requests (request_id, execution_id, skill_id, attempt, agent_id, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		reqID, r.x.ID, st.SkillID, st.Attempt, agent, r.ms()); err != nil {
		return fmt.Errorf("pipeline: record request: %w", err)
	}
	if err := r.e.bus.Send(r.ctx, r.tx, env); err != nil {
		var perr *protocol.Error
		if !errors.As(err, &perr) {
			return fmt.Errorf("pipeline: send task to %s: %w", agent, err)
		}
		// The bus refused the task (unknown agent, forbidden, inbox full):
		// this attempt fails with the bus's reason.
		code, retry := classCode(perr.Class)
		st.RequestID = reqID
		r.failAttempt(st, skillErr(code, "the bus refused the task for %s: %s", agent, perr.Message), "", retry)
		return nil
	}
	st.RequestID = reqID
	st.LeaseOwner = "agent:" + agent
	st.LeaseUntil = store.Millis(deadline)
	return nil
}

// classCode maps a protocol error class to a step error code and whether
// retrying can help.
func classCode(c protocol.Class) (string, bool) {
	switch c {
	case protocol.ClassPermission:
		return CodePermission, false
	case protocol.ClassUnavailable:
		return CodeUnavailable, true
	case protocol.ClassInvalid:
		return CodeValidation, false
	case protocol.ClassTimeout:
		return CodeTimeout, true
	case protocol.ClassDependency:
		return CodeDependency, true
	}
	return CodeSystem, true
}

// expire handles a running attempt whose deadline or lease passed.
func (r *run) expire(st *stepRow) {
	if strings.HasPrefix(st.LeaseOwner, "agent:") {
		agent := strings.TrimPrefix(st.LeaseOwner, "agent:")
		if err := settleRequest(r.ctx, r.tx, st.RequestID, "", "timeout", r.ms()); err != nil {
			r.e.log.Warn("settle timed-out request", "request", st.RequestID, "err", err)
		}
		r.failAttempt(st, skillErr(CodeTimeout, "agent %s did not answer attempt %d within %s", agent, st.Attempt, r.timeout(st.SkillID)), "", true)
		return
	}
	r.interrupt(st, skillErr(CodeLeaseExpired, "the node %s running attempt %d stopped renewing its lease", st.LeaseOwner, st.Attempt))
}

// interrupt re-queues a step whose executor went away, without counting
// the attempt as a failure (up to MaxInterruptions).
func (r *run) interrupt(st *stepRow, se *SkillError) {
	st.Interruptions++
	if st.Interruptions > r.e.opts.MaxInterruptions {
		se.Message += fmt.Sprintf("; interrupted %d times, giving up", st.Interruptions)
		r.failStep(st, se, "")
		return
	}
	r.retryAt(st, se, r.now)
}

func (r *run) retryAt(st *stepRow, se *SkillError, at time.Time) {
	st.Status = StatusRetrying
	st.Error = se.json()
	st.LeaseOwner, st.LeaseUntil = "", 0
	st.NextAttemptAt = store.Millis(at)
	r.touch(st)
	r.emit(EventSkillRetrying, st.SkillID, obj{{"skill_id", st.SkillID}, {"execution_id", r.x.ID}, {"attempt", st.Attempt},
		{"error", se}, {"retry_at", at.UTC().Format(time.RFC3339Nano)}})
}

// failAttempt records a failed attempt: the step retries after a backoff if
// the error is retryable and retries remain, and fails otherwise.
func (r *run) failAttempt(st *stepRow, se *SkillError, output string, retryable bool) {
	st.Failures++
	if retryable && !slices.Contains(r.e.opts.NonRetryable, se.Code) && st.Failures <= r.retries(st.SkillID) {
		st.Output = output
		r.retryAt(st, se, r.now.Add(r.e.backoff(st.Failures)))
		return
	}
	r.failStep(st, se, output)
}

// failStep fails the step for good.
func (r *run) failStep(st *stepRow, se *SkillError, output string) {
	st.Status = StatusFailed
	st.Error = se.json()
	st.Output = output
	st.LeaseOwner, st.LeaseUntil, st.NextAttemptAt = "", 0, 0
	st.CompletedAt = r.ms()
	r.touch(st)
	r.emit(EventSkillFailed, st.SkillID, obj{{"skill_id", st.SkillID}, {"error", se}, {"execution_id", r.x.ID}})
}

// complete records a successful standard output.
func (r *run) complete(st *stepRow, output json.RawMessage) {
	st.Status = StatusCompleted
	st.Output = string(output)
	st.Error = ""
	st.LeaseOwner, st.LeaseUntil, st.NextAttemptAt = "", 0, 0
	st.CompletedAt = r.ms()
	delete(r.outputs, st.SkillID)
	r.touch(st)
	r.emit(EventSkillCompleted, st.SkillID, obj{{"skill_id", st.SkillID}, {"output", output}, {"execution_id", r.x.ID}})
}

// backoff is the delay before retry n (1-based): BackoffBase doubling per
// failure up to BackoffMax, with "equal jitter" (half fixed, half random)
// so retries of many steps do not synchronise.
func (e *Engine) backoff(n int) time.Duration {
	d := float64(e.opts.BackoffBase) * math.Pow(2, float64(n-1))
	if d > float64(e.opts.BackoffMax) {
		d = float64(e.opts.BackoffMax)
	}
	return time.Duration(d/2 + e.opts.Rand()*d/2)
}

// finish ends the execution: in-flight steps are cancelled, the final
// event is emitted, and an invoking agent gets its answer.
func (r *run) finish(status Status, failed *stepRow, reason string) error {
	if err := r.fillAll(); err != nil {
		return err
	}
	r.x.Status = status
	r.x.CompletedAt = r.ms()
	why := "the execution was cancelled"
	if status == StatusFailed && failed != nil {
		why = fmt.Sprintf("the execution failed because skill %s failed", failed.SkillID)
	}
	for _, st := range r.order {
		switch st.Status {
		case StatusRunning, StatusRetrying, StatusWaitingInput:
			if err := r.cancelStep(st, why); err != nil {
				return err
			}
		}
	}
	switch status {
	case StatusCompleted, StatusPartial:
		results := obj{}
		for _, st := range r.order {
			if st.Status == StatusCompleted {
				results = append(results, kv{st.SkillID, json.RawMessage(st.Output)})
			}
		}
		r.emit(EventPipelineCompleted, "", obj{{"execution_id", r.x.ID}, {"status", status}, {"results", results}})
	case StatusFailed:
		data := obj{{"execution_id", r.x.ID}}
		if failed != nil {
			data = append(data, kv{"skill_id", failed.SkillID}, kv{"error", rawOrNull(failed.Error)})
		}
		r.emit(EventPipelineFailed, "", data)
	case StatusCancelled:
		r.emit(EventPipelineCancelled, "", obj{{"execution_id", r.x.ID}, {"reason", reason}})
	}
	return r.replyToInvoker()
}

// cancelStep stops an in-flight step: its request is settled (so a late
// answer is refused), its agent is told, and a local command is killed.
func (r *run) cancelStep(st *stepRow, why string) error {
	prev := st.Status
	st.Status = StatusCancelled
	st.Error = skillErr(CodeCancelled, "%s", why).json()
	st.CompletedAt = r.ms()
	owner := st.LeaseOwner
	st.LeaseOwner, st.LeaseUntil, st.NextAttemptAt = "", 0, 0
	r.touch(st)
	if prev != StatusRunning {
		return nil
	}
	if strings.HasPrefix(owner, "agent:") {
		if err := settleRequest(r.ctx, r.tx, st.RequestID, "", "cancelled", r.ms()); err != nil {
			return err
		}
		if r.e.bus != nil {
			agent := strings.TrimPrefix(owner, "agent:")
			payload := mustEncode(obj{{"event", ActionTaskCancel}, {"message", fmt.Sprintf("stop working on skill %s of execution %s: %s", st.SkillID, r.x.ID, why)},
				{"data", obj{{"execution_id", r.x.ID}, {"skill_id", st.SkillID}, {"attempt", st.Attempt}, {"requestId", st.RequestID}}}})
			meta := mustEncode(obj{{"idempotencyKey", IdempotencyKey(r.x.ID, st.SkillID)}, {"executionId", r.x.ID}})
			env := r.e.envelope(agent, r.x.TraceID, protocol.TypeNotification, payload, meta, r.now, r.e.opts.EventTTL)
			if err := r.e.send(r.ctx, r.tx, env); err != nil {
				var perr *protocol.Error
				if !errors.As(err, &perr) {
					return err
				}
			}
		}
		return nil
	}
	key := attemptKey{r.x.ID, st.SkillID, st.Attempt}
	r.after = append(r.after, func() { r.e.cancelLocal(key, errCancelled) })
	return nil
}

var errCancelled = errors.New("step cancelled")
