package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// ConnectOptions configure a socket.
type ConnectOptions struct {
	// Session binds the socket to one session; empty receives every session.
	Session string
	// Prefetch bounds unacknowledged deliveries pushed at once (default 64).
	Prefetch int
	// Heartbeat is the heartbeat period (default 15s).
	Heartbeat time.Duration
	// Buffer is the size of the delivery channel (default 256).
	Buffer int
}

// Socket is an agent's live connection (native dialect) that reconnects
// with exponential backoff and jitter until closed. Deliveries arrive on
// Receive; responses to Request calls are routed to their callers.
type Socket struct {
	c    *Client
	opts ConnectOptions

	deliveries chan Delivery
	ctx        context.Context
	cancel     context.CancelFunc
	done       chan struct{}

	mu      sync.Mutex
	ws      *websocket.Conn
	ready   chan struct{} // closed while connected
	agentID string
	pending map[string]chan frameResult
	waiters map[string]chan *Envelope // request id → response waiter
	refSeq  atomic.Int64
	conns   atomic.Int64 // successful connections, for tests and logs
	lastErr atomic.Value
}

type frameResult struct {
	data json.RawMessage
	err  error
}

// Connect opens a socket and waits for the first successful
// authentication (or the first authentication refusal, which is final).
func (c *Client) Connect(ctx context.Context, opts ConnectOptions) (*Socket, error) {
	if opts.Prefetch <= 0 {
		opts.Prefetch = 64
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 256
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Socket{c: c, opts: opts, deliveries: make(chan Delivery, opts.Buffer), ctx: sctx, cancel: cancel, done: make(chan struct{}),
		ready: make(chan struct{}), pending: map[string]chan frameResult{}, waiters: map[string]chan *Envelope{}}
	first := make(chan error, 1)
	go s.run(first)
	select {
	case err := <-first:
		if err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
}

// WebSocketURL turns a hub base URL into its /ws URL.
func WebSocketURL(base string) string {
	u := strings.TrimRight(base, "/")
	switch {
	case strings.HasPrefix(u, "https://"):
		u = "wss://" + strings.TrimPrefix(u, "https://")
	case strings.HasPrefix(u, "http://"):
		u = "ws://" + strings.TrimPrefix(u, "http://")
	}
	return u + "/ws"
}

// errAuth marks a refusal that reconnecting cannot fix.
type errAuth struct{ msg string }

func (e errAuth) Error() string { return "authentication refused: " + e.msg }

func (s *Socket) run(first chan error) {
	defer close(s.done)
	backoff := 100 * time.Millisecond
	reported := false
	for s.ctx.Err() == nil {
		err := s.session(func() {
			if !reported {
				reported = true
				first <- nil
			}
			backoff = 100 * time.Millisecond
		})
		if s.ctx.Err() != nil {
			break
		}
		s.lastErr.Store(err)
		var ae errAuth
		if errors.As(err, &ae) {
			if !reported {
				first <- err
			}
			return
		}
		jitter := time.Duration(rand.Int64N(int64(backoff) / 2))
		select {
		case <-time.After(backoff + jitter):
		case <-s.ctx.Done():
		}
		backoff = min(backoff*2, 10*time.Second)
	}
	if !reported {
		first <- s.ctx.Err()
	}
}

// session runs one connection until it breaks.
func (s *Socket) session(connected func()) error {
	dctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
	ws, _, err := websocket.Dial(dctx, WebSocketURL(s.c.BaseURL), nil)
	cancel()
	if err != nil {
		return err
	}
	ws.SetReadLimit(protocol.MaxEnvelopeBytes + 64<<10)
	defer ws.CloseNow()
	auth := map[string]any{"type": "auth", "credential": map[string]any{"type": "agent_token", "token": s.c.Token},
		"bridgeProtocol": "switchboard.v1", "sessionKey": s.opts.Session, "prefetch": s.opts.Prefetch, "client": s.c.UserAgent}
	if err := writeJSON(s.ctx, ws, auth); err != nil {
		return err
	}
	_, data, err := ws.Read(s.ctx)
	if err != nil {
		return err
	}
	var hello struct {
		Event string `json:"event"`
		Data  struct {
			AgentID   string `json:"agentId"`
			Heartbeat int    `json:"heartbeatIntervalSeconds"`
			Code      string `json:"code"`
			Reason    string `json:"reason"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &hello); err != nil {
		return fmt.Errorf("auth answer: %w", err)
	}
	if hello.Event != "auth.ok" {
		return errAuth{hello.Data.Code + ": " + hello.Data.Reason}
	}
	s.mu.Lock()
	s.ws = ws
	s.agentID = hello.Data.AgentID
	close(s.ready)
	s.mu.Unlock()
	s.conns.Add(1)
	connected()
	defer func() {
		s.mu.Lock()
		s.ws = nil
		s.ready = make(chan struct{})
		for ref, ch := range s.pending {
			ch <- frameResult{err: errors.New("connection lost before the hub answered; retry")}
			delete(s.pending, ref)
		}
		s.mu.Unlock()
	}()
	hbCtx, hbCancel := context.WithCancel(s.ctx)
	defer hbCancel()
	every := s.opts.Heartbeat
	if hb := time.Duration(hello.Data.Heartbeat) * time.Second; hb > 0 && hb < every {
		every = hb // the hub expects heartbeats at least this often
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				_ = writeJSON(hbCtx, ws, map[string]string{"type": "heartbeat"})
			}
		}
	}()
	for {
		_, data, err := ws.Read(s.ctx)
		if err != nil {
			return err
		}
		var f struct {
			Event string          `json:"event"`
			Data  json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			continue
		}
		switch f.Event {
		case "delivery":
			var d Delivery
			if err := json.Unmarshal(f.Data, &d); err != nil {
				continue
			}
			if s.routeResponse(d) {
				continue
			}
			select {
			case s.deliveries <- d:
			case <-s.ctx.Done():
				return s.ctx.Err()
			}
		case "ok", "error":
			var ref struct {
				Ref string `json:"ref"`
			}
			_ = json.Unmarshal(f.Data, &ref)
			s.mu.Lock()
			ch := s.pending[ref.Ref]
			delete(s.pending, ref.Ref)
			s.mu.Unlock()
			if ch == nil {
				continue
			}
			if f.Event == "ok" {
				ch <- frameResult{data: f.Data}
			} else {
				e := &Error{Status: 0, Raw: f.Data}
				var body struct {
					Code        string            `json:"code"`
					Class       protocol.Class    `json:"class"`
					Message     string            `json:"message"`
					FieldErrors map[string]string `json:"fieldErrors"`
					NextAction  string            `json:"nextAction"`
				}
				_ = json.Unmarshal(f.Data, &body)
				e.Body = ErrorBody{Error: body.Code, Class: body.Class, Message: body.Message, FieldErrors: body.FieldErrors, NextAction: body.NextAction}
				ch <- frameResult{err: e}
			}
		}
	}
}

// routeResponse hands a response or error delivery to the Request call
// waiting for it (acking it), reporting whether it was consumed.
func (s *Socket) routeResponse(d Delivery) bool {
	env, err := d.Decode()
	if err != nil || (env.Type != "response" && env.Type != "error") {
		return false
	}
	var p struct {
		RequestID string `json:"requestId"`
	}
	_ = json.Unmarshal(env.Payload, &p)
	s.mu.Lock()
	ch := s.waiters[p.RequestID]
	delete(s.waiters, p.RequestID)
	s.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- env
	go func() {
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		defer cancel()
		_, _ = s.Ack(ctx, d)
	}()
	return true
}

func writeJSON(ctx context.Context, ws *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return ws.Write(wctx, websocket.MessageText, b)
}

// call sends a frame with a fresh ref and waits for the hub's ok or error,
// waiting for a connection first if the socket is reconnecting.
func (s *Socket) call(ctx context.Context, frame map[string]any, out any) error {
	for {
		s.mu.Lock()
		ws, ready := s.ws, s.ready
		s.mu.Unlock()
		if ws == nil {
			select {
			case <-ready:
				continue
			case <-ctx.Done():
				return ctx.Err()
			case <-s.done:
				return errors.New("socket closed")
			}
		}
		ref := strconv.FormatInt(s.refSeq.Add(1), 10)
		frame["ref"] = ref
		ch := make(chan frameResult, 1)
		s.mu.Lock()
		s.pending[ref] = ch
		s.mu.Unlock()
		if err := writeJSON(ctx, ws, frame); err != nil {
			s.mu.Lock()
			delete(s.pending, ref)
			s.mu.Unlock()
			return err
		}
		select {
		case r := <-ch:
			if r.err != nil {
				return r.err
			}
			if out != nil {
				return json.Unmarshal(r.data, out)
			}
			return nil
		case <-ctx.Done():
			s.mu.Lock()
			delete(s.pending, ref)
			s.mu.Unlock()
			return ctx.Err()
		}
	}
}

// Receive returns the next delivery.
func (s *Socket) Receive(ctx context.Context) (Delivery, error) {
	select {
	case d := <-s.deliveries:
		return d, nil
	case <-ctx.Done():
		return Delivery{}, ctx.Err()
	case <-s.done:
		return Delivery{}, errors.New("socket closed")
	}
}

// Deliveries exposes the delivery channel for select loops.
func (s *Socket) Deliveries() <-chan Delivery { return s.deliveries }

// Ack acknowledges the delivery at the attempt it was received with.
func (s *Socket) Ack(ctx context.Context, d Delivery) (Settle, error) {
	var out Settle
	err := s.call(ctx, map[string]any{"type": "ack", "deliveryId": d.DeliveryID, "attempt": d.Attempt}, &out)
	return out, err
}

// Nack gives the delivery back for redelivery after delay.
func (s *Socket) Nack(ctx context.Context, d Delivery, delay time.Duration, reason string) (Settle, error) {
	var out Settle
	err := s.call(ctx, map[string]any{"type": "nack", "deliveryId": d.DeliveryID, "attempt": d.Attempt, "delay": int(delay / time.Second), "error": reason}, &out)
	return out, err
}

// Extend lengthens the delivery's lease.
func (s *Socket) Extend(ctx context.Context, d Delivery, by time.Duration) (Settle, error) {
	var out Settle
	err := s.call(ctx, map[string]any{"type": "extend", "deliveryId": d.DeliveryID, "attempt": d.Attempt, "seconds": int(by / time.Second)}, &out)
	return out, err
}

// Send sends an envelope over the socket (From.Agent defaults to this agent).
func (s *Socket) Send(ctx context.Context, env *Envelope) (SendResult, error) {
	var out SendResult
	err := s.call(ctx, map[string]any{"type": "send", "envelope": env}, &out)
	return out, err
}

// Heartbeat sends a heartbeat with an optional status now (the socket also
// heartbeats on its own).
func (s *Socket) Heartbeat(ctx context.Context, status string) error {
	return s.call(ctx, map[string]any{"type": "heartbeat", "status": status}, nil)
}

// Request sends a request to agent and waits for the correlated response
// (or error envelope, such as the hub's E004 when the deadline passes).
// The response delivery is acknowledged for the caller.
func (s *Socket) Request(ctx context.Context, to, action string, params any) (*Envelope, error) {
	env, err := NewRequest(to, action, params)
	if err != nil {
		return nil, err
	}
	env.ID = protocol.NewID(protocol.PrefixMessage)
	if dl, ok := ctx.Deadline(); ok {
		var p map[string]any
		_ = json.Unmarshal(env.Payload, &p)
		p["deadline"] = dl.UTC()
		env.Payload, _ = json.Marshal(p)
	}
	ch := make(chan *Envelope, 1)
	s.mu.Lock()
	s.waiters[env.ID] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiters, env.ID)
		s.mu.Unlock()
	}()
	if _, err := s.Send(ctx, env); err != nil {
		return nil, err
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// AgentID is the id the hub authenticated this socket as.
func (s *Socket) AgentID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agentID
}

// Connections counts successful (re)connections so far.
func (s *Socket) Connections() int64 { return s.conns.Load() }

// Close ends the socket and stops reconnecting.
func (s *Socket) Close() error {
	s.cancel()
	s.mu.Lock()
	ws := s.ws
	s.mu.Unlock()
	if ws != nil {
		ws.Close(websocket.StatusNormalClosure, "")
	}
	<-s.done
	return nil
}
