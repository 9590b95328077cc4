package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// These tests drive the pipeline endpoints through the real hub on both
// stores: every bad definition, input and query gets the structured error
// and stores nothing; runtime failures (oversize output, malformed worker
// answer, timeout) fail the step with the documented code; ownership holds.

func fastPipelines(c *app.Config) {
	c.Pipelines.PollInterval = 50 * time.Millisecond
	c.Pipelines.BackoffBase = 20 * time.Millisecond
	c.Pipelines.MaxOutputBytes = 4096
}

// sk renders a skill file.
func sk(id, front string) string {
	return fmt.Sprintf("---\nid: %s\n%s\n---\nDo %s.\n", id, front, id)
}

// submission renders a POST /v1/executions body.
func submission(pipeline, input string, skills ...string) []byte {
	m := map[string]any{"pipeline": pipeline}
	if input != "" {
		m["input"] = json.RawMessage(input)
	}
	var ss []map[string]string
	for i, s := range skills {
		ss = append(ss, map[string]string{"name": fmt.Sprintf("skills/s%d.md", i), "content": s})
	}
	if ss != nil {
		m["skills"] = ss
	}
	b, _ := json.Marshal(m)
	return b
}

// pipelineRows counts what a refused request must not have created.
func pipelineRows(t *testing.T, h *apptest.Hub) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"pipeline_executions", "pipeline_steps", "pipeline_events", "pipeline_skills", "pipeline_subscriptions", "pipeline_definitions"} {
		var n int
		if err := h.App.DB.QueryRow(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%d ", table, n)
	}
	return b.String() + "\n" + h.BusSnapshot()
}

