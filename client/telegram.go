package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/switchboard-hub/switchboard/internal/replyctl"
)

// Decision is a conversation's reply-end decision (GET …/policy, and the
// data of replyctl.choice notifications): lastChoice, source, at,
// followUpAllowed, proactiveAllowed, closed, hint.
type Decision = replyctl.Decision

// Bus names of hosted Telegram bots.
const (
	// TelegramSender sends everything hosted bots deliver.
	TelegramSender = "system:telegram"
	// ActionTelegramMessage is the request action of a typed Telegram message.
	ActionTelegramMessage = "telegram.message"
	// EventReplyChoice is the notification event of a new decision.
	EventReplyChoice = "replyctl.choice"
)

// AddTelegramBotParams describe a bot for the hub to host.
type AddTelegramBotParams struct {
	Token           string `json:"token"`
	AgentID         string `json:"agentId"`
	Mode            string `json:"mode,omitempty"`  // poll (default) or webhook
	Scope           string `json:"scope,omitempty"` // off, dm, group, all (default)
	APIURL          string `json:"apiUrl,omitempty"`
	Resolve         string `json:"resolve,omitempty"`       // mark (default), disable, remove
	DefaultLocale   string `json:"defaultLocale,omitempty"` // en (default), zh-TW, zh-CN
	PerUserInGroups bool   `json:"perUserInGroups,omitempty"`
}

// TelegramBot is a hosted bot (its secrets never leave the hub).
type TelegramBot struct {
	ID              string    `json:"id"`
	AgentID         string    `json:"agentId"`
	Mode            string    `json:"mode"`
	Scope           string    `json:"scope"`
	APIURL          string    `json:"apiUrl,omitempty"`
	TelegramID      int64     `json:"telegramId"`
	Username        string    `json:"username"`
	WebhookURL      string    `json:"webhookUrl,omitempty"`
	Resolve         string    `json:"resolve"`
	DefaultLocale   string    `json:"defaultLocale"`
	PerUserInGroups bool      `json:"perUserInGroups"`
	CreatedAt       time.Time `json:"createdAt"`
}

// AddTelegramBot has the hub host a bot (admin token).
func (c *Client) AddTelegramBot(ctx context.Context, p AddTelegramBotParams) (TelegramBot, error) {
	var out TelegramBot
	err := c.Do(ctx, http.MethodPost, "/v1/replyctl/bots", nil, p, &out)
	return out, err
}

