// Package telegram is the thin Telegram transport of reply-end controls: it
// sends replies with inline keyboards (splitting long texts, keyboard on the
// last chunk), edits and answers, honours rate limits, and turns webhook or
// long-polling updates into normalized events, deduplicated by update_id.
// It knows nothing about conversations, choices or the store; the hub wires
// it to internal/replyctl.
//
// The Bot API client underneath is github.com/go-telegram/bot; this package
// adds what reply-end controls need on top: Telegram's benign errors treated
// as success, 429 handling with retry_after, coalescing of edits to the same
// message, a constant-time webhook secret check, and an at-least-once
// polling loop that confirms an update only after it was handed over.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Config configures a Client.
type Config struct {
	// Token is the bot token from @BotFather ("<id>:<secret>").
	Token string
	// ServerURL is the Bot API base URL (default https://api.telegram.org);
	// tests point it at tgfake.
	ServerURL string
	// HTTPClient carries the requests (default: a client without a global
	// timeout; every call has its own deadline, see RequestTimeout).
	HTTPClient *http.Client
	// RequestTimeout bounds one Bot API call (default 30s). Long polls get
	// their poll timeout on top.
	RequestTimeout time.Duration
	// MaxRetries is how many times a call rejected with 429 is retried
	// (default 3; negative disables retries).
	MaxRetries int
	// MaxRetryAfter is the longest retry_after the client waits out; a
	// longer one is returned to the caller as an *APIError (default 60s).
	MaxRetryAfter time.Duration
	// Clock dates rate-limit windows (default clock.Real).
	Clock clock.Clock
	// Sleep waits d or until ctx ends (default: a timer). Tests replace it
	// to observe the waits without spending them.
	Sleep func(ctx context.Context, d time.Duration) error
	// Logger receives retry and coalescing notes (default slog.Default()).
	Logger *slog.Logger
}

// Client is a Telegram Bot API client for one bot. It is safe for
// concurrent use.
type Client struct {
	bot    *tgbot.Bot
	cfg    Config
	server string
	http   *http.Client

	mu      sync.Mutex
	blocked map[int64]time.Time // chat id → no calls before (after a 429)
	edits   map[editKey]*editSlot
}

// NewClient builds a client. It makes no network call (getMe is skipped);
// call GetMe to verify the token.
func NewClient(cfg Config) (*Client, error) {
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, protocol.Invalid("token", "a bot token is required; get one from @BotFather")
	}
	if cfg.ServerURL == "" {
		cfg.ServerURL = "https://api.telegram.org"
	}
	cfg.ServerURL = strings.TrimRight(cfg.ServerURL, "/")
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = 60 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleepCtx
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b, err := tgbot.New(cfg.Token,
		tgbot.WithServerURL(cfg.ServerURL),
		tgbot.WithSkipGetMe(),
		tgbot.WithHTTPClient(cfg.RequestTimeout, cfg.HTTPClient),
		tgbot.WithErrorsHandler(func(err error) { cfg.Logger.Debug("telegram client", "err", err) }),
		tgbot.WithDefaultHandler(func(context.Context, *tgbot.Bot, *models.Update) {}),
	)
	if err != nil {
		return nil, fmt.Errorf("telegram: new client: %w", err)
	}
	return &Client{bot: b, cfg: cfg, server: cfg.ServerURL, http: cfg.HTTPClient,
		blocked: map[int64]time.Time{}, edits: map[editKey]*editSlot{}}, nil
}

// Bot exposes the underlying go-telegram/bot client for calls this package
// does not wrap.
func (c *Client) Bot() *tgbot.Bot { return c.bot }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// APIError is a Bot API failure with Telegram's error code and description.
// It unwraps to go-telegram/bot's sentinel errors (bot.ErrorBadRequest...).
type APIError struct {
	Method      string
	Code        int           // Telegram's error_code (400, 403, 429, ...)
	Description string        // Telegram's description, e.g. "Bad Request: chat not found"
	RetryAfter  time.Duration // from parameters.retry_after on 429
	Err         error
}

// Error renders the method, Telegram's code and description; it never
// contains the token.
func (e *APIError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("telegram %s: %d %s (retry after %s)", e.Method, e.Code, e.Description, e.RetryAfter)
	}
	return fmt.Sprintf("telegram %s: %d %s", e.Method, e.Code, e.Description)
}

