package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

func sk(id string, extra ...string) string {
	fm := "id: " + id + "\n"
	for _, e := range extra {
		fm += e + "\n"
	}
	if !strings.Contains(fm, "run:") {
		fm += "run: {agent: agt_w}\n"
	}
	return "---\n" + fm + "---\nInstructions for " + id + ".\n"
}

// Bad definitions and inputs are refused at submission with an E003 that
// names every problem, and nothing is stored or dispatched.
func TestSubmitRejectsBadDefinitions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		tests := []struct {
			name     string
			pipeline string
			skills   []string
			input    string
			fields   []string // fieldErrors keys that must be present
			msg      string
		}{
			{"bad yaml with line", "id: p\npipeline: [a, b\nsteps: {}\n", []string{sk("a"), sk("b")}, `{}`, []string{"(document)"}, "line 2: invalid YAML"},
			{"bad skill yaml with line", "id: p\npipeline: [a]\n", []string{"---\nid: a\nrun:\n  agent: agt_w\n  timeout: forever\n---\n"}, `{}`,
				[]string{"skill0.md:run.timeout"}, "line 5"},
			{"unknown skill", "id: p\npipeline: [a, ghost]\n", []string{sk("a")}, `{}`, []string{"pipeline[1]"}, `unknown skill "ghost"`},
			{"unknown ref skill", "id: p\npipeline: [a, b]\nsteps:\n  b: {input: {x: \"<<ref:nope.output>>\"}}\n", []string{sk("a"), sk("b")}, `{}`,
				[]string{"steps.b.input.x"}, `not a skill of this pipeline`},
			{"ref to non-upstream", "id: p\npipeline: [a, b, c]\nsteps:\n  b: {input: {x: \"<<ref:c.output.data>>\"}}\n",
				[]string{sk("a"), sk("b", "upstream: [a]"), sk("c", "upstream: [a]")}, `{}`, []string{"steps.b.input.x"}, "not upstream of b"},
			{"cycle", "id: p\npipeline: [a, b]\n", []string{sk("a", "upstream: [b]"), sk("b", "upstream: [a]")}, `{}`, []string{"pipeline"}, "cycle: a → b → a"},
			{"bad when", "id: p\npipeline: [a, b]\nsteps:\n  b: {when: \"<<ref:a.status>> is completed\"}\n", []string{sk("a"), sk("b")}, `{}`,
				[]string{"steps.b.when"}, "== or !="},
			{"bad ref syntax", "id: p\npipeline: [a]\nsteps:\n  a: {input: {x: \"<<ref:input..n>>\"}}\n", []string{sk("a")}, `{}`, []string{"steps.a.input.x"}, "empty path segment"},
			{"input missing what refs need", "id: p\npipeline: [a]\nsteps:\n  a: {input: {x: \"<<ref:input.n>>\"}}\n", []string{sk("a")}, `{"m": 1}`,
				[]string{"input"}, `no field "n"`},
			{"input not an object", "id: p\npipeline: [a]\n", []string{sk("a")}, `[1, 2]`, []string{"input"}, "JSON object"},
			{"input not json", "id: p\npipeline: [a]\n", []string{sk("a")}, `{"n":`, []string{"input"}, "not valid JSON"},
			{"manual skill without approval", "id: p\npipeline: [a]\n", []string{"---\nid: a\n---\n"}, `{}`, []string{"steps.a"}, "approval: true"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				req := SubmitRequest{Pipeline: []byte(tt.pipeline), Input: json.RawMessage(tt.input)}
				for i, s := range tt.skills {
					req.Skills = append(req.Skills, SkillFile{Name: "skill" + strconv.Itoa(i) + ".md", Content: []byte(s)})
				}
				_, err := h.e.Submit(context.Background(), req)
				pe := protoErr(t, err)
				if pe.Class != protocol.ClassInvalid {
					t.Fatalf("class %s: %v", pe.Class, err)
				}
				all, _ := json.Marshal(pe.FieldErrors)
				for _, f := range tt.fields {
					if _, ok := pe.FieldErrors[f]; !ok {
						t.Fatalf("fieldErrors lack %q: %s", f, all)
					}
				}
				if !strings.Contains(string(all)+pe.Message, tt.msg) {
					t.Fatalf("error does not mention %q: %s / %s", tt.msg, pe.Message, all)
				}
			})
		}
		if n := countRows(t, db, "pipeline_executions"); n != 0 {
			t.Fatalf("%d executions stored from bad submissions", n)
		}
		if n := len(h.bus.all()); n != 0 {
			t.Fatalf("%d envelopes sent for bad submissions", n)
		}
	})
}

