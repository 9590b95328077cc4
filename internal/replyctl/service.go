package replyctl

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Options tune a Service. Zero values pick the defaults.
type Options struct {
	Clock clock.Clock
	// NonceRetention keeps nonce records this long past their expiry, so a
	// late tap is answered "expired" or "no longer current" precisely
	// (default 7 days).
	NonceRetention time.Duration
	// UpdateRetention keeps seen update ids this long (default 48 hours;
	// Telegram redelivers an update for at most 24).
	UpdateRetention time.Duration
	// HistoryRetention keeps history rows this long (default 90 days).
	HistoryRetention time.Duration
	// SweepLimit bounds the conversations one Expire call processes
	// (default 500).
	SweepLimit int
}

// Service is what a transport and the HTTP layer call. It holds no state of
// its own: everything lives in the Store, so any number of Services (nodes)
// may share one store, and a restart changes nothing.
type Service struct {
	st   Store
	clk  clock.Clock
	opts Options
}

// New returns a Service over st.
func New(st Store, opts Options) *Service {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.NonceRetention <= 0 {
		opts.NonceRetention = 7 * 24 * time.Hour
	}
	if opts.UpdateRetention <= 0 {
		opts.UpdateRetention = 48 * time.Hour
	}
	if opts.HistoryRetention <= 0 {
		opts.HistoryRetention = 90 * 24 * time.Hour
	}
	if opts.SweepLimit <= 0 {
		opts.SweepLimit = 500
	}
	return &Service{st: st, clk: opts.Clock, opts: opts}
}

// Store returns the store the service uses (for reads such as History).
func (s *Service) Store() Store { return s.st }

// ---- showing a reply --------------------------------------------------------

// PrepareInput describes a reply about to be sent.
type PrepareInput struct {
	Where Where // Where.UserID is the user the reply answers; 0 lets anyone in the chat choose
	// ReplyID is the runtime's id of the reply (e.g. its message id on the
	// bus); it comes back in the policy and the choice notification.
	ReplyID string
	// LanguageCode is the addressed user's language (Telegram language_code).
	LanguageCode string
	// NoControls is the per-reply opt-out (e.g. the reply carries its own keyboard).
	NoControls bool
}

// Prepared is the keyboard to attach to a reply, or why there is none.
type Prepared struct {
	Attach  bool   // false: send the reply without controls
	Reason  string // ShouldAttach's reason
	Key     Key
	Nonce   string
	Locale  Locale
	Buttons []Button // Continue, Stop: one per row
	// ExpiresAt is when the buttons stop working.
	ExpiresAt time.Time
}

// Prepare decides whether a reply gets controls and, if so, issues its
// nonce and buttons. The nonce is recorded before the reply is sent, so a
// tap that races ReplyShown (or follows a crash before it) still works.
// Call ReplyShown with the sent message's id; if sending fails, do nothing:
// the issued nonce is never live and is pruned after it expires.
func (s *Service) Prepare(ctx context.Context, cfg BotConfig, in PrepareInput) (Prepared, error) {
	if err := cfg.Validate(); err != nil {
		return Prepared{}, err
	}
	key := cfg.KeyOf(in.Where)
	if err := key.Validate(); err != nil {
		return Prepared{}, err
	}
	if len(in.ReplyID) > 200 {
		return Prepared{}, protocol.Invalid("replyId", "must be at most 200 characters")
	}
	chat, err := s.st.ChatSettings(ctx, key.Chat())
	if err != nil {
		return Prepared{}, err
	}
	attach, reason := ShouldAttach(cfg.Scope, in.Where.Kind, chat.Controls, !in.NoControls)
	p := Prepared{Attach: attach, Reason: reason, Key: key}
	if !attach {
		return p, nil
	}
	now := s.clk.Now()
	p.Nonce = newNonce()
	p.Locale = ResolveLocale(chat.Locale, in.LanguageCode, cfg.DefaultLocale)
	p.ExpiresAt = now.Add(cfg.nonceTTL())
	codec := cfg.Codec()
	t := TextsFor(p.Locale)
	for _, b := range []struct {
		a     Action
		label string
	}{{ActionContinue, t.Continue}, {ActionStop, t.Stop}} {
		data, err := codec.Encode(b.a, p.Nonce)
		if err != nil {
			return Prepared{}, err
		}
		p.Buttons = append(p.Buttons, Button{Text: b.label, Data: data})
	}
	addressed := in.Where.UserID
	if addressed < 0 {
		addressed = 0
	}
	err = s.st.InsertNonce(ctx, NonceRecord{
		Nonce: p.Nonce, Key: key, ReplyID: in.ReplyID, AddressedUserID: addressed, Locale: p.Locale,
		Status: NonceIssued, IssuedAt: now, ExpiresAt: p.ExpiresAt,
	})
	if err != nil {
		return Prepared{}, err
	}
	return p, nil
}

