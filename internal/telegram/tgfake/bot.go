package tgfake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
)

// Chat types, as in Chat.type.
const (
	ChatPrivate    = "private"
	ChatGroup      = "group"
	ChatSupergroup = "supergroup"
)

// User is a Telegram user as the fake knows it.
type User struct {
	ID           int64
	FirstName    string
	LastName     string
	Username     string
	LanguageCode string
	IsBot        bool
}

// Chat is a chat as seen by one bot. BusinessConnectionID is the fake's way
// to address the same private chat seen through a business connection: the
// bot then acts on behalf of the business account, and messages live in a
// separate history (Telegram keys them by connection too).
type Chat struct {
	ID                   int64
	Type                 string
	Title                string
	Username             string
	FirstName            string
	LastName             string
	IsForum              bool
	BusinessConnectionID string
}

// Message is a snapshot of one message in a chat.
type Message struct {
	ID                   int
	Chat                 Chat
	ThreadID             int // forum topic, 0 for none
	BusinessConnectionID string
	From                 User
	ByBot                bool     // sent by the bot under test
	Text                 string   // visible text, after the parse mode was applied
	RawText              string   // text exactly as sent
	ParseMode            string   // as sent
	Keyboard             Keyboard // current inline keyboard
	Date                 time.Time
	EditDate             time.Time // zero until edited
	Service              string    // "forum_topic_created" for service messages
	Edits                int       // number of successful edits
}

// CallbackAnswer is what the bot answered to a callback query.
type CallbackAnswer struct {
	QueryID   string
	Text      string
	ShowAlert bool
	URL       string
	CacheTime int
	At        time.Time
}

// Call is one Bot API request the bot made, for assertions.
type Call struct {
	Method      string
	Params      map[string]string
	Status      int    // HTTP status answered (200, 400, 429, ...)
	Description string // error description, "" on success
	At          time.Time
}

// MessageOpts place a user's message: a forum topic, or a reply.
type MessageOpts struct {
	ThreadID int
}

// Delivery is one webhook POST attempt.
type Delivery struct {
	UpdateID int64
	Attempt  int
	Status   int    // HTTP status the webhook answered; 0 on a transport error
	Err      string // transport error, if any
}

// Bot is one bot account on the fake server. Its exported fields are fixed
// at creation; its methods are the test API.
type Bot struct {
	s        *Server
	ID       int64
	Token    string
	Username string

	// guarded by s.mu
	user       User
	chats      map[int64]*Chat
	topics     map[int64]map[int]string
	business   map[string]*businessConn
	dialogs    map[dialogKey]*dialog
	queries    map[string]*queryState
	answers    []CallbackAnswer
	calls      []Call
	failures   map[string][]failure
	queue      []*update
	history    map[int64]*update
	nextUpdate int64
	allowed    []string
	notify     chan struct{}
	poll       *pollWaiter
	hook       *webhook
	deliveries []Delivery
}

type businessConn struct {
	id    string
	owner User
}

type dialogKey struct {
	business string
	chat     int64
}

type dialog struct {
	next int
	msgs []*Message
	byID map[int]*Message
}

type queryState struct {
	id       string
	at       time.Time
	answered bool
}

type failure struct{ retryAfter int }

// signalLocked wakes everything waiting for a change of this bot's state.
func (b *Bot) signalLocked() {
	close(b.notify)
	b.notify = make(chan struct{})
}

func (b *Bot) now() time.Time { return b.s.clk.Now() }

func (b *Bot) logCall(method string, p params, status int, desc string) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	b.calls = append(b.calls, Call{Method: method, Params: maps.Clone(map[string]string(p)), Status: status, Description: desc, At: b.now()})
	b.signalLocked()
}

func (b *Bot) takeFailure(method string) (failure, bool) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	q := b.failures[method]
	if len(q) == 0 {
		return failure{}, false
	}
	b.failures[method] = q[1:]
	return q[0], true
}

// --- chats --------------------------------------------------------------

// PrivateChat returns the bot's private chat with u (the user has started
// the bot). Its id is the user's id, as on Telegram.
func (b *Bot) PrivateChat(u User) Chat {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	c, ok := b.chats[u.ID]
	if !ok {
		c = &Chat{ID: u.ID, Type: ChatPrivate, FirstName: u.FirstName, LastName: u.LastName, Username: u.Username}
		b.chats[u.ID] = c
	}
	return *c
}

