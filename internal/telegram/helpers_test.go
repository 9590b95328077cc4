package telegram

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/telegram/tgfake"
)

// env is a fake Telegram with one bot, a private chat with Alice, and a
// Client whose waits are recorded instead of slept.
type env struct {
	fake  *tgfake.Server
	bot   *tgfake.Bot
	alice tgfake.User
	dm    tgfake.Chat
	c     *Client
	clk   *clock.Fake

	mu     sync.Mutex
	sleeps []time.Duration
	// onSleep, when set, runs inside Sleep (the test's hook into a wait)
	onSleep func(ctx context.Context, d time.Duration) error
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newEnv(t *testing.T, opts ...tgfake.Option) *env {
	t.Helper()
	e := &env{clk: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	e.fake = tgfake.New(append([]tgfake.Option{tgfake.WithClock(e.clk)}, opts...)...)
	t.Cleanup(e.fake.Close)
	e.bot = e.fake.AddBot("reply_bot")
	e.alice = tgfake.User{ID: 1001, FirstName: "Alice", Username: "alice", LanguageCode: "zh-hant"}
	e.dm = e.bot.PrivateChat(e.alice)
	c, err := NewClient(Config{Token: e.bot.Token, ServerURL: e.fake.URL(), Clock: e.clk, Logger: quiet,
		Sleep: e.sleep})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	return e
}

// sleep records the wait and, like the real clock, lets the rate-limit
// window pass.
func (e *env) sleep(ctx context.Context, d time.Duration) error {
	e.mu.Lock()
	e.sleeps = append(e.sleeps, d)
	hook := e.onSleep
	e.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, d); err != nil {
			return err
		}
	}
	e.clk.Advance(d)
	return ctx.Err()
}

func (e *env) setOnSleep(f func(ctx context.Context, d time.Duration) error) {
	e.mu.Lock()
	e.onSleep = f
	e.mu.Unlock()
}

func (e *env) slept() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Duration(nil), e.sleeps...)
}

// events collects what a Receiver hands over.
type events struct {
	mu  sync.Mutex
	got []Event
	ch  chan struct{}
}

func newEvents() *events { return &events{ch: make(chan struct{}, 1000)} }

func (ev *events) handle(_ context.Context, e Event) {
	ev.mu.Lock()
	ev.got = append(ev.got, e)
	ev.mu.Unlock()
	ev.ch <- struct{}{}
}

func (ev *events) all() []Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]Event(nil), ev.got...)
}

// wait returns once n events arrived.
func (ev *events) wait(t *testing.T, n int) []Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		if got := ev.all(); len(got) >= n {
			return got
		}
		select {
		case <-ev.ch:
		case <-timeout:
			t.Fatalf("got %d events, want %d: %+v", len(ev.all()), n, ev.all())
		}
	}
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// failingDeduper fails the first n calls.
type failingDeduper struct {
	mu    sync.Mutex
	fails int
	inner *MemoryDeduper
}

func (d *failingDeduper) SeenUpdate(ctx context.Context, botID string, id int64) (bool, error) {
	d.mu.Lock()
	if d.fails > 0 {
		d.fails--
		d.mu.Unlock()
		return false, errors.New("store unavailable")
	}
	d.mu.Unlock()
	return d.inner.SeenUpdate(ctx, botID, id)
}

var continueStop = Keyboard{{
	{Text: "A. 繼續", CallbackData: "rec1:c:n1"},
	{Text: "B. 就這樣吧，不需要額外處理", CallbackData: "rec1:s:n1"},
}}