// ShownResult says what showing a reply changed.
type ShownResult struct {
	Key     Key
	Changed bool
	// Edits resolve keyboards this reply replaced: the previous live
	// reply's, or this reply's own when a newer reply was already live.
	Edits  []KeyboardEdit
	Events []Event
}

// ReplyShown records that the reply prepared with nonce was sent as
// messageID (for a split reply: the last chunk, which carries the
// buttons). Its keyboard becomes the conversation's one live keyboard and
// the previous live one is superseded; Edits says which message's keyboard
// to remove. Calling it again for the same nonce changes nothing.
func (s *Service) ReplyShown(ctx context.Context, nonce string, messageID int64) (ShownResult, error) {
	if !validNonce(nonce) {
		return ShownResult{}, protocol.Invalid("nonce", "not a nonce issued by Prepare")
	}
	if messageID <= 0 {
		return ShownResult{}, protocol.Invalid("messageId", "must be the positive id of the sent message")
	}
	rec, ok, err := s.st.Nonce(ctx, nonce)
	if err != nil {
		return ShownResult{}, err
	}
	if !ok {
		return ShownResult{}, protocol.NotFound("replyctl_nonce_not_found", "no reply was prepared with this nonce (or it was pruned); call Prepare before sending")
	}
	now := s.clk.Now()
	var res ShownResult
	err = s.st.Update(ctx, rec.Key, now, func(tx ConvTx) error {
		o := newOp(tx, now)
		if err := o.expire(); err != nil {
			return err
		}
		rec, ok, err := tx.Nonce(nonce)
		if err != nil {
			return err
		}
		if !ok {
			return protocol.NotFound("replyctl_nonce_not_found", "the nonce was pruned before the reply was shown")
		}
		if rec.Status == NonceIssued {
			if err := o.show(&rec, messageID); err != nil {
				return err
			}
		}
		if err := o.commit(); err != nil {
			return err
		}
		res = ShownResult{Key: rec.Key, Changed: o.changed, Edits: o.edits, Events: o.events}
		return nil
	})
	if err != nil {
		return ShownResult{}, err
	}
	return res, nil
}

// ---- taps ------------------------------------------------------------------

// TapInput is a button tap (Telegram: a callback query).
type TapInput struct {
	ChatID               int64
	BusinessConnectionID string
	MessageID            int64 // the message carrying the button; 0 if the platform did not say
	UserID               int64 // who tapped
	LanguageCode         string
	Data                 string
	// IsAdmin reports whether the tapping user administers the chat. It is
	// called (outside any transaction) only when BotConfig.AdminsMayChoose
	// is set and the tapper is not the user the reply addresses; nil, or an
	// error, means no.
	IsAdmin func(ctx context.Context) (bool, error)
	// OnChange, when set, runs inside the transaction that changes the
	// conversation (only when the tap changes it), with the outcome Tap is
	// about to return. Work it does through tx — pushing the decision to the
	// runtime over the bus — commits atomically with the change; an error
	// undoes both and Tap returns it. It may run more than once when the
	// store retries a transaction. It needs a Store whose transactions are
	// store transactions (DBStore).
	OnChange func(ctx context.Context, tx *store.Tx, out TapOutcome) error
}

// TapResult is how a tap was answered.
type TapResult string

