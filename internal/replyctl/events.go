package replyctl

import (
	"log/slog"
	"time"
)

// EventType names an observable step of the controls' life. Operations
// return their events rather than logging them, so the caller decides how
// they become logs, metrics or bus messages.
type EventType string

// The event types.
const (
	EventShown         EventType = "shown"          // a reply's keyboard became live
	EventChosen        EventType = "chosen"         // a tap recorded a choice
	EventExpired       EventType = "expired"        // a live keyboard or a choice expired
	EventRejected      EventType = "rejected"       // a tap changed nothing (see Reason)
	EventTypedOverride EventType = "typed_override" // a typed message superseded a pending or standing choice
)

// Reasons of rejected events.
const (
	RejectMalformed    = "malformed"
	RejectBadSignature = "bad_signature"
	RejectUnknownNonce = "unknown_nonce"
	RejectWrongChat    = "wrong_chat"
	RejectWrongMessage = "wrong_message"
	RejectNotForYou    = "not_for_you"
	// RejectAdminCheckFailed: a tap by someone the reply does not address,
	// refused because asking the platform whether they are an admin failed.
	RejectAdminCheckFailed = "admin_check_failed"
	RejectAlreadyChosen    = "already_chosen"
	RejectNotCurrent       = "not_current"
	RejectExpired          = "expired"
	RejectInert            = "inert"
)

// Event is one observable step.
type Event struct {
	Type      EventType
	Key       Key // zero when a tap was rejected before its conversation was known
	Nonce     string
	ReplyID   string
	MessageID int64
	UserID    int64
	Choice    Choice // chosen: the choice; typed_override: the choice it replaced; expired: what expired
	Reason    string // rejected: why; expired: "keyboard" or "choice"
	At        time.Time
}

// LogAttrs renders e for log/slog.
func (e Event) LogAttrs() []slog.Attr {
	attrs := []slog.Attr{slog.String("event", string(e.Type))}
	if e.Key.BotID != "" {
		attrs = append(attrs, slog.String("conversation", e.Key.String()))
	}
	if e.Nonce != "" {
		attrs = append(attrs, slog.String("nonce", e.Nonce))
	}
	if e.ReplyID != "" {
		attrs = append(attrs, slog.String("replyId", e.ReplyID))
	}
	if e.MessageID != 0 {
		attrs = append(attrs, slog.Int64("messageId", e.MessageID))
	}
	if e.UserID != 0 {
		attrs = append(attrs, slog.Int64("userId", e.UserID))
	}
	if e.Choice != "" {
		attrs = append(attrs, slog.String("choice", string(e.Choice)))
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	return attrs
}

// Button is one inline button: a label and its callback data.
type Button struct {
	Text string
	Data string
}

// KeyboardEdit asks the transport to change the buttons under one message
// (Telegram: editMessageReplyMarkup). Edits are idempotent: repeating one,
// or one Telegram answers with "message is not modified", is harmless.
type KeyboardEdit struct {
	Key       Key // the conversation; ChatID and BusinessConnectionID address the message
	MessageID int64
	Nonce     string
	// Buttons is the new keyboard, one button per row; nil removes it.
	Buttons []Button
	Reason  string // chosen, superseded, overridden or expired
}
