package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

func TestParseOutput(t *testing.T) {
	now := time.Date(2026, 1, 14, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in, want, err string
	}{
		{`{"success": true, "data": {"a": 1}, "metadata": {"processed_at": "2026-01-14T09:00:00Z", "duration_ms": 5, "records_count": 2}, "errors": []}`,
			`{"success":true,"data":{"a":1},"metadata":{"processed_at":"2026-01-14T09:00:00Z","duration_ms":5,"records_count":2},"errors":[]}`, ""},
		{`{"errors": null, "success": true}`, `{"success":true,"data":null,"metadata":{"processed_at":"2026-01-14T10:00:00Z","duration_ms":1500},"errors":[]}`, ""},
		{`{"success": true, "metadata": {"count": 50}}`, `{"success":true,"data":null,"metadata":{"count":50,"processed_at":"2026-01-14T10:00:00Z","duration_ms":1500},"errors":[]}`, ""},
		{`{"success": false, "data": null, "errors": [{"code": "VALIDATION_ERROR", "message": "m", "field": "url", "details": {"x": 1}}]}`,
			`{"success":false,"data":null,"metadata":{"processed_at":"2026-01-14T10:00:00Z","duration_ms":1500},"errors":[{"code":"VALIDATION_ERROR","message":"m","field":"url","details":{"x":1}}]}`, ""},
		{`{"success": true, "data": "<b>&</b>"}`, `{"success":true,"data":"<b>&</b>","metadata":{"processed_at":"2026-01-14T10:00:00Z","duration_ms":1500},"errors":[]}`, ""},
		{``, "", "not JSON"},
		{`[]`, "", "not a JSON object"},
		{`{"success": true} {}`, "", "unexpected data"},
		{`{"success": true, "success": false}`, "", "appears twice"},
		{`{"data": 1}`, "", "success is missing"},
		{`{"success": 1}`, "", "success must be true or false"},
		{`{"success": true, "metadata": []}`, "", "metadata: must be an object"},
		{`{"success": true, "metadata": {"processed_at": "yesterday"}}`, "", "not an RFC 3339"},
		{`{"success": true, "metadata": {"duration_ms": -1}}`, "", "duration_ms"},
		{`{"success": true, "metadata": {"records_count": 1.5}}`, "", "records_count"},
		{`{"success": false, "errors": [{"message": "m"}]}`, "", "code is required"},
		{`{"success": false, "errors": [{"code": "X"}]}`, "", "message is required"},
		{`{"success": false, "errors": [{"code": "X", "message": "m", "hint": "h"}]}`, "", `unknown member "hint"`},
		{`{"success": false, "errors": {"code": "X"}}`, "", "must be an array"},
		{`{"success": true, "extra": 1}`, "", `unknown member "extra"`},
	}
	for _, tt := range tests {
		got, _, se := parseOutput([]byte(tt.in), 1<<20, now, 1500*time.Millisecond)
		if tt.err != "" {
			if se == nil || se.Code != CodeMalformed || !strings.Contains(se.Message, tt.err) {
				t.Errorf("%s: error %+v, want %q", tt.in, se, tt.err)
			}
			continue
		}
		if se != nil || string(got) != tt.want {
			t.Errorf("%s:\n got %s %+v\nwant %s", tt.in, got, se, tt.want)
		}
	}
	if _, _, se := parseOutput([]byte(`{"success": true, "data": "xxxxxxxx"}`), 10, now, 0); se == nil || se.Code != CodeOutputTooBig {
		t.Fatalf("size cap: %+v", se)
	}
}

