package relay

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/gateway"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/social"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// ClaworldProtocol is the bridgeProtocol of the Claworld plugin's dialect.
const ClaworldProtocol = "claworld.delivery_reply.v1"

// NoticeSender is the bus sender of social notifications.
const NoticeSender = "system:social"

// Notifier delivers the social layer's notifications (request.updated,
// conversation_ended, invitations…) as bus notifications to management
// sessions, inside the social layer's transaction.
type Notifier struct {
	Bus *bus.Service
	TTL time.Duration
}

// Notify implements social.Notifier.
func (n Notifier) Notify(ctx context.Context, tx *store.Tx, nt social.Notification) error {
	ttl := n.TTL
	if ttl <= 0 {
		ttl = 7 * 24 * time.Hour
	}
	var data map[string]any
	_ = json.Unmarshal(nt.Payload, &data)
	title, _ := data["title"].(string)
	env := &protocol.Envelope{From: protocol.Address{Agent: NoticeSender}, To: protocol.Address{Agent: nt.TargetAgentID, Session: nt.SessionKey},
		Type: protocol.TypeNotification, TTL: int(ttl / time.Second),
		Payload: protocol.MustJSON(map[string]any{"event": nt.Event, "message": title, "data": json.RawMessage(nt.Payload)})}
	_, err := n.Bus.SendSystemTx(ctx, tx, env)
	return err
}

// RegisterDialect installs the Claworld dialect on the gateway.
func (s *Service) RegisterDialect(g *gateway.Gateway) {
	g.Register(ClaworldProtocol, func() gateway.Dialect { return &claworld{s: s} })
}

type claworld struct {
	s *Service
	// The pump calls Push then Pushed for each delivery: Pushed reuses
	// Push's reading of the envelope.
	pushedID  string
	pushedAck bool
}

// DeliveryFrame is the data of a Claworld `delivery` frame.
type DeliveryFrame struct {
	EventType       string        `json:"eventType"`
	DeliveryID      string        `json:"deliveryId"`
	SessionKey      string        `json:"sessionKey"`
	TargetAgentID   string        `json:"targetAgentId"`
	ChatRequestID   string        `json:"chatRequestId,omitempty"`
	ConversationKey string        `json:"conversationKey,omitempty"`
	WorldID         string        `json:"worldId,omitempty"`
	CreatedAt       time.Time     `json:"createdAt"`
	Payload         FramePayload  `json:"payload"`
	Metadata        FrameMetadata `json:"metadata"`
}

// Frame renders a bus delivery as the Claworld frame an agent receives:
// a relay delivery becomes `delivery`; a notification becomes its event;
// anything else is passed as `message` with the envelope.
func Frame(d bus.Delivery) (event string, data any, ackOnPush bool) {
	env, err := d.Decode()
	if err != nil {
		return "message", map[string]any{"deliveryId": d.DeliveryID, "sessionKey": d.SessionKey}, true
	}
	if env.From.Agent == SystemID && env.Type == protocol.TypeRequest {
		var p struct {
			Action string         `json:"action"`
			Params DeliveryParams `json:"params"`
		}
		if json.Unmarshal(env.Payload, &p) == nil && p.Action == DeliveryAction {
			return "delivery", DeliveryFrame{EventType: "delivery", DeliveryID: d.DeliveryID, SessionKey: d.SessionKey, TargetAgentID: d.AgentID,
				ChatRequestID: p.Params.ChatRequestID, ConversationKey: p.Params.ConversationKey, WorldID: p.Params.WorldID,
				CreatedAt: env.Timestamp, Payload: p.Params.Payload, Metadata: p.Params.Metadata}, false
		}
	}
	if env.Type == protocol.TypeNotification {
		var p struct {
			Event string          `json:"event"`
			Data  json.RawMessage `json:"data"`
		}
		if json.Unmarshal(env.Payload, &p) == nil && len(p.Data) > 0 {
			return p.Event, p.Data, true
		}
	}
	return "message", map[string]any{"deliveryId": d.DeliveryID, "sessionKey": d.SessionKey, "envelope": d.Envelope}, true
}

func (c *claworld) Hello(conn *gateway.Conn) any {
	return map[string]any{"agentId": conn.Agent.ID, "protocol": ClaworldProtocol, "displayName": conn.Agent.DisplayName,
		"heartbeatIntervalSeconds": 15}
}

