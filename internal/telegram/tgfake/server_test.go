package tgfake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/clock"
)

// apiResp is a decoded Bot API answer.
type apiResp struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

func decode(t *testing.T, resp *http.Response) (int, apiResp) {
	t.Helper()
	defer resp.Body.Close()
	var r apiResp
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("undecodable answer %q: %v", body, err)
	}
	if !r.OK && r.ErrorCode != resp.StatusCode {
		t.Fatalf("error_code %d differs from HTTP status %d", r.ErrorCode, resp.StatusCode)
	}
	return resp.StatusCode, r
}

// callJSON posts a JSON body to a method.
func callJSON(t *testing.T, s *Server, token, method string, body map[string]any) (int, apiResp) {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := http.Post(s.URL()+"/bot"+token+"/"+method, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, resp)
}

// callForm posts a urlencoded body to a method.
func callForm(t *testing.T, s *Server, token, method string, v url.Values) (int, apiResp) {
	t.Helper()
	resp, err := http.PostForm(s.URL()+"/bot"+token+"/"+method, v)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, resp)
}

// callMultipart posts a multipart/form-data body to a method.
func callMultipart(t *testing.T, s *Server, token, method string, v map[string]string) (int, apiResp) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, val := range v {
		_ = w.WriteField(k, val)
	}
	_ = w.Close()
	resp, err := http.Post(s.URL()+"/bot"+token+"/"+method, w.FormDataContentType(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, resp)
}

type fixture struct {
	s     *Server
	bot   *Bot
	clk   *clock.Fake
	alice User
	dm    Chat
}

func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := New(append([]Option{WithClock(clk)}, opts...)...)
	t.Cleanup(s.Close)
	bot := s.AddBot("reply_bot")
	alice := User{ID: 1001, FirstName: "Alice", Username: "alice", LanguageCode: "en"}
	return &fixture{s: s, bot: bot, clk: clk, alice: alice, dm: bot.PrivateChat(alice)}
}

var twoButtons = `{"inline_keyboard":[[{"text":"Continue","callback_data":"rec1:c:n1"},{"text":"Stop","callback_data":"rec1:s:n1"}]]}`

func (f *fixture) send(t *testing.T, text, markup string) int {
	t.Helper()
	status, r := callJSON(t, f.s, f.bot.Token, "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": text, "reply_markup": markup})
	if status != 200 {
		t.Fatalf("sendMessage: %d %s", status, r.Description)
	}
	var m struct {
		MessageID int `json:"message_id"`
	}
	_ = json.Unmarshal(r.Result, &m)
	return m.MessageID
}

func TestRoutingAndAuth(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name, path string
		status     int
		desc       string
	}{
		{"unknown token", "/bot1:nope/getMe", 401, "Unauthorized"},
		{"unknown method", "/bot" + f.bot.Token + "/sendTelepathy", 404, "Not Found"},
		{"no method", "/bot" + f.bot.Token + "/", 404, "Not Found"},
		{"not a bot path", "/api/getMe", 404, "Not Found"},
		{"method names are case-insensitive", "/bot" + f.bot.Token + "/GETME", 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Get(f.s.URL() + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			status, r := decode(t, resp)
			if status != tc.status || r.Description != tc.desc {
				t.Fatalf("got %d %q, want %d %q", status, r.Description, tc.status, tc.desc)
			}
		})
	}
}

func TestGetMe(t *testing.T) {
	f := newFixture(t)
	_, r := callJSON(t, f.s, f.bot.Token, "getMe", nil)
	var me struct {
		ID       int64  `json:"id"`
		IsBot    bool   `json:"is_bot"`
		Username string `json:"username"`
	}
	if err := json.Unmarshal(r.Result, &me); err != nil {
		t.Fatal(err)
	}
	if me.ID != f.bot.ID || !me.IsBot || me.Username != "reply_bot" {
		t.Fatalf("getMe = %+v", me)
	}
	if !strings.HasPrefix(f.bot.Token, fmt.Sprint(f.bot.ID)+":") {
		t.Fatalf("token %q does not start with the bot id", f.bot.Token)
	}
}

