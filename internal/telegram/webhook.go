package telegram

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/go-telegram/bot/models"
)

// SecretHeader is the header Telegram puts the webhook secret_token in.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// WebhookConfig configures a Webhook.
type WebhookConfig struct {
	// Secret is the secret_token given to setWebhook; required.
	Secret string
	// Receiver deduplicates and hands updates over; required.
	Receiver *Receiver
	// MaxBodyBytes bounds an update body (default 1 MiB).
	MaxBodyBytes int64
	// MaxInFlight bounds updates being handled at once (default 64); past
	// it the webhook answers 503 and Telegram redelivers later.
	MaxInFlight int
	// BaseContext is the context handlers run in (default Background); the
	// request's own context ends with the 2xx, long before the handler.
	BaseContext context.Context
}

// Webhook is the http.Handler Telegram POSTs updates to. It checks the
// secret header in constant time (401 on mismatch, before reading the
// body), decodes the update, drops duplicates, answers 200 at once and
// hands the update to the Receiver on its own goroutine.
type Webhook struct {
	secretSum [sha256.Size]byte
	recv      *Receiver
	maxBody   int64
	slots     chan struct{}
	base      context.Context
	wg        sync.WaitGroup
}

// NewWebhook validates cfg and returns the handler.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if err := ValidateSecretToken(cfg.Secret); err != nil {
		return nil, err
	}
	if cfg.Receiver == nil {
		return nil, errors.New("telegram: webhook needs a receiver")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 64
	}
	if cfg.BaseContext == nil {
		cfg.BaseContext = context.Background()
	}
	return &Webhook{secretSum: sha256.Sum256([]byte(cfg.Secret)), recv: cfg.Receiver, maxBody: cfg.MaxBodyBytes,
		slots: make(chan struct{}, cfg.MaxInFlight), base: cfg.BaseContext}, nil
}

// ServeHTTP implements http.Handler.
func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// Hashing both sides first makes the comparison constant-time in the
	// secret's length too.
	got := sha256.Sum256([]byte(r.Header.Get(SecretHeader)))
	if subtle.ConstantTimeCompare(got[:], h.secretSum[:]) != 1 {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "update too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cannot read update", http.StatusBadRequest)
		return
	}
	u, err := DecodeUpdate(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case h.slots <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	dup, err := h.recv.seen(r.Context(), u)
	if err != nil {
		<-h.slots
		h.recv.logger().Warn("telegram webhook: dedupe failed; asking Telegram to redeliver", "bot", h.recv.BotID, "update_id", u.ID, "err", err)
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	if dup {
		<-h.slots
		w.WriteHeader(http.StatusOK)
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer func() { <-h.slots }()
		h.recv.deliver(h.base, u)
	}()
	w.WriteHeader(http.StatusOK)
}

// Wait blocks until every accepted update has been handed over; call it on
// shutdown after the HTTP server stopped accepting requests.
func (h *Webhook) Wait() { h.wg.Wait() }

// DecodeUpdate parses a webhook body. It rejects anything that is not a
// JSON object with a positive update_id.
func DecodeUpdate(body []byte) (*models.Update, error) {
	var u models.Update
	if err := json.Unmarshal(body, &u); err != nil {
		return nil, errors.New("telegram: update is not valid JSON")
	}
	if u.ID <= 0 {
		return nil, errors.New("telegram: update has no update_id")
	}
	return &u, nil
}