// Group creates a basic group the bot is a member of.
func (b *Bot) Group(title string) Chat {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	b.s.nextChatID++
	c := &Chat{ID: -b.s.nextChatID, Type: ChatGroup, Title: title}
	b.chats[c.ID] = c
	return *c
}

// Supergroup creates a supergroup the bot is a member of; forum enables
// topics (see CreateTopic).
func (b *Bot) Supergroup(title string, forum bool) Chat {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	b.s.nextChatID++
	c := &Chat{ID: -(1000000000000 + b.s.nextChatID), Type: ChatSupergroup, Title: title, IsForum: forum}
	b.chats[c.ID] = c
	return *c
}

// CreateTopic opens a forum topic in a forum supergroup and returns its
// message_thread_id: as on Telegram, the id of the service message that
// created the topic.
func (b *Bot) CreateTopic(chat Chat, name string) (int, error) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	c, ok := b.chats[chat.ID]
	if !ok || !c.IsForum {
		return 0, fmt.Errorf("tgfake: chat %d is not a forum supergroup of this bot", chat.ID)
	}
	d := b.dialogLocked(dialogKey{chat: chat.ID})
	d.next++
	m := &Message{ID: d.next, Chat: *c, ThreadID: d.next, From: b.user, Date: b.now(), Service: "forum_topic_created"}
	d.msgs = append(d.msgs, m)
	d.byID[m.ID] = m
	if b.topics[c.ID] == nil {
		b.topics[c.ID] = map[int]string{}
	}
	b.topics[c.ID][m.ID] = name
	return m.ID, nil
}

// ConnectBusiness connects the bot to owner's business account and returns
// the business_connection_id.
func (b *Bot) ConnectBusiness(owner User) string {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	id := fmt.Sprintf("bc%d_%d", b.ID, len(b.business)+1)
	b.business[id] = &businessConn{id: id, owner: owner}
	return id
}

// BusinessChat is the private chat between a business account and
// customer, as the bot sees it through the business connection.
func (b *Bot) BusinessChat(connectionID string, customer User) (Chat, error) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if _, ok := b.business[connectionID]; !ok {
		return Chat{}, fmt.Errorf("tgfake: unknown business connection %q", connectionID)
	}
	return Chat{ID: customer.ID, Type: ChatPrivate, FirstName: customer.FirstName, LastName: customer.LastName,
		Username: customer.Username, BusinessConnectionID: connectionID}, nil
}

func (b *Bot) dialogLocked(k dialogKey) *dialog {
	d, ok := b.dialogs[k]
	if !ok {
		d = &dialog{byID: map[int]*Message{}}
		b.dialogs[k] = d
	}
	return d
}

// --- acting as users ----------------------------------------------------

// TypeMessage makes from send text in chat (in a topic when opts.ThreadID
// is set) and queues the resulting update: "message", or "business_message"
// for a business chat. Commands get a bot_command entity, as on Telegram.
func (b *Bot) TypeMessage(chat Chat, from User, text string, opts MessageOpts) (Message, error) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	c, err := b.userChatLocked(chat, from)
	if err != nil {
		return Message{}, err
	}
	if text == "" {
		return Message{}, errors.New("tgfake: a typed message needs text")
	}
	if opts.ThreadID != 0 && b.topics[c.ID][opts.ThreadID] == "" {
		return Message{}, fmt.Errorf("tgfake: no topic %d in chat %d", opts.ThreadID, c.ID)
	}
	d := b.dialogLocked(dialogKey{business: chat.BusinessConnectionID, chat: c.ID})
	d.next++
	m := &Message{ID: d.next, Chat: *c, ThreadID: opts.ThreadID, BusinessConnectionID: chat.BusinessConnectionID,
		From: from, Text: text, RawText: text, Date: b.now()}
	m.Chat.BusinessConnectionID = chat.BusinessConnectionID
	d.msgs = append(d.msgs, m)
	d.byID[m.ID] = m
	wm := b.wireMessageLocked(m)
	if strings.HasPrefix(text, "/") {
		cmd, _, _ := strings.Cut(text, " ")
		cmd, _, _ = strings.Cut(cmd, "\n")
		wm.Entities = []wEntity{{Type: "bot_command", Offset: 0, Length: utf16Len(cmd)}}
	}
	if chat.BusinessConnectionID != "" {
		b.enqueueLocked("business_message", wUpdate{BusinessMessage: wm})
	} else {
		b.enqueueLocked("message", wUpdate{Message: wm})
	}
	return cloneMessage(m), nil
}