func TestSendMessageEncodings(t *testing.T) {
	f := newFixture(t)
	chat := fmt.Sprint(f.dm.ID)
	encodings := map[string]func() (int, apiResp){
		"json": func() (int, apiResp) {
			// reply_markup as an object, as JSON bodies may carry it
			var markup map[string]any
			_ = json.Unmarshal([]byte(twoButtons), &markup)
			return callJSON(t, f.s, f.bot.Token, "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "json", "reply_markup": markup})
		},
		"urlencoded": func() (int, apiResp) {
			return callForm(t, f.s, f.bot.Token, "sendMessage", url.Values{"chat_id": {chat}, "text": {"form"}, "reply_markup": {twoButtons}})
		},
		"multipart": func() (int, apiResp) {
			return callMultipart(t, f.s, f.bot.Token, "sendMessage", map[string]string{"chat_id": chat, "text": "multipart", "reply_markup": twoButtons})
		},
		"query string": func() (int, apiResp) {
			resp, err := http.Get(f.s.URL() + "/bot" + f.bot.Token + "/sendMessage?" + url.Values{"chat_id": {chat}, "text": {"query"}, "reply_markup": {twoButtons}}.Encode())
			if err != nil {
				t.Fatal(err)
			}
			return decode(t, resp)
		},
	}
	for name, do := range encodings {
		t.Run(name, func(t *testing.T) {
			status, r := do()
			if status != 200 {
				t.Fatalf("%d %s", status, r.Description)
			}
			var m wMessage
			if err := json.Unmarshal(r.Result, &m); err != nil {
				t.Fatal(err)
			}
			if m.ReplyMarkup == nil || len(m.ReplyMarkup.InlineKeyboard[0]) != 2 || m.ReplyMarkup.InlineKeyboard[0][1].CallbackData != "rec1:s:n1" {
				t.Fatalf("keyboard not kept: %+v", m.ReplyMarkup)
			}
			stored, ok := f.bot.Message(f.dm, m.MessageID)
			if !ok || stored.Keyboard[0][0].Text != "Continue" || !stored.ByBot {
				t.Fatalf("stored message = %+v", stored)
			}
		})
	}
}

func TestTelegramErrors(t *testing.T) {
	f := newFixture(t)
	id := f.send(t, "hello", twoButtons)
	typed, err := f.bot.TypeMessage(f.dm, f.alice, "hi bot", MessageOpts{})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", 4097)
	// 2048 emoji are 4096 UTF-16 units; one more is over the limit
	emoji := strings.Repeat("😀", 2049)
	data65 := strings.Repeat("x", 65)
	cases := []struct {
		name   string
		method string
		body   map[string]any
		status int
		desc   string
	}{
		{"callback data over 64 bytes", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "x",
			"reply_markup": `{"inline_keyboard":[[{"text":"a","callback_data":"` + data65 + `"}]]}`}, 400, "Bad Request: BUTTON_DATA_INVALID"},
		{"empty callback data", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "x",
			"reply_markup": `{"inline_keyboard":[[{"text":"a","callback_data":""}]]}`}, 400, "Bad Request: BUTTON_DATA_INVALID"},
		{"text button in inline keyboard", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "x",
			"reply_markup": `{"inline_keyboard":[[{"text":"a"}]]}`}, 400, "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"},
		{"markup not JSON", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "x", "reply_markup": "{nope"}, 400, "Bad Request: can't parse reply keyboard markup JSON object"},
		{"text too long", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": long}, 400, "Bad Request: message is too long"},
		{"text too long in UTF-16 units", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": emoji}, 400, "Bad Request: message is too long"},
		{"empty text", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": ""}, 400, "Bad Request: message text is empty"},
		{"blank text", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "  \n "}, 400, "Bad Request: message text is empty"},
		{"HTML that is only tags", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "<b></b>", "parse_mode": "HTML"}, 400, "Bad Request: message text is empty"},
		{"unclosed HTML tag", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "<b>bold", "parse_mode": "HTML"}, 400,
			"Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"b\""},
		{"unescaped MarkdownV2", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "end.", "parse_mode": "MarkdownV2"}, 400,
			"Bad Request: can't parse entities: Character '.' is reserved and must be escaped with the preceding '\\'"},
		{"unknown parse mode", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "x", "parse_mode": "BBCode"}, 400, "Bad Request: unsupported parse_mode"},
		{"unknown chat", "sendMessage", map[string]any{"chat_id": 424242, "text": "x"}, 400, "Bad Request: chat not found"},
		{"missing chat", "sendMessage", map[string]any{"text": "x"}, 400, "Bad Request: chat_id is empty"},
		{"thread in a private chat", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "x", "message_thread_id": 7}, 400, "Bad Request: message thread not found"},
		{"unknown business connection", "sendMessage", map[string]any{"chat_id": f.dm.ID, "text": "x", "business_connection_id": "nope"}, 400, "Bad Request: business connection not found"},
		{"identical markup", "editMessageReplyMarkup", map[string]any{"chat_id": f.dm.ID, "message_id": id, "reply_markup": twoButtons}, 400,
			"Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"},
		{"identical text and markup", "editMessageText", map[string]any{"chat_id": f.dm.ID, "message_id": id, "text": "hello", "reply_markup": twoButtons}, 400,
			"Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"},
		{"edit of unknown message", "editMessageReplyMarkup", map[string]any{"chat_id": f.dm.ID, "message_id": 999}, 400, "Bad Request: message to edit not found"},
		{"edit text of unknown message", "editMessageText", map[string]any{"chat_id": f.dm.ID, "message_id": 999, "text": "x"}, 400, "Bad Request: message to edit not found"},
		{"edit text too long", "editMessageText", map[string]any{"chat_id": f.dm.ID, "message_id": id, "text": long}, 400, "Bad Request: message is too long"},
		{"edit text empty", "editMessageText", map[string]any{"chat_id": f.dm.ID, "message_id": id, "text": ""}, 400, "Bad Request: message text is empty"},
		{"edit a user's message", "editMessageReplyMarkup", map[string]any{"chat_id": f.dm.ID, "message_id": typed.ID}, 400, "Bad Request: message can't be edited"},
		{"edit with a reply keyboard", "editMessageReplyMarkup", map[string]any{"chat_id": f.dm.ID, "message_id": id, "reply_markup": `{"keyboard":[["a"]]}`}, 400, "Bad Request: inline keyboard expected"},
		{"answer to unknown query", "answerCallbackQuery", map[string]any{"callback_query_id": "123"}, 400,
			"Bad Request: query is too old and response timeout expired or query ID is invalid"},
		{"answer text too long", "answerCallbackQuery", map[string]any{"callback_query_id": "123", "text": strings.Repeat("t", 201)}, 400, "Bad Request: MESSAGE_TOO_LONG"},
		{"bad secret token", "setWebhook", map[string]any{"url": "http://127.0.0.1:1/hook", "secret_token": "has:colon"}, 400, "Bad Request: secret token contains unallowed characters"},
		{"bad webhook url", "setWebhook", map[string]any{"url": "ftp://x"}, 400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := f.bot.Message(f.dm, id)
			status, r := callJSON(t, f.s, f.bot.Token, tc.method, tc.body)
			if status != tc.status || r.Description != tc.desc || r.OK {
				t.Fatalf("got %d %q, want %d %q", status, r.Description, tc.status, tc.desc)
			}
			after, _ := f.bot.Message(f.dm, id)
			if after.Edits != before.Edits || !after.Keyboard.equal(before.Keyboard) || after.Text != before.Text {
				t.Fatalf("a failed call changed the message: %+v -> %+v", before, after)
			}
		})
	}
	if n := len(f.bot.Messages(f.dm)); n != 2 {
		t.Fatalf("failed sends stored messages: %d in chat, want 2", n)
	}
}

