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