// userChatLocked checks that from can write in chat.
func (b *Bot) userChatLocked(chat Chat, from User) (*Chat, error) {
	if chat.BusinessConnectionID != "" {
		bc, ok := b.business[chat.BusinessConnectionID]
		if !ok {
			return nil, fmt.Errorf("tgfake: unknown business connection %q", chat.BusinessConnectionID)
		}
		if from.ID != chat.ID && from.ID != bc.owner.ID {
			return nil, fmt.Errorf("tgfake: user %d is not in business chat %d", from.ID, chat.ID)
		}
		c := chat
		c.BusinessConnectionID = ""
		return &c, nil
	}
	c, ok := b.chats[chat.ID]
	if !ok {
		return nil, fmt.Errorf("tgfake: chat %d is unknown to bot %s", chat.ID, b.Username)
	}
	if c.Type == ChatPrivate && from.ID != c.ID {
		return nil, fmt.Errorf("tgfake: user %d cannot write in the private chat of user %d", from.ID, c.ID)
	}
	return c, nil
}

// TapButton makes from press the inline button with callbackData on a
// message, queues the callback_query update and returns the query id. Like a
// real client, it fails when the message has no such (enabled) button.
func (b *Bot) TapButton(chat Chat, messageID int, from User, callbackData string) (string, error) {
	return b.tap(chat, messageID, from, callbackData, true)
}

// ForgeCallback queues a callback query for data the message does not (or
// no longer) show — what a client with a stale view, or a forger, sends. An
// unknown message is delivered as an inaccessible message (date 0).
func (b *Bot) ForgeCallback(chat Chat, messageID int, from User, data string) (string, error) {
	return b.tap(chat, messageID, from, data, false)
}

func (b *Bot) tap(chat Chat, messageID int, from User, data string, strict bool) (string, error) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	c, err := b.userChatLocked(chat, from)
	if err != nil {
		return "", err
	}
	d := b.dialogs[dialogKey{business: chat.BusinessConnectionID, chat: c.ID}]
	var m *Message
	if d != nil {
		m = d.byID[messageID]
	}
	if strict {
		if m == nil {
			return "", fmt.Errorf("tgfake: no message %d in chat %d", messageID, c.ID)
		}
		if !m.Keyboard.hasCallback(data) {
			return "", fmt.Errorf("tgfake: message %d has no enabled button with callback_data %q", messageID, data)
		}
	}
	b.s.nextQuery++
	id := fmt.Sprintf("%d", b.s.nextQuery)
	q := wCallbackQuery{ID: id, From: from.wire(), ChatInstance: fmt.Sprintf("%d", c.ID*31+b.ID), Data: data}
	if m != nil {
		q.Message = b.wireMessageLocked(m)
	} else {
		q.Message = wInaccessibleMessage{Chat: c.wire(), MessageID: messageID, Date: 0}
	}
	b.queries[id] = &queryState{id: id, at: b.now()}
	b.enqueueLocked("callback_query", wUpdate{CallbackQuery: &q})
	return id, nil
}

func (k Keyboard) hasCallback(data string) bool {
	for _, row := range k {
		for _, btn := range row {
			if !btn.Disabled && btn.CallbackData != "" && btn.CallbackData == data {
				return true
			}
		}
	}
	return false
}

// --- inspection ---------------------------------------------------------

// Messages returns every message in chat, oldest first, with current text
// and keyboards.
func (b *Bot) Messages(chat Chat) []Message {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	d := b.dialogs[dialogKey{business: chat.BusinessConnectionID, chat: chat.ID}]
	if d == nil {
		return nil
	}
	out := make([]Message, 0, len(d.msgs))
	for _, m := range d.msgs {
		out = append(out, cloneMessage(m))
	}
	return out
}

// Message returns one message of chat.
func (b *Bot) Message(chat Chat, id int) (Message, bool) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	d := b.dialogs[dialogKey{business: chat.BusinessConnectionID, chat: chat.ID}]
	if d == nil || d.byID[id] == nil {
		return Message{}, false
	}
	return cloneMessage(d.byID[id]), true
}

