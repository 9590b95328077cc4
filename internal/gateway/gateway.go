// Package gateway serves agents' WebSocket connections at /ws. A client
// authenticates in its first frame and picks a wire dialect there
// (bridgeProtocol): the native "switchboard.v1", or a dialect another
// subsystem registers (the Claworld relay registers
// "claworld.delivery_reply.v1"). Every dialect is a view of the same
// durable bus deliveries: the gateway claims them as they commit and pushes
// them; the dialect decides how they look on the wire and what client
// frames mean.
//
// One connection per agent and session: a newer connection replaces the
// older one, which is closed with 4001 duplicate_connection_replaced — also
// across nodes sharing PostgreSQL. A connection that sends nothing for three
// heartbeat intervals is closed with 4002 stale_connection.
package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Close codes of the gateway.
const (
	CloseReplaced     websocket.StatusCode = 4001
	CloseStale        websocket.StatusCode = 4002
	CloseUnauthorized websocket.StatusCode = 4003
)

// AuthFrame is the first client frame of every dialect.
type AuthFrame struct {
	Type       string `json:"type"`
	AgentID    string `json:"agentId"`
	Credential struct {
		Type  string `json:"type"`
		Token string `json:"token"`
	} `json:"credential"`
	Client         string `json:"client,omitempty"`
	ClientVersion  string `json:"clientVersion,omitempty"`
	BridgeProtocol string `json:"bridgeProtocol"`
	// SessionKey binds a native connection to one session; empty receives
	// deliveries for every session of the agent.
	SessionKey string `json:"sessionKey,omitempty"`
	// Prefetch bounds unacknowledged deliveries pushed to this connection.
	Prefetch int `json:"prefetch,omitempty"`
}

// Dialect is a wire format over the gateway's delivery pump.
type Dialect interface {
	// Hello is the data of the auth.ok frame.
	Hello(c *Conn) any
	// Push renders a claimed delivery as one frame; ok=false means the
	// delivery is not for this dialect's client and is left to expire or be
	// settled elsewhere (a dialect should then ack it itself if appropriate).
	Push(c *Conn, d bus.Delivery) (frame any, ok bool)
	// Handle processes one client frame (any frame other than auth).
	Handle(ctx context.Context, c *Conn, frame []byte)
}

// Pusher is implemented by dialects that act after a frame was written,
// e.g. to acknowledge fire-and-forget notifications.
type Pusher interface {
	Pushed(c *Conn, d bus.Delivery)
}

// DialectFactory builds the dialect state of one connection.
type DialectFactory func() Dialect

// Options tune the gateway.
type Options struct {
	HeartbeatInterval time.Duration // expected client heartbeat period (default 15s)
	AuthTimeout       time.Duration // time allowed for the auth frame (default 10s)
	Prefetch          int           // default unacknowledged deliveries per connection (default 64)
	Lease             time.Duration // lease of pushed deliveries (default: the bus default)
}

// Gateway accepts WebSocket connections.
type Gateway struct {
	bus    *bus.Service
	agents *agent.Registry
	db     *store.DB
	log    *slog.Logger
	opts   Options

	dmu      sync.RWMutex
	dialects map[string]DialectFactory

	mu      sync.Mutex
	conns   map[connKey]*Conn
	closing bool
	nextID  atomic.Int64
	wg      sync.WaitGroup
	stop    chan struct{} // closed by Shutdown: ends the watchdog
	stopped sync.Once
}

type connKey struct{ agent, session string }

const replaceChannel = "gateway_replace"

// New returns a gateway with the native dialect registered.
func New(b *bus.Service, agents *agent.Registry, db *store.DB, log *slog.Logger, opts Options) *Gateway {
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 15 * time.Second
	}
	if opts.AuthTimeout <= 0 {
		opts.AuthTimeout = 10 * time.Second
	}
	if opts.Prefetch <= 0 {
		opts.Prefetch = 64
	}
	if log == nil {
		log = slog.Default()
	}
	g := &Gateway{bus: b, agents: agents, db: db, log: log, opts: opts, dialects: map[string]DialectFactory{}, conns: map[connKey]*Conn{},
		stop: make(chan struct{})}
	g.Register(NativeProtocol, func() Dialect { return &native{} })
	db.Listen(replaceChannel, g.onRemoteReplace)
	go g.watchdog()
	return g
}

