package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/store"
)

// launch is one attempt of an exec step to run on this node.
type launch struct {
	execID, skillID string
	attempt         int
	argv            []string
	dir             string
	input           []byte
	timeout         time.Duration
	traceID         string
	started         time.Time
}

var (
	errOutputTooLarge = errors.New("output too large")
	errSuperseded     = errors.New("attempt superseded")
)

// startExec runs a local command for an exec step in its own goroutine,
// (it is called from an after-commit hook, so it must neither block nor write)
// renewing the step's lease while it runs and recording the result.
func (e *Engine) startExec(l launch) {
	key := attemptKey{l.execID, l.skillID, l.attempt}
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		// Shutting down. This runs in an after-commit hook and must not
		// write; the lease expires and the step runs again elsewhere or
		// after the restart.
		e.log.Info("not starting exec step: engine stopped", "execution", l.execID, "skill", l.skillID, "attempt", l.attempt)
		return
	}
	ctx, cancel := context.WithCancelCause(e.execCtx)
	e.running[key] = cancel
	e.execWG.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.execWG.Done()
		defer func() {
			e.mu.Lock()
			delete(e.running, key)
			e.mu.Unlock()
			cancel(nil)
		}()
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			e.renewLease(ctx, key, cancel)
		}()
		var res execResult
		select {
		case e.sem <- struct{}{}:
			res = e.runCommand(ctx, l)
			<-e.sem
		case <-ctx.Done():
			res = execResult{kind: resInterrupted}
		}
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errCancelled), errors.Is(cause, errSuperseded):
			res = execResult{kind: resDiscard}
		case e.execCtx.Err() != nil && res.kind != resDone:
			res = execResult{kind: resInterrupted}
		}
		cancel(errSuperseded) // stop the renewer
		<-renewed
		e.settleExec(key, l, res)
	}()
}

