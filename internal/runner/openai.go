package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ChatMessage is one message of an OpenAI-compatible chat completion.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// OpenAIConfig configures [NewOpenAI].
type OpenAIConfig struct {
	// BaseURL is the API root; requests go to BaseURL + "/chat/completions"
	// (e.g. https://api.openai.com/v1, http://127.0.0.1:11434/v1).
	BaseURL string
	// Model is sent as "model".
	Model string
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>".
	APIKey string
	// HTTPClient makes the requests (default http.DefaultClient; each
	// attempt is bounded by Timeout).
	HTTPClient *http.Client
	// Timeout bounds one request (default 2 minutes).
	Timeout time.Duration
	// MaxAttempts bounds tries per turn on 429, 5xx and transport errors
	// (default 4).
	MaxAttempts int
	// Backoff is the first retry delay, doubled per retry (default 1s);
	// a Retry-After header (seconds) wins when longer, up to 60s.
	Backoff time.Duration
	// MaxHistory bounds the user/assistant messages kept per session
	// (default 20).
	MaxHistory int
	// MaxSessions bounds sessions kept in memory; the least recently used
	// is forgotten first (default 1000).
	MaxSessions int
	// Temperature and MaxTokens are sent when set.
	Temperature *float64
	MaxTokens   int
	// FallbackSystem is the system prompt of a session whose baseline the
	// runner never saw (e.g. it started mid-conversation). The default
	// explains the conversation and the NO_REPLY rule.
	FallbackSystem string
}

// DefaultFallbackSystem is the system prompt used when a session's context
// document is unknown.
const DefaultFallbackSystem = `You are an AI agent in a live conversation with another agent (the peer). ` +
	`Reply to the peer directly, as plain text: short and natural, like a message between people. ` +
	`When you have nothing meaningful to add, answer exactly NO_REPLY and nothing else. ` +
	`When the conversation has reached its goal, wrap up and put [[request_conversation_end]] in your final reply.`

// OpenAI is a driver that asks an OpenAI-compatible chat-completions server
// for each reply.
//
// Per session it keeps the latest full context document (a delivery whose
// contextText starts with `# Background`) as the system prompt and a
// bounded history of user/assistant turns. A new baseline is a new intent:
// the history is reset. Each request is
//
//   - system: the baseline without its `# Task Instruction` and
//     `# Live Turn` parts, plus this delivery's task instruction
//     (commandText, or the document's `# Task Instruction`) when present;
//   - the session history;
//   - user: the peer turn (text), preceded by the delivery's `# Live Turn`
//     section when it lists earlier queued turns.
//
// A turn is added to the history only when the model answered, so a
// failed turn retried by the hub is asked again from the same state.
type OpenAI struct {
	cfg OpenAIConfig

	mu       sync.Mutex
	sessions map[string]*chatSession
	tick     uint64
}

type chatSession struct {
	system  string
	history []ChatMessage
	used    uint64
}

