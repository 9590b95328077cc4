package telegram

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/telegram/tgfake"
)

func TestNewClientNeedsToken(t *testing.T) {
	_, err := NewClient(Config{})
	if protocol.CodeOf(err) != "invalid_token" {
		t.Fatalf("err = %v", err)
	}
}

func TestGetMe(t *testing.T) {
	e := newEnv(t)
	me, err := e.c.GetMe(waitCtx(t))
	if err != nil || me.ID != e.bot.ID || me.Username != "reply_bot" {
		t.Fatalf("GetMe = %+v, %v", me, err)
	}
	bad, _ := NewClient(Config{Token: "1:bad", ServerURL: e.fake.URL(), Logger: quiet})
	_, err = bad.GetMe(waitCtx(t))
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != 401 || ae.Description != "Unauthorized" {
		t.Fatalf("bad token: %v", err)
	}
}

func TestSendWithKeyboard(t *testing.T) {
	e := newEnv(t)
	sent, err := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: "<b>Done.</b> Anything else?", ParseMode: ParseModeHTML, Keyboard: continueStop})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.MessageIDs) != 1 {
		t.Fatalf("sent = %+v", sent)
	}
	m, ok := e.bot.Message(e.dm, sent.LastMessageID())
	if !ok || m.Text != "Done. Anything else?" || len(m.Keyboard) != 1 || len(m.Keyboard[0]) != 2 {
		t.Fatalf("message = %+v", m)
	}
	if m.Keyboard[0][0].Text != "A. 繼續" || m.Keyboard[0][1].CallbackData != "rec1:s:n1" {
		t.Fatalf("keyboard = %+v", m.Keyboard)
	}
}

func TestSendWithoutKeyboard(t *testing.T) {
	e := newEnv(t)
	sent, err := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := e.bot.Message(e.dm, sent.LastMessageID()); m.Keyboard != nil {
		t.Fatalf("unexpected keyboard %+v", m.Keyboard)
	}
	if p := e.bot.Calls("sendMessage")[0].Params; p["reply_markup"] != "" {
		t.Fatalf("reply_markup sent for no keyboard: %q", p["reply_markup"])
	}
}

func TestSendSplitsLongTextKeyboardOnLast(t *testing.T) {
	e := newEnv(t)
	var paras []string
	for i := range 30 {
		paras = append(paras, strings.TrimSpace(strings.Repeat("段落"+string(rune('A'+i%26))+" 😀 ", 60)))
	}
	text := strings.Join(paras, "\n\n")
	if UTF16Len(text) <= MaxMessageLength*2 {
		t.Fatalf("test text too short: %d", UTF16Len(text))
	}
	sent, err := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: text, Keyboard: continueStop})
	if err != nil {
		t.Fatal(err)
	}
	msgs := e.bot.Messages(e.dm)
	if len(sent.MessageIDs) < 3 || len(msgs) != len(sent.MessageIDs) {
		t.Fatalf("sent %d chunks, chat has %d messages", len(sent.MessageIDs), len(msgs))
	}
	var rebuilt []string
	for i, m := range msgs {
		if m.ID != sent.MessageIDs[i] {
			t.Fatalf("chunk %d out of order", i)
		}
		if UTF16Len(m.Text) > MaxMessageLength {
			t.Fatalf("chunk %d has %d units", i, UTF16Len(m.Text))
		}
		if last := i == len(msgs)-1; (m.Keyboard != nil) != last {
			t.Fatalf("chunk %d keyboard = %v; the keyboard belongs on the last chunk only", i, m.Keyboard)
		}
		rebuilt = append(rebuilt, m.Text)
	}
	// every cut fell on a paragraph break, and only the break was dropped
	if strings.Join(rebuilt, "\n\n") != text {
		t.Fatal("chunks are not the text cut at paragraph breaks")
	}
}

func strip(s string) string { return strings.Join(strings.Fields(s), "") }

func TestSendLongMarkupStaysValid(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	b.WriteString("<b>Report</b>\n\n<pre><code class=\"language-go\">")
	for i := range 400 {
		b.WriteString("fmt.Println(&quot;line &lt;")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString("&gt;&quot;)\n")
	}
	b.WriteString("</code></pre>\n\n<i>")
	b.WriteString(strings.Repeat("italic words ", 500))
	b.WriteString("</i>")
	sent, err := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: b.String(), ParseMode: ParseModeHTML, Keyboard: continueStop})
	if err != nil {
		t.Fatalf("the fake rejected a chunk: %v", err)
	}
	if len(sent.MessageIDs) < 3 {
		t.Fatalf("chunks = %d", len(sent.MessageIDs))
	}

	var md strings.Builder
	md.WriteString("*Report*\n\n```go\n")
	for range 500 {
		md.WriteString("fmt.Println(\"a\\\\b\")\n")
	}
	md.WriteString("```\n\n_")
	md.WriteString(strings.Repeat("italic words ", 400))
	md.WriteString("_ done\\.")
	sent, err = e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: md.String(), ParseMode: ParseModeMarkdownV2})
	if err != nil {
		t.Fatalf("the fake rejected a MarkdownV2 chunk: %v", err)
	}
	if len(sent.MessageIDs) < 3 {
		t.Fatalf("chunks = %d", len(sent.MessageIDs))
	}
}

