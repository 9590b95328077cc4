package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// An approval gate on a manual skill waits in waiting_input, tells its
// approvers, accepts only them (or the owner), and its data becomes the
// step's output for downstream references.
func TestApprovalGate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		ctx := context.Background()
		x := h.submitInline(`id: gate
pipeline: [draft, approve, publish]
steps:
  approve:
    approval: {message: "check the draft", agents: [agt_boss]}
  publish:
    when: "<<ref:approve.output.data.ok>> == true"
    input: {text: "<<ref:draft.output.data.text>>", note: "<<ref:approve.output.data.note>>"}
`, `{}`, sk("draft", "run: {agent: agt_writer}"), "---\nid: approve\n---\nA person approves.\n", sk("publish", "run: {agent: agt_pub}"))
		h.answer(h.bus.waitTasks(t, "agt_writer", 1)[0], `{"success": true, "data": {"text": "hello"}}`)
		st := h.step(x.ID, "approve")
		if st.Status != StatusWaitingInput || h.get(x.ID).CurrentSkill != "approve" {
			t.Fatalf("approve is %s", st.Status)
		}
		if got := h.bus.notifications("agt_boss"); !slices.Equal(got, []string{EventSkillWaitingInput}) {
			t.Fatalf("approver notifications %v", got)
		}
		_, err := h.e.Resume(ctx, ResumeRequest{ExecutionID: x.ID, SkillID: "approve", Actor: "agt_writer", Data: json.RawMessage(`{"ok": true}`)})
		if pe := protoErr(t, err); pe.Code != "not_approver" || pe.Class != protocol.ClassPermission {
			t.Fatalf("resume by a non-approver: %v", err)
		}
		_, err = h.e.Resume(ctx, ResumeRequest{ExecutionID: x.ID, SkillID: "publish", Data: json.RawMessage(`{}`)})
		if pe := protoErr(t, err); pe.Code != "not_waiting" {
			t.Fatalf("resume of a pending step: %v", err)
		}
		_, err = h.e.Resume(ctx, ResumeRequest{Owner: "someone-else", ExecutionID: x.ID, SkillID: "approve"})
		if pe := protoErr(t, err); pe.Code != "execution_not_found" {
			t.Fatalf("resume by another owner: %v", err)
		}
		h.clk.Advance(90 * time.Second)
		if _, err := h.e.Resume(ctx, ResumeRequest{ExecutionID: x.ID, SkillID: "approve", Actor: "agt_boss", Data: json.RawMessage(`{"ok": true, "note": "ship it"}`)}); err != nil {
			t.Fatal(err)
		}
		st = h.step(x.ID, "approve")
		if st.Status != StatusCompleted || !strings.Contains(string(st.Output), `"duration_ms":90000`) || !strings.Contains(string(st.Output), `"resumed_by":"agt_boss"`) {
			t.Fatalf("%s %s", st.Status, st.Output)
		}
		pub := h.bus.waitTasks(t, "agt_pub", 1)[0]
		if got := string(params(t, pub).Input); got != `{"note":"ship it","text":"hello"}` {
			t.Fatalf("publish input %s", got)
		}
		_, err = h.e.Resume(ctx, ResumeRequest{ExecutionID: x.ID, SkillID: "approve", Data: json.RawMessage(`{}`)})
		if pe := protoErr(t, err); pe.Code != "not_waiting" {
			t.Fatalf("second resume: %v", err)
		}

		// An approval gate in front of a skill that runs: the data joins the input.
		y := h.submitInline("id: gate2\npipeline: [deploy]\nsteps:\n  deploy: {approval: true, input: {target: \"<<ref:input.env>>\"}}\n", `{"env": "prod"}`, sk("deploy", "run: {agent: agt_ops}"))
		if st := h.step(y.ID, "deploy"); st.Status != StatusWaitingInput || len(h.bus.tasks("agt_ops")) != 0 {
			t.Fatalf("%s", st.Status)
		}
		if _, err := h.e.Resume(ctx, ResumeRequest{ExecutionID: y.ID, SkillID: "deploy", Actor: "agt_ops", Data: json.RawMessage(`{"by": "alice"}`)}); err != nil {
			t.Fatal(err)
		}
		task := h.bus.waitTasks(t, "agt_ops", 1)[0]
		if got := string(params(t, task).Input); got != `{"approval":{"by":"alice"},"target":"prod"}` {
			t.Fatalf("deploy input %s", got)
		}
	})
}

