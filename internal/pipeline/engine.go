// Package pipeline runs skill pipelines: it keeps each execution's state in
// the store, dispatches steps to worker agents over the bus (task.assign
// requests) or to local commands, resolves references between steps,
// retries with backoff, records and delivers lifecycle events, and resumes
// after a restart from what the store says.
//
// # Model
//
// An execution pins a plan (the validated pipeline with its skills, stored
// once per content hash) and has one row per step. Every change happens in
// one store transaction that first locks the execution row, then updates
// only the rows of the steps it touches, checking their version numbers;
// a completion carries the attempt number it answers, so an answer from a
// superseded attempt is refused.
//
// The engine advances an execution inline whenever something happens to it
// (submission, a reply, a finished command, resume, cancel). Timed work —
// retry back-offs, agent deadlines, expired exec leases, retention — is
// found by a scheduler pass (Tick) that claims due executions with
// FOR UPDATE SKIP LOCKED, so several nodes can share one PostgreSQL.
//
// # Statuses
//
// Executions: pending, running, completed, failed, partial (finished, but a
// step marked allow_failure failed), cancelled.
//
// Steps: pending (not started), running (an attempt is out), retrying
// (the last attempt failed; the next starts at next_attempt_at),
// waiting_input (an approval gate waiting for Resume), completed, failed,
// skipped (its when condition was false), cancelled (in flight when the
// execution failed or was cancelled).
//
// # Wiring
//
//	e, _ := pipeline.New(db, pipeline.Options{Bus: theBus})
//	e.Start(ctx)
//	defer e.Stop() // before db.Close()
//
// Envelopes addressed to SystemAgent reach the engine through
// HandleReplyTx (responses and errors answering a task) and
// HandleRequestTx (skill.invoke requests), which run inside the
// transaction in which the bus accepts the envelope — the hub calls them
// from its bus hook, so an answer is applied atomically with its
// acceptance. HandleReply and HandleRequest do the same in a transaction of
// their own. Everything else is called by the HTTP layer and the CLI:
// Submit / Validate, Get, List, StateJSON, Events, EventLog, WaitEvents, Wait,
// Cancel, Resume, Invoke, Subscribe / Subscriptions / Unsubscribe, and the
// registry calls PutSkill, GetSkill, ListSkills, DeleteSkill,
// LoadSkillsDir. Every error they return for bad input is a
// *protocol.Error; methods taking an owner treat "" as an administrator
// who sees every owner's executions.
//
// # Agent steps on the wire
//
// A step whose skill has run.agent becomes a request envelope from
// SystemAgent to that agent: payload {action: "task.assign", params:
// {execution_id, skill_id, attempt, input, instructions}, deadline},
// metadata {idempotencyKey: "<execution>:<skill>", executionId, skillId,
// attempt, pipelineId}, ttl = the step timeout. The agent answers with a
// response whose payload.requestId is the request's id and whose
// payload.result is the standard output (see Output), or with an error
// envelope. Exec steps get the same input as JSON on stdin, the same
// identity in SWITCHBOARD_EXECUTION_ID, SWITCHBOARD_SKILL_ID,
// SWITCHBOARD_ATTEMPT and SWITCHBOARD_IDEMPOTENCY_KEY, and print the
// standard output on stdout.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/pipeline/plan"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// SystemAgent is the bus address of the pipeline engine: step requests come
// from it, and replies addressed to it are handed to HandleReply.
const SystemAgent = "system:pipeline"

// ActionTaskAssign is the request action of an agent step.
const ActionTaskAssign = "task.assign"

// ActionSkillInvoke is the request action a running step sends to
// SystemAgent to invoke another skill directly (see HandleRequest).
const ActionSkillInvoke = "skill.invoke"

// ActionTaskCancel is the event of the notification sent to an agent whose
// step was cancelled while it was working on it.
const ActionTaskCancel = "task.cancelled"

