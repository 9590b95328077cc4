package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// These tests drive every bus endpoint with bad input through the real hub
// on both stores. Each bad request must get the structured error (status,
// machine code, protocol class, a message, the request id) and must leave
// the bus exactly as it was: no message, delivery or log row created, and
// no lease, attempt or state touched.

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// req is one raw HTTP call.
type req struct {
	method, path, token string
	body                []byte
	ctype               string            // default application/json when there is a body
	header              map[string]string // extra headers
}

func do(t *testing.T, h *apptest.Hub, q req) rawResp {
	t.Helper()
	r, err := http.NewRequest(q.method, h.URL+q.path, bytes.NewReader(q.body))
	if err != nil {
		t.Fatal(err)
	}
	if q.token != "" {
		r.Header.Set("Authorization", "Bearer "+q.token)
	}
	ct := q.ctype
	if ct == "" && len(q.body) > 0 {
		ct = "application/json"
	}
	if ct != "" {
		r.Header.Set("Content-Type", ct)
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", q.method, q.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := rawResp{status: resp.StatusCode, raw: string(b)}
	_ = json.Unmarshal(b, &out.body)
	return out
}

// wantError checks the structured error of a refused request.
func wantError(t *testing.T, name string, r rawResp, status int, code string, class protocol.Class) {
	t.Helper()
	if r.status != status || r.body["error"] != code || r.body["class"] != string(class) {
		t.Errorf("%s: got %d %v %v, want %d %s %s (%s)", name, r.status, r.body["error"], r.body["class"], status, code, class, r.raw)
		return
	}
	if m, _ := r.body["message"].(string); m == "" {
		t.Errorf("%s: no message in %s", name, r.raw)
	}
	if r.body["requestId"] == nil {
		t.Errorf("%s: no requestId in %s", name, r.raw)
	}
	if rec, ok := r.body["recoverable"].(bool); !ok || rec != class.Recoverable() {
		t.Errorf("%s: recoverable %v for class %s", name, r.body["recoverable"], class)
	}
}

func snapshot(t *testing.T, h *apptest.Hub) string {
	t.Helper()
	return h.BusSnapshot()
}

// unchanged fails the test when the bus differs from before.
func unchanged(t *testing.T, h *apptest.Hub, name, before string) {
	t.Helper()
	if after := snapshot(t, h); after != before {
		t.Errorf("%s changed the bus:\nbefore:\n%s\nafter:\n%s", name, before, after)
	}
}

// team is a small hierarchy: command agents C1 and C2; PM P1 under C1;
// workers W1 and W2 under P1.
type team struct {
	C1, C2, P1, W1, W2 client.CreatedAgent
}

func newTeam(t *testing.T, h *apptest.Hub) team {
	t.Helper()
	var tm team
	tm.C1, _ = h.NewAgent("C1")
	tm.C2, _ = h.NewAgent("C2")
	tm.P1, _ = h.NewAgent("P1", client.CreateAgentParams{ParentID: tm.C1.ID})
	tm.W1, _ = h.NewAgent("W1", client.CreateAgentParams{ParentID: tm.P1.ID})
	tm.W2, _ = h.NewAgent("W2", client.CreateAgentParams{ParentID: tm.P1.ID})
	if tm.P1.Tier != protocol.TierPM || tm.W1.Tier != protocol.TierWorker {
		t.Fatalf("tiers: %s %s", tm.P1.Tier, tm.W1.Tier)
	}
	return tm
}

// env renders an envelope from a base notification with fields replaced
// (a nil value deletes the field).
func env(from, to string, set map[string]any) []byte {
	m := map[string]any{
		"to":      map[string]any{"agent": to},
		"type":    "notification",
		"payload": map[string]any{"event": "progress", "message": "hello"},
	}
	if from != "" {
		m["from"] = map[string]any{"agent": from}
	}
	for k, v := range set {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func post(path, token string, body []byte) req {
	return req{method: "POST", path: path, token: token, body: body}
}

func get(path, token string) req { return req{method: "GET", path: path, token: token} }

// mustOK performs q and fails unless it succeeds with want.
func mustOK(t *testing.T, h *apptest.Hub, name string, q req, want int) rawResp {
	t.Helper()
	r := do(t, h, q)
	if r.status != want {
		t.Fatalf("%s: %d %s", name, r.status, r.raw)
	}
	return r
}

// claim leases one delivery of c's inbox with a long lease.
func claim(t *testing.T, c *client.Client) client.Delivery {
	t.Helper()
	ds, err := c.Inbox(ctxFor(t), client.InboxOptions{Limit: 1, Lease: 30 * time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim: %d deliveries, %v", len(ds), err)
	}
	return ds[0]
}

func TestSendBadInput(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		tm := newTeam(t, h)
		w1 := tm.W1.Token
		// A request P1 sent to C1 and C1 received, so a response to it from
		// anyone but C1 names a request that was not delivered to them.
		reqEnv := env(tm.P1.ID, tm.C1.ID, map[string]any{"id": "req-1", "type": "request", "payload": map[string]any{"action": "status.query"}})
		mustOK(t, h, "request", post("/v1/messages", tm.P1.Token, reqEnv), 202)
		claim(t, h.Client(tm.C1.Token))

		bigPayload := map[string]any{"event": "blob", "message": "x", "blob": strings.Repeat("a", protocol.MaxPayloadBytes)}
		// Over the envelope limit but under the route's body limit (envelope + 1 KiB).
		hugeEnvelope := env(tm.W1.ID, tm.P1.ID, map[string]any{"payload": map[string]any{"event": "x", "pad": strings.Repeat("p", protocol.MaxEnvelopeBytes)}})
		overBodyLimit := env(tm.W1.ID, tm.P1.ID, map[string]any{"payload": map[string]any{"event": "x", "pad": strings.Repeat("p", protocol.MaxEnvelopeBytes+4096)}})
		if len(hugeEnvelope) <= protocol.MaxEnvelopeBytes || len(hugeEnvelope) >= protocol.MaxEnvelopeBytes+1024 {
			t.Fatalf("test envelope is %d bytes", len(hugeEnvelope))
		}

		tests := []struct {
			name   string
			q      req
			status int
			code   string
			class  protocol.Class
			field  string // a fieldErrors key the answer must name
		}{
			{"no token", post("/v1/messages", "", env("", tm.P1.ID, nil)), 401, "unauthorized", "E001", ""},
			{"unknown token", post("/v1/messages", "sbt_unknown", env("", tm.P1.ID, nil)), 401, "unauthorized", "E001", ""},
			{"from another agent", post("/v1/messages", w1, env(tm.P1.ID, tm.W1.ID, nil)), 403, "not_your_agent", "E001", "from.agent"},
			{"forbidden route worker->command", post("/v1/messages", w1, env(tm.W1.ID, tm.C1.ID, nil)), 403, "forbidden_route", "E001", ""},
			{"forbidden route worker->worker", post("/v1/messages", w1, env("", tm.W2.ID, nil)), 403, "forbidden_route", "E001", ""},
			{"forbidden route command->other's pm", post("/v1/messages", tm.C2.Token, env("", tm.P1.ID, nil)), 403, "forbidden_route", "E001", ""},
			{"system sender", post("/v1/messages", apptest.AdminToken, env("system:relay", tm.P1.ID, nil)), 403, "system_sender", "E001", ""},
			{"unknown recipient", post("/v1/messages", w1, env("", "agt_nobody", nil)), 404, "unknown_recipient", "E002", "to.agent"},
			{"unknown system recipient", post("/v1/messages", w1, env("", "system:nobody", nil)), 404, "unknown_recipient", "E002", ""},
			{"session offline, fail fast", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"to": map[string]any{"agent": tm.P1.ID, "session": "live", "ifOffline": "fail"}})), 503, "session_offline", "E002", ""},
			{"broadcast reaches nobody", post("/v1/messages", w1, env("", "broadcast", map[string]any{"to": map[string]any{"agent": "broadcast", "tier": "worker"}})), 503, "no_recipients", "E002", ""},
			{"expired ttl", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"timestamp": "2020-01-01T00:00:00Z", "ttl": 60})), 400, "message_expired", "E003", "ttl"},
			{"negative ttl", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"ttl": -5})), 400, "validation_failed", "E003", "ttl"},
			{"ttl over 30 days", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"ttl": protocol.MaxTTLSeconds + 1})), 400, "validation_failed", "E003", "ttl"},
			{"response to an unknown request", post("/v1/messages", tm.C1.Token, env("", tm.P1.ID, map[string]any{"type": "response", "payload": map[string]any{"requestId": "never-sent", "status": "success"}})), 422, "unknown_request", "E003", "payload.requestId"},
			{"response to a request delivered to someone else", post("/v1/messages", tm.C2.Token, env("", tm.P1.ID, map[string]any{"type": "response", "payload": map[string]any{"requestId": "req-1", "status": "success"}})), 422, "unknown_request", "E003", "payload.requestId"},
			{"error envelope for an unknown request", post("/v1/messages", tm.C1.Token, env("", tm.P1.ID, map[string]any{"type": "error", "payload": map[string]any{"requestId": "never-sent", "code": "E002", "message": "gone"}})), 422, "unknown_request", "E003", "payload.requestId"},
			{"oversize payload", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"payload": bigPayload})), 400, "validation_failed", "E003", "payload"},
			{"oversize envelope", post("/v1/messages", w1, hugeEnvelope), 413, "envelope_too_large", "E003", ""},
			{"body over the route limit", post("/v1/messages", w1, overBodyLimit), 413, "body_too_large", "E003", ""},
			{"malformed json", post("/v1/messages", w1, []byte(`{"to":{"agent":`)), 400, "invalid_json", "E003", ""},
			{"empty body", post("/v1/messages", w1, nil), 400, "invalid_json", "E003", ""},
			{"json array", post("/v1/messages", w1, []byte(`[1,2]`)), 400, "invalid_json", "E003", ""},
			{"unknown envelope field", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"prority": "high"})), 400, "unknown_field", "E003", "prority"},
			{"unknown address field", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"to": map[string]any{"agnt": tm.P1.ID}})), 400, "unknown_field", "E003", "agnt"},
			{"wrong field type", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"ttl": "1h"})), 400, "invalid_json", "E003", "ttl"},
			{"trailing data", post("/v1/messages", w1, append(env("", tm.P1.ID, nil), []byte(` {}`)...)), 400, "invalid_request", "E003", ""},
			{"wrong content type", req{method: "POST", path: "/v1/messages", token: w1, ctype: "text/xml", body: env("", tm.P1.ID, nil)}, 415, "unsupported_media_type", "E003", ""},
			{"form content type", req{method: "POST", path: "/v1/messages", token: w1, ctype: "application/x-www-form-urlencoded", body: []byte("to=agt_x")}, 415, "unsupported_media_type", "E003", ""},
			{"unknown type", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"type": "command"})), 400, "validation_failed", "E003", "type"},
			{"unknown priority", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"priority": "urgent"})), 400, "validation_failed", "E003", "priority"},
			{"wrong version", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"version": "2.0"})), 400, "validation_failed", "E003", "version"},
			{"id unsafe as a file name", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"id": "../../etc/passwd"})), 400, "validation_failed", "E003", "id"},
			{"request without action", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"type": "request", "payload": map[string]any{}})), 400, "validation_failed", "E003", "payload.action"},
			{"payload not an object", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"payload": "hi"})), 400, "validation_failed", "E003", "payload"},
			{"from.tier mismatch", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"from": map[string]any{"agent": tm.W1.ID, "tier": "command"}})), 400, "tier_mismatch", "E003", "from.tier"},
			{"to.tier mismatch", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"to": map[string]any{"agent": tm.P1.ID, "tier": "worker"}})), 400, "tier_mismatch", "E003", "to.tier"},
			{"ifOffline without meaning", post("/v1/messages", w1, env("", tm.P1.ID, map[string]any{"to": map[string]any{"agent": tm.P1.ID, "session": "s", "ifOffline": "drop"}})), 400, "validation_failed", "E003", "to.ifOffline"},
			{"broadcast to a session", post("/v1/messages", w1, env("", "broadcast", map[string]any{"to": map[string]any{"agent": "broadcast", "tier": "pm", "session": "s"}})), 400, "validation_failed", "E003", "to.session"},
			{"admin without from.agent", post("/v1/messages", apptest.AdminToken, env("", tm.P1.ID, nil)), 400, "validation_failed", "E003", "from.agent"},
			{"admin acting on a forbidden route", post("/v1/messages", apptest.AdminToken, env(tm.W1.ID, tm.C1.ID, nil)), 403, "forbidden_route", "E001", ""},
			{"wrong method", req{method: "PUT", path: "/v1/messages", token: w1, body: env("", tm.P1.ID, nil)}, 405, "method_not_allowed", "E003", ""},
		}
		for _, tt := range tests {
			before := snapshot(t, h)
			r := do(t, h, tt.q)
			wantError(t, tt.name, r, tt.status, tt.code, tt.class)
			if tt.field != "" {
				fe, _ := r.body["fieldErrors"].(map[string]any)
				if _, ok := fe[tt.field]; !ok {
					t.Errorf("%s: fieldErrors should name %s: %s", tt.name, tt.field, r.raw)
				}
			}
			unchanged(t, h, tt.name, before)
		}

		// A forbidden route names the rule and the path that is allowed.
		r := do(t, h, post("/v1/messages", w1, env("", tm.C1.ID, nil)))
		if msg, _ := r.body["message"].(string); !strings.Contains(msg, "worker->command") || !strings.Contains(msg, tm.P1.ID) {
			t.Errorf("forbidden route message %q should name the rule and the PM to go through", msg)
		}
		if r.body["rule"] != "worker->command" {
			t.Errorf("forbidden route should carry the rule: %s", r.raw)
		}

		// Nothing reached anyone: P1 and W2 have empty inboxes, C1 holds only the request.
		for _, a := range []client.CreatedAgent{tm.P1, tm.W2, tm.C2} {
			if ds, err := h.Client(a.Token).Inbox(ctxFor(t), client.InboxOptions{}); err != nil || len(ds) != 0 {
				t.Errorf("%s received %d deliveries from refused sends (%v)", a.DisplayName, len(ds), err)
			}
		}
	})
}

