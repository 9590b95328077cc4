// Package runner connects to a hub as an agent over the Claworld wire
// dialect (`claworld.delivery_reply.v1`, specs/claworld.md) and answers the
// agent's deliveries with a [Driver]: a shell command ([Exec]), any
// OpenAI-compatible chat-completions server ([OpenAI]) or a script of
// canned replies ([Script]). `switchboard agent run` is a thin CLI over
// [Run]; demos and tests embed it directly:
//
//	drv, _ := runner.NewScript(runner.ScriptSpec{Kickoff: "Hi!", Replies: []string{"Bye [[request_conversation_end]]"}})
//	err := runner.Run(ctx, runner.Config{Server: "http://127.0.0.1:7600", Token: tok, Driver: drv})
//
// # Guarantees
//
//   - A delivery is answered only after the driver produced its answer, and
//     the answer is kept until the hub confirms it: when the socket breaks
//     between the two, the runner posts it to the HTTP fallback, and keeps
//     retrying (socket or HTTP) with backoff while the hub is unreachable.
//   - An answer the hub refuses because the delivery was already answered
//     (delivery_not_replyable, usual after a reconnect) counts as done.
//   - A redelivered delivery that is still being worked on is ignored; one
//     that was already answered gets the same answer again, so the driver
//     runs once per delivery (a failed driver call is retried by the hub's
//     redelivery, which runs the driver again).
//   - Deliveries of one session are answered one at a time, in the order
//     they arrived; different sessions run concurrently up to
//     Config.Concurrency.
//   - A driver error leaves the delivery unanswered (no kept_silent): the hub
//     redelivers it when its lease expires.
//   - Connections are retried with exponential backoff and jitter, except
//     after an authentication refusal (final) or when another connection
//     for the agent replaced this one (close 4001: final unless
//     Config.Takeover, so two runners do not fight over one agent).
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/contextdoc"
	"github.com/switchboard-hub/switchboard/internal/version"
)

// Errors that end Run. Both are final: retrying cannot fix them.
var (
	// ErrUnauthorized: the hub refused the token (or the auth frame).
	ErrUnauthorized = errors.New("the hub refused to authenticate the agent")
	// ErrReplaced: another connection for the same agent took over
	// (close 4001) and Config.Takeover is off.
	ErrReplaced = errors.New("another connection for this agent replaced this runner (close 4001); stop the other runner or pass --takeover")
)

// Close codes of the hub's gateway.
const (
	closeReplaced     websocket.StatusCode = 4001
	closeStale        websocket.StatusCode = 4002
	closeUnauthorized websocket.StatusCode = 4003
)

// DefaultSource is the payload.source of every frame the runner sends.
const DefaultSource = "switchboard-agent"

// Config configures [Run]. Server, Token and Driver are required; the rest
// have defaults that suit a real hub.
type Config struct {
	// Server is the hub's base URL (http:// or https://); the socket is
	// <Server>/ws with the scheme changed to ws:// or wss://.
	Server string
	// Token is the agent's token.
	Token string
	// AgentID, when set, is sent in the auth frame; the hub refuses the
	// connection if it does not match the token.
	AgentID string
	// Driver answers deliveries.
	Driver Driver

	// Concurrency bounds driver calls running at once (default 4).
	Concurrency int
	// Takeover makes the runner reconnect after another connection
	// replaced it (close 4001) instead of stopping with ErrReplaced.
	Takeover bool

	// Logger receives readable lines about what arrives and what is
	// answered (default slog.Default()).
	Logger *slog.Logger
	// OnEvent, when set, is called synchronously for every event the
	// runner logs; keep it fast. Tests and demos use it to observe.
	OnEvent func(Event)

	// Client and ClientVersion identify the runner in the auth frame
	// (defaults "switchboard-agent" and the build version).
	Client        string
	ClientVersion string
	// Source is payload.source in answers (default DefaultSource).
	Source string

	// Heartbeat is the heartbeat period (default 15s; the hub's
	// heartbeatIntervalSeconds wins when smaller).
	Heartbeat time.Duration
	// MinBackoff and MaxBackoff bound reconnect and retry delays
	// (defaults 250ms and 30s); each delay gets up to 50% jitter.
	MinBackoff, MaxBackoff time.Duration
	// AnswerTimeout is how long to wait for the hub to confirm an answer
	// on the socket before posting it to the HTTP fallback (default 15s).
	AnswerTimeout time.Duration
	// ShutdownGrace is how long answers already produced may still be
	// delivered after the context ends (default 10s).
	ShutdownGrace time.Duration
	// HTTPClient is used for the HTTP fallbacks (default: a client with a
	// 30s timeout).
	HTTPClient *http.Client
}

