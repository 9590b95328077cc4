package client

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Task is one pipeline step the hub assigned to this agent: the payload of
// a task.assign request from system:pipeline.
type Task struct {
	ExecutionID string
	SkillID     string
	Attempt     int
	PipelineID  string
	// IdempotencyKey is the same for every attempt of the step
	// ("<execution>:<skill>"): a worker that already did the step's side
	// effect under this key must not do it again.
	IdempotencyKey string
	Input          json.RawMessage // the resolved input, a JSON object
	Instructions   string          // the skill's Markdown body
	Deadline       time.Time       // when the hub times this attempt out (zero: none given)
	Request        *Envelope       // the task.assign request itself

	c *Client
}

// ParseTask reads a task.assign request; ok is false for any other envelope.
func ParseTask(env *Envelope) (Task, bool) {
	if env == nil || env.Type != protocol.TypeRequest {
		return Task{}, false
	}
	p, err := env.Request()
	if err != nil || p.Action != "task.assign" {
		return Task{}, false
	}
	var params struct {
		ExecutionID  string          `json:"execution_id"`
		SkillID      string          `json:"skill_id"`
		Attempt      int             `json:"attempt"`
		Input        json.RawMessage `json:"input"`
		Instructions string          `json:"instructions"`
	}
	if json.Unmarshal(p.Params, &params) != nil || params.ExecutionID == "" || params.SkillID == "" {
		return Task{}, false
	}
	var meta struct {
		IdempotencyKey string `json:"idempotencyKey"`
		PipelineID     string `json:"pipelineId"`
	}
	_ = json.Unmarshal(env.Metadata, &meta)
	t := Task{ExecutionID: params.ExecutionID, SkillID: params.SkillID, Attempt: params.Attempt, PipelineID: meta.PipelineID,
		IdempotencyKey: meta.IdempotencyKey, Input: params.Input, Instructions: params.Instructions, Request: env}
	if t.IdempotencyKey == "" {
		t.IdempotencyKey = t.ExecutionID + ":" + t.SkillID
	}
	if p.Deadline != nil {
		t.Deadline = *p.Deadline
	}
	return t, true
}

// DecodeInput unmarshals the task's input into v.
func (t Task) DecodeInput(v any) error { return json.Unmarshal(t.Input, v) }

// Invoke runs another skill as a child execution of this step (the seed's
// direct invocation, `/skill input='{…}'`) and returns its standard output
// once it has finished. Depth and cycles are limited by the hub.
func (t Task) Invoke(ctx context.Context, skill string, input any) (StandardOutput, error) {
	if t.c == nil {
		return StandardOutput{}, fmt.Errorf("task %s/%s was not received through a TaskServer", t.ExecutionID, t.SkillID)
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return StandardOutput{}, err
	}
	wait := 5 * time.Minute
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	res, err := t.c.InvokeSkill(ctx, t.ExecutionID, InvokeInput{SkillID: t.SkillID, Attempt: t.Attempt, Skill: skill, Input: raw}, wait)
	if err != nil {
		return StandardOutput{}, err
	}
	if !res.Execution.Status.Terminal() {
		return StandardOutput{}, fmt.Errorf("invoked skill %s (execution %s) did not finish in time", skill, res.Execution.ID)
	}
	var out StandardOutput
	if len(res.Result) == 0 || string(res.Result) == "null" {
		for _, st := range res.Execution.Steps {
			if st.Error != nil {
				return Fail(st.Error.Code, st.Error.Message), nil
			}
		}
		return Fail("INVOKE_FAILED", "the invoked execution ended with status "+string(res.Execution.Status)), nil
	}
	err = json.Unmarshal(res.Result, &out)
	return out, err
}

// StandardOutput is what every skill answers with (the seed's standard
// output format). The hub fills metadata.processed_at and duration_ms when
// they are missing.
type StandardOutput struct {
	Success  bool           `json:"success"`
	Data     any            `json:"data"`
	Metadata map[string]any `json:"metadata,omitempty"`
	Errors   []SkillError   `json:"errors"`
}

// Succeed is a successful output carrying data.
func Succeed(data any) StandardOutput {
	return StandardOutput{Success: true, Data: data, Errors: []SkillError{}}
}

// Fail is a failed output with one error. The hub retries the step (when
// its skill allows retries) unless code is one it never retries, such as
// VALIDATION_ERROR.
func Fail(code, message string) StandardOutput {
	return StandardOutput{Success: false, Errors: []SkillError{{Code: code, Message: message}}}
}