func TestPipelineSubmitBadInput(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		tm := newTeam(t, h)
		_, w1 := h.NewAgent("W1b", client.CreateAgentParams{ParentID: tm.P1.ID})
		okSkill := sk("a", "run: {agent: "+tm.W1.ID+"}")
		long := strings.Repeat("k", 200)
		tests := []struct {
			name   string
			token  string
			body   []byte
			ctype  string
			status int
			code   string
			class  protocol.Class
			field  string // a fieldErrors key that must be present
			says   string // text the message or that field must contain
		}{
			{"no token", "", submission("id: p\npipeline: [a]\n", "", okSkill), "", 401, "unauthorized", protocol.ClassPermission, "", ""},
			{"malformed json", apptest.AdminToken, []byte(`{"pipeline": `), "", 400, "invalid_json", protocol.ClassInvalid, "", ""},
			{"unknown member", apptest.AdminToken, []byte(`{"pipelin": "id: p"}`), "", 400, "unknown_field", protocol.ClassInvalid, "", ""},
			{"not json", apptest.AdminToken, []byte(`id: p`), "text/yaml", 415, "unsupported_media_type", protocol.ClassInvalid, "", ""},
			{"no pipeline", apptest.AdminToken, []byte(`{"input": {}}`), "", 400, "pipeline_required", protocol.ClassInvalid, "pipeline", "required"},
			{"pipeline and file", apptest.AdminToken, []byte(`{"pipeline": "id: p", "file": "/tmp/p.yaml"}`), "", 400, "invalid_pipeline", protocol.ClassInvalid, "pipeline", "not both"},
			{"pipeline is a number", apptest.AdminToken, []byte(`{"pipeline": 42}`), "", 400, "invalid_pipeline", protocol.ClassInvalid, "pipeline", "JSON string"},
			{"agent names a hub file", tm.C1.Token, []byte(`{"file": "/etc/passwd"}`), "", 403, "file_not_allowed", protocol.ClassPermission, "file", "admin"},
			{"bad yaml", apptest.AdminToken, submission("id: p\npipeline: [a\n", "", okSkill), "", 400, "invalid_pipeline", protocol.ClassInvalid, "", "line 2"},
			{"unknown member in file", apptest.AdminToken, submission("id: p\npipeline: [a]\nstep: {}\n", "", okSkill), "", 400, "invalid_pipeline", protocol.ClassInvalid, "step", "line 3"},
			{"unknown skill", apptest.AdminToken, submission("id: p\npipeline: [a, ghost]\n", "", okSkill), "", 400, "invalid_pipeline", protocol.ClassInvalid, "pipeline[1]", "ghost"},
			{"unknown ref", apptest.AdminToken, submission("id: p\npipeline: [a]\nsteps:\n  a: {input: {x: \"<<ref:nosuch.output.data>>\"}}\n", "", okSkill),
				"", 400, "invalid_pipeline", protocol.ClassInvalid, "steps.a.input.x", "nosuch"},
			{"malformed ref", apptest.AdminToken, submission("id: p\npipeline: [a]\nsteps:\n  a: {input: {x: \"<<ref:a..b>>\"}}\n", "", okSkill),
				"", 400, "invalid_pipeline", protocol.ClassInvalid, "steps.a.input.x", ""},
			{"cycle", apptest.AdminToken, submission("id: p\npipeline: [a, b]\n", "",
				sk("a", "upstream: [b]\nrun: {agent: "+tm.W1.ID+"}"), sk("b", "upstream: [a]\nrun: {agent: "+tm.W1.ID+"}")), "", 400, "invalid_pipeline", protocol.ClassInvalid, "", "cycle"},
			{"bad when", apptest.AdminToken, submission("id: p\npipeline: [a]\nsteps:\n  a: {when: \"sometimes\"}\n", "", okSkill), "", 400, "invalid_pipeline", protocol.ClassInvalid, "steps.a.when", ""},
			{"bad skill file", apptest.AdminToken, submission("id: p\npipeline: [a]\n", "", "---\nid: a\nrun: {agent: [x]}\ntimeout: soon\n---\n"), "", 400, "invalid_pipeline", protocol.ClassInvalid, "", "skills/s0.md"},
			{"skill without front-matter", apptest.AdminToken, submission("id: p\npipeline: [a]\n", "", "just text"), "", 400, "invalid_pipeline", protocol.ClassInvalid, "", "front-matter"},
			{"input not an object", apptest.AdminToken, submission("id: p\npipeline: [a]\n", `[1, 2]`, okSkill), "", 400, "invalid_input", protocol.ClassInvalid, "input", "object"},
			{"input lacks a referenced field", apptest.AdminToken, submission("id: p\npipeline: [a]\nsteps:\n  a: {input: {n: \"<<ref:input.n>>\"}}\n", `{"m": 1}`, okSkill),
				"", 400, "invalid_pipeline", protocol.ClassInvalid, "", "input.n"},
			{"exec skill from an agent", tm.C1.Token, submission("id: p\npipeline: [a]\n", "", sk("a", `run: {exec: ["true"]}`)), "", 403, "exec_not_allowed", protocol.ClassPermission, "", ""},
			{"exec skill without --allow-exec", apptest.AdminToken, submission("id: p\npipeline: [a]\n", "", sk("a", `run: {exec: ["true"]}`)), "", 403, "exec_not_allowed", protocol.ClassPermission, "", "--allow-exec"},
			{"unknown agent", apptest.AdminToken, submission("id: p\npipeline: [a]\n", "", sk("a", "run: {agent: agt_nobody}")), "", 400, "unknown_agent", protocol.ClassInvalid, "steps.a.run.agent", "agt_nobody"},
			{"agent out of reach", w1.Token, submission("id: p\npipeline: [a]\n", "", sk("a", "run: {agent: "+tm.C2.ID+"}")), "", 403, "agent_not_reachable", protocol.ClassPermission, "steps.a.run.agent", "routing rule"},
			{"long idempotency key", apptest.AdminToken, []byte(`{"pipeline": "id: p\npipeline: [a]\n", "idempotency_key": "` + long + `"}`), "", 400, "invalid_idempotency_key", protocol.ClassInvalid, "idempotency_key", ""},
			{"oversize body", apptest.AdminToken, submission("id: p\npipeline: [a]\n", `{"x": "`+strings.Repeat("y", 9<<20)+`"}`, okSkill), "", 413, "body_too_large", protocol.ClassInvalid, "", ""},
		}
		before := pipelineRows(t, h)
		for _, tc := range tests {
			for _, path := range []string{"/v1/executions", "/v1/pipelines/validate"} {
				r := do(t, h, req{method: "POST", path: path, token: tc.token, body: tc.body, ctype: tc.ctype})
				name := tc.name + " " + path
				wantError(t, name, r, tc.status, tc.code, tc.class)
				fe, _ := r.body["fieldErrors"].(map[string]any)
				if tc.field != "" && fe[tc.field] == nil {
					t.Errorf("%s: no fieldErrors[%q] in %s", name, tc.field, r.raw)
				}
				if tc.says != "" && !strings.Contains(r.raw, tc.says) {
					t.Errorf("%s: the answer does not mention %q: %s", name, tc.says, r.raw)
				}
			}
		}
		if after := pipelineRows(t, h); after != before {
			t.Errorf("refused submissions changed the store:\nbefore %s\nafter  %s", before, after)
		}
		// The valid submission validates without running, then runs.
		body := submission("id: p\npipeline: [a]\n", `{}`, okSkill)
		r := mustOK(t, h, "validate", post("/v1/pipelines/validate", apptest.AdminToken, body), 200)
		if r.body["valid"] != true || r.body["plan"] == nil {
			t.Fatalf("validate: %s", r.raw)
		}
		if after := pipelineRows(t, h); after != before {
			t.Errorf("validate stored something:\nbefore %s\nafter  %s", before, after)
		}
		r = mustOK(t, h, "submit", post("/v1/executions", apptest.AdminToken, body), 201)
		if r.body["status"] != "running" || !strings.HasPrefix(r.body["execution_id"].(string), "run_") {
			t.Fatalf("submit: %s", r.raw)
		}
		// A PM may run steps on its own workers (the routing rules allow it).
		mustOK(t, h, "pm submits", post("/v1/executions", tm.P1.Token, body), 201)
		// The admin may run a pipeline file on the hub's disk, its skills_dir
		// read relative to it.
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "skills"), 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("id: ondisk\nskills_dir: skills\npipeline: [a]\n"), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "skills", "a.md"), []byte(okSkill), 0o644)
		file, _ := json.Marshal(map[string]any{"file": filepath.Join(dir, "p.yaml"), "input": map[string]any{}})
		r = mustOK(t, h, "file on the hub", post("/v1/executions", apptest.AdminToken, file), 201)
		if r.body["pipeline_id"] != "ondisk" {
			t.Fatalf("file on the hub: %s", r.raw)
		}
		missing, _ := json.Marshal(map[string]any{"file": filepath.Join(dir, "nope.yaml")})
		if r := do(t, h, post("/v1/executions", apptest.AdminToken, missing)); r.status != 400 || r.body["error"] != "invalid_pipeline" || !strings.Contains(r.raw, "cannot read") {
			t.Errorf("missing file: %s", r.raw)
		}
	})
}

