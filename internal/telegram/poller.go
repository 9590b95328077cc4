package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/go-telegram/bot/models"
)

// GetUpdatesParams are getUpdates' parameters.
type GetUpdatesParams struct {
	Offset         int64         // first update id wanted; confirms everything below it
	Limit          int           // 1–100 (default 100)
	Timeout        time.Duration // long-poll wait, whole seconds (0: return at once)
	AllowedUpdates []string
}

// GetUpdates makes one getUpdates call. go-telegram/bot keeps its own
// polling loop private, and that loop confirms updates before they are
// handled; the Poller needs to confirm after, so it calls the method here.
func (c *Client) GetUpdates(ctx context.Context, p GetUpdatesParams) ([]*models.Update, error) {
	body := map[string]any{"timeout": int(p.Timeout / time.Second)}
	if p.Offset != 0 {
		body["offset"] = p.Offset
	}
	if p.Limit > 0 {
		body["limit"] = p.Limit
	}
	if p.AllowedUpdates != nil {
		body["allowed_updates"] = p.AllowedUpdates
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("telegram getUpdates: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout+c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.server+"/bot"+c.cfg.Token+"/getUpdates", bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("telegram getUpdates: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		// the URL holds the token: never let it reach a log
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("telegram getUpdates: %w", err)
	}
	defer resp.Body.Close()
	payload, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("telegram getUpdates: reading answer: %w", err)
	}
	var r struct {
		OK          bool              `json:"ok"`
		Result      []json.RawMessage `json:"result"`
		ErrorCode   int               `json:"error_code"`
		Description string            `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(payload, &r); err != nil {
		return nil, fmt.Errorf("telegram getUpdates: undecodable answer (HTTP %d): %w", resp.StatusCode, err)
	}
	if !r.OK {
		return nil, &APIError{Method: "getUpdates", Code: r.ErrorCode, Description: r.Description,
			RetryAfter: time.Duration(r.Parameters.RetryAfter) * time.Second}
	}
	ups := make([]*models.Update, 0, len(r.Result))
	for _, item := range r.Result {
		var u models.Update
		if err := json.Unmarshal(item, &u); err != nil {
			// one malformed update must not wedge the queue: skip it by id
			var idOnly struct {
				ID int64 `json:"update_id"`
			}
			if json.Unmarshal(item, &idOnly) != nil {
				return nil, fmt.Errorf("telegram getUpdates: undecodable update: %w", err)
			}
			u = models.Update{ID: idOnly.ID}
		}
		ups = append(ups, &u)
	}
	return ups, nil
}

// PollerConfig configures a Poller.
type PollerConfig struct {
	Client   *Client
	Receiver *Receiver
	// Timeout is the long-poll wait per request (default 30s).
	Timeout time.Duration
	// Limit is the batch size, 1–100 (default 100).
	Limit int
	// AllowedUpdates filters update kinds (default UpdateTypes).
	AllowedUpdates []string
	// MinBackoff and MaxBackoff bound the wait after a failed request
	// (defaults 500ms and 30s; it doubles per consecutive failure). A 429
	// waits retry_after instead.
	MinBackoff, MaxBackoff time.Duration
	// InitialOffset resumes from a stored offset (0: from the oldest
	// unconfirmed update).
	InitialOffset int64
}

// Poller receives updates by long polling. It hands each update to the
// Receiver before confirming it with the next request's offset, so an
// update is never lost to a crash — at worst it is seen again, and the
// Deduper drops it.
type Poller struct {
	cfg    PollerConfig
	offset int64
}

// NewPoller validates cfg and returns a poller.
func NewPoller(cfg PollerConfig) (*Poller, error) {
	if cfg.Client == nil || cfg.Receiver == nil {
		return nil, errors.New("telegram: a poller needs a client and a receiver")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Limit <= 0 || cfg.Limit > 100 {
		cfg.Limit = 100
	}
	if cfg.AllowedUpdates == nil {
		cfg.AllowedUpdates = UpdateTypes
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = 30 * time.Second
	}
	return &Poller{cfg: cfg, offset: cfg.InitialOffset}, nil
}

// Offset is the next offset the poller will send: one past the last update
// it handed over. Store it to resume after a restart.
func (p *Poller) Offset() int64 { return p.offset }

// Run polls until ctx ends (returning nil) or Telegram rejects the token
// (401/404, returned as *APIError: retrying cannot help). Other failures —
// network errors, 409 while a webhook is set, 5xx, a failing deduper — are
// logged and retried with backoff.
func (p *Poller) Run(ctx context.Context) error {
	c, log := p.cfg.Client, p.cfg.Receiver.logger()
	var backoff time.Duration
	for {
		if ctx.Err() != nil {
			return nil
		}
		if backoff > 0 {
			if err := c.cfg.Sleep(ctx, backoff); err != nil {
				return nil
			}
		}
		ups, err := c.GetUpdates(ctx, GetUpdatesParams{Offset: p.offset, Limit: p.cfg.Limit, Timeout: p.cfg.Timeout,
			AllowedUpdates: p.cfg.AllowedUpdates})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ae *APIError
			if errors.As(err, &ae) && (ae.Code == http.StatusUnauthorized || ae.Code == http.StatusNotFound) {
				return err
			}
			backoff = p.nextBackoff(backoff, err)
			log.Warn("telegram polling failed; backing off", "bot", p.cfg.Receiver.BotID, "err", err, "backoff", backoff)
			continue
		}
		backoff = 0
		for _, u := range ups {
			if err := p.cfg.Receiver.Dispatch(ctx, u); err != nil {
				// not handed over: do not confirm it, ask again later
				backoff = p.nextBackoff(backoff, err)
				log.Warn("telegram update not dispatched; will retry", "bot", p.cfg.Receiver.BotID, "update_id", u.ID, "err", err)
				break
			}
			if u.ID >= p.offset {
				p.offset = u.ID + 1
			}
		}
	}
}

func (p *Poller) nextBackoff(prev time.Duration, err error) time.Duration {
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == http.StatusTooManyRequests && ae.RetryAfter > 0 {
		return ae.RetryAfter
	}
	next := prev * 2
	if next < p.cfg.MinBackoff {
		next = p.cfg.MinBackoff
	}
	if next > p.cfg.MaxBackoff {
		next = p.cfg.MaxBackoff
	}
	return next
}