// The tap results.
const (
	TapChosen        TapResult = "chosen"
	TapAlreadyChosen TapResult = "already_chosen"
	TapNotCurrent    TapResult = "not_current"
	TapNotForYou     TapResult = "not_for_you"
	TapExpired       TapResult = "expired"
	TapInvalid       TapResult = "invalid"
)

// TapOutcome tells the transport everything it must do for one tap:
// answer the callback with Toast (always, at once), apply Edits, and when
// Changed push Decision to the runtime.
type TapOutcome struct {
	// Ours is false when the data is outside this package's namespace: the
	// callback belongs to someone else; do not answer it, pass it on.
	Ours    bool
	Result  TapResult
	Changed bool
	Toast   string
	Locale  Locale
	Key     Key    // zero when the data did not lead to a conversation
	Choice  Choice // the recorded choice (chosen, already_chosen)
	ReplyID string
	Edits   []KeyboardEdit
	// Decision is the conversation's policy after the change; set only when Changed.
	Decision *Decision
	Events   []Event
}

// Tap handles a button tap. Data outside the namespace comes back with
// Ours false; everything else is judged, answered with a toast and — only
// for a first valid tap on the live reply by someone allowed to choose —
// recorded. It returns an error only when the store fails; bad or hostile
// input is an outcome, never an error.
func (s *Service) Tap(ctx context.Context, cfg BotConfig, in TapInput) (TapOutcome, error) {
	now := s.clk.Now()
	cb, verdict := cfg.Codec().Decode(in.Data)
	if verdict == NotOurs {
		return TapOutcome{}, nil
	}
	out := TapOutcome{Ours: true}
	reject := func(res TapResult, reason string, rec *NonceRecord) TapOutcome {
		out.Result, out.Toast = res, toastFor(res, "", out.Locale)
		ev := Event{Type: EventRejected, Reason: reason, UserID: in.UserID, MessageID: in.MessageID, At: now}
		if rec != nil {
			out.Key, out.ReplyID = rec.Key, rec.ReplyID
			ev.Key, ev.Nonce, ev.ReplyID = rec.Key, rec.Nonce, rec.ReplyID
		}
		out.Events = append(out.Events, ev)
		return out
	}
	// The toast speaks the chat's language setting if it has one, else the tapper's.
	setLocale := func(chat Key) error {
		var chatLocale Locale
		if chat.Validate() == nil {
			cs, err := s.st.ChatSettings(ctx, chat)
			if err != nil {
				return err
			}
			chatLocale = cs.Locale
		}
		out.Locale = ResolveLocale(chatLocale, in.LanguageCode, cfg.DefaultLocale)
		return nil
	}
	tapChat := Key{BotID: cfg.BotID, BusinessConnectionID: in.BusinessConnectionID, ChatID: in.ChatID}
	if verdict != OK {
		if err := setLocale(tapChat); err != nil {
			return TapOutcome{}, err
		}
		if verdict == BadSignature {
			return reject(TapInvalid, RejectBadSignature, nil), nil
		}
		return reject(TapInvalid, RejectMalformed, nil), nil
	}
	rec, ok, err := s.st.Nonce(ctx, cb.Nonce)
	if err != nil {
		return TapOutcome{}, err
	}
	if !ok || rec.Key.BotID != cfg.BotID || rec.Key.ChatID != in.ChatID {
		if err := setLocale(tapChat); err != nil {
			return TapOutcome{}, err
		}
		if !ok {
			// Verified (or unsigned) data whose nonce is gone: pruned after expiry, or guessed.
			return reject(TapExpired, RejectUnknownNonce, nil), nil
		}
		return reject(TapInvalid, RejectWrongChat, nil), nil
	}
	if err := setLocale(rec.Key.Chat()); err != nil {
		return TapOutcome{}, err
	}
	if in.MessageID != 0 && rec.MessageID != 0 && rec.MessageID != in.MessageID {
		return reject(TapInvalid, RejectWrongMessage, nil), nil
	}
	if rec.AddressedUserID != 0 && in.UserID != rec.AddressedUserID {
		allowed, reason := false, RejectNotForYou
		if cfg.AdminsMayChoose && in.IsAdmin != nil {
			admin, err := in.IsAdmin(ctx)
			if err != nil {
				// Fail closed but answered: the user learns the buttons are
				// not theirs, the operator sees the reason in the event.
				reason = RejectAdminCheckFailed
			}
			allowed = admin && err == nil
		}
		if !allowed {
			return reject(TapNotForYou, reason, &rec), nil
		}
	}
	rejectedEvent := func(res TapResult, cur *NonceRecord) Event {
		reason := map[TapResult]string{TapAlreadyChosen: RejectAlreadyChosen, TapNotCurrent: RejectNotCurrent,
			TapExpired: RejectExpired, TapInvalid: RejectInert}[res]
		return Event{Type: EventRejected, Key: cur.Key, Nonce: cur.Nonce, ReplyID: cur.ReplyID,
			MessageID: cur.MessageID, UserID: in.UserID, Choice: cb.Action.Choice(), Reason: reason, At: now}
	}
	if settled(rec.Status) {
		// Duplicates, stale and inert taps: answered from the read, no write.
		res, edit := settledTap(cfg, &rec)
		out.Result, out.Key, out.ReplyID, out.Choice = res, rec.Key, rec.ReplyID, rec.Choice
		out.Toast = toastFor(res, rec.Choice, out.Locale)
		if edit != nil {
			out.Edits = []KeyboardEdit{*edit}
		}
		out.Events = append(out.Events, rejectedEvent(res, &rec))
		return out, nil
	}
	var done TapOutcome
	err = s.st.Update(ctx, rec.Key, now, func(tx ConvTx) error {
		out := out
		o := newOp(tx, now)
		o.cfg = cfg
		if err := o.expire(); err != nil {
			return err
		}
		cur, ok, err := tx.Nonce(cb.Nonce)
		if err != nil {
			return err
		}
		if !ok {
			return errNoncePruned
		}
		res, err := o.tap(&cur, cb.Action, in)
		if err != nil {
			return err
		}
		if err := o.commit(); err != nil {
			return err
		}
		out.Result, out.Changed, out.Key, out.ReplyID = res, o.changed, cur.Key, cur.ReplyID
		out.Choice = cur.Choice
		out.Toast = toastFor(res, cur.Choice, out.Locale)
		out.Edits, out.Events = o.edits, o.events
		if o.changed {
			d := Decide(o.st, now)
			out.Decision = &d
		}
		if res != TapChosen {
			out.Events = append(out.Events, rejectedEvent(res, &cur))
		}
		if o.changed && in.OnChange != nil {
			stx, err := storeTxOf(tx)
			if err != nil {
				return err
			}
			if err := in.OnChange(ctx, stx, out); err != nil {
				return err
			}
		}
		done = out
		return nil
	})
	if errors.Is(err, errNoncePruned) {
		return reject(TapExpired, RejectUnknownNonce, nil), nil
	}
	if err != nil {
		return TapOutcome{}, err
	}
	return done, nil
}