// rawWorker claims one task over HTTP.
func rawTask(t *testing.T, c *client.Client) (client.Delivery, client.Task) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		ds, err := c.Inbox(ctxFor(t), client.InboxOptions{Limit: 1, Wait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			env, err := d.Decode()
			if err != nil {
				t.Fatal(err)
			}
			if task, ok := client.ParseTask(env); ok {
				return d, task
			}
			_, _ = c.Ack(ctxFor(t), d.DeliveryID, d.Attempt)
		}
	}
	t.Fatal("no task arrived")
	return client.Delivery{}, client.Task{}
}

func answer(t *testing.T, c *client.Client, task client.Task, status string, result any) error {
	t.Helper()
	env, err := client.NewResponse(task.Request, status, result)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(ctxFor(t), env)
	return err
}

func waitStatus(t *testing.T, c *client.Client, id string) *client.Execution {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x, err := c.WaitExecution(ctx, id)
	if err != nil {
		t.Fatalf("wait %s: %v", id, err)
	}
	return x
}

func stepError(t *testing.T, x *client.Execution, skill string) *client.SkillError {
	t.Helper()
	for _, st := range x.Steps {
		if st.SkillID == skill {
			if st.Status != "failed" || st.Error == nil {
				t.Fatalf("step %s: %s %+v", skill, st.Status, st.Error)
			}
			return st.Error
		}
	}
	t.Fatalf("no step %s", skill)
	return nil
}

