// Package client is the Go SDK for a Switchboard hub. The CLI, the agent
// runner and the end-to-end tests use it, so what works for them works for
// any Go program that wants to be an agent or manage a hub.
//
//	c := client.New("http://127.0.0.1:7600", os.Getenv("SWITCHBOARD_TOKEN"))
//	agents, err := c.Agents(ctx)
//
// Errors from the hub are returned as *client.Error, which carries the
// structured body (code, class, what to do next).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Types shared with the hub, re-exported so SDK users can name them.
type (
	// Envelope is the bus message envelope v1.0.
	Envelope = protocol.Envelope
	// Address names one end of an envelope.
	Address = protocol.Address
	// Tier is command, pm or worker.
	Tier = protocol.Tier
	// Priority orders inboxes.
	Priority = protocol.Priority
	// MessageType is request, response, notification or error.
	MessageType = protocol.MessageType
	// OfflinePolicy says what a session send does when the session is offline.
	OfflinePolicy = protocol.OfflinePolicy
	// Agent is a registered agent.
	Agent = agent.Agent
	// CreateAgentParams describe a new agent.
	CreateAgentParams = agent.CreateParams
	// ErrorBody is the structured error the hub answers with.
	ErrorBody = protocol.ErrorBody
)

// Client talks to one hub with one token.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
	// UserAgent identifies the program in the hub's logs.
	UserAgent string
}

// New returns a client for the hub at baseURL authenticating with token.
func New(baseURL, token string) *Client {
	return &Client{
		BaseURL:   strings.TrimRight(baseURL, "/"),
		Token:     token,
		HTTP:      &http.Client{Timeout: 0},
		UserAgent: "switchboard-go",
	}
}

// Error is a non-2xx answer from the hub.
type Error struct {
	Status int
	Body   ErrorBody
	Raw    []byte
}

func (e *Error) Error() string {
	msg := e.Body.Message
	if msg == "" {
		msg = strings.TrimSpace(string(e.Raw))
	}
	s := fmt.Sprintf("%d %s", e.Status, e.Body.Error)
	if e.Body.Class != "" {
		s = fmt.Sprintf("%s %s", e.Body.Class, s)
	}
	if msg != "" {
		s += ": " + msg
	}
	if e.Body.NextAction != "" {
		s += " (next: " + e.Body.NextAction + ")"
	}
	return s
}

// Code returns the machine code of a hub error ("" if err is not one).
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		if e.Body.Error != "" {
			return e.Body.Error
		}
		return e.Body.Reason
	}
	return ""
}

// Status returns the HTTP status of a hub error (0 if err is not one).
func Status(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Do sends a JSON request and decodes a JSON answer into out (if non-nil;
// a *[]byte receives the body unparsed). query may be nil.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	_, err := c.do(ctx, method, path, query, in, out)
	return err
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) (int, error) {
	u := c.BaseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	req.Header.Set("User-Agent", c.UserAgent)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode, Raw: raw}
		_ = json.Unmarshal(raw, &e.Body)
		return resp.StatusCode, e
	}
	if b, ok := out.(*[]byte); ok {
		*b = raw // the body as sent (state.json, events.log)
		return resp.StatusCode, nil
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// ---- operations and agents ----------------------------------------------------

// Health is the answer of /healthz.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// Health checks that the hub is up.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.Do(ctx, http.MethodGet, "/healthz", nil, nil, &h)
	return h, err
}

// WaitHealthy polls /healthz until it answers or ctx ends.
func (c *Client) WaitHealthy(ctx context.Context) error {
	for {
		if _, err := c.Health(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// AgentView is an agent with its liveness.
type AgentView struct {
	Agent
	Liveness string    `json:"liveness"`
	LastSeen time.Time `json:"lastSeen,omitzero"`
}

// CreatedAgent is a new agent and its token (shown once).
type CreatedAgent struct {
	AgentView
	Token string `json:"token"`
}

// CreateAgent registers an agent (admin token required).
func (c *Client) CreateAgent(ctx context.Context, p CreateAgentParams) (CreatedAgent, error) {
	var out CreatedAgent
	err := c.Do(ctx, http.MethodPost, "/v1/admin/agents", nil, p, &out)
	return out, err
}

// Agents lists agents, optionally filtered by tier and parent.
func (c *Client) Agents(ctx context.Context, tier Tier, parent string) ([]AgentView, error) {
	q := url.Values{}
	if tier != "" {
		q.Set("tier", string(tier))
	}
	if parent != "" {
		q.Set("parent", parent)
	}
	var out struct {
		Agents []AgentView `json:"agents"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/agents", q, nil, &out)
	return out.Agents, err
}

// Agent returns one agent.
func (c *Client) Agent(ctx context.Context, id string) (AgentView, error) {
	var out AgentView
	err := c.Do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// RotateToken replaces an agent's token and returns the new one.
func (c *Client) RotateToken(ctx context.Context, id string) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(id)+"/rotate-token", nil, nil, &out)
	return out.Token, err
}
