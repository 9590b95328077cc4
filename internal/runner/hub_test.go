package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// fakeHub is a Claworld server that follows specs/claworld.md, "Wire
// protocol claworld.delivery_reply.v1", strictly: it checks every client
// frame, refuses a second answer with delivery_not_replyable, redelivers
// unanswered deliveries on every new connection, replaces an older
// connection with 4001, and serves the HTTP fallbacks.
type fakeHub struct {
	t       *testing.T
	srv     *httptest.Server
	token   string
	agentID string

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change
	order      []string
	deliveries map[string]*fakeDelivery
	conn       *websocket.Conn
	attempts   int // WebSocket upgrade attempts
	auths      int // successful authentications
	heartbeats int
	frames     []map[string]any // every client frame after auth, in order
	protoErrs  []string         // frames the hub found invalid
	refuseWS   bool             // answer 503 to upgrades
	httpDown   bool             // answer 503 to HTTP fallbacks
	httpCalls  int              // HTTP fallback requests
}

type fakeDelivery struct {
	data    map[string]any
	status  string // pending, accepted, replied, kept_silent
	answers []fakeAnswer
}

type fakeAnswer struct {
	kind, text, reason, source, via, from string
}

func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	h := &fakeHub{t: t, token: "tok_good", agentID: "agt_runner", deliveries: map[string]*fakeDelivery{}, changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", h.serveWS)
	mux.HandleFunc("POST /v1/runtime-deliveries/{id}/{action}", h.serveHTTP)
	h.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		h.mu.Lock()
		if h.conn != nil {
			h.conn.CloseNow()
		}
		h.mu.Unlock()
		h.srv.Close()
	})
	return h
}

// notify wakes waiters; call with h.mu held.
func (h *fakeHub) notify() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// waitUntil waits until cond (evaluated with h.mu held) holds.
func (h *fakeHub) waitUntil(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		h.mu.Lock()
		ok, ch := cond(), h.changed
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			h.t.Fatalf("fake hub: timed out waiting for %s", what)
		}
	}
}

func (h *fakeHub) protoErr(format string, args ...any) {
	h.protoErrs = append(h.protoErrs, fmt.Sprintf(format, args...))
}

func (h *fakeHub) send(ws *websocket.Conn, event string, data any) {
	b, _ := json.Marshal(map[string]any{"event": event, "data": data})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = ws.Write(ctx, websocket.MessageText, b)
}