var errNoncePruned = errors.New("replyctl: nonce pruned")

// StoreTxer is implemented by the ConvTx of stores that run on the
// Switchboard store (DBStore): it exposes the store transaction an Update
// runs in, so the OnChange and Forward hooks can make other subsystems'
// writes part of it.
type StoreTxer interface {
	StoreTx() *store.Tx
}

func storeTxOf(tx ConvTx) (*store.Tx, error) {
	if s, ok := tx.(StoreTxer); ok && s.StoreTx() != nil {
		return s.StoreTx(), nil
	}
	return nil, errors.New("replyctl: OnChange and Forward need a store-backed Store (DBStore)")
}

func toastFor(r TapResult, c Choice, l Locale) string {
	t := TextsFor(l)
	switch r {
	case TapChosen:
		if c == ChoiceStop {
			return t.ToastStop
		}
		return t.ToastContinue
	case TapAlreadyChosen:
		return t.ToastAlreadyChosen
	case TapNotCurrent:
		return t.ToastNotCurrent
	case TapNotForYou:
		return t.ToastNotForYou
	case TapExpired:
		return t.ToastExpired
	}
	return t.ToastInvalid
}

// ---- typed messages -------------------------------------------------------

// TypedInput is a message the user typed (and the transport forwards to
// the runtime). Call Typed for every such message, before or while
// forwarding it: the message itself is never held back.
type TypedInput struct {
	Where Where // Where.UserID is the author
	// Forward, when set, runs inside the transaction that records the typed
	// message, with the outcome Typed is about to return: forwarding the
	// message to the runtime (a bus enqueue) through tx then commits
	// atomically with superseding the choice, and an error undoes both. With
	// Forward, Typed always runs a transaction, even when there is nothing to
	// supersede. It may run more than once when the store retries a
	// transaction. It needs a Store whose transactions are store
	// transactions (DBStore).
	Forward func(ctx context.Context, tx *store.Tx, out TypedOutcome) error
}

