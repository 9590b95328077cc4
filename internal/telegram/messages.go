package telegram

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Telegram's limits on buttons and callback answers.
const (
	MaxCallbackData   = 64  // bytes of callback_data
	MaxCallbackAnswer = 200 // characters of an answerCallbackQuery text
)

// Button is an inline keyboard button. Exactly one of CallbackData, URL and
// Disabled is set: a callback button, a link, or a button that shows but
// does nothing (how a resolved choice can stay visible).
type Button struct {
	Text         string
	CallbackData string
	URL          string
	Disabled     bool
}

// Keyboard is an inline keyboard: rows of buttons. An empty keyboard means
// none.
type Keyboard [][]Button

// Validate checks the keyboard against Telegram's rules before a request is
// spent on it.
func (k Keyboard) Validate() error {
	var fe protocol.FieldErrors = map[string]string{}
	for i, row := range k {
		for j, b := range row {
			field := fmt.Sprintf("keyboard[%d][%d]", i, j)
			actions := 0
			for _, set := range []bool{b.CallbackData != "", b.URL != "", b.Disabled} {
				if set {
					actions++
				}
			}
			switch {
			case strings.TrimSpace(b.Text) == "":
				fe.Add(field+".text", "a button needs a label")
			case actions != 1:
				fe.Add(field, "set exactly one of callbackData, url and disabled")
			case len(b.CallbackData) > MaxCallbackData:
				fe.Add(field+".callbackData", fmt.Sprintf("callback data is %d bytes; Telegram allows 1 to %d", len(b.CallbackData), MaxCallbackData))
			}
		}
	}
	return fe.Err()
}

func (k Keyboard) empty() bool {
	for _, row := range k {
		if len(row) > 0 {
			return false
		}
	}
	return true
}

// markup converts the keyboard for the library; nil for no keyboard (which
// an edit turns into "remove the keyboard").
func (k Keyboard) markup() models.ReplyMarkup {
	if k.empty() {
		return nil
	}
	rows := make([][]models.InlineKeyboardButton, 0, len(k))
	for _, row := range k {
		r := make([]models.InlineKeyboardButton, 0, len(row))
		for _, b := range row {
			mb := models.InlineKeyboardButton{Text: b.Text, CallbackData: b.CallbackData, URL: b.URL}
			if b.Disabled {
				mb.Disabled = &models.DisabledButton{}
			}
			r = append(r, mb)
		}
		rows = append(rows, r)
	}
	return &models.InlineKeyboardMarkup{InlineKeyboard: rows}
}

// SendParams describe one reply.
type SendParams struct {
	ChatID               int64
	ThreadID             int    // forum topic; 0 for none
	BusinessConnectionID string // send on behalf of a connected business account
	Text                 string
	ParseMode            string   // "", "HTML", "MarkdownV2" or "Markdown"
	Keyboard             Keyboard // attached to the last chunk only
	DisableLinkPreview   bool
}

// Sent reports the messages a reply became, in order.
type Sent struct {
	MessageIDs []int
}

// LastMessageID is the message that carries the keyboard (0 if nothing was
// sent).
func (s Sent) LastMessageID() int {
	if len(s.MessageIDs) == 0 {
		return 0
	}
	return s.MessageIDs[len(s.MessageIDs)-1]
}

func (p SendParams) validate() error {
	fe := protocol.FieldErrors{}
	if p.ChatID == 0 {
		fe.Add("chatId", "the chat to send to is required")
	}
	if p.ThreadID < 0 {
		fe.Add("threadId", "must be a forum topic id or 0")
	}
	if strings.TrimSpace(p.Text) == "" {
		fe.Add("text", "the reply text is empty; Telegram rejects empty messages")
	} else if !utf8.ValidString(p.Text) {
		fe.Add("text", "the reply text is not valid UTF-8")
	}
	switch p.ParseMode {
	case ParseModeNone, ParseModeHTML, ParseModeMarkdownV2, ParseModeMarkdown:
	default:
		fe.Add("parseMode", "use HTML, MarkdownV2, Markdown or leave it empty")
	}
	if err := fe.Err(); err != nil {
		return err
	}
	return p.Keyboard.Validate()
}

