package replyctl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/store"
)

// DBStore keeps reply-end state in the Switchboard store (SQLite or
// PostgreSQL). Every Update is one store.Write callback that first locks the
// conversation row (FOR UPDATE on PostgreSQL; SQLite has one writer), so
// changes to one conversation are serialized across goroutines and nodes.
type DBStore struct {
	db *store.DB
}

// NewDBStore returns a Store over db. The tables come from the migrations
// 00500_replyctl.sql of both dialects, applied by store.Open.
func NewDBStore(db *store.DB) *DBStore { return &DBStore{db: db} }

var _ Store = (*DBStore)(nil)

const stateCols = `last_choice, source, choice_at, reply_id, message_id, choice_user_id, choice_expires_at,
	live_nonce, live_message_id, live_reply_id, live_issued_at, live_expires_at, version, updated_at`

func scanState(row interface{ Scan(...any) error }, key Key) (State, error) {
	st := State{Key: key}
	var choice, source string
	var at, chExp, liveIss, liveExp, upd int64
	err := row.Scan(&choice, &source, &at, &st.ReplyID, &st.MessageID, &st.UserID, &chExp,
		&st.LiveNonce, &st.LiveMessageID, &st.LiveReplyID, &liveIss, &liveExp, &st.Version, &upd)
	if err != nil {
		return State{}, err
	}
	st.LastChoice, st.Source = Choice(choice), Source(source)
	st.At, st.ChoiceExpiresAt = store.FromMillis(at), store.FromMillis(chExp)
	st.LiveIssuedAt, st.LiveExpiresAt, st.UpdatedAt = store.FromMillis(liveIss), store.FromMillis(liveExp), store.FromMillis(upd)
	return st, nil
}

const nonceCols = `nonce, conv_key, message_id, reply_id, addressed_user_id, locale, status, choice, chosen_by,
	issued_at, expires_at, resolved_at`

func scanNonce(row interface{ Scan(...any) error }) (NonceRecord, error) {
	var r NonceRecord
	var key, locale, status, choice string
	var iss, exp, res int64
	if err := row.Scan(&r.Nonce, &key, &r.MessageID, &r.ReplyID, &r.AddressedUserID, &locale, &status, &choice,
		&r.ChosenBy, &iss, &exp, &res); err != nil {
		return NonceRecord{}, err
	}
	k, err := ParseKey(key)
	if err != nil {
		return NonceRecord{}, fmt.Errorf("replyctl: stored nonce %s has a bad conversation key: %w", r.Nonce, err)
	}
	r.Key, r.Locale, r.Status, r.Choice = k, Locale(locale), NonceStatus(status), Choice(choice)
	r.IssuedAt, r.ExpiresAt, r.ResolvedAt = store.FromMillis(iss), store.FromMillis(exp), store.FromMillis(res)
	return r, nil
}

func readNonce(ctx context.Context, q store.Q, nonce string) (NonceRecord, bool, error) {
	r, err := scanNonce(q.QueryRow(ctx, `SELECT `+nonceCols+` FROM replyctl_nonces WHERE nonce = ?`, nonce))
	if errors.Is(err, sql.ErrNoRows) {
		return NonceRecord{}, false, nil
	}
	if err != nil {
		return NonceRecord{}, false, fmt.Errorf("replyctl: read nonce: %w", err)
	}
	return r, true, nil
}

