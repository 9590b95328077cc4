package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
)

// runLocal runs a command that needs no hub and returns its output.
func runLocal(t *testing.T, args ...string) (string, error) {
	t.Helper()
	g = globals{}
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// skills lint reports every problem of every file with its line, and
// exits 1; a clean directory passes.
func TestSkillsLint(t *testing.T) {
	out, err := runLocal(t, "skills", "lint", "testdata/lint/bad")
	var code exitCode
	if !errors.As(err, &code) || code != 1 {
		t.Fatalf("lint of bad skills: %v\n%s", err, out)
	}
	golden(t, "skills_lint_bad", out)
	out, err = runLocal(t, "--json", "skills", "lint", "testdata/lint/bad/fetch.md")
	var ps []map[string]any
	if !errors.As(err, &code) || json.Unmarshal([]byte(out), &ps) != nil || len(ps) == 0 || ps[0]["file"] != "testdata/lint/bad/fetch.md" || ps[0]["line"] == nil {
		t.Fatalf("lint --json: %v\n%s", err, out)
	}
	out, err = runLocal(t, "skills", "lint", "testdata/lint/good", "testdata/lint/good/fetch.md")
	if err != nil || out != "3 skill files, no problems\n" {
		t.Fatalf("lint of good skills: %v %q", err, out)
	}
	if _, err := runLocal(t, "skills", "lint", "testdata/lint/missing"); !errors.As(err, &code) {
		t.Fatalf("lint of a missing path: %v", err)
	}
}

// The live progress view: on a terminal the table of steps is redrawn in
// place with ANSI cursor moves; elsewhere each event is one plain line.
func TestProgressView(t *testing.T) {
	t0 := time.Date(2026, 1, 14, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	x := &client.Execution{ID: "run_1", PipelineID: "report", Status: "running", StartedAt: at(0), Steps: []client.StepState{
		{SkillID: "fetch", Status: "completed", Attempt: 1, StartedAt: at(0), CompletedAt: at(1200 * time.Millisecond)},
		{SkillID: "double", Status: "retrying", Attempt: 1, StartedAt: at(1200 * time.Millisecond), Error: &client.SkillError{Code: "UPSTREAM_UNAVAILABLE", Message: "try again"}},
		{SkillID: "label", Status: "skipped", CompletedAt: at(1200 * time.Millisecond)},
		{SkillID: "merge", Status: "pending"},
	}}
	var tty bytes.Buffer
	v := &progressView{w: &tty, tty: true}
	v.draw(x, t0.Add(2*time.Second))
	x.Status, x.CompletedAt = "completed", at(3*time.Second)
	x.Steps[1].Status, x.Steps[1].Attempt, x.Steps[1].CompletedAt = "completed", 2, at(2500*time.Millisecond)
	x.Steps[3].Status, x.Steps[3].Attempt, x.Steps[3].StartedAt, x.Steps[3].CompletedAt = "completed", 1, at(2500*time.Millisecond), at(3*time.Second)
	v.draw(x, t0.Add(3*time.Second))
	golden(t, "pipeline_progress_tty", tty.String())

	var plain bytes.Buffer
	v = &progressView{w: &plain}
	v.draw(x, t0)
	v.events([]client.PipelineEvent{
		{Type: "skill:started", SkillID: "fetch", At: t0, Data: json.RawMessage(`{}`)},
		{Type: "skill:retrying", SkillID: "double", At: t0, Data: json.RawMessage(`{"error": {"code": "UPSTREAM_UNAVAILABLE", "message": "try again"}}`)},
	})
	lines := strings.Split(strings.TrimSpace(plain.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "skill:started  fetch") || !strings.HasSuffix(lines[1], "skill:retrying  double  UPSTREAM_UNAVAILABLE: try again") {
		t.Fatalf("plain progress:\n%s", plain.String())
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Fatal("ANSI codes in plain output")
	}
}

// The registry and control commands against a hub: skills put, list, get
// and delete; pipeline validate, run (id only), list, status, resume of an
// approval gate, cancel.
func TestPipelineControlCLI(t *testing.T) {
	h := apptest.Start(t, "")
	a, _ := h.NewAgent("Worker")
	dir := t.TempDir()
	skill := filepath.Join(dir, "work.md")
	os.WriteFile(skill, []byte("---\nid: work\nversion: 2.1.0\nrun: {agent: "+a.ID+"}\n---\nDo the work.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "gate.yaml"), []byte("id: gate\npipeline: [review, work]\nsteps:\n  review: {approval: true}\n  work: {upstream: [review]}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "review.md"), []byte("---\nid: review\n---\nLook at it.\n"), 0o644)

	if out := mustRun(t, h, apptest.AdminToken, "skills", "put", skill, filepath.Join(dir, "review.md")); !strings.Contains(out, "registered work 2.1.0") {
		t.Fatalf("skills put: %s", out)
	}
	if out := mustRun(t, h, apptest.AdminToken, "skills", "list"); !regexp.MustCompile(`work +2\.1\.0 +agent ` + a.ID + ` +\(shared\)`).MatchString(out) {
		t.Fatalf("skills list:\n%s", out)
	}
	if out := mustRun(t, h, apptest.AdminToken, "skills", "get", "work"); !strings.Contains(out, "Do the work.") {
		t.Fatalf("skills get:\n%s", out)
	}
	gate := filepath.Join(dir, "gate.yaml")
	if out := mustRun(t, h, apptest.AdminToken, "pipeline", "validate", gate); !strings.Contains(out, "is valid") {
		t.Fatalf("validate: %s", out)
	}
	id := strings.TrimSpace(mustRun(t, h, apptest.AdminToken, "pipeline", "run", gate))
	if !strings.HasPrefix(id, "run_") {
		t.Fatalf("run printed %q", id)
	}
	if out := mustRun(t, h, apptest.AdminToken, "pipeline", "list", "--pipeline", "gate"); !strings.Contains(out, id) || !strings.Contains(out, "running") {
		t.Fatalf("list:\n%s", out)
	}
	if out := mustRun(t, h, apptest.AdminToken, "pipeline", "status", id); !strings.Contains(out, "? review  waiting_input") {
		t.Fatalf("status:\n%s", out)
	}
	if out, err := run(t, h, apptest.AdminToken, "", "pipeline", "resume", id); err == nil || !strings.Contains(err.Error(), "--skill") {
		t.Fatalf("resume without --skill: %v %s", err, out)
	}
	mustRun(t, h, apptest.AdminToken, "pipeline", "resume", id, "--skill", "review", "--data", `{"ok": true}`)
	if out := mustRun(t, h, apptest.AdminToken, "pipeline", "cancel", id, "--reason", "enough"); out != id+" cancelled\n" {
		t.Fatalf("cancel: %q", out)
	}
	if out := mustRun(t, h, apptest.AdminToken, "pipeline", "events", id); !strings.Contains(out, `[pipeline:cancelled] {"execution_id": "`+id+`", "reason": "enough"}`) {
		t.Fatalf("events:\n%s", out)
	}
	if _, err := run(t, h, apptest.AdminToken, "", "pipeline", "run", gate, "--input", "{not json"); err == nil || !strings.Contains(err.Error(), "--input") {
		t.Fatalf("bad --input: %v", err)
	}
	mustRun(t, h, apptest.AdminToken, "skills", "delete", "work")
	if _, err := run(t, h, apptest.AdminToken, "", "skills", "get", "work"); client.Code(err) != "skill_not_found" {
		t.Fatalf("get after delete: %v", err)
	}
}

// pipeline run --json prints the execution as JSON: at submission without
// --wait, and only the finished execution with --wait (no progress lines),
// also when it failed (and then the command exits 1).
func TestPipelineRunJSON(t *testing.T) {
	h := apptest.Start(t, "")
	w := startWorker(t, h, "Doubler", func(ctx context.Context, task client.Task) client.StandardOutput {
		var in struct{ N int }
		if err := task.DecodeInput(&in); err != nil || in.N < 0 {
			return client.Fail("VALIDATION_ERROR", "n must be a non-negative number")
		}
		return client.Succeed(map[string]any{"doubled": 2 * in.N})
	})
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "double.md"), []byte("---\nid: double\nrun: {agent: "+w.ID+"}\n---\nDouble n.\n"), 0o644)
	file := filepath.Join(dir, "double.yaml")
	os.WriteFile(file, []byte("id: doubling\npipeline: [double]\n"), 0o644)
	mustRun(t, h, apptest.AdminToken, "skills", "put", filepath.Join(dir, "double.md"))

	decode := func(what, out string) client.Execution {
		t.Helper()
		var x client.Execution
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&x); err != nil || dec.More() {
			t.Fatalf("%s did not print one execution as JSON: %v\n%s", what, err, out)
		}
		if !strings.HasPrefix(x.ID, "run_") || x.PipelineID != "doubling" || strings.Join(x.Pipeline, ",") != "double" ||
			len(x.Steps) != 1 || x.Steps[0].SkillID != "double" || x.TraceID == "" {
			t.Fatalf("%s printed %+v", what, x)
		}
		return x
	}

	out := mustRun(t, h, apptest.AdminToken, "--json", "pipeline", "run", file, "--input", `{"n": 21}`)
	x := decode("run --json", out)
	var in map[string]any
	_ = json.Unmarshal(x.Input, &in)
	if x.Status != "pending" && x.Status != "running" || len(in) != 1 || in["n"] != 21.0 {
		t.Fatalf("submitted execution: status %s input %s", x.Status, x.Input)
	}

	out = mustRun(t, h, apptest.AdminToken, "--json", "pipeline", "run", file, "--input", `{"n": 4}`, "--wait")
	x = decode("run --json --wait", out)
	var res struct {
		Status string         `json:"status"`
		Data   map[string]any `json:"data"`
	}
	_ = json.Unmarshal(x.Steps[0].Output, &res)
	if x.Status != "completed" || x.CompletedAt == nil || x.Steps[0].Status != "completed" || res.Data["doubled"] != 8.0 {
		t.Fatalf("finished execution: %s, step %s, output %s", x.Status, x.Steps[0].Status, x.Steps[0].Output)
	}

	out, err := run(t, h, apptest.AdminToken, "", "--json", "pipeline", "run", file, "--input", `{"n": -1}`, "--wait")
	if err == nil || !strings.Contains(err.Error(), "VALIDATION_ERROR") {
		t.Fatalf("a failed execution exited without its error: %v", err)
	}
	x = decode("run --json --wait of a failing execution", out)
	if x.Status != "failed" || x.Steps[0].Error == nil || x.Steps[0].Error.Code != "VALIDATION_ERROR" {
		t.Fatalf("failed execution: %s %+v", x.Status, x.Steps[0].Error)
	}
}