// Skills that run local commands need AllowExec unless they come from the
// registry (where registering them needed it).
func TestExecNeedsPermission(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		ctx := context.Background()
		execSkill := SkillFile{Name: "e.md", Content: []byte("---\nid: e\nrun: {exec: [/bin/true]}\n---\n")}
		_, err := h.e.Submit(ctx, SubmitRequest{Pipeline: []byte("id: p\npipeline: [e]\n"), Skills: []SkillFile{execSkill}})
		if pe := protoErr(t, err); pe.Class != protocol.ClassPermission || pe.Code != "exec_not_allowed" {
			t.Fatalf("err %v", err)
		}
		_, err = h.e.PutSkill(ctx, PutSkillRequest{Owner: "agt_owner", File: execSkill})
		if pe := protoErr(t, err); pe.Code != "exec_not_allowed" {
			t.Fatalf("err %v", err)
		}
		if _, err := h.e.PutSkill(ctx, PutSkillRequest{Owner: "agt_owner", File: execSkill, AllowExec: true}); err != nil {
			t.Fatal(err)
		}
		x, err := h.e.Submit(ctx, SubmitRequest{Owner: "agt_owner", Pipeline: []byte("id: p\npipeline: [e]\n")})
		if err != nil {
			t.Fatalf("registered exec skill refused: %v", err)
		}
		if h.step(x.ID, "e").Status == StatusPending {
			t.Fatal("not dispatched")
		}
	})
}

func TestOversizeOutput(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, func(o *Options) { o.MaxOutputBytes = 1024 })
		x := h.submitInline("id: big\npipeline: [big]\n", `{}`, "---\nid: big\nrun: {exec: [\"@HELPER@\", pipeline-helper, big, \"5000\"], retries: 3}\n---\n")
		st := h.waitStep(x.ID, "big", StatusFailed)
		if st.Error.Code != CodeOutputTooBig || st.Attempt != 1 || !strings.Contains(st.Error.Message, "1024") {
			t.Fatalf("step %+v error %+v", st, st.Error)
		}
		if got := h.wait(x.ID).Status; got != StatusFailed {
			t.Fatalf("status %s", got)
		}

		// The same cap applies to an agent's answer.
		y := h.submitInline("id: big2\npipeline: [w]\n", `{}`, sk("w"))
		task := h.bus.waitTasks(t, "agt_w", 1)[0]
		h.answer(task, `{"success": true, "data": "`+strings.Repeat("y", 2000)+`"}`)
		if st := h.step(y.ID, "w"); st.Status != StatusFailed || st.Error.Code != CodeOutputTooBig {
			t.Fatalf("agent step %+v %+v", st, st.Error)
		}
	})
}

// A malformed answer fails the attempt with a clear error and is retried;
// it never breaks the execution.
func TestMalformedWorkerAnswers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		x := h.submitInline("id: mal\npipeline: [w]\n", `{}`, sk("w", "run: {agent: agt_w, retries: 4}"))
		bad := []struct{ result, want string }{
			{`{"ok": true}`, `unknown member "ok"`},
			{`"just a string"`, "not a JSON object"},
			{`{"success": false, "data": null}`, "errors is empty"},
			{`{"success": "yes"}`, "success must be true or false"},
		}
		for i, b := range bad {
			task := h.bus.waitTasks(t, "agt_w", i+1)[i]
			if err := h.e.HandleReply(context.Background(), reply(task, protocol.StatusSuccess, b.result)); err != nil {
				t.Fatalf("malformed answer was refused instead of failing the attempt: %v", err)
			}
			st := h.step(x.ID, "w")
			if st.Status != StatusRetrying || st.Error.Code != CodeMalformed || !strings.Contains(st.Error.Message, b.want) {
				t.Fatalf("after %s: %s %+v", b.result, st.Status, st.Error)
			}
			h.clk.Advance(time.Hour)
			h.tick()
		}
		task := h.bus.waitTasks(t, "agt_w", 5)[4]
		if params(t, task).Attempt != 5 {
			t.Fatalf("attempt %d", params(t, task).Attempt)
		}
		h.answer(task, `{"success": true, "data": {"fine": true}}`)
		if got := h.get(x.ID); got.Status != StatusCompleted {
			t.Fatalf("status %s", got.Status)
		}
	})
}

