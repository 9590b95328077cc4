package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/pipeline"
)

// The pipelines page over a real engine: an owner sees its execution's
// DAG and answers an approval gate; another agent sees nothing of it; the
// cancel form needs its confirmation step.
func TestPipelinePages(t *testing.T) {
	h := apptest.Start(t, "")
	ctx := context.Background()
	eng, err := pipeline.New(h.App.DB, pipeline.Options{PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)

	admin := signIn(t, h, apptest.AdminToken)
	h.App.Console.SetPipelines(nil)
	if p := admin.get("/console/pipelines"); p.status != 200 || !strings.Contains(p.body, "runs no pipeline engine") {
		t.Fatalf("pipelines without an engine: %d", p.status)
	}
	if p := admin.get("/console/pipelines/exe_x"); p.status != 404 {
		t.Fatalf("execution without an engine: %d", p.status)
	}
	h.App.Console.SetPipelines(eng)

	owner, _ := h.NewAgent("Owner")
	other, _ := h.NewAgent("Other")
	x, err := eng.Submit(ctx, pipeline.SubmitRequest{Owner: owner.ID,
		Pipeline: []byte("id: review\npipeline: [gate, publish]\nsteps:\n  gate: {approval: true}\n  publish: {approval: true}\n"),
		Skills: []pipeline.SkillFile{
			{Name: "gate.md", Content: []byte("---\nid: gate\n---\nA person approves.\n")},
			{Name: "publish.md", Content: []byte("---\nid: publish\n---\nA person publishes.\n")},
		}, Input: json.RawMessage(`{"title":"長い名前のパイプライン"}`)})
	if err != nil {
		t.Fatal(err)
	}
	waitStep(t, eng, x.ID, "gate", pipeline.StatusWaitingInput)

	o := signIn(t, h, owner.Token)
	if p := o.get("/console/pipelines"); !strings.Contains(p.body, x.ID) {
		t.Fatal("the owner's list misses its execution")
	}
	p := o.get("/console/pipelines/" + x.ID)
	for _, want := range []string{`<svg class="dag"`, `class="node st-waiting_input"`, `class="node st-pending"`, "Resume gate", "長い名前のパイプライン", "pipeline:started"} {
		if p.status != 200 || !strings.Contains(p.body, want) {
			t.Fatalf("execution page lacks %q (%d)\n%s", want, p.status, p.body)
		}
	}
	z := signIn(t, h, other.Token)
	if p := z.get("/console/pipelines"); strings.Contains(p.body, x.ID) {
		t.Fatal("another agent lists the execution")
	}
	for _, path := range []string{"/console/pipelines/" + x.ID, "/console/pipelines/" + x.ID + "/cancel", "/console/events/pipelines/" + x.ID} {
		if p := z.get(path); p.status != 404 {
			t.Fatalf("another agent opened %s: %d", path, p.status)
		}
	}
	if p := z.post("/console/pipelines/"+x.ID+"/cancel", url.Values{"csrf": {z.csrf("/console/pipelines")}, "confirm": {"yes"}}); p.status != 404 {
		t.Fatalf("another agent cancelled: %d", p.status)
	}

	tok := o.csrf("/console/pipelines/" + x.ID)
	if p := o.post("/console/pipelines/"+x.ID+"/resume", url.Values{"csrf": {tok}, "skill": {"gate"}, "data": {"{not json"}}); p.status != 400 {
		t.Fatalf("resume with bad JSON: %d", p.status)
	}
	if p := o.post("/console/pipelines/"+x.ID+"/resume", url.Values{"skill": {"gate"}, "data": {`{"ok":true}`}}); p.status != 403 {
		t.Fatalf("resume without csrf: %d", p.status)
	}
	if p := o.post("/console/pipelines/"+x.ID+"/resume", url.Values{"csrf": {tok}, "skill": {"gate"}, "data": {`{"ok":true}`}}); p.status != http.StatusSeeOther {
		t.Fatalf("resume: %d %s", p.status, p.body)
	}
	waitStep(t, eng, x.ID, "publish", pipeline.StatusWaitingInput)
	if p := o.get("/console/pipelines/" + x.ID); !strings.Contains(p.body, `class="node st-completed"`) || !strings.Contains(p.body, `ok&#34;: true`) {
		t.Fatalf("after resume the gate step should be completed with its data")
	}

	if p := o.post("/console/pipelines/"+x.ID+"/cancel", url.Values{"csrf": {tok}}); p.status != http.StatusSeeOther || !strings.HasSuffix(p.header.Get("Location"), "/cancel") {
		t.Fatalf("unconfirmed cancel: %d %s", p.status, p.header.Get("Location"))
	}
	if p := o.get("/console/pipelines/" + x.ID + "/cancel"); p.status != 200 || !strings.Contains(p.body, "Yes, cancel it") {
		t.Fatalf("cancel confirmation: %d", p.status)
	}
	if p := o.post("/console/pipelines/"+x.ID+"/cancel", url.Values{"csrf": {tok}, "confirm": {"yes"}, "reason": {"changed my mind"}}); p.status != http.StatusSeeOther {
		t.Fatalf("cancel: %d %s", p.status, p.body)
	}
	if got, _ := eng.Get(ctx, "", x.ID); got.Status != pipeline.StatusCancelled {
		t.Fatalf("after cancel: %s", got.Status)
	}
	if p := admin.get("/console/pipelines/" + x.ID); p.status != 200 || !strings.Contains(p.body, "changed my mind") {
		t.Fatalf("the admin's view of the cancelled execution: %d", p.status)
	}
}

func waitStep(t *testing.T, eng *pipeline.Engine, id, skill string, want pipeline.Status) {
	t.Helper()
	var got pipeline.Status
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		x, err := eng.Get(context.Background(), "", id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range x.Steps {
			if s.SkillID == skill {
				got = s.Status
			}
		}
		if got == want {
			return
		}
	}
	t.Fatalf("step %s is %s, want %s", skill, got, want)
}