// Unwrap exposes the library error.
func (e *APIError) Unwrap() error { return e.Err }

// IsNotModified reports Telegram's "message is not modified", which the
// client treats as success: the message already looks as asked.
func IsNotModified(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == http.StatusBadRequest && strings.Contains(e.Description, "message is not modified")
}

// IsQueryTooOld reports "query is too old and response timeout expired or
// query ID is invalid": the callback can no longer be answered, which the
// client treats as success because there is nothing left to do.
func IsQueryTooOld(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == http.StatusBadRequest &&
		(strings.Contains(e.Description, "query is too old") || strings.Contains(e.Description, "query ID is invalid"))
}

// IsMessageNotFound reports "message to edit not found" (deleted, or never
// the bot's).
func IsMessageNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == http.StatusBadRequest && strings.Contains(e.Description, "message to edit not found")
}

// IsRateLimited reports a 429 the client gave up on.
func IsRateLimited(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == http.StatusTooManyRequests
}

var sentinels = []struct {
	err  error
	code int
}{
	{tgbot.ErrorBadRequest, http.StatusBadRequest},
	{tgbot.ErrorUnauthorized, http.StatusUnauthorized},
	{tgbot.ErrorForbidden, http.StatusForbidden},
	{tgbot.ErrorNotFound, http.StatusNotFound},
	{tgbot.ErrorConflict, http.StatusConflict},
}

// apiError classifies a library error; transport errors (network, context)
// come back unchanged.
func apiError(method string, err error) error {
	if err == nil {
		return nil
	}
	var tmr *tgbot.TooManyRequestsError
	if errors.As(err, &tmr) {
		ra := time.Duration(tmr.RetryAfter) * time.Second
		return &APIError{Method: method, Code: http.StatusTooManyRequests,
			Description: strings.TrimPrefix(tmr.Message, tgbot.ErrorTooManyRequests.Error()+", "), RetryAfter: ra, Err: err}
	}
	var me *tgbot.MigrateError
	if errors.As(err, &me) {
		return &APIError{Method: method, Code: http.StatusBadRequest,
			Description: strings.TrimPrefix(me.Message, tgbot.ErrorBadRequest.Error()+": "), Err: err}
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return &APIError{Method: method, Code: s.code,
				Description: strings.TrimPrefix(err.Error(), s.err.Error()+", "), Err: err}
		}
	}
	return fmt.Errorf("telegram %s: %w", method, err)
}

