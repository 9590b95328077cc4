// Package httpapi is the hub's HTTP surface: the REST API under /v1, the
// operational endpoints, and the conventions every handler shares — bearer
// authentication, one structured error shape, strict JSON decoding, body
// size limits, request ids, structured logs and an OpenAPI document that is
// generated from the same route table the mux serves.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Auth says who may call an operation.
type Auth int

// The authentication levels of an operation.
const (
	AuthAgent  Auth = iota // an agent token or the admin token
	AuthAdmin              // the admin token only
	AuthPublic             // no token (operations endpoints, onboarding, webhooks with their own secret)
)

// Op describes one route: the mux pattern and everything the OpenAPI
// document says about it. Request and Response are example values whose
// types give the body schemas (nil for none).
type Op struct {
	Method   string
	Path     string // ServeMux pattern path, e.g. /v1/agents/{id}
	Summary  string
	Tag      string
	Auth     Auth
	Request  any
	Response any
	Status   int   // success status (default 200)
	MaxBody  int64 // request body limit in bytes (default 1 MiB)
	Query    []Param
	// Raw marks handlers that manage the response themselves (WebSocket,
	// streams, webhooks); they still get auth and logging.
	Raw bool
	// AddressLimited applies the per-address rate limit to a public
	// endpoint anyone may call (self-registration).
	AddressLimited bool
}

// Param documents a query parameter.
type Param struct {
	Name        string
	Description string
	Type        string // string, integer, boolean (default string)
}

// HandlerFunc handles a request; a returned error is rendered as the
// structured error body.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Router is a ServeMux whose routes carry documentation.
type Router struct {
	mux     *http.ServeMux
	ops     []Op
	log     *slog.Logger
	auth    Authenticator
	latency *prometheus.HistogramVec
	agents  *limiter // per-agent request rate
	public  *limiter // per-address rate of public POSTs
}

// SetLimits installs request rate limits (DefaultLimits unless changed).
func (rt *Router) SetLimits(l Limits) {
	rt.agents = newLimiter(l.AgentRate, l.AgentBurst)
	rt.public = newLimiter(l.IPRate, l.IPBurst)
}

// Authenticator resolves a bearer token to a principal.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Principal, error)
}

// NewRouter returns an empty router.
func NewRouter(log *slog.Logger, auth Authenticator, reg prometheus.Registerer) *Router {
	rt := &Router{mux: http.NewServeMux(), log: log, auth: auth}
	rt.SetLimits(DefaultLimits)
	rt.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "switchboard_http_request_duration_seconds",
		Help:    "HTTP request latency by route and status class.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route", "code"})
	if reg != nil {
		reg.MustRegister(rt.latency)
	}
	return rt
}

// Ops returns the documented operations, sorted by path and method.
func (rt *Router) Ops() []Op {
	out := append([]Op(nil), rt.ops...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// Handle registers h for op. Registering the same method and path twice
// panics (as ServeMux does), which keeps the route table and the document
// in step.
func (rt *Router) Handle(op Op, h HandlerFunc) {
	if op.MaxBody == 0 {
		op.MaxBody = 1 << 20
	}
	if op.Status == 0 {
		op.Status = http.StatusOK
	}
	rt.ops = append(rt.ops, op)
	pattern := op.Method + " " + op.Path
	route := pattern
	rt.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt.serve(w, r, op, route, h)
	}))
}

// ServeHTTP dispatches to the registered routes; unknown paths and methods
// get the structured error too.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := rt.mux.Handler(r); pattern == "" {
		rid := requestID(w, r)
		if allowed := rt.allowedMethods(r); len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			WriteError(w, r, &protocol.Error{Class: protocol.ClassInvalid, Code: "method_not_allowed", Status: http.StatusMethodNotAllowed,
				Message: r.Method + " is not allowed on " + r.URL.Path + "; allowed: " + strings.Join(allowed, ", ")}, rid)
			return
		}
		WriteError(w, r, &protocol.Error{Class: protocol.ClassUnavailable, Code: "route_not_found", Status: http.StatusNotFound,
			Message: "no endpoint " + r.Method + " " + r.URL.Path, NextAction: "see GET /v1/openapi.json for the API"}, rid)
		return
	}
	rt.mux.ServeHTTP(w, r)
}

