package hosted

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/telegram"
)

// handle runs one deduplicated update of bot b. It runs on the webhook's
// worker goroutine or the poller's loop and uses the host's context, so a
// poller stopping mid-update does not cut the update's store work short.
func (h *Host) handle(b *bot, ev telegram.Event) {
	start := time.Now()
	switch {
	case ev.Tap != nil:
		h.metrics.updates.WithLabelValues("callback_query").Inc()
		h.onTap(h.ctx, b, ev, start)
	case ev.Message != nil:
		h.onMessage(h.ctx, b, ev)
	default:
		h.metrics.updates.WithLabelValues("other").Inc()
	}
}

// kindOf maps Telegram chat types onto replyctl's chat kinds.
func kindOf(chatType string) replyctl.ChatKind {
	switch chatType {
	case "private":
		return replyctl.KindDirect
	case "group", "supergroup":
		return replyctl.KindGroup
	case "channel":
		return replyctl.KindChannel
	}
	return ""
}

// kindOfChatID infers the chat kind from a chat id when the chat type is
// not at hand: Telegram gives private chats the user's (positive) id and
// every group, supergroup and channel a negative one.
func kindOfChatID(chatID int64) replyctl.ChatKind {
	if chatID > 0 {
		return replyctl.KindDirect
	}
	return replyctl.KindGroup
}

// onTap answers a button tap at once with the toast replyctl chose, after
// recording the choice (and, in the same transaction, pushing it to the
// runtime); keyboard edits follow in the background.
func (h *Host) onTap(ctx context.Context, b *bot, ev telegram.Event, start time.Time) {
	t := ev.Tap
	envID := "rc." + b.rec.ID + "." + strconv.FormatInt(ev.UpdateID, 10)
	out, err := h.rc.Tap(ctx, b.cfg, replyctl.TapInput{
		ChatID: t.ChatID, BusinessConnectionID: t.BusinessConnectionID, MessageID: int64(t.MessageID),
		UserID: t.UserID, LanguageCode: t.LanguageCode, Data: t.Data,
		OnChange: func(ctx context.Context, tx *store.Tx, out replyctl.TapOutcome) error {
			if out.Decision == nil {
				return nil
			}
			return h.pushChoice(ctx, tx, b, envID, out.Key, *out.Decision, t.UserID)
		},
	})
	toast := ""
	if err != nil {
		// Still answered, so the user's spinner stops and they can tap again.
		h.log.Error("tap not recorded", "bot", b.rec.ID, "update_id", ev.UpdateID, "err", err)
	} else if out.Ours {
		toast = out.Toast
	} else {
		h.metrics.events.WithLabelValues(string(replyctl.EventRejected), "not_ours").Inc()
		h.log.Debug("callback outside the reply-controls namespace answered without a toast", "bot", b.rec.ID, "update_id", ev.UpdateID)
	}
	if aerr := b.client.AnswerCallback(ctx, telegram.CallbackAnswer{QueryID: t.QueryID, Text: toast}); aerr != nil {
		h.metrics.apiErrors.WithLabelValues("answerCallbackQuery").Inc()
		h.log.Warn("could not answer a callback", "bot", b.rec.ID, "update_id", ev.UpdateID, "err", aerr)
	}
	h.metrics.tapAnswered.Observe(time.Since(start).Seconds())
	if err != nil {
		return
	}
	h.observe(b, out.Events, slog.String("result", string(out.Result)))
	h.applyEdits(b, out.Edits)
}

// onMessage handles a typed message: a /controls command is answered in
// the chat and goes no further; anything else supersedes the pending
// choice and is forwarded to the runtime, atomically.
func (h *Host) onMessage(ctx context.Context, b *bot, ev telegram.Event) {
	m := ev.Message
	where := replyctl.Where{BusinessConnectionID: m.BusinessConnectionID, ChatID: m.ChatID, ThreadID: int64(m.ThreadID),
		Kind: kindOf(m.ChatType), UserID: m.UserID}
	if cmd, ok := replyctl.ParseControlsCommand(m.Text, b.rec.Username); ok {
		h.metrics.updates.WithLabelValues("controls_command").Inc()
		h.onControls(ctx, b, ev, where, cmd)
		return
	}
	h.metrics.updates.WithLabelValues("message").Inc()
	params := MessageParams{
		BotID: b.rec.ID, ChatID: m.ChatID, ChatType: m.ChatType, ThreadID: int64(m.ThreadID),
		BusinessConnectionID: m.BusinessConnectionID, UserID: m.UserID, Username: m.Username,
		LanguageCode: m.LanguageCode, MessageID: int64(m.MessageID), Text: m.Text, Date: m.Date,
	}
	envID := "tg." + b.rec.ID + "." + strconv.FormatInt(ev.UpdateID, 10)
	var out replyctl.TypedOutcome
	var err error
	for attempt := 1; ; attempt++ {
		out, err = h.rc.Typed(ctx, b.cfg, replyctl.TypedInput{Where: where,
			Forward: func(ctx context.Context, tx *store.Tx, out replyctl.TypedOutcome) error {
				p := params
				p.ConversationKey, p.Policy = out.Key.String(), out.Decision
				return h.forwardMessage(ctx, tx, b, envID, p)
			}})
		if err == nil || attempt == 3 || ctx.Err() != nil || protocol.ClassOf(err) != protocol.ClassSystem {
			break
		}
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
	}
	if err != nil {
		h.log.Error("typed message not forwarded to the runtime", "bot", b.rec.ID, "agent", b.rec.AgentID,
			"update_id", ev.UpdateID, "err", err)
		return
	}
	h.observe(b, out.Events)
	h.applyEdits(b, out.Edits)
}

