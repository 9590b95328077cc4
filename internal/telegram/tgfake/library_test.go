package tgfake

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

func newLibBot(t *testing.T, f *fixture, opts ...tgbot.Option) *tgbot.Bot {
	t.Helper()
	b, err := tgbot.New(f.bot.Token, append([]tgbot.Option{tgbot.WithServerURL(f.s.URL()),
		tgbot.WithDefaultHandler(func(context.Context, *tgbot.Bot, *models.Update) {})}, opts...)...)
	if err != nil {
		t.Fatalf("go-telegram/bot against the fake: %v", err)
	}
	return b
}

func keyboard(data ...string) *models.InlineKeyboardMarkup {
	row := []models.InlineKeyboardButton{}
	for _, d := range data {
		row = append(row, models.InlineKeyboardButton{Text: "btn " + d, CallbackData: d})
	}
	return &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{row}}
}

func TestLibraryUnauthorized(t *testing.T) {
	f := newFixture(t)
	_, err := tgbot.New("1:wrong", tgbot.WithServerURL(f.s.URL()))
	if !errors.Is(err, tgbot.ErrorUnauthorized) {
		t.Fatalf("err = %v, want unauthorized", err)
	}
}

func TestLibrarySendEditAnswer(t *testing.T) {
	f := newFixture(t)
	b := newLibBot(t, f)
	ctx := context.Background()

	msg, err := b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: f.dm.ID, Text: "<b>Done</b>", ParseMode: models.ParseModeHTML,
		ReplyMarkup: keyboard("rec1:c:n1", "rec1:s:n1")})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text != "Done" || msg.ReplyMarkup == nil || len(msg.ReplyMarkup.InlineKeyboard[0]) != 2 {
		t.Fatalf("sent = %+v", msg)
	}
	if got := f.bot.Calls("sendMessage"); len(got) != 1 || got[0].Params["parse_mode"] != "HTML" {
		t.Fatalf("call log = %+v", got)
	}

	_, err = b.EditMessageReplyMarkup(ctx, &tgbot.EditMessageReplyMarkupParams{ChatID: f.dm.ID, MessageID: msg.ID, ReplyMarkup: keyboard("rec1:c:n1", "rec1:s:n1")})
	if !errors.Is(err, tgbot.ErrorBadRequest) || !strings.Contains(err.Error(), "message is not modified") {
		t.Fatalf("identical edit: %v", err)
	}
	_, err = b.EditMessageReplyMarkup(ctx, &tgbot.EditMessageReplyMarkupParams{ChatID: f.dm.ID, MessageID: msg.ID + 40})
	if !errors.Is(err, tgbot.ErrorBadRequest) || !strings.Contains(err.Error(), "message to edit not found") {
		t.Fatalf("unknown message: %v", err)
	}
	_, err = b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: f.dm.ID, Text: "x", ReplyMarkup: keyboard(strings.Repeat("d", 65))})
	if !errors.Is(err, tgbot.ErrorBadRequest) || !strings.Contains(err.Error(), "BUTTON_DATA_INVALID") {
		t.Fatalf("long callback data: %v", err)
	}
	_, err = b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: f.dm.ID, Text: strings.Repeat("é", 4097)})
	if !errors.Is(err, tgbot.ErrorBadRequest) || !strings.Contains(err.Error(), "message is too long") {
		t.Fatalf("long text: %v", err)
	}

	// removing the keyboard: the library omits reply_markup for nil
	if _, err := b.EditMessageReplyMarkup(ctx, &tgbot.EditMessageReplyMarkupParams{ChatID: f.dm.ID, MessageID: msg.ID}); err != nil {
		t.Fatal(err)
	}
	if m, _ := f.bot.Message(f.dm, msg.ID); m.Keyboard != nil {
		t.Fatal("keyboard still shown")
	}

	f.bot.FailNext("sendMessage", 1, 7)
	_, err = b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: f.dm.ID, Text: "again"})
	var tmr *tgbot.TooManyRequestsError
	if !errors.As(err, &tmr) || tmr.RetryAfter != 7 {
		t.Fatalf("429: %v", err)
	}

	msg2, err := b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: f.dm.ID, Text: "again", ReplyMarkup: keyboard("rec1:c:n2")})
	if err != nil {
		t.Fatal(err)
	}
	qid, err := f.bot.TapButton(f.dm, msg2.ID, f.alice, "rec1:c:n2")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.AnswerCallbackQuery(ctx, &tgbot.AnswerCallbackQueryParams{CallbackQueryID: qid, Text: "Continuing"}); err != nil || !ok {
		t.Fatalf("answer: %v %v", ok, err)
	}
	_, err = b.AnswerCallbackQuery(ctx, &tgbot.AnswerCallbackQueryParams{CallbackQueryID: qid, Text: "again"})
	if !errors.Is(err, tgbot.ErrorBadRequest) || !strings.Contains(err.Error(), "query is too old") {
		t.Fatalf("second answer: %v", err)
	}
}

