package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

func TestScriptedConversation(t *testing.T) {
	h := newFakeHub(t)
	drv, err := NewScript(ScriptSpec{Kickoff: "Hi Mira!", Replies: []string{"Sunday works [[like]]", "See you [[request_conversation_end]]"}})
	if err != nil {
		t.Fatal(err)
	}
	startRunner(t, h, drv)
	h.waitAuths(1)

	steps := []struct {
		d          map[string]any
		kind, text string
		reason     string
	}{
		{mkDelivery("dlv_1", "conversation:agt_runner:agt_peer", DeliveryKickoff, "New conversation with Mira: write your opener now.",
			withContext("# Background\n\n## Conversation Facts\n\n- Mode: `direct`\n\n# Task Instruction\n\nWrite one opener."),
			withCommand("Write one opener.")), "reply", "Hi Mira!", ""},
		{mkDelivery("dlv_2", "conversation:agt_runner:agt_peer", DeliveryReply, "Hey! Sunday?"), "reply", "Sunday works [[like]]", ""},
		{mkDelivery("dlv_3", "conversation:agt_runner:agt_peer", DeliveryReply, "Great"), "reply", "See you [[request_conversation_end]]", ""},
		{mkDelivery("dlv_4", "conversation:agt_runner:agt_peer", DeliveryReply, "Bye [[request_conversation_end]]"), "kept_silent", "", ReasonNoReply},
	}
	for _, s := range steps {
		h.deliver(s.d)
		id := s.d["deliveryId"].(string)
		got := h.waitAnswered(id)
		if got.kind != s.kind || got.text != s.text || got.reason != s.reason || got.via != "socket" || got.source != DefaultSource {
			t.Errorf("%s: got %+v, want %s %q %q via socket from %s", id, got, s.kind, s.text, s.reason, DefaultSource)
		}
	}
	h.checkClean()
	h.checkAcceptedFirst()
}

func TestNoReplyAndReplyNotAllowed(t *testing.T) {
	tests := []struct {
		name       string
		answer     string
		opts       []dopt
		wantReason string
		wantCalls  int
	}{
		{"exact NO_REPLY", "NO_REPLY", nil, ReasonNoReply, 1},
		{"NO_REPLY with whitespace", "  NO_REPLY\n", nil, ReasonNoReply, 1},
		{"quoted NO_REPLY is a reply", `"NO_REPLY"`, nil, "", 1},
		{"allowReply false skips the driver", "would reply", []dopt{noReplyAllowed}, ReasonReplyNotAllowed, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHub(t)
			g := newGate(func(Delivery) (string, error) { return tc.answer, nil })
			startRunner(t, h, g)
			h.waitAuths(1)
			h.deliver(mkDelivery("dlv_1", "conversation:a:b", DeliveryReply, "hello", tc.opts...))
			got := h.waitAnswered("dlv_1")
			if tc.wantReason != "" {
				if got.kind != "kept_silent" || got.reason != tc.wantReason {
					t.Errorf("got %+v, want kept_silent %s", got, tc.wantReason)
				}
			} else if got.kind != "reply" || got.text != strings.TrimSpace(tc.answer) {
				t.Errorf("got %+v, want reply %q", got, tc.answer)
			}
			if n := g.callsOf("dlv_1"); n != tc.wantCalls {
				t.Errorf("driver called %d times, want %d", n, tc.wantCalls)
			}
			h.checkClean()
			h.checkAcceptedFirst()
		})
	}
}

func TestSessionsSerializedInOrderAndConcurrentAcross(t *testing.T) {
	h := newFakeHub(t)
	g := newGate(echo)
	g.block("a1")
	startRunner(t, h, g, func(c *Config) { c.Concurrency = 2 })
	h.waitAuths(1)
	for _, id := range []string{"a1", "a2", "a3"} {
		h.deliver(mkDelivery(id, "conversation:x:a", DeliveryReply, id))
	}
	h.deliver(mkDelivery("b1", "conversation:x:b", DeliveryReply, "b1"))

	// b1 is answered while a1 is still with the driver; a2 and a3 wait.
	g.waitEntered(t, "a1")
	h.waitAnswered("b1")
	if n := len(h.answersOf("a2")) + g.callsOf("a2"); n != 0 {
		t.Fatalf("a2 started before a1 was answered")
	}
	g.release("a1")
	h.waitAnswered("a3")

	var order []string
	for _, id := range g.calledOrder() {
		if strings.HasPrefix(id, "a") {
			order = append(order, id)
		}
	}
	if !slices.Equal(order, []string{"a1", "a2", "a3"}) {
		t.Errorf("session a driven in order %v", order)
	}
	h.mu.Lock()
	var replies []string
	for _, f := range h.frames {
		if id, _ := f["deliveryId"].(string); f["type"] == "reply" && strings.HasPrefix(id, "a") {
			replies = append(replies, id)
		}
	}
	h.mu.Unlock()
	if !slices.Equal(replies, []string{"a1", "a2", "a3"}) {
		t.Errorf("session a answered in order %v", replies)
	}
	h.checkClean()
	h.checkAcceptedFirst()
}

