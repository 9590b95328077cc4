package hosted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/telegram"
)

// Outbox retry policy for replies given as bus responses.
const (
	outboxMaxAttempts = 5
	outboxBatch       = 20
)

// retention of the host's own bookkeeping rows.
const retention = 7 * 24 * time.Hour

// outboxLoop sends queued replies when woken (a response committed on any
// node) and every OutboxInterval.
func (h *Host) outboxLoop(ctx context.Context) {
	t := time.NewTicker(h.o.Tuning.OutboxInterval)
	defer t.Stop()
	for {
		for h.sendOutbox(ctx) == outboxBatch && ctx.Err() == nil {
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.outboxKick:
		}
	}
}

// sendOutbox sends the due outbox rows this node can claim and reports how
// many it saw.
func (h *Host) sendOutbox(ctx context.Context) int {
	now := h.o.Clock.Now()
	rows, err := h.o.DB.Query(ctx, `SELECT id FROM telegram_outbox WHERE state = 'pending' AND available_at <= ?
		ORDER BY available_at LIMIT ?`, store.Millis(now), outboxBatch)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("outbox: list", "err", err)
		}
		return 0
	}
	var ids []string
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		h.sendOne(ctx, id)
	}
	return len(ids)
}

// sendOne claims one row (pushing its next attempt into the future, so a
// crash mid-send retries it later and another node skips it meanwhile),
// sends it, and records the outcome.
func (h *Host) sendOne(ctx context.Context, id string) {
	now := h.o.Clock.Now()
	var botID, body string
	var attempts int
	claimed := false
	err := h.o.DB.Write(ctx, func(tx *store.Tx) error {
		err := tx.QueryRow(ctx, `SELECT bot_id, body, attempts FROM telegram_outbox WHERE id = ? AND state = 'pending' AND available_at <= ?`,
			id, store.Millis(now)).Scan(&botID, &body, &attempts)
		if err != nil {
			return nil // taken by another node, or done
		}
		attempts++
		backoff := time.Duration(1<<min(attempts, 8)) * 15 * time.Second
		_, err = tx.Exec(ctx, `UPDATE telegram_outbox SET attempts = ?, available_at = ?, updated_at = ? WHERE id = ?`,
			attempts, store.Millis(now.Add(backoff)), store.Millis(now), id)
		claimed = err == nil
		return err
	})
	if err != nil || !claimed {
		return
	}
	state, lastErr := "sent", ""
	var p ReplyParams
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		state, lastErr = "failed", "stored reply is unreadable: "+err.Error()
	} else if res, err := h.Reply(ctx, botID, p); err != nil {
		lastErr = err.Error()
		state = "pending"
		if permanent(err) || attempts >= outboxMaxAttempts {
			state = "failed"
		}
		h.log.Warn("reply from a bus response not sent", "bot", botID, "request", id, "attempt", attempts, "final", state == "failed", "err", err)
	} else {
		h.log.Debug("reply from a bus response sent", "bot", botID, "request", id, "messages", res.MessageIDs)
	}
	if len(lastErr) > 500 {
		lastErr = lastErr[:500]
	}
	err = h.o.DB.Write(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE telegram_outbox SET state = ?, last_error = ?, updated_at = ? WHERE id = ?`,
			state, lastErr, store.Millis(h.o.Clock.Now()), id)
		return err
	})
	if err != nil {
		h.log.Warn("outbox: record outcome", "request", id, "err", err)
	}
}

// permanent reports failures a retry cannot fix: the bot is gone, the
// reply is invalid, or Telegram refused it for good.
func permanent(err error) bool {
	var ae *telegram.APIError
	if errors.As(err, &ae) {
		return ae.Code == http.StatusBadRequest || ae.Code == http.StatusForbidden || ae.Code == http.StatusUnauthorized
	}
	switch protocol.ClassOf(err) {
	case protocol.ClassInvalid, protocol.ClassPermission:
		return true
	case protocol.ClassUnavailable:
		return protocol.CodeOf(err) == "bot_not_found"
	}
	return false
}

// sweepLoop writes down expiries (removing expired keyboards and telling
// runtimes) and prunes old rows, every SweepInterval.
func (h *Host) sweepLoop(ctx context.Context) {
	t := time.NewTicker(h.o.Tuning.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := h.Sweep(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn("reply controls sweep failed", "err", err)
		}
	}
}

// Sweep applies due expiries once: each expired keyboard is removed and
// each changed decision is pushed to its runtime as replyctl.choice (source
// timeout). It also prunes seen update ids, old nonces and history
// (replyctl's retention) and the host's request and outbox rows older than
// a week.
func (h *Host) Sweep(ctx context.Context) error {
	for {
		res, err := h.rc.Expire(ctx, h.o.Clock.Now())
		if err != nil {
			return err
		}
		for _, c := range res.Changes {
			b, err := h.bot(ctx, c.Key.BotID)
			if err != nil {
				continue // the bot was removed; its conversations stay quiet
			}
			h.observe(b, c.Events)
			h.applyEdits(b, c.Edits)
			env, err := choiceEnvelope(b, protocol.NewID(protocol.PrefixMessage), c.Key, c.Decision, 0)
			if err == nil {
				_, err = h.o.Bus.SendSystem(ctx, env)
			}
			if err != nil {
				h.log.Warn("expired decision not pushed to the runtime", "bot", b.rec.ID, "conversation", c.Key.String(), "err", err)
			}
		}
		if !res.More {
			break
		}
	}
	cut := store.Millis(h.o.Clock.Now().Add(-retention))
	return h.o.DB.Write(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM telegram_requests WHERE created_at < ?`, cut); err != nil {
			return fmt.Errorf("telegram: prune requests: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM telegram_outbox WHERE state <> 'pending' AND updated_at < ?`, cut); err != nil {
			return fmt.Errorf("telegram: prune outbox: %w", err)
		}
		return nil
	})
}