func TestEditsChangeState(t *testing.T) {
	f := newFixture(t)
	id := f.send(t, "hello", twoButtons)

	status, r := callJSON(t, f.s, f.bot.Token, "editMessageReplyMarkup", map[string]any{"chat_id": f.dm.ID, "message_id": id,
		"reply_markup": `{"inline_keyboard":[[{"text":"✓ Continue","callback_data":"rec1:x"}]]}`})
	if status != 200 {
		t.Fatalf("replace keyboard: %d %s", status, r.Description)
	}
	m, _ := f.bot.Message(f.dm, id)
	if len(m.Keyboard) != 1 || m.Keyboard[0][0].Text != "✓ Continue" || m.Edits != 1 {
		t.Fatalf("keyboard not replaced: %+v", m)
	}
	// omitting reply_markup removes the keyboard
	status, r = callJSON(t, f.s, f.bot.Token, "editMessageReplyMarkup", map[string]any{"chat_id": f.dm.ID, "message_id": id})
	if status != 200 {
		t.Fatalf("remove keyboard: %d %s", status, r.Description)
	}
	if m, _ := f.bot.Message(f.dm, id); m.Keyboard != nil {
		t.Fatalf("keyboard not removed: %+v", m.Keyboard)
	}
	// removing it again is "not modified"
	status, r = callJSON(t, f.s, f.bot.Token, "editMessageReplyMarkup", map[string]any{"chat_id": f.dm.ID, "message_id": id, "reply_markup": `{"inline_keyboard":[]}`})
	if status != 400 || !strings.Contains(r.Description, "message is not modified") {
		t.Fatalf("second removal: %d %s", status, r.Description)
	}
	// editMessageText keeps the keyboard only when it is sent again
	f.send(t, "other", "")
	status, _ = callJSON(t, f.s, f.bot.Token, "editMessageText", map[string]any{"chat_id": f.dm.ID, "message_id": id, "text": "<b>new</b>", "parse_mode": "HTML", "reply_markup": twoButtons})
	if status != 200 {
		t.Fatal("edit text failed")
	}
	m, _ = f.bot.Message(f.dm, id)
	if m.Text != "new" || m.RawText != "<b>new</b>" || m.Keyboard == nil || m.EditDate.IsZero() {
		t.Fatalf("after text edit: %+v", m)
	}
	status, _ = callJSON(t, f.s, f.bot.Token, "editMessageText", map[string]any{"chat_id": f.dm.ID, "message_id": id, "text": "new"})
	if status != 200 {
		t.Fatal("edit without markup should succeed: the keyboard goes away")
	}
	if m, _ := f.bot.Message(f.dm, id); m.Keyboard != nil {
		t.Fatalf("editMessageText without reply_markup kept the keyboard")
	}
}