func TestReconnectRedeliveryIsAnsweredOnce(t *testing.T) {
	h := newFakeHub(t)
	g := newGate(echo)
	g.block("dlv_1")
	r := startRunner(t, h, g)
	h.waitAuths(1)
	h.deliver(mkDelivery("dlv_1", "conversation:a:b", DeliveryReply, "hello"))
	g.waitEntered(t, "dlv_1")

	h.closeConn(0, "") // the network drops
	h.waitAuths(2)     // the runner is back; the hub pushed dlv_1 again
	r.ev.wait(t, EventDuplicate, "dlv_1")
	g.release("dlv_1")

	got := h.waitAnswered("dlv_1")
	if got.text != "re: hello" {
		t.Errorf("answer %+v", got)
	}
	if n := g.callsOf("dlv_1"); n != 1 {
		t.Errorf("driver called %d times, want once", n)
	}
	if n := len(h.answersOf("dlv_1")); n != 1 {
		t.Errorf("hub recorded %d answers, want 1", n)
	}
	h.checkClean()
}

func TestRedeliveryAfterAnswerReusesAnswer(t *testing.T) {
	h := newFakeHub(t)
	drv, _ := NewScript(ScriptSpec{Replies: []string{"first", "second"}})
	r := startRunner(t, h, drv)
	h.waitAuths(1)
	d1 := mkDelivery("dlv_1", "conversation:a:b", DeliveryReply, "hello")
	h.deliver(d1)
	r.ev.wait(t, EventAnswered, "dlv_1")

	// The hub pushes dlv_1 again (as a hub racing a reconnect may); the
	// runner resends the same answer without advancing the script, and
	// the refusal counts as done.
	h.push("delivery", d1)
	ev := r.ev.wait(t, EventAlreadyAnswered, "dlv_1")
	if ev.Via != "socket" {
		t.Errorf("already-answered via %q", ev.Via)
	}
	h.deliver(mkDelivery("dlv_2", "conversation:a:b", DeliveryReply, "again"))
	if got := h.waitAnswered("dlv_2"); got.text != "second" {
		t.Errorf("dlv_2 answered %q, want the script's second reply", got.text)
	}
	if n := len(h.answersOf("dlv_1")); n != 1 {
		t.Errorf("hub recorded %d answers for dlv_1", n)
	}
	h.mu.Lock()
	resent := 0
	for _, f := range h.frames {
		if f["deliveryId"] == "dlv_1" && f["type"] == "reply" {
			resent++
			if f["payload"].(map[string]any)["text"] != "first" {
				t.Errorf("resent answer %v", f["payload"])
			}
		}
	}
	h.mu.Unlock()
	if resent != 2 {
		t.Errorf("dlv_1 reply frames: %d, want 2 (answer, then the same answer again)", resent)
	}
	h.checkClean()
	h.checkAcceptedFirst()
}

func TestAlreadyAnsweredRefusalIsDone(t *testing.T) {
	h := newFakeHub(t)
	g := newGate(echo)
	r := startRunner(t, h, g)
	h.waitAuths(1)
	// The hub pushes a delivery an earlier runner already answered.
	d1 := mkDelivery("dlv_1", "conversation:a:b", DeliveryReply, "hello")
	h.store(d1)
	h.markAnswered("dlv_1")
	h.push("delivery", d1)
	r.ev.wait(t, EventAlreadyAnswered, "dlv_1")

	h.deliver(mkDelivery("dlv_2", "conversation:a:b", DeliveryReply, "next"))
	if got := h.waitAnswered("dlv_2"); got.text != "re: next" {
		t.Errorf("dlv_2: %+v", got)
	}
	if n := r.ev.count(EventRefused, ""); n != 0 {
		t.Errorf("%d refusals reported", n)
	}
	if n := len(h.answersOf("dlv_1")); n != 1 {
		t.Errorf("dlv_1 has %d answers", n)
	}
}