// Bus is the engine's only dependency on the message bus. Send enqueues an
// envelope durably inside the caller's transaction, so a step is dispatched
// if and only if the state change that dispatches it commits.
type Bus interface {
	Send(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error
}

// Status is the status of an execution or a step.
type Status string

// Execution and step statuses (see the package documentation).
const (
	StatusPending      Status = "pending"
	StatusRunning      Status = "running"
	StatusCompleted    Status = "completed"
	StatusFailed       Status = "failed"
	StatusPartial      Status = "partial"
	StatusCancelled    Status = "cancelled"
	StatusSkipped      Status = "skipped"
	StatusWaitingInput Status = "waiting_input"
	StatusRetrying     Status = "retrying"
)

// Terminal reports whether an execution or step in this status will not change again.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusPartial, StatusCancelled, StatusSkipped:
		return true
	}
	return false
}

// Error codes the engine puts in a step's error (the seed's SkillError.code).
const (
	CodeValidation    = "VALIDATION_ERROR"  // bad input or reference; never retried
	CodeMalformed     = "MALFORMED_OUTPUT"  // the answer is not the standard output format
	CodeOutputTooBig  = "OUTPUT_TOO_LARGE"  // the answer exceeds Options.MaxOutputBytes
	CodeInputTooBig   = "INPUT_TOO_LARGE"   // the task does not fit in a bus envelope
	CodeTimeout       = "TIMEOUT"           // no answer before the step's timeout
	CodeLeaseExpired  = "LEASE_EXPIRED"     // the node running a command vanished
	CodeInterrupted   = "INTERRUPTED"       // the hub shut down while a command ran
	CodeExecFailed    = "EXEC_FAILED"       // the command could not start or exited non-zero
	CodeCancelled     = "CANCELLED"         // the execution failed or was cancelled
	CodeAgentError    = "AGENT_ERROR"       // a failure response without a standard output
	CodeUnavailable   = "UNAVAILABLE"       // E002 from the bus
	CodePermission    = "PERMISSION_DENIED" // E001 from the bus
	CodeDependency    = "DEPENDENCY_FAILED" // E005
	CodeSystem        = "SYSTEM_ERROR"      // E006
	CodeNoBus         = "NO_BUS"            // an agent step on an engine without a bus
	CodeInvokeFailure = "INVOKE_FAILED"     // a direct invocation could not run
)

// DefaultNonRetryable are the error codes that fail a step at once: a retry
// would get the same answer.
var DefaultNonRetryable = []string{CodeValidation, CodeOutputTooBig, CodeInputTooBig, CodePermission, CodeCancelled, CodeNoBus}

// Options configure an Engine. Zero values pick the defaults shown.
type Options struct {
	Bus    Bus          // required for agent steps and event notifications
	Clock  clock.Clock  // clock.Real{}
	Logger *slog.Logger // slog.Default()
	NodeID string       // the store's node id; names this node in exec leases

	PollInterval   time.Duration // 250ms: how often Start's loop runs Tick
	LeaseDuration  time.Duration // 30s: exec lease, renewed every third of it
	DefaultTimeout time.Duration // 5m: step timeout when neither step nor skill sets one
	DefaultRetries int           // 0: retries when neither step nor skill sets them
	BackoffBase    time.Duration // 1s: first retry delay (doubling per failure, with jitter)
	BackoffMax     time.Duration // 5m: longest retry delay
	MaxOutputBytes int           // 1 MiB: largest standard output accepted from a step
	MaxInputBytes  int           // 1 MiB: largest execution input
	MaxDepth       int           // 4: deepest chain of direct invocations
	// MaxInterruptions bounds how often one step is re-run because its node
	// vanished or shut down (these do not count against retries). Default 5.
	MaxInterruptions  int
	Retention         time.Duration // 7 days: finished executions older than this are pruned
	PruneInterval     time.Duration // 1h: how often Tick prunes
	NonRetryable      []string      // DefaultNonRetryable
	MaxConcurrentExec int           // 16: local commands running at once on this node
	EventTTL          time.Duration // 24h: TTL of event notifications
	// Rand returns a number in [0, 1) for backoff jitter (math/rand/v2).
	Rand func() float64
}

