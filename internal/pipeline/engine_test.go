package pipeline

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// A five-step DAG: an exec step that fails once and is retried, two agent
// steps answered through the bus in parallel (fan-out), a step skipped by
// its when condition, and an exec step that merges both agent results
// (fan-in). The exported state.json and events.log match golden files.
func TestEndToEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		ctx := context.Background()
		dir := h.copyDir("e2e")
		if _, err := h.e.Subscribe(ctx, SubscribeRequest{AgentID: "agt_watcher", Events: []string{"skill:*"}, PipelineID: "report"}); err != nil {
			t.Fatal(err)
		}
		if err := h.e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		x, err := h.e.Submit(ctx, SubmitRequest{File: filepath.Join(dir, "pipeline.yaml"), AllowExec: true,
			Input: json.RawMessage(`{"n": 21, "source": "api", "notify": false}`), Metadata: map[string]any{"requested_by": "test"}})
		if err != nil {
			t.Fatal(err)
		}
		if x.DefinitionVersion != "1.0.0" || len(x.DefinitionHash) != 64 {
			t.Fatalf("definition not pinned: %q %q", x.DefinitionVersion, x.DefinitionHash)
		}

		// Attempt 1 of fetch fails with a retryable error; the retry waits
		// for its backoff.
		st := h.waitStep(x.ID, "fetch", StatusRetrying)
		if st.Attempt != 1 || st.Error == nil || st.Error.Code != "UPSTREAM_UNAVAILABLE" || st.NextAttemptAt == nil {
			t.Fatalf("fetch after attempt 1: %+v", st)
		}
		h.clk.Set(t0.Add(time.Minute))
		h.tick()

		// Fan-out: both agents get their task with resolved input.
		dbl := h.bus.waitTasks(t, "agt_doubler", 1)[0]
		lbl := h.bus.waitTasks(t, "agt_labeler", 1)[0]
		dp, lp := params(t, dbl), params(t, lbl)
		if string(dp.Input) != `{"items":[21,22]}` || dp.Attempt != 1 || dp.SkillID != "double" || dp.ExecutionID != x.ID ||
			!strings.Contains(dp.Instructions, "Double every item") {
			t.Fatalf("double task: %+v", dp)
		}
		if string(lp.Input) != `{"text":"first=21 from api"}` {
			t.Fatalf("label input: %s", lp.Input)
		}
		var meta map[string]any
		json.Unmarshal(dbl.Metadata, &meta)
		if meta["idempotencyKey"] != x.ID+":double" || dbl.From.Agent != SystemAgent {
			t.Fatalf("task metadata %v from %s", meta, dbl.From.Agent)
		}
		if rp, _ := dbl.Request(); rp.Deadline == nil || !rp.Deadline.Equal(t0.Add(time.Minute+2*time.Minute)) {
			t.Fatalf("deadline %v", rp.Deadline)
		}
		if got := h.step(x.ID, "notify").Status; got != StatusSkipped {
			t.Fatalf("notify is %s, want skipped", got)
		}

		h.clk.Set(t0.Add(time.Minute + 5*time.Second))
		h.answer(dbl, `{"success": true, "data": {"sum": 86}, "metadata": {"processed_at": "2026-01-14T10:01:04Z", "duration_ms": 1200, "records_count": 2}, "errors": []}`)
		h.clk.Set(t0.Add(time.Minute + 7*time.Second))
		h.answer(lbl, `{"success": true, "data": {"text": "LABEL first=21 from api"}}`)

		done := h.wait(x.ID)
		if done.Status != StatusCompleted {
			t.Fatalf("status %s", done.Status)
		}
		var merged struct {
			Data struct{ Summary string } `json:"data"`
		}
		json.Unmarshal(done.Result(), &merged)
		if merged.Data.Summary != "LABEL first=21 from api (sum 86, label completed)" {
			t.Fatalf("merge output %s", done.Result())
		}

		state, err := h.e.StateJSON(ctx, "", x.ID)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "e2e.state.json.golden", normalise(state, x.ID))
		log, err := h.e.EventLog(ctx, "", x.ID)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "e2e.events.log.golden", normalise(log, x.ID))

		// Front-matter subscription (double: pipeline:completed) and the API
		// subscription (agt_watcher: skill:*) were notified.
		if got := h.bus.notifications("agt_doubler"); !slices.Equal(got, []string{"pipeline:completed"}) {
			t.Fatalf("agt_doubler notifications %v", got)
		}
		want := []string{"skill:started", "skill:retrying", "skill:started", "skill:completed", "skill:started", "skill:started",
			"skill:skipped", "skill:completed", "skill:completed", "skill:started", "skill:completed"}
		if got := h.bus.notifications("agt_watcher"); !slices.Equal(got, want) {
			t.Fatalf("agt_watcher notifications\n got %v\nwant %v", got, want)
		}
		if n := len(h.bus.tasks("agt_notifier")); n != 0 {
			t.Fatalf("skipped step was dispatched %d times", n)
		}
	})
}

