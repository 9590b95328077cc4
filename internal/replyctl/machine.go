package replyctl

import "time"

// op is one state-machine step on a locked conversation: it works on a copy
// of the state, writes nonce and history rows through the ConvTx as it goes,
// and collects the keyboard edits and events to hand back. commit writes the
// state once at the end. All of it runs inside one Store.Update, so it
// commits or fails as a whole.
type op struct {
	tx      ConvTx
	now     time.Time
	cfg     BotConfig
	st      State
	dirty   bool // st differs from the stored state
	changed bool // anything observable changed (state or a nonce)
	edits   []KeyboardEdit
	events  []Event
}

func newOp(tx ConvTx, now time.Time) *op {
	st := tx.State()
	if st.LastChoice == "" {
		st.LastChoice = ChoiceNone
	}
	return &op{tx: tx, now: now, st: st}
}

func (o *op) commit() error {
	if !o.dirty {
		return nil
	}
	if err := o.tx.SetState(o.st); err != nil {
		return err
	}
	o.st = o.tx.State()
	o.dirty = false
	return nil
}

func (o *op) edit(messageID int64, nonce string, buttons []Button, reason string) {
	o.addEdit(KeyboardEdit{Key: o.st.Key, MessageID: messageID, Nonce: nonce, Buttons: buttons, Reason: reason})
}

// addEdit queues e, replacing an earlier edit of the same message (the
// last word on a keyboard is the one that counts).
func (o *op) addEdit(e KeyboardEdit) {
	if e.MessageID <= 0 {
		return
	}
	for i := range o.edits {
		if o.edits[i].MessageID == e.MessageID {
			o.edits[i] = e
			return
		}
	}
	o.edits = append(o.edits, e)
}

func (o *op) history(c Choice, src Source, replyID string, messageID int64, nonce string, user int64, at time.Time) error {
	return o.tx.AddHistory(HistoryEntry{Key: o.st.Key, Choice: c, Source: src, ReplyID: replyID, MessageID: messageID,
		Nonce: nonce, UserID: user, At: at})
}

// resolveNonce moves a nonce that is still open (issued or live) to status.
func (o *op) resolveNonce(nonce string, status NonceStatus) error {
	rec, ok, err := o.tx.Nonce(nonce)
	if err != nil || !ok {
		return err
	}
	if rec.Status != NonceIssued && rec.Status != NonceLive {
		return nil
	}
	rec.Status, rec.ResolvedAt = status, o.now
	return o.tx.SetNonce(rec)
}

// expire writes down any expiry due at o.now.
func (o *op) expire() error {
	prev := o.st
	st, live, changed := prev.expire(o.now)
	if !changed {
		return nil
	}
	o.st, o.dirty, o.changed = st, true, true
	ev := Event{Type: EventExpired, Key: st.Key, ReplyID: st.ReplyID, MessageID: st.MessageID, At: st.At}
	if live != nil {
		if err := o.resolveNonce(live.Nonce, NonceExpired); err != nil {
			return err
		}
		o.edit(live.MessageID, live.Nonce, nil, "expired")
		ev.Nonce, ev.Reason = live.Nonce, "keyboard"
	} else {
		ev.Choice, ev.Reason = prev.LastChoice, "choice"
	}
	o.events = append(o.events, ev)
	return o.history(ChoiceExpired, SourceTimeout, st.ReplyID, st.MessageID, ev.Nonce, 0, st.At)
}

// show makes rec (an issued nonce) the live keyboard, superseding the
// previous live one — unless a newer reply is live already, or rec's own
// lifetime is over, in which case rec's keyboard is resolved at once.
func (o *op) show(rec *NonceRecord, messageID int64) error {
	if rec.MessageID == 0 {
		rec.MessageID = messageID
	}
	o.changed = true
	st := &o.st
	if st.LiveNonce != "" && st.LiveNonce != rec.Nonce && st.LiveIssuedAt.After(rec.IssuedAt) {
		rec.Status, rec.ResolvedAt = NonceSuperseded, o.now
		o.edit(rec.MessageID, rec.Nonce, nil, "superseded")
		return o.tx.SetNonce(*rec)
	}
	if !o.now.Before(rec.ExpiresAt) {
		rec.Status, rec.ResolvedAt = NonceExpired, o.now
		o.edit(rec.MessageID, rec.Nonce, nil, "expired")
		return o.tx.SetNonce(*rec)
	}
	if st.LiveNonce != "" && st.LiveNonce != rec.Nonce {
		if err := o.resolveNonce(st.LiveNonce, NonceSuperseded); err != nil {
			return err
		}
		o.edit(st.LiveMessageID, st.LiveNonce, nil, "superseded")
	}
	rec.Status = NonceLive
	if err := o.tx.SetNonce(*rec); err != nil {
		return err
	}
	st.LiveNonce, st.LiveMessageID, st.LiveReplyID = rec.Nonce, rec.MessageID, rec.ReplyID
	st.LiveIssuedAt, st.LiveExpiresAt = rec.IssuedAt, rec.ExpiresAt
	o.dirty = true
	o.events = append(o.events, Event{Type: EventShown, Key: st.Key, Nonce: rec.Nonce, ReplyID: rec.ReplyID,
		MessageID: rec.MessageID, UserID: rec.AddressedUserID, At: o.now})
	return nil
}

