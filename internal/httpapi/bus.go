package httpapi

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// InboxResponse is the answer to GET /v1/inbox.
type InboxResponse struct {
	Deliveries []bus.Delivery `json:"deliveries"`
}

// AckRequest settles a delivery; attempt is the attempt number received
// (omit it to settle the current, unexpired lease).
type AckRequest struct {
	Attempt int `json:"attempt,omitempty"`
}

// NackRequest gives a delivery back for redelivery after delay seconds.
type NackRequest struct {
	Attempt int    `json:"attempt,omitempty"`
	Delay   int    `json:"delay,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ExtendRequest lengthens a lease.
type ExtendRequest struct {
	Seconds int `json:"seconds"`
	Attempt int `json:"attempt,omitempty"`
}

// HeartbeatRequest reports liveness for polling agents.
type HeartbeatRequest struct {
	Status  string `json:"status,omitempty"`
	Session string `json:"session,omitempty"`
}

// HeartbeatResponse echoes the recorded liveness.
type HeartbeatResponse struct {
	AgentID  string    `json:"agentId"`
	Session  string    `json:"session,omitempty"`
	LastSeen time.Time `json:"lastSeen"`
}

// DeadLetterList is the answer to GET /v1/dead-letters.
type DeadLetterList struct {
	DeadLetters []bus.DeadLetter `json:"deadLetters"`
}

// TraceResponse is the message log of one trace.
type TraceResponse struct {
	TraceID string       `json:"traceId"`
	Rows    []bus.LogRow `json:"rows"`
}

// PresenceResponse is the liveness of one agent by session.
type PresenceResponse = bus.AgentPresence

// BusStatus is the last threshold evaluation.
type BusStatus = bus.Health

func (s *Server) registerBus() {
	s.router.Handle(Op{Method: "POST", Path: "/v1/messages", Summary: "Send an envelope (from.agent must be the caller); 202 with the deliveries created, 200 for a repeated (from, id)", Tag: "bus",
		Request: protocol.Envelope{}, Response: bus.Result{}, Status: http.StatusAccepted, MaxBody: protocol.MaxEnvelopeBytes + 1024}, s.sendMessage)
	s.router.Handle(Op{Method: "GET", Path: "/v1/inbox", Summary: "Claim deliveries (long-poll with wait); each carries a lease, an attempt number and the envelope", Tag: "bus",
		Response: InboxResponse{}, Query: []Param{
			{Name: "limit", Type: "integer", Description: "1–100 (default 10)"},
			{Name: "wait", Type: "integer", Description: "seconds to wait for a delivery (0–60)"},
			{Name: "session", Description: "only deliveries for this session (or none)"},
			{Name: "overdue", Type: "boolean", Description: "only deliveries past their priority's target"},
			{Name: "lease", Type: "integer", Description: "lease seconds (default 60)"},
			{Name: "agent", Description: "admin only: the agent whose inbox to claim"},
		}}, s.inbox)
	s.router.Handle(Op{Method: "POST", Path: "/v1/deliveries/{id}/ack", Summary: "Acknowledge (processed); repeats are idempotent", Tag: "bus", Request: AckRequest{}, Response: bus.Settle{}}, s.ack)
	s.router.Handle(Op{Method: "POST", Path: "/v1/deliveries/{id}/nack", Summary: "Give a delivery back for redelivery after delay seconds (dead-lettered after max attempts)", Tag: "bus", Request: NackRequest{}, Response: bus.Settle{}}, s.nack)
	s.router.Handle(Op{Method: "POST", Path: "/v1/deliveries/{id}/extend", Summary: "Extend the lease of a delivery", Tag: "bus", Request: ExtendRequest{}, Response: bus.Settle{}}, s.extend)
	s.router.Handle(Op{Method: "POST", Path: "/v1/heartbeat", Summary: "Liveness for polling agents (status and session optional)", Tag: "bus", Request: HeartbeatRequest{}, Response: HeartbeatResponse{}}, s.heartbeat)
	s.router.Handle(Op{Method: "GET", Path: "/v1/agents/{id}/presence", Summary: "Liveness of an agent, per session", Tag: "bus", Response: PresenceResponse{}}, s.presence)
	s.router.Handle(Op{Method: "GET", Path: "/v1/dead-letters", Summary: "Dead deliveries with reason and history (yours; the admin sees all)", Tag: "bus",
		Response: DeadLetterList{}, Query: []Param{{Name: "agent"}, {Name: "reason", Description: "expired or max_attempts"}, {Name: "limit", Type: "integer"}}}, s.deadLetters)
	s.router.Handle(Op{Method: "POST", Path: "/v1/dead-letters/{id}/replay", Summary: "Put a dead delivery back in the inbox as a new delivery", Tag: "bus", Response: bus.Settle{}}, s.replay)
	s.router.Handle(Op{Method: "GET", Path: "/v1/traces/{traceId}", Summary: "The message log rows of a trace (or of a message id), in order", Tag: "bus", Response: TraceResponse{}}, s.trace)
	s.router.Handle(Op{Method: "GET", Path: "/v1/bus/status", Summary: "Threshold status: p95 latency, deepest queue, error rate, overdue deliveries", Tag: "bus", Response: BusStatus{}}, s.busStatus)
}

var traceparent = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)

// traceHint takes the trace id from a W3C traceparent header, so a hub
// behind traced services joins their traces.
func traceHint(r *http.Request) string {
	if m := traceparent.FindStringSubmatch(strings.TrimSpace(r.Header.Get("traceparent"))); m != nil && m[1] != strings.Repeat("0", 32) {
		return m[1]
	}
	return ""
}

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) error {
	body, err := ReadJSONBody(r)
	if err != nil {
		return err
	}
	env, err := protocol.DecodeEnvelope(body)
	if err != nil {
		return err
	}
	p := PrincipalFrom(r)
	if env.From.Agent == "" && !p.Admin {
		env.From.Agent = p.AgentID()
	}
	if err := p.ActAs(env.From.Agent, "from.agent"); err != nil {
		return err
	}
	if err := s.Bus.Prepare(env, traceHint(r)); err != nil {
		return err
	}
	res, err := s.Bus.Send(r.Context(), env)
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if res.Duplicate {
		status = http.StatusOK
	}
	return WriteJSON(w, status, res)
}

// inboxAgent resolves whose inbox a request concerns: the caller's, or
// (admin only) the agent named by ?agent=.
func inboxAgent(r *http.Request) (string, error) {
	p := PrincipalFrom(r)
	return p.Self(r.URL.Query().Get("agent"), "agent")
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request) error {
	agentID, err := inboxAgent(r)
	if err != nil {
		return err
	}
	if PrincipalFrom(r).Admin {
		// A mistyped ?agent= would otherwise claim from an inbox nobody
		// owns and answer with nothing, forever.
		if _, err := s.Agents.Get(r.Context(), agentID); err != nil {
			return err
		}
	}
	limit, err := QueryInt(r, "limit", 10, 1, 100)
	if err != nil {
		return err
	}
	wait, err := QueryInt(r, "wait", 0, 0, 60)
	if err != nil {
		return err
	}
	lease, err := QueryInt(r, "lease", 0, 0, int(bus.MaxExtend/time.Second))
	if err != nil {
		return err
	}
	overdue, err := QueryBool(r, "overdue")
	if err != nil {
		return err
	}
	session := r.URL.Query().Get("session")
	if len(session) > protocol.MaxSessionLen {
		return protocol.Invalid("session", "too long")
	}
	if !PrincipalFrom(r).Admin {
		s.Bus.Heartbeat(agentID, session, bus.KindPoll, "")
	}
	ds, err := s.Bus.Receive(r.Context(), agentID, bus.ClaimOptions{Session: session, Limit: limit, Lease: time.Duration(lease) * time.Second, Overdue: overdue},
		time.Duration(wait)*time.Second)
	if err != nil {
		if r.Context().Err() != nil {
			return nil // client went away during the long poll
		}
		return err
	}
	if ds == nil {
		ds = []bus.Delivery{}
	}
	return WriteJSON(w, http.StatusOK, InboxResponse{Deliveries: ds})
}

func (s *Server) settleAgent(r *http.Request) (string, bool) {
	p := PrincipalFrom(r)
	return p.AgentID(), p.Admin
}

func (s *Server) ack(w http.ResponseWriter, r *http.Request) error {
	var req AckRequest
	if err := decodeOptional(r, &req); err != nil {
		return err
	}
	agentID, admin := s.settleAgent(r)
	res, err := s.Bus.Ack(r.Context(), agentID, r.PathValue("id"), bus.SettleOptions{Attempt: req.Attempt, Admin: admin})
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, res)
}

func (s *Server) nack(w http.ResponseWriter, r *http.Request) error {
	var req NackRequest
	if err := decodeOptional(r, &req); err != nil {
		return err
	}
	if req.Delay < 0 || req.Delay > 86400 {
		return protocol.Invalid("delay", "must be between 0 and 86400 seconds")
	}
	agentID, admin := s.settleAgent(r)
	res, err := s.Bus.Nack(r.Context(), agentID, r.PathValue("id"), bus.NackOptions{
		SettleOptions: bus.SettleOptions{Attempt: req.Attempt, Admin: admin}, Delay: time.Duration(req.Delay) * time.Second, Error: req.Error})
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, res)
}

func (s *Server) extend(w http.ResponseWriter, r *http.Request) error {
	var req ExtendRequest
	if err := Decode(r, &req); err != nil {
		return err
	}
	agentID, admin := s.settleAgent(r)
	res, err := s.Bus.Extend(r.Context(), agentID, r.PathValue("id"), time.Duration(req.Seconds)*time.Second, bus.SettleOptions{Attempt: req.Attempt, Admin: admin})
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, res)
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	var req HeartbeatRequest
	if err := decodeOptional(r, &req); err != nil {
		return err
	}
	p := PrincipalFrom(r)
	if p.Admin {
		return protocol.Invalid("token", "heartbeats come from agents; use an agent token")
	}
	if len(req.Session) > protocol.MaxSessionLen || len(req.Status) > 200 {
		return protocol.Invalid("session", "session at most 200 characters, status at most 200")
	}
	s.Bus.Heartbeat(p.AgentID(), req.Session, bus.KindPoll, req.Status)
	return WriteJSON(w, http.StatusOK, HeartbeatResponse{AgentID: p.AgentID(), Session: req.Session, LastSeen: time.Now().UTC()})
}

func (s *Server) presence(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.Agents.Get(r.Context(), id); err != nil {
		return err
	}
	m, err := s.Bus.Presence(r.Context(), []string{id})
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, m[id])
}

func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) error {
	p := PrincipalFrom(r)
	agentID := r.URL.Query().Get("agent")
	if !p.Admin {
		if agentID != "" && agentID != p.AgentID() {
			return p.ActAs(agentID, "agent")
		}
		agentID = p.AgentID()
	}
	limit, err := QueryInt(r, "limit", 100, 1, 500)
	if err != nil {
		return err
	}
	reason := r.URL.Query().Get("reason")
	switch reason {
	case "", "expired", "max_attempts":
	default:
		return protocol.Invalid("reason", "must be expired or max_attempts")
	}
	dl, err := s.Bus.ListDeadLetters(r.Context(), bus.DeadLetterFilter{AgentID: agentID, Reason: reason, Limit: limit})
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, DeadLetterList{DeadLetters: dl})
}

func (s *Server) replay(w http.ResponseWriter, r *http.Request) error {
	p := PrincipalFrom(r)
	res, err := s.Bus.Replay(r.Context(), p.AgentID(), p.Admin, r.PathValue("id"))
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, res)
}

func (s *Server) trace(w http.ResponseWriter, r *http.Request) error {
	p := PrincipalFrom(r)
	id := r.PathValue("traceId")
	rows, err := s.Bus.Trace(r.Context(), id, p.AgentID(), p.Admin)
	if protocol.CodeOf(err) == "trace_not_found" {
		// Also accept a message id: look up its trace.
		if t, terr := s.Bus.TraceOfMessage(r.Context(), id, p.AgentID(), p.Admin); terr == nil {
			id = t
			rows, err = s.Bus.Trace(r.Context(), id, p.AgentID(), p.Admin)
		}
	}
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, TraceResponse{TraceID: id, Rows: rows})
}

func (s *Server) busStatus(w http.ResponseWriter, r *http.Request) error {
	return WriteJSON(w, http.StatusOK, s.Bus.Metrics().Health())
}

// busPresence adapts the bus to the agents endpoints' liveness lookups.
type busPresence struct{ b *bus.Service }

func (p busPresence) Liveness(ctx context.Context, ids []string) (map[string]Liveness, error) {
	m, err := p.b.Presence(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Liveness, len(m))
	for id, ap := range m {
		out[id] = Liveness{Status: ap.Liveness, LastSeen: ap.LastSeen}
	}
	return out, nil
}
