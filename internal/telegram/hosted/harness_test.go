package hosted_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
	"github.com/switchboard-hub/switchboard/internal/telegram/hosted"
	"github.com/switchboard-hub/switchboard/internal/telegram/tgfake"
)

// The end-to-end tests run the real hub (apptest) against a fake Telegram
// (tgfake) with a runtime agent connected over the SDK socket, in both
// receive modes and on both store backends.

var modes = []string{"webhook", "poll"}

// eachMode runs fn once per receive mode in applies and per store backend,
// each with a world of its own.
func eachMode(t *testing.T, applies []string, fn func(t *testing.T, w *world)) {
	t.Helper()
	for _, mode := range applies {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			storetest.EachDSN(t, func(t *testing.T, dsn string) {
				fn(t, newWorld(t, dsn, mode))
			})
		})
	}
}

// sleepRecorder stands in for the Bot API client's waits after a 429: it
// records them and waits only briefly, so a test sees that retry_after was
// honoured without spending it.
type sleepRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	t := time.NewTimer(min(d, 20*time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *sleepRecorder) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// world is one hub hosting one bot of a fake Telegram, bound to a runtime
// agent that is connected and collecting what the hub delivers.
type world struct {
	t      *testing.T
	ctx    context.Context
	mode   string
	hub    *apptest.Hub
	fake   *tgfake.Server
	tg     *tgfake.Bot
	bot    client.TelegramBot
	agent  client.CreatedAgent
	rtc    *client.Client // the runtime agent's client
	rt     *runtime
	sleeps *sleepRecorder

	alice, bob tgfake.User
	dm         tgfake.Chat
}

func newWorld(t *testing.T, dsn, mode string, opts ...apptest.Options) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	w := &world{t: t, ctx: ctx, mode: mode, sleeps: &sleepRecorder{}}
	w.hub = apptest.Start(t, dsn, append([]apptest.Options{func(c *app.Config) {
		c.Telegram = hosted.Tuning{PollTimeout: 5 * time.Second, ReconcileInterval: 200 * time.Millisecond,
			SweepInterval: time.Hour, OutboxInterval: 200 * time.Millisecond, TelegramSleep: w.sleeps.sleep}
	}}, opts...)...)
	w.fake = tgfake.New()
	t.Cleanup(w.fake.Close)
	w.tg = w.fake.AddBot("reply_bot")
	w.alice = tgfake.User{ID: 1001, FirstName: "Alice", Username: "alice", LanguageCode: "en"}
	w.bob = tgfake.User{ID: 1002, FirstName: "Bob", Username: "bob", LanguageCode: "en"}
	w.dm = w.tg.PrivateChat(w.alice)
	w.agent, w.rtc = w.hub.NewAgent("runtime")
	bot, err := w.hub.Admin.AddTelegramBot(ctx, client.AddTelegramBotParams{Token: w.tg.Token, AgentID: w.agent.ID,
		Mode: mode, APIURL: w.fake.URL()})
	if err != nil {
		t.Fatalf("add bot: %v", err)
	}
	w.bot = bot
	w.rt = connectRuntime(t, w.rtc)
	if mode == "poll" {
		w.waitFake("the hub to poll", w.tg.Polling)
	}
	return w
}