// A repeated (from, id) answers 200 with the original result and stores
// nothing, even when the repeat's content differs; the same id from another
// sender is a different message.
func TestSendDuplicateID(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		tm := newTeam(t, h)
		first := mustOK(t, h, "first", post("/v1/messages", tm.W1.Token, env("", tm.P1.ID, map[string]any{"id": "dup-1"})), 202)
		before := snapshot(t, h)
		again := mustOK(t, h, "repeat", post("/v1/messages", tm.W1.Token, env("", tm.P1.ID, map[string]any{"id": "dup-1", "payload": map[string]any{"event": "changed"}})), 200)
		if again.body["duplicate"] != true || again.body["traceId"] != first.body["traceId"] || again.body["id"] != "dup-1" || again.body["deliveries"] != float64(1) {
			t.Fatalf("repeat answer %s (first %s)", again.raw, first.raw)
		}
		unchanged(t, h, "duplicate id", before)
		d := claim(t, h.Client(tm.P1.Token))
		e, _ := d.Decode()
		if n, _ := e.Notification(); n.Event != "progress" {
			t.Fatalf("recipient got %s, want the original envelope", d.Envelope)
		}
		// The same id from P1 (to its worker) is P1's own message.
		mustOK(t, h, "same id, other sender", post("/v1/messages", tm.P1.Token, env("", tm.W1.ID, map[string]any{"id": "dup-1"})), 202)
	})
}