// After a hub restart mid-pipeline the execution continues from where it
// stopped: the completed exec step does not run again, the task already
// out with an agent is not sent again, and the agent's answer (received by
// the new engine) completes it.
func TestRestartResumes(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db1, err := store.Open(ctx, dsn, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := &harness{t: t, db: db1, bus: newFakeBus(), clk: newClock(), dir: t.TempDir()}
		h.e = h.engine(nil)
		countFile := filepath.Join(h.dir, "runs.txt")
		x := h.submitInline("id: restart\npipeline: [a, b, c]\nsteps:\n  c: {input: {from_b: \"<<ref:b.output.data.v>>\"}}\n", `{"v": 1}`,
			"---\nid: a\nrun: {exec: [\"@HELPER@\", pipeline-helper, count, \""+countFile+"\"]}\n---\n",
			"---\nid: b\nrun: {agent: agt_b}\n---\n",
			"---\nid: c\nrun: {agent: agt_c}\n---\n")
		taskB := h.bus.waitTasks(t, "agt_b", 1)[0]

		// Kill the hub: engine and store go away mid-pipeline.
		h.e.Stop()
		db1.Close()

		db2 := storetest.Open(t, dsn)
		h2 := &harness{t: t, db: db2, bus: h.bus, clk: h.clk, dir: h.dir}
		h2.e = h2.engine(nil)
		if err := h2.e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		h2.tick()
		if n := len(h2.bus.tasks("agt_b")); n != 1 {
			t.Fatalf("task for b sent %d times", n)
		}
		h2.answer(taskB, `{"success": true, "data": {"v": "from b"}}`)
		taskC := h2.bus.waitTasks(t, "agt_c", 1)[0]
		if string(params(t, taskC).Input) != `{"from_b":"from b"}` {
			t.Fatalf("c input %s", params(t, taskC).Input)
		}
		h2.answer(taskC, `{"success": true, "data": {}}`)
		if got := h2.wait(x.ID).Status; got != StatusCompleted {
			t.Fatalf("status %s", got)
		}
		// The worker saw each idempotency key once.
		seen := map[string]int{}
		for _, env := range h2.bus.all() {
			var m map[string]any
			if json.Unmarshal(env.Metadata, &m) == nil && env.Type == "request" {
				seen[m["idempotencyKey"].(string)]++
			}
		}
		if len(seen) != 2 || seen[x.ID+":b"] != 1 || seen[x.ID+":c"] != 1 {
			t.Fatalf("tasks per idempotency key: %v", seen)
		}
		runs := readLines(t, countFile)
		if len(runs) != 1 || runs[0] != x.ID+":a 1" {
			t.Fatalf("exec step a ran %d times: %q", len(runs), runs)
		}
	})
}

// A node that vanished while running an exec step stops renewing its
// lease; once the lease expires another node runs the step again (the
// lost attempt does not count against retries).
func TestLeaseExpiryRetriesVanishedExecutor(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		db := storetest.Open(t, dsn)
		h := newHarness(t, db, func(o *Options) { o.NodeID = "node-a"; o.LeaseDuration = 30 * time.Second })
		var launched []launch
		h.e.launch = func(l launch) { launched = append(launched, l) } // node-a dies before running it
		countFile := filepath.Join(h.dir, "runs.txt")
		x := h.submitInline("id: lease\npipeline: [a]\n", `{}`,
			"---\nid: a\nrun: {exec: [\"@HELPER@\", pipeline-helper, count, \""+countFile+"\"], retries: 0}\n---\n")
		if len(launched) != 1 || h.step(x.ID, "a").Status != StatusRunning {
			t.Fatalf("launched %d, step %+v", len(launched), h.step(x.ID, "a"))
		}

		other := &harness{t: t, db: storetest.Open(t, dsn), bus: h.bus, clk: h.clk, dir: h.dir}
		other.e = other.engine(func(o *Options) { o.NodeID = "node-b" })
		other.tick() // lease still valid: nothing happens
		if st := other.step(x.ID, "a"); st.Attempt != 1 || st.Status != StatusRunning {
			t.Fatalf("step touched before lease expiry: %+v", st)
		}
		h.clk.Advance(31 * time.Second)
		other.tick()
		if got := other.wait(x.ID); got.Status != StatusCompleted || got.Steps[0].Attempt != 2 {
			t.Fatalf("status %s attempt %d", got.Status, got.Steps[0].Attempt)
		}
		if runs := readLines(t, countFile); len(runs) != 1 || runs[0] != x.ID+":a 2" {
			t.Fatalf("runs %q", runs)
		}
		log, _ := other.e.EventLog(context.Background(), "", x.ID)
		if !strings.Contains(string(log), `"code": "LEASE_EXPIRED"`) {
			t.Fatalf("log lacks the lease expiry:\n%s", log)
		}
	})
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := readFileIfExists(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Stopping the hub while a command runs kills it and releases the step
// without using up a retry; after the restart it runs again.
func TestStopInterruptsExec(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db1, err := store.Open(ctx, dsn, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := &harness{t: t, db: db1, bus: newFakeBus(), clk: newClock(), dir: t.TempDir()}
		h.e = h.engine(nil)
		runs := filepath.Join(h.dir, "runs.txt")
		x := h.submitInline("id: stop\npipeline: [s]\n", `{}`, "---\nid: s\nrun: {exec: [\"@HELPER@\", pipeline-helper, hang-first, \""+runs+"\"], retries: 0, timeout: 1h}\n---\n")
		deadline := time.Now().Add(20 * time.Second)
		for len(readLines(t, runs)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("command never started")
			}
			time.Sleep(10 * time.Millisecond)
		}
		h.e.Stop()
		st := h.step(x.ID, "s")
		if st.Status != StatusRetrying || st.Error.Code != CodeInterrupted || st.Attempt != 1 {
			t.Fatalf("after stop: %s %+v", st.Status, st.Error)
		}
		pid, _ := strconv.Atoi(strings.Fields(readLines(t, runs)[0])[0])
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("command %d survived the shutdown", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
		db1.Close()

		h2 := &harness{t: t, db: storetest.Open(t, dsn), bus: h.bus, clk: h.clk, dir: h.dir}
		h2.e = h2.engine(nil)
		h2.tick()
		if got := h2.wait(x.ID); got.Status != StatusCompleted || got.Steps[0].Attempt != 2 {
			t.Fatalf("%s attempt %d", got.Status, got.Steps[0].Attempt)
		}
	})
}