// Runtime failures through the real hub: a worker's oversize output, a
// malformed answer and no answer at all each fail the step with their
// code; a late answer to a timed-out attempt is refused to the worker.
func TestPipelineStepFailures(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		w, wc := h.NewAgent("Worker")
		run := func(skill string) string {
			r := mustOK(t, h, "submit "+skill, post("/v1/executions", apptest.AdminToken,
				submission("id: p\npipeline: [s]\n", `{}`, sk("s", "run: {agent: "+w.ID+", retries: 0, timeout: "+skill+"}"))), 201)
			return r.body["execution_id"].(string)
		}

		// Oversize output: OUTPUT_TOO_LARGE, the cap named in the message.
		id := run("30s")
		d, task := rawTask(t, wc)
		if err := answer(t, wc, task, "success", client.Succeed(strings.Repeat("x", 5000))); err != nil {
			t.Fatal(err)
		}
		_, _ = wc.Ack(ctxFor(t), d.DeliveryID, d.Attempt)
		if se := stepError(t, waitStatus(t, h.Admin, id), "s"); se.Code != "OUTPUT_TOO_LARGE" || !strings.Contains(se.Message, "4096") {
			t.Errorf("oversize: %+v", se)
		}

		// Malformed answers: not the standard output format.
		for _, bad := range []any{"done!", map[string]any{"ok": true}, map[string]any{"success": false, "errors": []any{}}, map[string]any{"success": "yes"}} {
			id := run("30s")
			d, task := rawTask(t, wc)
			if err := answer(t, wc, task, "success", bad); err != nil {
				t.Fatal(err)
			}
			_, _ = wc.Ack(ctxFor(t), d.DeliveryID, d.Attempt)
			if se := stepError(t, waitStatus(t, h.Admin, id), "s"); se.Code != "MALFORMED_OUTPUT" || !strings.Contains(se.Message, "standard format") {
				t.Errorf("malformed %v: %+v", bad, se)
			}
		}

		// No answer: TIMEOUT; the late answer is refused with attempt_settled.
		id = run("1s")
		d, task = rawTask(t, wc)
		// Acknowledged at once, so the delivery is settled before its TTL
		// (the 1s timeout) can expire it while the snapshots are compared.
		if _, err := wc.Ack(ctxFor(t), d.DeliveryID, d.Attempt); err != nil {
			t.Fatal(err)
		}
		x := waitStatus(t, h.Admin, id)
		if se := stepError(t, x, "s"); se.Code != "TIMEOUT" {
			t.Errorf("timeout: %+v", se)
		}
		// The answer is refused inside the transaction that would accept
		// it, so the bus keeps no trace of it either.
		bus := h.BusSnapshot()
		err := answer(t, wc, task, "success", client.Succeed(1))
		if client.Status(err) != 409 || client.Code(err) != "attempt_settled" {
			t.Errorf("late answer: %v", err)
		}
		unchanged(t, h, "the refused answer", bus)
		// The bus's own E004 for the task's deadline reaches system:pipeline
		// too; the engine ignores it (it timed the step out itself), so the
		// sweep that sends it commits.
		deadline := time.Now().Add(10 * time.Second)
		for state := ""; state != "timed_out"; {
			if err := h.App.DB.QueryRow(ctxFor(t), `SELECT deadline_state FROM bus_messages WHERE sender = 'system:pipeline' AND client_id = ?`, task.Request.ID).Scan(&state); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("the task's deadline is %q, want timed_out", state)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if x2 := waitStatus(t, h.Admin, id); x2.Version != x.Version {
			t.Errorf("the refused answer changed the execution: version %d → %d", x.Version, x2.Version)
		}
	}, fastPipelines)
}