func TestHTTPFallbackWhenSocketBreaks(t *testing.T) {
	for _, tc := range []struct{ answer, kind, reason string }{
		{"the reply", "reply", ""},
		{"NO_REPLY", "kept_silent", ReasonNoReply},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			h := newFakeHub(t)
			g := newGate(func(Delivery) (string, error) { return tc.answer, nil })
			g.block("dlv_1")
			r := startRunner(t, h, g)
			h.waitAuths(1)
			h.deliver(mkDelivery("dlv_1", "conversation:a:b", DeliveryReply, "hello"))
			g.waitEntered(t, "dlv_1")

			h.set(func() { h.refuseWS = true })
			h.closeConn(websocket.StatusGoingAway, "restart")
			r.ev.wait(t, EventDisconnected, "")
			g.release("dlv_1")

			got := h.waitAnswered("dlv_1")
			want := fakeAnswer{kind: tc.kind, reason: tc.reason, source: DefaultSource, via: "http", from: "agt_runner"}
			if tc.reason == "" {
				want.text = tc.answer
			}
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
			if ev := r.ev.wait(t, EventAnswered, "dlv_1"); ev.Via != "http" {
				t.Errorf("answered via %q", ev.Via)
			}
			h.set(func() { h.refuseWS = false })
			h.waitAuths(2)
			h.checkClean()
		})
	}
}

func TestAnswerRetriedWhileHubUnreachable(t *testing.T) {
	h := newFakeHub(t)
	g := newGate(echo)
	g.block("dlv_1")
	r := startRunner(t, h, g)
	h.waitAuths(1)
	h.deliver(mkDelivery("dlv_1", "conversation:a:b", DeliveryReply, "hello"))
	g.waitEntered(t, "dlv_1")

	h.set(func() { h.refuseWS, h.httpDown = true, true })
	h.closeConn(0, "")
	r.ev.wait(t, EventDisconnected, "")
	g.release("dlv_1")
	// Both paths are down: the runner keeps the answer and retries.
	h.waitUntil("refused socket and HTTP attempts", func() bool { return h.attempts >= 3 && h.httpCalls >= 2 })
	if n := len(h.answersOf("dlv_1")); n != 0 {
		t.Fatalf("answered while the hub was down")
	}
	h.set(func() { h.refuseWS, h.httpDown = false, false })
	got := h.waitAnswered("dlv_1")
	if got.text != "re: hello" || g.callsOf("dlv_1") != 1 {
		t.Errorf("got %+v after %d driver calls", got, g.callsOf("dlv_1"))
	}
	h.checkClean()
}

func TestAuthRefusalIsFinal(t *testing.T) {
	h := newFakeHub(t)
	r := startRunner(t, h, newGate(echo), func(c *Config) { c.Token = "tok_wrong" })
	err := r.result(t)
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("Run returned %v, want ErrUnauthorized naming the hub's code", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.attempts != 1 {
		t.Errorf("%d connection attempts, want exactly 1", h.attempts)
	}
}

func TestWrongAgentIDRefused(t *testing.T) {
	h := newFakeHub(t)
	r := startRunner(t, h, newGate(echo), func(c *Config) { c.AgentID = "agt_other" })
	if err := r.result(t); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Run returned %v", err)
	}
}