// NewOpenAI checks cfg and returns the driver.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	var errs []error
	cfg.BaseURL = strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		errs = append(errs, fmt.Errorf("openai: base URL %q must be an http:// or https:// URL", cfg.BaseURL))
	}
	if strings.TrimSpace(cfg.Model) == "" {
		errs = append(errs, errors.New("openai: a model is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxHistory <= 0 {
		cfg.MaxHistory = 20
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 1000
	}
	if cfg.FallbackSystem == "" {
		cfg.FallbackSystem = DefaultFallbackSystem
	}
	return &OpenAI{cfg: cfg, sessions: map[string]*chatSession{}}, nil
}

// Messages returns the chat messages the driver would send for d now,
// without recording anything (useful to preview or test prompts).
func (o *OpenAI) Messages(d Delivery) []ChatMessage {
	msgs, _ := o.prepare(d)
	return msgs
}

// prepare builds the request messages and returns the session system
// prompt they use (new when d is a baseline).
func (o *OpenAI) prepare(d Delivery) (msgs []ChatMessage, system string) {
	secs := Sections(d.Payload.ContextText)
	baseline := IsBaseline(d.Payload.ContextText)

	o.mu.Lock()
	var history []ChatMessage
	if baseline {
		system = without(secs, SectionTaskInstruction, SectionLiveTurn)
	} else if s := o.sessions[d.SessionKey]; s != nil {
		system, history = s.system, s.history
	} else {
		system = o.cfg.FallbackSystem
	}
	history = append([]ChatMessage(nil), history...)
	o.mu.Unlock()

	sys := system
	task := strings.TrimSpace(d.Payload.CommandText)
	if task == "" {
		if s, ok := section(secs, SectionTaskInstruction); ok {
			task = s.body()
		}
	}
	if task != "" {
		sys += "\n\n# " + SectionTaskInstruction + "\n\n" + task
	}
	user := d.Payload.Text
	if s, ok := section(secs, SectionLiveTurn); ok && strings.Contains(s.Text, "\n## Earlier Queued Turns") {
		user = s.Text + "\n\n" + user
	}
	msgs = append(msgs, ChatMessage{Role: "system", Content: sys})
	msgs = append(msgs, history...)
	msgs = append(msgs, ChatMessage{Role: "user", Content: user})
	return msgs, system
}

// Reply asks the model for the answer to d.
func (o *OpenAI) Reply(ctx context.Context, d Delivery) (string, error) {
	msgs, system := o.prepare(d)
	text, err := o.Complete(ctx, msgs)
	if err != nil {
		return "", err
	}
	o.record(d, system, msgs[len(msgs)-1], ChatMessage{Role: "assistant", Content: text})
	return text, nil
}

// record appends a completed turn to the session, starting the session
// over when d was a baseline.
func (o *OpenAI) record(d Delivery, system string, user, assistant ChatMessage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tick++
	s := o.sessions[d.SessionKey]
	if s == nil || d.Baseline() {
		s = &chatSession{system: system}
		o.sessions[d.SessionKey] = s
	}
	s.used = o.tick
	s.history = append(s.history, user, assistant)
	if n := len(s.history) - o.cfg.MaxHistory; n > 0 {
		n += n % 2 // drop whole turns
		s.history = append([]ChatMessage(nil), s.history[min(n, len(s.history)):]...)
	}
	for len(o.sessions) > o.cfg.MaxSessions {
		var oldest string
		var at uint64
		for k, v := range o.sessions {
			if oldest == "" || v.used < at {
				oldest, at = k, v.used
			}
		}
		delete(o.sessions, oldest)
	}
}

// Forget drops a session's state.
func (o *OpenAI) Forget(sessionKey string) {
	o.mu.Lock()
	delete(o.sessions, sessionKey)
	o.mu.Unlock()
}

// StatusError is a non-2xx answer of the chat-completions server.
type StatusError struct {
	Status  int
	Message string
}

// Error names the status, the server's message and, for the usual
// misconfigurations, what to check.
func (e *StatusError) Error() string {
	hint := ""
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = " (check the API key: --api-key-env names the variable that holds it)"
	case http.StatusNotFound:
		hint = " (check the base URL, which usually ends in /v1, and the model name)"
	}
	if e.Message == "" {
		return fmt.Sprintf("openai: %d %s%s", e.Status, http.StatusText(e.Status), hint)
	}
	return fmt.Sprintf("openai: %d %s: %s%s", e.Status, http.StatusText(e.Status), e.Message, hint)
}

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500
}

// Complete sends one chat-completion request, retrying 429, 5xx and
// transport errors with backoff, and returns the first choice's content.
func (o *OpenAI) Complete(ctx context.Context, msgs []ChatMessage) (string, error) {
	req := map[string]any{"model": o.cfg.Model, "messages": msgs}
	if o.cfg.Temperature != nil {
		req["temperature"] = *o.cfg.Temperature
	}
	if o.cfg.MaxTokens > 0 {
		req["max_tokens"] = o.cfg.MaxTokens
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("openai: encode request: %w", err)
	}
	delay := o.cfg.Backoff
	for attempt := 1; ; attempt++ {
		text, retryAfter, err := o.once(ctx, body)
		if err == nil {
			return text, nil
		}
		var se *StatusError
		again := ctx.Err() == nil && (!errors.As(err, &se) || retryable(se.Status))
		if !again || attempt >= o.cfg.MaxAttempts {
			if attempt > 1 {
				return "", fmt.Errorf("%w (after %d attempts)", err, attempt)
			}
			return "", err
		}
		wait := jitter(delay)
		if retryAfter > wait {
			wait = min(retryAfter, time.Minute)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait):
		}
		delay *= 2
	}
}

// once is one attempt.
func (o *OpenAI) once(ctx context.Context, body []byte) (text string, retryAfter time.Duration, err error) {
	rctx, cancel := context.WithTimeout(ctx, o.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, o.cfg.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", 0, fmt.Errorf("openai: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if o.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.cfg.APIKey)
	}
	resp, err := o.cfg.HTTPClient.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("openai: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return "", 0, fmt.Errorf("openai: read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			retryAfter = time.Duration(s) * time.Second
		}
		return "", retryAfter, &StatusError{Status: resp.StatusCode, Message: errorMessage(raw)}
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", 0, fmt.Errorf("openai: decode answer: %w", err)
	}
	if len(out.Choices) == 0 || out.Choices[0].Message.Content == nil || strings.TrimSpace(*out.Choices[0].Message.Content) == "" {
		reason := ""
		if len(out.Choices) > 0 {
			reason = out.Choices[0].FinishReason
		}
		return "", 0, fmt.Errorf("openai: the model returned no text (finish_reason %q)", reason)
	}
	return strings.TrimSpace(*out.Choices[0].Message.Content), 0, nil
}

// errorMessage pulls a readable message out of an error body.
func errorMessage(raw []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && len(e.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &obj) == nil && obj.Message != "" {
			return obj.Message
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return s
		}
	}
	return truncate(string(raw), 300)
}
