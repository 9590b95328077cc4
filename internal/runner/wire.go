package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// BridgeProtocol is the wire dialect the runner speaks: the Claworld
// plugin's frames, so a runner and the OpenClaw plugin are interchangeable
// from the hub's point of view.
const BridgeProtocol = "claworld.delivery_reply.v1"

// Delivery types carried in metadata.deliveryType.
const (
	// DeliveryKickoff asks the sender's conversation agent for the opener.
	DeliveryKickoff = "kickoff"
	// DeliveryReply carries a peer's reply in a live conversation.
	DeliveryReply = "reply"
	// DeliveryMessage is any other message addressed to a session.
	DeliveryMessage = "message"
)

// Keep-silent reasons sent in kept_silent frames.
const (
	// ReasonNoReply: the driver answered exactly NO_REPLY.
	ReasonNoReply = "no_reply_token"
	// ReasonReplyNotAllowed: the delivery said allowReply=false, so the
	// runner did not ask the driver at all.
	ReasonReplyNotAllowed = "reply_not_allowed"
)

// codeNotReplyable is the hub's refusal of an answer to a delivery that
// was already answered; after a reconnect it means "done", not "failed".
const codeNotReplyable = "delivery_not_replyable"

// Delivery is one turn the hub asks this agent to answer: the data of a
// `delivery` event. Drivers read it; the runner answers it.
type Delivery struct {
	DeliveryID      string   `json:"deliveryId"`
	SessionKey      string   `json:"sessionKey"`
	TargetAgentID   string   `json:"targetAgentId"`
	ChatRequestID   string   `json:"chatRequestId,omitempty"`
	ConversationKey string   `json:"conversationKey,omitempty"`
	WorldID         string   `json:"worldId,omitempty"`
	CreatedAt       string   `json:"createdAt,omitempty"`
	Payload         Payload  `json:"payload"`
	Metadata        Metadata `json:"metadata"`

	// RawMetadata is the metadata object exactly as the hub sent it, so the
	// exec driver can pass fields this version does not know about.
	RawMetadata json.RawMessage `json:"-"`
}

// Payload is what the peer (and the hub) said.
type Payload struct {
	// Text is the raw peer turn (or, for a kickoff, a short line asking for
	// the opener).
	Text string `json:"text"`
	// ContextText is the hub-authored context document: a full baseline
	// (`# Background`, `# Policy`, ...) on the first delivery of an intent,
	// a `# Live Turn` section with queued turns later, or empty.
	ContextText string `json:"contextText,omitempty"`
	// CommandText is the task instruction of a kickoff.
	CommandText string `json:"commandText,omitempty"`
	// UntrustedContext is passed through to drivers as given.
	UntrustedContext []json.RawMessage `json:"untrustedContext,omitempty"`
}

// Metadata says who sent the turn and how it may be answered.
type Metadata struct {
	FromAgentID         string `json:"fromAgentId,omitempty"`
	FromAgentCode       string `json:"fromAgentCode,omitempty"`
	FromDisplayIdentity string `json:"fromDisplayIdentity,omitempty"`
	// AllowReply is false when the hub forbids an answer (for example a
	// broadcast with reply policy zero); absent means allowed.
	AllowReply         *bool  `json:"allowReply,omitempty"`
	AcceptanceRequired bool   `json:"acceptanceRequired,omitempty"`
	DeliveryType       string `json:"deliveryType,omitempty"`
}

// ReplyAllowed reports whether the hub accepts a reply to d. A delivery
// without the flag may be answered: a missing field must not silence an
// agent.
func (d Delivery) ReplyAllowed() bool {
	return d.Metadata.AllowReply == nil || *d.Metadata.AllowReply
}

// Kickoff reports whether d asks for the opener of a new conversation.
func (d Delivery) Kickoff() bool { return d.Metadata.DeliveryType == DeliveryKickoff }

// Baseline reports whether d carries a full context document, which
// starts a new intent in its session (see [IsBaseline]).
func (d Delivery) Baseline() bool { return IsBaseline(d.Payload.ContextText) }

// frame is any server frame: {"event": name, "data": {...}}.
type frame struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// Longest ids the runner accepts; anything longer is a broken frame.
const maxIDLen = 512