func TestReplacedConnection(t *testing.T) {
	t.Run("stops without takeover", func(t *testing.T) {
		h := newFakeHub(t)
		r := startRunner(t, h, newGate(echo))
		h.waitAuths(1)
		h.closeConn(4001, "duplicate_connection_replaced")
		if err := r.result(t); !errors.Is(err, ErrReplaced) {
			t.Fatalf("Run returned %v, want ErrReplaced", err)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.attempts != 1 {
			t.Errorf("%d connection attempts after being replaced, want 1", h.attempts)
		}
	})
	t.Run("reconnects with takeover", func(t *testing.T) {
		h := newFakeHub(t)
		r := startRunner(t, h, newGate(echo), func(c *Config) { c.Takeover = true })
		h.waitAuths(1)
		h.closeConn(4001, "duplicate_connection_replaced")
		h.waitAuths(2)
		h.deliver(mkDelivery("dlv_1", "conversation:a:b", DeliveryReply, "still here?"))
		h.waitAnswered("dlv_1")
		if err := r.stop(t); err != nil {
			t.Errorf("Run returned %v after a clean stop", err)
		}
	})
}

func TestStaleCloseReconnects(t *testing.T) {
	h := newFakeHub(t)
	startRunner(t, h, newGate(echo))
	h.waitAuths(1)
	h.closeConn(4002, "stale_connection")
	h.waitAuths(2)
	h.waitUntil("heartbeats", func() bool { return h.heartbeats > 0 })
}

func TestDriverFailureLeavesDeliveryUnanswered(t *testing.T) {
	h := newFakeHub(t)
	g := newGate(func(d Delivery) (string, error) {
		switch d.Payload.Text {
		case "fail":
			return "", errBoom
		case "empty":
			return "  \n", nil
		case "panic":
			panic("driver bug")
		}
		return "ok", nil
	})
	r := startRunner(t, h, g)
	h.waitAuths(1)
	for _, id := range []string{"fail", "empty", "panic", "ok"} {
		h.deliver(mkDelivery("dlv_"+id, "conversation:a:b", DeliveryReply, id))
	}
	h.waitAnswered("dlv_ok")
	for _, id := range []string{"dlv_fail", "dlv_empty", "dlv_panic"} {
		if a := h.answersOf(id); len(a) != 0 {
			t.Errorf("%s answered %+v; a failed driver call must leave it unanswered", id, a)
		}
		if ev := r.ev.wait(t, EventDriverFailed, id); ev.Err == nil {
			t.Errorf("%s: no error reported", id)
		}
		h.mu.Lock()
		if st := h.deliveries[id].status; st != "accepted" {
			t.Errorf("%s status %s, want accepted", id, st)
		}
		h.mu.Unlock()
	}
	// The hub redelivers a failed turn later; the driver runs again.
	h.closeConn(0, "")
	h.waitAuths(2)
	g.waitEntered(t, "dlv_fail")
	h.waitUntil("dlv_fail retried", func() bool { return g.callsOf("dlv_fail") == 2 })
	h.checkClean()
}

func TestNotificationsAreLoggedAndIgnored(t *testing.T) {
	h := newFakeHub(t)
	r := startRunner(t, h, newGate(echo))
	h.waitAuths(1)
	h.push("conversation_ended", map[string]any{"notificationId": "ntf_1", "notificationType": "conversation_ended",
		"title": "Conversation ended", "body": "Both sides ended it.", "targetAgentId": "agt_runner",
		"targetSessionKey": "management:agt_runner", "relatedObjects": map[string]any{}})
	ev := r.ev.wait(t, EventNotification, "")
	if ev.Name != "conversation_ended" || ev.Text != "Conversation ended" || ev.SessionKey != "management:agt_runner" {
		t.Errorf("notification event %+v", ev)
	}
	h.deliver(mkDelivery("dlv_1", "conversation:a:b", DeliveryReply, "hi"))
	h.waitAnswered("dlv_1")
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.frames {
		if f["deliveryId"] == "ntf_1" {
			t.Errorf("runner answered a notification: %v", f)
		}
	}
}

func TestMalformedDeliveryIgnored(t *testing.T) {
	h := newFakeHub(t)
	g := newGate(echo)
	startRunner(t, h, g)
	h.waitAuths(1)
	h.push("delivery", map[string]any{"deliveryId": "", "sessionKey": "s", "payload": map[string]any{"text": "x"}})
	h.push("delivery", map[string]any{"deliveryId": "dlv_x", "sessionKey": "s", "payload": map[string]any{}})
	h.push("delivery", "not an object")
	h.deliver(mkDelivery("dlv_1", "conversation:a:b", DeliveryReply, "hi"))
	h.waitAnswered("dlv_1")
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.calls) != 1 {
		t.Errorf("driver called for %v; malformed deliveries must be ignored", g.calls)
	}
}

func TestShutdownCancelsDriverAndStopsCleanly(t *testing.T) {
	h := newFakeHub(t)
	g := newGate(echo)
	g.block("dlv_1")
	r := startRunner(t, h, g)
	h.waitAuths(1)
	h.deliver(mkDelivery("dlv_1", "conversation:a:b", DeliveryReply, "hello"))
	g.waitEntered(t, "dlv_1")
	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v on cancel", err)
	}
	if a := h.answersOf("dlv_1"); len(a) != 0 {
		t.Errorf("answered %+v after the driver was cancelled", a)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Token: "t", Driver: DriverFunc(nil)}, "http:// or https://"},
		{Config{Server: "ws://x", Token: "t", Driver: DriverFunc(nil)}, "http:// or https://"},
		{Config{Server: "http://x", Driver: DriverFunc(nil)}, "token is required"},
		{Config{Server: "http://x", Token: "t"}, "driver is required"},
	} {
		err := Run(context.Background(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}