// Update implements Store.
func (s *DBStore) Update(ctx context.Context, key Key, now time.Time, fn func(tx ConvTx) error) error {
	ks := key.String()
	forUpdate := ""
	if s.db.Dialect() == store.Postgres {
		forUpdate = " FOR UPDATE"
	}
	fnTx := func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO replyctl_conversations (conv_key, bot_id, chat_id, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (conv_key) DO NOTHING`,
			ks, key.BotID, key.ChatID, store.Millis(now), store.Millis(now)); err != nil {
			return fmt.Errorf("replyctl: create conversation: %w", err)
		}
		st, err := scanState(tx.QueryRow(ctx, `SELECT `+stateCols+` FROM replyctl_conversations WHERE conv_key = ?`+forUpdate, ks), key)
		if err != nil {
			return fmt.Errorf("replyctl: lock conversation: %w", err)
		}
		return fn(&convTx{ctx: ctx, tx: tx, st: st, now: now})
	}
	for attempt := 1; ; attempt++ {
		err := s.db.Write(ctx, fnTx)
		if err == nil || attempt == maxUpdateAttempts || !retryable(err) || ctx.Err() != nil {
			return err
		}
	}
}

// maxUpdateAttempts bounds retries of an Update that PostgreSQL aborted to
// break a deadlock: two group-commit batches on different nodes can lock
// the same two conversations in opposite orders. Update callbacks are
// written to be re-run (they assign their results only on success).
const maxUpdateAttempts = 3

func retryable(err error) bool {
	s := err.Error()
	return strings.Contains(s, "SQLSTATE 40P01") || strings.Contains(s, "SQLSTATE 40001")
}

type convTx struct {
	ctx context.Context
	tx  *store.Tx
	st  State
	now time.Time
}

func (c *convTx) State() State { return c.st }

// StoreTx implements StoreTxer.
func (c *convTx) StoreTx() *store.Tx { return c.tx }

func (c *convTx) SetState(st State) error {
	res, err := c.tx.Exec(c.ctx, `UPDATE replyctl_conversations SET last_choice = ?, source = ?, choice_at = ?, reply_id = ?,
		message_id = ?, choice_user_id = ?, choice_expires_at = ?, live_nonce = ?, live_message_id = ?, live_reply_id = ?,
		live_issued_at = ?, live_expires_at = ?, version = version + 1, updated_at = ?
		WHERE conv_key = ? AND version = ?`,
		string(st.LastChoice), string(st.Source), store.Millis(st.At), st.ReplyID, st.MessageID, st.UserID,
		store.Millis(st.ChoiceExpiresAt), st.LiveNonce, st.LiveMessageID, st.LiveReplyID,
		store.Millis(st.LiveIssuedAt), store.Millis(st.LiveExpiresAt), store.Millis(c.now),
		c.st.Key.String(), c.st.Version)
	if err != nil {
		return fmt.Errorf("replyctl: write conversation: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("replyctl: write conversation: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("replyctl: conversation %s changed under its lock (version %d)", c.st.Key, c.st.Version)
	}
	st.Key = c.st.Key
	st.Version = c.st.Version + 1
	st.UpdatedAt = c.now
	c.st = st
	return nil
}

func (c *convTx) Nonce(nonce string) (NonceRecord, bool, error) { return readNonce(c.ctx, c.tx, nonce) }

func (c *convTx) SetNonce(r NonceRecord) error {
	_, err := c.tx.Exec(c.ctx, `UPDATE replyctl_nonces SET status = ?, message_id = ?, choice = ?, chosen_by = ?, resolved_at = ?
		WHERE nonce = ?`, string(r.Status), r.MessageID, string(r.Choice), r.ChosenBy, store.Millis(r.ResolvedAt), r.Nonce)
	if err != nil {
		return fmt.Errorf("replyctl: write nonce: %w", err)
	}
	return nil
}

func (c *convTx) AddHistory(h HistoryEntry) error {
	_, err := c.tx.Exec(c.ctx, `INSERT INTO replyctl_history (conv_key, bot_id, choice, source, reply_id, message_id, nonce, user_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.st.Key.String(), c.st.Key.BotID, string(h.Choice), string(h.Source), h.ReplyID, h.MessageID, h.Nonce, h.UserID, store.Millis(h.At))
	if err != nil {
		return fmt.Errorf("replyctl: write history: %w", err)
	}
	return nil
}

// State implements Store.
func (s *DBStore) State(ctx context.Context, key Key) (State, bool, error) {
	st, err := scanState(s.db.QueryRow(ctx, `SELECT `+stateCols+` FROM replyctl_conversations WHERE conv_key = ?`, key.String()), key)
	if errors.Is(err, sql.ErrNoRows) {
		return State{Key: key, LastChoice: ChoiceNone}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("replyctl: read conversation: %w", err)
	}
	return st, true, nil
}

// Nonce implements Store.
func (s *DBStore) Nonce(ctx context.Context, nonce string) (NonceRecord, bool, error) {
	return readNonce(ctx, s.db, nonce)
}

// InsertNonce implements Store.
func (s *DBStore) InsertNonce(ctx context.Context, r NonceRecord) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO replyctl_nonces (`+nonceCols+`, bot_id, chat_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.Nonce, r.Key.String(), r.MessageID, r.ReplyID, r.AddressedUserID, string(r.Locale), string(r.Status),
			string(r.Choice), r.ChosenBy, store.Millis(r.IssuedAt), store.Millis(r.ExpiresAt), store.Millis(r.ResolvedAt),
			r.Key.BotID, r.Key.ChatID)
		if err != nil {
			return fmt.Errorf("replyctl: insert nonce: %w", err)
		}
		return nil
	})
}

// History implements Store.
func (s *DBStore) History(ctx context.Context, key Key, limit int) ([]HistoryEntry, error) {
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.db.Query(ctx, `SELECT id, choice, source, reply_id, message_id, nonce, user_id, created_at
		FROM replyctl_history WHERE conv_key = ? ORDER BY id DESC LIMIT ?`, key.String(), limit)
	if err != nil {
		return nil, fmt.Errorf("replyctl: read history: %w", err)
	}
	defer rows.Close()
	var out []HistoryEntry
	for rows.Next() {
		h := HistoryEntry{Key: key}
		var choice, source string
		var at int64
		if err := rows.Scan(&h.ID, &choice, &source, &h.ReplyID, &h.MessageID, &h.Nonce, &h.UserID, &at); err != nil {
			return nil, fmt.Errorf("replyctl: read history: %w", err)
		}
		h.Choice, h.Source, h.At = Choice(choice), Source(source), store.FromMillis(at)
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("replyctl: read history: %w", err)
	}
	return out, nil
}

