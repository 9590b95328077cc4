package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// NativeProtocol is the bridgeProtocol of the native dialect: envelopes as
// the bus spec defines them.
const NativeProtocol = "switchboard.v1"

// Hello is the data of the native auth.ok frame.
type Hello struct {
	AgentID           string `json:"agentId"`
	Tier              string `json:"tier"`
	SessionKey        string `json:"sessionKey,omitempty"`
	Protocol          string `json:"protocol"`
	HeartbeatInterval int    `json:"heartbeatIntervalSeconds"`
	Prefetch          int    `json:"prefetch"`
}

// ClientFrame is any native client frame after auth.
type ClientFrame struct {
	Type       string `json:"type"`
	Ref        string `json:"ref,omitempty"`
	DeliveryID string `json:"deliveryId,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Delay      int    `json:"delay,omitempty"`
	Error      string `json:"error,omitempty"`
	Seconds    int    `json:"seconds,omitempty"`
	Status     string `json:"status,omitempty"`
	// Envelope is decoded by protocol.DecodeEnvelope, as over HTTP: a
	// misspelled member is refused rather than silently dropped.
	Envelope json.RawMessage `json:"envelope,omitempty"`
}

type native struct{}

func (native) Hello(c *Conn) any {
	return Hello{AgentID: c.Agent.ID, Tier: string(c.Agent.Tier), SessionKey: c.Session, Protocol: NativeProtocol,
		HeartbeatInterval: int(c.g.opts.HeartbeatInterval / time.Second), Prefetch: c.prefetch}
}

func (native) Push(c *Conn, d bus.Delivery) (any, bool) {
	return map[string]any{"event": "delivery", "data": d}, true
}

func (native) Handle(ctx context.Context, c *Conn, data []byte) {
	var f ClientFrame
	if err := json.Unmarshal(data, &f); err != nil {
		// Try to recover the ref so the client can correlate the error.
		var probe struct {
			Ref string `json:"ref"`
		}
		_ = json.Unmarshal(data, &probe)
		_ = c.Event("error", ErrorFrame(probe.Ref, protocol.JSONError(err)))
		return
	}
	switch f.Type {
	case "ack", "nack", "extend":
		// A settle does not depend on the order of frames: it waits for
		// its commit beside the read loop, so acks never queue behind
		// sends (each of which waits for a commit of its own).
		c.Go(func() { handleFrame(ctx, c, f) })
	default:
		handleFrame(ctx, c, f)
	}
}

func handleFrame(ctx context.Context, c *Conn, f ClientFrame) {
	b := c.g.bus
	so := bus.SettleOptions{Attempt: f.Attempt}
	var result any
	var err error
	switch f.Type {
	case "heartbeat":
		b.Heartbeat(c.Agent.ID, c.Session, bus.KindSocket, f.Status)
		result = map[string]any{}
	case "ack":
		result, err = b.Ack(ctx, c.Agent.ID, f.DeliveryID, so)
		if err == nil {
			c.Settled(f.DeliveryID)
		}
	case "nack":
		if f.Delay < 0 || f.Delay > 86400 {
			err = protocol.Invalid("delay", "must be between 0 and 86400 seconds")
			break
		}
		result, err = b.Nack(ctx, c.Agent.ID, f.DeliveryID, bus.NackOptions{SettleOptions: so, Delay: time.Duration(f.Delay) * time.Second, Error: f.Error})
		if err == nil {
			c.Settled(f.DeliveryID)
		}
	case "extend":
		result, err = b.Extend(ctx, c.Agent.ID, f.DeliveryID, time.Duration(f.Seconds)*time.Second, so)
	case "send":
		result, err = sendFrom(ctx, c, f.Envelope)
	default:
		err = &protocol.Error{Class: protocol.ClassInvalid, Code: "unknown_frame_type",
			Message: "type must be one of ack, nack, extend, send, heartbeat; got " + quote(f.Type)}
	}
	if err != nil {
		_ = c.Event("error", ErrorFrame(f.Ref, err))
		return
	}
	if f.Ref != "" {
		if b, err := okFrame(f.Ref, result); err == nil {
			_ = c.sendBytes(b)
		} else {
			_ = c.Event("error", ErrorFrame(f.Ref, err))
		}
	}
}

func sendFrom(ctx context.Context, c *Conn, raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, protocol.Invalid("envelope", "required for a send frame")
	}
	env, err := protocol.DecodeEnvelope(raw)
	if err != nil {
		return nil, err
	}
	if env.From.Agent == "" {
		env.From.Agent = c.Agent.ID
	}
	if env.From.Agent != c.Agent.ID {
		return nil, protocol.Forbidden("not_your_agent", "envelope.from.agent must be the connected agent "+c.Agent.ID)
	}
	if env.From.Session == "" {
		env.From.Session = c.Session
	}
	b := c.g.bus
	if err := b.Prepare(env, ""); err != nil {
		return nil, err
	}
	return b.Send(ctx, env)
}

// okFrame renders {"event":"ok","data":{"ref":ref, ...result}}: the
// result object's members follow the ref. It splices the encoded result
// instead of decoding it into a map and encoding that again, which cost
// the hot path (every send and ack is answered this way) three passes of
// encoding/json. A result that does not encode as an object is an error.
func okFrame(ref string, result any) ([]byte, error) {
	body, err := json.Marshal(result)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("encode result: %T is not a JSON object", result)
	}
	refJSON, _ := json.Marshal(ref)
	b := make([]byte, 0, len(body)+len(refJSON)+32)
	b = append(b, `{"event":"ok","data":{"ref":`...)
	b = append(b, refJSON...)
	if len(body) > 2 { // more than {}
		b = append(b, ',')
	}
	b = append(b, body[1:]...)
	return append(b, '}'), nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