func (o *Options) defaults(db *store.DB) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.NodeID == "" {
		o.NodeID = db.NodeID()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.PollInterval, 250*time.Millisecond)
	def(&o.LeaseDuration, 30*time.Second)
	def(&o.DefaultTimeout, 5*time.Minute)
	def(&o.BackoffBase, time.Second)
	def(&o.BackoffMax, 5*time.Minute)
	def(&o.Retention, 7*24*time.Hour)
	def(&o.PruneInterval, time.Hour)
	def(&o.EventTTL, 24*time.Hour)
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = 1 << 20
	}
	if o.MaxInputBytes <= 0 {
		o.MaxInputBytes = 1 << 20
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = 4
	}
	if o.MaxInterruptions <= 0 {
		o.MaxInterruptions = 5
	}
	if o.MaxConcurrentExec <= 0 {
		o.MaxConcurrentExec = 16
	}
	if o.NonRetryable == nil {
		o.NonRetryable = DefaultNonRetryable
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
}

// Engine runs pipelines. Create it with New, call Start to run the
// scheduler loop, and Stop before closing the store.
type Engine struct {
	db    *store.DB
	bus   Bus
	clock clock.Clock
	log   *slog.Logger
	opts  Options
	node  string

	plans planCache

	mu        sync.Mutex
	running   map[attemptKey]context.CancelCauseFunc // local commands by attempt
	waiters   map[string]map[chan struct{}]struct{}
	lastPrune time.Time

	execCtx    context.Context // parent of every local command; cancelled by Stop
	execCancel context.CancelFunc
	execWG     sync.WaitGroup
	sem        chan struct{}

	loopCancel context.CancelFunc
	loopDone   chan struct{}
	kick       chan struct{}
	stopped    bool

	// launch starts a local command; tests replace it to simulate a node
	// that vanished after dispatching.
	launch func(l launch)
}

type attemptKey struct {
	exec, skill string
	attempt     int
}

// notifyChannel carries the id of every execution that changed, so waiters
// on any node wake up.
const notifyChannel = "pipeline"

// New returns an engine over db. It registers for change notifications but
// starts no goroutines until Start (local commands dispatched by Submit or
// HandleReply run regardless, and Stop ends them).
func New(db *store.DB, opts Options) (*Engine, error) {
	if db == nil {
		return nil, errors.New("pipeline: nil store")
	}
	opts.defaults(db)
	e := &Engine{
		db: db, bus: opts.Bus, clock: opts.Clock, log: opts.Logger.With("component", "pipeline"), opts: opts, node: opts.NodeID,
		running: map[attemptKey]context.CancelCauseFunc{},
		waiters: map[string]map[chan struct{}]struct{}{},
		sem:     make(chan struct{}, opts.MaxConcurrentExec),
		kick:    make(chan struct{}, 1),
	}
	e.plans.init(256)
	e.execCtx, e.execCancel = context.WithCancel(context.Background())
	e.launch = e.startExec
	db.Listen(notifyChannel, e.onChange)
	return e, nil
}

// Start runs the scheduler loop until Stop or ctx ends: a Tick every
// PollInterval and whenever another node reports a change.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("pipeline: engine stopped")
	}
	if e.loopCancel != nil {
		return errors.New("pipeline: engine already started")
	}
	lctx, cancel := context.WithCancel(ctx)
	e.loopCancel = cancel
	e.loopDone = make(chan struct{})
	go e.loop(lctx)
	return nil
}

func (e *Engine) loop(ctx context.Context) {
	defer close(e.loopDone)
	t := time.NewTicker(e.opts.PollInterval)
	defer t.Stop()
	for {
		if err := e.Tick(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("scheduler pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.kick:
		}
	}
}

// Stop ends the scheduler loop and every local command of this node. The
// interrupted steps are released for an immediate re-run (by this node
// after a restart, or by another node) without counting against their
// retries. Stop must be called before the store is closed.
func (e *Engine) Stop() {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	cancel, done := e.loopCancel, e.loopDone
	e.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	e.execCancel()
	e.execWG.Wait()
}

func (e *Engine) isStopped() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopped
}