// Cancel stops in-flight steps, tells their agents, refuses late answers,
// cascades to child executions, and is idempotent.
func TestCancel(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		ctx := context.Background()
		x := h.submitInline("id: c\npipeline: [w, after]\n", `{}`, sk("w", "run: {agent: agt_w}"), sk("after", "run: {agent: agt_after}"))
		task := h.bus.waitTasks(t, "agt_w", 1)[0]
		child, err := h.e.Invoke(ctx, InvokeRequest{ExecutionID: x.ID, SkillID: "w", Caller: "agt_w", Skill: "helper-skill", Input: json.RawMessage(`{}`)})
		if pe := protoErr(t, err); pe.Code != "skill_not_found" {
			t.Fatalf("invoke unknown skill: %v", err)
		}
		if _, err := h.e.PutSkill(ctx, PutSkillRequest{File: SkillFile{Name: "hs.md", Content: []byte(sk("helper-skill", "run: {agent: agt_h}"))}}); err != nil {
			t.Fatal(err)
		}
		child, err = h.e.Invoke(ctx, InvokeRequest{ExecutionID: x.ID, SkillID: "w", Caller: "agt_w", Skill: "helper-skill", Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.e.Cancel(ctx, "", x.ID, "no longer needed")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != StatusCancelled || got.Steps[0].Status != StatusCancelled || got.Steps[1].Status != StatusPending {
			t.Fatalf("%s %s %s", got.Status, got.Steps[0].Status, got.Steps[1].Status)
		}
		if c := h.get(child.ID); c.Status != StatusCancelled {
			t.Fatalf("child %s", c.Status)
		}
		if n := h.bus.notifications("agt_w"); !slices.Contains(n, ActionTaskCancel) {
			t.Fatalf("agent not told: %v", n)
		}
		if pe := protoErr(t, h.e.HandleReply(ctx, reply(task, "success", `{"success": true}`))); pe.Code != "attempt_settled" {
			t.Fatalf("late answer %v", pe)
		}
		if _, err := h.e.Cancel(ctx, "", x.ID, ""); err != nil {
			t.Fatalf("second cancel: %v", err)
		}
		log, _ := h.e.EventLog(ctx, "", x.ID)
		if !strings.Contains(string(log), `[pipeline:cancelled] {"execution_id": "`+x.ID+`", "reason": "no longer needed"}`) {
			t.Fatalf("log:\n%s", log)
		}
		if _, err := h.e.Cancel(ctx, "agt_other", x.ID, ""); protoErr(t, err).Code != "execution_not_found" {
			t.Fatalf("cancel by another owner: %v", err)
		}

		y := h.submitInline("id: done\npipeline: [w]\n", `{}`, sk("w", "run: {agent: agt_y}"))
		h.answer(h.bus.waitTasks(t, "agt_y", 1)[0], `{"success": true}`)
		if _, err := h.e.Cancel(ctx, "", y.ID, ""); protoErr(t, err).Code != "execution_finished" {
			t.Fatalf("cancel of a finished execution: %v", err)
		}
	})
}