// An agent sees and controls only its own executions; the admin sees all.
func TestPipelineOwnership(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		a, ac := h.NewAgent("Alice")
		_, bc := h.NewAgent("Bob")
		body := submission("id: own\npipeline: [s]\n", `{}`, sk("s", "run: {agent: "+a.ID+"}"))
		var x client.Execution
		r := mustOK(t, h, "alice submits", post("/v1/executions", ac.Token, body), 201)
		_ = json.Unmarshal([]byte(r.raw), &x)
		if x.Owner != a.ID {
			t.Fatalf("owner %q", x.Owner)
		}
		base := "/v1/executions/" + x.ID
		for _, q := range []req{get(base, bc.Token), get(base+"/state", bc.Token), get(base+"/events", bc.Token),
			post(base+"/cancel", bc.Token, nil), post(base+"/resume", bc.Token, []byte(`{"skill": "s"}`)),
			post(base+"/invoke", bc.Token, []byte(`{"skill_id": "s", "skill": "s"}`))} {
			r := do(t, h, q)
			wantError(t, "bob "+q.method+" "+q.path, r, 404, "execution_not_found", protocol.ClassUnavailable)
		}
		if xs, err := bc.Executions(ctxFor(t), client.ExecutionQuery{}); err != nil || len(xs) != 0 {
			t.Errorf("bob lists %d executions (%v)", len(xs), err)
		}
		for _, c := range []*client.Client{ac, h.Admin} {
			xs, err := c.Executions(ctxFor(t), client.ExecutionQuery{PipelineID: "own"})
			if err != nil || len(xs) != 1 || xs[0].ID != x.ID {
				t.Errorf("list: %v %v", xs, err)
			}
			if _, err := c.ExecutionState(ctxFor(t), x.ID); err != nil {
				t.Error(err)
			}
		}
		if _, err := h.Admin.CancelExecution(ctxFor(t), x.ID, "admin stops it"); err != nil {
			t.Fatal(err)
		}
		mustOK(t, h, "cancelling a cancelled execution is a no-op", post(base+"/cancel", ac.Token, nil), 200)
		for q, code := range map[string]string{"?after=-1": "invalid_after", "?after=x": "invalid_after", "?limit=0": "invalid_limit",
			"?limit=1001": "invalid_limit", "?wait=61": "invalid_wait", "?format=xml": "invalid_format"} {
			wantError(t, "events"+q, do(t, h, get(base+"/events"+q, ac.Token)), 400, code, protocol.ClassInvalid)
		}
		wantError(t, "list status", do(t, h, get("/v1/executions?status=done", ac.Token)), 400, "invalid_status", protocol.ClassInvalid)
		wantError(t, "resume without skill", do(t, h, post(base+"/resume", ac.Token, []byte(`{}`))), 400, "skill_required", protocol.ClassInvalid)
		wantError(t, "resume a step not waiting", do(t, h, post(base+"/resume", ac.Token, []byte(`{"skill": "s"}`))), 409, "not_waiting", protocol.ClassInvalid)
	})
}

