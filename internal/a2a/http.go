package a2a

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Paths under an agent's base URL (/a2a/agents/{agentId}).
const (
	// RESTPath is the HTTP+JSON binding's prefix.
	RESTPath = "/rest"
	// LegacyPath is the A2A 0.3 JSON-RPC endpoint.
	LegacyPath = "/v0.3"
)

// SchemeName names the bearer scheme on cards.
const SchemeName = "bearer"

// agentHandler is the SDK stack of one agent.
type agentHandler struct {
	jsonrpc http.Handler
	rest    http.Handler
	legacy  http.Handler
}

type callerKey struct{}

// authInterceptor hands the caller authenticated by the HTTP layer to the
// SDK, which scopes tasks and push configs by it. SubscribeToTask is the
// one method the SDK serves from the running execution without asking the
// task store whose task it is, so the interceptor checks that the caller
// owns the task first (another caller gets "task not found", as with
// GetTask).
type authInterceptor struct {
	a2asrv.PassthroughCallInterceptor
	tasks *TaskStore
}

func (ai authInterceptor) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	if !ok {
		return ctx, nil, a2a.ErrUnauthenticated
	}
	cc.User = a2asrv.NewAuthenticatedUser(c.ID, map[string]any{"name": c.Name})
	if sub, ok := req.Payload.(*a2a.SubscribeToTaskRequest); ok && sub != nil {
		if _, err := ai.tasks.Get(ctx, sub.ID); err != nil {
			return ctx, nil, err
		}
	}
	return ctx, nil, nil
}

func (s *Service) handlerFor(agentID string) *agentHandler {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if h, ok := s.handlers[agentID]; ok {
		return h
	}
	tasks := NewTaskStore(s.db, s.clock, agentID)
	rh := a2asrv.NewHandler(&executor{s: s, agentID: agentID, tasks: tasks},
		a2asrv.WithTaskStore(tasks),
		a2asrv.WithPushNotifications(NewPushStore(s.db, s.clock, agentID, s.cfg.AllowPrivatePush), s.push),
		a2asrv.WithCallInterceptors(authInterceptor{tasks: tasks}),
		a2asrv.WithCapabilityChecks(&a2a.AgentCapabilities{Streaming: true, PushNotifications: true}),
		a2asrv.WithLogger(s.log.With("subsystem", "a2a", "agent", agentID)),
	)
	keepAlive := a2asrv.WithTransportKeepAlive(15 * time.Second)
	h := &agentHandler{
		jsonrpc: a2asrv.NewJSONRPCHandler(rh, keepAlive),
		rest:    a2asrv.NewRESTHandler(rh, keepAlive),
		legacy:  a2av0.NewJSONRPCHandler(rh, keepAlive),
	}
	s.handlers[agentID] = h
	return h
}

// newPushSender builds the webhook sender of the hub's tasks. Unless the
// hub allows private targets, the SDK's sender checks the address of every
// connection when it dials (redirect hops included), so a host name that
// resolves to a loopback, private or link-local address is refused even
// though its URL passed CheckPushURL.
func newPushSender(c Config) push.Sender {
	return push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: c.PushTimeout, AllowPrivateNetworks: c.AllowPrivatePush})
}

// Card builds the Agent Card of an enabled agent. hub is the hub's base URL
// as the client reached it (used when no public URL is configured).
func (s *Service) Card(ctx context.Context, hub, agentID string) (*a2a.AgentCard, error) {
	st, err := s.GetSettings(ctx, agentID)
	if err != nil {
		return nil, err
	}
	ag, err := s.agents.Get(ctx, agentID)
	if err != nil || !st.Enabled || ag.Disabled {
		return nil, notEnabled(agentID)
	}
	base := s.BaseURL(hub, agentID)
	skills := make([]a2a.AgentSkill, 0, len(st.Skills))
	for _, sk := range st.Skills {
		tags := sk.Tags
		if tags == nil {
			tags = []string{}
		}
		skills = append(skills, a2a.AgentSkill{ID: sk.ID, Name: sk.Name, Description: sk.Description, Tags: tags, Examples: sk.Examples})
	}
	if len(skills) == 0 {
		skills = append(skills, a2a.AgentSkill{ID: "chat", Name: "Chat", Description: st.Description, Tags: []string{"chat"}})
	}
	provider := hub
	if s.cfg.PublicURL != "" {
		provider = s.cfg.PublicURL
	}
	modes := []string{"text/plain", "application/json"}
	return &a2a.AgentCard{
		Name:        ag.DisplayName,
		Description: st.Description,
		Version:     s.cfg.Version,
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: base, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
			{URL: base + RESTPath, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2a.Version},
			{URL: base + LegacyPath, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
		},
		Provider:           &a2a.AgentProvider{Org: "Switchboard", URL: provider},
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:  modes,
		DefaultOutputModes: modes,
		Skills:             skills,
		SecuritySchemes: a2a.NamedSecuritySchemes{SchemeName: a2a.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: "a caller token the agent issued (POST /v1/agents/{id}/a2a/callers)"}},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{SchemeName: a2a.SecuritySchemeScopes{}}},
	}, nil
}