// EventKind names what happened.
type EventKind string

// Event kinds reported to Config.OnEvent.
const (
	EventConnected       EventKind = "connected"        // auth.ok received
	EventDisconnected    EventKind = "disconnected"     // the socket ended (Err says why)
	EventDelivery        EventKind = "delivery"         // a delivery arrived and was taken in hand
	EventDuplicate       EventKind = "duplicate"        // a delivery already in hand arrived again and was ignored
	EventAnswered        EventKind = "answered"         // the hub confirmed a reply or kept_silent
	EventAlreadyAnswered EventKind = "already_answered" // the hub said the delivery was already answered
	EventDriverFailed    EventKind = "driver_failed"    // no answer; the hub will redeliver
	EventRefused         EventKind = "refused"          // the hub refused the answer
	EventNotification    EventKind = "notification"     // any other server event
)

// Event is one thing the runner did or saw.
type Event struct {
	Kind       EventKind
	DeliveryID string
	SessionKey string
	// Text is the reply text (answered) or the notification title.
	Text string
	// Reason is the keep-silent reason when the answer was kept_silent.
	Reason string
	// Via is "socket" or "http" for answers.
	Via string
	// Name is the server event name of a notification.
	Name string
	// Data is the raw data of a notification.
	Data json.RawMessage
	// Err explains failures and disconnections.
	Err error
	// Delivery is the delivery that arrived (EventDelivery only): its
	// type, sender and context document, for observers that narrate.
	Delivery *Delivery
}

// Run connects to the hub and answers deliveries until ctx ends (then it
// returns nil after a graceful stop) or a final error occurs
// ([ErrUnauthorized], [ErrReplaced], or a configuration error).
func Run(ctx context.Context, cfg Config) error {
	r, err := newRunner(cfg)
	if err != nil {
		return err
	}
	return r.run(ctx)
}

// runner is the state of one Run.
type runner struct {
	cfg  Config
	log  *slog.Logger
	hub  *client.Client
	sem  chan struct{}
	done *answerCache

	driverCtx context.Context // cancelled when the runner stops
	answerCtx context.Context // lives ShutdownGrace longer

	mu       sync.Mutex
	conn     *conn
	connUp   chan struct{} // closed when a connection becomes current
	agentID  string
	stopping bool
	inflight map[string]bool
	sessions map[string]*sessionQueue
	workers  sync.WaitGroup
}