func TestSendThreadAndBusiness(t *testing.T) {
	e := newEnv(t)
	forum := e.bot.Supergroup("Ops", true)
	topic, err := e.bot.CreateTopic(forum, "Deploys")
	if err != nil {
		t.Fatal(err)
	}
	sent, err := e.c.SendMessage(waitCtx(t), SendParams{ChatID: forum.ID, ThreadID: topic, Text: "in topic", Keyboard: continueStop})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := e.bot.Message(forum, sent.LastMessageID()); m.ThreadID != topic || m.Keyboard == nil {
		t.Fatalf("topic message = %+v", m)
	}
	owner := tgfake.User{ID: 2001, FirstName: "Shop"}
	bc := e.bot.ConnectBusiness(owner)
	carol := tgfake.User{ID: 3001, FirstName: "Carol"}
	bchat, _ := e.bot.BusinessChat(bc, carol)
	sent, err = e.c.SendMessage(waitCtx(t), SendParams{ChatID: carol.ID, BusinessConnectionID: bc, Text: "hello", Keyboard: continueStop})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := e.bot.Message(bchat, sent.LastMessageID())
	if !ok || m.BusinessConnectionID != bc || m.From.ID != owner.ID {
		t.Fatalf("business message = %+v", m)
	}
	if err := e.c.EditKeyboard(waitCtx(t), EditKeyboardParams{ChatID: carol.ID, BusinessConnectionID: bc, MessageID: m.ID}); err != nil {
		t.Fatal(err)
	}
	if m, _ := e.bot.Message(bchat, m.ID); m.Keyboard != nil {
		t.Fatal("business keyboard not removed")
	}
}

func TestSendValidation(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name  string
		p     SendParams
		field string
	}{
		{"no chat", SendParams{Text: "x"}, "chatId"},
		{"empty text", SendParams{ChatID: e.dm.ID, Text: " \n"}, "text"},
		{"bad parse mode", SendParams{ChatID: e.dm.ID, Text: "x", ParseMode: "bbcode"}, "parseMode"},
		{"negative thread", SendParams{ChatID: e.dm.ID, Text: "x", ThreadID: -1}, "threadId"},
		{"long callback data", SendParams{ChatID: e.dm.ID, Text: "x", Keyboard: Keyboard{{{Text: "a", CallbackData: strings.Repeat("d", 65)}}}}, "keyboard[0][0].callbackData"},
		{"button without label", SendParams{ChatID: e.dm.ID, Text: "x", Keyboard: Keyboard{{{CallbackData: "d"}}}}, "keyboard[0][0].text"},
		{"button with two actions", SendParams{ChatID: e.dm.ID, Text: "x", Keyboard: Keyboard{{{Text: "a", CallbackData: "d", URL: "https://x"}}}}, "keyboard[0][0]"},
		{"button without action", SendParams{ChatID: e.dm.ID, Text: "x", Keyboard: Keyboard{{{Text: "a"}}}}, "keyboard[0][0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.c.SendMessage(waitCtx(t), tc.p)
			pe := protocol.AsError(err)
			if err == nil || pe.Class != protocol.ClassInvalid || pe.FieldErrors[tc.field] == "" {
				t.Fatalf("err = %v (fields %v), want a field error on %s", err, pe.FieldErrors, tc.field)
			}
		})
	}
	if n := len(e.bot.Calls("")); n != 0 {
		t.Fatalf("invalid sends reached Telegram: %d calls", n)
	}
}