// The admin may act for any agent: send as it (subject to its routing
// rules), claim its inbox, settle its deliveries and list its dead letters.
func TestAdminActsForAgent(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		tm := newTeam(t, h)
		r := mustOK(t, h, "admin sends as P1", post("/v1/messages", apptest.AdminToken, env(tm.P1.ID, tm.W1.ID, nil)), 202)
		if r.body["deliveries"] != float64(1) {
			t.Fatalf("send as P1: %s", r.raw)
		}
		r = mustOK(t, h, "admin claims W1's inbox", get("/v1/inbox?agent="+tm.W1.ID+"&lease=600", apptest.AdminToken), 200)
		ds, _ := r.body["deliveries"].([]any)
		if len(ds) != 1 {
			t.Fatalf("admin claim: %s", r.raw)
		}
		id := ds[0].(map[string]any)["deliveryId"].(string)
		mustOK(t, h, "admin extends", post("/v1/deliveries/"+id+"/extend", apptest.AdminToken, []byte(`{"seconds":60}`)), 200)
		mustOK(t, h, "admin acks", post("/v1/deliveries/"+id+"/ack", apptest.AdminToken, nil), 200)
		if ds, _ := h.Client(tm.W1.Token).Inbox(ctxFor(t), client.InboxOptions{}); len(ds) != 0 {
			t.Fatalf("W1 still has %d deliveries after the admin acked", len(ds))
		}
		mustOK(t, h, "admin lists W1's dead letters", get("/v1/dead-letters?agent="+tm.W1.ID, apptest.AdminToken), 200)
	})
}