func TestCallbackQueries(t *testing.T) {
	f := newFixture(t)
	id := f.send(t, "hello", twoButtons)

	if _, err := f.bot.TapButton(f.dm, id, f.alice, "rec1:zzz"); err == nil {
		t.Fatal("tapping a button the message does not show must fail")
	}
	qid, err := f.bot.TapButton(f.dm, id, f.alice, "rec1:c:n1")
	if err != nil {
		t.Fatal(err)
	}
	status, r := callForm(t, f.s, f.bot.Token, "answerCallbackQuery", url.Values{"callback_query_id": {qid}, "text": {"Noted"}, "show_alert": {"true"}})
	if status != 200 {
		t.Fatalf("answer: %d %s", status, r.Description)
	}
	a, ok := f.bot.Answer(qid)
	if !ok || a.Text != "Noted" || !a.ShowAlert {
		t.Fatalf("answer = %+v", a)
	}
	status, r = callForm(t, f.s, f.bot.Token, "answerCallbackQuery", url.Values{"callback_query_id": {qid}})
	if status != 400 || r.Description != "Bad Request: "+descQueryTooOld {
		t.Fatalf("second answer: %d %s", status, r.Description)
	}

	qid2, err := f.bot.TapButton(f.dm, id, f.alice, "rec1:s:n1")
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(16 * time.Second)
	status, r = callForm(t, f.s, f.bot.Token, "answerCallbackQuery", url.Values{"callback_query_id": {qid2}})
	if status != 400 || r.Description != "Bad Request: "+descQueryTooOld {
		t.Fatalf("expired answer: %d %s", status, r.Description)
	}
	if len(f.bot.Answers()) != 1 {
		t.Fatalf("answers = %+v", f.bot.Answers())
	}
}

