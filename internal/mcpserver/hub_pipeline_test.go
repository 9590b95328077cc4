package mcpserver_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/app/apptest"
)

// On a real hub the pipeline tools reach the hub's engine: an agent starts a
// pipeline of a skill it registered (a step that runs on itself) and reads
// its status; a pipeline naming an unknown skill is a tool error from the
// engine's validation.
func TestPipelineToolsOnTheHub(t *testing.T) {
	h := apptest.Start(t, "")
	a, cl := h.NewAgent("Planner")
	skill := fmt.Sprintf("---\nid: outline\nname: Outline\nversion: 1.0.0\nrun: {agent: %s, timeout: 60s}\n---\nWrite an outline.\n", a.ID)
	if _, err := cl.PutSkill(context.Background(), "outline.md", skill); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, h.URL, cl.Token)
	run := mustOK(t, cs, "pipeline_run", map[string]any{"pipeline": "id: plan\npipeline: [outline]\n", "input": map[string]any{"topic": "x"}})
	res, _ := run["result"].(map[string]any)
	id, _ := res["execution_id"].(string)
	if id == "" {
		t.Fatalf("pipeline_run answer without execution_id: %v", run)
	}
	st := mustOK(t, cs, "pipeline_status", map[string]any{"executionId": id})
	if sres, _ := st["result"].(map[string]any); sres["execution_id"] != id {
		t.Fatalf("pipeline_status: %v", st)
	}
	bad, isErr := call(t, cs, "pipeline_run", map[string]any{"pipeline": "id: p\npipeline: [no-such-skill]\n"})
	if !isErr || bad["error"] == "feature_disabled" {
		t.Fatalf("unknown skill: want a validation tool error from the engine, got %v", bad)
	}
}