// The W3C traceparent header gives the trace id when the envelope has none;
// an envelope's own traceId wins; an invalid or all-zero header is ignored.
func TestTraceparentPropagates(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		tm := newTeam(t, h)
		const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
		send := func(body []byte, tp string) rawResp {
			q := post("/v1/messages", tm.W1.Token, body)
			q.header = map[string]string{"traceparent": tp}
			return mustOK(t, h, "send with traceparent "+tp, q, 202)
		}
		r := send(env("", tm.P1.ID, nil), "00-"+trace+"-00f067aa0ba902b7-01")
		if r.body["traceId"] != trace {
			t.Fatalf("traceId %v, want %s from traceparent", r.body["traceId"], trace)
		}
		d := claim(t, h.Client(tm.P1.Token))
		if e, _ := d.Decode(); e.TraceID != trace {
			t.Fatalf("delivered envelope has trace %s", e.TraceID)
		}
		tr, err := h.Client(tm.W1.Token).Trace(ctxFor(t), trace)
		if err != nil || len(tr.Rows) != 2 || tr.Rows[0].Status != "sent" || tr.Rows[1].Status != "delivered" {
			t.Fatalf("trace %+v %v", tr, err)
		}
		r = send(env("", tm.P1.ID, map[string]any{"traceId": "my-trace"}), "00-"+trace+"-00f067aa0ba902b7-01")
		if r.body["traceId"] != "my-trace" {
			t.Fatalf("envelope traceId should win: %s", r.raw)
		}
		for _, bad := range []string{"00-" + strings.Repeat("0", 32) + "-00f067aa0ba902b7-01", "garbage", "00-" + strings.ToUpper(trace) + "-00f067aa0ba902b7-01"} {
			r = send(env("", tm.P1.ID, nil), bad)
			if tid, _ := r.body["traceId"].(string); tid == "" || strings.Contains(bad, tid) {
				t.Fatalf("traceparent %q should be ignored, got trace %q", bad, tid)
			}
		}
	})
}

func TestInboxBadQuery(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		tm := newTeam(t, h)
		mustOK(t, h, "send", post("/v1/messages", tm.W1.Token, env("", tm.P1.ID, nil)), 202)
		p1 := tm.P1.Token
		tests := []struct {
			name   string
			q      req
			status int
			code   string
			class  protocol.Class
		}{
			{"no token", get("/v1/inbox", ""), 401, "unauthorized", "E001"},
			{"limit 0", get("/v1/inbox?limit=0", p1), 400, "invalid_limit", "E003"},
			{"limit 101", get("/v1/inbox?limit=101", p1), 400, "invalid_limit", "E003"},
			{"limit not a number", get("/v1/inbox?limit=ten", p1), 400, "invalid_limit", "E003"},
			{"negative wait", get("/v1/inbox?wait=-1", p1), 400, "invalid_wait", "E003"},
			{"wait over 60", get("/v1/inbox?wait=61", p1), 400, "invalid_wait", "E003"},
			{"wait as a duration", get("/v1/inbox?wait=5s", p1), 400, "invalid_wait", "E003"},
			{"negative lease", get("/v1/inbox?lease=-1", p1), 400, "invalid_lease", "E003"},
			{"lease over an hour", get("/v1/inbox?lease=3601", p1), 400, "invalid_lease", "E003"},
			{"overdue not a boolean", get("/v1/inbox?overdue=maybe", p1), 400, "invalid_overdue", "E003"},
			{"session too long", get("/v1/inbox?session="+strings.Repeat("s", protocol.MaxSessionLen+1), p1), 400, "invalid_session", "E003"},
			{"another agent's inbox", get("/v1/inbox?agent="+tm.W1.ID, p1), 403, "not_your_agent", "E001"},
			{"admin without agent", get("/v1/inbox", apptest.AdminToken), 400, "agent_required", "E003"},
			{"admin, unknown agent", get("/v1/inbox?agent=agt_nobody", apptest.AdminToken), 404, "agent_not_found", "E002"},
			{"post to inbox", post("/v1/inbox", p1, nil), 405, "method_not_allowed", "E003"},
		}
		for _, tt := range tests {
			before := snapshot(t, h)
			wantError(t, tt.name, do(t, h, tt.q), tt.status, tt.code, tt.class)
			unchanged(t, h, tt.name, before)
		}
		// The delivery is still there for its owner, at its first attempt.
		d := claim(t, h.Client(p1))
		if d.Attempt != 1 {
			t.Fatalf("attempt %d after refused claims", d.Attempt)
		}
	})
}