func TestSendReportsTelegramErrors(t *testing.T) {
	e := newEnv(t)
	_, err := e.c.SendMessage(waitCtx(t), SendParams{ChatID: 99999, Text: "x"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != 400 || ae.Description != "Bad Request: chat not found" || ae.Method != "sendMessage" {
		t.Fatalf("err = %v", err)
	}
}

func TestEditKeyboardReplaceAndRemove(t *testing.T) {
	e := newEnv(t)
	sent, _ := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: "reply", Keyboard: continueStop})
	id := sent.LastMessageID()
	chosen := Keyboard{{{Text: "✓ A. 繼續", Disabled: true}}}
	if err := e.c.EditKeyboard(waitCtx(t), EditKeyboardParams{ChatID: e.dm.ID, MessageID: id, Keyboard: chosen}); err != nil {
		t.Fatal(err)
	}
	m, _ := e.bot.Message(e.dm, id)
	if len(m.Keyboard) != 1 || !m.Keyboard[0][0].Disabled || m.Keyboard[0][0].Text != "✓ A. 繼續" {
		t.Fatalf("keyboard = %+v", m.Keyboard)
	}
	if err := e.c.EditKeyboard(waitCtx(t), EditKeyboardParams{ChatID: e.dm.ID, MessageID: id}); err != nil {
		t.Fatal(err)
	}
	if m, _ := e.bot.Message(e.dm, id); m.Keyboard != nil {
		t.Fatal("keyboard not removed")
	}
	err := e.c.EditKeyboard(waitCtx(t), EditKeyboardParams{ChatID: e.dm.ID, MessageID: id + 100})
	if !IsMessageNotFound(err) {
		t.Fatalf("unknown message: %v", err)
	}
	if err := e.c.EditKeyboard(waitCtx(t), EditKeyboardParams{ChatID: e.dm.ID}); protocol.ClassOf(err) != protocol.ClassInvalid {
		t.Fatalf("missing message id: %v", err)
	}
}

func TestEditNotModifiedIsSuccess(t *testing.T) {
	e := newEnv(t)
	sent, _ := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: "reply", Keyboard: continueStop})
	err := e.c.EditKeyboard(waitCtx(t), EditKeyboardParams{ChatID: e.dm.ID, MessageID: sent.LastMessageID(), Keyboard: continueStop})
	if err != nil {
		t.Fatalf("not modified must be success: %v", err)
	}
	calls := e.bot.Calls("editMessageReplyMarkup")
	if len(calls) != 1 || calls[0].Status != 400 || !strings.Contains(calls[0].Description, "message is not modified") {
		t.Fatalf("Telegram was not asked, or answered otherwise: %+v", calls)
	}
}

func TestEditRetriesAfter429(t *testing.T) {
	e := newEnv(t)
	sent, _ := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: "reply", Keyboard: continueStop})
	e.bot.FailNext("editMessageReplyMarkup", 1, 2)
	if err := e.c.EditKeyboard(waitCtx(t), EditKeyboardParams{ChatID: e.dm.ID, MessageID: sent.LastMessageID()}); err != nil {
		t.Fatal(err)
	}
	calls := e.bot.Calls("editMessageReplyMarkup")
	if len(calls) != 2 || calls[0].Status != 429 || calls[1].Status != 200 {
		t.Fatalf("calls = %+v", calls)
	}
	if s := e.slept(); len(s) != 1 || s[0] != 2*time.Second {
		t.Fatalf("waits = %v, want exactly retry_after (2s)", s)
	}
	if m, _ := e.bot.Message(e.dm, sent.LastMessageID()); m.Keyboard != nil {
		t.Fatal("edit not applied")
	}
}

func TestRateLimitWindowAppliesToTheChat(t *testing.T) {
	e := newEnv(t)
	e.bot.FailNext("sendMessage", 1, 5)
	other := e.bot.PrivateChat(tgfake.User{ID: 1002, FirstName: "Bob"})
	// while the retry waits, another send to Alice's chat must wait too,
	// and one to Bob's chat must not
	var afterBob, afterAlice int
	e.setOnSleep(func(ctx context.Context, d time.Duration) error {
		e.setOnSleep(nil)
		if _, err := e.c.SendMessage(ctx, SendParams{ChatID: other.ID, Text: "bob"}); err != nil {
			return err
		}
		afterBob = len(e.slept())
		if _, err := e.c.SendMessage(ctx, SendParams{ChatID: e.dm.ID, Text: "alice again"}); err != nil {
			return err
		}
		afterAlice = len(e.slept())
		return nil
	})
	if _, err := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: "alice"}); err != nil {
		t.Fatal(err)
	}
	if afterBob != 1 {
		t.Fatalf("sending to another chat waited: %v", e.slept())
	}
	if afterAlice != 2 {
		t.Fatalf("a send to the rate-limited chat did not wait: %v", e.slept())
	}
	if len(e.bot.Messages(e.dm)) != 2 || len(e.bot.Messages(other)) != 1 {
		t.Fatal("messages missing")
	}
}