func TestEventLine(t *testing.T) {
	ev := Event{At: time.Date(2026, 1, 14, 10, 0, 0, 0, time.UTC), Type: "skill:started",
		Data: mustEncode(obj{{"skill_id", "skill-a"}, {"execution_id", "exec-001"}})}
	if got, want := ev.Line(), `2026-01-14T10:00:00Z [skill:started] {"skill_id": "skill-a", "execution_id": "exec-001"}`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	tests := map[string]string{
		`{"a":[1,2,{"b":null}],"c":{}}`:       `{"a": [1, 2, {"b": null}], "c": {}}`,
		`{"s":"x, y: z","q":"\"quoted\", :"}`: `{"s": "x, y: z", "q": "\"quoted\", :"}`,
		`{"e":"back\\slash\\","n":1}`:         `{"e": "back\\slash\\", "n": 1}`,
		"{ \"spaced\" :\n 1 }":                `{"spaced": 1}`,
		`not json`:                            `not json`,
	}
	for in, want := range tests {
		if got := SpacedJSON([]byte(in)); got != want {
			t.Errorf("SpacedJSON(%s) = %s, want %s", in, got, want)
		}
	}
}

// Several nodes ticking at once over many due executions dispatch each
// retry exactly once.
func TestConcurrentTicksDispatchOnce(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		db := storetest.Open(t, dsn)
		h := newHarness(t, db, func(o *Options) { o.NodeID = "n1" })
		const n = 12
		var ids []string
		for i := 0; i < n; i++ {
			x := h.submitInline(fmt.Sprintf("id: c%d\npipeline: [w]\n", i), `{}`, sk("w", "run: {agent: agt_w, retries: 1}"))
			ids = append(ids, x.ID)
		}
		for _, task := range h.bus.waitTasks(t, "agt_w", n) {
			h.answer(task, `{"success": false, "errors": [{"code": "FLAKY", "message": "try again"}]}`)
		}
		h.clk.Advance(time.Hour)
		var engines []*Engine
		for i := 0; i < 3; i++ {
			other := &harness{t: t, db: storetest.Open(t, dsn), bus: h.bus, clk: h.clk}
			engines = append(engines, other.engine(func(o *Options) { o.NodeID = fmt.Sprintf("n%d", i+2) }))
		}
		var wg sync.WaitGroup
		for _, e := range engines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := e.Tick(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		tasks := h.bus.tasks("agt_w")
		perExec := map[string]int{}
		for _, task := range tasks {
			perExec[params(t, task).ExecutionID]++
		}
		for _, id := range ids {
			if perExec[id] != 2 {
				t.Fatalf("execution %s got %d tasks, want 2 (%v)", id, perExec[id], perExec)
			}
		}
	})
}

