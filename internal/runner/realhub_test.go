package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/relay"
	"github.com/switchboard-hub/switchboard/internal/runner"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// These tests run two runners against the real hub (internal/app, over
// real WebSockets in the Claworld dialect): everything the hub delivers
// is answered by a driver, and the conversation runs from the kickoff to
// the end handshake without a test hand on either side.

// recorder keeps a runner's events.
type recorder struct {
	mu      sync.Mutex
	list    []runner.Event
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) add(e runner.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, e)
	close(r.changed)
	r.changed = make(chan struct{})
}

// all returns the events matching f.
func (r *recorder) all(f func(runner.Event) bool) []runner.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runner.Event
	for _, e := range r.list {
		if f(e) {
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits until n events match f and returns them.
func (r *recorder) waitFor(t *testing.T, what string, n int, f func(runner.Event) bool) []runner.Event {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if got := r.all(f); len(got) >= n {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; events: %+v", what, r.all(func(runner.Event) bool { return true }))
		}
	}
}

func kind(k runner.EventKind) func(runner.Event) bool {
	return func(e runner.Event) bool { return e.Kind == k }
}

func ended(e runner.Event) bool {
	return e.Kind == runner.EventNotification && e.Name == social.EventConversationEnded
}

// member is an onboarded agent with its client.
type member struct {
	ID, Token, Code, Name string
	C                     *client.Client
}

func onboard(t *testing.T, h *apptest.Hub, name string) member {
	t.Helper()
	act, err := client.New(h.URL, "").Activate(context.Background(), client.ActivateInput{
		DisplayName: name, HumanProfile: name + "'s owner builds tools on weekends", AgentProfile: name + ", an agent that plans side projects",
	})
	if err != nil {
		t.Fatal(err)
	}
	return member{ID: act.AgentID, Token: act.AppToken, Code: act.AgentCode, Name: name, C: h.Client(act.AppToken)}
}

// startRunner runs a runner for m until the test ends.
func startRunner(t *testing.T, h *apptest.Hub, m member, drv runner.Driver) *recorder {
	t.Helper()
	rec := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runner.Run(ctx, runner.Config{
			Server: h.URL, Token: m.Token, AgentID: m.ID, Driver: drv, OnEvent: rec.add,
			Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s's runner: %v", m.Name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s's runner did not stop", m.Name)
		}
	})
	rec.waitFor(t, m.Name+"'s runner to connect", 1, kind(runner.EventConnected))
	return rec
}

// The conversation both tests hold: Mira (script driver) asks, Tomas
// answers; Tomas gives a like and asks to end first.
var (
	miraScript = runner.ScriptSpec{
		Kickoff: "Hi Tomas! Are you still up for building that sync tool?",
		Replies: []string{"Weekends work for me too. Go, I'd say.", "See you Sunday! [[request_conversation_end]]"},
	}
	tomasReplies = []string{
		"Yes, still keen, weekends only though. Rust or Go? [[like]]",
		"Go it is. See you Sunday! [[request_conversation_end]]",
	}
	wantTurns = []string{miraScript.Kickoff, tomasReplies[0], miraScript.Replies[0], tomasReplies[1], miraScript.Replies[1]}
)

// requestChat sends Mira's direct chat request to Tomas; his contact
// policy is open, so it is accepted at once and the hub sends Mira's
// runtime the kickoff.
func requestChat(t *testing.T, mira, tomas member) client.ChatRequest {
	t.Helper()
	req, err := mira.C.RequestChat(context.Background(), client.ChatRequestInput{
		Identity: tomas.Name + "#" + tomas.Code, OpeningMessage: "Find out whether Tomas still wants to build the sync tool, and in which language.",
	})
	if err != nil {
		t.Fatal(err)
	}
	if req.Status != social.RequestAccepted || req.Kickoff == nil {
		t.Fatalf("request should be accepted at once: %+v", req)
	}
	return req
}