// Settling: another agent's delivery, unknown deliveries, malformed bodies
// and out-of-range values are refused, and the owner's lease is untouched.
func TestSettleBadInput(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		tm := newTeam(t, h)
		c1, c2 := h.Client(tm.C1.Token), h.Client(tm.C2.Token)
		mustOK(t, h, "to C1", post("/v1/messages", tm.C2.Token, env("", tm.C1.ID, nil)), 202)
		mustOK(t, h, "to C2", post("/v1/messages", tm.C1.Token, env("", tm.C2.ID, nil)), 202)
		mine := claim(t, c1)
		theirs := claim(t, c2)
		a := tm.C1.Token
		path := func(id, op string) string { return "/v1/deliveries/" + id + "/" + op }
		tests := []struct {
			name   string
			q      req
			status int
			code   string
			class  protocol.Class
		}{
			{"ack without token", post(path(mine.DeliveryID, "ack"), "", nil), 401, "unauthorized", "E001"},
			{"ack of someone else's delivery", post(path(theirs.DeliveryID, "ack"), a, nil), 403, "not_your_delivery", "E001"},
			{"ack of someone else's delivery at its attempt", post(path(theirs.DeliveryID, "ack"), a, []byte(`{"attempt":1}`)), 403, "not_your_delivery", "E001"},
			{"nack of someone else's delivery", post(path(theirs.DeliveryID, "nack"), a, []byte(`{"error":"mine now"}`)), 403, "not_your_delivery", "E001"},
			{"extend of someone else's delivery", post(path(theirs.DeliveryID, "extend"), a, []byte(`{"seconds":60}`)), 403, "not_your_delivery", "E001"},
			{"ack of an unknown delivery", post(path("dlv_nope", "ack"), a, nil), 404, "delivery_not_found", "E002"},
			{"nack of an unknown delivery", post(path("dlv_nope", "nack"), a, nil), 404, "delivery_not_found", "E002"},
			{"extend of an unknown delivery", post(path("dlv_nope", "extend"), a, []byte(`{"seconds":60}`)), 404, "delivery_not_found", "E002"},
			{"ack malformed body", post(path(mine.DeliveryID, "ack"), a, []byte(`{"attempt":`)), 400, "invalid_json", "E003"},
			{"ack unknown field", post(path(mine.DeliveryID, "ack"), a, []byte(`{"attempts":1}`)), 400, "unknown_field", "E003"},
			{"ack wrong type", post(path(mine.DeliveryID, "ack"), a, []byte(`{"attempt":"1"}`)), 400, "invalid_json", "E003"},
			{"ack wrong content type", req{method: "POST", path: path(mine.DeliveryID, "ack"), token: a, ctype: "text/xml", body: []byte(`<ack/>`)}, 415, "unsupported_media_type", "E003"},
			{"ack negative attempt", post(path(mine.DeliveryID, "ack"), a, []byte(`{"attempt":-1}`)), 400, "invalid_attempt", "E003"},
			{"ack stale attempt", post(path(mine.DeliveryID, "ack"), a, []byte(`{"attempt":7}`)), 409, "stale_attempt", "E003"},
			{"nack negative delay", post(path(mine.DeliveryID, "nack"), a, []byte(`{"delay":-1}`)), 400, "invalid_delay", "E003"},
			{"nack delay over a day", post(path(mine.DeliveryID, "nack"), a, []byte(`{"delay":86401}`)), 400, "invalid_delay", "E003"},
			{"nack unknown field", post(path(mine.DeliveryID, "nack"), a, []byte(`{"delay":1,"reason":"x"}`)), 400, "unknown_field", "E003"},
			{"nack stale attempt", post(path(mine.DeliveryID, "nack"), a, []byte(`{"attempt":2}`)), 409, "stale_attempt", "E003"},
			{"extend zero seconds", post(path(mine.DeliveryID, "extend"), a, []byte(`{"seconds":0}`)), 400, "invalid_seconds", "E003"},
			{"extend negative seconds", post(path(mine.DeliveryID, "extend"), a, []byte(`{"seconds":-30}`)), 400, "invalid_seconds", "E003"},
			{"extend over an hour", post(path(mine.DeliveryID, "extend"), a, []byte(`{"seconds":3601}`)), 400, "invalid_seconds", "E003"},
			{"extend without body", post(path(mine.DeliveryID, "extend"), a, nil), 400, "invalid_json", "E003"},
			{"extend stale attempt", post(path(mine.DeliveryID, "extend"), a, []byte(`{"seconds":60,"attempt":3}`)), 409, "stale_attempt", "E003"},
			{"get on ack", get(path(mine.DeliveryID, "ack"), a), 405, "method_not_allowed", "E003"},
		}
		for _, tt := range tests {
			before := snapshot(t, h)
			wantError(t, tt.name, do(t, h, tt.q), tt.status, tt.code, tt.class)
			unchanged(t, h, tt.name, before)
		}

		// Both leases survived: each owner settles its own delivery.
		if s, err := c2.Ack(ctxFor(t), theirs.DeliveryID, theirs.Attempt); err != nil || s.State != "acked" || s.AlreadyApplied {
			t.Fatalf("C2 acks its delivery: %+v %v", s, err)
		}
		if s, err := c1.Extend(ctxFor(t), mine.DeliveryID, mine.Attempt, time.Minute); err != nil || s.State != "leased" {
			t.Fatalf("C1 extends its delivery: %+v %v", s, err)
		}
		if s, err := c1.Ack(ctxFor(t), mine.DeliveryID, 0); err != nil || s.State != "acked" {
			t.Fatalf("C1 acks its delivery: %+v %v", s, err)
		}
		// Repeats are idempotent; settling an acked delivery otherwise is a conflict.
		before := snapshot(t, h)
		if s, err := c1.Ack(ctxFor(t), mine.DeliveryID, mine.Attempt); err != nil || !s.AlreadyApplied {
			t.Fatalf("repeat ack: %+v %v", s, err)
		}
		wantError(t, "nack after ack", do(t, h, post(path(mine.DeliveryID, "nack"), a, nil)), 409, "delivery_not_leased", "E003")
		wantError(t, "extend after ack", do(t, h, post(path(mine.DeliveryID, "extend"), a, []byte(`{"seconds":60}`))), 409, "delivery_not_leased", "E003")
		wantError(t, "ack of someone else's acked delivery", do(t, h, post(path(theirs.DeliveryID, "ack"), a, nil)), 403, "not_your_delivery", "E001")
		unchanged(t, h, "settling acked deliveries", before)
	})
}