// tap applies a (verified, authorized) tap on cur.
func (o *op) tap(cur *NonceRecord, action Action, in TapInput) (TapResult, error) {
	if cur.Status == NonceIssued {
		if action == ActionNone {
			return TapInvalid, nil
		}
		// The reply was sent but ReplyShown has not run (a race, or a crash
		// in between): the tap proves the reply is visible, so show it now.
		if err := o.show(cur, in.MessageID); err != nil {
			return "", err
		}
	}
	switch cur.Status {
	case NonceLive:
		if action == ActionNone {
			return TapInvalid, nil // we never put inert data on a live keyboard
		}
		if o.st.LiveNonce != cur.Nonce || !o.now.Before(cur.ExpiresAt) {
			// Cannot happen while every change goes through this machine;
			// answer conservatively and close the stray nonce.
			if err := o.resolveNonce(cur.Nonce, NonceSuperseded); err != nil {
				return "", err
			}
			o.changed = true
			o.edit(cur.MessageID, cur.Nonce, nil, "superseded")
			return TapNotCurrent, nil
		}
		return TapChosen, o.choose(cur, action.Choice(), in)
	}
	res, edit := settledTap(o.cfg, cur)
	if edit != nil {
		o.addEdit(*edit)
	}
	return res, nil
}

// settledTap answers a tap on a reply whose keyboard is already resolved
// (chosen, superseded, overridden, expired). Those states never change
// again, so the answer needs no transaction. The edit re-applies the
// resolved keyboard, repairing one whose earlier edit was lost.
func settledTap(cfg BotConfig, cur *NonceRecord) (TapResult, *KeyboardEdit) {
	e := &KeyboardEdit{Key: cur.Key, MessageID: cur.MessageID, Nonce: cur.Nonce, Reason: string(cur.Status)}
	var res TapResult
	switch cur.Status {
	case NonceChosen:
		res, e.Buttons = TapAlreadyChosen, resolvedButtons(cfg, cur)
	case NonceSuperseded, NonceOverridden:
		res = TapNotCurrent
	case NonceExpired:
		res = TapExpired
	default:
		return TapInvalid, nil
	}
	if cur.MessageID <= 0 {
		e = nil
	}
	return res, e
}

func settled(s NonceStatus) bool {
	return s == NonceChosen || s == NonceSuperseded || s == NonceOverridden || s == NonceExpired
}

func (o *op) choose(cur *NonceRecord, c Choice, in TapInput) error {
	if cur.MessageID == 0 {
		cur.MessageID = in.MessageID
	}
	cur.Status, cur.Choice, cur.ChosenBy, cur.ResolvedAt = NonceChosen, c, in.UserID, o.now
	if err := o.tx.SetNonce(*cur); err != nil {
		return err
	}
	st := &o.st
	st.LastChoice, st.Source, st.At = c, SourceButton, o.now
	st.ReplyID, st.MessageID, st.UserID = cur.ReplyID, cur.MessageID, in.UserID
	st.ChoiceExpiresAt = o.now.Add(o.cfg.choiceTTL())
	st.clearLive()
	o.dirty, o.changed = true, true
	o.edit(cur.MessageID, cur.Nonce, resolvedButtons(o.cfg, cur), "chosen")
	o.events = append(o.events, Event{Type: EventChosen, Key: st.Key, Nonce: cur.Nonce, ReplyID: cur.ReplyID,
		MessageID: cur.MessageID, UserID: in.UserID, Choice: c, At: o.now})
	return o.history(c, SourceButton, cur.ReplyID, cur.MessageID, cur.Nonce, in.UserID, o.now)
}

// override applies a typed message: the live keyboard (if any) is removed
// and the conversation's choice becomes superseded_by_message.
func (o *op) override(in TypedInput) error {
	st := &o.st
	replaced := st.LastChoice
	nonce := ""
	if st.LiveNonce != "" {
		if err := o.resolveNonce(st.LiveNonce, NonceOverridden); err != nil {
			return err
		}
		o.edit(st.LiveMessageID, st.LiveNonce, nil, "overridden")
		nonce = st.LiveNonce
		st.ReplyID, st.MessageID = st.LiveReplyID, st.LiveMessageID
		replaced = ChoiceNone // the reply's own choice was still pending
		st.clearLive()
	}
	st.LastChoice, st.Source, st.At, st.UserID = ChoiceSuperseded, SourceTyped, o.now, in.Where.UserID
	st.ChoiceExpiresAt = o.now.Add(o.cfg.choiceTTL())
	o.dirty, o.changed = true, true
	o.events = append(o.events, Event{Type: EventTypedOverride, Key: st.Key, Nonce: nonce, ReplyID: st.ReplyID,
		MessageID: st.MessageID, UserID: in.Where.UserID, Choice: replaced, At: o.now})
	return o.history(ChoiceSuperseded, SourceTyped, st.ReplyID, st.MessageID, nonce, in.Where.UserID, o.now)
}

// resolvedButtons is the keyboard of a reply whose choice was recorded,
// per the bot's ResolveMode; nil removes the keyboard.
func resolvedButtons(cfg BotConfig, rec *NonceRecord) []Button {
	mode := cfg.Resolve
	if mode == "" {
		mode = ResolveMark
	}
	if mode == ResolveRemove {
		return nil
	}
	inert, err := cfg.Codec().Encode(ActionNone, rec.Nonce)
	if err != nil {
		return nil // cannot happen for a stored nonce; removing is the safe fallback
	}
	t := TextsFor(rec.Locale)
	if mode == ResolveDisable {
		cont, stop := t.Continue, t.Stop
		if rec.Choice == ChoiceStop {
			stop = "✓ " + stop
		} else {
			cont = "✓ " + cont
		}
		return []Button{{Text: cont, Data: inert}, {Text: stop, Data: inert}}
	}
	label := t.ResolvedContinue
	if rec.Choice == ChoiceStop {
		label = t.ResolvedStop
	}
	return []Button{{Text: label, Data: inert}}
}
