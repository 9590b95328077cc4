package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// worker is an SDK worker agent for the tests: it serves task.assign over a
// socket and records what it was asked to do.
type worker struct {
	ID     string
	Client *client.Client

	mu     sync.Mutex
	calls  map[string][]int // idempotency key → attempts the handler ran
	tasks  []client.Task
	events []string // pipeline events notified to this agent
}

func startWorker(t *testing.T, h *apptest.Hub, name string, handle func(ctx context.Context, t client.Task) client.StandardOutput) *worker {
	t.Helper()
	a, c := h.NewAgent(name)
	w := &worker{ID: a.ID, Client: c, calls: map[string][]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.Connect(ctx, client.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := &client.TaskServer{
		Handler: func(ctx context.Context, task client.Task) client.StandardOutput {
			w.mu.Lock()
			w.calls[task.IdempotencyKey] = append(w.calls[task.IdempotencyKey], task.Attempt)
			w.tasks = append(w.tasks, task)
			w.mu.Unlock()
			return handle(ctx, task)
		},
		OnDelivery: func(ctx context.Context, d client.Delivery, env *client.Envelope) {
			if p, err := env.Notification(); err == nil {
				w.mu.Lock()
				w.events = append(w.events, p.Event)
				w.mu.Unlock()
			}
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ts.Serve(ctx, s)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		s.Close()
	})
	return w
}

func (w *worker) snapshot() (map[string][]int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	calls := map[string][]int{}
	for k, v := range w.calls {
		calls[k] = append([]int(nil), v...)
	}
	return calls, append([]string(nil), w.events...)
}

// copyPipeline copies testdata/pipeline into a temporary directory with the
// placeholders replaced (worker ids, the exec script's path).
func copyPipeline(t *testing.T, repl ...string) string {
	t.Helper()
	src, _ := filepath.Abs(filepath.Join("testdata", "pipeline"))
	dst := t.TempDir()
	repl = append(repl, "@FETCH@", filepath.Join(src, "fetch.sh"))
	r := strings.NewReplacer(repl...)
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, []byte(r.Replace(string(b))), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, "report.yaml")
}

var (
	tsRe       = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	durationRe = regexp.MustCompile(`"duration_ms": \d+`)
	hashRe     = regexp.MustCompile(`[0-9a-f]{64}`)
	agentRe    = regexp.MustCompile(`agt_[0-9A-Za-z]+`)
	execRe     = regexp.MustCompile(`run_[0-9A-Za-z]+`)
)

// normalise replaces what differs between runs: the execution id, times,
// durations, hashes and agent ids.
func normalise(s, execID string) string {
	s = strings.ReplaceAll(s, execID, "exec-001")
	s = tsRe.ReplaceAllString(s, "2026-01-14T10:00:00Z")
	s = durationRe.ReplaceAllString(s, `"duration_ms": 0`)
	s = hashRe.ReplaceAllString(s, "<hash>")
	return agentRe.ReplaceAllString(s, "agt_…")
}

// The end-to-end run, through the real hub on every store: a
// 4-skill pipeline with one exec step on the hub, two agent steps on SDK
// workers connected over sockets, fan-out and fan-in, references between
// them, a step that fails once and succeeds on retry, and a step skipped by
// its when condition. It is submitted, followed and exported with the CLI;
// state.json and events.log match the golden files.
func TestPipelineEndToEnd(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			h := apptest.Start(t, b.DSN(t), func(c *app.Config) {
				c.Pipelines.AllowExec = true
				c.Pipelines.BackoffBase = 20 * time.Millisecond
				c.Pipelines.PollInterval = 50 * time.Millisecond
			})
			doubler := startWorker(t, h, "Doubler", func(ctx context.Context, task client.Task) client.StandardOutput {
				if task.Attempt == 1 {
					return client.Fail("UPSTREAM_UNAVAILABLE", "the doubling service did not answer; try again")
				}
				var in struct{ Items []float64 }
				if err := task.DecodeInput(&in); err != nil {
					return client.Fail("VALIDATION_ERROR", err.Error())
				}
				sum := 0.0
				for _, v := range in.Items {
					sum += 2 * v
				}
				out := client.Succeed(map[string]any{"sum": sum})
				out.Metadata = map[string]any{"records_count": len(in.Items)}
				return out
			})
			labeler := startWorker(t, h, "Labeler", func(ctx context.Context, task client.Task) client.StandardOutput {
				var in map[string]any
				_ = task.DecodeInput(&in)
				if task.SkillID != "merge" {
					return client.Fail("VALIDATION_ERROR", "unexpected skill "+task.SkillID)
				}
				return client.Succeed(map[string]any{"summary": fmt.Sprintf("sum %v from %v (label %v)", in["sum"], in["source"], in["label_status"])})
			})
			if _, err := h.Admin.SubscribePipeline(context.Background(), client.PipelineSubscribeInput{AgentID: doubler.ID, Events: []string{"skill:retrying", "skill:skipped"}}); err != nil {
				t.Fatal(err)
			}
			file := copyPipeline(t, "@DOUBLER@", doubler.ID, "@LABELER@", labeler.ID)

			out := mustRun(t, h, apptest.AdminToken, "pipeline", "run", file, "--input", `{"n": 21, "source": "api", "label": false}`, "--wait")
			m := regexp.MustCompile(`execution (run_\w+)\n`).FindStringSubmatch(out)
			if m == nil || !strings.Contains(out, "completed in") || !strings.Contains(out, "skill:retrying  double  UPSTREAM_UNAVAILABLE") {
				t.Fatalf("pipeline run --wait printed:\n%s", out)
			}
			id := m[1]

			state := mustRun(t, h, apptest.AdminToken, "pipeline", "export", id)
			golden(t, "pipeline.state.json", normalise(state, id))
			viaAPI, err := h.Admin.ExecutionState(context.Background(), id)
			if err != nil || string(viaAPI) != state {
				t.Fatalf("GET /state differs from the export: %v\n%s", err, viaAPI)
			}
			log := mustRun(t, h, apptest.AdminToken, "pipeline", "events", id, "--format", "log")
			golden(t, "pipeline.events.log", normalise(log, id))
			if follow := mustRun(t, h, apptest.AdminToken, "pipeline", "events", id, "--follow"); follow != log {
				t.Fatalf("events --follow of a finished execution:\n%s\nwant\n%s", follow, log)
			}

			// What the workers saw: double ran twice under one key (a failure
			// is retried), merge once, label never (skipped).
			calls, aEvents := doubler.snapshot()
			if got := calls[id+":double"]; len(calls) != 1 || fmt.Sprint(got) != "[1 2]" {
				t.Errorf("doubler calls %v", calls)
			}
			lcalls, bEvents := labeler.snapshot()
			if got := lcalls[id+":merge"]; len(lcalls) != 1 || fmt.Sprint(got) != "[1]" {
				t.Errorf("labeler calls %v", lcalls)
			}
			labeler.mu.Lock()
			task := labeler.tasks[0]
			labeler.mu.Unlock()
			if task.ExecutionID != id || task.PipelineID != "report" || task.Deadline.IsZero() || !strings.Contains(task.Instructions, "Merge the sum") {
				t.Errorf("task %+v", task)
			}
			// Subscriptions: the API one (doubler: retrying, skipped) and the
			// front-matter one (merge's agent: pipeline:completed).
			waitFor(t, func() bool {
				_, aEvents = doubler.snapshot()
				_, bEvents = labeler.snapshot()
				return len(aEvents) >= 2 && len(bEvents) >= 1
			})
			if strings.Join(aEvents, ",") != "skill:skipped,skill:retrying" || strings.Join(bEvents, ",") != "pipeline:completed" {
				t.Errorf("notifications: doubler %v, labeler %v", aEvents, bEvents)
			}

			status := mustRun(t, h, apptest.AdminToken, "pipeline", "status", id)
			for _, want := range []string{"completed", "✓ fetch", "- label", "skipped", "attempt 2"} {
				if !strings.Contains(status, want) {
					t.Errorf("status lacks %q:\n%s", want, status)
				}
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
