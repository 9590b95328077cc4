package telegram

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/telegram/tgfake"
)

// runPoller starts a poller and returns a stop function that cancels it
// and returns Run's result.
func runPoller(t *testing.T, e *env, ev *events, d Deduper) (*Poller, func() error) {
	t.Helper()
	p, err := NewPoller(PollerConfig{Client: e.c, Timeout: 5 * time.Second,
		Receiver: &Receiver{BotID: "bot_1", BotUsername: e.bot.Username, Deduper: d, Handler: ev.handle, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var (
		once   sync.Once
		result error
	)
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(10 * time.Second):
				t.Error("poller did not stop")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return p, stop
}

func TestNewPollerValidates(t *testing.T) {
	if _, err := NewPoller(PollerConfig{}); err == nil {
		t.Fatal("a poller without client and receiver was accepted")
	}
}

func TestPollerReceivesMessagesAndTaps(t *testing.T) {
	e := newEnv(t)
	ev := newEvents()
	p, stop := runPoller(t, e, ev, NewMemoryDeduper())

	forum := e.bot.Supergroup("Ops", true)
	topic, _ := e.bot.CreateTopic(forum, "Deploys")
	bob := tgfake.User{ID: 1002, FirstName: "Bob", Username: "bob", LanguageCode: "en"}
	sent, err := e.c.SendMessage(waitCtx(t), SendParams{ChatID: forum.ID, ThreadID: topic, Text: "reply", Keyboard: continueStop})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.bot.TypeMessage(forum, bob, "/controls@reply_bot on", tgfake.MessageOpts{ThreadID: topic}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.bot.TapButton(forum, sent.LastMessageID(), bob, "rec1:c:n1"); err != nil {
		t.Fatal(err)
	}
	got := ev.wait(t, 2)
	m, tap := got[0].Message, got[1].Tap
	if m == nil || m.ChatID != forum.ID || m.ThreadID != topic || m.Controls != ControlsOn || m.Username != "bob" || m.ChatType != "supergroup" {
		t.Fatalf("message = %+v", m)
	}
	if tap == nil || tap.ThreadID != topic || tap.Data != "rec1:c:n1" || tap.MessageID != sent.LastMessageID() || tap.LanguageCode != "en" {
		t.Fatalf("tap = %+v", tap)
	}
	if got[0].UpdateID >= got[1].UpdateID {
		t.Fatal("updates out of order")
	}
	// the next request confirms what was handed over
	if err := e.bot.WaitFor(waitCtx(t), func() bool { return e.bot.PendingUpdates() == 0 }); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run after cancel = %v", err)
	}
	if p.Offset() != got[1].UpdateID+1 {
		t.Fatalf("offset = %d", p.Offset())
	}
	for _, c := range e.bot.Calls("getUpdates") {
		if c.Params["allowed_updates"] == "" || c.Params["timeout"] != "5" {
			t.Fatalf("getUpdates params = %v", c.Params)
		}
	}
}

func TestPollerDuplicateDeliveredOnce(t *testing.T) {
	e := newEnv(t)
	ev := newEvents()
	_, stop := runPoller(t, e, ev, NewMemoryDeduper())
	if _, err := e.bot.TypeMessage(e.dm, e.alice, "once", tgfake.MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, 1)
	if err := e.bot.InjectDuplicate(e.bot.LastUpdateID()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.bot.TypeMessage(e.dm, e.alice, "twice", tgfake.MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	got := ev.wait(t, 2)
	// the duplicate was fetched (the queue drained) but not handed over
	if err := e.bot.WaitFor(waitCtx(t), func() bool { return e.bot.PendingUpdates() == 0 }); err != nil {
		t.Fatal(err)
	}
	_ = stop()
	got = ev.all()
	if len(got) != 2 || got[0].Message.Text != "once" || got[1].Message.Text != "twice" {
		t.Fatalf("events = %+v", got)
	}
}

func TestPollerBacksOffWhileWebhookIsSet(t *testing.T) {
	e := newEnv(t)
	if err := e.c.SetWebhook(waitCtx(t), WebhookParams{URL: "http://127.0.0.1:1/hook", SecretToken: hookSecret}); err != nil {
		t.Fatal(err)
	}
	// after three failed polls, the operator removes the webhook and a user
	// writes: the poller, still backing off, picks the message up. (A message
	// written while the webhook is set goes to the webhook, not to polls.)
	var waits []time.Duration
	e.setOnSleep(func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		if len(waits) == 3 {
			if err := e.c.DeleteWebhook(ctx, false); err != nil {
				return err
			}
			_, err := e.bot.TypeMessage(e.dm, e.alice, "after the webhook", tgfake.MessageOpts{})
			return err
		}
		return nil
	})
	ev := newEvents()
	_, stop := runPoller(t, e, ev, NewMemoryDeduper())
	got := ev.wait(t, 1)
	_ = stop()
	if got[0].Message.Text != "after the webhook" {
		t.Fatalf("event = %+v", got[0])
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}
	if len(waits) < 3 || waits[0] != want[0] || waits[1] != want[1] || waits[2] != want[2] {
		t.Fatalf("backoff = %v, want %v", waits, want)
	}
	calls := e.bot.Calls("getUpdates")
	if calls[0].Status != 409 {
		t.Fatalf("first poll = %+v", calls[0])
	}
}

func TestPollerHonoursRetryAfter(t *testing.T) {
	e := newEnv(t)
	e.bot.FailNext("getUpdates", 1, 4)
	ev := newEvents()
	_, stop := runPoller(t, e, ev, NewMemoryDeduper())
	if _, err := e.bot.TypeMessage(e.dm, e.alice, "hi", tgfake.MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, 1)
	_ = stop()
	if s := e.slept(); len(s) == 0 || s[0] != 4*time.Second {
		t.Fatalf("waits = %v, want retry_after 4s first", s)
	}
}

func TestPollerStopsOnRevokedToken(t *testing.T) {
	e := newEnv(t)
	c, err := NewClient(Config{Token: "1:revoked", ServerURL: e.fake.URL(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPoller(PollerConfig{Client: c, Receiver: &Receiver{BotID: "b", Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(waitCtx(t))
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != 401 {
		t.Fatalf("Run = %v", err)
	}
}

func TestPollerDoesNotConfirmWhatItCouldNotDispatch(t *testing.T) {
	e := newEnv(t)
	ev := newEvents()
	d := &failingDeduper{fails: 1, inner: NewMemoryDeduper()}
	_, stop := runPoller(t, e, ev, d)
	if _, err := e.bot.TypeMessage(e.dm, e.alice, "keep me", tgfake.MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	got := ev.wait(t, 1)
	_ = stop()
	if got[0].Message.Text != "keep me" || len(ev.all()) != 1 {
		t.Fatalf("events = %+v", ev.all())
	}
	// the first fetch was not confirmed: the same update came back
	calls := e.bot.Calls("getUpdates")
	if len(calls) < 2 || calls[1].Params["offset"] != "" {
		t.Fatalf("second poll must not confirm the update: %+v", calls)
	}
	if s := e.slept(); len(s) == 0 {
		t.Fatal("no backoff after a dedupe failure")
	}
}

func TestPollerStopsOnCancelDuringLongPoll(t *testing.T) {
	e := newEnv(t)
	ev := newEvents()
	_, stop := runPoller(t, e, ev, nil)
	if err := e.bot.WaitFor(waitCtx(t), e.bot.Polling); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
}
