package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// SendInput is an outbound message from an agent to an external A2A agent.
type SendInput struct {
	// URL is the external agent's base URL or the URL of its Agent Card.
	URL string `json:"url"`
	// Text is the message.
	Text string `json:"text"`
	// Token is the bearer token the external agent issued to us (optional).
	Token string `json:"token,omitempty"`
	// ContextID continues an earlier conversation with that agent.
	ContextID string `json:"contextId,omitempty"`
	// TaskID answers a task of that agent that asked for more input.
	TaskID string `json:"taskId,omitempty"`
}

// SendResult is what the external agent answered.
type SendResult struct {
	Agent     string `json:"agent"`
	ContextID string `json:"contextId,omitempty"`
	TaskID    string `json:"taskId,omitempty"`
	State     string `json:"state"`
	Text      string `json:"text"`
	TraceID   string `json:"traceId"`
}

// outboundTimeout bounds one outbound exchange.
const outboundTimeout = 2 * time.Minute

// Send delivers a message from agentID to an external A2A agent and waits
// for its answer. The exchange is logged on the bus as a notification to
// the sending agent (event "a2a.sent"), so it shows in the message log and
// the agent's inbox like any other traffic. Errors: E003 for a bad URL or
// empty text, E005 when the external agent cannot be reached or fails.
func (s *Service) Send(ctx context.Context, agentID string, in SendInput) (SendResult, error) {
	in.Text = strings.TrimSpace(in.Text)
	fe := protocol.FieldErrors{}
	u, err := url.Parse(in.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fe.Add("url", "must be the http(s) URL of the external agent or of its Agent Card")
	}
	if in.Text == "" {
		fe.Add("text", "required")
	}
	if err := fe.Err(); err != nil {
		return SendResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, outboundTimeout)
	defer cancel()
	hc := &http.Client{Timeout: outboundTimeout, Transport: bearerTransport{token: in.Token, base: http.DefaultTransport}}
	base, path := in.URL, ""
	if i := strings.Index(in.URL, "/.well-known/"); i >= 0 {
		base, path = in.URL[:i], in.URL[i:]
	}
	res := &agentcard.Resolver{Client: hc, CardParser: a2av0.NewAgentCardParser()}
	var opts []agentcard.ResolveOption
	if path != "" {
		opts = append(opts, agentcard.WithPath(path))
	}
	card, err := res.Resolve(ctx, base, opts...)
	if err != nil {
		return SendResult{}, dependency("fetch the Agent Card of "+in.URL, err)
	}
	client, err := a2aclient.NewFromCard(ctx, card,
		a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}))
	if err != nil {
		return SendResult{}, dependency("connect to "+card.Name, err)
	}
	defer client.Destroy()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(in.Text))
	msg.ContextID = in.ContextID
	msg.TaskID = a2a.TaskID(in.TaskID)
	out, err := client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		return SendResult{}, dependency("send to "+card.Name, err)
	}
	r := SendResult{Agent: card.Name}
	switch v := out.(type) {
	case *a2a.Message:
		r.ContextID, r.TaskID, r.State, r.Text = v.ContextID, string(v.TaskID), "message", partsText(v.Parts)
	case *a2a.Task:
		r.ContextID, r.TaskID, r.State = v.ContextID, string(v.ID), stateName(v.Status.State)
		var texts []string
		for _, a := range v.Artifacts {
			if t := partsText(a.Parts); t != "" {
				texts = append(texts, t)
			}
		}
		if len(texts) == 0 && v.Status.Message != nil {
			texts = append(texts, partsText(v.Status.Message.Parts))
		}
		r.Text = strings.Join(texts, "\n\n")
	}
	r.TraceID, err = s.logOutbound(context.WithoutCancel(ctx), agentID, in, r)
	if err != nil {
		s.log.Warn("a2a: log outbound exchange", "agent", agentID, "err", err)
	}
	return r, nil
}

func (s *Service) logOutbound(ctx context.Context, agentID string, in SendInput, r SendResult) (string, error) {
	summary := fmt.Sprintf("A2A exchange with %s (%s): sent %q; %s: %q", r.Agent, in.URL, clip(in.Text, 500), r.State, clip(r.Text, 2000))
	payload, _ := json.Marshal(protocol.NotificationPayload{Event: "a2a.sent", Message: summary})
	meta, _ := json.Marshal(map[string]any{"a2a": map[string]string{"url": in.URL, "contextId": r.ContextID, "taskId": r.TaskID, "state": r.State}})
	env := &protocol.Envelope{From: protocol.Address{Agent: SystemID, Session: "a2a:" + r.ContextID}, To: protocol.Address{Agent: agentID},
		Type: protocol.TypeNotification, Priority: protocol.PriorityLow, Payload: payload, Metadata: meta}
	res, err := s.bus.SendSystem(ctx, env)
	return res.TraceID, err
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func partsText(parts a2a.ContentParts) string {
	var out []string
	for _, p := range parts {
		if t := p.Text(); t != "" {
			out = append(out, t)
		} else if d := p.Data(); d != nil {
			b, _ := json.Marshal(d)
			out = append(out, string(b))
		}
	}
	return strings.Join(out, "\n\n")
}

// stateName is a task state in the short form people read
// ("completed", "input-required").
func stateName(st a2a.TaskState) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(st), "TASK_STATE_")), "_", "-")
}

func dependency(what string, err error) error {
	return &protocol.Error{Class: protocol.ClassDependency, Code: "a2a_peer_failed", Err: err,
		Message:    "could not " + what + ": " + err.Error(),
		NextAction: "check the URL and the token, and that the external agent is up"}
}

// bearerTransport adds the caller token to every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	return t.base.RoundTrip(r)
}
