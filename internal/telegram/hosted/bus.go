package hosted

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// What the host says on the bus.
const (
	// SystemSender is the bus sender of everything hosted bots deliver.
	SystemSender = "system:telegram"
	// ActionMessage is the request action of a typed Telegram message
	// forwarded to the bound runtime agent (params: MessageParams).
	ActionMessage = "telegram.message"
	// EventChoice is the notification event pushing a conversation's new
	// decision to the runtime (payload.data: Choice).
	EventChoice = "replyctl.choice"
)

// deliveryTTL is how long a forwarded message or a pushed choice waits for
// an offline runtime: Telegram itself gives up on undelivered updates after
// a day.
const deliveryTTL = 24 * 3600

// MessageParams are the params of a telegram.message request: who wrote
// what where, the conversation it belongs to, and the conversation's
// decision after the message (typing always supersedes a pending choice).
// The runtime answers with POST /v1/replyctl/bots/{botId}/replies, or with
// a response whose result is {"text": ...} (see ResponseResult).
type MessageParams struct {
	BotID                string            `json:"botId"`
	ChatID               int64             `json:"chatId"`
	ChatType             string            `json:"chatType"` // private, group, supergroup
	ThreadID             int64             `json:"threadId"` // forum topic, 0 for none
	BusinessConnectionID string            `json:"businessConnectionId"`
	UserID               int64             `json:"userId"`
	Username             string            `json:"username"`
	LanguageCode         string            `json:"languageCode"`
	MessageID            int64             `json:"messageId"`
	Text                 string            `json:"text"` // text or caption; empty for a sticker or a photo without caption
	Date                 time.Time         `json:"date"`
	ConversationKey      string            `json:"conversationKey"`
	Policy               replyctl.Decision `json:"policy"`
}

// Choice is payload.data of a replyctl.choice notification: the
// conversation's new decision and where it was made.
type Choice struct {
	replyctl.Decision
	BotID                string `json:"botId"`
	ChatID               int64  `json:"chatId"`
	ThreadID             int64  `json:"threadId"`
	BusinessConnectionID string `json:"businessConnectionId"`
	// UserID is who tapped (0 when the choice expired).
	UserID int64 `json:"userId"`
}

// ResponseResult is what a runtime may put in the result of its response
// to a telegram.message request to have the hub send it as the reply (a
// bare JSON string is taken as Text). A response without text sends
// nothing.
type ResponseResult struct {
	Text      string `json:"text"`
	ParseMode string `json:"parseMode,omitempty"`
	Controls  *bool  `json:"controls,omitempty"`
}