// Register adds a dialect selectable by bridgeProtocol in the auth frame.
func (g *Gateway) Register(name string, f DialectFactory) {
	g.dmu.Lock()
	g.dialects[name] = f
	g.dmu.Unlock()
}

// Bus returns the bus the gateway delivers from (for dialects).
func (g *Gateway) Bus() *bus.Service { return g.bus }

// Conn is one authenticated agent connection.
type Conn struct {
	ID      string
	Agent   agent.Agent
	Session string
	Auth    AuthFrame
	Dialect Dialect

	g        *Gateway
	ws       *websocket.Conn
	ctx      context.Context
	cancel   context.CancelFunc
	prefetch int

	// side bounds and tracks frames handled beside the read loop (Go).
	side     chan struct{}
	sideWG   sync.WaitGroup
	imu      sync.Mutex
	inflight map[string]time.Time // deliveryId → lease end
	// more says deliveries may be waiting that only a claim finds: the bus
	// then queues new ones instead of handing them over (see Reserve), so
	// they are pushed after the older ones.
	more     bool
	refusals int             // Reserve refusals, so a claim in flight knows it missed some
	taken    []bus.Delivery  // handed over by the bus, to push
	takenSig chan struct{}   // signals taken
	wake     <-chan struct{} // the pump's bus wake-ups
	kick     chan struct{}
	freed    chan struct{}
	lastSeen atomic.Int64
	closed   atomic.Bool
}

// Context is cancelled when the connection ends.
func (c *Conn) Context() context.Context { return c.ctx }

// Send writes one JSON frame.
func (c *Conn) Send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// Event writes {"event": name, "data": data}.
func (c *Conn) Event(name string, data any) error {
	return c.Send(map[string]any{"event": name, "data": data})
}

// Settled tells the pump a delivery of this connection is done, freeing a
// prefetch slot. The pump claims into the slot only when deliveries may be
// waiting (see pump): most acks leave nothing to claim, and an empty claim
// still costs a write.
func (c *Conn) Settled(deliveryID string) {
	c.imu.Lock()
	delete(c.inflight, deliveryID)
	c.imu.Unlock()
	select {
	case c.freed <- struct{}{}:
	default:
	}
}

// Go runs fn beside the read loop, for frames whose order does not matter
// (acks): handled one after another, each frame that waits for a commit
// would hold every later frame of the connection. At most prefetch run at
// once; beyond that the read loop waits. The connection's handler returns
// only after they finish.
func (c *Conn) Go(fn func()) {
	c.side <- struct{}{}
	c.sideWG.Add(1)
	go func() {
		defer func() {
			<-c.side
			c.sideWG.Done()
		}()
		fn()
	}()
}

// Kick asks the pump to look for deliveries now.
func (c *Conn) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Close ends the connection with a WebSocket close code.
func (c *Conn) Close(code websocket.StatusCode, reason string) {
	if c.closed.CompareAndSwap(false, true) {
		c.ws.Close(code, reason)
		c.cancel()
	}
}

// ServeHTTP upgrades the request and starts the connection. It returns at
// once: the connection is hijacked, and serving it on a goroutine of its own
// lets net/http's goroutine go, with the request it parsed and the stack it
// grew doing so — an idle agent then holds only what its connection needs.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(smallBuffers{w}, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	ws.SetReadLimit(protocol.MaxEnvelopeBytes + 64<<10)
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		ws.Close(websocket.StatusGoingAway, "server shutting down")
		return
	}
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		g.serve(ws)
	}()
}

// Buffer sizes of a connection. net/http hands a hijacked connection its
// own 4 KiB reader and writer; agents mostly sit idle and exchange small
// frames, and a larger frame is read or written past the buffer, straight
// from or to the socket.
const (
	readBufferSize  = 1 << 10
	writeBufferSize = 2 << 10
)

// smallBuffers swaps net/http's buffers of a hijacked connection for
// smaller ones, keeping any bytes the client already sent.
type smallBuffers struct{ http.ResponseWriter }

func (s smallBuffers) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(s.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(conn, readBufferSize)
	if n := brw.Reader.Buffered(); n > 0 {
		// Frames the client sent right behind its handshake: they must be
		// in the new reader's buffer, where the websocket library looks
		// for them before it resets the reader onto the connection.
		early, _ := brw.Reader.Peek(n)
		br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(early)), conn), max(readBufferSize, n))
		if _, err := br.Peek(n); err != nil {
			conn.Close()
			return nil, nil, err
		}
	}
	return conn, bufio.NewReadWriter(br, bufio.NewWriterSize(conn, writeBufferSize)), nil
}

