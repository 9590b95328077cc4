package client

import (
	"encoding/json"
	"testing"
	"time"
)

func taskEnvelope(typ, payload, meta string) *Envelope {
	return &Envelope{ID: "msg_1", Type: MessageType(typ), Payload: json.RawMessage(payload), Metadata: json.RawMessage(meta)}
}

func TestParseTask(t *testing.T) {
	deadline := time.Date(2026, 1, 14, 10, 1, 0, 0, time.UTC)
	tests := []struct {
		name    string
		env     *Envelope
		ok      bool
		key     string
		attempt int
	}{
		{"task", taskEnvelope("request", `{"action": "task.assign", "deadline": "2026-01-14T10:01:00Z",
			"params": {"execution_id": "run_1", "skill_id": "double", "attempt": 2, "input": {"n": 1}, "instructions": "Do it."}}`,
			`{"idempotencyKey": "run_1:double", "pipelineId": "report"}`), true, "run_1:double", 2},
		{"key from the ids when metadata lacks it", taskEnvelope("request", `{"action": "task.assign", "params": {"execution_id": "run_1", "skill_id": "a"}}`, ``), true, "run_1:a", 0},
		{"another action", taskEnvelope("request", `{"action": "status.query", "params": {"execution_id": "run_1", "skill_id": "a"}}`, ``), false, "", 0},
		{"a notification", taskEnvelope("notification", `{"event": "task.assign"}`, ``), false, "", 0},
		{"no execution", taskEnvelope("request", `{"action": "task.assign", "params": {"skill_id": "a"}}`, ``), false, "", 0},
		{"params not an object", taskEnvelope("request", `{"action": "task.assign", "params": [1]}`, ``), false, "", 0},
		{"payload not JSON", taskEnvelope("request", `{`, ``), false, "", 0},
		{"nil", nil, false, "", 0},
	}
	for _, tc := range tests {
		got, ok := ParseTask(tc.env)
		if ok != tc.ok || got.IdempotencyKey != tc.key || got.Attempt != tc.attempt {
			t.Errorf("%s: ok %v key %q attempt %d, want %v %q %d", tc.name, ok, got.IdempotencyKey, got.Attempt, tc.ok, tc.key, tc.attempt)
		}
	}
	task, _ := ParseTask(tests[0].env)
	var in struct{ N int }
	if err := task.DecodeInput(&in); err != nil || in.N != 1 || task.Instructions != "Do it." || !task.Deadline.Equal(deadline) ||
		task.PipelineID != "report" || task.Request != tests[0].env {
		t.Errorf("task %+v input %+v %v", task, in, err)
	}
}

// A task comes from the hub, but a worker must survive any envelope.
func FuzzParseTask(f *testing.F) {
	f.Add(`{"action": "task.assign", "params": {"execution_id": "run_1", "skill_id": "a", "attempt": 1, "input": {}}}`, `{"idempotencyKey": "k"}`)
	f.Add(`{"action": "task.assign", "deadline": "soon", "params": {"execution_id": 1}}`, `[]`)
	f.Add(`null`, `null`)
	f.Fuzz(func(t *testing.T, payload, meta string) {
		task, ok := ParseTask(taskEnvelope("request", payload, meta))
		if ok && (task.ExecutionID == "" || task.SkillID == "" || task.IdempotencyKey == "") {
			t.Fatalf("accepted a task without its identity: %+v", task)
		}
	})
}

// Succeed and Fail build what the hub accepts: errors is never null, and
// a failure names its code.
func TestStandardOutput(t *testing.T) {
	for _, tc := range []struct {
		out  StandardOutput
		want string
	}{
		{Succeed(map[string]int{"n": 1}), `{"success":true,"data":{"n":1},"errors":[]}`},
		{Fail("NOPE", "cannot"), `{"success":false,"data":null,"errors":[{"code":"NOPE","message":"cannot"}]}`},
	} {
		b, _ := json.Marshal(tc.out)
		if string(b) != tc.want {
			t.Errorf("got %s, want %s", b, tc.want)
		}
	}
}
