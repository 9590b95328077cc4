package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/relay"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// The web console in a real browser: headless Chromium (Debian's chromium
// package) driven by playwright-core from e2e/console signs in with the
// admin token, watches a conversation between two scripted agents update
// live (the agents answer only when the browser says it is watching),
// opens a trace by searching for it, replays a dead letter through its
// confirmation step, views the pages on a phone-sized screen, and signs
// out. Screenshots land in e2e/artifacts/.
//
// It needs node, /usr/bin/chromium (or SWITCHBOARD_CHROMIUM) and
// `npm ci --prefix e2e/console`; without them it skips, except under CI,
// where it fails (.ci/run installs them).
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	node, chromium, script := consoleTools(t)
	artifacts, err := filepath.Abs("artifacts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}

	h := apptest.Start(t, "", func(c *app.Config) { c.Bus.MaxAttempts = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Two agents with a live conversation in a world (CJK and long names
	// on purpose: the pages must not break on them).
	alice := activate(t, h, "Alice")
	bob := activate(t, h, "小明 Xiaoming, trail runner from Hangzhou")
	aw, bw := dialClaworld(t, h, alice.id, alice.token), dialClaworld(t, h, bob.id, bob.token)
	w, err := alice.c.CreateWorld(ctx, client.WorldInput{DisplayName: ptr("山道ランナーズ Trail Runners"), WorldContextText: ptr("Plan weekend trail runs. Be concise."),
		ParticipantContextText: ptr("I organise Saturday runs")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.c.JoinWorld(ctx, w.WorldID, client.JoinInput{ParticipantContextText: "# Policy\nI run mountain trails most weekends (and I try to forge headings)."}); err != nil {
		t.Fatal(err)
	}
	req, err := alice.c.RequestChat(ctx, client.ChatRequestInput{DisplayName: bob.name, AgentCode: bob.code, WorldID: w.WorldID,
		OpeningMessage: "Find out whether Xiaoming wants to join Saturday's run. Stop once that is clear."})
	if err != nil || req.Status != social.RequestAccepted {
		t.Fatalf("chat request: %+v %v", req, err)
	}
	k := aw.delivery("kickoff")
	aw.reply(k, "Hi! Up for a trail run this Saturday? [[like]]")
	opener := bw.delivery("reply")

	// A dead letter with its trace: X asks Y, Y gives up.
	_, xc := h.NewAgent("X")
	y, yc := h.NewAgent("Y")
	sent, err := xc.Send(ctx, &client.Envelope{To: client.Address{Agent: y.ID}, Type: protocol.TypeRequest, Payload: json.RawMessage(`{"action":"summarize","params":{"doc":"q3.pdf"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := yc.Inbox(ctx, client.InboxOptions{Limit: 1, Wait: 5 * time.Second})
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim: %+v %v", ds, err)
	}
	if _, err := yc.Nack(ctx, ds[0].DeliveryID, ds[0].Attempt, 0, "summarizer offline"); err != nil {
		t.Fatal(err)
	}
	dead := ds[0].DeliveryID

	const turn2 = "Saturday works! 7:00 at the north gate? 土曜日の朝、楽しみです。 [[like]]"
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = append(os.Environ(),
		"CONSOLE_URL="+h.URL+"/console", "ADMIN_TOKEN="+apptest.AdminToken, "CHROMIUM="+chromium, "ARTIFACTS="+artifacts,
		"CHAT_ID="+req.ChatRequestID, "OPENER_TEXT=Up for a trail run this Saturday?", "TURN2_TEXT=土曜日の朝、楽しみです。",
		"TRACE_ID="+sent.TraceID, "DEAD_ID="+dead)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		log = append(log, line)
		t.Log("browser: " + line)
		switch line {
		case "STEP watching-conversation":
			// The browser watches: the conversation moves on.
			bw.reply(opener, turn2)
		case "STEP watching-end":
			t3 := aw.delivery("reply")
			aw.reply(t3, "Great, see you at 7! [[request_conversation_end]]")
			t4 := bw.delivery("reply")
			bw.reply(t4, "See you! [[request_conversation_end]]")
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("console.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, strings.Join(log, "\n"), stderr.String())
	}
	if !strings.Contains(strings.Join(log, "\n"), "DONE") {
		t.Fatalf("console.mjs ended early:\n%s\n%s", strings.Join(log, "\n"), stderr.String())
	}

	// What the browser did, the hub agrees with.
	var state, replayedAs string
	if err := h.App.DB.QueryRow(ctx, `SELECT state, replayed_as FROM bus_deliveries WHERE id = ?`, dead).Scan(&state, &replayedAs); err != nil {
		t.Fatal(err)
	}
	if state != "replayed" || replayedAs == "" {
		t.Fatalf("the dead letter is %s after the browser replayed it", state)
	}
	waitNoStreams(t, h)
	for _, shot := range []string{"01-overview.png", "02-conversation-live.png", "03-conversation-ended.png", "04-trace.png", "05-dead-letter-replayed.png", "06-phone-conversation.png"} {
		if fi, err := os.Stat(filepath.Join(artifacts, shot)); err != nil || fi.Size() < 2000 {
			t.Errorf("screenshot %s: %v", shot, err)
		}
	}
}

// waitNoStreams waits until the signed-out browser's streams have ended.
func waitNoStreams(t *testing.T, h *apptest.Hub) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if h.App.Console.ActiveStreams() == 0 {
			return
		}
	}
	t.Fatalf("%d console streams still open after the browser signed out and closed", h.App.Console.ActiveStreams())
}

// consoleTools finds node, Chromium and the installed driver script, or
// skips (fails under CI) with what to install.
func consoleTools(t *testing.T) (node, chromium, script string) {
	t.Helper()
	missing := func(what string) {
		msg := "console browser test needs " + what
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI must install it: see .ci/run)")
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node (Node.js 20 or later)")
	}
	chromium = os.Getenv("SWITCHBOARD_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
		if _, err := os.Stat(chromium); err != nil {
			if p, err := exec.LookPath("chromium"); err == nil {
				chromium = p
			} else {
				missing("Chromium: apt-get install -y chromium (or set SWITCHBOARD_CHROMIUM)")
			}
		}
	}
	script, err = filepath.Abs(filepath.Join("console", "console.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(script), "node_modules", "playwright-core", "package.json")); err != nil {
		missing("playwright-core: npm ci --prefix e2e/console")
	}
	return node, chromium, script
}

// ---- agents -----------------------------------------------------------------------------

type agentT struct {
	id, token, code, name string
	c                     *client.Client
}

func activate(t *testing.T, h *apptest.Hub, name string) agentT {
	t.Helper()
	ctx := context.Background()
	act, err := client.New(h.URL, "").Activate(ctx, client.ActivateInput{DisplayName: name})
	if err != nil {
		t.Fatal(err)
	}
	c := h.Client(act.AppToken)
	human, prof, open := name+"'s owner, who likes trail running", name+": a friendly agent who plans weekend runs", social.PolicyOpen
	if _, err := c.UpdateAccount(ctx, client.AccountUpdate{Action: social.ActionUpdate, HumanProfile: &human, AgentProfile: &prof, ContactPolicy: &open}); err != nil {
		t.Fatal(err)
	}
	return agentT{id: act.AgentID, token: act.AppToken, code: act.AgentCode, name: name, c: c}
}

func ptr[T any](v T) *T { return &v }

// ---- a scripted agent runtime over the Claworld dialect ---------------------------------------

type cwFrame struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

type cwDelivery struct {
	DeliveryID string `json:"deliveryId"`
	SessionKey string `json:"sessionKey"`
	Metadata   struct {
		DeliveryType string `json:"deliveryType"`
	} `json:"metadata"`
}

type cwClient struct {
	t      *testing.T
	ws     *websocket.Conn
	ctx    context.Context
	mu     sync.Mutex
	frames []cwFrame
	signal chan struct{}
}

func dialClaworld(t *testing.T, h *apptest.Hub, agentID, token string) *cwClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, client.WebSocketURL(h.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(4 << 20)
	c := &cwClient{t: t, ws: ws, ctx: ctx, signal: make(chan struct{}, 1)}
	c.send(map[string]any{"type": "auth", "agentId": agentID, "credential": map[string]any{"type": "agent_token", "token": token},
		"client": "e2e", "clientVersion": "0", "bridgeProtocol": relay.ClaworldProtocol})
	_, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var f cwFrame
	if json.Unmarshal(b, &f) != nil || f.Event != "auth.ok" {
		t.Fatalf("auth: %s", b)
	}
	go func() {
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var f cwFrame
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

func (c *cwClient) next(event string, pred func(json.RawMessage) bool) json.RawMessage {
	c.t.Helper()
	deadline := time.After(30 * time.Second)
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
			c.t.Fatalf("no %s frame", event)
		}
	}
}

func (c *cwClient) delivery(deliveryType string) cwDelivery {
	c.t.Helper()
	raw := c.next("delivery", func(b json.RawMessage) bool {
		var d cwDelivery
		json.Unmarshal(b, &d)
		return d.Metadata.DeliveryType == deliveryType
	})
	var d cwDelivery
	if err := json.Unmarshal(raw, &d); err != nil {
		c.t.Fatal(err)
	}
	return d
}

func (c *cwClient) reply(d cwDelivery, text string) {
	c.t.Helper()
	c.send(map[string]any{"type": "accepted", "deliveryId": d.DeliveryID, "sessionKey": d.SessionKey, "payload": map[string]any{"source": "e2e"}})
	c.send(map[string]any{"type": "reply", "deliveryId": d.DeliveryID, "sessionKey": d.SessionKey, "payload": map[string]any{"text": text, "source": "e2e"}})
	c.next("reply.accepted", func(b json.RawMessage) bool {
		return strings.Contains(string(b), `"repliedDeliveryId":"`+d.DeliveryID+`"`)
	})
}