// cancelLocal stops a local command of this node, if it runs here.
func (e *Engine) cancelLocal(key attemptKey, cause error) {
	e.mu.Lock()
	cancel := e.running[key]
	e.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

// renewLease extends the step's lease every third of LeaseDuration. When
// the step is no longer this attempt's (cancelled, or re-dispatched after
// the lease was lost), the command is stopped.
func (e *Engine) renewLease(ctx context.Context, key attemptKey, cancel context.CancelCauseFunc) {
	t := time.NewTicker(e.opts.LeaseDuration / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var n int64
		err := e.db.Write(ctx, func(tx *store.Tx) error {
			res, err := tx.Exec(ctx, `UPDATE pipeline_steps SET lease_until = ? WHERE execution_id = ? AND skill_id = ? AND attempt = ?
AND status = 'running' AND lease_owner = ?`, store.Millis(e.clock.Now().Add(e.opts.LeaseDuration)), key.exec, key.skill, key.attempt, e.node)
			if err != nil {
				return err
			}
			n, _ = res.RowsAffected()
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			e.log.Warn("renew exec lease", "execution", key.exec, "skill", key.skill, "err", err)
			continue
		}
		if n == 0 {
			cancel(errSuperseded)
			return
		}
	}
}

type resultKind int

const (
	resDone        resultKind = iota + 1 // output (or failure) to record
	resInterrupted                       // the hub is stopping; re-run later
	resDiscard                           // the attempt is no longer current
)

type execResult struct {
	kind      resultKind
	stdout    []byte
	err       *SkillError // engine-observed failure (timeout, exit status, size)
	retryable bool
	dur       time.Duration
}

// runCommand runs the command in its own process group with the resolved
// input on stdin, and kills the whole group on timeout, cancellation or
// oversized output.
func (e *Engine) runCommand(parent context.Context, l launch) execResult {
	ctx, cancelTimeout := context.WithTimeout(parent, l.timeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	cmd := exec.CommandContext(ctx, l.argv[0], l.argv[1:]...)
	if l.dir != "" {
		if st, err := os.Stat(l.dir); err == nil && st.IsDir() {
			cmd.Dir = l.dir
		}
	}
	cmd.Env = e.commandEnv(l)
	cmd.Stdin = bytes.NewReader(l.input)
	stdout := &capBuffer{max: e.opts.MaxOutputBytes, overflow: func() { cancel(errOutputTooLarge) }}
	stderr := &tailBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	setProcessGroup(cmd)
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	runErr := cmd.Run()
	dur := time.Since(start)
	res := execResult{kind: resDone, stdout: stdout.Bytes(), dur: dur}
	name := l.argv[0]
	switch {
	case errors.Is(context.Cause(ctx), errOutputTooLarge):
		res.err = skillErr(CodeOutputTooBig, "%s wrote more than %d bytes to stdout (Options.MaxOutputBytes); its process group was killed", name, e.opts.MaxOutputBytes)
	case parent.Err() != nil:
		res.kind = resInterrupted
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.err = skillErr(CodeTimeout, "%s did not finish within %s; its process group was killed", name, l.timeout).withDetails(stderr.String())
		res.retryable = true
	case runErr != nil:
		var exitErr *exec.ExitError
		if !errors.As(runErr, &exitErr) {
			res.err = skillErr(CodeExecFailed, "cannot run %s: %v", name, runErr)
			break
		}
		// A command may fail with a standard output that explains why.
		if _, out, perr := parseOutput(res.stdout, e.opts.MaxOutputBytes, e.clock.Now(), dur); perr == nil && !out.Success {
			break
		}
		res.err = skillErr(CodeExecFailed, "%s exited with status %d", name, exitErr.ExitCode()).withDetails(stderr.String())
		res.retryable = true
	}
	return res
}

// commandEnv is the environment of a command: a minimal base (the hub's own
// secrets must not leak into skills) plus the step's identity.
func (e *Engine) commandEnv(l launch) []string {
	env := []string{}
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := os.LookupEnv("PATH"); !ok {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	return append(env,
		"SWITCHBOARD_EXECUTION_ID="+l.execID,
		"SWITCHBOARD_SKILL_ID="+l.skillID,
		"SWITCHBOARD_ATTEMPT="+strconv.Itoa(l.attempt),
		"SWITCHBOARD_IDEMPOTENCY_KEY="+IdempotencyKey(l.execID, l.skillID),
		"SWITCHBOARD_TRACE_ID="+l.traceID,
		"SWITCHBOARD_DEADLINE="+l.started.Add(l.timeout).UTC().Format(time.RFC3339),
	)
}

// settleExec records the result of a local attempt, fenced by its attempt
// number and lease: a result for an attempt that is no longer current is
// dropped.
func (e *Engine) settleExec(key attemptKey, l launch, res execResult) {
	if res.kind == resDiscard {
		return
	}
	ctx := context.Background()
	stale := false
	err := e.write(ctx, func(tx *store.Tx) error {
		stale = false
		now := e.clock.Now()
		r, err := e.open(ctx, tx, key.exec, lockWait, now)
		if err != nil || r == nil {
			return err
		}
		st := r.steps[key.skill]
		if st == nil || st.Attempt != key.attempt || st.Status != StatusRunning || st.LeaseOwner != e.node {
			stale = true
			return nil
		}
		switch {
		case res.kind == resInterrupted:
			// Released for the next scheduler pass (another node, or this
			// hub after its restart); not re-dispatched by this stopping node.
			r.interrupt(st, skillErr(CodeInterrupted, "the hub stopped while attempt %d of %s ran", st.Attempt, strings.Join(l.argv, " ")))
			return r.save()
		case res.err != nil:
			r.failAttempt(st, res.err, "", res.retryable)
		default:
			norm, out, perr := parseOutput(res.stdout, e.opts.MaxOutputBytes, now, now.Sub(l.started))
			if perr != nil {
				perr.Message = fmt.Sprintf("%s: %s", l.argv[0], perr.Message)
				r.failAttempt(st, perr, "", perr.Code != CodeOutputTooBig)
			} else {
				r.applyOutput(st, norm, out)
			}
		}
		if err := r.advance(); err != nil {
			return err
		}
		return r.save()
	})
	if err != nil {
		e.log.Error("record exec step result", "execution", key.exec, "skill", key.skill, "attempt", key.attempt, "err", err)
	} else if stale {
		e.log.Info("dropped result of a superseded exec attempt", "execution", key.exec, "skill", key.skill, "attempt", key.attempt)
	}
}

// capBuffer keeps up to max bytes and calls overflow once when more arrive.
type capBuffer struct {
	buf      bytes.Buffer
	max      int
	over     bool
	overflow func()
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if c.over {
		return len(p), nil
	}
	if c.buf.Len()+len(p) > c.max {
		c.over = true
		c.overflow()
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capBuffer) Bytes() []byte { return c.buf.Bytes() }

// tailBuffer keeps the last max bytes written (stderr for error details).
type tailBuffer struct {
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.TrimSpace(string(t.b)) }
