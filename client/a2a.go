package client

import (
	"context"
	"net/url"
	"time"
)

// A2ASkill is one skill on an agent's A2A card.
type A2ASkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags,omitempty"`
	Examples    []string `json:"examples,omitempty"`
}

// A2ASettings are an agent's A2A opt-in and card content.
type A2ASettings struct {
	AgentID     string     `json:"agentId,omitempty"`
	Enabled     bool       `json:"enabled"`
	Description string     `json:"description"`
	Skills      []A2ASkill `json:"skills,omitempty"`
	CardURL     string     `json:"cardUrl,omitempty"`
	UpdatedAt   time.Time  `json:"updatedAt,omitzero"`
}

// A2ACaller is an external client allowed to call an agent over A2A.
type A2ACaller struct {
	CallerID  string    `json:"callerId"`
	AgentID   string    `json:"agentId"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	Token     string    `json:"token,omitempty"` // only when issued
}

// A2ASendInput is an outbound A2A message.
type A2ASendInput struct {
	URL       string `json:"url"`
	Text      string `json:"text"`
	Token     string `json:"token,omitempty"`
	ContextID string `json:"contextId,omitempty"`
	TaskID    string `json:"taskId,omitempty"`
}

// A2ASendResult is the external agent's answer.
type A2ASendResult struct {
	Agent     string `json:"agent"`
	ContextID string `json:"contextId,omitempty"`
	TaskID    string `json:"taskId,omitempty"`
	State     string `json:"state"`
	Text      string `json:"text"`
	TraceID   string `json:"traceId"`
}

// SetA2A enables, disables or updates an agent's A2A card.
func (c *Client) SetA2A(ctx context.Context, agentID string, s A2ASettings) (A2ASettings, error) {
	in := struct {
		Enabled     bool       `json:"enabled"`
		Description string     `json:"description"`
		Skills      []A2ASkill `json:"skills,omitempty"`
	}{s.Enabled, s.Description, s.Skills}
	var out A2ASettings
	err := c.Do(ctx, "PUT", "/v1/agents/"+url.PathEscape(agentID)+"/a2a", nil, in, &out)
	return out, err
}

// A2A returns an agent's A2A settings and card URL.
func (c *Client) A2A(ctx context.Context, agentID string) (A2ASettings, error) {
	var out A2ASettings
	err := c.Do(ctx, "GET", "/v1/agents/"+url.PathEscape(agentID)+"/a2a", nil, nil, &out)
	return out, err
}

// IssueA2ACaller issues a caller token (shown once).
func (c *Client) IssueA2ACaller(ctx context.Context, agentID, name string) (A2ACaller, error) {
	var out A2ACaller
	err := c.Do(ctx, "POST", "/v1/agents/"+url.PathEscape(agentID)+"/a2a/callers", nil, map[string]string{"name": name}, &out)
	return out, err
}

// A2ACallers lists an agent's callers.
func (c *Client) A2ACallers(ctx context.Context, agentID string) ([]A2ACaller, error) {
	var out struct {
		Callers []A2ACaller `json:"callers"`
	}
	err := c.Do(ctx, "GET", "/v1/agents/"+url.PathEscape(agentID)+"/a2a/callers", nil, nil, &out)
	return out.Callers, err
}

// RevokeA2ACaller revokes a caller's token.
func (c *Client) RevokeA2ACaller(ctx context.Context, agentID, callerID string) (A2ACaller, error) {
	var out A2ACaller
	err := c.Do(ctx, "DELETE", "/v1/agents/"+url.PathEscape(agentID)+"/a2a/callers/"+url.PathEscape(callerID), nil, nil, &out)
	return out, err
}

// A2ASend sends a message from agentID to an external A2A agent and waits
// for its answer; the hub logs the exchange on the bus.
func (c *Client) A2ASend(ctx context.Context, agentID string, in A2ASendInput) (A2ASendResult, error) {
	var out A2ASendResult
	err := c.Do(ctx, "POST", "/v1/agents/"+url.PathEscape(agentID)+"/a2a/send", nil, in, &out)
	return out, err
}