func (g *Gateway) serve(ws *websocket.Conn) {
	actx, cancel := context.WithTimeout(context.Background(), g.opts.AuthTimeout)
	_, data, err := ws.Read(actx)
	cancel()
	if err != nil {
		ws.Close(CloseUnauthorized, "auth frame expected")
		return
	}
	var auth AuthFrame
	if err := json.Unmarshal(data, &auth); err != nil || auth.Type != "auth" {
		g.refuse(ws, "invalid_auth_frame", "the first frame must be {\"type\":\"auth\",\"agentId\",\"credential\":{\"type\":\"agent_token\",\"token\"},\"bridgeProtocol\"}")
		return
	}
	if auth.BridgeProtocol == "" {
		auth.BridgeProtocol = NativeProtocol
	}
	g.dmu.RLock()
	factory, ok := g.dialects[auth.BridgeProtocol]
	names := make([]string, 0, len(g.dialects))
	for n := range g.dialects {
		names = append(names, n)
	}
	g.dmu.RUnlock()
	if !ok {
		g.refuse(ws, "unsupported_protocol", fmt.Sprintf("bridgeProtocol %q is not supported; use one of %s", auth.BridgeProtocol, strings.Join(names, ", ")))
		return
	}
	ctx := context.Background()
	a, err := g.agents.Authenticate(ctx, auth.Credential.Token)
	if err != nil || (auth.Credential.Type != "" && auth.Credential.Type != "agent_token") {
		g.refuse(ws, "unauthorized", "unknown, rotated or disabled token")
		return
	}
	if auth.AgentID != "" && auth.AgentID != a.ID {
		g.refuse(ws, "unauthorized", "agentId does not match the token")
		return
	}
	if len(auth.SessionKey) > protocol.MaxSessionLen {
		g.refuse(ws, "invalid_session", "sessionKey too long")
		return
	}
	cctx, ccancel := context.WithCancel(context.Background())
	c := &Conn{
		ID: fmt.Sprintf("%s/%d", g.db.NodeID(), g.nextID.Add(1)), Agent: a, Session: auth.SessionKey, Auth: auth,
		g: g, ws: ws, ctx: cctx, cancel: ccancel, inflight: map[string]time.Time{}, kick: make(chan struct{}, 1), freed: make(chan struct{}, 1),
		more: true, takenSig: make(chan struct{}, 1),
		prefetch: g.opts.Prefetch,
	}
	if auth.Prefetch > 0 && auth.Prefetch <= 1000 {
		c.prefetch = auth.Prefetch
	}
	c.side = make(chan struct{}, c.prefetch)
	c.Dialect = factory()
	c.lastSeen.Store(time.Now().UnixNano())
	g.attach(c)
	defer g.detach(c)
	if err := g.bus.Connected(ctx, a.ID, c.Session, c.ID); err != nil {
		g.log.Warn("presence connect failed", "err", err)
	}
	if err := c.Event("auth.ok", c.Dialect.Hello(c)); err != nil {
		c.Close(websocket.StatusInternalError, "write failed")
		return
	}
	g.log.Debug("agent connected", "agentId", a.ID, "session", c.Session, "protocol", auth.BridgeProtocol, "conn", c.ID)
	go g.pump(c)
	g.readLoop(c)
	c.sideWG.Wait()
}

