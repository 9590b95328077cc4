package app

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/httpapi"
	"github.com/switchboard-hub/switchboard/internal/pipeline"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// PipelineConfig tunes skill pipelines. Zero values take the engine's
// defaults.
type PipelineConfig struct {
	// SkillsDir is a directory of skill files registered at every start in
	// the deployment's shared registry (owner ""), which every agent's
	// pipelines fall back to. A problem in any file stops the start.
	SkillsDir string
	// AllowExec lets the administrator run skills that execute local
	// commands on this host (inline, from a pipeline file on disk, or
	// registered). Agents can never submit or register such skills.
	AllowExec bool
	// Retention is how long finished executions are kept (default 7 days).
	Retention time.Duration
	// MaxOutputBytes caps one step's standard output (default 1 MiB);
	// a larger answer fails the step with OUTPUT_TOO_LARGE.
	MaxOutputBytes int
	// ExecLease is how long a running local command's lease lasts before
	// another node (or this one after a crash) runs it again (default 30s).
	ExecLease time.Duration
	// DefaultTimeout is a step's timeout when neither the step nor its
	// skill sets one (default 5m).
	DefaultTimeout time.Duration
	// BackoffBase is the first retry delay, doubling per failure (default 1s).
	BackoffBase time.Duration
	// PollInterval is how often the scheduler looks for due work (default 250ms).
	PollInterval time.Duration
}

// wirePipelines builds the pipeline engine on the bus, registers it as the
// system recipient system:pipeline, loads --skills-dir, mounts the HTTP
// routes and runs the scheduler as a worker.
//
// Replies and requests reach the engine inside the bus transaction that
// accepts them (HandleReplyTx / HandleRequestTx): an agent's answer is
// applied atomically with its acceptance, so a crash keeps both or
// neither, and an answer the engine refuses (stale or settled attempt)
// refuses the agent's send with that structured error. The E004 the bus
// produces when a task's deadline passes is ignored: the engine times steps
// out itself, on the same deadline.
func (a *App) wirePipelines(ctx context.Context) error {
	cfg := a.Config.Pipelines
	e, err := pipeline.New(a.DB, pipeline.Options{
		Bus: busAdapter{a.Bus}, Clock: a.Config.Clock, Logger: a.Log.With("subsystem", "pipeline"),
		Retention: cfg.Retention, MaxOutputBytes: cfg.MaxOutputBytes, LeaseDuration: cfg.ExecLease,
		DefaultTimeout: cfg.DefaultTimeout, BackoffBase: cfg.BackoffBase, PollInterval: cfg.PollInterval,
	})
	if err != nil {
		return fmt.Errorf("pipelines: %w", err)
	}
	a.Pipelines = e
	a.Bus.RegisterSystem(pipeline.SystemAgent, bus.SystemHooks{AcceptRequests: true, OnMessage: pipelineHook(e)})
	if cfg.SkillsDir != "" {
		recs, err := e.LoadSkillsDir(ctx, "", cfg.SkillsDir, cfg.AllowExec)
		if err != nil {
			return fmt.Errorf("--skills-dir %s: %s", cfg.SkillsDir, describe(err))
		}
		a.Log.Info("skills registered", "dir", cfg.SkillsDir, "count", len(recs))
	}
	a.API.MountPipelines(e, httpapi.PipelineOptions{AllowExec: cfg.AllowExec})
	a.addWorker("pipelines", func(ctx context.Context) {
		if err := e.Start(ctx); err != nil {
			a.Log.Error("pipeline scheduler did not start", "err", err)
		}
		<-ctx.Done()
		e.Stop()
	})
	return nil
}

// pipelineHook hands the engine what the bus accepts for system:pipeline.
func pipelineHook(e *pipeline.Engine) func(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
	return func(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
		switch {
		case env.From.Agent == "system:bus":
			return nil // a task's deadline passed: the engine's own timeout handles it
		case env.Type == protocol.TypeRequest:
			return e.HandleRequestTx(ctx, tx, env)
		case env.Type == protocol.TypeResponse || env.Type == protocol.TypeError:
			return e.HandleReplyTx(ctx, tx, env)
		}
		return nil // notifications to the engine are only logged by the bus
	}
}

// busAdapter is the engine's view of the bus: system sends inside the
// engine's transaction.
type busAdapter struct{ b *bus.Service }

func (p busAdapter) Send(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
	_, err := p.b.SendSystemTx(ctx, tx, env)
	return err
}

// describe renders a structured error with every field problem, one per
// line, for a start-up failure an operator reads in a terminal.
func describe(err error) string {
	pe := protocol.AsError(err)
	if len(pe.FieldErrors) == 0 {
		return err.Error()
	}
	keys := make([]string, 0, len(pe.FieldErrors))
	for k := range pe.FieldErrors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(pe.Message)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s: %s", k, pe.FieldErrors[k])
	}
	return b.String()
}