func TestEdit429GivesUp(t *testing.T) {
	e := newEnv(t)
	sent, _ := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: "reply", Keyboard: continueStop})
	e.bot.FailNext("editMessageReplyMarkup", 10, 1)
	err := e.c.EditKeyboard(waitCtx(t), EditKeyboardParams{ChatID: e.dm.ID, MessageID: sent.LastMessageID()})
	if !IsRateLimited(err) {
		t.Fatalf("err = %v", err)
	}
	if n := len(e.bot.Calls("editMessageReplyMarkup")); n != 4 {
		t.Fatalf("attempts = %d, want 1 + MaxRetries(3)", n)
	}
	// a retry_after beyond MaxRetryAfter is not waited out
	e2 := newEnv(t)
	sent, _ = e2.c.SendMessage(waitCtx(t), SendParams{ChatID: e2.dm.ID, Text: "reply", Keyboard: continueStop})
	e2.bot.FailNext("editMessageReplyMarkup", 1, 3600)
	err = e2.c.EditKeyboard(waitCtx(t), EditKeyboardParams{ChatID: e2.dm.ID, MessageID: sent.LastMessageID()})
	var ae *APIError
	if !errors.As(err, &ae) || ae.RetryAfter != time.Hour || len(e2.slept()) != 0 {
		t.Fatalf("err = %v, waits = %v", err, e2.slept())
	}
}

func TestEditWaitHonoursContext(t *testing.T) {
	e := newEnv(t)
	sent, _ := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: "reply", Keyboard: continueStop})
	e.bot.FailNext("editMessageReplyMarkup", 1, 30)
	ctx, cancel := context.WithCancel(context.Background())
	e.setOnSleep(func(ctx context.Context, d time.Duration) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	err := e.c.EditKeyboard(ctx, EditKeyboardParams{ChatID: e.dm.ID, MessageID: sent.LastMessageID()})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if n := len(e.bot.Calls("editMessageReplyMarkup")); n != 1 {
		t.Fatalf("calls after cancel = %d", n)
	}
}

func TestEditsOfOneMessageCoalesce(t *testing.T) {
	e := newEnv(t)
	sent, _ := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: "reply", Keyboard: continueStop})
	id := sent.LastMessageID()
	e.bot.FailNext("editMessageReplyMarkup", 1, 3)

	final := Keyboard{{{Text: "✓ B", Disabled: true}}}
	key := editKey{chat: e.dm.ID, message: id}
	results := make(chan error, 2)
	// while the first edit waits out the 429, two newer edits arrive; only
	// the newest may reach Telegram
	e.setOnSleep(func(ctx context.Context, d time.Duration) error {
		e.setOnSleep(nil)
		go func() {
			results <- e.c.EditKeyboard(ctx, EditKeyboardParams{ChatID: e.dm.ID, MessageID: id, Keyboard: Keyboard{{{Text: "✓ A", Disabled: true}}}})
		}()
		waitForEdits(t, e.c, key, 2)
		go func() {
			results <- e.c.EditKeyboard(ctx, EditKeyboardParams{ChatID: e.dm.ID, MessageID: id, Keyboard: final})
		}()
		waitForEdits(t, e.c, key, 3)
		return nil
	})
	first := e.c.EditKeyboard(waitCtx(t), EditKeyboardParams{ChatID: e.dm.ID, MessageID: id})
	if first != nil {
		t.Fatalf("superseded edit: %v", first)
	}
	for range 2 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	calls := e.bot.Calls("editMessageReplyMarkup")
	if len(calls) != 2 || calls[0].Status != 429 || calls[1].Status != 200 || !strings.Contains(calls[1].Params["reply_markup"], "✓ B") {
		t.Fatalf("calls = %+v", calls)
	}
	m, _ := e.bot.Message(e.dm, id)
	if m.Edits != 1 || m.Keyboard[0][0].Text != "✓ B" {
		t.Fatalf("message = %+v", m)
	}
	e.c.mu.Lock()
	left := len(e.c.edits)
	e.c.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d edit slots leaked", left)
	}
}

// waitForEdits waits until n edits of key are registered (a sync point, not
// a timing assertion).
func waitForEdits(t *testing.T, c *Client, key editKey, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		s := c.edits[key]
		ok := s != nil && s.waiting >= n
		c.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("edit %d never registered", n)
}