func (g *Gateway) refuse(ws *websocket.Conn, code, reason string) {
	b, _ := json.Marshal(map[string]any{"event": "error", "data": map[string]any{"code": code, "reason": reason}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = ws.Write(ctx, websocket.MessageText, b)
	cancel()
	ws.Close(CloseUnauthorized, code)
}

// attach registers c, closing the connection it replaces (here, and on
// other nodes through a store notification).
func (g *Gateway) attach(c *Conn) {
	k := connKey{c.Agent.ID, c.Session}
	g.mu.Lock()
	old := g.conns[k]
	g.conns[k] = c
	g.mu.Unlock()
	if old != nil {
		old.Close(CloseReplaced, "duplicate_connection_replaced")
	}
	_ = g.db.Write(context.Background(), func(tx *store.Tx) error {
		tx.Notify(replaceChannel, c.Agent.ID+"\x1e"+c.Session+"\x1e"+c.ID)
		return nil
	})
}

func (g *Gateway) onRemoteReplace(payload string) {
	parts := strings.Split(payload, "\x1e")
	if len(parts) != 3 {
		return
	}
	k := connKey{parts[0], parts[1]}
	g.mu.Lock()
	old := g.conns[k]
	if old != nil && old.ID == parts[2] {
		old = nil // our own announcement
	}
	if old != nil {
		delete(g.conns, k)
	}
	g.mu.Unlock()
	if old != nil {
		old.Close(CloseReplaced, "duplicate_connection_replaced")
	}
}

func (g *Gateway) detach(c *Conn) {
	c.Close(websocket.StatusNormalClosure, "")
	k := connKey{c.Agent.ID, c.Session}
	g.mu.Lock()
	if g.conns[k] == c {
		delete(g.conns, k)
	}
	g.mu.Unlock()
	if err := g.bus.Disconnected(context.Background(), c.Agent.ID, c.Session, c.ID); err != nil {
		g.log.Debug("presence disconnect failed", "err", err)
	}
	g.log.Debug("agent disconnected", "agentId", c.Agent.ID, "conn", c.ID)
}

func (g *Gateway) readLoop(c *Conn) {
	for {
		_, data, err := c.ws.Read(c.ctx)
		if err != nil {
			return
		}
		c.lastSeen.Store(time.Now().UnixNano())
		g.bus.Heartbeat(c.Agent.ID, c.Session, bus.KindSocket, "")
		c.Dialect.Handle(c.ctx, c, data)
	}
}

// watchdog closes connections that stopped talking: one loop for all of
// them, every heartbeat interval, so an idle connection costs no goroutine
// or timer of its own. A silent connection is closed between three and four
// intervals after its last frame.
func (g *Gateway) watchdog() {
	t := time.NewTicker(g.opts.HeartbeatInterval)
	defer t.Stop()
	var stale []*Conn
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-3 * g.opts.HeartbeatInterval).UnixNano()
		stale = stale[:0]
		g.mu.Lock()
		for _, c := range g.conns {
			if c.lastSeen.Load() < cutoff {
				stale = append(stale, c)
			}
		}
		g.mu.Unlock()
		for _, c := range stale {
			c.Close(CloseStale, "stale_connection")
		}
		clear(stale)
	}
}

// pump pushes deliveries as they commit, keeping at most prefetch
// unacknowledged on the connection. While nothing older waits for the
// connection, the bus hands new deliveries over in the transaction that
// accepts them (the connection is a bus.Taker); the pump claims when
// deliveries may be waiting: at the start, after a wake-up or kick (a
// delivery was queued, perhaps while there was no room), after a lease ran
// out, and after a claim that filled its limit. A freed prefetch slot alone
// is no reason to claim.
func (g *Gateway) pump(c *Conn) {
	wake, stop := g.bus.Subscribe(c.Agent.ID)
	defer stop()
	c.imu.Lock()
	c.wake = wake
	c.imu.Unlock()
	defer g.bus.AddTaker(c.Agent.ID, c.Session, c)()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		c.imu.Lock()
		more, refusals := c.more, c.refusals
		c.imu.Unlock()
		if room := c.room(); room > 0 && more {
			limit := min(room, 100)
			ds, err := g.bus.Claim(c.ctx, c.Agent.ID, bus.ClaimOptions{Session: c.Session, Limit: limit, Lease: g.opts.Lease})
			if err != nil {
				if c.ctx.Err() != nil {
					return
				}
				g.log.Warn("claim failed", "agentId", c.Agent.ID, "err", err)
				ds = nil
			}
			// After a failed claim, try again on the next signal. A
			// delivery refused meanwhile was queued after the claim looked.
			c.imu.Lock()
			more = err != nil || len(ds) == limit || c.refusals != refusals
			c.more = more
			c.imu.Unlock()
			for _, d := range ds {
				if !c.push(d, false) {
					return
				}
			}
			if err == nil && more {
				continue // there may be more
			}
		}
		c.imu.Lock()
		taken := c.taken
		c.taken = nil
		c.imu.Unlock()
		for _, d := range taken {
			if !c.push(d, true) {
				return
			}
		}
		if len(taken) > 0 {
			continue
		}
		// Sleep until new deliveries commit, a slot frees up, or a lease we
		// hold runs out (its delivery will be requeued by the sweeper).
		retry.Reset(c.nextExpiry())
		select {
		case <-c.ctx.Done():
			return
		case <-c.takenSig:
		case <-wake:
			c.setMore()
		case <-c.kick:
			c.setMore()
		case <-c.freed:
		case <-retry.C:
			c.setMore()
		}
	}
}