// The skills registry: bad files are refused with every problem and its
// line; exec skills need the admin and --allow-exec; the admin's skills are
// shared with every agent, and an agent's own skill wins over a shared one.
func TestSkillsRegistry(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		tm := newTeam(t, h)
		put := func(token, content string) rawResp {
			b, _ := json.Marshal(map[string]string{"name": "skills/x.md", "content": content})
			return do(t, h, post("/v1/skills", token, b))
		}
		before := pipelineRows(t, h)
		for _, tc := range []struct {
			name, token, content string
			status               int
			code                 string
			class                protocol.Class
			says                 string
		}{
			{"empty", tm.C1.Token, "", 400, "content_required", protocol.ClassInvalid, "content"},
			{"bad yaml", tm.C1.Token, "---\nid: x\nrun: {agent: [\n---\n", 400, "invalid_skill", protocol.ClassInvalid, "skills/x.md"},
			{"unknown member", tm.C1.Token, "---\nid: x\nrunn: {}\n---\n", 400, "invalid_skill", protocol.ClassInvalid, "line 3"},
			{"bad id", tm.C1.Token, "---\nid: no.dots\n---\n", 400, "invalid_skill", protocol.ClassInvalid, "id"},
			{"exec by an agent", tm.C1.Token, sk("x", `run: {exec: ["true"]}`), 403, "exec_not_allowed", protocol.ClassPermission, ""},
			{"exec without --allow-exec", apptest.AdminToken, sk("x", `run: {exec: ["true"]}`), 403, "exec_not_allowed", protocol.ClassPermission, "--allow-exec"},
			{"unknown agent", tm.C1.Token, sk("x", "run: {agent: agt_nobody}"), 400, "unknown_agent", protocol.ClassInvalid, "agt_nobody"},
			{"agent out of reach", tm.W1.Token, sk("x", "run: {agent: "+tm.C2.ID+"}"), 403, "agent_not_reachable", protocol.ClassPermission, ""},
		} {
			r := put(tc.token, tc.content)
			wantError(t, tc.name, r, tc.status, tc.code, tc.class)
			if !strings.Contains(r.raw, tc.says) {
				t.Errorf("%s: answer does not mention %q: %s", tc.name, tc.says, r.raw)
			}
		}
		if after := pipelineRows(t, h); after != before {
			t.Errorf("refused registrations changed the store:\nbefore %s\nafter  %s", before, after)
		}
		ctx := ctxFor(t)
		c1 := h.Client(tm.C1.Token)
		if _, err := h.Admin.PutSkill(ctx, "shared.md", sk("greet", "version: 1.0.0\nrun: {agent: "+tm.C1.ID+"}")); err != nil {
			t.Fatal(err)
		}
		if _, err := c1.PutSkill(ctx, "mine.md", sk("count", "run: {agent: "+tm.C1.ID+"}")); err != nil {
			t.Fatal(err)
		}
		list := func(c *client.Client) string {
			recs, err := c.Skills(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range recs {
				out = append(out, r.Skill.ID+"@"+r.Owner+"@"+r.Skill.Version)
			}
			return strings.Join(out, ",")
		}
		if got, want := list(c1), "count@"+tm.C1.ID+"@,greet@@1.0.0"; got != want {
			t.Errorf("agent's list %s, want %s", got, want)
		}
		if got := list(h.Admin); got != "greet@@1.0.0" {
			t.Errorf("admin's list %s", got)
		}
		// The shared skill runs in the agent's pipeline; then the agent's own
		// version of it wins.
		pipe := "id: p\npipeline: [greet, count]\n"
		plan, err := c1.ValidatePipeline(ctx, client.ExecutionInput{Pipeline: pipe})
		if err != nil || !strings.Contains(string(plan), `"version":"1.0.0"`) {
			t.Fatalf("validate with a shared skill: %v %s", err, plan)
		}
		if _, err := c1.PutSkill(ctx, "greet.md", sk("greet", "version: 2.0.0\nrun: {agent: "+tm.C1.ID+"}")); err != nil {
			t.Fatal(err)
		}
		if rec, err := c1.Skill(ctx, "greet"); err != nil || rec.Skill.Version != "2.0.0" || rec.Owner != tm.C1.ID {
			t.Fatalf("own greet: %+v %v", rec, err)
		}
		if plan, _ := c1.ValidatePipeline(ctx, client.ExecutionInput{Pipeline: pipe}); !strings.Contains(string(plan), `"version":"2.0.0"`) {
			t.Errorf("the agent's own skill did not win: %s", plan)
		}
		// Another agent's registry is not visible.
		c2 := h.Client(tm.C2.Token)
		if _, err := c2.Skill(ctx, "count"); client.Code(err) != "skill_not_found" {
			t.Errorf("C2 sees C1's skill: %v", err)
		}
		wantError(t, "list another registry", do(t, h, get("/v1/skills?owner="+tm.C1.ID, tm.C2.Token)), 403, "not_your_registry", protocol.ClassPermission)
		if err := c2.DeleteSkill(ctx, "count"); client.Code(err) != "skill_not_found" {
			t.Errorf("C2 deleted C1's skill: %v", err)
		}
		if err := c1.DeleteSkill(ctx, "count"); err != nil {
			t.Fatal(err)
		}
		if _, err := c1.ValidatePipeline(ctx, client.ExecutionInput{Pipeline: pipe}); client.Code(err) != "invalid_pipeline" || !strings.Contains(err.Error(), "count") {
			t.Errorf("deleted skill still resolves: %v", err)
		}
	})
}

