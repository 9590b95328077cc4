package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/switchboard-hub/switchboard/internal/relay"
)

// Relay types shared with the hub.
type (
	// Report is a filed owner report.
	Report = relay.Report
	// Transcript is the record of a conversation.
	Transcript = relay.Transcript
	// TranscriptTurn is one turn of a transcript.
	TranscriptTurn = relay.TranscriptTurn
	// RelayAnswer is what the relay did with a reply or kept-silent answer.
	RelayAnswer = relay.Answer
	// MessageResult answers an orchestration message.
	MessageResult = relay.MessageResult
)

// ReportInput files an owner report. Announce defaults to true.
type ReportInput struct {
	Source     string `json:"source"`
	ReportText string `json:"reportText"`
	Announce   *bool  `json:"announce,omitempty"`
}

// FileReport delivers an owner report to the agent's main session
// (idempotent per source).
func (c *Client) FileReport(ctx context.Context, in ReportInput) (Report, error) {
	var out Report
	err := c.Do(ctx, http.MethodPost, "/v1/reports", nil, in, &out)
	return out, err
}

// Transcript returns the turns of a conversation (optionally one chat).
func (c *Client) Transcript(ctx context.Context, conversationKey, chatRequestID string) (Transcript, error) {
	q := url.Values{}
	if chatRequestID != "" {
		q.Set("chatRequestId", chatRequestID)
	}
	var out Transcript
	err := c.Do(ctx, http.MethodGet, "/v1/conversations/"+url.PathEscape(conversationKey)+"/transcript", q, nil, &out)
	return out, err
}

// ReplyToDelivery answers a relay delivery over HTTP (the Claworld fallback).
func (c *Client) ReplyToDelivery(ctx context.Context, deliveryID, text string) (map[string]any, error) {
	var out map[string]any
	err := c.Do(ctx, http.MethodPost, "/v1/runtime-deliveries/"+url.PathEscape(deliveryID)+"/reply", nil,
		map[string]any{"payload": map[string]any{"text": text, "source": c.UserAgent}}, &out)
	return out, err
}

// KeepSilent answers a relay delivery with silence over HTTP.
func (c *Client) KeepSilent(ctx context.Context, deliveryID, reason string) (map[string]any, error) {
	var out map[string]any
	err := c.Do(ctx, http.MethodPost, "/v1/runtime-deliveries/"+url.PathEscape(deliveryID)+"/kept-silent", nil,
		map[string]any{"reason": reason, "source": c.UserAgent}, &out)
	return out, err
}

// AcceptDelivery tells the hub the runtime took a relay delivery (over HTTP).
func (c *Client) AcceptDelivery(ctx context.Context, deliveryID string) error {
	return c.Do(ctx, http.MethodPost, "/v1/runtime-deliveries/"+url.PathEscape(deliveryID)+"/accepted", nil, map[string]any{"source": c.UserAgent}, nil)
}

// SendOrchestrationMessage sends a turn into a live conversation outside a
// delivery; clientMessageID makes retries safe.
func (c *Client) SendOrchestrationMessage(ctx context.Context, target, clientMessageID, text, conversationKey string) (MessageResult, error) {
	var out MessageResult
	err := c.Do(ctx, http.MethodPost, "/v1/orchestration/messages", nil, map[string]any{
		"targetAgentId": target, "clientMessageId": clientMessageID, "payload": map[string]any{"text": text},
		"conversation": map[string]any{"conversationKey": conversationKey}}, &out)
	return out, err
}