// TaskHandler does one step's work and returns its standard output. ctx
// ends at the task's deadline, when the hub cancels the step, or when the
// server stops.
type TaskHandler func(ctx context.Context, t Task) StandardOutput

// ServeTasks answers the task.assign requests that reach the socket with
// h until ctx ends, acknowledging every delivery; see TaskServer.
func (c *Client) ServeTasks(ctx context.Context, s *Socket, h TaskHandler) error {
	return (&TaskServer{Handler: h}).Serve(ctx, s)
}

// TaskServer turns an agent into a pipeline worker: it receives task.assign
// requests on a socket, runs Handler, answers with a response whose result
// is the standard output, and acknowledges the delivery only after the
// answer was accepted, so a worker that dies mid-task gets the task again.
//
// Answers are idempotent per idempotency key: a task redelivered after its
// step succeeded here (the hub or the connection died between the answer
// and the ack) is answered with the remembered output without calling
// Handler again, and a redelivery that arrives while the first is still
// running waits for it. The memory is this process's; a worker that must
// survive its own restarts keeps the key with its side effects.
type TaskServer struct {
	Handler TaskHandler
	// Concurrency bounds the tasks handled at once (default 4).
	Concurrency int
	// Remember is how many successful outputs are kept by idempotency key
	// (default 1024).
	Remember int
	// OnDelivery receives every other delivery (pipeline event
	// notifications, task.cancelled, direct messages); it is acknowledged
	// when OnDelivery returns.
	OnDelivery func(ctx context.Context, d Delivery, env *Envelope)
	// Logger reports refused answers and retries (default slog.Default()).
	Logger *slog.Logger

	mu       sync.Mutex
	done     map[string]StandardOutput
	order    []string
	inflight map[string]*flight
	cancels  map[string]context.CancelFunc // by request id
}

type flight struct {
	done chan struct{}
	out  StandardOutput
	ok   bool
}

// Serve runs until ctx ends (returning nil) or the socket closes.
func (ts *TaskServer) Serve(ctx context.Context, s *Socket) error {
	if ts.Handler == nil {
		return fmt.Errorf("client: TaskServer needs a Handler")
	}
	conc := ts.Concurrency
	if conc <= 0 {
		conc = 4
	}
	if ts.Logger == nil {
		ts.Logger = slog.Default()
	}
	ts.mu.Lock()
	if ts.done == nil {
		ts.done, ts.inflight, ts.cancels = map[string]StandardOutput{}, map[string]*flight{}, map[string]context.CancelFunc{}
	}
	ts.mu.Unlock()
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		d, err := s.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		env, err := d.Decode()
		if err != nil {
			ts.settle(ctx, s, d)
			continue
		}
		task, ok := ParseTask(env)
		if !ok {
			ts.other(ctx, s, d, env)
			continue
		}
		task.c = s.c
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ts.handle(ctx, s, d, task)
		}()
	}
}

// other handles a delivery that is not a task: a task.cancelled
// notification stops the handler working on that request.
func (ts *TaskServer) other(ctx context.Context, s *Socket, d Delivery, env *Envelope) {
	if env.Type == protocol.TypeNotification {
		var p struct {
			Event string `json:"event"`
			Data  struct {
				RequestID string `json:"requestId"`
			} `json:"data"`
		}
		if json.Unmarshal(env.Payload, &p) == nil && p.Event == "task.cancelled" {
			ts.mu.Lock()
			cancel := ts.cancels[p.Data.RequestID]
			ts.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	}
	if ts.OnDelivery != nil {
		ts.OnDelivery(ctx, d, env)
	}
	ts.settle(ctx, s, d)
}

func (ts *TaskServer) handle(ctx context.Context, s *Socket, d Delivery, t Task) {
	out, cancelled := ts.run(ctx, s, d, t)
	if ctx.Err() != nil {
		return // stopping: the delivery comes back to the next worker
	}
	if !cancelled {
		ts.answer(ctx, s, t, out)
	}
	ts.settle(ctx, s, d)
}

// run returns the task's output: remembered, shared with a running
// duplicate, or computed by Handler. cancelled reports that the hub
// cancelled the step meanwhile (nothing to answer).
func (ts *TaskServer) run(ctx context.Context, s *Socket, d Delivery, t Task) (StandardOutput, bool) {
	ts.mu.Lock()
	if out, ok := ts.done[t.IdempotencyKey]; ok {
		ts.mu.Unlock()
		return out, false
	}
	if f := ts.inflight[t.IdempotencyKey]; f != nil {
		ts.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return StandardOutput{}, true
		}
		if f.ok {
			return f.out, false
		}
		return ts.run(ctx, s, d, t) // the first one was cancelled: do it now
	}
	f := &flight{done: make(chan struct{})}
	ts.inflight[t.IdempotencyKey] = f
	tctx, cancel := context.WithCancel(ctx)
	if !t.Deadline.IsZero() {
		tctx, cancel = context.WithDeadline(ctx, t.Deadline)
	}
	ts.cancels[t.Request.ID] = cancel
	ts.mu.Unlock()

	stopExtending := ts.keepLeased(tctx, s, d)
	out := ts.call(tctx, t)
	stopExtending()
	cancelled := false
	select {
	case <-tctx.Done():
		cancelled = ctx.Err() == nil && !errorsIsDeadline(tctx)
	default:
	}
	cancel()

	ts.mu.Lock()
	delete(ts.cancels, t.Request.ID)
	delete(ts.inflight, t.IdempotencyKey)
	f.out, f.ok = out, !cancelled
	if out.Success && !cancelled {
		ts.remember(t.IdempotencyKey, out)
	}
	ts.mu.Unlock()
	close(f.done)
	return out, cancelled
}