// TypedOutcome says what a typed message changed.
type TypedOutcome struct {
	Key      Key
	Changed  bool
	Edits    []KeyboardEdit // the live keyboard to remove, if there was one
	Decision Decision       // the policy after the message
	Events   []Event
}

// Typed records that the user wrote instead of tapping: a pending choice
// (live keyboard) or a standing continue/stop becomes
// superseded_by_message, and the live keyboard is removed; a later tap on
// that reply is answered "no longer current". Nothing is written when there
// is nothing to supersede, unless in.Forward asks for a transaction.
func (s *Service) Typed(ctx context.Context, cfg BotConfig, in TypedInput) (TypedOutcome, error) {
	key := cfg.KeyOf(in.Where)
	if err := key.Validate(); err != nil {
		return TypedOutcome{}, err
	}
	now := s.clk.Now()
	st, _, err := s.st.State(ctx, key)
	if err != nil {
		return TypedOutcome{}, err
	}
	if in.Forward == nil && !needsOverride(st.asOf(now)) && !stateExpiring(st, now) {
		return TypedOutcome{Key: key, Decision: Decide(st, now)}, nil
	}
	var out TypedOutcome
	err = s.st.Update(ctx, key, now, func(tx ConvTx) error {
		o := newOp(tx, now)
		o.cfg = cfg
		if err := o.expire(); err != nil {
			return err
		}
		if needsOverride(o.st) {
			if err := o.override(in); err != nil {
				return err
			}
		}
		if err := o.commit(); err != nil {
			return err
		}
		res := TypedOutcome{Key: key, Changed: o.changed, Edits: o.edits, Events: o.events, Decision: Decide(o.st, now)}
		if in.Forward != nil {
			stx, err := storeTxOf(tx)
			if err != nil {
				return err
			}
			if err := in.Forward(ctx, stx, res); err != nil {
				return err
			}
		}
		out = res
		return nil
	})
	if err != nil {
		return TypedOutcome{}, err
	}
	return out, nil
}

func needsOverride(st State) bool {
	return st.LiveNonce != "" || st.LastChoice == ChoiceContinue || st.LastChoice == ChoiceStop
}

// stateExpiring reports whether a stored state has an expiry due that has
// not been written down yet (so the write path persists it).
func stateExpiring(st State, now time.Time) bool {
	_, _, changed := st.expire(now)
	return changed
}

// ---- policy and settings ------------------------------------------------------

// Policy is the decision for key as of now. A conversation never seen is
// ChoiceNone. A key with a user that has no state of its own falls back to
// the chat-wide key (the runtime may pass userId even when the bot keys
// groups per chat). Errors: E003 for an invalid key.
func (s *Service) Policy(ctx context.Context, key Key) (Decision, error) {
	if err := key.Validate(); err != nil {
		return Decision{}, err
	}
	now := s.clk.Now()
	st, ok, err := s.st.State(ctx, key)
	if err != nil {
		return Decision{}, err
	}
	if !ok && key.UserID != 0 {
		wide := key
		wide.UserID = 0
		if st2, ok2, err := s.st.State(ctx, wide); err != nil {
			return Decision{}, err
		} else if ok2 {
			st = st2
		}
	}
	d := Decide(st, now)
	if d.Conversation == "" {
		d.Conversation = key.String()
	}
	return d, nil
}

// History lists a conversation's recorded choices, newest first.
func (s *Service) History(ctx context.Context, key Key, limit int) ([]HistoryEntry, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	return s.st.History(ctx, key, limit)
}