// SendMessage sends a reply, split into chunks of at most MaxMessageLength
// visible characters (see SplitText), with the keyboard on the last chunk.
// Chunks go out in order; if one fails, Sent lists the chunks already
// delivered and the error says why the rest was not.
func (c *Client) SendMessage(ctx context.Context, p SendParams) (Sent, error) {
	if err := p.validate(); err != nil {
		return Sent{}, err
	}
	chunks := SplitText(p.Text, p.ParseMode, MaxMessageLength)
	if len(chunks) == 0 {
		return Sent{}, protocol.Invalid("text", "the reply has no visible text")
	}
	var sent Sent
	for i, chunk := range chunks {
		params := &tgbot.SendMessageParams{
			BusinessConnectionID: p.BusinessConnectionID,
			ChatID:               p.ChatID,
			MessageThreadID:      p.ThreadID,
			Text:                 chunk,
			ParseMode:            models.ParseMode(p.ParseMode),
		}
		if p.DisableLinkPreview {
			params.LinkPreviewOptions = &models.LinkPreviewOptions{IsDisabled: tgbot.True()}
		}
		if i == len(chunks)-1 {
			params.ReplyMarkup = p.Keyboard.markup()
		}
		var msg *models.Message
		err := c.do(ctx, "sendMessage", p.ChatID, nil, func(ctx context.Context) error {
			var err error
			msg, err = c.bot.SendMessage(ctx, params)
			return err
		})
		if err != nil {
			return sent, fmt.Errorf("telegram: sending chunk %d of %d: %w", i+1, len(chunks), err)
		}
		sent.MessageIDs = append(sent.MessageIDs, msg.ID)
	}
	return sent, nil
}

// EditKeyboardParams name a message and the keyboard it should show.
type EditKeyboardParams struct {
	ChatID               int64
	MessageID            int
	BusinessConnectionID string
	Keyboard             Keyboard // nil or empty removes the keyboard
}

type editKey struct {
	business string
	chat     int64
	message  int
}

// editSlot serializes edits of one message and lets a newer edit supersede
// older ones that have not been sent yet.
type editSlot struct {
	sem     chan struct{}
	latest  uint64 // generation of the newest edit requested
	waiting int    // edits holding or waiting for sem
}

// EditKeyboard replaces (or, with an empty keyboard, removes) a message's
// inline keyboard. "message is not modified" counts as success. Edits of
// the same message are serialized and coalesced: while one waits out a
// rate limit, a newer edit of that message supersedes it, the older call
// returns nil without sending, and only the newest keyboard goes out.
func (c *Client) EditKeyboard(ctx context.Context, p EditKeyboardParams) error {
	if p.ChatID == 0 || p.MessageID <= 0 {
		return protocol.Invalid("messageId", "an edit needs the chat id and a message id")
	}
	if err := p.Keyboard.Validate(); err != nil {
		return err
	}
	key := editKey{business: p.BusinessConnectionID, chat: p.ChatID, message: p.MessageID}
	c.mu.Lock()
	slot := c.edits[key]
	if slot == nil {
		slot = &editSlot{sem: make(chan struct{}, 1)}
		c.edits[key] = slot
	}
	slot.latest++
	gen := slot.latest
	slot.waiting++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		slot.waiting--
		if slot.waiting == 0 {
			delete(c.edits, key)
		}
		c.mu.Unlock()
	}()

	select {
	case slot.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-slot.sem }()

	current := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if slot.latest != gen {
			c.cfg.Logger.Debug("telegram edit superseded", "chat", p.ChatID, "message", p.MessageID)
			return false
		}
		return true
	}
	params := &tgbot.EditMessageReplyMarkupParams{BusinessConnectionID: p.BusinessConnectionID, ChatID: p.ChatID,
		MessageID: p.MessageID, ReplyMarkup: p.Keyboard.markup()}
	err := c.do(ctx, "editMessageReplyMarkup", p.ChatID, current, func(ctx context.Context) error {
		_, err := c.bot.EditMessageReplyMarkup(ctx, params)
		return err
	})
	if IsNotModified(err) {
		return nil
	}
	return err
}

// CallbackAnswer is the toast (or alert) shown to the user who tapped.
type CallbackAnswer struct {
	QueryID   string
	Text      string // cut to MaxCallbackAnswer characters
	ShowAlert bool
	CacheTime int // seconds clients may cache the answer
}

// AnswerCallback answers a callback query. Every tap must be answered, so
// an over-long text is shortened rather than refused, and "query is too
// old" counts as success: there is nothing left to answer.
func (c *Client) AnswerCallback(ctx context.Context, a CallbackAnswer) error {
	if a.QueryID == "" {
		return protocol.Invalid("queryId", "the callback query id is required")
	}
	params := &tgbot.AnswerCallbackQueryParams{CallbackQueryID: a.QueryID, Text: truncateUTF16(a.Text, MaxCallbackAnswer),
		ShowAlert: a.ShowAlert, CacheTime: a.CacheTime}
	err := c.do(ctx, "answerCallbackQuery", 0, nil, func(ctx context.Context) error {
		_, err := c.bot.AnswerCallbackQuery(ctx, params)
		return err
	})
	if IsQueryTooOld(err) {
		return nil
	}
	return err
}

// truncateUTF16 cuts s to at most n UTF-16 units, ending with "…" when cut.
func truncateUTF16(s string, n int) string {
	if UTF16Len(s) <= n {
		return s
	}
	var b strings.Builder
	used := 0
	for _, r := range s {
		w := 1
		if r > 0xFFFF {
			w = 2
		}
		if used+w > n-1 {
			break
		}
		b.WriteRune(r)
		used += w
	}
	return strings.TrimRight(b.String(), " ") + "…"
}