func (rt *Router) allowedMethods(r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := rt.mux.Handler(probe); p != "" {
			out = append(out, m)
		}
	}
	return out
}

type ctxKey int

const (
	principalKey ctxKey = iota
	requestIDKey
)

// statusWriter records the status for logs and metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (rt *Router) serve(w http.ResponseWriter, r *http.Request, op Op, route string, h HandlerFunc) {
	start := time.Now()
	rid := requestID(w, r)
	sw := &statusWriter{ResponseWriter: w}
	ctx := context.WithValue(r.Context(), requestIDKey, rid)
	r = r.WithContext(ctx)
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			rt.log.Error("handler panic", "route", route, "panic", p, "requestId", rid)
			if sw.status == 0 {
				WriteError(sw, r, errors.New("panic"), rid)
			}
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		dur := time.Since(start)
		rt.latency.WithLabelValues(route, strconv.Itoa(status/100)+"xx").Observe(dur.Seconds())
		lvl := slog.LevelDebug
		if status >= 500 {
			lvl = slog.LevelWarn
		}
		rt.log.Log(ctx, lvl, "http", "method", r.Method, "path", r.URL.Path, "status", status, "ms", float64(dur.Microseconds())/1000, "requestId", rid)
	}()
	if op.AddressLimited {
		if ok, wait := rt.public.allow(clientAddr(r)); !ok {
			setRetryAfter(sw, wait)
			WriteError(sw, r, rateLimited(clientAddr(r), wait), rid)
			return
		}
	}
	if op.Auth != AuthPublic {
		p, err := rt.authenticate(r)
		if err != nil {
			WriteError(sw, r, err, rid)
			return
		}
		if !p.Admin {
			if ok, wait := rt.agents.allow(p.AgentID()); !ok {
				setRetryAfter(sw, wait)
				WriteError(sw, r, rateLimited("agent "+p.AgentID(), wait), rid)
				return
			}
		}
		if op.Auth == AuthAdmin && !p.Admin {
			WriteError(sw, r, &protocol.Error{Class: protocol.ClassPermission, Code: "admin_required",
				Message: "this endpoint needs the admin token", RequiredAction: "use the admin token (SWITCHBOARD_ADMIN_TOKEN or the one printed at first start)"}, rid)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), principalKey, p))
	}
	if r.Body != nil && op.MaxBody > 0 {
		r.Body = http.MaxBytesReader(sw, r.Body, op.MaxBody)
	}
	if err := h(sw, r); err != nil {
		if sw.status != 0 {
			// The handler already started a response (a stream); log only.
			rt.log.Warn("handler error after response started", "route", route, "err", err, "requestId", rid)
			return
		}
		pe := protocol.AsError(err)
		if pe.Class == protocol.ClassSystem {
			rt.log.Error("internal error", "route", route, "err", err, "requestId", rid)
		}
		WriteError(sw, r, err, rid)
	}
}

// TokenFromRequest extracts the bearer token, also accepting the Claworld
// plugin's x-claworld-app-token header.
func TokenFromRequest(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
			return strings.TrimSpace(h[7:])
		}
		return ""
	}
	return strings.TrimSpace(r.Header.Get("x-claworld-app-token"))
}

func (rt *Router) authenticate(r *http.Request) (Principal, error) {
	tok := TokenFromRequest(r)
	if tok == "" {
		return Principal{}, protocol.Unauthenticated("missing credentials: send Authorization: Bearer <token>")
	}
	return rt.auth.Authenticate(r.Context(), tok)
}

func requestID(w http.ResponseWriter, r *http.Request) string {
	rid := r.Header.Get("X-Request-Id")
	if !protocol.ValidID(rid) {
		rid = protocol.NewID("rq_")
	}
	w.Header().Set("X-Request-Id", rid)
	return rid
}

// RequestID returns the id of the request being served.
func RequestID(ctx context.Context) string {
	s, _ := ctx.Value(requestIDKey).(string)
	return s
}

// typeOf returns the reflect type of an example value (nil-safe).
func typeOf(v any) reflect.Type {
	if v == nil {
		return nil
	}
	return reflect.TypeOf(v)
}