// onControls applies "/controls on|off|lang" and answers in the chat. The
// hub handles it; the runtime never sees it.
func (h *Host) onControls(ctx context.Context, b *bot, ev telegram.Event, where replyctl.Where, cmd replyctl.ControlsCommand) {
	m := ev.Message
	text, err := h.rc.HandleControlsCommand(ctx, b.cfg, where, cmd, m.LanguageCode)
	if err != nil {
		h.log.Error("/controls failed", "bot", b.rec.ID, "chat", m.ChatID, "err", err)
		return
	}
	h.log.Info("/controls", "bot", b.rec.ID, "chat", m.ChatID, "action", cmd.Action, "arg", cmd.Arg, "userId", m.UserID)
	_, err = b.client.SendMessage(ctx, telegram.SendParams{ChatID: m.ChatID, ThreadID: m.ThreadID,
		BusinessConnectionID: m.BusinessConnectionID, Text: text})
	if err != nil {
		h.metrics.apiErrors.WithLabelValues("sendMessage").Inc()
		h.log.Warn("could not answer /controls", "bot", b.rec.ID, "chat", m.ChatID, "err", err)
	}
}

// keyboardOf lays replyctl's buttons out one per row.
func keyboardOf(buttons []replyctl.Button) telegram.Keyboard {
	if len(buttons) == 0 {
		return nil
	}
	kb := make(telegram.Keyboard, 0, len(buttons))
	for _, btn := range buttons {
		kb = append(kb, []telegram.Button{{Text: btn.Text, CallbackData: btn.Data}})
	}
	return kb
}

// applyEdits changes keyboards in the background: an edit may wait out a
// rate limit, and nothing the user sees waits for it. Edits of one message
// are idempotent and coalesced by the client, so their order does not
// matter; a lost edit is repaired by the next tap on that message.
func (h *Host) applyEdits(b *bot, edits []replyctl.KeyboardEdit) {
	for _, e := range edits {
		h.wg.Add(1)
		go func(e replyctl.KeyboardEdit) {
			defer h.wg.Done()
			err := b.client.EditKeyboard(h.ctx, telegram.EditKeyboardParams{ChatID: e.Key.ChatID, MessageID: int(e.MessageID),
				BusinessConnectionID: e.Key.BusinessConnectionID, Keyboard: keyboardOf(e.Buttons)})
			switch {
			case err == nil:
			case telegram.IsMessageNotFound(err):
				h.log.Debug("keyboard edit: message gone", "bot", b.rec.ID, "chat", e.Key.ChatID, "message", e.MessageID)
			case errors.Is(err, context.Canceled):
			default:
				h.metrics.apiErrors.WithLabelValues("editMessageReplyMarkup").Inc()
				h.log.Warn("keyboard edit failed", "bot", b.rec.ID, "chat", e.Key.ChatID, "message", e.MessageID, "reason", e.Reason, "err", err)
			}
		}(e)
	}
}

// observe counts and logs replyctl events.
func (h *Host) observe(b *bot, events []replyctl.Event, extra ...slog.Attr) {
	for _, e := range events {
		h.metrics.events.WithLabelValues(string(e.Type), e.Reason).Inc()
		lvl := slog.LevelInfo
		if e.Type == replyctl.EventShown {
			lvl = slog.LevelDebug
		}
		attrs := append([]slog.Attr{slog.String("bot", b.rec.ID)}, e.LogAttrs()...)
		h.log.LogAttrs(h.ctx, lvl, "reply controls", append(attrs, extra...)...)
	}
}
