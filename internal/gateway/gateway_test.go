package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, c *client.Client, opts client.ConnectOptions) *client.Socket {
	t.Helper()
	s, err := c.Connect(ctxT(t), opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Deliveries are pushed over the socket when they commit and settled with
// frames; a request/response round trip correlates.
func TestPushAckAndRequest(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxT(t)
		a, ac := h.NewAgent("Alice")
		b, bc := h.NewAgent("Bob")
		bs := connect(t, bc, client.ConnectOptions{})
		as := connect(t, ac, client.ConnectOptions{})

		// Bob answers requests.
		bobCtx, stopBob := context.WithCancel(ctx)
		defer stopBob()
		go func() {
			ctx := bobCtx
			for {
				d, err := bs.Receive(ctx)
				if err != nil {
					return
				}
				env, _ := d.Decode()
				if env.Type == "request" {
					resp, _ := client.NewResponse(env, "success", map[string]any{"echo": string(env.Payload)})
					if _, err := bs.Send(ctx, resp); err != nil && ctx.Err() == nil {
						t.Errorf("respond: %v", err)
					}
				}
				if _, err := bs.Ack(ctx, d); err != nil && ctx.Err() == nil {
					t.Errorf("ack: %v", err)
				}
			}
		}()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := as.Request(rctx, b.ID, "status.query", map[string]any{"q": 1})
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		var p struct {
			Status string         `json:"status"`
			Result map[string]any `json:"result"`
		}
		json.Unmarshal(resp.Payload, &p)
		if resp.Type != "response" || p.Status != "success" || !strings.Contains(p.Result["echo"].(string), "status.query") {
			t.Fatalf("response %+v", resp)
		}
		// The trace shows both messages sent, delivered and processed (the
		// SDK acks the response for the caller, asynchronously).
		var got string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			rows, err := h.Admin.Trace(ctx, resp.TraceID)
			if err != nil {
				t.Fatal(err)
			}
			perMsg := map[string][]string{}
			var order []string
			for _, r := range rows.Rows {
				if perMsg[r.MsgID] == nil {
					order = append(order, r.MsgID)
				}
				perMsg[r.MsgID] = append(perMsg[r.MsgID], r.Status)
			}
			got = ""
			for _, m := range order {
				got += strings.Join(perMsg[m], ",") + ";"
			}
			if got == "sent,delivered,processed;sent,delivered,processed;" {
				break
			}
		}
		if got != "sent,delivered,processed;sent,delivered,processed;" {
			t.Fatalf("trace %s", got)
		}
		_ = a
	})
}

