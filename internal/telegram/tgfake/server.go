// Package tgfake is a strict, stateful fake of the Telegram Bot API for
// tests. It serves /bot<token>/<method> over net/http/httptest, accepts the
// same request encodings as api.telegram.org (JSON, urlencoded and multipart
// bodies, query strings), keeps chats, messages and inline keyboards, and
// answers with Telegram's own error descriptions, so that a real client
// library — go-telegram/bot included — runs against it unchanged and fails
// where it would fail in production.
//
// Tests act as Telegram users through Go methods on *Bot: TypeMessage,
// TapButton, and inspect what the bot did with Messages, Answers and Calls.
// Updates reach the bot by getUpdates long polling (with Telegram's offset,
// limit and timeout semantics) or, once setWebhook is called, by POSTs to
// the webhook URL carrying the X-Telegram-Bot-Api-Secret-Token header, with
// bounded redelivery on non-2xx answers.
//
// Each bot sees its own copy of every chat: two bots in the same group do
// not see each other's messages. Webhook URLs may be plain http (test
// servers), which api.telegram.org would refuse.
package tgfake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/internal/clock"
)

// Server is a fake api.telegram.org. Create it with New and Close it when
// the test ends.
type Server struct {
	ts  *httptest.Server
	clk clock.Clock

	queryTTL       time.Duration
	hookClient     *http.Client
	hookAttempts   int
	hookRetryDelay time.Duration

	closed    chan struct{}
	closeOnce sync.Once
	workers   sync.WaitGroup

	mu         sync.Mutex
	bots       map[string]*Bot // by token
	nextBotID  int64
	nextChatID int64
	nextQuery  uint64
}

// Option configures a Server.
type Option func(*Server)

// WithClock sets the clock that dates messages and expires callback
// queries; pass a *clock.Fake to test expiry without sleeping.
func WithClock(c clock.Clock) Option { return func(s *Server) { s.clk = c } }

// WithCallbackQueryTTL sets how long a callback query can be answered
// (default 15s); later answers get Telegram's "query is too old" error.
func WithCallbackQueryTTL(d time.Duration) Option { return func(s *Server) { s.queryTTL = d } }

// WithWebhookRetry bounds webhook redelivery: an update is POSTed at most
// attempts times, delay apart, before the fake gives up on it as Telegram
// eventually does (defaults: 3 attempts, 20ms).
func WithWebhookRetry(attempts int, delay time.Duration) Option {
	return func(s *Server) {
		if attempts > 0 {
			s.hookAttempts = attempts
		}
		s.hookRetryDelay = delay
	}
}

// WithWebhookClient sets the HTTP client used for webhook POSTs (for
// example one that trusts an httptest TLS server).
func WithWebhookClient(c *http.Client) Option { return func(s *Server) { s.hookClient = c } }

// New starts a fake Bot API server.
func New(opts ...Option) *Server {
	s := &Server{
		clk:            clock.Real{},
		queryTTL:       15 * time.Second,
		hookClient:     &http.Client{Timeout: 10 * time.Second},
		hookAttempts:   3,
		hookRetryDelay: 20 * time.Millisecond,
		closed:         make(chan struct{}),
		bots:           map[string]*Bot{},
		nextBotID:      7000000000,
		nextChatID:     1000000000,
		nextQuery:      4400000000000000000,
	}
	for _, o := range opts {
		o(s)
	}
	s.ts = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

// URL is the server's base URL, the value for bot.WithServerURL.
func (s *Server) URL() string { return s.ts.URL }

// Close stops webhook delivery, ends pending long polls and shuts the
// server down.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.mu.Lock()
		for _, b := range s.bots {
			b.signalLocked()
		}
		s.mu.Unlock()
		s.workers.Wait()
		s.ts.Close()
	})
}