// After a lease expires the delivery is redelivered; the newer attempt
// wins and a stale ack, nack or extend is refused without touching it.
// The hub runs on a fake clock and the test sweeps by hand, so nothing
// here depends on timing.
func TestAckAfterLeaseExpiry(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxFor(t)
		fake := h.App.Config.Clock.(*clock.Fake)
		sweep := func() {
			t.Helper()
			if err := h.App.Bus.Sweep(ctx, fake.Now().Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		tm := newTeam(t, h)
		c1 := h.Client(tm.C1.Token)
		mustOK(t, h, "send", post("/v1/messages", tm.C2.Token, env("", tm.C1.ID, nil)), 202)
		ds, err := c1.Inbox(ctx, client.InboxOptions{Limit: 1, Lease: time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("claim %v %v", ds, err)
		}
		first := ds[0]
		fake.Advance(61 * time.Second)
		path := "/v1/deliveries/" + first.DeliveryID
		before := snapshot(t, h)
		wantError(t, "ack after lease expiry", do(t, h, post(path+"/ack", tm.C1.Token, nil)), 409, "lease_expired", "E003")
		wantError(t, "extend after lease expiry", do(t, h, post(path+"/extend", tm.C1.Token, []byte(`{"seconds":60}`))), 409, "lease_expired", "E003")
		wantError(t, "nack after lease expiry", do(t, h, post(path+"/nack", tm.C1.Token, nil)), 409, "lease_expired", "E003")
		unchanged(t, h, "settling an expired lease", before)

		sweep()
		ds, err = c1.Inbox(ctx, client.InboxOptions{Limit: 1, Lease: time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("redelivery %v %v", ds, err)
		}
		second := ds[0]
		if second.DeliveryID != first.DeliveryID || second.Attempt != 2 {
			t.Fatalf("redelivery %+v", second)
		}
		before = snapshot(t, h)
		stale := []byte(fmt.Sprintf(`{"attempt":%d}`, first.Attempt))
		wantError(t, "stale ack", do(t, h, post(path+"/ack", tm.C1.Token, stale)), 409, "stale_attempt", "E003")
		wantError(t, "stale nack", do(t, h, post(path+"/nack", tm.C1.Token, stale)), 409, "stale_attempt", "E003")
		wantError(t, "stale extend", do(t, h, post(path+"/extend", tm.C1.Token, []byte(fmt.Sprintf(`{"attempt":%d,"seconds":60}`, first.Attempt)))), 409, "stale_attempt", "E003")
		unchanged(t, h, "stale settles", before)

		r := mustOK(t, h, "ack of the newer attempt", post(path+"/ack", tm.C1.Token, []byte(fmt.Sprintf(`{"attempt":%d}`, second.Attempt))), 200)
		if r.body["state"] != "acked" || r.body["attempt"] != float64(2) {
			t.Fatalf("ack %s", r.raw)
		}
		// Once acked it never comes back, however long we wait.
		fake.Advance(2 * time.Hour)
		sweep()
		if ds, _ := c1.Inbox(ctx, client.InboxOptions{}); len(ds) != 0 {
			t.Fatalf("acked delivery redelivered: %+v", ds)
		}
		wantError(t, "ack of the first attempt after the second was acked", do(t, h, post(path+"/ack", tm.C1.Token, stale)), 409, "stale_attempt", "E003")
	}, func(c *app.Config) {
		c.Clock = clock.NewFake(time.Now())
		c.Bus.SweepInterval = time.Hour // the test sweeps
	})
}

func TestDeadLettersBadInput(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxFor(t)
		tm := newTeam(t, h)
		c2 := h.Client(tm.C2.Token)
		mustOK(t, h, "send", post("/v1/messages", tm.C1.Token, env("", tm.C2.ID, nil)), 202)
		d := claim(t, c2)
		if s, err := c2.Nack(ctx, d.DeliveryID, d.Attempt, 0, "cannot"); err != nil || s.State != "dead" {
			t.Fatalf("nack on the last attempt: %+v %v", s, err)
		}
		mustOK(t, h, "another", post("/v1/messages", tm.C1.Token, env("", tm.C2.ID, nil)), 202)
		leased := claim(t, c2)

		a := tm.C1.Token
		tests := []struct {
			name   string
			q      req
			status int
			code   string
			class  protocol.Class
		}{
			{"list without token", get("/v1/dead-letters", ""), 401, "unauthorized", "E001"},
			{"list another agent's", get("/v1/dead-letters?agent="+tm.C2.ID, a), 403, "not_your_agent", "E001"},
			{"unknown reason", get("/v1/dead-letters?reason=lost", tm.C2.Token), 400, "invalid_reason", "E003"},
			{"limit 0", get("/v1/dead-letters?limit=0", tm.C2.Token), 400, "invalid_limit", "E003"},
			{"limit 501", get("/v1/dead-letters?limit=501", tm.C2.Token), 400, "invalid_limit", "E003"},
			{"replay another agent's dead letter", post("/v1/dead-letters/"+d.DeliveryID+"/replay", a, nil), 403, "not_your_delivery", "E001"},
			{"replay an unknown delivery", post("/v1/dead-letters/dlv_nope/replay", tm.C2.Token, nil), 404, "delivery_not_found", "E002"},
			{"replay a live delivery", post("/v1/dead-letters/"+leased.DeliveryID+"/replay", tm.C2.Token, nil), 409, "not_dead", "E003"},
		}
		for _, tt := range tests {
			before := snapshot(t, h)
			wantError(t, tt.name, do(t, h, tt.q), tt.status, tt.code, tt.class)
			unchanged(t, h, tt.name, before)
		}
		if own, err := h.Client(a).DeadLetters(ctx, "", "", 0); err != nil || len(own) != 0 {
			t.Fatalf("C1 sees %d dead letters (%v); they are C2's", len(own), err)
		}
		dl, err := c2.DeadLetters(ctx, "", "max_attempts", 0)
		if err != nil || len(dl) != 1 || dl[0].DeliveryID != d.DeliveryID || dl[0].LastError != "cannot" {
			t.Fatalf("C2's dead letters %+v %v", dl, err)
		}
		s, err := c2.Replay(ctx, d.DeliveryID)
		if err != nil || s.State != "queued" || s.DeliveryID == d.DeliveryID {
			t.Fatalf("replay %+v %v", s, err)
		}
		before := snapshot(t, h)
		r := do(t, h, post("/v1/dead-letters/"+d.DeliveryID+"/replay", tm.C2.Token, nil))
		wantError(t, "second replay", r, 409, "already_replayed", "E003")
		if r.body["replayedAs"] != s.DeliveryID {
			t.Errorf("second replay should name the first replay: %s", r.raw)
		}
		wantError(t, "admin replays a replayed letter", do(t, h, post("/v1/dead-letters/"+d.DeliveryID+"/replay", apptest.AdminToken, nil)), 409, "already_replayed", "E003")
		unchanged(t, h, "second replay", before)
	}, func(c *app.Config) { c.Bus.MaxAttempts = 1 })
}