// checkEnded asserts the hub's record of the finished conversation: the
// chat from both sides, the transcript, and every relay delivery answered
// exactly as the runners answered it.
func checkEnded(t *testing.T, h *apptest.Hub, mira, tomas member, req client.ChatRequest) {
	t.Helper()
	ctx := context.Background()
	for _, side := range []struct {
		m              member
		gave, received string
	}{{mira, "", "like"}, {tomas, "like", ""}} {
		in, err := side.m.C.ChatInbox(ctx, client.InboxFilters{ChatRequestID: req.ChatRequestID})
		if err != nil || len(in.Chats) != 1 {
			t.Fatalf("%s's inbox: %+v %v", side.m.Name, in, err)
		}
		c := in.Chats[0]
		if c.Status != social.ChatEnded || c.EndReason != "both_requested_end" || c.TurnCount != len(wantTurns) ||
			c.Kickoff.Status != social.KickoffEstablished || c.FeedbackSummary.LikeCount != 1 ||
			deref(c.FeedbackSummary.ViewerGave) != side.gave || deref(c.FeedbackSummary.ViewerReceived) != side.received {
			t.Fatalf("%s's view of the ended chat: %+v", side.m.Name, c)
		}
	}
	tr, err := tomas.C.Transcript(ctx, req.Conversation.ConversationKey, req.ChatRequestID)
	if err != nil || len(tr.Turns) != len(wantTurns) {
		t.Fatalf("transcript %+v %v", tr, err)
	}
	for i, turn := range tr.Turns {
		from, to := mira.ID, tomas.ID
		if i%2 == 1 {
			from, to = to, from
		}
		if turn.Text != wantTurns[i] || turn.From != from || turn.To != to || turn.Seq != i+1 {
			t.Fatalf("turn %d: %+v, want %q from %s", i, turn, wantTurns[i], from)
		}
	}
	if tr.Turns[0].Kind != relay.TurnOpener {
		t.Fatalf("first turn kind %q", tr.Turns[0].Kind)
	}
	// Every relay delivery of the chat was answered once: Mira replied to
	// the kickoff and two turns; Tomas replied twice and kept silent on
	// the last word, which allowed no reply.
	rows, err := h.App.DB.Query(ctx, `SELECT agent_id, kind, status, allow_reply FROM relay_deliveries WHERE chat_request_id = ? ORDER BY created_at, delivery_id`, req.ChatRequestID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var agentID, k, status string
		var allow bool
		if err := rows.Scan(&agentID, &k, &status, &allow); err != nil {
			t.Fatal(err)
		}
		who := map[string]string{mira.ID: "mira", tomas.ID: "tomas"}[agentID]
		got = append(got, strings.Join([]string{who, k, status, map[bool]string{true: "reply", false: "no-reply"}[allow]}, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mira kickoff replied reply", "tomas opener replied reply", "mira turn replied reply",
		"tomas turn replied reply", "mira turn replied reply", "tomas turn kept_silent no-reply",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("relay deliveries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Two runners hold a whole conversation through the real hub: Mira's
// script driver writes the opener from the kickoff, Tomas's exec driver (a
// shell script reading the delivery JSON on stdin) answers, both follow
// the [[request_conversation_end]] handshake, and the last word — which
// allows no reply — is kept silent without running the command.
func TestTwoRunnersHoldAConversationOnTheRealHub(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		mira, tomas := onboard(t, h, "Mira"), onboard(t, h, "Tomas")
		miraDrv, err := runner.NewScript(miraScript)
		if err != nil {
			t.Fatal(err)
		}
		// The command keeps its own turn counter in its working directory
		// and saves each stdin document for the test to read.
		dir := t.TempDir()
		tomasDrv := &runner.Exec{Dir: dir, Timeout: time.Minute, Command: `n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n
cat > in.$n.json
case $n in
1) echo "` + tomasReplies[0] + `" ;;
2) echo "` + tomasReplies[1] + `" ;;
*) echo NO_REPLY ;;
esac`}
		miraEv := startRunner(t, h, mira, miraDrv)
		tomasEv := startRunner(t, h, tomas, tomasDrv)

		req := requestChat(t, mira, tomas)
		miraEv.waitFor(t, "conversation_ended for Mira", 1, ended)
		tomasEv.waitFor(t, "conversation_ended for Tomas", 1, ended)
		last := tomasEv.waitFor(t, "Tomas's runner to keep silent on the last word", 1, func(e runner.Event) bool {
			return e.Kind == runner.EventAnswered && e.Reason == runner.ReasonReplyNotAllowed
		})[0]
		if last.Text != "" || last.Via != "socket" {
			t.Fatalf("last word answer %+v", last)
		}
		checkEnded(t, h, mira, tomas, req)

		// What the exec command read: the opener with Tomas's full context
		// document, then a live turn without one; never the last word.
		var in1, in2 runner.ExecInput
		for i, v := range []*runner.ExecInput{&in1, &in2} {
			b, err := os.ReadFile(filepath.Join(dir, "in."+string(rune('1'+i))+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatalf("stdin document %d: %v\n%s", i+1, err, b)
			}
		}
		wantSession := "conversation:" + tomas.ID + ":" + mira.ID
		if in1.DeliveryType != "reply" || !in1.Baseline || !strings.HasPrefix(in1.ContextText, "# Background") ||
			!strings.Contains(in1.ContextText, "# Live Turn") || strings.Contains(in1.ContextText, "in which language") ||
			in1.Text != miraScript.Kickoff || in1.SessionKey != wantSession || in1.ChatRequestID != req.ChatRequestID ||
			in1.ConversationKey != req.Conversation.ConversationKey || !strings.Contains(string(in1.Metadata), `"fromAgentId":"`+mira.ID+`"`) {
			t.Fatalf("first stdin document: %+v", in1)
		}
		if in2.Baseline || in2.ContextText != "" || in2.Text != miraScript.Replies[0] || in2.SessionKey != wantSession {
			t.Fatalf("second stdin document: %+v", in2)
		}
		if _, err := os.Stat(filepath.Join(dir, "in.3.json")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the command ran for the last word, which allows no reply (stat: %v)", err)
		}

		// Each side answered exactly what it received, over the socket, and
		// nothing failed or was refused.
		for name, ev := range map[string]*recorder{"Mira": miraEv, "Tomas": tomasEv} {
			bad := ev.all(func(e runner.Event) bool {
				return e.Kind == runner.EventDriverFailed || e.Kind == runner.EventRefused || e.Kind == runner.EventAlreadyAnswered
			})
			conv := func(e runner.Event) bool { return strings.HasPrefix(e.SessionKey, "conversation:") }
			got := ev.all(func(e runner.Event) bool { return conv(e) && e.Kind == runner.EventDelivery })
			answered := ev.all(func(e runner.Event) bool { return conv(e) && e.Kind == runner.EventAnswered })
			if len(bad) > 0 || len(got) != 3 || len(answered) != 3 {
				t.Fatalf("%s: %d deliveries, %d answered, failures %+v", name, len(got), len(answered), bad)
			}
			for i := range got {
				if got[i].DeliveryID != answered[i].DeliveryID || answered[i].Via != "socket" {
					t.Fatalf("%s: delivery %d %+v answered as %+v", name, i, got[i], answered[i])
				}
			}
		}
	})
}

// gate is a driver that stops at its first turn until released, so the
// test can restart the hub while the runner holds a delivery.
type gate struct {
	replies []string
	entered chan string // the delivery id of the first turn
	release chan struct{}

	mu    sync.Mutex
	calls map[string]int
	n     int
}

func (g *gate) Reply(ctx context.Context, d runner.Delivery) (string, error) {
	g.mu.Lock()
	g.calls[d.DeliveryID]++
	i := g.n
	g.n++
	g.mu.Unlock()
	if i == 0 {
		g.entered <- d.DeliveryID
		select {
		case <-g.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if i < len(g.replies) {
		return g.replies[i], nil
	}
	return "NO_REPLY", nil
}

// The hub restarts while Tomas's runner holds a turn it accepted: both
// runners reconnect with backoff, the held answer still reaches the hub
// (on the new socket or the HTTP fallback) exactly once, the driver is
// asked once per delivery, and the conversation ends as if nothing had
// happened.
func TestRunnersSurviveAHubRestartMidConversation(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		mira, tomas := onboard(t, h, "Mira"), onboard(t, h, "Tomas")
		miraDrv, err := runner.NewScript(miraScript)
		if err != nil {
			t.Fatal(err)
		}
		g := &gate{replies: tomasReplies, entered: make(chan string, 1), release: make(chan struct{}), calls: map[string]int{}}
		miraEv := startRunner(t, h, mira, miraDrv)
		tomasEv := startRunner(t, h, tomas, g)

		req := requestChat(t, mira, tomas)
		var held string
		select {
		case held = <-g.entered:
		case <-time.After(60 * time.Second):
			t.Fatal("Tomas's driver never got the opener")
		}
		h.Restart()
		close(g.release)

		miraEv.waitFor(t, "conversation_ended for Mira", 1, ended)
		tomasEv.waitFor(t, "conversation_ended for Tomas", 1, ended)
		tomasEv.waitFor(t, "Tomas's runner to keep silent on the last word", 1, func(e runner.Event) bool {
			return e.Kind == runner.EventAnswered && e.Reason == runner.ReasonReplyNotAllowed
		})
		checkEnded(t, h, mira, tomas, req)

		for name, ev := range map[string]*recorder{"Mira": miraEv, "Tomas": tomasEv} {
			if n := len(ev.all(kind(runner.EventConnected))); n < 2 {
				t.Fatalf("%s's runner connected %d times; it should have reconnected after the restart", name, n)
			}
		}
		answers := tomasEv.all(func(e runner.Event) bool {
			return e.DeliveryID == held && (e.Kind == runner.EventAnswered || e.Kind == runner.EventAlreadyAnswered)
		})
		if len(answers) != 1 || answers[0].Kind != runner.EventAnswered || answers[0].Text != tomasReplies[0] {
			t.Fatalf("the held answer was confirmed as %+v", answers)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		for id, n := range g.calls {
			if n != 1 {
				t.Fatalf("the driver was asked %d times for %s", n, id)
			}
		}
		if g.n != 2 {
			t.Fatalf("the driver answered %d turns, want 2 (the last word allows no reply)", g.n)
		}
	})
}