// Answers returns every callback query answer the bot gave, in order.
func (b *Bot) Answers() []CallbackAnswer {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return append([]CallbackAnswer(nil), b.answers...)
}

// Answer returns the answer given to one callback query.
func (b *Bot) Answer(queryID string) (CallbackAnswer, bool) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	for _, a := range b.answers {
		if a.QueryID == queryID {
			return a, true
		}
	}
	return CallbackAnswer{}, false
}

// Calls returns the bot's requests to method (all methods for ""), in order.
func (b *Bot) Calls(method string) []Call {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	var out []Call
	for _, c := range b.calls {
		if method == "" || strings.EqualFold(c.Method, method) {
			out = append(out, c)
		}
	}
	return out
}

// FailNext makes the next n calls of method fail with 429 Too Many Requests
// and parameters.retry_after = retryAfter seconds. Failed calls change
// nothing.
func (b *Bot) FailNext(method string, n, retryAfter int) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	canon := canonicalMethods[strings.ToLower(method)]
	if canon == "" {
		canon = method
	}
	for range n {
		b.failures[canon] = append(b.failures[canon], failure{retryAfter: retryAfter})
	}
}

// LastUpdateID is the id of the newest update queued for the bot (0 if none).
func (b *Bot) LastUpdateID() int64 {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if len(b.history) == 0 {
		return 0
	}
	return b.nextUpdate
}

// InjectDuplicate queues an update again with the same update_id — what
// Telegram does when it did not see the bot confirm it. The copy is
// delivered once even if the offset already confirmed the original.
func (b *Bot) InjectDuplicate(updateID int64) error {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	u, ok := b.history[updateID]
	if !ok {
		return fmt.Errorf("tgfake: no update %d", updateID)
	}
	dup := *u
	dup.forced, dup.delivered = true, false
	b.queue = append(b.queue, &dup)
	b.signalLocked()
	return nil
}

// PendingUpdates is the number of updates not yet confirmed (polling) or
// delivered (webhook).
func (b *Bot) PendingUpdates() int {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return len(b.queue)
}

// Deliveries returns every webhook POST attempt, in order.
func (b *Bot) Deliveries() []Delivery {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return append([]Delivery(nil), b.deliveries...)
}

// WaitFor blocks until cond, evaluated on every change of the bot's state
// (calls, updates, deliveries), returns true, or ctx ends.
func (b *Bot) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		b.s.mu.Lock()
		ch := b.notify
		b.s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-b.s.closed:
			return errors.New("tgfake: server closed")
		}
	}
}

func cloneMessage(m *Message) Message {
	c := *m
	c.Keyboard = cloneKeyboard(m.Keyboard)
	return c
}

func cloneKeyboard(k Keyboard) Keyboard {
	if k == nil {
		return nil
	}
	out := make(Keyboard, len(k))
	for i, row := range k {
		out[i] = append([]Button(nil), row...)
	}
	return out
}

// wireMessageLocked renders a stored message as the Bot API's Message.
func (b *Bot) wireMessageLocked(m *Message) *wMessage {
	chat := m.Chat
	chat.BusinessConnectionID = ""
	wm := &wMessage{
		MessageID:            m.ID,
		Date:                 m.Date.Unix(),
		BusinessConnectionID: m.BusinessConnectionID,
		Chat:                 chat.wire(),
		Text:                 m.Text,
		ReplyMarkup:          m.Keyboard.wire(),
	}
	if m.ThreadID != 0 {
		wm.MessageThreadID = m.ThreadID
		wm.IsTopicMessage = true
	}
	if !m.EditDate.IsZero() {
		wm.EditDate = m.EditDate.Unix()
	}
	from := m.From.wire()
	wm.From = &from
	if m.ByBot && m.BusinessConnectionID != "" {
		bu := b.user.wire()
		wm.SenderBusinessBot = &bu
	}
	if m.Service == "forum_topic_created" {
		wm.ForumTopicCreated = &wForumTopicCreated{Name: b.topics[m.Chat.ID][m.ID], IconColor: 7322096}
		wm.Text = ""
	}
	return wm
}

// Polling reports whether a getUpdates request is waiting for updates.
func (b *Bot) Polling() bool {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return b.poll != nil
}