func TestExecFailures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		tests := []struct{ mode, code, msg string }{
			{"garbage", CodeMalformed, "not JSON"},
			{"exit3", CodeExecFailed, "exited with status 3"},
		}
		for _, tt := range tests {
			x := h.submitInline("id: ex\npipeline: [s]\n", `{}`, "---\nid: s\nrun: {exec: [\"@HELPER@\", pipeline-helper, "+tt.mode+"]}\n---\n")
			st := h.waitStep(x.ID, "s", StatusFailed)
			if st.Error.Code != tt.code || !strings.Contains(st.Error.Message, tt.msg) {
				t.Fatalf("%s: %+v", tt.mode, st.Error)
			}
			if tt.mode == "exit3" && !strings.Contains(string(st.Error.Details), "something broke") {
				t.Fatalf("stderr not in details: %s", st.Error.Details)
			}
		}
		x := h.submitInline("id: ex\npipeline: [s]\n", `{}`, "---\nid: s\nrun: {exec: [/nonexistent/program]}\n---\n")
		if st := h.waitStep(x.ID, "s", StatusFailed); st.Error.Code != CodeExecFailed || !strings.Contains(st.Error.Message, "cannot run") {
			t.Fatalf("%+v", st.Error)
		}
		// Commands get a minimal environment: the hub's own variables
		// (tokens, database URLs) stay out.
		x = h.submitInline("id: ex\npipeline: [s]\n", `{}`, "---\nid: s\nrun: {exec: [\"@HELPER@\", pipeline-helper, env]}\n---\n")
		var env struct {
			Data struct {
				Names []string
				Key   string
			}
		}
		json.Unmarshal(h.wait(x.ID).Result(), &env)
		allowed := "PATH HOME LANG LC_ALL TMPDIR TZ SWITCHBOARD_EXECUTION_ID SWITCHBOARD_SKILL_ID SWITCHBOARD_ATTEMPT SWITCHBOARD_IDEMPOTENCY_KEY SWITCHBOARD_TRACE_ID SWITCHBOARD_DEADLINE"
		for _, n := range env.Data.Names {
			if !slices.Contains(strings.Fields(allowed), n) {
				t.Errorf("command environment has %s", n)
			}
		}
		if env.Data.Key != x.ID+":s" || len(env.Data.Names) < 6 {
			t.Fatalf("env output %+v", env)
		}
	})
}

