package protocol_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

const validRequest = `{
  "version": "1.0", "id": "msg-1", "traceId": "trace-1",
  "from": {"agent": "agt_a", "tier": "command", "session": "main"},
  "to": {"agent": "agt_b", "tier": "pm"},
  "type": "request", "priority": "high", "timestamp": "2026-02-25T18:50:00+08:00", "ttl": 3600,
  "payload": {"action": "task.assign", "params": {"x": 1}, "deadline": "2026-02-25T20:00:00+08:00"},
  "metadata": {"k": "v"}
}`

func mutate(t *testing.T, base string, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(base), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, _ := json.Marshal(m)
	return b
}

func TestValidEnvelopes(t *testing.T) {
	payloads := map[string]string{
		"request":      `{"action":"status.query"}`,
		"response":     `{"requestId":"msg-0","status":"success","result":{"ok":true}}`,
		"notification": `{"event":"progress","message":"3 of 10","progress":{"current":3,"total":10,"percent":30}}`,
		"error":        `{"requestId":"msg-0","code":"E004","message":"timed out","recoverable":true,"suggestion":"retry"}`,
	}
	for typ, p := range payloads {
		b := mutate(t, validRequest, func(m map[string]any) {
			m["type"] = typ
			var pm any
			json.Unmarshal([]byte(p), &pm)
			m["payload"] = pm
		})
		env, err := protocol.DecodeEnvelope(b)
		if err != nil {
			t.Fatalf("%s: decode: %v", typ, err)
		}
		env.Normalize(time.Now(), 3600)
		if err := env.Validate(); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	}
}