// Malformed frames get an error frame and the connection stays usable.
func TestMalformedFramesKeepConnection(t *testing.T) {
	h := apptest.Start(t, "")
	ctx := ctxT(t)
	a, _ := h.NewAgent("A")
	ws, _, err := websocket.Dial(ctx, client.WebSocketURL(h.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	write := func(s string) {
		if err := ws.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() map[string]any {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}
	write(`{"type":"auth","agentId":"` + a.ID + `","credential":{"type":"agent_token","token":"` + a.Token + `"},"bridgeProtocol":"switchboard.v1"}`)
	if m := read(); m["event"] != "auth.ok" {
		t.Fatalf("auth: %v", m)
	}
	cases := []struct{ frame, code string }{
		{`{not json`, "invalid_json"},
		{`{"type":"teleport","ref":"r1"}`, "unknown_frame_type"},
		{`{"type":"ack","deliveryId":"dlv_nope","ref":"r2"}`, "delivery_not_found"},
		{`{"type":"send","ref":"r3"}`, "invalid_envelope"},
		{`{"type":"send","ref":"r4","envelope":{"to":{"agent":"agt_x"},"type":"request","payload":{}}}`, "validation_failed"},
		{`{"type":"send","ref":"r5","envelope":{"from":{"agent":"agt_someone_else"},"to":{"agent":"` + a.ID + `"},"type":"notification","payload":{"event":"x"}}}`, "not_your_agent"},
	}
	for _, c := range cases {
		write(c.frame)
		m := read()
		data, _ := m["data"].(map[string]any)
		if m["event"] != "error" || data["code"] != c.code {
			t.Fatalf("frame %s: got %v, want error %s", c.frame, m, c.code)
		}
	}
	// Still usable: a valid send to itself is accepted and pushed back.
	write(`{"type":"send","ref":"ok1","envelope":{"to":{"agent":"` + a.ID + `"},"type":"notification","payload":{"event":"ping"}}}`)
	got := map[string]bool{}
	for i := 0; i < 2; i++ {
		m := read()
		got[m["event"].(string)] = true
	}
	if !got["ok"] || !got["delivery"] {
		t.Fatalf("after errors: %v", got)
	}
}

func TestAuthRefusals(t *testing.T) {
	h := apptest.Start(t, "")
	ctx := ctxT(t)
	a, _ := h.NewAgent("A")
	b, _ := h.NewAgent("B")
	cases := []struct{ frame, code string }{
		{`{"type":"hello"}`, "invalid_auth_frame"},
		{`{"type":"auth","credential":{"type":"agent_token","token":"sbt_wrong"}}`, "unauthorized"},
		{`{"type":"auth","agentId":"` + b.ID + `","credential":{"type":"agent_token","token":"` + a.Token + `"}}`, "unauthorized"},
		{`{"type":"auth","credential":{"type":"agent_token","token":"` + a.Token + `"},"bridgeProtocol":"carrier.pigeon"}`, "unsupported_protocol"},
	}
	for _, c := range cases {
		ws, _, err := websocket.Dial(ctx, client.WebSocketURL(h.URL), nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.Write(ctx, websocket.MessageText, []byte(c.frame))
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("%s: %v", c.code, err)
		}
		var m struct {
			Event string                `json:"event"`
			Data  struct{ Code string } `json:"data"`
		}
		json.Unmarshal(data, &m)
		if m.Event != "error" || m.Data.Code != c.code {
			t.Fatalf("frame %s: %s", c.frame, data)
		}
		_, _, err = ws.Read(ctx)
		if websocket.CloseStatus(err) != 4003 {
			t.Fatalf("%s: close %v", c.code, err)
		}
	}
	// The SDK reports a refusal at once instead of retrying forever.
	if _, err := h.Client("sbt_wrong").Connect(ctx, client.ConnectOptions{}); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("sdk connect with bad token: %v", err)
	}
}

// A newer connection for the same agent and session replaces the older,
// which is closed with 4001; the SDK would reconnect, so use raw sockets.
func TestDuplicateConnectionReplaced(t *testing.T) {
	h := apptest.Start(t, "")
	ctx := ctxT(t)
	a, _ := h.NewAgent("A")
	dial := func() *websocket.Conn {
		ws, _, err := websocket.Dial(ctx, client.WebSocketURL(h.URL), nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.Write(ctx, websocket.MessageText, []byte(`{"type":"auth","credential":{"type":"agent_token","token":"`+a.Token+`"},"sessionKey":"main"}`))
		if _, _, err := ws.Read(ctx); err != nil {
			t.Fatal(err)
		}
		return ws
	}
	old := dial()
	dial()
	_, _, err := old.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4001 || ce.Reason != "duplicate_connection_replaced" {
		t.Fatalf("old connection: %v", err)
	}
}

// A silent connection is closed with 4002 after three heartbeat intervals;
// one that heartbeats beside it stays open.
func TestStaleConnectionClosed(t *testing.T) {
	h := apptest.Start(t, "", func(c *app.Config) { c.Bus.HeartbeatInterval = time.Second })
	ctx := ctxT(t)
	dial := func(name string) *websocket.Conn {
		a, _ := h.NewAgent(name)
		ws, _, err := websocket.Dial(ctx, client.WebSocketURL(h.URL), nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.Write(ctx, websocket.MessageText, []byte(`{"type":"auth","credential":{"type":"agent_token","token":"`+a.Token+`"}}`))
		if _, _, err := ws.Read(ctx); err != nil {
			t.Fatal(err)
		}
		return ws
	}
	silent, talking := dial("Silent"), dial("Talking")
	readErr := make(chan error, 1)
	go func() {
		_, _, err := talking.Read(ctx)
		readErr <- err
	}()
	beat := time.NewTicker(300 * time.Millisecond)
	defer beat.Stop()
	go func() {
		for range beat.C {
			if talking.Write(ctx, websocket.MessageText, []byte(`{"type":"heartbeat"}`)) != nil {
				return
			}
		}
	}()
	start := time.Now()
	_, _, err := silent.Read(ctx) // send nothing: the hub gives up after three intervals
	if websocket.CloseStatus(err) != 4002 {
		t.Fatalf("want 4002 stale_connection, got %v", err)
	}
	if d := time.Since(start); d < 3*time.Second || d > 6*time.Second {
		t.Fatalf("closed after %s, want three to four heartbeat intervals", d)
	}
	select {
	case err := <-readErr:
		t.Fatalf("the heartbeating connection ended: %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
}

// A client may send its auth frame right behind the upgrade request,
// before it reads the 101: the frame is not lost when the hub swaps the
// connection's buffers.
func TestAuthFrameBehindHandshake(t *testing.T) {
	h := apptest.Start(t, "")
	a, _ := h.NewAgent("Eager")
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	auth := []byte(`{"type":"auth","credential":{"type":"agent_token","token":"` + a.Token + `"}}`)
	key := [4]byte{1, 2, 3, 4}
	frame := []byte{0x81, 0x80 | 126, byte(len(auth) >> 8), byte(len(auth))}
	frame = append(frame, key[:]...)
	for i, c := range auth {
		frame = append(frame, c^key[i%4])
	}
	req := "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := conn.Write(append([]byte(req), frame...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:2]); err != nil {
		t.Fatal(err)
	}
	n := int(hdr[1] & 0x7f)
	if n == 126 {
		io.ReadFull(br, hdr[2:4])
		n = int(hdr[2])<<8 | int(hdr[3])
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(br, payload); err != nil {
		t.Fatal(err)
	}
	if hdr[0] != 0x81 || !strings.Contains(string(payload), `"event":"auth.ok"`) {
		t.Fatalf("first frame %x %s", hdr[0], payload)
	}
}

// Two nodes share one PostgreSQL database: an agent connected to node A
// receives what node B accepted, pushed without polling.
func TestCrossNodeDelivery(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		if !strings.HasPrefix(dsn, "postgres") {
			t.Skip("several nodes need PostgreSQL")
		}
		nodeA := apptest.Start(t, dsn)
		nodeB := apptest.Start(t, dsn)
		ctx := ctxT(t)
		_, sc := nodeA.NewAgent("Sender")
		r, _ := nodeA.NewAgent("Receiver")
		rs := connect(t, nodeA.Client(r.Token), client.ConnectOptions{})
		sender := nodeB.Client(sc.Token)
		if _, err := sender.Send(ctx, client.NewNotification(r.ID, "hello", "from node B")); err != nil {
			t.Fatal(err)
		}
		d, err := rs.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		env, _ := d.Decode()
		if env.To.Agent != r.ID {
			t.Fatalf("delivery %+v", env)
		}
		if _, err := rs.Ack(ctx, d); err != nil {
			t.Fatal(err)
		}
	})
}

// The SDK reconnects after the hub drops it and keeps receiving.
func TestSocketReconnects(t *testing.T) {
	h := apptest.Start(t, "")
	ctx := ctxT(t)
	a, ac := h.NewAgent("A")
	s := connect(t, ac, client.ConnectOptions{})
	// A second raw connection for the same agent+session replaces the SDK's
	// socket; the SDK reconnects (replacing the raw one in turn).
	ws, _, err := websocket.Dial(ctx, client.WebSocketURL(h.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.Write(ctx, websocket.MessageText, []byte(`{"type":"auth","credential":{"type":"agent_token","token":"`+a.Token+`"}}`))
	ws.Read(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for s.Connections() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if s.Connections() < 2 {
		t.Fatal("SDK did not reconnect")
	}
	if _, err := h.Admin.Send(ctx, &client.Envelope{From: client.Address{Agent: a.ID}, To: client.Address{Agent: a.ID}, Type: "notification", Payload: json.RawMessage(`{"event":"after"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receive(ctx); err != nil {
		t.Fatal(err)
	}
}

// Bad frames on a live socket — malformed JSON, settling another agent's
// delivery, out-of-range values, refused sends — each get an error frame
// carrying the frame's ref, change nothing on the bus, and leave the
// connection usable.
func TestBadFramesChangeNothing(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxT(t)
		c1, _ := h.NewAgent("C1")
		p1, pc := h.NewAgent("P1", client.CreateAgentParams{ParentID: c1.ID})
		w1, _ := h.NewAgent("W1", client.CreateAgentParams{ParentID: p1.ID})
		w2, w2c := h.NewAgent("W2", client.CreateAgentParams{ParentID: p1.ID})
		for _, to := range []string{w1.ID, w2.ID} {
			if _, err := pc.Send(ctx, client.NewNotification(to, "task", "do it")); err != nil {
				t.Fatal(err)
			}
		}
		theirs, err := w2c.Inbox(ctx, client.InboxOptions{Lease: 30 * time.Minute})
		if err != nil || len(theirs) != 1 {
			t.Fatalf("W2 claim %v %v", theirs, err)
		}

		ws, _, err := websocket.Dial(ctx, client.WebSocketURL(h.URL), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		write := func(s string) {
			t.Helper()
			if err := ws.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		type frame struct {
			Event string         `json:"event"`
			Data  map[string]any `json:"data"`
		}
		read := func() frame {
			t.Helper()
			_, b, err := ws.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var f frame
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatalf("frame %s: %v", b, err)
			}
			return f
		}
		write(`{"type":"auth","credential":{"type":"agent_token","token":"` + w1.Token + `"},"bridgeProtocol":"switchboard.v1"}`)
		if f := read(); f.Event != "auth.ok" {
			t.Fatalf("auth: %+v", f)
		}
		pushed := read()
		mine, _ := pushed.Data["deliveryId"].(string)
		if pushed.Event != "delivery" || mine == "" {
			t.Fatalf("expected W1's delivery, got %+v", pushed)
		}
		// A repeated id over the socket is a duplicate, not a second message.
		for i, want := range []bool{false, true} {
			write(fmt.Sprintf(`{"type":"send","ref":"dup%d","envelope":{"id":"w1-dup","to":{"agent":%q},"type":"notification","payload":{"event":"x"}}}`, i, p1.ID))
			f := read()
			if f.Event != "ok" || f.Data["ref"] != fmt.Sprintf("dup%d", i) || (f.Data["duplicate"] == true) != want {
				t.Fatalf("send %d: %+v", i, f)
			}
		}

		send := func(envelope string) string { return `{"type":"send","ref":"s","envelope":` + envelope + `}` }
		note := func(to string, extra string) string {
			return `{"to":{"agent":"` + to + `"},"type":"notification","payload":{"event":"x"}` + extra + `}`
		}
		cases := []struct{ name, frame, ref, code string }{
			{"not json", `{not json`, "", "invalid_json"},
			{"json array", `[1,2]`, "", "invalid_json"},
			{"wrong field type keeps the ref", `{"type":"ack","ref":"r1","attempt":"one"}`, "r1", "invalid_json"},
			{"unknown frame type", `{"type":"teleport","ref":"r2"}`, "r2", "unknown_frame_type"},
			{"ack of someone else's delivery", `{"type":"ack","ref":"r3","deliveryId":"` + theirs[0].DeliveryID + `"}`, "r3", "not_your_delivery"},
			{"nack of someone else's delivery", `{"type":"nack","ref":"r4","deliveryId":"` + theirs[0].DeliveryID + `"}`, "r4", "not_your_delivery"},
			{"extend of someone else's delivery", `{"type":"extend","ref":"r5","deliveryId":"` + theirs[0].DeliveryID + `","seconds":60}`, "r5", "not_your_delivery"},
			{"ack of an unknown delivery", `{"type":"ack","ref":"r6","deliveryId":"dlv_nope"}`, "r6", "delivery_not_found"},
			{"ack with a negative attempt", `{"type":"ack","ref":"r7","deliveryId":"` + mine + `","attempt":-1}`, "r7", "invalid_attempt"},
			{"ack with a stale attempt", `{"type":"ack","ref":"r8","deliveryId":"` + mine + `","attempt":9}`, "r8", "stale_attempt"},
			{"nack with a negative delay", `{"type":"nack","ref":"r9","deliveryId":"` + mine + `","delay":-1}`, "r9", "invalid_delay"},
			{"nack delayed over a day", `{"type":"nack","ref":"r10","deliveryId":"` + mine + `","delay":86401}`, "r10", "invalid_delay"},
			{"extend by zero", `{"type":"extend","ref":"r11","deliveryId":"` + mine + `","seconds":0}`, "r11", "invalid_seconds"},
			{"extend over an hour", `{"type":"extend","ref":"r12","deliveryId":"` + mine + `","seconds":3601}`, "r12", "invalid_seconds"},
			{"send without envelope", `{"type":"send","ref":"s"}`, "s", "invalid_envelope"},
			{"send a null envelope", `{"type":"send","ref":"s","envelope":null}`, "s", "invalid_envelope"},
			{"send on a forbidden route", send(note(c1.ID, "")), "s", "forbidden_route"},
			{"send to another worker", send(note(w2.ID, "")), "s", "forbidden_route"},
			{"send to an unknown agent", send(note("agt_nobody", "")), "s", "unknown_recipient"},
			{"send as another agent", send(`{"from":{"agent":"` + p1.ID + `"},"to":{"agent":"` + w2.ID + `"},"type":"notification","payload":{"event":"x"}}`), "s", "not_your_agent"},
			{"send an expired envelope", send(note(p1.ID, `,"timestamp":"2020-01-01T00:00:00Z","ttl":60`)), "s", "message_expired"},
			{"send a response to an unknown request", send(`{"to":{"agent":"` + p1.ID + `"},"type":"response","payload":{"requestId":"never","status":"success"}}`), "s", "unknown_request"},
			{"send with a misspelled field", send(note(p1.ID, `,"prority":"high"`)), "s", "unknown_field"},
			{"send an oversize payload", send(`{"to":{"agent":"` + p1.ID + `"},"type":"notification","payload":{"event":"x","pad":"` + strings.Repeat("p", protocol.MaxPayloadBytes) + `"}}`), "s", "validation_failed"},
			{"send to an offline session, fail fast", send(`{"to":{"agent":"` + p1.ID + `","session":"live","ifOffline":"fail"},"type":"notification","payload":{"event":"x"}}`), "s", "session_offline"},
		}
		for _, c := range cases {
			before := h.BusSnapshot()
			write(c.frame)
			f := read()
			if f.Event != "error" || f.Data["code"] != c.code || f.Data["ref"] != nilIfEmpty(c.ref) {
				t.Errorf("%s: got %+v, want error %s with ref %q", c.name, f, c.code, c.ref)
			}
			if m, _ := f.Data["message"].(string); m == "" || f.Data["class"] == nil {
				t.Errorf("%s: error frame without message or class: %+v", c.name, f)
			}
			if after := h.BusSnapshot(); after != before {
				t.Errorf("%s changed the bus:\n%s\n%s", c.name, before, after)
			}
		}
		// Still usable: W1 acks its delivery on the same connection, and W2's
		// lease survived every attempt to settle it from here.
		write(`{"type":"ack","ref":"done","deliveryId":"` + mine + `","attempt":1}`)
		if f := read(); f.Event != "ok" || f.Data["ref"] != "done" || f.Data["state"] != "acked" {
			t.Fatalf("ack after bad frames: %+v", f)
		}
		if s, err := w2c.Ack(ctx, theirs[0].DeliveryID, theirs[0].Attempt); err != nil || s.State != "acked" || s.AlreadyApplied {
			t.Fatalf("W2's ack: %+v %v", s, err)
		}
	})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// A socket takes deliveries as they commit while it has room; what arrives
// while it is full waits, and goes out oldest first, before anything sent
// after it.
func TestFullSocketKeepsOrder(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxT(t)
		_, ac := h.NewAgent("Sender")
		b, bc := h.NewAgent("Receiver")
		bs := connect(t, bc, client.ConnectOptions{Prefetch: 1})
		send := func(i int) {
			t.Helper()
			if _, err := ac.Send(ctx, client.NewNotification(b.ID, "n", fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		next := func() (client.Delivery, string) {
			t.Helper()
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			d, err := bs.Receive(rctx)
			if err != nil {
				t.Fatal(err)
			}
			en, _ := d.Decode()
			var p struct{ Message string }
			json.Unmarshal(en.Payload, &p)
			return d, p.Message
		}
		send(1)
		d1, m := next()
		if m != "1" {
			t.Fatalf("first push %q", m)
		}
		send(2) // the socket is full (prefetch 1): 2 and 3 wait
		send(3)
		if _, err := bs.Ack(ctx, d1); err != nil {
			t.Fatal(err)
		}
		d2, m := next()
		if m != "2" {
			t.Fatalf("after the ack: %q, want 2", m)
		}
		send(4) // 3 still waits: 4 must not overtake it
		if _, err := bs.Ack(ctx, d2); err != nil {
			t.Fatal(err)
		}
		d3, m := next()
		if m != "3" {
			t.Fatalf("after the second ack: %q, want 3", m)
		}
		bs.Ack(ctx, d3)
		d4, m := next()
		if m != "4" {
			t.Fatalf("last: %q, want 4", m)
		}
		bs.Ack(ctx, d4)
		send(5) // nothing waits: taken as it commits
		if _, m := next(); m != "5" {
			t.Fatalf("after the backlog: %q", m)
		}
	})
}
