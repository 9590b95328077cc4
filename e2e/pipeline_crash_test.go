package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// pipelineWorker is an SDK worker agent whose handler has a side effect:
// it records every call under the task's idempotency key.
type pipelineWorker struct {
	id    string
	mu    sync.Mutex
	calls map[string]int
}

func (w *pipelineWorker) serve(ctx context.Context, t *testing.T, c *client.Client) {
	var s *client.Socket
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var err error
		s, err = c.Connect(cctx, client.ConnectOptions{})
		cancel()
		if err == nil {
			break
		}
		sleep(ctx, 50*time.Millisecond)
	}
	if s == nil {
		return
	}
	defer s.Close()
	ts := &client.TaskServer{Handler: func(ctx context.Context, task client.Task) client.StandardOutput {
		w.mu.Lock()
		w.calls[task.IdempotencyKey]++
		w.mu.Unlock()
		var in struct{ N int }
		if err := task.DecodeInput(&in); err != nil {
			return client.Fail("VALIDATION_ERROR", err.Error())
		}
		sleep(ctx, 300*time.Millisecond) // the work
		return client.Succeed(map[string]any{"n": in.N + 1})
	}}
	if err := ts.Serve(ctx, s); err != nil && ctx.Err() == nil {
		t.Errorf("worker %s stopped: %v", w.id, err)
	}
}

// The resume promise, tested the hard way: the hub is killed with SIGKILL
// while a pipeline runs — once during a local command, then at random
// moments while two SDK workers run a chain of agent steps — and started
// again on the same data each time. The execution must complete with the
// right result; the command whose node vanished runs again (same
// idempotency key, next attempt); and each worker step's side effect
// happens exactly once per idempotency key as the workers see it.
func TestPipelineSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the hub; skipped with -short")
	}
	bin := binary(t)
	prep, _ := filepath.Abs(filepath.Join("testdata", "prep.sh"))
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		db := ""
		if strings.HasPrefix(dsn, "postgres") {
			db = dsn
		}
		dataDir := t.TempDir()
		p := &hubProcess{t: t, bin: bin, addr: freeAddr(t), dataDir: dataDir, db: db, logPath: filepath.Join(dataDir, "hub.log"),
			args: []string{"--allow-exec", "--pipeline-exec-lease", "2s"}}
		p.start()
		defer p.kill()
		defer func() {
			if t.Failed() {
				t.Logf("hub log:\n%s", p.logTail())
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		admin := newClient(p.url(), adminToken)

		workers := make([]*pipelineWorker, 2)
		var wg sync.WaitGroup
		wctx, stopWorkers := context.WithCancel(ctx)
		for i := range workers {
			a, err := admin.CreateAgent(ctx, client.CreateAgentParams{DisplayName: fmt.Sprintf("Worker %d", i)})
			if err != nil {
				t.Fatal(err)
			}
			workers[i] = &pipelineWorker{id: a.ID, calls: map[string]int{}}
			wg.Add(1)
			go func() {
				defer wg.Done()
				workers[i].serve(wctx, t, newClient(p.url(), a.Token))
			}()
		}
		defer func() { stopWorkers(); wg.Wait() }()

		// prep (a command on the hub), then s1…s8 alternating between the
		// workers, each adding one to n.
		const chain = 8
		runs := filepath.Join(t.TempDir(), "prep.runs")
		var pipe strings.Builder
		pipe.WriteString("id: crash\npipeline: [prep")
		skills := []client.SkillSource{{Name: "prep.md", Content: fmt.Sprintf("---\nid: prep\nrun: {exec: [sh, %q, %q], timeout: 1m}\n---\n", prep, runs)}}
		prev := "prep"
		steps := "steps:\n  prep: {input: {n: \"<<ref:input.n>>\"}}\n"
		for i := 1; i <= chain; i++ {
			id := fmt.Sprintf("s%d", i)
			fmt.Fprintf(&pipe, ", %s", id)
			skills = append(skills, client.SkillSource{Name: id + ".md",
				Content: fmt.Sprintf("---\nid: %s\nrun: {agent: %s, timeout: 2m}\n---\nAdd one.\n", id, workers[i%2].id)})
			steps += fmt.Sprintf("  %s: {input: {n: \"<<ref:%s.output.data.n>>\"}}\n", id, prev)
			prev = id
		}
		pipe.WriteString("]\n" + steps)
		x, err := admin.SubmitExecution(ctx, client.ExecutionInput{Pipeline: pipe.String(), Skills: skills, Input: json.RawMessage(`{"n": 100}`)})
		if err != nil {
			t.Fatal(err)
		}

		// Kill 1: while the command runs.
		poll := func(cond func(*client.Execution) bool) *client.Execution {
			for ctx.Err() == nil {
				cur, err := admin.Execution(ctx, x.ID)
				if err == nil && cond(cur) {
					return cur
				}
				if err != nil && !retryable(err) {
					t.Fatalf("execution: %v", err)
				}
				sleep(ctx, 50*time.Millisecond)
			}
			t.Fatalf("gave up waiting; hub log:\n%s", p.logTail())
			return nil
		}
		poll(func(cur *client.Execution) bool { return cur.Steps[0].Status == "running" })
		sleep(ctx, 300*time.Millisecond)
		p.kill()
		p.start()

		// Kills 2–4: at random moments during the agent steps.
		seed := time.Now().UnixNano()
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		t.Logf("kill schedule seed %d", seed)
		poll(func(cur *client.Execution) bool { return cur.Steps[1].Status != "pending" })
		for k := 0; k < 3; k++ {
			sleep(ctx, time.Duration(200+rng.IntN(700))*time.Millisecond)
			p.kill()
			p.start()
		}
		final := poll(func(cur *client.Execution) bool { return cur.Status.Terminal() })
		if final.Status != "completed" {
			t.Fatalf("execution ended %s: %+v", final.Status, final.Steps)
		}
		var out struct {
			Data struct{ N int } `json:"data"`
		}
		_ = json.Unmarshal(final.Result(), &out)
		if out.Data.N != 100+chain {
			t.Errorf("result n = %d, want %d (%s)", out.Data.N, 100+chain, final.Result())
		}

		// The command ran again under the same key after its node vanished.
		b, _ := os.ReadFile(runs)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) < 2 {
			t.Errorf("prep ran %d times; the kill during it should have made it run again: %q", len(lines), lines)
		}
		for i, l := range lines {
			if want := fmt.Sprintf("%s:prep %d", x.ID, i+1); l != want {
				t.Errorf("prep run %d recorded %q, want %q", i+1, l, want)
			}
		}
		if st := final.Steps[0]; st.Status != "completed" || st.Attempt != len(lines) {
			t.Errorf("prep step %s attempt %d after %d runs", st.Status, st.Attempt, len(lines))
		}

		// Each agent step's side effect happened once per idempotency key.
		seen := map[string]int{}
		for _, w := range workers {
			w.mu.Lock()
			for k, n := range w.calls {
				seen[k] += n
			}
			w.mu.Unlock()
		}
		for i := 1; i <= chain; i++ {
			key := fmt.Sprintf("%s:s%d", x.ID, i)
			if seen[key] != 1 {
				t.Errorf("%s executed %d times by the workers, want exactly once", key, seen[key])
			}
		}
		if len(seen) != chain {
			t.Errorf("workers saw keys %v", seen)
		}
		events, err := admin.ExecutionEventLog(ctx, x.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(events), "[pipeline:completed]"); n != 1 {
			t.Errorf("%d pipeline:completed events:\n%s", n, events)
		}
		p.stop()
	})
}