// An agent sees only the traces of messages it sent or received; asking
// for anyone else's (by trace id or by message id) is not found, exactly
// like a trace that does not exist.
func TestTraceOfAnotherAgent(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxFor(t)
		tm := newTeam(t, h)
		r := mustOK(t, h, "send", post("/v1/messages", tm.C1.Token, env("", tm.C2.ID, map[string]any{"id": "private-1", "traceId": "trace-private"})), 202)
		if r.body["traceId"] != "trace-private" {
			t.Fatalf("send %s", r.raw)
		}
		before := snapshot(t, h)
		for _, tt := range []struct{ name, path, token string }{
			{"another agent's trace", "/v1/traces/trace-private", tm.P1.Token},
			{"another agent's message id", "/v1/traces/private-1", tm.P1.Token},
			{"an unknown trace", "/v1/traces/no-such-trace", tm.C1.Token},
		} {
			wantError(t, tt.name, do(t, h, get(tt.path, tt.token)), 404, "trace_not_found", "E002")
		}
		wantError(t, "trace without token", do(t, h, get("/v1/traces/trace-private", "")), 401, "unauthorized", "E001")
		unchanged(t, h, "trace lookups", before)
		for _, c := range []*client.Client{h.Client(tm.C1.Token), h.Client(tm.C2.Token), h.Admin} {
			tr, err := c.Trace(ctx, "private-1")
			if err != nil || tr.TraceID != "trace-private" || len(tr.Rows) != 1 {
				t.Fatalf("participant trace %+v %v", tr, err)
			}
		}
		// Message ids are unique per sender only: when P1 reuses the id for
		// its own message, each sender's lookup by message id finds its own.
		mustOK(t, h, "same id from P1", post("/v1/messages", tm.P1.Token, env("", tm.W1.ID, map[string]any{"id": "private-1", "traceId": "trace-p1"})), 202)
		for _, c := range []struct {
			token, want string
		}{{tm.C1.Token, "trace-private"}, {tm.P1.Token, "trace-p1"}, {tm.W1.Token, "trace-p1"}, {tm.C2.Token, "trace-private"}} {
			tr, err := h.Client(c.token).Trace(ctx, "private-1")
			if err != nil || tr.TraceID != c.want {
				t.Errorf("lookup by message id: %+v %v, want %s", tr, err, c.want)
			}
		}
	})
}