// TelegramBots lists hosted bots: all (admin, or those bound to agent when
// set) or, with an agent token, the caller's own.
func (c *Client) TelegramBots(ctx context.Context, agent string) ([]TelegramBot, error) {
	var q url.Values
	if agent != "" {
		q = url.Values{"agent": {agent}}
	}
	var out struct {
		Bots []TelegramBot `json:"bots"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/replyctl/bots", q, nil, &out)
	return out.Bots, err
}

// TelegramBot returns one hosted bot (admin or its bound agent).
func (c *Client) TelegramBot(ctx context.Context, id string) (TelegramBot, error) {
	var out TelegramBot
	err := c.Do(ctx, http.MethodGet, "/v1/replyctl/bots/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// RemoveTelegramBot stops hosting a bot (admin).
func (c *Client) RemoveTelegramBot(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/replyctl/bots/"+url.PathEscape(id), nil, nil, nil)
}

// TelegramReply is a runtime's reply in a chat.
type TelegramReply struct {
	ChatID               int64  `json:"chatId"`
	ThreadID             int64  `json:"threadId,omitempty"`
	BusinessConnectionID string `json:"businessConnectionId,omitempty"`
	Text                 string `json:"text"`
	ParseMode            string `json:"parseMode,omitempty"`
	// Controls false sends the reply without Continue / Stop.
	Controls           *bool  `json:"controls,omitempty"`
	UserID             int64  `json:"userId,omitempty"`
	LanguageCode       string `json:"languageCode,omitempty"`
	ReplyID            string `json:"replyId,omitempty"`
	DisableLinkPreview bool   `json:"disableLinkPreview,omitempty"`
}

// TelegramReplyResult says what a reply became.
type TelegramReplyResult struct {
	BotID        string    `json:"botId"`
	Conversation string    `json:"conversation"`
	ReplyID      string    `json:"replyId"`
	MessageIDs   []int64   `json:"messageIds"`
	Controls     bool      `json:"controls"`
	Reason       string    `json:"reason"`
	ExpiresAt    time.Time `json:"expiresAt,omitzero"`
}

// SendTelegramReply sends a reply through a hosted bot (its bound agent or
// the admin).
func (c *Client) SendTelegramReply(ctx context.Context, botID string, r TelegramReply) (TelegramReplyResult, error) {
	var out TelegramReplyResult
	err := c.Do(ctx, http.MethodPost, "/v1/replyctl/bots/"+url.PathEscape(botID)+"/replies", nil, r, &out)
	return out, err
}

// PolicyQuery names a conversation of a bot by its parts.
type PolicyQuery struct {
	ChatID               int64
	ThreadID             int64
	BusinessConnectionID string
	UserID               int64
}

// ReplyPolicy reads a conversation's decision.
func (c *Client) ReplyPolicy(ctx context.Context, botID string, q PolicyQuery) (Decision, error) {
	v := url.Values{"chatId": {strconv.FormatInt(q.ChatID, 10)}}
	if q.ThreadID != 0 {
		v.Set("threadId", strconv.FormatInt(q.ThreadID, 10))
	}
	if q.BusinessConnectionID != "" {
		v.Set("businessConnectionId", q.BusinessConnectionID)
	}
	if q.UserID != 0 {
		v.Set("userId", strconv.FormatInt(q.UserID, 10))
	}
	var out Decision
	err := c.Do(ctx, http.MethodGet, "/v1/replyctl/bots/"+url.PathEscape(botID)+"/policy", v, nil, &out)
	return out, err
}

// ReplyPolicyByKey reads a conversation's decision by its key.
func (c *Client) ReplyPolicyByKey(ctx context.Context, key string) (Decision, error) {
	var out Decision
	err := c.Do(ctx, http.MethodGet, "/v1/replyctl/conversations/"+url.PathEscape(key)+"/policy", nil, nil, &out)
	return out, err
}

// TelegramMessage is the params of a telegram.message request.
type TelegramMessage struct {
	BotID                string    `json:"botId"`
	ChatID               int64     `json:"chatId"`
	ChatType             string    `json:"chatType"`
	ThreadID             int64     `json:"threadId"`
	BusinessConnectionID string    `json:"businessConnectionId"`
	UserID               int64     `json:"userId"`
	Username             string    `json:"username"`
	LanguageCode         string    `json:"languageCode"`
	MessageID            int64     `json:"messageId"`
	Text                 string    `json:"text"`
	Date                 time.Time `json:"date"`
	ConversationKey      string    `json:"conversationKey"`
	Policy               Decision  `json:"policy"`
}

// ReplyChoice is payload.data of a replyctl.choice notification.
type ReplyChoice struct {
	Decision
	BotID                string `json:"botId"`
	ChatID               int64  `json:"chatId"`
	ThreadID             int64  `json:"threadId"`
	BusinessConnectionID string `json:"businessConnectionId"`
	UserID               int64  `json:"userId"`
}

// TelegramMessageOf decodes a telegram.message request; ok is false for
// any other envelope.
func TelegramMessageOf(env *Envelope) (m TelegramMessage, ok bool) {
	if env == nil || env.Type != "request" || env.From.Agent != TelegramSender {
		return m, false
	}
	p, err := env.Request()
	if err != nil || p.Action != ActionTelegramMessage {
		return m, false
	}
	return m, json.Unmarshal(p.Params, &m) == nil
}

// ReplyChoiceOf decodes a replyctl.choice notification; ok is false for any
// other envelope.
func ReplyChoiceOf(env *Envelope) (c ReplyChoice, ok bool) {
	if env == nil || env.Type != "notification" || env.From.Agent != TelegramSender {
		return c, false
	}
	var p struct {
		Event string          `json:"event"`
		Data  json.RawMessage `json:"data"`
	}
	if json.Unmarshal(env.Payload, &p) != nil || p.Event != EventReplyChoice {
		return c, false
	}
	return c, json.Unmarshal(p.Data, &c) == nil
}