func TestNormalizeDefaults(t *testing.T) {
	env, err := protocol.DecodeEnvelope([]byte(`{"id":"m","traceId":"t","from":{"agent":"a"},"to":{"agent":"b","session":"s"},"type":"notification","payload":{"event":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600))
	env.Normalize(now, 600)
	if env.Version != "1.0" || env.Priority != protocol.PriorityNormal || env.TTL != 600 || !env.Timestamp.Equal(now) || env.Timestamp.Location() != time.UTC || env.To.IfOffline != protocol.OfflineQueue {
		t.Fatalf("normalized: %+v", env)
	}
	if err := env.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidEnvelopes(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(m map[string]any)
		field string
	}{
		{"version", func(m map[string]any) { m["version"] = "2.0" }, "version"},
		{"missing id", func(m map[string]any) { delete(m, "id") }, "id"},
		{"id with slash", func(m map[string]any) { m["id"] = "../etc/passwd" }, "id"},
		{"long id", func(m map[string]any) { m["id"] = strings.Repeat("a", 129) }, "id"},
		{"trace", func(m map[string]any) { m["traceId"] = "" }, "traceId"},
		{"from agent", func(m map[string]any) { m["from"] = map[string]any{"tier": "pm"} }, "from.agent"},
		{"from broadcast", func(m map[string]any) { m["from"] = map[string]any{"agent": "broadcast"} }, "from.agent"},
		{"tier", func(m map[string]any) { m["to"] = map[string]any{"agent": "b", "tier": "boss"} }, "to.tier"},
		{"broadcast without tier", func(m map[string]any) { m["to"] = map[string]any{"agent": "broadcast"} }, "to.tier"},
		{"broadcast with session", func(m map[string]any) {
			m["to"] = map[string]any{"agent": "broadcast", "tier": "pm", "session": "s"}
		}, "to.session"},
		{"ifOffline", func(m map[string]any) { m["to"] = map[string]any{"agent": "b", "session": "s", "ifOffline": "drop"} }, "to.ifOffline"},
		{"session control", func(m map[string]any) { m["to"] = map[string]any{"agent": "b", "session": "a\nb"} }, "to.session"},
		{"type", func(m map[string]any) { m["type"] = "command" }, "type"},
		{"priority", func(m map[string]any) { m["priority"] = "urgent" }, "priority"},
		{"ttl negative", func(m map[string]any) { m["ttl"] = -1 }, "ttl"},
		{"ttl huge", func(m map[string]any) { m["ttl"] = 999999999 }, "ttl"},
		{"payload missing", func(m map[string]any) { delete(m, "payload") }, "payload"},
		{"payload array", func(m map[string]any) { m["payload"] = []int{1} }, "payload"},
		{"action missing", func(m map[string]any) { m["payload"] = map[string]any{"params": map[string]any{}} }, "payload.action"},
		{"params array", func(m map[string]any) { m["payload"] = map[string]any{"action": "a", "params": []int{1}} }, "payload.params"},
		{"response no requestId", func(m map[string]any) { m["type"] = "response"; m["payload"] = map[string]any{"status": "success"} }, "payload.requestId"},
		{"response bad status", func(m map[string]any) {
			m["type"] = "response"
			m["payload"] = map[string]any{"requestId": "x", "status": "ok"}
		}, "payload.status"},
		{"notification no event", func(m map[string]any) { m["type"] = "notification"; m["payload"] = map[string]any{"message": "x"} }, "payload.event"},
		{"notification bad progress", func(m map[string]any) {
			m["type"] = "notification"
			m["payload"] = map[string]any{"event": "progress", "progress": map[string]any{"percent": 140}}
		}, "payload.progress"},
		{"error bad code", func(m map[string]any) {
			m["type"] = "error"
			m["payload"] = map[string]any{"code": "E999", "message": "x"}
		}, "payload.code"},
		{"error no message", func(m map[string]any) { m["type"] = "error"; m["payload"] = map[string]any{"code": "E001"} }, "payload.message"},
		{"metadata array", func(m map[string]any) { m["metadata"] = []int{1} }, "metadata"},
		{"metadata too big", func(m map[string]any) { m["metadata"] = map[string]any{"x": strings.Repeat("y", 17<<10)} }, "metadata"},
		{"payload too big", func(m map[string]any) {
			m["payload"] = map[string]any{"action": "a", "params": map[string]any{"x": strings.Repeat("y", 257<<10)}}
		}, "payload"},
	}
	for _, tt := range tests {
		env, err := protocol.DecodeEnvelope(mutate(t, validRequest, tt.edit))
		if err != nil {
			t.Fatalf("%s: decode: %v", tt.name, err)
		}
		err = env.Validate()
		if err == nil {
			t.Errorf("%s: accepted, want E003 naming %s", tt.name, tt.field)
			continue
		}
		if pe := protocol.AsError(err); pe.Class != protocol.ClassInvalid || pe.FieldErrors[tt.field] == "" {
			t.Errorf("%s: want E003 naming %s, got %v (%v)", tt.name, tt.field, err, pe.FieldErrors)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		in, code string
	}{
		{`{`, "invalid_json"},
		{``, "invalid_json"},
		{`{"id": 5}`, "invalid_json"},
		{`{"idd": "x"}`, "unknown_field"},
		{`{"from": {"agent": "a", "role": "x"}}`, "unknown_field"},
		{`{} {}`, "invalid_request"},
		{`{"timestamp": "yesterday"}`, "invalid_json"},
		{`{"payload": {"x": ` + strings.Repeat(" ", protocol.MaxEnvelopeBytes) + `1}}`, "envelope_too_large"},
	}
	for _, tt := range tests {
		_, err := protocol.DecodeEnvelope([]byte(tt.in))
		if got := protocol.CodeOf(err); got != tt.code {
			t.Errorf("DecodeEnvelope(%.40q) code = %q, want %q (%v)", tt.in, got, tt.code, err)
		}
		if protocol.ClassOf(err) != protocol.ClassInvalid {
			t.Errorf("class %s", protocol.ClassOf(err))
		}
	}
}

func TestErrorClasses(t *testing.T) {
	tests := []struct {
		class       protocol.Class
		status      int
		recoverable bool
	}{
		{protocol.ClassPermission, http.StatusForbidden, false},
		{protocol.ClassUnavailable, http.StatusServiceUnavailable, true},
		{protocol.ClassInvalid, http.StatusBadRequest, true},
		{protocol.ClassTimeout, http.StatusGatewayTimeout, true},
		{protocol.ClassDependency, http.StatusBadGateway, true},
		{protocol.ClassSystem, http.StatusInternalServerError, true},
	}
	for _, tt := range tests {
		if tt.class.DefaultStatus() != tt.status || tt.class.Recoverable() != tt.recoverable || !tt.class.Valid() {
			t.Errorf("%s: status %d recoverable %v", tt.class, tt.class.DefaultStatus(), tt.class.Recoverable())
		}
	}
	if protocol.NotFound("x", "y").HTTPStatus() != 404 || protocol.Unauthenticated("x").HTTPStatus() != 401 || protocol.Conflict("x", "y").HTTPStatus() != 409 {
		t.Fatal("specific statuses")
	}
	b, _ := json.Marshal(&protocol.Error{Class: protocol.ClassInvalid, Code: "c", Message: "m", Extra: map[string]any{"reason": "r"}})
	var m map[string]any
	json.Unmarshal(b, &m)
	if m["error"] != "c" || m["class"] != "E003" || m["reason"] != "r" || m["recoverable"] != true {
		t.Fatalf("json %s", b)
	}
}

func TestNewIDSortable(t *testing.T) {
	prev := ""
	for i := 0; i < 1000; i++ {
		id := protocol.NewID(protocol.PrefixMessage)
		if len(id) != len("msg_")+26 || !protocol.ValidID(id) {
			t.Fatalf("id %q", id)
		}
		if id <= prev {
			t.Fatalf("not increasing: %s after %s", id, prev)
		}
		prev = id
	}
}

// FuzzDecodeValidate feeds arbitrary bytes through decoding and validation:
// it must never panic, and an envelope that validates must survive a
// round trip through JSON and still validate.
func FuzzDecodeValidate(f *testing.F) {
	f.Add([]byte(validRequest))
	f.Add([]byte(`{"version":"1.0","id":"a","traceId":"b","from":{"agent":"x"},"to":{"agent":"broadcast","tier":"pm"},"type":"notification","timestamp":"2026-01-01T00:00:00Z","payload":{"event":"e"}}`))
	f.Add([]byte(`{"payload":{"requestId":"\u0000"}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := protocol.DecodeEnvelope(data)
		if err != nil {
			if protocol.ClassOf(err) != protocol.ClassInvalid {
				t.Fatalf("decode error class %s: %v", protocol.ClassOf(err), err)
			}
			return
		}
		env.Normalize(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 3600)
		if err := env.Validate(); err != nil {
			if protocol.ClassOf(err) != protocol.ClassInvalid {
				t.Fatalf("validate error class %s", protocol.ClassOf(err))
			}
			return
		}
		b, err := json.Marshal(env)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		env2, err := protocol.DecodeEnvelope(b)
		if err != nil {
			t.Fatalf("round trip decode: %v\n%s", err, b)
		}
		if err := env2.Validate(); err != nil {
			t.Fatalf("round trip validate: %v\n%s", err, b)
		}
	})
}