func (c *claworld) Push(conn *gateway.Conn, d bus.Delivery) (any, bool) {
	event, data, ack := Frame(d)
	c.pushedID, c.pushedAck = d.DeliveryID, ack
	return map[string]any{"event": event, "data": data}, true
}

// Pushed acknowledges fire-and-forget frames (notifications, plain
// messages) once written: the Claworld plugin has no ack for them.
// Relay deliveries stay leased until the agent replies or keeps silent;
// one carrying a turn ends that turn's timing.
func (c *claworld) Pushed(conn *gateway.Conn, d bus.Delivery) {
	ack := c.pushedAck
	if d.DeliveryID != c.pushedID {
		_, _, ack = Frame(d)
	}
	if !ack {
		c.s.turns.pushed(d.DeliveryID)
	} else {
		ctx, cancel := context.WithTimeout(conn.Context(), 10*time.Second)
		defer cancel()
		if _, err := c.s.bus.Ack(ctx, conn.Agent.ID, d.DeliveryID, bus.SettleOptions{Attempt: d.Attempt}); err == nil {
			conn.Settled(d.DeliveryID)
		}
	}
}

// clientFrame is a Claworld client frame after auth.
type clientFrame struct {
	Type       string `json:"type"`
	DeliveryID string `json:"deliveryId"`
	SessionKey string `json:"sessionKey"`
	Payload    struct {
		Text   string `json:"text"`
		Source string `json:"source"`
		Reason string `json:"reason"`
	} `json:"payload"`
}

func (c *claworld) Handle(ctx context.Context, conn *gateway.Conn, data []byte) {
	received := time.Now()
	var f clientFrame
	if err := json.Unmarshal(data, &f); err != nil {
		_ = conn.Event("error", errorData(protocol.JSONError(err)))
		return
	}
	agentID := conn.Agent.ID
	fail := func(err error) {
		d := errorData(err)
		if f.DeliveryID != "" {
			d["deliveryId"] = f.DeliveryID // lets runtimes match the error to the answer it refuses
		}
		_ = conn.Event("error", d)
	}
	switch f.Type {
	case "heartbeat":
		return
	case "accepted":
		if err := c.s.Accepted(ctx, agentID, f.DeliveryID); err != nil {
			fail(err)
			return
		}
		_ = conn.Event("delivery.accepted", map[string]any{"acceptedDeliveryId": f.DeliveryID})
	case "reply":
		ans, err := c.s.Reply(withReceived(ctx, received), agentID, f.DeliveryID, f.Payload.Text, f.Payload.Source)
		if err != nil {
			fail(err)
			return
		}
		conn.Settled(f.DeliveryID)
		_ = conn.Event("reply.accepted", map[string]any{"repliedDeliveryId": f.DeliveryID, "turnId": ans.TurnID, "relayed": ans.Relayed, "chatStatus": ans.ChatStatus})
	case "kept_silent":
		reason := f.Payload.Reason
		if reason == "" {
			reason = "kept_silent"
		}
		ans, err := c.s.KeptSilent(ctx, agentID, f.DeliveryID, reason, f.Payload.Source)
		if err != nil {
			fail(err)
			return
		}
		conn.Settled(f.DeliveryID)
		_ = conn.Event("kept_silent.accepted", map[string]any{"keptSilentDeliveryId": f.DeliveryID, "chatStatus": ans.ChatStatus})
	default:
		fail(&protocol.Error{Class: protocol.ClassInvalid, Code: "unknown_frame_type",
			Message: "type must be one of heartbeat, accepted, reply, kept_silent"})
	}
}

// errorData is the data of a Claworld error frame: the structured error
// with `code` and `reason` (the plugin reads reason), plus extra members
// such as the delivery of a 409.
func errorData(err error) map[string]any {
	pe := protocol.AsError(err)
	out := map[string]any{"code": pe.Code, "reason": pe.Code, "message": pe.Message, "class": pe.Class, "recoverable": pe.Class.Recoverable()}
	for k, v := range pe.Extra {
		out[k] = v
	}
	if pe.NextAction != "" {
		out["nextAction"] = pe.NextAction
	}
	return out
}