func errorsIsDeadline(ctx context.Context) bool { return ctx.Err() == context.DeadlineExceeded }

// remember keeps a successful output (mu held), forgetting the oldest.
func (ts *TaskServer) remember(key string, out StandardOutput) {
	limit := ts.Remember
	if limit <= 0 {
		limit = 1024
	}
	if _, ok := ts.done[key]; !ok {
		ts.order = append(ts.order, key)
	}
	ts.done[key] = out
	for len(ts.order) > limit {
		delete(ts.done, ts.order[0])
		ts.order = ts.order[1:]
	}
}

// call runs the handler, turning a panic into a failed output.
func (ts *TaskServer) call(ctx context.Context, t Task) (out StandardOutput) {
	defer func() {
		if p := recover(); p != nil {
			ts.Logger.Error("task handler panicked", "execution", t.ExecutionID, "skill", t.SkillID, "panic", p)
			out = Fail("WORKER_PANIC", fmt.Sprintf("the worker failed: %v", p))
		}
	}()
	out = ts.Handler(ctx, t)
	if out.Errors == nil {
		out.Errors = []SkillError{}
	}
	return out
}

// keepLeased extends the delivery's lease while the handler runs, so a
// long task is not redelivered to another worker.
func (ts *TaskServer) keepLeased(ctx context.Context, s *Socket, d Delivery) func() {
	lease := time.Until(d.LeaseUntil)
	if lease < 3*time.Second {
		lease = 3 * time.Second
	}
	ectx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-ectx.Done():
				return
			case <-t.C:
				_, _ = s.Extend(ectx, d, lease)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// answer sends the response, repeating the same envelope (so the hub
// dedupes it) while the connection is down. A refusal from the hub — the
// attempt timed out, was cancelled or superseded — is final.
func (ts *TaskServer) answer(ctx context.Context, s *Socket, t Task, out StandardOutput) {
	status := "success"
	if !out.Success {
		status = "failure"
	}
	resp, err := NewResponse(t.Request, status, out)
	if err != nil {
		ts.Logger.Error("encode task answer", "execution", t.ExecutionID, "skill", t.SkillID, "err", err)
		resp, _ = NewResponse(t.Request, "failure", Fail("WORKER_ERROR", "the worker's output could not be encoded as JSON: "+err.Error()))
	}
	resp.ID = protocol.NewID(protocol.PrefixMessage)
	for ctx.Err() == nil {
		_, err := s.Send(ctx, resp)
		if err == nil {
			return
		}
		if Code(err) != "" {
			ts.Logger.Info("the hub did not apply a task answer", "execution", t.ExecutionID, "skill", t.SkillID, "attempt", t.Attempt, "err", err)
			return
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// settle acknowledges a delivery, repeating while the connection is down.
func (ts *TaskServer) settle(ctx context.Context, s *Socket, d Delivery) {
	for ctx.Err() == nil {
		_, err := s.Ack(ctx, d)
		if err == nil || Code(err) != "" {
			return // acked, or the lease was lost (the delivery comes back)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