// AddBot registers a bot with the given username and returns it; its Token
// is accepted from now on.
func (s *Server) AddBot(username string) *Bot {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextBotID++
	id := s.nextBotID
	b := &Bot{
		s:        s,
		ID:       id,
		Token:    fmt.Sprintf("%d:AAF%s", id, strings.Repeat("x", 32)),
		Username: username,
		chats:    map[int64]*Chat{},
		topics:   map[int64]map[int]string{},
		business: map[string]*businessConn{},
		dialogs:  map[dialogKey]*dialog{},
		queries:  map[string]*queryState{},
		history:  map[int64]*update{},
		failures: map[string][]failure{},
		notify:   make(chan struct{}),
		// Telegram update ids do not start at 1; neither do ours.
		nextUpdate: 500000000,
	}
	b.user = User{ID: id, IsBot: true, FirstName: username, Username: username}
	s.bots[b.Token] = b
	return b
}

// canonicalMethods maps lower-cased method names to their Bot API spelling;
// Telegram matches method names case-insensitively.
var canonicalMethods = map[string]string{}

func init() {
	for _, m := range []string{"getMe", "sendMessage", "editMessageText", "editMessageReplyMarkup",
		"answerCallbackQuery", "getUpdates", "setWebhook", "deleteWebhook", "getWebhookInfo"} {
		canonicalMethods[strings.ToLower(m)] = m
	}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	if !ok {
		writeError(w, &apiError{code: http.StatusNotFound, desc: "Not Found"})
		return
	}
	token, method, ok := strings.Cut(rest, "/")
	if !ok || token == "" || method == "" || strings.Contains(method, "/") {
		writeError(w, &apiError{code: http.StatusNotFound, desc: "Not Found"})
		return
	}
	s.mu.Lock()
	b := s.bots[token]
	s.mu.Unlock()
	if b == nil {
		writeError(w, &apiError{code: http.StatusUnauthorized, desc: "Unauthorized"})
		return
	}
	canon, known := canonicalMethods[strings.ToLower(method)]
	if !known {
		b.logCall(method, nil, http.StatusNotFound, "Not Found")
		writeError(w, &apiError{code: http.StatusNotFound, desc: "Not Found"})
		return
	}
	p, perr := readParams(r)
	if perr != nil {
		b.logCall(canon, p, perr.code, perr.desc)
		writeError(w, perr)
		return
	}
	if f, injected := b.takeFailure(canon); injected {
		e := &apiError{code: http.StatusTooManyRequests,
			desc: fmt.Sprintf("Too Many Requests: retry after %d", f.retryAfter), retryAfter: f.retryAfter}
		b.logCall(canon, p, e.code, e.desc)
		writeError(w, e)
		return
	}
	result, desc, err := b.call(r.Context(), canon, p)
	if err != nil {
		b.logCall(canon, p, err.code, err.desc)
		writeError(w, err)
		return
	}
	b.logCall(canon, p, http.StatusOK, "")
	raw, jerr := json.Marshal(result)
	if jerr != nil {
		writeError(w, &apiError{code: http.StatusInternalServerError, desc: "Internal Server Error"})
		return
	}
	writeJSON(w, http.StatusOK, wResponse{OK: true, Result: raw, Description: desc})
}

func (b *Bot) call(ctx context.Context, method string, p params) (any, string, *apiError) {
	switch method {
	case "getMe":
		return b.getMe(), "", nil
	case "sendMessage":
		m, err := b.sendMessage(p)
		return m, "", err
	case "editMessageText":
		m, err := b.editMessageText(p)
		return m, "", err
	case "editMessageReplyMarkup":
		m, err := b.editMessageReplyMarkup(p)
		return m, "", err
	case "answerCallbackQuery":
		return true, "", b.answerCallbackQuery(p)
	case "getUpdates":
		u, err := b.getUpdates(ctx, p)
		return u, "", err
	case "setWebhook":
		desc, err := b.setWebhook(p)
		return true, desc, err
	case "deleteWebhook":
		desc, err := b.deleteWebhook(p)
		return true, desc, err
	case "getWebhookInfo":
		return b.webhookInfo(), "", nil
	}
	return nil, "", &apiError{code: http.StatusNotFound, desc: "Not Found"}
}

func writeError(w http.ResponseWriter, e *apiError) {
	resp := wResponse{OK: false, ErrorCode: e.code, Description: e.desc}
	if e.retryAfter > 0 {
		resp.Parameters = &wParameters{RetryAfter: e.retryAfter}
	}
	writeJSON(w, e.code, resp)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