// Subscriptions through the API: bad input is refused; an agent manages
// only its own.
func TestPipelineSubscriptionsBadInput(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		tm := newTeam(t, h)
		before := pipelineRows(t, h)
		for _, tc := range []struct {
			name, token, body string
			status            int
			code              string
			class             protocol.Class
		}{
			{"no events", tm.C1.Token, `{}`, 400, "validation_failed", protocol.ClassInvalid},
			{"unknown event", tm.C1.Token, `{"events": ["skill:exploded"]}`, 400, "validation_failed", protocol.ClassInvalid},
			{"for another agent", tm.C1.Token, `{"agent_id": "` + tm.C2.ID + `", "events": ["*"]}`, 403, "not_your_agent", protocol.ClassPermission},
			{"another owner", tm.C1.Token, `{"owner": "` + tm.C2.ID + `", "events": ["*"]}`, 403, "not_your_executions", protocol.ClassPermission},
			{"admin without agent", apptest.AdminToken, `{"events": ["*"]}`, 400, "agent_required", protocol.ClassInvalid},
			{"admin, unknown agent", apptest.AdminToken, `{"agent_id": "agt_nobody", "events": ["*"]}`, 503, "unknown_agent", protocol.ClassUnavailable},
			{"unknown execution", tm.C1.Token, `{"events": ["*"], "execution_id": "run_nope"}`, 404, "execution_not_found", protocol.ClassUnavailable},
		} {
			wantError(t, tc.name, do(t, h, post("/v1/pipeline-subscriptions", tc.token, []byte(tc.body))), tc.status, tc.code, tc.class)
		}
		if after := pipelineRows(t, h); after != before {
			t.Errorf("refused subscriptions changed the store:\nbefore %s\nafter  %s", before, after)
		}
		ctx := ctxFor(t)
		c1 := h.Client(tm.C1.Token)
		subs, err := c1.SubscribePipeline(ctx, client.PipelineSubscribeInput{Events: []string{"pipeline:*", "skill:failed"}})
		if err != nil || len(subs) != 2 || subs[0].AgentID != tm.C1.ID || subs[0].Owner != tm.C1.ID {
			t.Fatalf("subscribe: %+v %v", subs, err)
		}
		again, _ := c1.SubscribePipeline(ctx, client.PipelineSubscribeInput{Events: []string{"pipeline:*"}})
		if len(again) != 1 || again[0].ID != subs[0].ID {
			t.Errorf("subscribing twice: %+v", again)
		}
		if err := h.Client(tm.C2.Token).DeletePipelineSubscription(ctx, subs[0].ID, ""); client.Code(err) != "subscription_not_found" {
			t.Errorf("C2 deleted C1's subscription: %v", err)
		}
		if err := h.Admin.DeletePipelineSubscription(ctx, subs[0].ID, tm.C1.ID); err != nil {
			t.Fatal(err)
		}
		if left, _ := c1.PipelineSubscriptions(ctx, ""); len(left) != 1 || left[0].Event != "skill:failed" {
			t.Errorf("left: %+v", left)
		}
	})
}

// Approval gates: the owner or a listed approver resumes a waiting step;
// anyone else cannot see the execution.
func TestPipelineApproval(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		owner, oc := h.NewAgent("Owner")
		approver, ac := h.NewAgent("Approver")
		_, stranger := h.NewAgent("Stranger")
		body := submission("id: gate\npipeline: [review, publish]\nsteps:\n  review: {approval: {message: \"check it\", agents: ["+approver.ID+"]}}\n  publish: {input: {ok: \"<<ref:review.output.data.approved>>\"}}\n",
			`{}`, sk("review", ""), sk("publish", "upstream: [review]\nrun: {agent: "+owner.ID+"}"))
		r := mustOK(t, h, "submit", post("/v1/executions", oc.Token, body), 201)
		id := r.body["execution_id"].(string)
		base := "/v1/executions/" + id + "/resume"
		wantError(t, "stranger resumes", do(t, h, post(base, stranger.Token, []byte(`{"skill": "review"}`))), 404, "execution_not_found", protocol.ClassUnavailable)
		wantError(t, "unknown step", do(t, h, post(base, oc.Token, []byte(`{"skill": "nope"}`))), 404, "step_not_found", protocol.ClassUnavailable)
		wantError(t, "bad data", do(t, h, post(base, ac.Token, []byte(`{"skill": "review", "data": {`))), 400, "invalid_json", protocol.ClassInvalid)
		x, err := ac.ResumeExecution(ctxFor(t), id, "review", json.RawMessage(`{"approved": true}`))
		if err != nil {
			t.Fatal(err)
		}
		if x.Steps != nil {
			t.Errorf("an approver sees the owner's steps: %+v", x.Steps)
		}
		_, task := rawTask(t, oc)
		if task.SkillID != "publish" || string(task.Input) != `{"ok":true}` {
			t.Errorf("publish task %+v input %s", task, task.Input)
		}
		wantError(t, "resume twice", do(t, h, post(base, oc.Token, []byte(`{"skill": "review"}`))), 409, "not_waiting", protocol.ClassInvalid)
	})
}

