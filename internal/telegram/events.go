package telegram

import (
	"strings"
	"time"

	"github.com/go-telegram/bot/models"
)

// Event is one inbound Telegram update in the shape the hub consumes:
// exactly one of Message and Tap is set for updates reply-end controls
// care about; both are nil for any other update (edits, reactions, member
// changes), which Raw still carries for whoever wants it.
type Event struct {
	BotID    string
	UpdateID int64
	Message  *TypedMessage
	Tap      *CallbackTap
	Raw      *models.Update
}

// ControlsCommand is what a /controls command asked for.
type ControlsCommand string

// The /controls commands. ControlsStatus is a bare "/controls";
// ControlsInvalid is "/controls" with an argument other than on or off.
const (
	ControlsNone    ControlsCommand = ""
	ControlsOn      ControlsCommand = "on"
	ControlsOff     ControlsCommand = "off"
	ControlsStatus  ControlsCommand = "status"
	ControlsInvalid ControlsCommand = "invalid"
)

// TypedMessage is a message a person wrote to the bot. In reply-end
// controls a typed message always wins over a pending choice, so anything a
// user sends counts, not only text: Text holds the text or the caption and
// may be empty (a sticker, a photo without caption).
type TypedMessage struct {
	ChatID               int64
	ChatType             string // private, group, supergroup, channel
	ThreadID             int    // forum topic; 0 outside topics
	BusinessConnectionID string // set for messages in a connected business account's chats
	UserID               int64
	Username             string
	LanguageCode         string
	MessageID            int
	Text                 string
	Date                 time.Time
	Controls             ControlsCommand // a /controls command addressed to this bot
}

// CallbackTap is a press on an inline button.
type CallbackTap struct {
	QueryID              string
	ChatID               int64 // 0 for buttons on inline-mode messages
	ChatType             string
	ThreadID             int
	BusinessConnectionID string
	MessageID            int
	InlineMessageID      string // set instead of ChatID/MessageID for inline-mode messages
	MessageAccessible    bool   // false when Telegram no longer shows the bot the message (date 0)
	UserID               int64
	Username             string
	LanguageCode         string
	Data                 string
}

// Normalize turns an update into an Event. botUsername (without "@") lets
// it tell "/controls@thisbot" from a command addressed to another bot in
// the same group; pass "" to accept any addressee.
func Normalize(botID, botUsername string, u *models.Update) Event {
	ev := Event{BotID: botID, Raw: u}
	if u == nil {
		return ev
	}
	ev.UpdateID = u.ID
	switch {
	case u.Message != nil:
		ev.Message = typedMessage(u.Message, botUsername)
	case u.BusinessMessage != nil:
		ev.Message = typedMessage(u.BusinessMessage, botUsername)
	case u.CallbackQuery != nil:
		ev.Tap = callbackTap(u.CallbackQuery)
	}
	return ev
}

func typedMessage(m *models.Message, botUsername string) *TypedMessage {
	if m.From == nil || m.From.IsBot || m.SenderBusinessBot != nil || !hasUserContent(m) {
		// service messages, other bots, and the bot's own business replies
		return nil
	}
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	tm := &TypedMessage{
		ChatID:               m.Chat.ID,
		ChatType:             string(m.Chat.Type),
		ThreadID:             topicOf(m),
		BusinessConnectionID: m.BusinessConnectionID,
		UserID:               m.From.ID,
		Username:             m.From.Username,
		LanguageCode:         m.From.LanguageCode,
		MessageID:            m.ID,
		Text:                 text,
		Date:                 time.Unix(int64(m.Date), 0).UTC(),
	}
	if m.Text != "" {
		tm.Controls = ParseControlsCommand(m.Text, botUsername)
	}
	return tm
}

// topicOf is the forum topic of a message: message_thread_id counts only
// for topic messages (in other chats it names a reply thread, which is not
// a conversation of its own).
func topicOf(m *models.Message) int {
	if m.IsTopicMessage || m.Chat.IsForum {
		return m.MessageThreadID
	}
	return 0
}

// hasUserContent reports whether a message is something a person sent, as
// opposed to a service message (member joined, topic created, pinned...).
func hasUserContent(m *models.Message) bool {
	return m.Text != "" || m.Caption != "" || m.Photo != nil || m.Document != nil || m.Audio != nil ||
		m.Voice != nil || m.Video != nil || m.VideoNote != nil || m.Animation != nil || m.Sticker != nil ||
		m.Contact != nil || m.Location != nil || m.Venue != nil || m.Poll != nil || m.Dice != nil
}

func callbackTap(q *models.CallbackQuery) *CallbackTap {
	t := &CallbackTap{
		QueryID:         q.ID,
		InlineMessageID: q.InlineMessageID,
		UserID:          q.From.ID,
		Username:        q.From.Username,
		LanguageCode:    q.From.LanguageCode,
		Data:            q.Data,
	}
	switch {
	case q.Message.Message != nil:
		m := q.Message.Message
		t.ChatID, t.ChatType, t.MessageID = m.Chat.ID, string(m.Chat.Type), m.ID
		t.ThreadID = topicOf(m)
		t.BusinessConnectionID = m.BusinessConnectionID
		t.MessageAccessible = true
	case q.Message.InaccessibleMessage != nil:
		m := q.Message.InaccessibleMessage
		t.ChatID, t.ChatType, t.MessageID = m.Chat.ID, string(m.Chat.Type), m.MessageID
	}
	return t
}

// ParseControlsCommand recognizes "/controls", "/controls on|off" and the
// "/controls@botname ..." form Telegram clients produce in groups. A command
// addressed to another bot is not ours and yields ControlsNone, as does any
// other text.
func ParseControlsCommand(text, botUsername string) ControlsCommand {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return ControlsNone
	}
	cmd, addressee, addressed := strings.Cut(fields[0], "@")
	if !strings.EqualFold(cmd, "/controls") {
		return ControlsNone
	}
	if addressed && botUsername != "" && !strings.EqualFold(addressee, strings.TrimPrefix(botUsername, "@")) {
		return ControlsNone
	}
	switch {
	case len(fields) == 1:
		return ControlsStatus
	case len(fields) > 2:
		return ControlsInvalid
	}
	switch strings.ToLower(fields[1]) {
	case "on":
		return ControlsOn
	case "off":
		return ControlsOff
	}
	return ControlsInvalid
}