func TestRateLimitInjection(t *testing.T) {
	f := newFixture(t)
	id := f.send(t, "hello", twoButtons)
	f.bot.FailNext("editMessageReplyMarkup", 2, 3)
	for i := range 2 {
		status, r := callJSON(t, f.s, f.bot.Token, "editMessageReplyMarkup", map[string]any{"chat_id": f.dm.ID, "message_id": id})
		if status != 429 || r.Parameters.RetryAfter != 3 || r.Description != "Too Many Requests: retry after 3" {
			t.Fatalf("call %d: %d %q retry_after=%d", i, status, r.Description, r.Parameters.RetryAfter)
		}
	}
	if m, _ := f.bot.Message(f.dm, id); m.Keyboard == nil {
		t.Fatal("a rate-limited call changed the message")
	}
	status, _ := callJSON(t, f.s, f.bot.Token, "editMessageReplyMarkup", map[string]any{"chat_id": f.dm.ID, "message_id": id})
	if status != 200 {
		t.Fatalf("third call: %d", status)
	}
	calls := f.bot.Calls("editMessageReplyMarkup")
	if len(calls) != 3 || calls[0].Status != 429 || calls[2].Status != 200 {
		t.Fatalf("call log = %+v", calls)
	}
	// other methods are unaffected
	if status, _ := callJSON(t, f.s, f.bot.Token, "getMe", nil); status != 200 {
		t.Fatal("getMe was rate limited")
	}
}