func (h *fakeHub) serveWS(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.attempts++
	refuse := h.refuseWS
	h.notify()
	h.mu.Unlock()
	if refuse {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	_, data, err := ws.Read(ctx)
	cancel()
	if err != nil {
		return
	}
	var auth struct {
		Type       string `json:"type"`
		AgentID    string `json:"agentId"`
		Credential struct {
			Type  string `json:"type"`
			Token string `json:"token"`
		} `json:"credential"`
		Client         string `json:"client"`
		ClientVersion  string `json:"clientVersion"`
		BridgeProtocol string `json:"bridgeProtocol"`
	}
	refuseAuth := func(code, reason string) {
		h.send(ws, "error", map[string]string{"code": code, "reason": reason})
		ws.Close(4003, code)
	}
	if err := json.Unmarshal(data, &auth); err != nil || auth.Type != "auth" {
		refuseAuth("invalid_auth_frame", "the first frame must be auth")
		return
	}
	if auth.BridgeProtocol != "claworld.delivery_reply.v1" || auth.Credential.Type != "agent_token" || auth.Client == "" || auth.ClientVersion == "" {
		refuseAuth("invalid_auth_frame", "bad bridgeProtocol, credential type, client or clientVersion")
		return
	}
	if auth.Credential.Token != h.token || (auth.AgentID != "" && auth.AgentID != h.agentID) {
		refuseAuth("unauthorized", "unknown token")
		return
	}

	h.send(ws, "auth.ok", map[string]any{"agentId": h.agentID, "heartbeatIntervalSeconds": 15})
	// Registering the connection and pushing what is pending happen under
	// the lock, so a concurrent deliver pushes each delivery exactly once.
	h.mu.Lock()
	if old := h.conn; old != nil {
		go old.Close(4001, "duplicate_connection_replaced")
	}
	h.conn = ws
	h.auths++
	for _, id := range h.order {
		if d := h.deliveries[id]; d.status == "pending" || d.status == "accepted" {
			h.send(ws, "delivery", d.data)
		}
	}
	h.notify()
	h.mu.Unlock()
	for {
		_, data, err := ws.Read(r.Context())
		if err != nil {
			h.mu.Lock()
			if h.conn == ws {
				h.conn = nil
			}
			h.notify()
			h.mu.Unlock()
			return
		}
		h.handleFrame(ws, data)
	}
}

func (h *fakeHub) handleFrame(ws *websocket.Conn, data []byte) {
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		h.mu.Lock()
		h.protoErr("frame is not JSON: %s", data)
		h.mu.Unlock()
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	defer h.notify()
	typ, _ := f["type"].(string)
	if typ == "heartbeat" {
		h.heartbeats++
		return
	}
	h.frames = append(h.frames, f)
	id, _ := f["deliveryId"].(string)
	session, _ := f["sessionKey"].(string)
	payload, _ := f["payload"].(map[string]any)
	source, _ := payload["source"].(string)
	fail := func(code, msg string) {
		go h.send(ws, "error", map[string]any{"code": code, "message": msg, "deliveryId": id})
	}
	d := h.deliveries[id]
	switch {
	case typ != "accepted" && typ != "reply" && typ != "kept_silent":
		h.protoErr("unknown frame type %q", typ)
		fail("unsupported_frame", "unknown frame type")
		return
	case d == nil:
		h.protoErr("%s for unknown delivery %q", typ, id)
		fail("delivery_not_found", "unknown delivery")
		return
	case session != d.data["sessionKey"]:
		h.protoErr("%s for %s with sessionKey %q", typ, id, session)
		fail("invalid_session", "sessionKey does not match the delivery")
		return
	case source == "":
		h.protoErr("%s for %s without payload.source", typ, id)
	}
	switch typ {
	case "accepted":
		if d.status == "pending" {
			d.status = "accepted"
		}
		go h.send(ws, "delivery.accepted", map[string]string{"acceptedDeliveryId": id})
		return
	case "reply":
		text, _ := payload["text"].(string)
		if text == "" {
			h.protoErr("reply for %s without payload.text", id)
			fail("text_required", "payload.text is required")
			return
		}
		if meta, _ := d.data["metadata"].(map[string]any); meta["allowReply"] == false {
			h.protoErr("reply to %s, which does not allow replies", id)
			fail("reply_not_allowed", "this delivery does not allow a reply")
			return
		}
		if d.status == "replied" || d.status == "kept_silent" {
			fail("delivery_not_replyable", "the delivery was already answered")
			return
		}
		d.status = "replied"
		d.answers = append(d.answers, fakeAnswer{kind: "reply", text: text, source: source, via: "socket"})
		go h.send(ws, "reply.accepted", map[string]string{"repliedDeliveryId": id})
	case "kept_silent":
		reason, _ := payload["reason"].(string)
		if reason != ReasonNoReply && reason != ReasonReplyNotAllowed {
			h.protoErr("kept_silent for %s with reason %q", id, reason)
		}
		if d.status == "replied" || d.status == "kept_silent" {
			fail("delivery_not_replyable", "the delivery was already answered")
			return
		}
		d.status = "kept_silent"
		d.answers = append(d.answers, fakeAnswer{kind: "kept_silent", reason: reason, source: source, via: "socket"})
		go h.send(ws, "kept_silent.accepted", map[string]string{"keptSilentDeliveryId": id})
	}
}

func (h *fakeHub) serveHTTP(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	defer h.notify()
	h.httpCalls++
	if h.httpDown {
		writeJSON(http.StatusServiceUnavailable, map[string]string{"error": "unavailable"})
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+h.token {
		writeJSON(http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
		return
	}
	id, action := r.PathValue("id"), r.PathValue("action")
	var body struct {
		FromAgentID string `json:"fromAgentId"`
		Reason      string `json:"reason"`
		Source      string `json:"source"`
		Payload     struct {
			Text   string `json:"text"`
			Source string `json:"source"`
		} `json:"payload"`
	}
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		h.protoErr("HTTP %s body: %v", action, err)
		writeJSON(http.StatusBadRequest, map[string]string{"error": "invalid_json"})
		return
	}
	d := h.deliveries[id]
	if d == nil {
		writeJSON(http.StatusNotFound, map[string]string{"error": "delivery_not_found"})
		return
	}
	if body.FromAgentID != h.agentID {
		h.protoErr("HTTP %s for %s from %q", action, id, body.FromAgentID)
	}
	if d.status == "replied" || d.status == "kept_silent" {
		writeJSON(http.StatusConflict, map[string]any{"reason": "delivery_not_replyable", "delivery": map[string]string{"deliveryId": id, "status": d.status}})
		return
	}
	switch action {
	case "reply":
		if body.Payload.Text == "" || body.Payload.Source == "" {
			h.protoErr("HTTP reply for %s without payload.text or payload.source", id)
		}
		d.status = "replied"
		d.answers = append(d.answers, fakeAnswer{kind: "reply", text: body.Payload.Text, source: body.Payload.Source, via: "http", from: body.FromAgentID})
	case "kept-silent":
		if body.Reason == "" || body.Source == "" {
			h.protoErr("HTTP kept-silent for %s without reason or source", id)
		}
		d.status = "kept_silent"
		d.answers = append(d.answers, fakeAnswer{kind: "kept_silent", reason: body.Reason, source: body.Source, via: "http", from: body.FromAgentID})
	default:
		h.protoErr("HTTP action %q", action)
		writeJSON(http.StatusNotFound, map[string]string{"error": "not_found"})
		return
	}
	writeJSON(http.StatusOK, map[string]any{"ok": true, "deliveryId": id})
}

// deliver stores a delivery and pushes it to the current connection.
func (h *fakeHub) deliver(data map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := data["deliveryId"].(string)
	h.deliveries[id] = &fakeDelivery{data: data, status: "pending"}
	h.order = append(h.order, id)
	if h.conn != nil {
		h.send(h.conn, "delivery", data)
	}
}

// store records a delivery without pushing it.
func (h *fakeHub) store(data map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := data["deliveryId"].(string)
	h.deliveries[id] = &fakeDelivery{data: data, status: "pending"}
	h.order = append(h.order, id)
}

// push sends a raw event to the current connection.
func (h *fakeHub) push(event string, data any) {
	h.mu.Lock()
	ws := h.conn
	h.mu.Unlock()
	if ws != nil {
		h.send(ws, event, data)
	}
}

// markAnswered records an answer given before (by an earlier runner).
func (h *fakeHub) markAnswered(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.deliveries[id]
	d.status = "replied"
	d.answers = append(d.answers, fakeAnswer{kind: "reply", text: "earlier", via: "earlier"})
}

// closeConn closes the current connection with code (0: abruptly).
func (h *fakeHub) closeConn(code websocket.StatusCode, reason string) {
	h.mu.Lock()
	ws := h.conn
	h.mu.Unlock()
	if ws == nil {
		h.t.Fatal("fake hub: no connection to close")
	}
	if code == 0 {
		ws.CloseNow()
		return
	}
	ws.Close(code, reason)
}

func (h *fakeHub) set(f func()) {
	h.mu.Lock()
	f()
	h.notify()
	h.mu.Unlock()
}

// answersOf returns the recorded answers of a delivery.
func (h *fakeHub) answersOf(id string) []fakeAnswer {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]fakeAnswer(nil), h.deliveries[id].answers...)
}