// parseDelivery decodes and checks the data of a `delivery` event. It
// fails on anything the runner could not answer correctly.
func parseDelivery(data []byte) (Delivery, error) {
	var d Delivery
	if err := json.Unmarshal(data, &d); err != nil {
		return Delivery{}, fmt.Errorf("delivery: %w", err)
	}
	var raw struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	_ = json.Unmarshal(data, &raw) // cannot fail after the decode above
	if len(raw.Metadata) > 0 && string(raw.Metadata) != "null" {
		d.RawMetadata = raw.Metadata
	}
	var errs []error
	for _, f := range []struct{ name, v string }{{"deliveryId", d.DeliveryID}, {"sessionKey", d.SessionKey}} {
		switch {
		case strings.TrimSpace(f.v) == "":
			errs = append(errs, fmt.Errorf("delivery: %s is required", f.name))
		case len(f.v) > maxIDLen:
			errs = append(errs, fmt.Errorf("delivery: %s is longer than %d bytes", f.name, maxIDLen))
		case strings.ContainsFunc(f.v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			errs = append(errs, fmt.Errorf("delivery: %s contains control characters", f.name))
		}
	}
	if d.Payload.Text == "" && d.ReplyAllowed() {
		errs = append(errs, errors.New("delivery: payload.text is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return Delivery{}, err
	}
	return d, nil
}

// clientFrame is a frame the runner sends.
type clientFrame struct {
	Type       string `json:"type"`
	DeliveryID string `json:"deliveryId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	Payload    any    `json:"payload,omitempty"`
}

// authFrame is the first frame of a connection.
type authFrame struct {
	Type           string     `json:"type"`
	AgentID        string     `json:"agentId,omitempty"`
	Credential     credential `json:"credential"`
	Client         string     `json:"client"`
	ClientVersion  string     `json:"clientVersion"`
	BridgeProtocol string     `json:"bridgeProtocol"`
}

type credential struct {
	Type  string `json:"type"`
	Token string `json:"token"`
}

// helloData is what the runner reads from auth.ok.
type helloData struct {
	AgentID           string `json:"agentId"`
	HeartbeatInterval int    `json:"heartbeatIntervalSeconds"`
}

// serverError is the data of an `error` event.
type serverError struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	Reason     string `json:"reason"`
	DeliveryID string `json:"deliveryId"`
	Delivery   struct {
		DeliveryID string `json:"deliveryId"`
	} `json:"delivery"`
}

// id is the delivery the error is about, if it says.
func (e serverError) id() string {
	if e.DeliveryID != "" {
		return e.DeliveryID
	}
	return e.Delivery.DeliveryID
}

// notification is the common data of notification events.
type notification struct {
	NotificationID   string `json:"notificationId"`
	NotificationType string `json:"notificationType"`
	Title            string `json:"title"`
	Body             string `json:"body"`
	TargetSessionKey string `json:"targetSessionKey"`
}

// HubError is the hub's refusal of one frame or HTTP call.
type HubError struct {
	// Code is the hub's machine code (e.g. delivery_not_replyable).
	Code string
	// Message is its explanation.
	Message string
}

// Error reads as the hub's code and explanation.
func (e *HubError) Error() string {
	if e.Message == "" {
		return "hub refused: " + e.Code
	}
	return "hub refused: " + e.Code + ": " + e.Message
}

// answer is what the runner sends back for one delivery.
type answer struct {
	text   string // the reply, when reason is empty
	reason string // the keep-silent reason, when silent
}

func (a answer) silent() bool { return a.reason != "" }

// frame renders the answer as a socket frame.
func (a answer) frame(d Delivery, source string) clientFrame {
	if a.silent() {
		return clientFrame{Type: "kept_silent", DeliveryID: d.DeliveryID, SessionKey: d.SessionKey,
			Payload: map[string]string{"reason": a.reason, "source": source}}
	}
	return clientFrame{Type: "reply", DeliveryID: d.DeliveryID, SessionKey: d.SessionKey,
		Payload: map[string]string{"text": a.text, "source": source}}
}

// truncate shortens s for a log line.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
