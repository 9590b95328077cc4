package hosted

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
	"github.com/switchboard-hub/switchboard/internal/telegram"
)

// MaxReplyBytes bounds a reply's text. Telegram takes 4096 characters per
// message; the hub splits longer replies, up to about sixteen messages.
const MaxReplyBytes = 64 << 10

// ReplyParams is the body of POST /v1/replyctl/bots/{bot}/replies.
type ReplyParams struct {
	ChatID               int64  `json:"chatId"`
	ThreadID             int64  `json:"threadId,omitempty"`             // forum topic
	BusinessConnectionID string `json:"businessConnectionId,omitempty"` // answer through a business connection
	Text                 string `json:"text"`
	ParseMode            string `json:"parseMode,omitempty"` // "", HTML, MarkdownV2 or Markdown
	// Controls attaches Continue / Stop to the reply (default true); false
	// is the per-reply opt-out, e.g. for a reply that is a question of its own.
	Controls *bool `json:"controls,omitempty"`
	// UserID is the user the reply answers: in a group only they may
	// choose. Default: the chat's user in a private chat, anyone in a group.
	UserID int64 `json:"userId,omitempty"`
	// LanguageCode picks the buttons' language (the user's language_code)
	// when the chat has not set one.
	LanguageCode string `json:"languageCode,omitempty"`
	// ReplyID is the runtime's id of this reply; it comes back in the
	// policy and in replyctl.choice. Default: a generated rpl_ id.
	ReplyID            string `json:"replyId,omitempty"`
	DisableLinkPreview bool   `json:"disableLinkPreview,omitempty"`
}

// ReplyResult is the answer to a reply: the messages it became and whether
// it carries the controls.
type ReplyResult struct {
	BotID        string  `json:"botId"`
	Conversation string  `json:"conversation"`
	ReplyID      string  `json:"replyId"`
	MessageIDs   []int64 `json:"messageIds"`
	// Controls reports whether the last message carries Continue / Stop;
	// Reason says why (attach, reply_opt_out, chat_opt_out, bot_scope_off,
	// out_of_scope, ...).
	Controls  bool      `json:"controls"`
	Reason    string    `json:"reason"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"` // when the buttons stop working
}

func (p *ReplyParams) validate() error {
	fe := protocol.FieldErrors{}
	if p.ChatID == 0 {
		fe.Add("chatId", "required: the chat to answer in (chatId of the telegram.message)")
	}
	if p.ThreadID < 0 {
		fe.Add("threadId", "must be a forum topic id or 0")
	}
	if p.UserID < 0 {
		fe.Add("userId", "must be a Telegram user id or 0")
	}
	switch {
	case strings.TrimSpace(p.Text) == "":
		fe.Add("text", "required: Telegram rejects empty messages")
	case len(p.Text) > MaxReplyBytes:
		fe.Add("text", fmt.Sprintf("is %d bytes; the limit is %d", len(p.Text), MaxReplyBytes))
	case !utf8.ValidString(p.Text):
		fe.Add("text", "is not valid UTF-8")
	}
	switch p.ParseMode {
	case telegram.ParseModeNone, telegram.ParseModeHTML, telegram.ParseModeMarkdownV2, telegram.ParseModeMarkdown:
	default:
		fe.Add("parseMode", "use HTML, MarkdownV2, Markdown or leave it empty")
	}
	if len(p.BusinessConnectionID) > replyctl.MaxBusinessConnectionIDLen {
		fe.Add("businessConnectionId", "too long")
	}
	if len(p.LanguageCode) > 35 {
		fe.Add("languageCode", "must be an IETF language tag such as en or zh-hant")
	}
	if len(p.ReplyID) > 200 || (p.ReplyID != "" && !protocol.ValidID(p.ReplyID)) {
		fe.Add("replyId", "at most 128 characters of A-Z a-z 0-9 . _ : -")
	}
	return fe.Err()
}

// Reply sends a runtime's reply: split at 4096 characters, with Continue /
// Stop on the last chunk unless the reply, the chat or the bot's scope opts
// out. The conversation's previous live keyboard is resolved.
func (h *Host) Reply(ctx context.Context, botID string, p ReplyParams) (ReplyResult, error) {
	b, err := h.bot(ctx, botID)
	if err != nil {
		return ReplyResult{}, err
	}
	return h.reply(ctx, b, p)
}

func (h *Host) reply(ctx context.Context, b *bot, p ReplyParams) (ReplyResult, error) {
	if err := p.validate(); err != nil {
		return ReplyResult{}, err
	}
	if p.ReplyID == "" {
		p.ReplyID = protocol.NewID("rpl_")
	}
	where := replyctl.Where{BusinessConnectionID: p.BusinessConnectionID, ChatID: p.ChatID, ThreadID: p.ThreadID,
		Kind: kindOfChatID(p.ChatID), UserID: p.UserID}
	if where.Kind == replyctl.KindDirect && where.UserID == 0 {
		where.UserID = p.ChatID
	}
	prep, err := h.rc.Prepare(ctx, b.cfg, replyctl.PrepareInput{Where: where, ReplyID: p.ReplyID,
		LanguageCode: p.LanguageCode, NoControls: p.Controls != nil && !*p.Controls})
	if err != nil {
		return ReplyResult{}, err
	}
	var kb telegram.Keyboard
	if prep.Attach {
		kb = keyboardOf(prep.Buttons)
	}
	sent, err := b.client.SendMessage(ctx, telegram.SendParams{ChatID: p.ChatID, ThreadID: int(p.ThreadID),
		BusinessConnectionID: p.BusinessConnectionID, Text: p.Text, ParseMode: p.ParseMode, Keyboard: kb,
		DisableLinkPreview: p.DisableLinkPreview})
	ids := make([]int64, len(sent.MessageIDs))
	for i, id := range sent.MessageIDs {
		ids[i] = int64(id)
	}
	if err != nil {
		h.metrics.apiErrors.WithLabelValues("sendMessage").Inc()
		pe := protocol.AsError(telegramError(err, "sending the reply failed"))
		if len(ids) > 0 {
			pe.Message += fmt.Sprintf(" (%d chunk(s) were delivered before the failure)", len(ids))
			if pe.Extra == nil {
				pe.Extra = map[string]any{}
			}
			pe.Extra["sentMessageIds"] = ids
		}
		return ReplyResult{}, pe
	}
	res := ReplyResult{BotID: b.rec.ID, Conversation: prep.Key.String(), ReplyID: p.ReplyID, MessageIDs: ids,
		Controls: prep.Attach, Reason: prep.Reason}
	if prep.Attach {
		res.ExpiresAt = prep.ExpiresAt
		shown, err := h.rc.ReplyShown(ctx, prep.Nonce, int64(sent.LastMessageID()))
		if err != nil {
			// The reply is out with its buttons; a tap will show it (replyctl
			// treats a tap on an issued nonce as proof the reply is visible).
			h.log.Error("reply sent but not recorded as shown", "bot", b.rec.ID, "chat", p.ChatID, "err", err)
			return res, nil
		}
		h.observe(b, shown.Events)
		h.applyEdits(b, shown.Edits)
	}
	return res, nil
}
