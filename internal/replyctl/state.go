package replyctl

import (
	"context"
	"time"
)

// State is one conversation's reply-end state: the last recorded choice
// (what the policy is computed from) and the one live keyboard, if any.
type State struct {
	Key Key

	LastChoice      Choice
	Source          Source
	At              time.Time // when LastChoice was recorded
	ReplyID         string    // the reply LastChoice refers to
	MessageID       int64     // the message carrying that reply's keyboard
	UserID          int64     // who made the choice (0 for timeouts)
	ChoiceExpiresAt time.Time // LastChoice turns into expired at this time; zero for none/expired

	LiveNonce     string // the reply whose keyboard is live; "" for none
	LiveMessageID int64
	LiveReplyID   string
	LiveIssuedAt  time.Time
	LiveExpiresAt time.Time

	Version   int64 // incremented on every change; 0 for a conversation never written
	UpdatedAt time.Time
}

// asOf returns st as it stands at now: a live keyboard or a choice whose
// time has passed reads as expired (source timeout, at its expiry time).
func (st State) asOf(now time.Time) State {
	st, _, _ = st.expire(now)
	return st
}

// expire applies expiry at now. It reports whether anything changed and
// which live reply (nonce, message) expired, so the sweeper can resolve its
// keyboard.
func (st State) expire(now time.Time) (State, *liveRef, bool) {
	var expired *liveRef
	changed := false
	if st.LastChoice == "" {
		st.LastChoice = ChoiceNone
	}
	if st.LiveNonce != "" && !st.LiveExpiresAt.IsZero() && !now.Before(st.LiveExpiresAt) {
		expired = &liveRef{Nonce: st.LiveNonce, MessageID: st.LiveMessageID, ReplyID: st.LiveReplyID}
		st.LastChoice, st.Source, st.At = ChoiceExpired, SourceTimeout, st.LiveExpiresAt
		st.ReplyID, st.MessageID, st.UserID = st.LiveReplyID, st.LiveMessageID, 0
		st.ChoiceExpiresAt = time.Time{}
		st.clearLive()
		changed = true
	}
	switch st.LastChoice {
	case ChoiceContinue, ChoiceStop, ChoiceSuperseded:
		if !st.ChoiceExpiresAt.IsZero() && !now.Before(st.ChoiceExpiresAt) {
			st.LastChoice, st.Source, st.At, st.UserID = ChoiceExpired, SourceTimeout, st.ChoiceExpiresAt, 0
			st.ChoiceExpiresAt = time.Time{}
			changed = true
		}
	}
	return st, expired, changed
}

func (st *State) clearLive() {
	st.LiveNonce, st.LiveMessageID, st.LiveReplyID = "", 0, ""
	st.LiveIssuedAt, st.LiveExpiresAt = time.Time{}, time.Time{}
}

type liveRef struct {
	Nonce     string
	MessageID int64
	ReplyID   string
}

// NonceStatus is where one reply's keyboard is in its life.
type NonceStatus string

// The nonce statuses. Issued → live → exactly one of chosen, superseded
// (a newer reply took over), overridden (a typed message won) or expired.
const (
	NonceIssued     NonceStatus = "issued"
	NonceLive       NonceStatus = "live"
	NonceChosen     NonceStatus = "chosen"
	NonceSuperseded NonceStatus = "superseded"
	NonceOverridden NonceStatus = "overridden"
	NonceExpired    NonceStatus = "expired"
)

// NonceRecord is what the store knows about one reply's buttons: the
// callback data carries only the nonce, everything else is looked up here.
type NonceRecord struct {
	Nonce           string
	Key             Key
	MessageID       int64 // 0 until the reply was shown
	ReplyID         string
	AddressedUserID int64 // who may choose (0: anyone in the chat)
	Locale          Locale
	Status          NonceStatus
	Choice          Choice // when Status is NonceChosen
	ChosenBy        int64
	IssuedAt        time.Time
	ExpiresAt       time.Time
	ResolvedAt      time.Time
}

// HistoryEntry is one recorded change of a conversation's LastChoice.
type HistoryEntry struct {
	ID        int64
	Key       Key
	Choice    Choice
	Source    Source
	ReplyID   string
	MessageID int64
	Nonce     string
	UserID    int64
	At        time.Time
}

// ChatSettings are a chat's own preferences, set by its users.
type ChatSettings struct {
	Chat      Key // a chat key (no thread, no user)
	Controls  ChatControls
	Locale    Locale // "" for automatic (the user's language code)
	UpdatedAt time.Time
}

// PruneCounts reports what a prune removed.
type PruneCounts struct {
	Nonces, Updates, History int64
}

// Store keeps reply-end state. Implementations must make Update atomic and
// serialized per conversation: two Updates of one key never interleave, and
// either all of fn's writes happen or none.
type Store interface {
	// Update runs fn with key's state locked, creating the conversation if
	// new. fn must only touch the store through tx, and must not block on
	// anything but the store. An error from fn undoes its writes.
	Update(ctx context.Context, key Key, now time.Time, fn func(tx ConvTx) error) error
	// State reads a conversation; ok is false if it was never written.
	State(ctx context.Context, key Key) (st State, ok bool, err error)
	// Nonce reads one nonce record.
	Nonce(ctx context.Context, nonce string) (rec NonceRecord, ok bool, err error)
	// InsertNonce records a freshly issued nonce.
	InsertNonce(ctx context.Context, rec NonceRecord) error
	// History lists a conversation's recorded changes, newest first.
	History(ctx context.Context, key Key, limit int) ([]HistoryEntry, error)
	// ChatSettings reads a chat's settings (zero values when never set).
	ChatSettings(ctx context.Context, chat Key) (ChatSettings, error)
	// SetChatControls stores a chat's /controls setting.
	SetChatControls(ctx context.Context, chat Key, c ChatControls, now time.Time) error
	// SetChatLocale stores a chat's locale ("" for automatic).
	SetChatLocale(ctx context.Context, chat Key, l Locale, now time.Time) error
	// SeenUpdate records a platform update id and reports whether it had
	// been recorded before.
	SeenUpdate(ctx context.Context, botID string, updateID int64, now time.Time) (dup bool, err error)
	// DueForExpiry lists conversations whose live keyboard or choice has
	// reached its expiry at now.
	DueForExpiry(ctx context.Context, now time.Time, limit int) ([]Key, error)
	// Prune deletes nonces that expired before nonces, update ids seen
	// before updates and history recorded before history, at most limit
	// rows of each.
	Prune(ctx context.Context, nonces, updates, history time.Time, limit int) (PruneCounts, error)
}

// ConvTx is the view of one locked conversation inside Store.Update.
type ConvTx interface {
	// State is the conversation as locked (Version 0 when it is new).
	State() State
	// SetState writes st (with Version incremented) as the new state.
	SetState(st State) error
	// Nonce reads one nonce record.
	Nonce(nonce string) (NonceRecord, bool, error)
	// SetNonce writes a nonce record's mutable fields (status, message id,
	// choice, chosen by, resolved at).
	SetNonce(rec NonceRecord) error
	// AddHistory appends a history row.
	AddHistory(h HistoryEntry) error
}
