package telegram_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/telegram"
	"github.com/switchboard-hub/switchboard/internal/telegram/tgfake"
)

// A reply with reply-end controls, and the user's tap coming back through
// long polling.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake := tgfake.New()
	defer fake.Close()
	bot := fake.AddBot("reply_bot")
	alice := tgfake.User{ID: 1001, FirstName: "Alice", LanguageCode: "en"}
	chat := bot.PrivateChat(alice)

	c, err := telegram.NewClient(telegram.Config{Token: bot.Token, ServerURL: fake.URL()})
	if err != nil {
		panic(err)
	}
	sent, err := c.SendMessage(ctx, telegram.SendParams{ChatID: chat.ID, Text: "Done. Anything else?",
		Keyboard: telegram.Keyboard{{
			{Text: "Continue", CallbackData: "rec1:c:n1"},
			{Text: "Stop here, no further action needed", CallbackData: "rec1:s:n1"},
		}}})
	if err != nil {
		panic(err)
	}

	taps := make(chan *telegram.CallbackTap, 1)
	poller, err := telegram.NewPoller(telegram.PollerConfig{Client: c, Receiver: &telegram.Receiver{
		BotID:   "bot_1",
		Deduper: telegram.NewMemoryDeduper(),
		Handler: func(ctx context.Context, ev telegram.Event) {
			if ev.Tap != nil {
				taps <- ev.Tap
			}
		},
	}})
	if err != nil {
		panic(err)
	}
	go func() { _ = poller.Run(ctx) }()

	if _, err := bot.TapButton(chat, sent.LastMessageID(), alice, "rec1:s:n1"); err != nil {
		panic(err)
	}
	tap := <-taps
	_ = c.AnswerCallback(ctx, telegram.CallbackAnswer{QueryID: tap.QueryID, Text: "Closed."})
	_ = c.EditKeyboard(ctx, telegram.EditKeyboardParams{ChatID: tap.ChatID, MessageID: tap.MessageID,
		Keyboard: telegram.Keyboard{{{Text: "✓ Stop here", Disabled: true}}}})

	m, _ := bot.Message(chat, sent.LastMessageID())
	a, _ := bot.Answer(tap.QueryID)
	fmt.Println(tap.Data, "|", a.Text, "|", m.Keyboard[0][0].Text)
	// Output: rec1:s:n1 | Closed. | ✓ Stop here
}

func BenchmarkSplitText(b *testing.B) {
	text := strings.Repeat("<b>Paragraph</b> with some words &amp; an emoji 😀.\nAnother line here.\n\n", 2000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		telegram.SplitText(text, telegram.ParseModeHTML, telegram.MaxMessageLength)
	}
}