// A running agent step invokes another skill over the bus and gets its
// standard output back as a response; depth and cycles are limited.
func TestDirectInvocation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, func(o *Options) { o.MaxDepth = 2 })
		ctx := context.Background()
		x := h.submitInline("id: inv\npipeline: [caller]\n", `{}`, sk("caller", "run: {agent: agt_caller}"))
		// Only caller is in the pipeline; helper and deep come from the registry.
		for _, s := range []string{sk("helper", "run: {agent: agt_helper}"), sk("deep", "run: {agent: agt_deep}")} {
			if _, err := h.e.PutSkill(ctx, PutSkillRequest{File: SkillFile{Name: "s.md", Content: []byte(s)}}); err != nil {
				t.Fatal(err)
			}
		}
		task := h.bus.waitTasks(t, "agt_caller", 1)[0]
		tp := params(t, task)
		invoke := func(from, execID, stepID string, attempt int, skill string) *protocol.Envelope {
			p := fmt.Sprintf(`{"action": "skill.invoke", "params": {"execution_id": %q, "skill_id": %q, "attempt": %d, "skill": %q, "input": {"data": [1, 2, 3]}}}`,
				execID, stepID, attempt, skill)
			env := &protocol.Envelope{Version: protocol.Version, ID: protocol.NewID(protocol.PrefixMessage), TraceID: task.TraceID,
				From: protocol.Address{Agent: from}, To: protocol.Address{Agent: SystemAgent}, Type: protocol.TypeRequest,
				Priority: protocol.PriorityNormal, Timestamp: time.Now().UTC(), Payload: json.RawMessage(p)}
			if err := h.e.HandleRequest(ctx, env); err != nil {
				t.Fatal(err)
			}
			return env
		}
		answerFor := func(agent, requestID string) protocol.ResponsePayload {
			t.Helper()
			for _, env := range h.bus.all() {
				if env.To.Agent != agent {
					continue
				}
				if env.Type == protocol.TypeResponse {
					if p, _ := env.Response(); p.RequestID == requestID {
						return p
					}
				}
				if env.Type == protocol.TypeError {
					if p, _ := env.ErrorPayload(); p.RequestID == requestID {
						return protocol.ResponsePayload{RequestID: requestID, Status: "error", Error: json.RawMessage(mustEncode(p.Message))}
					}
				}
			}
			return protocol.ResponsePayload{}
		}

		req := invoke("agt_caller", tp.ExecutionID, "caller", tp.Attempt, "helper")
		invoke("agt_caller", tp.ExecutionID, "caller", tp.Attempt, "helper") // a different request: a second child
		helperTask := h.bus.waitTasks(t, "agt_helper", 2)[0]
		hp := params(t, helperTask)
		if string(hp.Input) != `{"data":[1,2,3]}` {
			t.Fatalf("helper input %s", hp.Input)
		}
		child := h.get(hp.ExecutionID)
		if child.ParentID != x.ID || child.ParentSkill != "caller" || child.Depth != 1 || child.TraceID != x.TraceID {
			t.Fatalf("child %+v", child)
		}
		// A redelivered request does not start another child.
		if err := h.e.HandleRequest(ctx, req); err != nil {
			t.Fatal(err)
		}
		if n := len(h.bus.tasks("agt_helper")); n != 2 {
			t.Fatalf("helper tasks %d", n)
		}

		// The helper invokes deep (depth 2: allowed), deep invokes helper (a cycle),
		// and deep invoking caller would be depth 3.
		deepReq := invoke("agt_helper", hp.ExecutionID, "helper", 1, "deep")
		deepTask := h.bus.waitTasks(t, "agt_deep", 1)[0]
		dp := params(t, deepTask)
		cyc := invoke("agt_deep", dp.ExecutionID, "deep", 1, "helper")
		if p := answerFor("agt_deep", cyc.ID); !strings.Contains(string(p.Error), "cycle: caller → helper → deep → helper") {
			t.Fatalf("cycle answer %+v", p)
		}
		tooDeep := invoke("agt_deep", dp.ExecutionID, "deep", 1, "other")
		if p := answerFor("agt_deep", tooDeep.ID); !strings.Contains(string(p.Error), "limit is 2") {
			t.Fatalf("depth answer %+v", p)
		}
		self := invoke("agt_caller", tp.ExecutionID, "caller", tp.Attempt, "caller")
		if p := answerFor("agt_caller", self.ID); !strings.Contains(string(p.Error), "cycle") {
			t.Fatalf("self-invocation answer %+v", p)
		}
		forged := invoke("agt_intruder", tp.ExecutionID, "caller", tp.Attempt, "helper")
		if p := answerFor("agt_intruder", forged.ID); !strings.Contains(string(p.Error), "cannot invoke") {
			t.Fatalf("forged answer %+v", p)
		}

		h.answer(helperTask, `{"success": true, "data": {"sum": 6}}`)
		p := answerFor("agt_caller", req.ID)
		if p.Status != protocol.StatusSuccess || !strings.Contains(string(p.Result), `"sum":6`) {
			t.Fatalf("invocation result %+v", p)
		}
		// A failed child answers with failure and its standard output.
		h.answer(deepTask, `{"success": false, "errors": [{"code": "NOPE", "message": "cannot"}]}`)
		if p := answerFor("agt_helper", deepReq.ID); p.Status != protocol.StatusFailure || !strings.Contains(string(p.Result), `"code":"NOPE"`) {
			t.Fatalf("failed invocation answer %+v", p)
		}
		// Invocations made through the API wait for the result.
		api, err := h.e.Invoke(ctx, InvokeRequest{ExecutionID: x.ID, SkillID: "caller", Skill: "helper", Input: json.RawMessage(`{"n": 1}`)})
		if err != nil {
			t.Fatal(err)
		}
		h.answer(h.bus.waitTasks(t, "agt_helper", 3)[2], `{"success": true, "data": {"api": true}}`)
		done, err := h.e.Wait(ctx, "", api.ID)
		if err != nil || !strings.Contains(string(done.Result()), `"api":true`) {
			t.Fatalf("%v %s", err, done.Result())
		}
	})
}

