package telegram

import (
	"context"
	"log/slog"
	"sync"

	"github.com/go-telegram/bot/models"
)

// Deduper remembers which updates were already handled. Telegram delivers
// at least once — a webhook is retried when the answer is lost, a poller
// that restarts before confirming sees updates again — so every update
// passes here first. SeenUpdate records updateID for botID and reports
// whether it had been recorded before. The hub implements it on the store.
type Deduper interface {
	SeenUpdate(ctx context.Context, botID string, updateID int64) (bool, error)
}

// MemoryDeduper is an in-memory Deduper that remembers the last Capacity
// update ids per bot: enough for tests and single-process bots.
type MemoryDeduper struct {
	Capacity int // default 10000

	mu   sync.Mutex
	seen map[string]map[int64]struct{}
	ring map[string][]int64
}

// NewMemoryDeduper returns an empty in-memory deduper.
func NewMemoryDeduper() *MemoryDeduper { return &MemoryDeduper{} }

// SeenUpdate implements Deduper.
func (d *MemoryDeduper) SeenUpdate(_ context.Context, botID string, updateID int64) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen, d.ring = map[string]map[int64]struct{}{}, map[string][]int64{}
	}
	ids := d.seen[botID]
	if ids == nil {
		ids = map[int64]struct{}{}
		d.seen[botID] = ids
	}
	if _, ok := ids[updateID]; ok {
		return true, nil
	}
	ids[updateID] = struct{}{}
	capacity := d.Capacity
	if capacity <= 0 {
		capacity = 10000
	}
	ring := append(d.ring[botID], updateID)
	if len(ring) > capacity {
		delete(ids, ring[0])
		ring = ring[1:]
	}
	d.ring[botID] = ring
	return false, nil
}

// Handler receives normalized events. It runs on the receiving goroutine
// (a webhook worker or the poller), so it should hand work off quickly —
// for the hub, a durable enqueue on the bus.
type Handler func(ctx context.Context, ev Event)

// Receiver is what the webhook handler and the poller share: deduplicate by
// update_id, normalize, hand over.
type Receiver struct {
	BotID       string  // the bot's id as the hub knows it; dedupe key
	BotUsername string  // for "/controls@name" in groups
	Deduper     Deduper // nil disables deduplication
	Handler     Handler
	Logger      *slog.Logger
}

func (r *Receiver) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// seen checks the deduper; an error means "unknown", and the caller decides
// whether to retry.
func (r *Receiver) seen(ctx context.Context, u *models.Update) (bool, error) {
	if r.Deduper == nil {
		return false, nil
	}
	return r.Deduper.SeenUpdate(ctx, r.BotID, u.ID)
}

// deliver normalizes u and calls the handler.
func (r *Receiver) deliver(ctx context.Context, u *models.Update) {
	if r.Handler == nil {
		return
	}
	r.Handler(ctx, Normalize(r.BotID, r.BotUsername, u))
}

// Dispatch runs one update through dedupe and the handler synchronously; it
// returns an error only when the deduper failed, in which case the update
// was not handled and should be retried.
func (r *Receiver) Dispatch(ctx context.Context, u *models.Update) error {
	dup, err := r.seen(ctx, u)
	if err != nil {
		return err
	}
	if dup {
		r.logger().Debug("telegram duplicate update dropped", "bot", r.BotID, "update_id", u.ID)
		return nil
	}
	r.deliver(ctx, u)
	return nil
}