// On timeout the whole process group is killed, grandchildren included.
func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		pidFile := filepath.Join(h.dir, "child.pid")
		x := h.submitInline("id: slow\npipeline: [s]\n", `{}`, "---\nid: s\nrun: {exec: [\"@HELPER@\", pipeline-helper, sleep, \""+pidFile+"\"], timeout: 5s}\n---\n")
		st := h.waitStep(x.ID, "s", StatusFailed)
		if st.Error.Code != CodeTimeout || !strings.Contains(st.Error.Message, "within 5s") {
			t.Fatalf("%+v", st.Error)
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(string(b))
		deadline := time.Now().Add(10 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("grandchild %d survived the timeout", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// An agent that does not answer in time fails the attempt (TIMEOUT); the
// late answer of the superseded attempt is refused and changes nothing;
// the current attempt's answer completes the step; repeats are idempotent.
func TestAgentTimeoutAndZombieAnswer(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		ctx := context.Background()
		x := h.submitInline("id: z\npipeline: [w]\n", `{}`, sk("w", "run: {agent: agt_w, timeout: 30s, retries: 1}"))
		first := h.bus.waitTasks(t, "agt_w", 1)[0]
		h.clk.Advance(29 * time.Second)
		h.tick()
		if st := h.step(x.ID, "w"); st.Status != StatusRunning {
			t.Fatalf("timed out early: %+v", st)
		}
		h.clk.Advance(2 * time.Second)
		h.tick()
		st := h.step(x.ID, "w")
		if st.Status != StatusRetrying || st.Error.Code != CodeTimeout {
			t.Fatalf("after deadline: %s %+v", st.Status, st.Error)
		}
		// An answer after the timeout is refused: that attempt has ended.
		err := h.e.HandleReply(ctx, reply(first, protocol.StatusSuccess, `{"success": true, "data": 1}`))
		if pe := protoErr(t, err); pe.Code != "attempt_settled" {
			t.Fatalf("late answer: %v", err)
		}
		h.clk.Advance(time.Minute)
		h.tick()
		second := h.bus.waitTasks(t, "agt_w", 2)[1]
		if params(t, second).Attempt != 2 {
			t.Fatalf("attempt %d", params(t, second).Attempt)
		}
		before := h.get(x.ID)
		// The zombie (attempt 1) answers again: refused as stale.
		err = h.e.HandleReply(ctx, reply(first, protocol.StatusSuccess, `{"success": true, "data": "zombie"}`))
		if pe := protoErr(t, err); pe.Code != "stale_attempt" {
			t.Fatalf("zombie answer: %v", err)
		}
		if after := h.get(x.ID); after.Version != before.Version || after.Steps[0].Status != StatusRunning {
			t.Fatalf("zombie answer changed the state: %+v", after.Steps[0])
		}
		// Another agent cannot answer the task.
		forged := reply(second, protocol.StatusSuccess, `{"success": true, "data": "forged"}`)
		forged.From.Agent = "agt_intruder"
		if pe := protoErr(t, h.e.HandleReply(ctx, forged)); pe.Code != "not_assignee" || pe.Class != protocol.ClassPermission {
			t.Fatalf("forged answer: %v", pe)
		}
		good := reply(second, protocol.StatusSuccess, `{"success": true, "data": "real"}`)
		if err := h.e.HandleReply(ctx, good); err != nil {
			t.Fatal(err)
		}
		if err := h.e.HandleReply(ctx, good); err != nil {
			t.Fatalf("duplicate delivery of the same answer: %v", err)
		}
		dup := reply(second, protocol.StatusSuccess, `{"success": true, "data": "again"}`)
		if pe := protoErr(t, h.e.HandleReply(ctx, dup)); pe.Code != "attempt_settled" {
			t.Fatalf("second answer: %v", pe)
		}
		got := h.get(x.ID)
		if got.Status != StatusCompleted || !strings.Contains(string(got.Result()), `"real"`) {
			t.Fatalf("%s %s", got.Status, got.Result())
		}
		if pe := protoErr(t, h.e.HandleReply(ctx, reply(first, "success", "{}"))); pe.Code != "stale_attempt" {
			t.Fatalf("%v", pe)
		}
		unknown := reply(first, "success", "{}")
		unknown.Payload = json.RawMessage(`{"requestId": "msg_unknown", "status": "success"}`)
		if pe := protoErr(t, h.e.HandleReply(ctx, unknown)); pe.Code != "unknown_request" {
			t.Fatalf("%v", pe)
		}
	})
}

// Error envelopes map to step errors; non-recoverable or validation errors
// are not retried.
func TestAgentErrorEnvelopes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		ctx := context.Background()
		x := h.submitInline("id: e\npipeline: [w]\n", `{}`, sk("w", "run: {agent: agt_w, retries: 3}"))
		task := h.bus.waitTasks(t, "agt_w", 1)[0]
		if err := h.e.HandleReply(ctx, errorReply(task, protocol.ClassDependency, true, "upstream API down")); err != nil {
			t.Fatal(err)
		}
		if st := h.step(x.ID, "w"); st.Status != StatusRetrying || st.Error.Code != CodeDependency {
			t.Fatalf("%s %+v", st.Status, st.Error)
		}
		h.clk.Advance(time.Hour)
		h.tick()
		task = h.bus.waitTasks(t, "agt_w", 2)[1]
		if err := h.e.HandleReply(ctx, errorReply(task, protocol.ClassInvalid, true, "bad url")); err != nil {
			t.Fatal(err)
		}
		st := h.step(x.ID, "w")
		if st.Status != StatusFailed || st.Error.Code != CodeValidation || st.Attempt != 2 {
			t.Fatalf("%s %+v", st.Status, st.Error)
		}
		// A standard failure output with a non-retryable code is not retried either.
		y := h.submitInline("id: e2\npipeline: [v]\n", `{}`, sk("v", "run: {agent: agt_v, retries: 3}"))
		task = h.bus.waitTasks(t, "agt_v", 1)[0]
		h.answer(task, `{"success": false, "data": null, "errors": [{"code": "VALIDATION_ERROR", "message": "Invalid input format", "field": "url", "details": "URL must start with https://"}]}`)
		st = h.step(y.ID, "v")
		if st.Status != StatusFailed || st.Error.Field != "url" || string(st.Error.Details) != `"URL must start with https://"` {
			t.Fatalf("%s %+v", st.Status, st.Error)
		}
		if !strings.Contains(string(st.Output), `"success":false`) {
			t.Fatalf("failed output not kept: %s", st.Output)
		}
	})
}