func newRunner(cfg Config) (*runner, error) {
	var errs []error
	if !strings.HasPrefix(cfg.Server, "http://") && !strings.HasPrefix(cfg.Server, "https://") {
		errs = append(errs, fmt.Errorf("server %q must be an http:// or https:// URL", cfg.Server))
	}
	if cfg.Token == "" {
		errs = append(errs, errors.New("an agent token is required"))
	}
	if cfg.Driver == nil {
		errs = append(errs, errors.New("a driver is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("runner config: %w", err)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	def(&cfg.Heartbeat, 15*time.Second)
	def(&cfg.MinBackoff, 250*time.Millisecond)
	def(&cfg.MaxBackoff, 30*time.Second)
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	def(&cfg.AnswerTimeout, 15*time.Second)
	def(&cfg.ShutdownGrace, 10*time.Second)
	if cfg.Client == "" {
		cfg.Client = "switchboard-agent"
	}
	if cfg.ClientVersion == "" {
		cfg.ClientVersion = version.Get().Version
	}
	if cfg.Source == "" {
		cfg.Source = DefaultSource
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	hub := client.New(cfg.Server, cfg.Token)
	hub.UserAgent = cfg.Client + "/" + cfg.ClientVersion
	hub.HTTP = cfg.HTTPClient
	if hub.HTTP == nil {
		hub.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	return &runner{
		cfg: cfg, log: cfg.Logger, hub: hub, sem: make(chan struct{}, cfg.Concurrency), done: newAnswerCache(4096),
		connUp: make(chan struct{}), inflight: map[string]bool{}, sessions: map[string]*sessionQueue{},
	}, nil
}

func (r *runner) emit(e Event) {
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(e)
	}
}

func (r *runner) run(ctx context.Context) error {
	driverCtx, cancelDrivers := context.WithCancel(ctx)
	answerCtx, cancelAnswers := context.WithCancel(context.WithoutCancel(ctx))
	connCtx, cancelConn := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDrivers()
	defer cancelAnswers()
	defer cancelConn()
	r.driverCtx, r.answerCtx = driverCtx, answerCtx

	r.log.Info("agent runner starting", "hub", r.cfg.Server, "concurrency", r.cfg.Concurrency)
	loopDone := make(chan error, 1)
	go func() { loopDone <- r.connectLoop(connCtx) }()
	var err error
	loopEnded := false
	select {
	case <-ctx.Done():
	case err = <-loopDone:
		loopEnded = true
	}

	// Stop taking deliveries, cancel driver calls, give answers already
	// produced a grace period, then close the socket.
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	cancelDrivers()
	grace := time.AfterFunc(r.cfg.ShutdownGrace, cancelAnswers)
	r.workers.Wait()
	grace.Stop()
	cancelConn()
	if !loopEnded {
		<-loopDone
	}
	if err != nil {
		r.log.Error("agent runner stopped", "err", err)
		return err
	}
	r.log.Info("agent runner stopped")
	return nil
}

// connectLoop keeps a connection up until ctx ends or a final error.
func (r *runner) connectLoop(ctx context.Context) error {
	backoff := r.cfg.MinBackoff
	for {
		start := time.Now()
		authed, err := r.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		r.emit(Event{Kind: EventDisconnected, Err: err})
		switch {
		case errors.Is(err, ErrUnauthorized):
			return err
		case errors.Is(err, ErrReplaced) && !r.cfg.Takeover:
			return err
		case errors.Is(err, ErrReplaced):
			r.log.Warn("another connection replaced this runner; taking over again (--takeover)")
		}
		// A connection that stayed up a while proves the hub is healthy:
		// start the backoff over.
		if authed && time.Since(start) >= 30*time.Second {
			backoff = r.cfg.MinBackoff
		}
		wait := jitter(backoff)
		if authed {
			r.log.Warn("disconnected from the hub; reconnecting", "err", err, "in", wait.Round(time.Millisecond))
		} else {
			r.log.Warn("could not connect to the hub; retrying", "err", err, "in", wait.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		backoff = min(backoff*2, r.cfg.MaxBackoff)
	}
}

// jitter returns d plus up to 50% of d.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d + time.Duration(rand.Int64N(int64(d)/2+1))
}

// session runs one connection: dial, authenticate, then read frames until
// the socket ends. authed reports whether auth.ok was received.
func (r *runner) session(ctx context.Context) (authed bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	ws, _, err := websocket.Dial(dctx, client.WebSocketURL(r.cfg.Server), &websocket.DialOptions{
		HTTPHeader: http.Header{"User-Agent": {r.cfg.Client + "/" + r.cfg.ClientVersion}},
	})
	cancel()
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	ws.SetReadLimit(16 << 20)
	defer ws.CloseNow()

	c := &conn{ws: ws, waiters: map[string]chan error{}}
	auth := authFrame{Type: "auth", AgentID: r.cfg.AgentID, Credential: credential{Type: "agent_token", Token: r.cfg.Token},
		Client: r.cfg.Client, ClientVersion: r.cfg.ClientVersion, BridgeProtocol: BridgeProtocol}
	if err := c.write(ctx, auth); err != nil {
		return false, fmt.Errorf("send auth: %w", err)
	}
	actx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, data, err := ws.Read(actx)
	cancel()
	if err != nil {
		if websocket.CloseStatus(err) == closeUnauthorized {
			return false, fmt.Errorf("%w (close 4003)", ErrUnauthorized)
		}
		return false, fmt.Errorf("read auth answer: %w", err)
	}
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		return false, fmt.Errorf("auth answer: %w", err)
	}
	switch f.Event {
	case "auth.ok":
	case "error":
		var se serverError
		_ = json.Unmarshal(f.Data, &se)
		return false, fmt.Errorf("%w: %s", ErrUnauthorized, describe(se))
	default:
		return false, fmt.Errorf("auth answer: expected auth.ok, got event %q", f.Event)
	}
	var hello helloData
	_ = json.Unmarshal(f.Data, &hello)
	every := r.cfg.Heartbeat
	if hb := time.Duration(hello.HeartbeatInterval) * time.Second; hb > 0 && hb < every {
		every = hb
	}

	r.setConn(c, hello.AgentID)
	defer r.dropConn(c)
	r.log.Info("connected to the hub", "hub", r.cfg.Server, "agentId", hello.AgentID, "heartbeat", every)
	r.emit(Event{Kind: EventConnected})

	// readCtx is not ctx: cancelling a Read's context aborts the socket,
	// and a stopping runner closes it politely instead.
	readCtx, stopRead := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRead()
	go func() {
		select {
		case <-ctx.Done():
			ws.Close(websocket.StatusNormalClosure, "runner stopping")
		case <-readCtx.Done():
		}
	}()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-readCtx.Done():
				return
			case <-t.C:
				if err := c.write(readCtx, clientFrame{Type: "heartbeat"}); err != nil {
					ws.CloseNow() // the read loop reports the failure
					return
				}
			}
		}
	}()

	for {
		_, data, err := ws.Read(readCtx)
		if err != nil {
			switch websocket.CloseStatus(err) {
			case closeReplaced:
				return true, ErrReplaced
			case closeUnauthorized:
				return true, fmt.Errorf("%w (close 4003)", ErrUnauthorized)
			case closeStale:
				return true, errors.New("the hub closed the connection as stale (4002)")
			}
			return true, err
		}
		r.onFrame(c, data)
	}
}

func describe(se serverError) string {
	msg := se.Message
	if msg == "" {
		msg = se.Reason
	}
	if msg == "" {
		return se.Code
	}
	return se.Code + ": " + msg
}

// onFrame handles one server frame.
func (r *runner) onFrame(c *conn, data []byte) {
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		r.log.Warn("ignoring a frame that is not JSON", "err", err)
		return
	}
	switch f.Event {
	case "delivery":
		d, err := parseDelivery(f.Data)
		if err != nil {
			r.log.Warn("ignoring a malformed delivery; the hub will redeliver it", "err", err)
			return
		}
		r.dispatch(c, d)
	case "delivery.accepted":
		var v struct {
			ID string `json:"acceptedDeliveryId"`
		}
		_ = json.Unmarshal(f.Data, &v)
		r.log.Debug("hub confirmed accepted", "deliveryId", v.ID)
	case "reply.accepted":
		var v struct {
			ID string `json:"repliedDeliveryId"`
		}
		_ = json.Unmarshal(f.Data, &v)
		c.resolve(v.ID, nil)
	case "kept_silent.accepted":
		var v struct {
			ID string `json:"keptSilentDeliveryId"`
		}
		_ = json.Unmarshal(f.Data, &v)
		c.resolve(v.ID, nil)
	case "error":
		var se serverError
		_ = json.Unmarshal(f.Data, &se)
		he := &HubError{Code: se.Code, Message: se.Message}
		if he.Message == "" {
			he.Message = se.Reason
		}
		if id := se.id(); id != "" && c.resolve(id, he) {
			return
		}
		r.log.Warn("hub error", "code", se.Code, "message", he.Message, "deliveryId", se.id())
	default:
		var n notification
		_ = json.Unmarshal(f.Data, &n)
		r.log.Info("notification", "event", f.Event, "type", n.NotificationType, "title", n.Title,
			"body", truncate(n.Body, 160), "session", n.TargetSessionKey)
		r.emit(Event{Kind: EventNotification, Name: f.Event, Text: n.Title, SessionKey: n.TargetSessionKey, Data: f.Data})
	}
}