// hubURL is the base URL the client used to reach the hub.
func hubURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// ServeCard serves GET /a2a/agents/{agentId}/.well-known/agent-card.json:
// the A2A 1.0 card. It is public.
func (s *Service) ServeCard(w http.ResponseWriter, r *http.Request) {
	card, err := s.Card(r.Context(), hubURL(r), r.PathValue("agentId"))
	if err != nil {
		writeError(w, err)
		return
	}
	a2asrv.NewStaticAgentCardHandler(card).ServeHTTP(w, r)
}

// ServeLegacyCard serves the card in the union form A2A 0.3 clients read
// (url, preferredTransport and 0.3 security schemes, next to the 1.0
// fields) under the 0.3 endpoint: .../v0.3/.well-known/agent-card.json.
func (s *Service) ServeLegacyCard(w http.ResponseWriter, r *http.Request) {
	card, err := s.Card(r.Context(), hubURL(r), r.PathValue("agentId"))
	if err != nil {
		writeError(w, err)
		return
	}
	a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)).ServeHTTP(w, r)
}

// ServeJSONRPC serves the A2A 1.0 JSON-RPC binding at the agent's base URL.
func (s *Service) ServeJSONRPC(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, func(h *agentHandler, w http.ResponseWriter, r *http.Request) { h.jsonrpc.ServeHTTP(w, r) })
}

// ServeLegacy serves the A2A 0.3 JSON-RPC binding for older clients.
func (s *Service) ServeLegacy(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, func(h *agentHandler, w http.ResponseWriter, r *http.Request) { h.legacy.ServeHTTP(w, r) })
}

// ServeREST serves the A2A 1.0 HTTP+JSON binding under the agent's
// base URL + /rest; the route must capture the rest of the path as {path}.
func (s *Service) ServeREST(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, func(h *agentHandler, w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + r.PathValue("path")
		r2.URL.RawPath = ""
		h.rest.ServeHTTP(w, r2)
	})
}

// serve authenticates the caller, applies its rate limit and hands the
// request to the agent's SDK stack.
func (s *Service) serve(w http.ResponseWriter, r *http.Request, next func(*agentHandler, http.ResponseWriter, *http.Request)) {
	agentID := r.PathValue("agentId")
	ctx := r.Context()
	st, err := s.GetSettings(ctx, agentID)
	if err != nil {
		writeError(w, err)
		return
	}
	if !st.Enabled {
		writeError(w, notEnabled(agentID))
		return
	}
	tok := bearer(r)
	if tok == "" {
		writeError(w, protocol.Unauthenticated("missing credentials: send Authorization: Bearer <caller token> (the agent issues caller tokens)"))
		return
	}
	c, err := s.authenticate(ctx, agentID, tok)
	if err != nil {
		writeError(w, err)
		return
	}
	if !s.allow(c.ID) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, 60/s.cfg.RatePerMinute)))
		writeError(w, &protocol.Error{Class: protocol.ClassUnavailable, Code: "rate_limited", Status: http.StatusTooManyRequests,
			Message:    "this caller sends too many requests (limit " + strconv.Itoa(s.cfg.RatePerMinute) + " per minute)",
			NextAction: "wait for the Retry-After seconds, then retry"})
		return
	}
	next(s.handlerFor(agentID), flushWriter{w}, r.WithContext(context.WithValue(ctx, callerKey{}, c)))
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// flushWriter exposes Flush of a wrapped writer, which the SDK's event
// streams need.
type flushWriter struct{ http.ResponseWriter }

func (f flushWriter) Flush() { _ = http.NewResponseController(f.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the underlying writer.
func (f flushWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// writeError writes the hub's structured error shape.
func writeError(w http.ResponseWriter, err error) {
	pe := protocol.AsError(err)
	status := pe.HTTPStatus()
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard-a2a"`)
	}
	body, _ := json.Marshal(pe)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