// waitAnswered waits until the delivery has n answers.
func (h *fakeHub) waitAnswered(id string) fakeAnswer {
	h.t.Helper()
	h.waitUntil(id+" answered", func() bool { return len(h.deliveries[id].answers) > 0 })
	return h.answersOf(id)[0]
}

func (h *fakeHub) waitAuths(n int) {
	h.t.Helper()
	h.waitUntil(fmt.Sprintf("%d authenticated connections", n), func() bool { return h.auths >= n })
}

// checkClean fails the test on any protocol violation.
func (h *fakeHub) checkClean() {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.protoErrs {
		h.t.Errorf("protocol violation: %s", e)
	}
}

// checkAcceptedFirst checks that every answer frame came after an
// accepted frame for its delivery (only meaningful when no connection
// dropped frames in flight).
func (h *fakeHub) checkAcceptedFirst() {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	accepted := map[string]bool{}
	for _, f := range h.frames {
		id, _ := f["deliveryId"].(string)
		switch f["type"] {
		case "accepted":
			accepted[id] = true
		case "reply", "kept_silent":
			if !accepted[id] {
				h.t.Errorf("%s for %s without accepted before it", f["type"], id)
			}
		}
	}
}

// ---- deliveries -------------------------------------------------------------

type dopt func(map[string]any)