// waitFake waits for cond on the fake's state.
func (w *world) waitFake(what string, cond func() bool) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 20*time.Second)
	defer cancel()
	if err := w.tg.WaitFor(ctx, cond); err != nil {
		w.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// reply sends a runtime reply into chat through the hub.
func (w *world) reply(chat tgfake.Chat, r client.TelegramReply) client.TelegramReplyResult {
	w.t.Helper()
	r.ChatID, r.BusinessConnectionID = chat.ID, chat.BusinessConnectionID
	res, err := w.rtc.SendTelegramReply(w.ctx, w.bot.ID, r)
	if err != nil {
		w.t.Fatalf("reply: %v", err)
	}
	if len(res.MessageIDs) == 0 {
		w.t.Fatalf("reply sent no message: %+v", res)
	}
	return res
}

func (w *world) message(chat tgfake.Chat, id int64) tgfake.Message {
	w.t.Helper()
	m, ok := w.tg.Message(chat, int(id))
	if !ok {
		w.t.Fatalf("no message %d in chat %d", id, chat.ID)
	}
	return m
}

// controls returns the callback data of the Continue and Stop buttons on a
// message, failing if it does not carry exactly those two.
func (w *world) controls(chat tgfake.Chat, id int64) (cont, stop string) {
	w.t.Helper()
	kb := w.message(chat, id).Keyboard
	if len(kb) != 2 || len(kb[0]) != 1 || len(kb[1]) != 1 {
		w.t.Fatalf("message %d keyboard %+v, want two rows of one button", id, kb)
	}
	return kb[0][0].CallbackData, kb[1][0].CallbackData
}

// waitKeyboard waits until message id's keyboard satisfies cond.
func (w *world) waitKeyboard(chat tgfake.Chat, id int64, what string, cond func(tgfake.Keyboard) bool) {
	w.t.Helper()
	w.waitFake(what, func() bool {
		m, ok := w.tg.Message(chat, int(id))
		return ok && cond(m.Keyboard)
	})
}

func noKeyboard(k tgfake.Keyboard) bool { return len(k) == 0 }

// resolvedTo reports a keyboard resolved (mark mode) to one inert button.
func resolvedTo(label string) func(tgfake.Keyboard) bool {
	return func(k tgfake.Keyboard) bool {
		return len(k) == 1 && len(k[0]) == 1 && k[0][0].Text == label && strings.HasPrefix(k[0][0].CallbackData, "rec1:n:")
	}
}

// tap presses a button and returns the answer the hub gave.
func (w *world) tap(chat tgfake.Chat, id int64, user tgfake.User, data string) tgfake.CallbackAnswer {
	w.t.Helper()
	q, err := w.tg.TapButton(chat, int(id), user, data)
	if err != nil {
		w.t.Fatalf("tap: %v", err)
	}
	return w.answer(q)
}

// forge sends callback data the message does not show.
func (w *world) forge(chat tgfake.Chat, id int64, user tgfake.User, data string) tgfake.CallbackAnswer {
	w.t.Helper()
	q, err := w.tg.ForgeCallback(chat, int(id), user, data)
	if err != nil {
		w.t.Fatalf("forge: %v", err)
	}
	return w.answer(q)
}

func (w *world) answer(q string) tgfake.CallbackAnswer {
	w.t.Helper()
	var a tgfake.CallbackAnswer
	w.waitFake("the callback answer", func() bool {
		var ok bool
		a, ok = w.tg.Answer(q)
		return ok
	})
	return a
}

func (w *world) policy(q client.PolicyQuery) client.Decision {
	w.t.Helper()
	d, err := w.rtc.ReplyPolicy(w.ctx, w.bot.ID, q)
	if err != nil {
		w.t.Fatalf("policy: %v", err)
	}
	return d
}

// history is the recorded changes of a conversation, newest first.
func (w *world) history(key string) []replyctl.HistoryEntry {
	w.t.Helper()
	k, err := replyctl.ParseKey(key)
	if err != nil {
		w.t.Fatal(err)
	}
	hist, err := w.hub.App.Telegram.Controls().History(w.ctx, k, 100)
	if err != nil {
		w.t.Fatal(err)
	}
	return hist
}

// typeText makes user write text in chat and waits until the runtime has it.
func (w *world) typeText(chat tgfake.Chat, user tgfake.User, text string, opts tgfake.MessageOpts) client.TelegramMessage {
	w.t.Helper()
	m, err := w.tg.TypeMessage(chat, user, text, opts)
	if err != nil {
		w.t.Fatal(err)
	}
	return w.rt.waitMessage(w.t, func(tm client.TelegramMessage) bool {
		return tm.ChatID == chat.ID && tm.MessageID == int64(m.ID) && tm.BusinessConnectionID == chat.BusinessConnectionID
	})
}

// runtime is the bound agent: it acknowledges every delivery and keeps the
// envelopes (once each: deliveries are at least once).
type runtime struct {
	sock   *client.Socket
	mu     sync.Mutex
	envs   []*client.Envelope
	seen   map[string]bool
	notify chan struct{}
}

func connectRuntime(t *testing.T, c *client.Client) *runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sock, err := c.Connect(ctx, client.ConnectOptions{})
	if err != nil {
		t.Fatalf("runtime connect: %v", err)
	}
	r := &runtime{sock: sock, seen: map[string]bool{}, notify: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			d, err := sock.Receive(context.Background())
			if err != nil {
				return
			}
			env, err := d.Decode()
			if err == nil {
				r.mu.Lock()
				if !r.seen[env.From.Agent+"/"+env.ID] {
					r.seen[env.From.Agent+"/"+env.ID] = true
					r.envs = append(r.envs, env)
				}
				close(r.notify)
				r.notify = make(chan struct{})
				r.mu.Unlock()
			}
			actx, acancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = sock.Ack(actx, d)
			acancel()
		}
	}()
	t.Cleanup(func() { sock.Close(); <-done })
	return r
}

func (r *runtime) all() []*client.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*client.Envelope(nil), r.envs...)
}

// wait blocks until cond holds over the envelopes received so far.
func (r *runtime) wait(t *testing.T, what string, cond func([]*client.Envelope) bool) {
	t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		ch := r.notify
		envs := append([]*client.Envelope(nil), r.envs...)
		r.mu.Unlock()
		if cond(envs) {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("runtime: timed out waiting for %s; got %d envelopes", what, len(envs))
		}
	}
}

func (r *runtime) messages() []client.TelegramMessage {
	var out []client.TelegramMessage
	for _, e := range r.all() {
		if m, ok := client.TelegramMessageOf(e); ok {
			out = append(out, m)
		}
	}
	return out
}

func (r *runtime) choices() []client.ReplyChoice {
	var out []client.ReplyChoice
	for _, e := range r.all() {
		if c, ok := client.ReplyChoiceOf(e); ok {
			out = append(out, c)
		}
	}
	return out
}

func (r *runtime) waitMessage(t *testing.T, pred func(client.TelegramMessage) bool) client.TelegramMessage {
	t.Helper()
	var got client.TelegramMessage
	r.wait(t, "a telegram.message", func(envs []*client.Envelope) bool {
		for _, e := range envs {
			if m, ok := client.TelegramMessageOf(e); ok && pred(m) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

func (r *runtime) waitChoice(t *testing.T, pred func(client.ReplyChoice) bool) client.ReplyChoice {
	t.Helper()
	var got client.ReplyChoice
	r.wait(t, "a replyctl.choice", func(envs []*client.Envelope) bool {
		for _, e := range envs {
			if c, ok := client.ReplyChoiceOf(e); ok && pred(c) {
				got = c
				return true
			}
		}
		return false
	})
	return got
}

// envelope returns the received envelope whose telegram.message matches.
func (r *runtime) requestFor(msg client.TelegramMessage) *client.Envelope {
	for _, e := range r.all() {
		if m, ok := client.TelegramMessageOf(e); ok && m.MessageID == msg.MessageID && m.ChatID == msg.ChatID &&
			m.BusinessConnectionID == msg.BusinessConnectionID {
			return e
		}
	}
	return nil
}