func (c *Conn) setMore() {
	c.imu.Lock()
	c.more = true
	c.imu.Unlock()
}

// push writes one delivery (claimed, or reserved and taken) to the socket;
// false means the connection failed and is closed.
func (c *Conn) push(d bus.Delivery, reserved bool) bool {
	frame, ok := c.Dialect.Push(c, d)
	c.imu.Lock()
	if ok {
		c.inflight[d.DeliveryID] = d.LeaseUntil
	} else if reserved {
		delete(c.inflight, d.DeliveryID) // not for this client: it stays leased until its lease ends
	}
	c.imu.Unlock()
	if !ok {
		return true
	}
	if err := c.Send(frame); err != nil {
		c.Close(websocket.StatusInternalError, "write failed")
		return false
	}
	if p, ok := c.Dialect.(Pusher); ok {
		p.Pushed(c, d)
	}
	return true
}

// Lease implements bus.Taker: the gateway's lease.
func (c *Conn) Lease() time.Duration { return c.g.opts.Lease }

// Reserve implements bus.Taker: it takes a prefetch slot for a delivery
// being accepted when the connection is open, has room, and nothing older
// may be waiting for it (no claim pending, no wake-up unread). A refusal
// marks that a delivery is being queued, so the pump claims it before the
// connection takes any newer one.
func (c *Conn) Reserve(deliveryID, session string, leaseUntil time.Time) bool {
	c.imu.Lock()
	defer c.imu.Unlock()
	if c.closed.Load() || c.ctx.Err() != nil {
		return false
	}
	if c.more || len(c.wake) > 0 || c.roomLocked() <= 0 {
		c.more = true
		c.refusals++
		return false
	}
	c.inflight[deliveryID] = leaseUntil
	return true
}

// Take implements bus.Taker: the pump pushes the delivery.
func (c *Conn) Take(d bus.Delivery) {
	c.imu.Lock()
	c.taken = append(c.taken, d)
	c.imu.Unlock()
	select {
	case c.takenSig <- struct{}{}:
	default:
	}
}

func (c *Conn) room() int {
	c.imu.Lock()
	defer c.imu.Unlock()
	return c.roomLocked()
}

func (c *Conn) roomLocked() int {
	now := time.Now()
	for id, until := range c.inflight {
		if until.Before(now) {
			delete(c.inflight, id)
		}
	}
	return c.prefetch - len(c.inflight)
}

func (c *Conn) nextExpiry() time.Duration {
	c.imu.Lock()
	defer c.imu.Unlock()
	next := time.Minute
	now := time.Now()
	for _, until := range c.inflight {
		if d := until.Sub(now) + 10*time.Millisecond; d < next {
			next = d
		}
	}
	if next <= 0 {
		next = 10 * time.Millisecond
	}
	return next
}

// Connected reports whether agentID has a connection on this node (any
// session when session is "").
func (g *Gateway) Connected(agentID, session string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if session != "" {
		return g.conns[connKey{agentID, session}] != nil || g.conns[connKey{agentID, ""}] != nil
	}
	for k := range g.conns {
		if k.agent == agentID {
			return true
		}
	}
	return false
}

// Count is the number of connections on this node.
func (g *Gateway) Count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// Shutdown closes every connection with 1001 going away and waits for them.
func (g *Gateway) Shutdown() {
	g.mu.Lock()
	g.closing = true
	conns := make([]*Conn, 0, len(g.conns))
	for _, c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	g.stopped.Do(func() { close(g.stop) })
	for _, c := range conns {
		c.Close(websocket.StatusGoingAway, "server shutting down")
	}
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// ErrorData is the data of an error frame.
type ErrorData struct {
	Ref         string            `json:"ref,omitempty"`
	Code        string            `json:"code"`
	Class       protocol.Class    `json:"class"`
	Message     string            `json:"message"`
	Recoverable bool              `json:"recoverable"`
	FieldErrors map[string]string `json:"fieldErrors,omitempty"`
	NextAction  string            `json:"nextAction,omitempty"`
}

// ErrorFrame renders err for the client (protocol errors keep their code).
func ErrorFrame(ref string, err error) ErrorData {
	pe := protocol.AsError(err)
	return ErrorData{Ref: ref, Code: pe.Code, Class: pe.Class, Message: pe.Message, Recoverable: pe.Class.Recoverable(), FieldErrors: pe.FieldErrors, NextAction: pe.NextAction}
}