func TestRetention(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, func(o *Options) { o.Retention = 24 * time.Hour; o.PruneInterval = time.Hour })
		ctx := context.Background()
		old := h.submitInline("id: old\npipeline: [w]\n", `{}`, sk("w", "run: {agent: agt_old}"))
		h.answer(h.bus.waitTasks(t, "agt_old", 1)[0], `{"success": true}`)
		running := h.submitInline("id: running\npipeline: [w]\nsteps: {w: {approval: true}}\n", `{}`, "---\nid: w\n---\n")
		h.clk.Advance(23 * time.Hour)
		if n, err := h.e.Prune(ctx); err != nil || n != 0 {
			t.Fatalf("pruned %d early (%v)", n, err)
		}
		h.clk.Advance(2 * time.Hour)
		h.tick() // prunes: the interval has passed
		if _, err := h.e.Get(ctx, "", old.ID); protoErr(t, err).Code != "execution_not_found" {
			t.Fatalf("old execution still there: %v", err)
		}
		for _, table := range []string{"pipeline_steps", "pipeline_events", "pipeline_requests", "pipeline_definitions"} {
			var n int
			db.QueryRow(ctx, "SELECT COUNT(*) FROM "+table+" WHERE "+map[bool]string{true: "hash IS NOT NULL", false: "execution_id = '" + old.ID + "'"}[table == "pipeline_definitions"]).Scan(&n)
			if table == "pipeline_definitions" && n != 1 || table != "pipeline_definitions" && n != 0 {
				t.Fatalf("%s: %d rows left", table, n)
			}
		}
		if got := h.get(running.ID); got.Status != StatusRunning {
			t.Fatalf("running execution touched: %s", got.Status)
		}
	})
}

func TestRegistryAndIdempotentSubmit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		ctx := context.Background()
		_, err := h.e.PutSkill(ctx, PutSkillRequest{Owner: "agt_o", File: SkillFile{Name: "bad.md", Content: []byte("---\nid: x\nrun:\n  retries: many\n---\n")}})
		pe := protoErr(t, err)
		if pe.FieldErrors["bad.md:run.retries"] != "line 4: must be a whole number" {
			t.Fatalf("%v %v", err, pe.FieldErrors)
		}
		for _, s := range []string{sk("a", "run: {agent: agt_a}"), sk("b", "run: {agent: agt_b}", "version: 2.0.0")} {
			if _, err := h.e.PutSkill(ctx, PutSkillRequest{Owner: "agt_o", File: SkillFile{Name: "f.md", Content: []byte(s)}}); err != nil {
				t.Fatal(err)
			}
		}
		list, _ := h.e.ListSkills(ctx, "agt_o")
		if len(list) != 2 || list[1].Skill.Version != "2.0.0" {
			t.Fatalf("list %+v", list)
		}
		if l, _ := h.e.ListSkills(ctx, "agt_other"); len(l) != 0 {
			t.Fatal("registry leaks across owners")
		}
		req := SubmitRequest{Owner: "agt_o", Pipeline: []byte("id: reg\npipeline: [a, b]\n"), Input: json.RawMessage(`{"k": 1}`), IdempotencyKey: "job-1"}
		x1, err := h.e.Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		x2, err := h.e.Submit(ctx, req)
		if err != nil || x2.ID != x1.ID {
			t.Fatalf("repeat: %v %s %s", err, x2.ID, x1.ID)
		}
		if n := len(h.bus.tasks("agt_a")); n != 1 {
			t.Fatalf("repeat dispatched again: %d", n)
		}
		req.Input = json.RawMessage(`{"k": 2}`)
		if _, err := h.e.Submit(ctx, req); protoErr(t, err).Code != "idempotency_conflict" {
			t.Fatalf("%v", err)
		}
		if _, err := h.e.Submit(ctx, SubmitRequest{Owner: "agt_other", Pipeline: []byte("id: reg\npipeline: [a]\n")}); err == nil {
			t.Fatal("another owner's registry was used")
		}
		// Editing a registered skill does not change a running execution: it is pinned.
		if _, err := h.e.PutSkill(ctx, PutSkillRequest{Owner: "agt_o", File: SkillFile{Name: "f.md", Content: []byte(sk("b", "run: {agent: agt_new}"))}}); err != nil {
			t.Fatal(err)
		}
		h.answer(h.bus.waitTasks(t, "agt_a", 1)[0], `{"success": true}`)
		if n := len(h.bus.tasks("agt_b")); n != 1 {
			t.Fatalf("pinned skill b not used: %d tasks for agt_b, %d for agt_new", n, len(h.bus.tasks("agt_new")))
		}
		if err := h.e.DeleteSkill(ctx, "agt_o", "a"); err != nil {
			t.Fatal(err)
		}
		if err := h.e.DeleteSkill(ctx, "agt_o", "a"); protoErr(t, err).Code != "skill_not_found" {
			t.Fatalf("%v", err)
		}
		// Owners only see their executions.
		if _, err := h.e.Get(ctx, "agt_other", x1.ID); protoErr(t, err).Code != "execution_not_found" {
			t.Fatalf("%v", err)
		}
		if l, _ := h.e.List(ctx, ListFilter{Owner: "agt_o"}); len(l) != 1 || l[0].ID != x1.ID {
			t.Fatalf("list %v", l)
		}
		if _, err := h.e.StateJSON(ctx, "agt_other", x1.ID); err == nil {
			t.Fatal("state export across owners")
		}
	})
}