// forwardMessage enqueues the telegram.message request for the bot's
// runtime inside the typed message's transaction, and remembers where an
// answer to it should go.
func (h *Host) forwardMessage(ctx context.Context, tx *store.Tx, b *bot, envID string, p MessageParams) error {
	params, err := json.Marshal(p)
	if err != nil {
		return err
	}
	payload, err := json.Marshal(protocol.RequestPayload{Action: ActionMessage, Params: params})
	if err != nil {
		return err
	}
	env := &protocol.Envelope{ID: envID, From: protocol.Address{Agent: SystemSender}, To: protocol.Address{Agent: b.rec.AgentID},
		Type: protocol.TypeRequest, Priority: protocol.PriorityHigh, TTL: deliveryTTL, Payload: payload}
	if _, err := h.o.Bus.SendSystemTx(ctx, tx, env); err != nil {
		return fmt.Errorf("telegram: forward message to %s: %w", b.rec.AgentID, err)
	}
	target, err := json.Marshal(ReplyParams{ChatID: p.ChatID, ThreadID: p.ThreadID, BusinessConnectionID: p.BusinessConnectionID,
		UserID: p.UserID, LanguageCode: p.LanguageCode})
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO telegram_requests (request_id, bot_id, target, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (request_id) DO NOTHING`, envID, b.rec.ID, string(target), store.Millis(h.o.Clock.Now()))
	if err != nil {
		return fmt.Errorf("telegram: remember request: %w", err)
	}
	return nil
}

// pushChoice enqueues a replyctl.choice notification for the bot's runtime
// inside the transaction that changed the decision.
func (h *Host) pushChoice(ctx context.Context, tx *store.Tx, b *bot, envID string, key replyctl.Key, d replyctl.Decision, userID int64) error {
	env, err := choiceEnvelope(b, envID, key, d, userID)
	if err != nil {
		return err
	}
	if _, err := h.o.Bus.SendSystemTx(ctx, tx, env); err != nil {
		return fmt.Errorf("telegram: push choice to %s: %w", b.rec.AgentID, err)
	}
	return nil
}

func choiceEnvelope(b *bot, envID string, key replyctl.Key, d replyctl.Decision, userID int64) (*protocol.Envelope, error) {
	data := Choice{Decision: d, BotID: b.rec.ID, ChatID: key.ChatID, ThreadID: key.ThreadID,
		BusinessConnectionID: key.BusinessConnectionID, UserID: userID}
	payload, err := json.Marshal(struct {
		Event   string `json:"event"`
		Message string `json:"message"`
		Data    Choice `json:"data"`
	}{EventChoice, d.Hint, data})
	if err != nil {
		return nil, err
	}
	return &protocol.Envelope{ID: envID, From: protocol.Address{Agent: SystemSender}, To: protocol.Address{Agent: b.rec.AgentID},
		Type: protocol.TypeNotification, Priority: protocol.PriorityHigh, TTL: deliveryTTL, Payload: payload}, nil
}

// outboxChannel wakes the outbox senders of every node.
const outboxChannel = "telegram_outbox"

// onBusMessage receives what runtimes send to system:telegram. A response
// to a telegram.message request whose result carries text becomes a reply
// in that chat: it is queued in the outbox in the bus's transaction (so the
// runtime's send is durable) and sent after commit. Anything else is
// accepted and ignored.
func (h *Host) onBusMessage(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
	if env.Type != protocol.TypeResponse {
		return nil
	}
	p, err := env.Response()
	if err != nil || p.Status != protocol.StatusSuccess || len(p.Result) == 0 {
		return nil
	}
	var res ResponseResult
	if err := json.Unmarshal(p.Result, &res.Text); err != nil {
		if err := json.Unmarshal(p.Result, &res); err != nil {
			return nil // a result of another shape: not a reply
		}
	}
	if res.Text == "" {
		return nil
	}
	var botID, target string
	err = tx.QueryRow(ctx, `SELECT bot_id, target FROM telegram_requests WHERE request_id = ?`, p.RequestID).Scan(&botID, &target)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // not a telegram.message, or pruned long ago
	}
	if err != nil {
		return fmt.Errorf("telegram: look up request: %w", err)
	}
	var rp ReplyParams
	if err := json.Unmarshal([]byte(target), &rp); err != nil {
		return fmt.Errorf("telegram: stored reply target: %w", err)
	}
	rp.Text, rp.ParseMode, rp.Controls, rp.ReplyID = res.Text, res.ParseMode, res.Controls, env.ID
	if err := rp.validate(); err != nil {
		pe := protocol.AsError(err)
		fe := map[string]string{}
		for f, m := range pe.FieldErrors {
			fe["payload.result."+f] = m
		}
		return &protocol.Error{Class: protocol.ClassInvalid, Code: "invalid_reply", Message: "the response's result cannot be sent as a Telegram reply: " + pe.Message,
			FieldErrors: fe, NextAction: "answer with result {text, parseMode?, controls?}"}
	}
	body, err := json.Marshal(rp)
	if err != nil {
		return err
	}
	now := store.Millis(h.o.Clock.Now())
	_, err = tx.Exec(ctx, `INSERT INTO telegram_outbox (id, bot_id, body, state, attempts, available_at, created_at, updated_at)
		VALUES (?, ?, ?, 'pending', 0, ?, ?, ?) ON CONFLICT (id) DO NOTHING`, p.RequestID, botID, string(body), now, now, now)
	if err != nil {
		return fmt.Errorf("telegram: queue reply: %w", err)
	}
	tx.Notify(outboxChannel, botID)
	return nil
}