// A polling agent's heartbeat makes it online on its presence and in the
// agent list; bad heartbeats are refused.
func TestHeartbeatAndPresence(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxFor(t)
		tm := newTeam(t, h)
		presence := func(id string) map[string]any {
			t.Helper()
			return mustOK(t, h, "presence", get("/v1/agents/"+id+"/presence", tm.C2.Token), 200).body
		}
		if p := presence(tm.C1.ID); p["liveness"] != "offline" {
			t.Fatalf("before any heartbeat: %v", p)
		}
		for _, tt := range []struct {
			name   string
			q      req
			status int
			code   string
			class  protocol.Class
		}{
			{"heartbeat without token", post("/v1/heartbeat", "", nil), 401, "unauthorized", "E001"},
			{"heartbeat with the admin token", post("/v1/heartbeat", apptest.AdminToken, nil), 400, "invalid_token", "E003"},
			{"heartbeat unknown field", post("/v1/heartbeat", tm.C1.Token, []byte(`{"state":"busy"}`)), 400, "unknown_field", "E003"},
			{"heartbeat session too long", post("/v1/heartbeat", tm.C1.Token, []byte(`{"session":"`+strings.Repeat("s", protocol.MaxSessionLen+1)+`"}`)), 400, "invalid_session", "E003"},
			{"heartbeat status too long", post("/v1/heartbeat", tm.C1.Token, []byte(`{"status":"`+strings.Repeat("s", 201)+`"}`)), 400, "invalid_session", "E003"},
			{"presence of an unknown agent", get("/v1/agents/agt_nobody/presence", tm.C1.Token), 404, "agent_not_found", "E002"},
		} {
			wantError(t, tt.name, do(t, h, tt.q), tt.status, tt.code, tt.class)
		}
		if p := presence(tm.C1.ID); p["liveness"] != "offline" {
			t.Fatalf("refused heartbeats made C1 %v", p["liveness"])
		}

		r := mustOK(t, h, "heartbeat", post("/v1/heartbeat", tm.C1.Token, []byte(`{"status":"working","session":"s1"}`)), 200)
		if r.body["agentId"] != tm.C1.ID || r.body["session"] != "s1" {
			t.Fatalf("heartbeat answer %s", r.raw)
		}
		p := presence(tm.C1.ID)
		sessions, _ := p["sessions"].([]any)
		if p["liveness"] != "online" || len(sessions) != 1 {
			t.Fatalf("presence after heartbeat: %v", p)
		}
		s := sessions[0].(map[string]any)
		if s["session"] != "s1" || s["status"] != "working" || s["kind"] != "poll" || s["liveness"] != "online" {
			t.Fatalf("session presence %v", s)
		}
		// The same liveness survives the presence flush and shows in the agent list.
		if err := h.App.Bus.FlushPresence(ctx); err != nil {
			t.Fatal(err)
		}
		agents, err := h.Client(tm.C2.Token).Agents(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, a := range agents {
			got[a.ID] = a.Liveness
			if a.ID == tm.C1.ID && a.LastSeen.IsZero() {
				t.Errorf("C1 online without lastSeen")
			}
		}
		if got[tm.C1.ID] != "online" || got[tm.C2.ID] != "offline" {
			t.Fatalf("agent list liveness %v", got)
		}
		one, err := h.Client(tm.C2.Token).Agent(ctx, tm.C1.ID)
		if err != nil || one.Liveness != "online" {
			t.Fatalf("GET /v1/agents/{id}: %+v %v", one, err)
		}
	})
}
