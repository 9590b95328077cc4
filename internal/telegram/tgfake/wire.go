package tgfake

import "encoding/json"

// The wire types below are the Bot API's JSON objects, written from the
// published API reference rather than borrowed from a client library, so
// the fake cannot inherit a client's mistakes.

type wUser struct {
	ID                      int64  `json:"id"`
	IsBot                   bool   `json:"is_bot"`
	FirstName               string `json:"first_name"`
	LastName                string `json:"last_name,omitempty"`
	Username                string `json:"username,omitempty"`
	LanguageCode            string `json:"language_code,omitempty"`
	CanJoinGroups           *bool  `json:"can_join_groups,omitempty"`
	CanReadAllGroupMessages *bool  `json:"can_read_all_group_messages,omitempty"`
	SupportsInlineQueries   *bool  `json:"supports_inline_queries,omitempty"`
	CanConnectToBusiness    *bool  `json:"can_connect_to_business,omitempty"`
}

type wChat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title,omitempty"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
	IsForum   bool   `json:"is_forum,omitempty"`
}

type wEntity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
}

type wForumTopicCreated struct {
	Name      string `json:"name"`
	IconColor int    `json:"icon_color"`
}

type wButton struct {
	Text         string    `json:"text"`
	URL          string    `json:"url,omitempty"`
	CallbackData string    `json:"callback_data,omitempty"`
	Disabled     *struct{} `json:"disabled,omitempty"`
	Style        string    `json:"style,omitempty"`
}

type wInlineKeyboard struct {
	InlineKeyboard [][]wButton `json:"inline_keyboard"`
}

type wMessage struct {
	MessageID            int                 `json:"message_id"`
	MessageThreadID      int                 `json:"message_thread_id,omitempty"`
	From                 *wUser              `json:"from,omitempty"`
	SenderBusinessBot    *wUser              `json:"sender_business_bot,omitempty"`
	Date                 int64               `json:"date"`
	BusinessConnectionID string              `json:"business_connection_id,omitempty"`
	Chat                 wChat               `json:"chat"`
	IsTopicMessage       bool                `json:"is_topic_message,omitempty"`
	EditDate             int64               `json:"edit_date,omitempty"`
	Text                 string              `json:"text,omitempty"`
	Entities             []wEntity           `json:"entities,omitempty"`
	ForumTopicCreated    *wForumTopicCreated `json:"forum_topic_created,omitempty"`
	ReplyMarkup          *wInlineKeyboard    `json:"reply_markup,omitempty"`
}

// wInaccessibleMessage is what a callback query carries when the message is
// too old or unknown: date 0 marks it.
type wInaccessibleMessage struct {
	Chat      wChat `json:"chat"`
	MessageID int   `json:"message_id"`
	Date      int64 `json:"date"`
}

type wCallbackQuery struct {
	ID           string `json:"id"`
	From         wUser  `json:"from"`
	Message      any    `json:"message,omitempty"`
	ChatInstance string `json:"chat_instance"`
	Data         string `json:"data,omitempty"`
}

type wUpdate struct {
	UpdateID        int64           `json:"update_id"`
	Message         *wMessage       `json:"message,omitempty"`
	BusinessMessage *wMessage       `json:"business_message,omitempty"`
	CallbackQuery   *wCallbackQuery `json:"callback_query,omitempty"`
}

type wWebhookInfo struct {
	URL                  string   `json:"url"`
	HasCustomCertificate bool     `json:"has_custom_certificate"`
	PendingUpdateCount   int      `json:"pending_update_count"`
	LastErrorDate        int64    `json:"last_error_date,omitempty"`
	LastErrorMessage     string   `json:"last_error_message,omitempty"`
	MaxConnections       int      `json:"max_connections,omitempty"`
	AllowedUpdates       []string `json:"allowed_updates,omitempty"`
}

type wResponse struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result,omitempty"`
	Description string          `json:"description,omitempty"`
	ErrorCode   int             `json:"error_code,omitempty"`
	Parameters  *wParameters    `json:"parameters,omitempty"`
}

type wParameters struct {
	RetryAfter int `json:"retry_after,omitempty"`
}

func boolPtr(b bool) *bool { return &b }

func (u User) wire() wUser {
	return wUser{ID: u.ID, IsBot: u.IsBot, FirstName: u.FirstName, LastName: u.LastName,
		Username: u.Username, LanguageCode: u.LanguageCode}
}

func (c Chat) wire() wChat {
	return wChat{ID: c.ID, Type: c.Type, Title: c.Title, Username: c.Username,
		FirstName: c.FirstName, LastName: c.LastName, IsForum: c.IsForum}
}

func (k Keyboard) wire() *wInlineKeyboard {
	if k.empty() {
		return nil
	}
	out := &wInlineKeyboard{InlineKeyboard: make([][]wButton, 0, len(k))}
	for _, row := range k {
		wr := make([]wButton, 0, len(row))
		for _, b := range row {
			wb := wButton{Text: b.Text, URL: b.URL, CallbackData: b.CallbackData, Style: b.Style}
			if b.Disabled {
				wb.Disabled = &struct{}{}
			}
			wr = append(wr, wb)
		}
		out.InlineKeyboard = append(out.InlineKeyboard, wr)
	}
	return out
}