// onChange runs on the committing goroutine (or the PostgreSQL listener)
// for every changed execution: wake its waiters and the local scheduler.
func (e *Engine) onChange(id string) {
	e.mu.Lock()
	if id == "*" {
		for _, ws := range e.waiters {
			for ch := range ws {
				signal(ch)
			}
		}
	} else {
		for ch := range e.waiters[id] {
			signal(ch)
		}
	}
	e.mu.Unlock()
	signal(e.kick)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// write runs fn in a store transaction, retrying it when the transaction
// lost a race: a versioned update found the row changed (errStale), two
// group-committed batches on PostgreSQL deadlocked, or a concurrent
// idempotent insert won (the retry then finds its row). fn must keep its
// side effects inside the transaction (AfterCommit, the Bus) so a retry is
// safe.
func (e *Engine) write(ctx context.Context, fn func(tx *store.Tx) error) error {
	var err error
	for i := 0; i < 5; i++ {
		err = e.db.Write(ctx, fn)
		if !retryable(err) {
			return err
		}
	}
	return fmt.Errorf("pipeline: gave up after repeated concurrent updates: %w", err)
}

func retryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errStale) || store.IsUniqueViolation(err) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "SQLSTATE 40P01") || strings.Contains(s, "SQLSTATE 40001") || strings.Contains(s, "deadlock detected")
}

// errStale is returned (and retried) when a versioned update matched no row.
var errStale = errors.New("pipeline: stale write refused")

// Tick runs one scheduler pass: it advances every execution with due timed
// work (retries, agent deadlines, expired leases) and prunes old
// executions when PruneInterval has passed. Start calls it periodically;
// tests and tools may call it directly.
func (e *Engine) Tick(ctx context.Context) error {
	now := e.clock.Now()
	rows, err := e.db.Query(ctx, `SELECT id FROM pipeline_executions WHERE wake_at > 0 AND wake_at <= ? ORDER BY wake_at LIMIT 256`, store.Millis(now))
	if err != nil {
		return fmt.Errorf("pipeline: due executions: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	limit := make(chan struct{}, 16)
	for i, id := range ids {
		wg.Add(1)
		limit <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-limit }()
			errs[i] = e.write(ctx, func(tx *store.Tx) error {
				r, err := e.open(ctx, tx, id, lockSkip, now)
				if err != nil || r == nil {
					return err
				}
				if r.x.WakeAt == 0 || r.x.WakeAt > store.Millis(now) {
					return nil // another node got here first
				}
				if err := r.advance(); err != nil {
					return err
				}
				return r.save()
			})
		}()
	}
	wg.Wait()
	e.mu.Lock()
	due := now.Sub(e.lastPrune) >= e.opts.PruneInterval
	if due {
		e.lastPrune = now
	}
	e.mu.Unlock()
	if due {
		if _, err := e.Prune(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// planCache keeps decoded plans by content hash.
type planCache struct {
	mu  sync.Mutex
	max int
	m   map[string]*plan.Plan
}

func (c *planCache) init(max int) { c.max, c.m = max, map[string]*plan.Plan{} }

func (c *planCache) get(hash string) *plan.Plan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[hash]
}

func (c *planCache) put(hash string, p *plan.Plan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k := range c.m { // evict an arbitrary entry
			delete(c.m, k)
			break
		}
	}
	c.m[hash] = p
}

func (e *Engine) planFor(ctx context.Context, q store.Q, hash string) (*plan.Plan, error) {
	if p := e.plans.get(hash); p != nil {
		return p, nil
	}
	var def string
	if err := q.QueryRow(ctx, `SELECT definition FROM pipeline_definitions WHERE hash = ?`, hash).Scan(&def); err != nil {
		return nil, fmt.Errorf("pipeline: load definition %s: %w", hash, err)
	}
	p, err := plan.Decode([]byte(def))
	if err != nil {
		return nil, err
	}
	p.Hash = hash
	e.plans.put(hash, p)
	return p, nil
}
