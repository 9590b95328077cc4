package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/relay"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// ---- a strict Claworld-dialect test client ----------------------------------------------

type frame struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

type delivery struct {
	EventType       string `json:"eventType"`
	DeliveryID      string `json:"deliveryId"`
	SessionKey      string `json:"sessionKey"`
	TargetAgentID   string `json:"targetAgentId"`
	ChatRequestID   string `json:"chatRequestId"`
	ConversationKey string `json:"conversationKey"`
	WorldID         string `json:"worldId"`
	CreatedAt       string `json:"createdAt"`
	Payload         struct {
		Text             string   `json:"text"`
		ContextText      string   `json:"contextText"`
		CommandText      string   `json:"commandText"`
		UntrustedContext []string `json:"untrustedContext"`
	} `json:"payload"`
	Metadata struct {
		FromAgentID         string `json:"fromAgentId"`
		FromAgentCode       string `json:"fromAgentCode"`
		FromDisplayIdentity string `json:"fromDisplayIdentity"`
		AllowReply          bool   `json:"allowReply"`
		AcceptanceRequired  bool   `json:"acceptanceRequired"`
		DeliveryType        string `json:"deliveryType"`
		ReportSource        string `json:"reportSource"`
	} `json:"metadata"`
}

type notice struct {
	NotificationID   string         `json:"notificationId"`
	NotificationType string         `json:"notificationType"`
	Title            string         `json:"title"`
	Body             string         `json:"body"`
	TargetAgentID    string         `json:"targetAgentId"`
	TargetSessionKey string         `json:"targetSessionKey"`
	RelatedObjects   map[string]any `json:"relatedObjects"`
}

type cwClient struct {
	t      *testing.T
	ws     *websocket.Conn
	ctx    context.Context
	mu     sync.Mutex
	frames []frame
	signal chan struct{}
}

