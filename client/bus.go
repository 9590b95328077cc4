package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SendResult is the hub's answer to an accepted envelope.
type SendResult struct {
	ID         string `json:"id"`
	TraceID    string `json:"traceId"`
	Deliveries int    `json:"deliveries"`
	Duplicate  bool   `json:"duplicate,omitempty"`
}

// Delivery is an envelope handed to this agent under a lease.
type Delivery struct {
	DeliveryID string          `json:"deliveryId"`
	SessionKey string          `json:"sessionKey"`
	LeaseUntil time.Time       `json:"leaseUntil"`
	Attempt    int             `json:"attempt"`
	Envelope   json.RawMessage `json:"envelope"`
}

// Decode parses the delivery's envelope.
func (d Delivery) Decode() (*Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(d.Envelope, &e); err != nil {
		return nil, fmt.Errorf("delivery %s: %w", d.DeliveryID, err)
	}
	return &e, nil
}

// Settle is the outcome of an ack, nack or extend.
type Settle struct {
	DeliveryID     string    `json:"deliveryId"`
	State          string    `json:"state"`
	Attempt        int       `json:"attempt"`
	LeaseUntil     time.Time `json:"leaseUntil,omitzero"`
	AlreadyApplied bool      `json:"alreadyApplied,omitempty"`
}

// Send posts an envelope. From.Agent defaults to the caller.
func (c *Client) Send(ctx context.Context, env *Envelope) (SendResult, error) {
	var out SendResult
	err := c.Do(ctx, http.MethodPost, "/v1/messages", nil, env, &out)
	return out, err
}

// InboxOptions select deliveries to claim.
type InboxOptions struct {
	Limit   int
	Wait    time.Duration // long-poll up to this long for a delivery
	Session string
	Overdue bool
	Lease   time.Duration
	Agent   string // admin only: whose inbox
}

// Inbox claims deliveries over HTTP (long-polling with Wait).
func (c *Client) Inbox(ctx context.Context, o InboxOptions) ([]Delivery, error) {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Wait > 0 {
		q.Set("wait", strconv.Itoa(int(o.Wait/time.Second)))
	}
	if o.Session != "" {
		q.Set("session", o.Session)
	}
	if o.Overdue {
		q.Set("overdue", "true")
	}
	if o.Lease > 0 {
		q.Set("lease", strconv.Itoa(int(o.Lease/time.Second)))
	}
	if o.Agent != "" {
		q.Set("agent", o.Agent)
	}
	var out struct {
		Deliveries []Delivery `json:"deliveries"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/inbox", q, nil, &out)
	return out.Deliveries, err
}

// Ack marks a delivery processed; attempt 0 means the current lease.
func (c *Client) Ack(ctx context.Context, deliveryID string, attempt int) (Settle, error) {
	var out Settle
	err := c.Do(ctx, http.MethodPost, "/v1/deliveries/"+url.PathEscape(deliveryID)+"/ack", nil, map[string]any{"attempt": attempt}, &out)
	return out, err
}

// Nack gives a delivery back for redelivery after delay.
func (c *Client) Nack(ctx context.Context, deliveryID string, attempt int, delay time.Duration, reason string) (Settle, error) {
	var out Settle
	err := c.Do(ctx, http.MethodPost, "/v1/deliveries/"+url.PathEscape(deliveryID)+"/nack", nil,
		map[string]any{"attempt": attempt, "delay": int(delay / time.Second), "error": reason}, &out)
	return out, err
}

// Extend lengthens a lease.
func (c *Client) Extend(ctx context.Context, deliveryID string, attempt int, by time.Duration) (Settle, error) {
	var out Settle
	err := c.Do(ctx, http.MethodPost, "/v1/deliveries/"+url.PathEscape(deliveryID)+"/extend", nil,
		map[string]any{"attempt": attempt, "seconds": int(by / time.Second)}, &out)
	return out, err
}

// Heartbeat reports liveness (polling agents).
func (c *Client) Heartbeat(ctx context.Context, session, status string) error {
	return c.Do(ctx, http.MethodPost, "/v1/heartbeat", nil, map[string]any{"session": session, "status": status}, nil)
}

// LogRow is one message-log transition.
type LogRow struct {
	Timestamp  time.Time `json:"timestamp"`
	Level      string    `json:"level"`
	MsgID      string    `json:"msgId"`
	TraceID    string    `json:"traceId"`
	From       string    `json:"from"`
	To         string    `json:"to"`
	Type       string    `json:"type"`
	Status     string    `json:"status"`
	LatencyMs  int64     `json:"latencyMs"`
	DeliveryID string    `json:"deliveryId,omitempty"`
	Attempt    int       `json:"attempt,omitempty"`
	Detail     string    `json:"detail,omitempty"`
}

// Trace is the message log of one trace.
type Trace struct {
	TraceID string   `json:"traceId"`
	Rows    []LogRow `json:"rows"`
}

// Trace returns the log rows of a trace id (or of a message id).
func (c *Client) Trace(ctx context.Context, id string) (Trace, error) {
	var out Trace
	err := c.Do(ctx, http.MethodGet, "/v1/traces/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// DeadLetter is a dead delivery with its history.
type DeadLetter struct {
	DeliveryID string          `json:"deliveryId"`
	AgentID    string          `json:"agentId"`
	SessionKey string          `json:"sessionKey,omitempty"`
	Reason     string          `json:"reason"`
	LastError  string          `json:"lastError,omitempty"`
	Attempts   int             `json:"attempts"`
	DeadAt     time.Time       `json:"deadAt"`
	ReplayedAs string          `json:"replayedAs,omitempty"`
	Envelope   json.RawMessage `json:"envelope"`
	History    []LogRow        `json:"history"`
}

// DeadLetters lists dead deliveries (an agent's own; the admin may name any agent or none).
func (c *Client) DeadLetters(ctx context.Context, agent, reason string, limit int) ([]DeadLetter, error) {
	q := url.Values{}
	if agent != "" {
		q.Set("agent", agent)
	}
	if reason != "" {
		q.Set("reason", reason)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		DeadLetters []DeadLetter `json:"deadLetters"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/dead-letters", q, nil, &out)
	return out.DeadLetters, err
}

// Replay puts a dead delivery back in its inbox; the answer names the new delivery.
func (c *Client) Replay(ctx context.Context, deliveryID string) (Settle, error) {
	var out Settle
	err := c.Do(ctx, http.MethodPost, "/v1/dead-letters/"+url.PathEscape(deliveryID)+"/replay", nil, nil, &out)
	return out, err
}

// NewRequest builds a request envelope to agent with action and params.
func NewRequest(to, action string, params any) (*Envelope, error) {
	payload := map[string]any{"action": action}
	if params != nil {
		payload["params"] = params
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	return &Envelope{To: Address{Agent: to}, Type: "request", Payload: b}, nil
}

// NewResponse builds the response envelope answering req.
func NewResponse(req *Envelope, status string, result any) (*Envelope, error) {
	b, err := json.Marshal(map[string]any{"requestId": req.ID, "status": status, "result": result})
	if err != nil {
		return nil, err
	}
	return &Envelope{To: Address{Agent: req.From.Agent, Session: req.From.Session}, TraceID: req.TraceID, Type: "response", Payload: b}, nil
}

// NewNotification builds a notification envelope.
func NewNotification(to, event, message string) *Envelope {
	b, _ := json.Marshal(map[string]any{"event": event, "message": message})
	return &Envelope{To: Address{Agent: to}, Type: "notification", Payload: b}
}