// Direct invocation, both ways a running step can ask: a skill.invoke
// request to system:pipeline over the bus (answered with a response
// carrying the child's output), and POST /v1/executions/{id}/invoke.
// Cycles are refused.
func TestPipelineDirectInvocation(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		caller, cc := h.NewAgent("Caller")
		helper, hc := h.NewAgent("Helper")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		hs, err := hc.Connect(ctx, client.ConnectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer hs.Close()
		go hc.ServeTasks(ctx, hs, func(ctx context.Context, t client.Task) client.StandardOutput {
			var in struct{ Data []float64 }
			_ = t.DecodeInput(&in)
			sum := 0.0
			for _, v := range in.Data {
				sum += v
			}
			return client.Succeed(map[string]any{"sum": sum})
		})
		body := submission("id: inv\npipeline: [outer]\n", `{}`, sk("outer", "run: {agent: "+caller.ID+"}"), sk("sum", "run: {agent: "+helper.ID+"}"))
		// sum is not in the pipeline: register it so the invocation finds it.
		if _, err := cc.PutSkill(ctx, "sum.md", sk("sum", "run: {agent: "+helper.ID+"}")); err != nil {
			t.Fatal(err)
		}
		r := mustOK(t, h, "submit", post("/v1/executions", cc.Token, body), 201)
		id := r.body["execution_id"].(string)
		cs, err := cc.Connect(ctx, client.ConnectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		var task client.Task
		for {
			d, err := cs.Receive(ctxFor(t))
			if err != nil {
				t.Fatal(err)
			}
			env, _ := d.Decode()
			if tk, ok := client.ParseTask(env); ok {
				task = tk
				break
			}
		}
		// Over the bus.
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		resp, err := cs.Request(rctx, "system:pipeline", "skill.invoke", map[string]any{"execution_id": id, "skill_id": "outer", "attempt": task.Attempt,
			"skill": "sum", "input": map[string]any{"data": []int{1, 2, 3}}})
		rcancel()
		if err != nil {
			t.Fatal(err)
		}
		p, _ := resp.Response()
		if resp.Type != "response" || p.Status != "success" || !strings.Contains(string(p.Result), `"sum":6`) {
			t.Fatalf("invocation over the bus: %s %s", resp.Type, resp.Payload)
		}
		// A cycle is refused with an error envelope.
		rctx, rcancel = context.WithTimeout(ctx, 20*time.Second)
		resp, err = cs.Request(rctx, "system:pipeline", "skill.invoke", map[string]any{"execution_id": id, "skill_id": "outer", "skill": "outer"})
		rcancel()
		if err != nil {
			t.Fatal(err)
		}
		if ep, _ := resp.ErrorPayload(); resp.Type != "error" || ep.Code != protocol.ClassInvalid || !strings.Contains(ep.Message, "cycle") {
			t.Fatalf("cycle over the bus: %s %s", resp.Type, resp.Payload)
		}
		// Over HTTP, waiting for the result; the task helper does the same.
		res, err := cc.InvokeSkill(ctxFor(t), id, client.InvokeInput{SkillID: "outer", Skill: "sum", Input: json.RawMessage(`{"data": [4, 5]}`)}, 20*time.Second)
		if err != nil || res.Execution.Status != "completed" || !strings.Contains(string(res.Result), `"sum":9`) || res.Execution.ParentID != id {
			t.Fatalf("invocation over HTTP: %+v %s %v", res.Execution, res.Result, err)
		}
		wantError(t, "invoke without skill", do(t, h, post("/v1/executions/"+id+"/invoke", cc.Token, []byte(`{"skill_id": "outer"}`))), 400, "validation_failed", protocol.ClassInvalid)
		wantError(t, "helper invokes for outer", do(t, h, post("/v1/executions/"+id+"/invoke", hc.Token, []byte(`{"skill_id": "outer", "skill": "sum"}`))), 404, "execution_not_found", protocol.ClassUnavailable)
		if err := answer(t, cc, task, "success", client.Succeed("done")); err != nil {
			t.Fatal(err)
		}
		if x := waitStatus(t, cc, id); x.Status != "completed" {
			t.Fatalf("outer ended %s", x.Status)
		}
	})
}