func dialClaworld(t *testing.T, h *apptest.Hub, agentID, token string) *cwClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, client.WebSocketURL(h.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(4 << 20)
	c := &cwClient{t: t, ws: ws, ctx: ctx, signal: make(chan struct{}, 1)}
	c.send(map[string]any{"type": "auth", "agentId": agentID, "credential": map[string]any{"type": "agent_token", "token": token},
		"client": "test", "clientVersion": "0", "bridgeProtocol": relay.ClaworldProtocol})
	_, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var f frame
	json.Unmarshal(b, &f)
	if f.Event != "auth.ok" {
		t.Fatalf("auth: %s", b)
	}
	go func() {
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var f frame
			if json.Unmarshal(b, &f) != nil {
				continue
			}
			c.mu.Lock()
			c.frames = append(c.frames, f)
			c.mu.Unlock()
			select {
			case c.signal <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { ws.Close(websocket.StatusNormalClosure, "") })
	return c
}

func (c *cwClient) send(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if err := c.ws.Write(c.ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next waits for the first unconsumed frame matching event (and pred) and consumes it.
func (c *cwClient) next(event string, pred func(json.RawMessage) bool) json.RawMessage {
	c.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		for i, f := range c.frames {
			if f.Event == event && (pred == nil || pred(f.Data)) {
				c.frames = append(c.frames[:i], c.frames[i+1:]...)
				c.mu.Unlock()
				return f.Data
			}
		}
		c.mu.Unlock()
		select {
		case <-c.signal:
		case <-deadline:
			c.mu.Lock()
			var seen []string
			for _, f := range c.frames {
				seen = append(seen, f.Event+":"+string(f.Data)[:min(len(f.Data), 160)])
			}
			c.mu.Unlock()
			c.t.Fatalf("no %s frame; pending frames: %v", event, seen)
		}
	}
}

func (c *cwClient) delivery(deliveryType string) delivery {
	c.t.Helper()
	raw := c.next("delivery", func(b json.RawMessage) bool {
		var d delivery
		json.Unmarshal(b, &d)
		return d.Metadata.DeliveryType == deliveryType
	})
	var d delivery
	if err := json.Unmarshal(raw, &d); err != nil {
		c.t.Fatal(err)
	}
	if d.EventType != "delivery" || d.DeliveryID == "" || d.SessionKey == "" || d.CreatedAt == "" || d.Payload.Text == "" {
		c.t.Fatalf("delivery frame shape: %s", raw)
	}
	return d
}

func (c *cwClient) notice(event, typ string) notice {
	c.t.Helper()
	raw := c.next(event, func(b json.RawMessage) bool {
		var n notice
		json.Unmarshal(b, &n)
		return typ == "" || n.NotificationType == typ
	})
	var n notice
	json.Unmarshal(raw, &n)
	if n.NotificationID == "" || n.TargetAgentID == "" || n.TargetSessionKey == "" {
		c.t.Fatalf("notification shape: %s", raw)
	}
	return n
}

func (c *cwClient) accept(d delivery) {
	c.t.Helper()
	c.send(map[string]any{"type": "accepted", "deliveryId": d.DeliveryID, "sessionKey": d.SessionKey, "payload": map[string]any{"source": "test"}})
	c.next("delivery.accepted", func(b json.RawMessage) bool { return strings.Contains(string(b), d.DeliveryID) })
}

func (c *cwClient) reply(d delivery, text string) {
	c.t.Helper()
	c.send(map[string]any{"type": "reply", "deliveryId": d.DeliveryID, "sessionKey": d.SessionKey, "payload": map[string]any{"text": text, "source": "test"}})
	c.next("reply.accepted", func(b json.RawMessage) bool {
		return strings.Contains(string(b), `"repliedDeliveryId":"`+d.DeliveryID+`"`)
	})
}

func (c *cwClient) keepSilent(d delivery) {
	c.t.Helper()
	c.send(map[string]any{"type": "kept_silent", "deliveryId": d.DeliveryID, "sessionKey": d.SessionKey, "payload": map[string]any{"reason": "no_reply_token", "source": "test"}})
	c.next("kept_silent.accepted", func(b json.RawMessage) bool { return strings.Contains(string(b), d.DeliveryID) })
}

// ---- setup ------------------------------------------------------------------------------

type agentT struct {
	ID, Token, Code, Name string
	C                     *client.Client
}

func (a agentT) identity() string { return a.Name + "#" + a.Code }

func readyAgent(t *testing.T, h *apptest.Hub, name string) agentT {
	t.Helper()
	ctx := context.Background()
	act, err := client.New(h.URL, "").Activate(ctx, client.ActivateInput{DisplayName: name})
	if err != nil {
		t.Fatal(err)
	}
	c := h.Client(act.AppToken)
	human, prof := name+"'s owner, who likes trail running", name+": a friendly agent who plans weekend runs"
	if _, err := c.UpdateAccount(ctx, client.AccountUpdate{Action: social.ActionUpdateProfile, HumanProfile: &human, AgentProfile: &prof}); err != nil {
		t.Fatal(err)
	}
	return agentT{ID: act.AgentID, Token: act.AppToken, Code: act.AgentCode, Name: name, C: c}
}

func chatOf(t *testing.T, a agentT, chatRequestID string) social.ChatView {
	t.Helper()
	in, err := a.C.ChatInbox(context.Background(), client.InboxFilters{ChatRequestID: chatRequestID})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range in.Chats {
		if c.ChatRequestID == chatRequestID {
			return c
		}
	}
	t.Fatalf("chat %s not in inbox of %s: %+v", chatRequestID, a.Name, in)
	return social.ChatView{}
}

func headings(doc string) []string {
	var out []string
	inFence := ""
	for _, line := range strings.Split(doc, "\n") {
		trim := strings.TrimLeft(line, " ")
		if inFence != "" {
			if strings.TrimSpace(line) == inFence {
				inFence = ""
			}
			continue
		}
		if strings.HasPrefix(trim, "```") {
			inFence = strings.TrimRight(strings.SplitN(trim, "text", 2)[0], " ")
			continue
		}
		if strings.HasPrefix(line, "# ") {
			out = append(out, line)
		}
	}
	return out
}

// ---- the whole conversation ------------------------------------------------------------------

// Two agents hold a whole conversation over real WebSockets in the Claworld
// dialect: kickoff with the sender's context document, opener, live turns
// with feedback, the end handshake, conversation_ended to both management
// sessions, owner reports, and the transcript. Every frame shape and state
// transition is asserted.
func TestConversationOverWebSockets(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := context.Background()
		alice, bob := readyAgent(t, h, "Alice"), readyAgent(t, h, "Bob")
		aw := dialClaworld(t, h, alice.ID, alice.Token)
		bw := dialClaworld(t, h, bob.ID, bob.Token)

		// A world that requires owner reports.
		w, err := alice.C.CreateWorld(ctx, client.WorldInput{DisplayName: ptr("Trail Club"), WorldContextText: ptr("Plan weekend trail runs. Be concise."),
			ParticipantContextText: ptr("I organise Saturday runs"), Policy: &social.PolicyInput{ReportingRequired: ptr(true), MaxTurns: ptr(10), DSLEnabled: ptr(true)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bob.C.JoinWorld(ctx, w.WorldID, client.JoinInput{ParticipantContextText: "I run mountain trails most weekends"}); err != nil {
			t.Fatal(err)
		}
		req, err := alice.C.RequestChat(ctx, client.ChatRequestInput{DisplayName: bob.Name, AgentCode: bob.Code, WorldID: w.WorldID,
			OpeningMessage: "Find out whether Bob wants to join Saturday's run. Stop once that is clear."})
		if err != nil {
			t.Fatal(err)
		}
		if req.Status != social.RequestAccepted || req.Kickoff == nil || req.Chat == nil {
			t.Fatalf("auto-accepted request should carry kickoff and chat: %+v", req)
		}

		// 1. Kickoff to Alice's conversation session.
		k := aw.delivery("kickoff")
		if k.SessionKey != "conversation:"+alice.ID+":"+bob.ID+":"+w.WorldID || k.TargetAgentID != alice.ID || k.ChatRequestID != req.ChatRequestID ||
			k.WorldID != w.WorldID || k.ConversationKey == "" || !k.Metadata.AllowReply || !k.Metadata.AcceptanceRequired ||
			k.Metadata.FromAgentID != bob.ID || k.Metadata.FromDisplayIdentity != bob.identity() || k.Metadata.FromAgentCode != bob.Code {
			t.Fatalf("kickoff frame %+v", k)
		}
		if got := strings.Join(headings(k.Payload.ContextText), "|"); got != "# Background|# Policy|# Task Instruction" {
			t.Fatalf("sender kickoff document sections: %s\n%s", got, k.Payload.ContextText)
		}
		if !strings.Contains(k.Payload.ContextText, "Saturday's run") || k.Payload.CommandText == "" || !strings.Contains(k.Payload.ContextText, "## Reporting Rules") {
			t.Fatalf("kickoff document content:\n%s", k.Payload.ContextText)
		}
		if c := chatOf(t, alice, req.ChatRequestID); c.Kickoff.Status != social.KickoffSent || c.Kickoff.NextAction != social.NextWaitOpenerDelivery {
			t.Fatalf("after kickoff delivery: %+v", c.Kickoff)
		}
		aw.accept(k)
		aw.reply(k, "Hey Bob! Up for a trail run this Saturday? [[like]]")

		// 2. The opener reaches Bob with his full document and the live turn.
		o := bw.delivery("reply")
		if o.Payload.Text != "Hey Bob! Up for a trail run this Saturday? [[like]]" || o.SessionKey != "conversation:"+bob.ID+":"+alice.ID+":"+w.WorldID ||
			o.Metadata.FromAgentID != alice.ID || !o.Metadata.AllowReply {
			t.Fatalf("opener frame %+v", o)
		}
		if got := strings.Join(headings(o.Payload.ContextText), "|"); got != "# Background|# Policy|# Live Turn" {
			t.Fatalf("recipient document sections: %s", got)
		}
		if strings.Contains(o.Payload.ContextText, "Saturday's run. Stop once") {
			t.Fatal("the sender's brief leaked into the recipient's document")
		}
		c := chatOf(t, bob, req.ChatRequestID)
		if c.Kickoff.Status != social.KickoffEstablished || c.Kickoff.NextAction != social.NextRuntimeOwnsConversation || c.Status != social.ChatActive ||
			c.Kickoff.OpenerDeliveredAt.IsZero() || c.Kickoff.LiveChatEstablishedAt.IsZero() || c.Kickoff.OpenerDeliveryID != o.DeliveryID || c.TurnCount != 1 {
			t.Fatalf("after opener: %+v", c)
		}
		bw.accept(o)
		bw.reply(o, "Yes! Which trail? [[like]]")

		// 3. Live turns carry no document unless turns were queued.
		t2 := aw.delivery("reply")
		if t2.Payload.ContextText != "" || t2.Payload.Text != "Yes! Which trail? [[like]]" {
			t.Fatalf("live turn %+v", t2)
		}
		aw.reply(t2, "Sheshan, 7am. See you there! [[request_conversation_end]]")
		if c := chatOf(t, bob, req.ChatRequestID); c.Status != social.ChatEnding {
			t.Fatalf("after one end request: %s", c.Status)
		}
		t3 := bw.delivery("reply")
		bw.reply(t3, "Deal, see you! [[request_conversation_end]]")

		// 4. The last word reaches Alice without inviting a reply.
		last := aw.delivery("reply")
		if last.Metadata.AllowReply || last.Payload.Text != "Deal, see you! [[request_conversation_end]]" {
			t.Fatalf("final delivery %+v", last)
		}
		aw.keepSilent(last)
		c = chatOf(t, alice, req.ChatRequestID)
		if c.Status != social.ChatEnded || c.TurnCount != 4 || c.FeedbackSummary.LikeCount != 2 || deref(c.FeedbackSummary.ViewerGave) != "like" || deref(c.FeedbackSummary.ViewerReceived) != "like" {
			t.Fatalf("ended chat %+v", c)
		}
		for _, cw := range []*cwClient{aw, bw} {
			n := cw.notice("conversation_ended", "")
			if n.RelatedObjects["reason"] != "both_requested_end" || !strings.Contains(fmt.Sprint(n.RelatedObjects["transcriptRef"]), "/transcript") ||
				!strings.HasPrefix(n.TargetSessionKey, "management:") {
				t.Fatalf("conversation_ended %+v", n)
			}
		}

		// 5. A repeat reply is 409, over the socket and over HTTP.
		aw.send(map[string]any{"type": "reply", "deliveryId": k.DeliveryID, "sessionKey": k.SessionKey, "payload": map[string]any{"text": "again"}})
		e := aw.next("error", nil)
		if !strings.Contains(string(e), `"reason":"delivery_not_replyable"`) || !strings.Contains(string(e), `"status":"replied"`) {
			t.Fatalf("duplicate reply error frame %s", e)
		}
		var body map[string]any
		err = alice.C.Do(ctx, "POST", "/v1/runtime-deliveries/"+k.DeliveryID+"/reply", nil, map[string]any{"payload": map[string]any{"text": "again"}}, &body)
		if client.Status(err) != 409 || !strings.Contains(err.Error(), "delivery_not_replyable") {
			t.Fatalf("HTTP duplicate reply: %v", err)
		}
		err = alice.C.Do(ctx, "POST", "/v1/runtime-deliveries/dlv_nope/reply", nil, map[string]any{"payload": map[string]any{"text": "x"}}, nil)
		if client.Status(err) != 404 || client.Code(err) != "delivery_not_found" {
			t.Fatalf("unknown delivery: %v", err)
		}

		// 6. Reports: each management session is asked; Alice's reply is filed
		// and announced in her main session.
		rq := aw.delivery("message")
		if rq.SessionKey != "management:"+alice.ID || rq.Metadata.ReportSource != req.ChatRequestID || !strings.Contains(rq.Payload.ContextText, "# Owner Report Request") {
			t.Fatalf("report request %+v", rq)
		}
		aw.reply(rq, "I set up a Saturday run with Bob at Sheshan, 7am.")
		rep := aw.notice("notification", "owner_report")
		if rep.TargetSessionKey != "main:"+alice.ID || rep.RelatedObjects["directive"] != "announce" || !strings.Contains(rep.Body, "Sheshan") {
			t.Fatalf("report notification %+v", rep)
		}
		bw.delivery("message") // Bob's report request; Bob files through the API instead, not announced
		r1, err := bob.C.FileReport(ctx, client.ReportInput{Source: req.ChatRequestID, ReportText: "Alice invited me to Saturday's run.", Announce: ptr(false)})
		if err != nil || r1.Directive != "ANNOUNCE_SKIP" || r1.AlreadyFiled {
			t.Fatalf("report %+v %v", r1, err)
		}
		r2, err := bob.C.FileReport(ctx, client.ReportInput{Source: req.ChatRequestID, ReportText: "a second one"})
		if err != nil || !r2.AlreadyFiled || r2.ReportID != r1.ReportID {
			t.Fatalf("idempotent report %+v %v", r2, err)
		}
		if n := bw.notice("notification", "owner_report"); !strings.HasSuffix(n.Body, "ANNOUNCE_SKIP") {
			t.Fatalf("skip report body %q", n.Body)
		}

		// 7. The transcript, for participants only.
		tr, err := alice.C.Transcript(ctx, c.ConversationKey, req.ChatRequestID)
		if err != nil || len(tr.Turns) != 4 || tr.Turns[0].Kind != relay.TurnOpener || tr.Turns[3].From != bob.ID {
			t.Fatalf("transcript %+v %v", tr, err)
		}
		carol := readyAgent(t, h, "Carol")
		if _, err := carol.C.Transcript(ctx, c.ConversationKey, ""); client.Status(err) != 404 {
			t.Fatalf("stranger reads transcript: %v", err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
