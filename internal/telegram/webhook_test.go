package telegram

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/telegram/tgfake"
)

const hookSecret = "right_secret-123"

func newWebhook(t *testing.T, e *env, ev *events, d Deduper, opts ...func(*WebhookConfig)) (*Webhook, string) {
	t.Helper()
	cfg := WebhookConfig{Secret: hookSecret, Receiver: &Receiver{BotID: "bot_1", BotUsername: e.bot.Username,
		Deduper: d, Handler: ev.handle, Logger: quiet}}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := NewWebhook(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Wait() })
	return h, ts.URL
}

const sampleUpdate = `{"update_id":77,"message":{"message_id":5,"from":{"id":1001,"is_bot":false,"first_name":"A"},"chat":{"id":1001,"type":"private"},"date":1767225600,"text":"hello"}}`

// countingBody records whether the handler read the body.
type countingBody struct {
	r    io.Reader
	read atomic.Bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.r.Read(p)
}

func TestNewWebhookValidates(t *testing.T) {
	recv := &Receiver{BotID: "b"}
	for name, cfg := range map[string]WebhookConfig{
		"no secret":      {Receiver: recv},
		"bad characters": {Secret: "has space", Receiver: recv},
		"too long":       {Secret: strings.Repeat("a", 257), Receiver: recv},
	} {
		if _, err := NewWebhook(cfg); protocol.ClassOf(err) != protocol.ClassInvalid {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := NewWebhook(WebhookConfig{Secret: "ok"}); err == nil {
		t.Error("a webhook without a receiver was accepted")
	}
}

func TestWebhookRejectsWrongSecret(t *testing.T) {
	e := newEnv(t)
	ev := newEvents()
	h, _ := newWebhook(t, e, ev, NewMemoryDeduper())
	for name, header := range map[string]*string{
		"missing":      nil,
		"empty":        ptr(""),
		"wrong":        ptr("wrong_secret-123"),
		"prefix":       ptr(hookSecret[:5]),
		"longer":       ptr(hookSecret + "x"),
		"another case": ptr(strings.ToUpper(hookSecret)),
	} {
		t.Run(name, func(t *testing.T) {
			body := &countingBody{r: strings.NewReader(sampleUpdate)}
			req := httptest.NewRequest(http.MethodPost, "/tg", body)
			if header != nil {
				req.Header.Set(SecretHeader, *header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("status = %d", rec.Code)
			}
			if body.read.Load() {
				t.Fatal("the body of an unauthenticated request was read")
			}
		})
	}
	h.Wait()
	if got := ev.all(); len(got) != 0 {
		t.Fatalf("handler invoked for unauthenticated requests: %+v", got)
	}
}

func ptr(s string) *string { return &s }

func TestWebhookWrongSecretFromTelegram(t *testing.T) {
	e := newEnv(t, tgfake.WithWebhookRetry(2, time.Millisecond))
	ev := newEvents()
	h, url := newWebhook(t, e, ev, NewMemoryDeduper())
	// Telegram was given another secret than the webhook expects
	if err := e.c.SetWebhook(waitCtx(t), WebhookParams{URL: url, SecretToken: "stale_secret"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.bot.TypeMessage(e.dm, e.alice, "hello", tgfake.MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	if err := e.bot.WaitFor(waitCtx(t), func() bool { return e.bot.PendingUpdates() == 0 }); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	ds := e.bot.Deliveries()
	if len(ds) != 2 || ds[0].Status != 401 || ds[1].Status != 401 {
		t.Fatalf("deliveries = %+v", ds)
	}
	if got := ev.all(); len(got) != 0 {
		t.Fatalf("handler invoked: %+v", got)
	}
}

func TestWebhookReceivesMessagesAndTaps(t *testing.T) {
	e := newEnv(t)
	ev := newEvents()
	_, url := newWebhook(t, e, ev, NewMemoryDeduper())
	if err := e.c.SetWebhook(waitCtx(t), WebhookParams{URL: url + "/tg", SecretToken: hookSecret, AllowedUpdates: UpdateTypes}); err != nil {
		t.Fatal(err)
	}
	sent, err := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: "reply", Keyboard: continueStop})
	if err != nil {
		t.Fatal(err)
	}
	typed, err := e.bot.TypeMessage(e.dm, e.alice, "/controls off", tgfake.MessageOpts{})
	if err != nil {
		t.Fatal(err)
	}
	qid, err := e.bot.TapButton(e.dm, sent.LastMessageID(), e.alice, "rec1:s:n1")
	if err != nil {
		t.Fatal(err)
	}
	got := ev.wait(t, 2)
	byKind := map[bool]Event{}
	for _, g := range got {
		byKind[g.Message != nil] = g
	}
	m := byKind[true].Message
	if m == nil || m.MessageID != typed.ID || m.Controls != ControlsOff || m.LanguageCode != "zh-hant" || m.UserID != e.alice.ID {
		t.Fatalf("typed message = %+v", m)
	}
	tap := byKind[false].Tap
	if tap == nil || tap.QueryID != qid || tap.Data != "rec1:s:n1" || tap.MessageID != sent.LastMessageID() || tap.ChatID != e.dm.ID {
		t.Fatalf("tap = %+v", tap)
	}
	for _, d := range e.bot.Deliveries() {
		if d.Status != http.StatusOK || d.Attempt != 1 {
			t.Fatalf("delivery = %+v", d)
		}
	}
}

func TestWebhookDuplicateDeliveredOnce(t *testing.T) {
	e := newEnv(t)
	ev := newEvents()
	h, url := newWebhook(t, e, ev, NewMemoryDeduper())
	if err := e.c.SetWebhook(waitCtx(t), WebhookParams{URL: url, SecretToken: hookSecret}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.bot.TypeMessage(e.dm, e.alice, "once", tgfake.MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	if err := e.bot.InjectDuplicate(e.bot.LastUpdateID()); err != nil {
		t.Fatal(err)
	}
	if err := e.bot.WaitFor(waitCtx(t), func() bool { return len(e.bot.Deliveries()) == 2 && e.bot.PendingUpdates() == 0 }); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	ds := e.bot.Deliveries()
	if ds[0].UpdateID != ds[1].UpdateID || ds[1].Status != 200 {
		t.Fatalf("deliveries = %+v", ds)
	}
	if got := ev.all(); len(got) != 1 || got[0].Message.Text != "once" {
		t.Fatalf("events = %+v", got)
	}
}

func TestWebhookAnswersBeforeHandling(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	var handled atomic.Int32
	recv := &Receiver{BotID: "bot_1", Handler: func(context.Context, Event) { <-release; handled.Add(1) }, Logger: quiet}
	h, err := NewWebhook(WebhookConfig{Secret: hookSecret, Receiver: recv, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set(SecretHeader, hookSecret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := post(sampleUpdate); rec.Code != http.StatusOK {
		t.Fatalf("status = %d", rec.Code)
	}
	// answered while the handler is still blocked
	if handled.Load() != 0 {
		t.Fatal("the handler ran before the answer")
	}
	// the only slot is busy: Telegram is asked to come back later
	rec := post(strings.Replace(sampleUpdate, `"update_id":77`, `"update_id":78`, 1))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("busy answer = %d %v", rec.Code, rec.Header())
	}
	close(release)
	h.Wait()
	if handled.Load() != 1 {
		t.Fatalf("handled = %d", handled.Load())
	}
	_ = e
}

func TestWebhookBadRequests(t *testing.T) {
	e := newEnv(t)
	ev := newEvents()
	h, _ := newWebhook(t, e, ev, NewMemoryDeduper(), func(c *WebhookConfig) { c.MaxBodyBytes = 512 })
	cases := []struct {
		name, method, body string
		status             int
	}{
		{"GET", http.MethodGet, "", http.StatusMethodNotAllowed},
		{"not JSON", http.MethodPost, "{nope", http.StatusBadRequest},
		{"no update id", http.MethodPost, `{"message":{}}`, http.StatusBadRequest},
		{"too large", http.MethodPost, `{"update_id":1,"message":{"text":"` + strings.Repeat("x", 1000) + `"}}`, http.StatusRequestEntityTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "/", strings.NewReader(tc.body))
			req.Header.Set(SecretHeader, hookSecret)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d", rec.Code, tc.status)
			}
		})
	}
	h.Wait()
	if len(ev.all()) != 0 {
		t.Fatal("handler invoked for a bad request")
	}
}

func TestWebhookDedupeFailureIsRedelivered(t *testing.T) {
	e := newEnv(t, tgfake.WithWebhookRetry(3, time.Millisecond))
	ev := newEvents()
	d := &failingDeduper{fails: 1, inner: NewMemoryDeduper()}
	_, url := newWebhook(t, e, ev, d)
	if err := e.c.SetWebhook(waitCtx(t), WebhookParams{URL: url, SecretToken: hookSecret}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.bot.TypeMessage(e.dm, e.alice, "retry me", tgfake.MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	got := ev.wait(t, 1)
	if got[0].Message.Text != "retry me" {
		t.Fatalf("event = %+v", got[0])
	}
	if err := e.bot.WaitFor(waitCtx(t), func() bool { return e.bot.PendingUpdates() == 0 }); err != nil {
		t.Fatal(err)
	}
	ds := e.bot.Deliveries()
	if len(ds) != 2 || ds[0].Status != http.StatusServiceUnavailable || ds[1].Status != http.StatusOK {
		t.Fatalf("deliveries = %+v", ds)
	}
}

func TestMemoryDeduper(t *testing.T) {
	d := &MemoryDeduper{Capacity: 3}
	ctx := context.Background()
	seen := func(bot string, id int64) bool {
		s, err := d.SeenUpdate(ctx, bot, id)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if seen("a", 1) || !seen("a", 1) || seen("b", 1) {
		t.Fatal("per-bot dedupe broken")
	}
	for id := int64(2); id <= 4; id++ {
		if seen("a", id) {
			t.Fatalf("%d seen too early", id)
		}
	}
	// capacity 3: id 1 was forgotten, 2..4 are remembered
	if !seen("a", 4) || !seen("a", 2) || seen("a", 1) {
		t.Fatal("capacity not honoured")
	}
}