func TestChatsTopicsAndBusiness(t *testing.T) {
	f := newFixture(t)
	bob := User{ID: 1002, FirstName: "Bob"}
	forum := f.bot.Supergroup("Ops", true)
	topic, err := f.bot.CreateTopic(forum, "Deploys")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.bot.CreateTopic(f.bot.Group("Plain"), "x"); err == nil {
		t.Fatal("topics need a forum")
	}
	if _, err := f.bot.TypeMessage(forum, bob, "in topic", MessageOpts{ThreadID: topic}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.bot.TypeMessage(forum, bob, "nowhere", MessageOpts{ThreadID: topic + 50}); err == nil {
		t.Fatal("typing in an unknown topic must fail")
	}
	if _, err := f.bot.TypeMessage(f.dm, bob, "not my chat", MessageOpts{}); err == nil {
		t.Fatal("Bob cannot write in Alice's private chat")
	}
	status, r := callJSON(t, f.s, f.bot.Token, "sendMessage", map[string]any{"chat_id": forum.ID, "message_thread_id": topic, "text": "reply"})
	if status != 200 {
		t.Fatalf("send to topic: %d %s", status, r.Description)
	}
	var m wMessage
	_ = json.Unmarshal(r.Result, &m)
	if m.MessageThreadID != topic || !m.IsTopicMessage || m.Chat.Type != "supergroup" || !m.Chat.IsForum {
		t.Fatalf("topic message = %+v", m)
	}
	status, r = callJSON(t, f.s, f.bot.Token, "sendMessage", map[string]any{"chat_id": forum.ID, "message_thread_id": topic + 50, "text": "x"})
	if status != 400 || r.Description != "Bad Request: message thread not found" {
		t.Fatalf("unknown topic: %d %s", status, r.Description)
	}

	owner := User{ID: 2001, FirstName: "Shop"}
	bc := f.bot.ConnectBusiness(owner)
	customer := User{ID: 3001, FirstName: "Carol", LanguageCode: "zh-hant"}
	bchat, err := f.bot.BusinessChat(bc, customer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.bot.TypeMessage(bchat, customer, "hello shop", MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	status, r = callJSON(t, f.s, f.bot.Token, "sendMessage", map[string]any{"chat_id": customer.ID, "business_connection_id": bc, "text": "hi Carol", "reply_markup": twoButtons})
	if status != 200 {
		t.Fatalf("business send: %d %s", status, r.Description)
	}
	_ = json.Unmarshal(r.Result, &m)
	if m.BusinessConnectionID != bc || m.From.ID != owner.ID || m.SenderBusinessBot == nil || m.SenderBusinessBot.ID != f.bot.ID {
		t.Fatalf("business message = %+v", m)
	}
	// the business history is separate: editing without the connection id fails
	status, r = callJSON(t, f.s, f.bot.Token, "editMessageReplyMarkup", map[string]any{"chat_id": customer.ID, "message_id": m.MessageID})
	if status != 400 {
		t.Fatalf("edit outside the connection: %d %s", status, r.Description)
	}
	status, _ = callJSON(t, f.s, f.bot.Token, "editMessageReplyMarkup", map[string]any{"chat_id": customer.ID, "business_connection_id": bc, "message_id": m.MessageID})
	if status != 200 {
		t.Fatal("edit through the connection failed")
	}
	if got := f.bot.Messages(bchat); len(got) != 2 || got[1].Keyboard != nil {
		t.Fatalf("business history = %+v", got)
	}
}

func getUpdates(t *testing.T, f *fixture, body map[string]any) []wUpdate {
	t.Helper()
	status, r := callJSON(t, f.s, f.bot.Token, "getUpdates", body)
	if status != 200 {
		t.Fatalf("getUpdates: %d %s", status, r.Description)
	}
	var ups []wUpdate
	if err := json.Unmarshal(r.Result, &ups); err != nil {
		t.Fatal(err)
	}
	return ups
}

func TestGetUpdatesOffsetLimit(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		if _, err := f.bot.TypeMessage(f.dm, f.alice, fmt.Sprintf("m%d", i), MessageOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	ups := getUpdates(t, f, map[string]any{"limit": 2})
	if len(ups) != 2 || ups[0].Message.Text != "m0" {
		t.Fatalf("limit 2: %+v", ups)
	}
	// without an offset nothing is confirmed
	again := getUpdates(t, f, map[string]any{"limit": 2})
	if again[0].UpdateID != ups[0].UpdateID {
		t.Fatal("unconfirmed updates must be returned again")
	}
	rest := getUpdates(t, f, map[string]any{"offset": ups[1].UpdateID + 1})
	if len(rest) != 3 || rest[0].Message.Text != "m2" {
		t.Fatalf("after offset: %+v", rest)
	}
	last := getUpdates(t, f, map[string]any{"offset": -1})
	if len(last) != 1 || last[0].Message.Text != "m4" {
		t.Fatalf("negative offset: %+v", last)
	}
	if got := getUpdates(t, f, map[string]any{"offset": last[0].UpdateID + 1}); len(got) != 0 {
		t.Fatalf("all confirmed, got %+v", got)
	}
	if f.bot.PendingUpdates() != 0 {
		t.Fatal("queue not empty")
	}
}

func TestGetUpdatesLongPollWakesOnUpdate(t *testing.T) {
	f := newFixture(t)
	done := make(chan []wUpdate, 1)
	go func() { done <- getUpdates(t, f, map[string]any{"timeout": 30}) }()
	// wait until the poll is registered, then act
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.bot.WaitFor(ctx, func() bool { f.s.mu.Lock(); defer f.s.mu.Unlock(); return f.bot.poll != nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.bot.TypeMessage(f.dm, f.alice, "wake up", MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ups := <-done:
		if len(ups) != 1 || ups[0].Message.Text != "wake up" {
			t.Fatalf("long poll returned %+v", ups)
		}
	case <-ctx.Done():
		t.Fatal("long poll did not wake")
	}
}

func TestGetUpdatesTimeoutReturnsEmpty(t *testing.T) {
	f := newFixture(t)
	if ups := getUpdates(t, f, map[string]any{"timeout": 1}); len(ups) != 0 {
		t.Fatalf("got %+v", ups)
	}
}

func TestSecondPollTerminatesFirst(t *testing.T) {
	f := newFixture(t)
	first := make(chan apiResp, 1)
	go func() {
		_, r := callJSON(t, f.s, f.bot.Token, "getUpdates", map[string]any{"timeout": 30})
		first <- r
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.bot.WaitFor(ctx, func() bool { f.s.mu.Lock(); defer f.s.mu.Unlock(); return f.bot.poll != nil }); err != nil {
		t.Fatal(err)
	}
	if ups := getUpdates(t, f, map[string]any{"timeout": 0}); len(ups) != 0 {
		t.Fatal("unexpected updates")
	}
	r := <-first
	if r.ErrorCode != 409 || r.Description != descTerminated {
		t.Fatalf("first poll: %+v", r)
	}
}

func TestWebhookBlocksPolling(t *testing.T) {
	f := newFixture(t)
	status, r := callJSON(t, f.s, f.bot.Token, "setWebhook", map[string]any{"url": "http://127.0.0.1:1/hook", "secret_token": "s3cr3t"})
	if status != 200 || r.Description != "Webhook was set" {
		t.Fatalf("setWebhook: %d %s", status, r.Description)
	}
	status, r = callJSON(t, f.s, f.bot.Token, "getUpdates", nil)
	if status != 409 || r.Description != descWebhookActive {
		t.Fatalf("getUpdates with webhook: %d %s", status, r.Description)
	}
	status, r = callJSON(t, f.s, f.bot.Token, "deleteWebhook", nil)
	if status != 200 || r.Description != "Webhook was deleted" {
		t.Fatalf("deleteWebhook: %d %s", status, r.Description)
	}
	if status, _ := callJSON(t, f.s, f.bot.Token, "getUpdates", nil); status != 200 {
		t.Fatal("polling after deleteWebhook failed")
	}
}

// hookRecorder is a webhook endpoint that answers with a scripted status.
type hookRecorder struct {
	mu      sync.Mutex
	statusQ []int
	got     []struct {
		secret string
		update wUpdate
	}
}

func (h *hookRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var u wUpdate
	_ = json.NewDecoder(r.Body).Decode(&u)
	h.mu.Lock()
	h.got = append(h.got, struct {
		secret string
		update wUpdate
	}{r.Header.Get("X-Telegram-Bot-Api-Secret-Token"), u})
	status := 200
	if len(h.statusQ) > 0 {
		status, h.statusQ = h.statusQ[0], h.statusQ[1:]
	}
	h.mu.Unlock()
	w.WriteHeader(status)
}

func TestWebhookDeliveryAndRedelivery(t *testing.T) {
	f := newFixture(t, WithWebhookRetry(3, time.Millisecond))
	rec := &hookRecorder{statusQ: []int{500, 401}}
	hook := httptestServer(t, rec)
	status, r := callJSON(t, f.s, f.bot.Token, "setWebhook", map[string]any{"url": hook + "/tg", "secret_token": "Secret_Token-1"})
	if status != 200 {
		t.Fatalf("setWebhook: %d %s", status, r.Description)
	}
	msg, err := f.bot.TypeMessage(f.dm, f.alice, "via webhook", MessageOpts{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.bot.WaitFor(ctx, func() bool { return f.bot.PendingUpdates() == 0 }); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 3 {
		t.Fatalf("deliveries = %d, want 3 (two failures, then success)", len(rec.got))
	}
	for _, g := range rec.got {
		if g.secret != "Secret_Token-1" || g.update.UpdateID != rec.got[0].update.UpdateID || g.update.Message.MessageID != msg.ID {
			t.Fatalf("delivery = %+v", g)
		}
	}
	ds := f.bot.Deliveries()
	if len(ds) != 3 || ds[0].Status != 500 || ds[1].Status != 401 || ds[2].Status != 200 || ds[2].Attempt != 3 {
		t.Fatalf("delivery log = %+v", ds)
	}
	_, r = callJSON(t, f.s, f.bot.Token, "getWebhookInfo", nil)
	var info wWebhookInfo
	_ = json.Unmarshal(r.Result, &info)
	if info.URL != hook+"/tg" || info.PendingUpdateCount != 0 || !strings.Contains(info.LastErrorMessage, "401") {
		t.Fatalf("webhook info = %+v", info)
	}
}

func TestWebhookGivesUpAfterBoundedAttempts(t *testing.T) {
	f := newFixture(t, WithWebhookRetry(2, time.Millisecond))
	rec := &hookRecorder{statusQ: []int{503, 503, 503, 503}}
	hook := httptestServer(t, rec)
	callJSON(t, f.s, f.bot.Token, "setWebhook", map[string]any{"url": hook})
	if _, err := f.bot.TypeMessage(f.dm, f.alice, "lost", MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.bot.WaitFor(ctx, func() bool { return f.bot.PendingUpdates() == 0 }); err != nil {
		t.Fatal(err)
	}
	if n := len(f.bot.Deliveries()); n != 2 {
		t.Fatalf("attempts = %d, want 2", n)
	}
}

func TestInjectDuplicate(t *testing.T) {
	f := newFixture(t)
	if _, err := f.bot.TypeMessage(f.dm, f.alice, "once", MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	id := f.bot.LastUpdateID()
	ups := getUpdates(t, f, nil)
	if len(ups) != 1 || ups[0].UpdateID != id {
		t.Fatalf("first: %+v", ups)
	}
	if err := f.bot.InjectDuplicate(id); err != nil {
		t.Fatal(err)
	}
	// the offset confirms the original, yet the duplicate still arrives
	dup := getUpdates(t, f, map[string]any{"offset": id + 1})
	if len(dup) != 1 || dup[0].UpdateID != id || dup[0].Message.Text != "once" {
		t.Fatalf("duplicate: %+v", dup)
	}
	if got := getUpdates(t, f, map[string]any{"offset": id + 1}); len(got) != 0 {
		t.Fatalf("duplicate delivered twice: %+v", got)
	}
	if err := f.bot.InjectDuplicate(id + 100); err == nil {
		t.Fatal("unknown update id must fail")
	}
}

func TestCallbackUpdateCarriesMessage(t *testing.T) {
	f := newFixture(t)
	id := f.send(t, "hello", twoButtons)
	qid, err := f.bot.TapButton(f.dm, id, f.alice, "rec1:s:n1")
	if err != nil {
		t.Fatal(err)
	}
	forged, err := f.bot.ForgeCallback(f.dm, 777, f.alice, "rec1:c:old")
	if err != nil {
		t.Fatal(err)
	}
	ups := getUpdates(t, f, nil)
	if len(ups) != 2 {
		t.Fatalf("updates = %+v", ups)
	}
	q := ups[0].CallbackQuery
	if q == nil || q.ID != qid || q.Data != "rec1:s:n1" || q.From.ID != f.alice.ID || q.From.LanguageCode != "en" {
		t.Fatalf("callback = %+v", q)
	}
	raw, _ := json.Marshal(q.Message)
	var m wMessage
	_ = json.Unmarshal(raw, &m)
	if m.MessageID != id || m.Date == 0 || m.ReplyMarkup == nil {
		t.Fatalf("callback message = %s", raw)
	}
	raw, _ = json.Marshal(ups[1].CallbackQuery.Message)
	var im wInaccessibleMessage
	_ = json.Unmarshal(raw, &im)
	if ups[1].CallbackQuery.ID != forged || im.MessageID != 777 || im.Date != 0 {
		t.Fatalf("forged callback message = %s", raw)
	}
}

func TestCommandsGetEntities(t *testing.T) {
	f := newFixture(t)
	if _, err := f.bot.TypeMessage(f.dm, f.alice, "/controls@reply_bot off", MessageOpts{}); err != nil {
		t.Fatal(err)
	}
	ups := getUpdates(t, f, nil)
	e := ups[0].Message.Entities
	if len(e) != 1 || e[0].Type != "bot_command" || e[0].Offset != 0 || e[0].Length != len("/controls@reply_bot") {
		t.Fatalf("entities = %+v", e)
	}
}