func withContext(doc string) dopt {
	return func(m map[string]any) { m["payload"].(map[string]any)["contextText"] = doc }
}

func withCommand(cmd string) dopt {
	return func(m map[string]any) { m["payload"].(map[string]any)["commandText"] = cmd }
}

func noReplyAllowed(m map[string]any) { m["metadata"].(map[string]any)["allowReply"] = false }

func mkDelivery(id, session, typ, text string, opts ...dopt) map[string]any {
	m := map[string]any{
		"eventType": "delivery", "deliveryId": id, "sessionKey": session, "targetAgentId": "agt_runner",
		"chatRequestId": "req_1", "conversationKey": session, "createdAt": "2025-06-01T10:00:00Z",
		"payload": map[string]any{"text": text},
		"metadata": map[string]any{"fromAgentId": "agt_peer", "fromAgentCode": "K7Q2XP", "fromDisplayIdentity": "Mira#K7Q2XP",
			"allowReply": true, "acceptanceRequired": true, "deliveryType": typ},
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// ---- running a runner against the hub -----------------------------------------

// events records what a runner reports.
type events struct {
	mu      sync.Mutex
	list    []Event
	changed chan struct{}
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

// wait returns the first event (from the start) matching kind and id,
// waiting for it.
func (e *events) wait(t *testing.T, kind EventKind, id string) Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		e.mu.Lock()
		for _, ev := range e.list {
			if ev.Kind == kind && (id == "" || ev.DeliveryID == id) {
				e.mu.Unlock()
				return ev
			}
		}
		ch := e.changed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for event %s %s", kind, id)
		}
	}
}

func (e *events) count(kind EventKind, id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.list {
		if ev.Kind == kind && (id == "" || ev.DeliveryID == id) {
			n++
		}
	}
	return n
}

// testLogger logs to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type running struct {
	ev     *events
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error
}

// stop cancels the runner and returns what Run returned.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		return r.err
	case <-time.After(15 * time.Second):
		t.Fatal("runner did not stop")
		return nil
	}
}

// result waits for Run to return on its own.
func (r *running) result(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(10 * time.Second):
		t.Fatal("runner did not return")
		return nil
	}
}

func startRunner(t *testing.T, h *fakeHub, drv Driver, mods ...func(*Config)) *running {
	t.Helper()
	ev := &events{changed: make(chan struct{})}
	cfg := Config{
		Server: h.srv.URL, Token: h.token, Driver: drv, Logger: testLogger(t), OnEvent: ev.add,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Heartbeat: 20 * time.Millisecond,
		AnswerTimeout: 5 * time.Second, ShutdownGrace: 2 * time.Second,
	}
	for _, m := range mods {
		m(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{ev: ev, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = Run(ctx, cfg)
		close(r.done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(15 * time.Second):
			t.Error("runner did not stop")
		}
	})
	return r
}

// gate is a driver that blocks chosen deliveries until released and
// counts calls.
type gate struct {
	mu      sync.Mutex
	calls   map[string]int
	order   []string
	blocked map[string]chan struct{}
	changed chan struct{}
	answer  func(Delivery) (string, error)
}

func newGate(answer func(Delivery) (string, error)) *gate {
	return &gate{calls: map[string]int{}, blocked: map[string]chan struct{}{}, changed: make(chan struct{}), answer: answer}
}

func (g *gate) block(id string) {
	g.mu.Lock()
	g.blocked[id] = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) release(id string) {
	g.mu.Lock()
	close(g.blocked[id])
	g.mu.Unlock()
}

func (g *gate) Reply(ctx context.Context, d Delivery) (string, error) {
	g.mu.Lock()
	g.calls[d.DeliveryID]++
	g.order = append(g.order, d.DeliveryID)
	ch := g.blocked[d.DeliveryID]
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return g.answer(d)
}

// waitEntered waits until the driver was called for id.
func (g *gate) waitEntered(t *testing.T, id string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		g.mu.Lock()
		n, ch := g.calls[id], g.changed
		g.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("driver never called for %s", id)
		}
	}
}

func (g *gate) callsOf(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[id]
}

func (g *gate) calledOrder() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.order...)
}

func echo(d Delivery) (string, error) { return "re: " + d.Payload.Text, nil }

var errBoom = errors.New("boom")

// newHTTPServer serves h for the test and returns its URL.
func newHTTPServer(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}