// ShouldAttach answers "should a reply at w carry controls" for a reply
// that does not opt out itself, reading the chat's /controls setting.
func (s *Service) ShouldAttach(ctx context.Context, cfg BotConfig, w Where) (bool, string, error) {
	key := cfg.KeyOf(w)
	if err := key.Validate(); err != nil {
		return false, "", err
	}
	cs, err := s.st.ChatSettings(ctx, key.Chat())
	if err != nil {
		return false, "", err
	}
	ok, reason := ShouldAttach(cfg.Scope, w.Kind, cs.Controls, true)
	return ok, reason, nil
}

// SetChatControls stores a chat's /controls on|off. It applies to the
// whole chat of key (every thread and user in it).
func (s *Service) SetChatControls(ctx context.Context, key Key, on bool) error {
	if err := key.Validate(); err != nil {
		return err
	}
	c := ControlsOff
	if on {
		c = ControlsOn
	}
	return s.st.SetChatControls(ctx, key.Chat(), c, s.clk.Now())
}

// SetChatLocale stores the locale a chat's controls use ("" returns to
// following each user's language code).
func (s *Service) SetChatLocale(ctx context.Context, key Key, l Locale) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if l != "" {
		if _, ok := texts[l]; !ok {
			return protocol.Invalid("locale", "must be one of en, zh-TW, zh-CN, or empty for automatic")
		}
	}
	return s.st.SetChatLocale(ctx, key.Chat(), l, s.clk.Now())
}

// ChatSettings reads the settings of key's chat.
func (s *Service) ChatSettings(ctx context.Context, key Key) (ChatSettings, error) {
	if err := key.Validate(); err != nil {
		return ChatSettings{}, err
	}
	return s.st.ChatSettings(ctx, key.Chat())
}

// SeenUpdate records a platform update id for botID and reports whether it
// was seen before, so a redelivered update is dropped (answered, not
// processed twice).
func (s *Service) SeenUpdate(ctx context.Context, botID string, updateID int64) (dup bool, err error) {
	if !validBotID(botID) {
		return false, protocol.Invalid("botId", "must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'")
	}
	return s.st.SeenUpdate(ctx, botID, updateID, s.clk.Now())
}

// ---- expiry --------------------------------------------------------------------

// Change is what expiry did to one conversation.
type Change struct {
	Key      Key
	Edits    []KeyboardEdit
	Decision Decision
	Events   []Event
}

// SweepResult is what one Expire call did.
type SweepResult struct {
	Changes []Change
	Pruned  PruneCounts
	// More is true when the sweep stopped at its limit; call again.
	More bool
}

// Expire writes down every expiry due at now — live keyboards past their
// lifetime (their keyboards are to be removed: see Changes[i].Edits) and
// choices past theirs — and prunes old nonces, update ids and history. Run
// it periodically (every minute is plenty); Policy and Tap already treat
// due expiries as expired, so the sweep's timing changes no answer.
func (s *Service) Expire(ctx context.Context, now time.Time) (SweepResult, error) {
	keys, err := s.st.DueForExpiry(ctx, now, s.opts.SweepLimit)
	if err != nil {
		return SweepResult{}, err
	}
	var res SweepResult
	res.More = len(keys) >= s.opts.SweepLimit
	for _, k := range keys {
		var ch *Change
		err := s.st.Update(ctx, k, now, func(tx ConvTx) error {
			ch = nil
			o := newOp(tx, now)
			if err := o.expire(); err != nil {
				return err
			}
			if err := o.commit(); err != nil {
				return err
			}
			if o.changed {
				ch = &Change{Key: k, Edits: o.edits, Events: o.events, Decision: Decide(o.st, now)}
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		if ch != nil {
			res.Changes = append(res.Changes, *ch)
		}
	}
	res.Pruned, err = s.st.Prune(ctx, now.Add(-s.opts.NonceRetention), now.Add(-s.opts.UpdateRetention),
		now.Add(-s.opts.HistoryRetention), s.opts.SweepLimit*2)
	if err != nil {
		return res, err
	}
	return res, nil
}