// ChatSettings implements Store.
func (s *DBStore) ChatSettings(ctx context.Context, chat Key) (ChatSettings, error) {
	cs := ChatSettings{Chat: chat}
	var controls, locale string
	var upd int64
	err := s.db.QueryRow(ctx, `SELECT controls, locale, updated_at FROM replyctl_chats WHERE chat_key = ?`, chat.String()).
		Scan(&controls, &locale, &upd)
	if errors.Is(err, sql.ErrNoRows) {
		return cs, nil
	}
	if err != nil {
		return ChatSettings{}, fmt.Errorf("replyctl: read chat settings: %w", err)
	}
	cs.Controls, cs.Locale, cs.UpdatedAt = ChatControls(controls), Locale(locale), store.FromMillis(upd)
	return cs, nil
}

// SetChatControls implements Store.
func (s *DBStore) SetChatControls(ctx context.Context, chat Key, c ChatControls, now time.Time) error {
	return s.upsertChat(ctx, chat, "controls", string(c), now)
}

// SetChatLocale implements Store.
func (s *DBStore) SetChatLocale(ctx context.Context, chat Key, l Locale, now time.Time) error {
	return s.upsertChat(ctx, chat, "locale", string(l), now)
}

func (s *DBStore) upsertChat(ctx context.Context, chat Key, col, val string, now time.Time) error {
	// col is one of two constants above, never input.
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO replyctl_chats (chat_key, bot_id, `+col+`, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (chat_key) DO UPDATE SET `+col+` = excluded.`+col+`, updated_at = excluded.updated_at`,
			chat.String(), chat.BotID, val, store.Millis(now))
		if err != nil {
			return fmt.Errorf("replyctl: write chat settings: %w", err)
		}
		return nil
	})
}

// SeenUpdate implements Store.
func (s *DBStore) SeenUpdate(ctx context.Context, botID string, updateID int64, now time.Time) (bool, error) {
	var dup bool
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		res, err := tx.Exec(ctx, `INSERT INTO replyctl_updates (bot_id, update_id, seen_at) VALUES (?, ?, ?)
			ON CONFLICT (bot_id, update_id) DO NOTHING`, botID, updateID, store.Millis(now))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		dup = n == 0
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("replyctl: record update id: %w", err)
	}
	return dup, nil
}

// DueForExpiry implements Store.
func (s *DBStore) DueForExpiry(ctx context.Context, now time.Time, limit int) ([]Key, error) {
	if limit <= 0 {
		limit = 500
	}
	ms := store.Millis(now)
	seen := map[string]bool{}
	var out []Key
	for _, q := range []string{
		`SELECT conv_key FROM replyctl_conversations WHERE live_nonce <> '' AND live_expires_at <= ? ORDER BY live_expires_at LIMIT ?`,
		`SELECT conv_key FROM replyctl_conversations WHERE choice_expires_at > 0 AND choice_expires_at <= ? ORDER BY choice_expires_at LIMIT ?`,
	} {
		rows, err := s.db.Query(ctx, q, ms, limit)
		if err != nil {
			return nil, fmt.Errorf("replyctl: find expired: %w", err)
		}
		for rows.Next() {
			var ks string
			if err := rows.Scan(&ks); err != nil {
				rows.Close()
				return nil, fmt.Errorf("replyctl: find expired: %w", err)
			}
			if seen[ks] {
				continue
			}
			seen[ks] = true
			k, err := ParseKey(ks)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("replyctl: stored conversation key %q: %w", ks, err)
			}
			out = append(out, k)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("replyctl: find expired: %w", err)
		}
	}
	return out, nil
}

// Prune implements Store.
func (s *DBStore) Prune(ctx context.Context, nonces, updates, history time.Time, limit int) (PruneCounts, error) {
	if limit <= 0 {
		limit = 1000
	}
	var pc PruneCounts
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		for _, p := range []struct {
			n   *int64
			q   string
			arg time.Time
		}{
			{&pc.Nonces, `DELETE FROM replyctl_nonces WHERE nonce IN
				(SELECT nonce FROM replyctl_nonces WHERE expires_at < ? ORDER BY expires_at LIMIT ?)`, nonces},
			{&pc.Updates, `DELETE FROM replyctl_updates WHERE (bot_id, update_id) IN
				(SELECT bot_id, update_id FROM replyctl_updates WHERE seen_at < ? ORDER BY seen_at LIMIT ?)`, updates},
			{&pc.History, `DELETE FROM replyctl_history WHERE id IN
				(SELECT id FROM replyctl_history WHERE created_at < ? ORDER BY created_at LIMIT ?)`, history},
		} {
			if p.arg.IsZero() {
				continue
			}
			res, err := tx.Exec(ctx, p.q, store.Millis(p.arg), limit)
			if err != nil {
				return err
			}
			if *p.n, err = res.RowsAffected(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return PruneCounts{}, fmt.Errorf("replyctl: prune: %w", err)
	}
	return pc, nil
}