func TestLoadSkillsDir(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		ctx := context.Background()
		dir := h.copyDir("e2e")
		if _, err := h.e.LoadSkillsDir(ctx, "agt_o", dir+"/skills", false); protoErr(t, err).Code != "exec_not_allowed" {
			t.Fatalf("%v", err)
		}
		recs, err := h.e.LoadSkillsDir(ctx, "agt_o", dir+"/skills", true)
		if err != nil || len(recs) != 5 {
			t.Fatalf("%v %d", err, len(recs))
		}
		rec, err := h.e.GetSkill(ctx, "agt_o", "double")
		if err != nil || rec.Skill.Run.Agent != "agt_doubler" || rec.AllowExec {
			t.Fatalf("%v %+v", err, rec)
		}
		h.writeFile("broken/a.md", "---\nid: a\nrun: {agent: 'not an id!'}\n---\n")
		h.writeFile("broken/b.md", "---\nid: b\n---\n")
		_, err = h.e.LoadSkillsDir(ctx, "agt_p", h.dir+"/broken", true)
		if pe := protoErr(t, err); pe.FieldErrors["a.md:run.agent"] == "" {
			t.Fatalf("%v %v", err, pe.FieldErrors)
		}
		if l, _ := h.e.ListSkills(ctx, "agt_p"); len(l) != 0 {
			t.Fatal("a directory with problems was partly registered")
		}
		// The registry is enough to run the pipeline file without skills_dir.
		x, err := h.e.Submit(ctx, SubmitRequest{Owner: "agt_o", Pipeline: []byte("id: r\npipeline: [fetch, double]\nsteps: {double: {input: {items: [1]}}}\n"),
			Input: json.RawMessage(`{"n": 1, "source": "s"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if st := h.step(x.ID, "fetch"); st.Status == StatusPending || st.Attempt != 1 {
			t.Fatalf("fetch from the registry did not start: %+v", st)
		}
	})
}

// A versioned update of a row someone else changed first is refused
// (errStale) and changes nothing; Engine.write retries such callbacks.
func TestStaleWriteRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		ctx := context.Background()
		x := h.submitInline("id: v\npipeline: [w]\n", `{}`, sk("w", "run: {agent: agt_w}"))
		steps, err := getSteps(ctx, db, x.ID)
		if err != nil {
			t.Fatal(err)
		}
		stale := *steps[0]
		xr, _ := h.e.getExec(ctx, db, x.ID, lockNone)
		staleExec := *xr
		h.answer(h.bus.waitTasks(t, "agt_w", 1)[0], `{"success": true}`) // bumps both versions
		stale.Status = StatusFailed
		staleExec.Status = StatusFailed
		err = db.Write(ctx, func(tx *store.Tx) error { return updateStep(ctx, tx, &stale) })
		if err != errStale {
			t.Fatalf("stale step write: %v", err)
		}
		err = db.Write(ctx, func(tx *store.Tx) error { return updateExec(ctx, tx, &staleExec) })
		if err != errStale {
			t.Fatalf("stale execution write: %v", err)
		}
		if got := h.get(x.ID); got.Status != StatusCompleted || got.Steps[0].Status != StatusCompleted {
			t.Fatalf("stale writes changed the state: %s %s", got.Status, got.Steps[0].Status)
		}
		calls := 0
		err = h.e.write(ctx, func(tx *store.Tx) error {
			calls++
			if calls < 3 {
				return errStale
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Fatalf("write retried %d times: %v", calls, err)
		}
	})
}

// FuzzParseOutput: worker answers are untrusted. Parsing never panics,
// and an accepted output is normalised idempotently.
func FuzzParseOutput(f *testing.F) {
	for _, s := range []string{
		`{"success": true, "data": {"a": [1, 2]}, "metadata": {"processed_at": "2026-01-14T10:00:00Z", "duration_ms": 1, "records_count": 1}, "errors": []}`,
		`{"success": false, "errors": [{"code": "X", "message": "m", "details": "d", "field": "f", "stack": "s"}]}`,
		`{"success": true, "metadata": null, "errors": null}`, `[]`, `{"success": tru`, `{"success": true}{}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 1, 14, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw []byte) {
		norm, out, se := parseOutput(raw, 1<<16, now, time.Second)
		if se != nil {
			if se.Code != CodeMalformed && se.Code != CodeOutputTooBig || se.Message == "" {
				t.Fatalf("bad error %+v", se)
			}
			return
		}
		if !json.Valid(norm) || (!out.Success && len(out.Errors) == 0) {
			t.Fatalf("accepted an invalid output: %s", norm)
		}
		again, _, se := parseOutput(norm, 1<<16, now.Add(time.Hour), time.Minute)
		if se != nil || string(again) != string(norm) {
			t.Fatalf("normalisation is not idempotent:\n%s\n%s %+v", norm, again, se)
		}
	})
}

// Concurrent submissions with one idempotency key create one execution.
func TestConcurrentIdempotentSubmit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db, nil)
		req := SubmitRequest{Pipeline: []byte("id: i\npipeline: [w]\n"), Skills: []SkillFile{{Name: "w.md", Content: []byte(sk("w", "run: {agent: agt_w}"))}},
			IdempotencyKey: "same"}
		ids := make([]string, 8)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x, err := h.e.Submit(context.Background(), req)
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = x.ID
			}()
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("ids %v", ids)
			}
		}
		if n := countRows(t, db, "pipeline_executions"); n != 1 {
			t.Fatalf("%d executions", n)
		}
		if n := len(h.bus.tasks("agt_w")); n != 1 {
			t.Fatalf("%d tasks", n)
		}
	})
}