// collector gathers updates the library hands to its default handler.
type collector struct {
	mu  sync.Mutex
	ups []*models.Update
	ch  chan struct{}
}

func newCollector() *collector { return &collector{ch: make(chan struct{}, 100)} }

func (c *collector) handle(_ context.Context, _ *tgbot.Bot, u *models.Update) {
	c.mu.Lock()
	c.ups = append(c.ups, u)
	c.mu.Unlock()
	c.ch <- struct{}{}
}

func (c *collector) wait(t *testing.T, n int) []*models.Update {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		if len(c.ups) >= n {
			out := append([]*models.Update(nil), c.ups...)
			c.mu.Unlock()
			return out
		}
		c.mu.Unlock()
		select {
		case <-c.ch:
		case <-timeout:
			t.Fatalf("received %d updates, want %d", len(c.ups), n)
		}
	}
}

func TestLibraryLongPolling(t *testing.T) {
	f := newFixture(t)
	col := newCollector()
	b := newLibBot(t, f, tgbot.WithDefaultHandler(col.handle), tgbot.WithNotAsyncHandlers())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Start(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	msg, err := b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: f.dm.ID, Text: "pick", ReplyMarkup: keyboard("rec1:c:n1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.bot.TypeMessage(f.dm, f.alice, "typed", MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.bot.TapButton(f.dm, msg.ID, f.alice, "rec1:c:n1"); err != nil {
		t.Fatal(err)
	}
	ups := col.wait(t, 2)
	if ups[0].Message == nil || ups[0].Message.Text != "typed" || ups[0].Message.From.LanguageCode != "en" {
		t.Fatalf("first update = %+v", ups[0])
	}
	cq := ups[1].CallbackQuery
	if cq == nil || cq.Data != "rec1:c:n1" || cq.Message.Message == nil || cq.Message.Message.ID != msg.ID {
		t.Fatalf("second update = %+v", ups[1])
	}
	// the library confirmed what it received
	if err := f.bot.WaitFor(ctx, func() bool { return f.bot.PendingUpdates() == 0 }); err != nil {
		t.Fatal(err)
	}
}

func TestLibraryWebhook(t *testing.T) {
	f := newFixture(t, WithWebhookRetry(2, time.Millisecond))
	col := newCollector()
	b := newLibBot(t, f, tgbot.WithDefaultHandler(col.handle), tgbot.WithWebhookSecretToken("right-secret"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.StartWebhook(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	hook := httptestServer(t, b.WebhookHandler())

	if _, err := b.SetWebhook(ctx, &tgbot.SetWebhookParams{URL: hook, SecretToken: "right-secret"}); err != nil {
		t.Fatal(err)
	}
	info, err := b.GetWebhookInfo(ctx)
	if err != nil || info.URL != hook {
		t.Fatalf("webhook info %+v %v", info, err)
	}
	if _, err := f.bot.TypeMessage(f.dm, f.alice, "over the hook", MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	ups := col.wait(t, 1)
	if ups[0].Message.Text != "over the hook" {
		t.Fatalf("update = %+v", ups[0])
	}
	if _, err := b.DeleteWebhook(ctx, &tgbot.DeleteWebhookParams{}); err != nil {
		t.Fatal(err)
	}
}