func TestAnswerCallback(t *testing.T) {
	e := newEnv(t)
	sent, _ := e.c.SendMessage(waitCtx(t), SendParams{ChatID: e.dm.ID, Text: "reply", Keyboard: continueStop})
	qid, err := e.bot.TapButton(e.dm, sent.LastMessageID(), e.alice, "rec1:c:n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.AnswerCallback(waitCtx(t), CallbackAnswer{QueryID: qid, Text: "好的，繼續"}); err != nil {
		t.Fatal(err)
	}
	if a, ok := e.bot.Answer(qid); !ok || a.Text != "好的，繼續" || a.ShowAlert {
		t.Fatalf("answer = %+v", a)
	}
	// a second answer is "query is too old" at Telegram, success here
	if err := e.c.AnswerCallback(waitCtx(t), CallbackAnswer{QueryID: qid, Text: "again"}); err != nil {
		t.Fatalf("duplicate answer: %v", err)
	}
	// so is an answer after the query expired
	qid2, _ := e.bot.TapButton(e.dm, sent.LastMessageID(), e.alice, "rec1:s:n1")
	e.clk.Advance(time.Minute)
	if err := e.c.AnswerCallback(waitCtx(t), CallbackAnswer{QueryID: qid2, Text: "late"}); err != nil {
		t.Fatalf("expired answer: %v", err)
	}
	// long texts are shortened, not refused
	qid3, _ := e.bot.TapButton(e.dm, sent.LastMessageID(), e.alice, "rec1:s:n1")
	long := strings.Repeat("這個回覆已經不是最新的了😀", 30)
	if err := e.c.AnswerCallback(waitCtx(t), CallbackAnswer{QueryID: qid3, Text: long, ShowAlert: true}); err != nil {
		t.Fatal(err)
	}
	a, _ := e.bot.Answer(qid3)
	if UTF16Len(a.Text) > MaxCallbackAnswer || !strings.HasSuffix(a.Text, "…") || !a.ShowAlert || !strings.HasPrefix(long, strings.TrimSuffix(a.Text, "…")) {
		t.Fatalf("shortened answer = %q (%d units)", a.Text, UTF16Len(a.Text))
	}
	if err := e.c.AnswerCallback(waitCtx(t), CallbackAnswer{}); protocol.ClassOf(err) != protocol.ClassInvalid {
		t.Fatalf("missing id: %v", err)
	}
}

func TestTruncateUTF16(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdefghij", 10, "abcdefghij"},
		{"abcdefghijk", 10, "abcdefghi…"},
		{"😀😀😀😀😀😀", 10, "😀😀😀😀…"},
		{"word word word", 10, "word word…"},
	} {
		if got := truncateUTF16(tc.in, tc.n); got != tc.want || UTF16Len(got) > tc.n {
			t.Errorf("truncateUTF16(%q, %d) = %q", tc.in, tc.n, got)
		}
	}
}

func TestSetAndDeleteWebhook(t *testing.T) {
	e := newEnv(t)
	if err := e.c.SetWebhook(waitCtx(t), WebhookParams{URL: "http://127.0.0.1:1/hook", SecretToken: "bad secret"}); protocol.ClassOf(err) != protocol.ClassInvalid {
		t.Fatalf("bad secret: %v", err)
	}
	if err := e.c.SetWebhook(waitCtx(t), WebhookParams{URL: "http://127.0.0.1:1/hook", SecretToken: "good_Secret-1", AllowedUpdates: UpdateTypes}); err != nil {
		t.Fatal(err)
	}
	calls := e.bot.Calls("setWebhook")
	if len(calls) != 1 || calls[0].Params["secret_token"] != "good_Secret-1" || !strings.Contains(calls[0].Params["allowed_updates"], "callback_query") {
		t.Fatalf("setWebhook call = %+v", calls)
	}
	if err := e.c.DeleteWebhook(waitCtx(t), false); err != nil {
		t.Fatal(err)
	}
}

func TestAPIErrorProtocol(t *testing.T) {
	cases := []struct {
		code   int
		class  protocol.Class
		pcode  string
		status int
	}{
		{400, protocol.ClassInvalid, "telegram_bad_request", 422},
		{403, protocol.ClassDependency, "telegram_forbidden", 502},
		{401, protocol.ClassDependency, "telegram_unauthorized", 502},
		{429, protocol.ClassUnavailable, "telegram_rate_limited", 429},
		{502, protocol.ClassDependency, "telegram_error", 502},
	}
	for _, tc := range cases {
		e := &APIError{Method: "sendMessage", Code: tc.code, Description: "x", RetryAfter: 3 * time.Second}
		pe := e.Protocol()
		if pe.Class != tc.class || pe.Code != tc.pcode || pe.HTTPStatus() != tc.status || pe.NextAction == "" || !errors.Is(pe, e) {
			t.Errorf("%d -> %+v", tc.code, pe)
		}
	}
}