// do runs one Bot API call for chat (0 when the call is not about a chat),
// waiting out the chat's rate-limit window first and retrying 429 answers
// after retry_after, at most MaxRetries times. before runs ahead of every
// attempt; returning false abandons the call (used to drop superseded
// edits).
func (c *Client) do(ctx context.Context, method string, chat int64, before func() bool, call func(ctx context.Context) error) error {
	for attempt := 0; ; attempt++ {
		if err := c.waitChat(ctx, chat); err != nil {
			return err
		}
		if before != nil && !before() {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		err := apiError(method, call(cctx))
		cancel()
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != http.StatusTooManyRequests {
			return err
		}
		wait := ae.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		if attempt >= c.cfg.MaxRetries || wait > c.cfg.MaxRetryAfter {
			return err
		}
		c.cfg.Logger.Info("telegram rate limited; retrying", "method", method, "chat", chat, "retry_after", wait, "attempt", attempt+1)
		c.block(chat, wait)
	}
}

func (c *Client) block(chat int64, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	until := c.cfg.Clock.Now().Add(d)
	if until.After(c.blocked[chat]) {
		c.blocked[chat] = until
	}
}

// waitChat waits until the chat's rate-limit window (set by a 429 on any
// call for that chat) has passed.
func (c *Client) waitChat(ctx context.Context, chat int64) error {
	c.mu.Lock()
	until, ok := c.blocked[chat]
	now := c.cfg.Clock.Now()
	if ok && !until.After(now) {
		delete(c.blocked, chat)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return ctx.Err()
	}
	if err := c.cfg.Sleep(ctx, until.Sub(now)); err != nil {
		return err
	}
	c.mu.Lock()
	if c.blocked[chat].Equal(until) {
		delete(c.blocked, chat)
	}
	c.mu.Unlock()
	return nil
}

// GetMe returns the bot's own user; use it to verify a token and learn the
// username.
func (c *Client) GetMe(ctx context.Context) (*models.User, error) {
	var u *models.User
	err := c.do(ctx, "getMe", 0, nil, func(ctx context.Context) error {
		var err error
		u, err = c.bot.GetMe(ctx)
		return err
	})
	return u, err
}

// WebhookParams configure SetWebhook.
type WebhookParams struct {
	URL                string
	SecretToken        string // 1–256 of A-Z a-z 0-9 _ -
	AllowedUpdates     []string
	DropPendingUpdates bool
	MaxConnections     int
}

// UpdateTypes are the update kinds reply-end controls consume; pass them as
// AllowedUpdates.
var UpdateTypes = []string{models.AllowedUpdateMessage, models.AllowedUpdateBusinessMessage, models.AllowedUpdateCallbackQuery}

// SetWebhook registers the webhook URL Telegram should POST updates to.
func (c *Client) SetWebhook(ctx context.Context, p WebhookParams) error {
	if err := ValidateSecretToken(p.SecretToken); err != nil {
		return err
	}
	return c.do(ctx, "setWebhook", 0, nil, func(ctx context.Context) error {
		_, err := c.bot.SetWebhook(ctx, &tgbot.SetWebhookParams{URL: p.URL, SecretToken: p.SecretToken,
			AllowedUpdates: p.AllowedUpdates, DropPendingUpdates: p.DropPendingUpdates, MaxConnections: p.MaxConnections})
		return err
	})
}

// DeleteWebhook removes the webhook so that long polling works again.
func (c *Client) DeleteWebhook(ctx context.Context, dropPending bool) error {
	return c.do(ctx, "deleteWebhook", 0, nil, func(ctx context.Context) error {
		_, err := c.bot.DeleteWebhook(ctx, &tgbot.DeleteWebhookParams{DropPendingUpdates: dropPending})
		return err
	})
}

// ValidateSecretToken checks a webhook secret against Telegram's rules: 1 to
// 256 characters from A-Z, a-z, 0-9, _ and -.
func ValidateSecretToken(s string) error {
	if len(s) < 1 || len(s) > 256 {
		return protocol.Invalid("secretToken", "the webhook secret must be 1 to 256 characters")
	}
	for _, ch := range []byte(s) {
		switch {
		case ch >= 'A' && ch <= 'Z', ch >= 'a' && ch <= 'z', ch >= '0' && ch <= '9', ch == '_', ch == '-':
		default:
			return protocol.Invalid("secretToken", "the webhook secret may only contain A-Z, a-z, 0-9, _ and -")
		}
	}
	return nil
}

// Protocol converts the failure into the hub's error model, so an HTTP
// handler can answer a runtime that asked for a reply with what went wrong
// at Telegram and what to do about it.
func (e *APIError) Protocol() *protocol.Error {
	msg := fmt.Sprintf("Telegram refused %s: %s", e.Method, e.Description)
	switch e.Code {
	case http.StatusBadRequest:
		return &protocol.Error{Class: protocol.ClassInvalid, Code: "telegram_bad_request", Message: msg,
			Status: http.StatusUnprocessableEntity, Err: e,
			NextAction: "check chatId, threadId and businessConnectionId, and that the bot is still in the chat"}
	case http.StatusForbidden:
		return &protocol.Error{Class: protocol.ClassDependency, Code: "telegram_forbidden", Message: msg, Err: e,
			NextAction: "the user blocked the bot or removed it from the chat; do not retry"}
	case http.StatusUnauthorized, http.StatusNotFound:
		return &protocol.Error{Class: protocol.ClassDependency, Code: "telegram_unauthorized", Message: msg, Err: e,
			RequiredAction: "replace the bot token", NextAction: "the bot token was revoked or is wrong; set a new one"}
	case http.StatusTooManyRequests:
		return &protocol.Error{Class: protocol.ClassUnavailable, Code: "telegram_rate_limited", Message: msg, Err: e,
			Status: http.StatusTooManyRequests, NextAction: fmt.Sprintf("retry after %s", max(e.RetryAfter, time.Second))}
	}
	return &protocol.Error{Class: protocol.ClassDependency, Code: "telegram_error", Message: msg, Err: e,
		NextAction: "retry later"}
}