func (r *runner) setConn(c *conn, agentID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conn = c
	if agentID != "" {
		r.agentID = agentID
	}
	close(r.connUp)
}

func (r *runner) dropConn(c *conn) {
	c.lost()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == c {
		r.conn = nil
		r.connUp = make(chan struct{})
	}
}

// current returns the live connection, or nil, and a channel closed when
// the next connection comes up.
func (r *runner) current() (*conn, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conn, r.connUp
}

// errConnLost: the socket ended before the hub confirmed a frame.
var errConnLost = errors.New("connection lost before the hub confirmed the answer")

// conn is one authenticated socket.
type conn struct {
	ws      *websocket.Conn
	mu      sync.Mutex
	waiters map[string]chan error // deliveryId → answer confirmation
	closed  bool
}

func (c *conn) write(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.ws.Write(wctx, websocket.MessageText, b)
}

// resolve hands the hub's verdict on an answer to its waiter, reporting
// whether one was waiting.
func (c *conn) resolve(id string, err error) bool {
	c.mu.Lock()
	ch := c.waiters[id]
	delete(c.waiters, id)
	c.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- err
	return true
}

// lost fails every waiting answer.
func (c *conn) lost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, ch := range c.waiters {
		ch <- errConnLost
		delete(c.waiters, id)
	}
}

// answer sends a reply or kept_silent frame and waits for the hub's
// confirmation or refusal.
func (c *conn) answer(ctx context.Context, d Delivery, a answer, source string, timeout time.Duration) error {
	ch := make(chan error, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errConnLost
	}
	c.waiters[d.DeliveryID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.waiters[d.DeliveryID] == ch {
			delete(c.waiters, d.DeliveryID)
		}
		c.mu.Unlock()
	}()
	if err := c.write(ctx, a.frame(d, source)); err != nil {
		return fmt.Errorf("send answer: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-ch:
		return err
	case <-t.C:
		return fmt.Errorf("the hub did not confirm the answer within %s", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// isNoReply is the exact keep-silent test the hub applies.
func isNoReply(s string) bool { return contextdoc.IsNoReply(s) }