// A reference that cannot be resolved when the step starts fails the step
// with a VALIDATION_ERROR naming the reference.
func TestRuntimeReferenceErrors(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		x := h.submitInline("id: r\npipeline: [a, b]\nsteps:\n  b: {input: {u: \"<<ref:a.output.data.items.3.url>>\"}}\n", `{}`, sk("a", "run: {agent: agt_a}"), sk("b", "run: {agent: agt_b, retries: 5}"))
		task := h.bus.waitTasks(t, "agt_a", 1)[0]
		h.answer(task, `{"success": true, "data": {"items": [{"url": "x"}]}}`)
		st := h.step(x.ID, "b")
		if st.Status != StatusFailed || st.Error.Code != CodeValidation || st.Error.Field != "u" ||
			!strings.Contains(st.Error.Message, "<<ref:a.output.data.items.3.url>>") || !strings.Contains(st.Error.Message, "out of range") {
			t.Fatalf("%s %+v", st.Status, st.Error)
		}
		if st.Attempt != 0 || len(h.bus.tasks("agt_b")) != 0 {
			t.Fatal("a step with an unresolvable input was dispatched")
		}
		got := h.get(x.ID)
		if got.Status != StatusFailed {
			t.Fatalf("status %s", got.Status)
		}
		log, _ := h.e.EventLog(context.Background(), "", x.ID)
		if !strings.Contains(string(log), "[pipeline:failed]") {
			t.Fatalf("log:\n%s", log)
		}
		// Declared required inputs are checked too.
		y := h.submitInline("id: r2\npipeline: [c]\n", `{"n": 1}`, sk("c", "inputs: [{name: url, type: string, required: true}]"))
		if st := h.step(y.ID, "c"); st.Status != StatusFailed || !strings.Contains(st.Error.Message, `"url" is required`) {
			t.Fatalf("%s %+v", st.Status, st.Error)
		}
	})
}

// A failing fan-out branch fails the execution and cancels its sibling;
// with allow_failure the execution finishes as partial.
func TestFailureCancelsSiblingsAndPartial(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		y := h.submitInline("id: f2\npipeline: [root, a, b]\n", `{}`, sk("root", "run: {agent: agt_r}"), sk("a", "upstream: [root]", "run: {agent: agt_a}"), sk("b", "upstream: [root]", "run: {agent: agt_b}"))
		h.answer(h.bus.waitTasks(t, "agt_r", 1)[0], `{"success": true, "data": {}}`)
		ta := h.bus.waitTasks(t, "agt_a", 1)[0]
		tb := h.bus.waitTasks(t, "agt_b", 1)[0]
		h.answer(ta, `{"success": false, "errors": [{"code": "BROKEN", "message": "no"}]}`)
		got := h.get(y.ID)
		if got.Status != StatusFailed || got.Steps[2].Status != StatusCancelled || got.Steps[2].Error.Code != CodeCancelled {
			t.Fatalf("%s %+v", got.Status, got.Steps[2])
		}
		if n := h.bus.to("agt_b", "notification"); len(n) == 0 {
			t.Fatal("agent of the cancelled sibling was not told")
		}
		if pe := protoErr(t, h.e.HandleReply(context.Background(), reply(tb, "success", `{"success": true}`))); pe.Code != "attempt_settled" {
			t.Fatalf("%v", pe)
		}

		z := h.submitInline("id: f3\npipeline: [p, q]\nsteps:\n  p: {allow_failure: true}\n  q: {when: \"<<ref:p.status>> == failed\", input: {}}\n", `{}`,
			sk("p", "run: {agent: agt_p}"), sk("q", "run: {agent: agt_q}"))
		h.answer(h.bus.waitTasks(t, "agt_p", 1)[0], `{"success": false, "errors": [{"code": "BROKEN", "message": "no"}]}`)
		h.answer(h.bus.waitTasks(t, "agt_q", 1)[0], `{"success": true, "data": "recovered"}`)
		if got := h.get(z.ID); got.Status != StatusPartial {
			t.Fatalf("status %s", got.Status)
		}
	})
}

// The bus refusing a task (unknown agent) fails the attempt with its reason.
func TestBusRefusesTask(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		h.bus.refuse["agt_gone"] = protocol.NotFound("unknown_agent", "no agent agt_gone")
		x := h.submitInline("id: g\npipeline: [g]\n", `{}`, sk("g", "run: {agent: agt_gone, retries: 1}"))
		st := h.step(x.ID, "g")
		if st.Status != StatusRetrying || st.Error.Code != CodeUnavailable || !strings.Contains(st.Error.Message, "no agent agt_gone") {
			t.Fatalf("%s %+v", st.Status, st.Error)
		}
	})
}