func TestSubscriptions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		ctx := context.Background()
		if _, err := h.e.Subscribe(ctx, SubscribeRequest{AgentID: "agt_s", Events: []string{"skill:exploded"}}); protoErr(t, err).FieldErrors["events[0]"] == "" {
			t.Fatalf("%v", err)
		}
		subs, err := h.e.Subscribe(ctx, SubscribeRequest{AgentID: "agt_s", Owner: "agt_o", Events: []string{"pipeline:*", "skill:failed"}})
		if err != nil || len(subs) != 2 {
			t.Fatalf("%v %v", err, subs)
		}
		again, _ := h.e.Subscribe(ctx, SubscribeRequest{AgentID: "agt_s", Owner: "agt_o", Events: []string{"skill:failed"}})
		if len(again) != 1 || again[0].ID != subs[1].ID {
			t.Fatalf("repeat subscription %v vs %v", again, subs)
		}
		x, err := h.e.Submit(ctx, SubmitRequest{Owner: "agt_o", Pipeline: []byte("id: s\npipeline: [w]\n"), Skills: []SkillFile{{Name: "w.md", Content: []byte(sk("w", "run: {agent: agt_w}"))}}})
		if err != nil {
			t.Fatal(err)
		}
		h.e.Submit(ctx, SubmitRequest{Owner: "agt_elsewhere", Pipeline: []byte("id: s\npipeline: [w]\n"), Skills: []SkillFile{{Name: "w.md", Content: []byte(sk("w", "run: {agent: agt_w2}"))}}})
		h.answer(h.bus.waitTasks(t, "agt_w", 1)[0], `{"success": false, "errors": [{"code": "X", "message": "y"}]}`)
		if got := h.bus.notifications("agt_s"); !slices.Equal(got, []string{"pipeline:started", "skill:failed", "pipeline:failed"}) {
			t.Fatalf("notifications %v", got)
		}
		var n *protocol.Envelope
		for _, env := range h.bus.to("agt_s", protocol.TypeNotification) {
			n = env
		}
		var payload struct {
			Event string
			Data  map[string]any
		}
		json.Unmarshal(n.Payload, &payload)
		if n.From.Agent != SystemAgent || n.TraceID != x.TraceID || payload.Data["execution_id"] != x.ID {
			t.Fatalf("notification %s", n.Payload)
		}
		if err := h.e.Unsubscribe(ctx, "agt_s", subs[0].ID); err != nil {
			t.Fatal(err)
		}
		if err := h.e.Unsubscribe(ctx, "agt_s", subs[0].ID); protoErr(t, err).Code != "subscription_not_found" {
			t.Fatal(err)
		}
		if l, _ := h.e.Subscriptions(ctx, "agt_s"); len(l) != 1 {
			t.Fatalf("%v", l)
		}
		evs, err := h.e.Events(ctx, "agt_o", x.ID, 1, 2)
		if err != nil || len(evs) != 2 || evs[0].Seq != 2 || evs[1].Seq != 3 {
			t.Fatalf("paging: %v %+v", err, evs)
		}
	})
}
