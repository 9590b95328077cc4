package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/pipeline"
	"github.com/switchboard-hub/switchboard/internal/relay"
	"github.com/switchboard-hub/switchboard/internal/social"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// ReadinessCheck reports whether one part of the hub is healthy; a non-empty
// reason marks the hub degraded.
type ReadinessCheck func(ctx context.Context) (reason string)

// Deps are the services the HTTP surface exposes. Each subsystem adds its
// own field and registers its routes in its own file of this package.
type Deps struct {
	Log      *slog.Logger
	DB       *store.DB
	Agents   *agent.Registry
	Metrics  *prometheus.Registry
	Version  string
	Presence Presence // liveness of agents (the bus provides it)
	Bus      *bus.Service
	// WebSocket serves /ws (authenticated by its first frame).
	WebSocket http.Handler
	Social    *social.Service // the social layer; its routes are registered when set
	Relay     *relay.Service  // live conversations; their routes are registered when set
}

// Presence answers liveness questions about agents.
type Presence interface {
	// Liveness returns the liveness and last-seen time of each agent id.
	Liveness(ctx context.Context, agentIDs []string) (map[string]Liveness, error)
}

// Liveness is an agent's connection state.
type Liveness struct {
	Status   string    `json:"liveness"` // online | stale | offline
	LastSeen time.Time `json:"lastSeen,omitzero"`
}

// Server is the HTTP API.
type Server struct {
	Deps
	router *Router

	rmu    sync.Mutex
	checks map[string]ReadinessCheck

	pipelines    *pipeline.Engine // set by MountPipelines
	pipelineOpts PipelineOptions
}

// New builds the API and registers every route.
func New(d Deps) *Server {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Metrics == nil {
		d.Metrics = prometheus.NewRegistry()
	}
	s := &Server{Deps: d, checks: map[string]ReadinessCheck{}}
	s.router = NewRouter(d.Log, RegistryAuth{Agents: d.Agents}, d.Metrics)
	if s.Presence == nil && d.Bus != nil {
		s.Presence = busPresence{d.Bus}
	}
	s.registerOps()
	s.registerAgents()
	if d.Bus != nil {
		s.registerBus()
	}
	if d.WebSocket != nil {
		s.router.Handle(Op{Method: "GET", Path: "/ws", Summary: "WebSocket for agents: first frame {type: auth, agentId, credential, bridgeProtocol} (switchboard.v1 or claworld.delivery_reply.v1)",
			Tag: "bus", Auth: AuthPublic, Raw: true}, func(w http.ResponseWriter, r *http.Request) error {
			d.WebSocket.ServeHTTP(w, r)
			return nil
		})
	}
	if d.Social != nil {
		s.registerSocial()
	}
	if d.Relay != nil {
		s.registerRelay()
	}
	return s
}

// Router exposes the route table (subsystems mount their routes on it).
func (s *Server) Router() *Router { return s.router }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// AddReadiness registers a named readiness check for /readyz.
func (s *Server) AddReadiness(name string, c ReadinessCheck) {
	s.rmu.Lock()
	s.checks[name] = c
	s.rmu.Unlock()
}

// Readiness runs every check and returns the reasons of those that fail.
func (s *Server) Readiness(ctx context.Context) map[string]string {
	s.rmu.Lock()
	checks := make(map[string]ReadinessCheck, len(s.checks))
	for k, v := range s.checks {
		checks[k] = v
	}
	s.rmu.Unlock()
	out := map[string]string{}
	for name, c := range checks {
		if reason := c(ctx); reason != "" {
			out[name] = reason
		}
	}
	return out
}

// HealthResponse is the body of /healthz.
type HealthResponse struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// ReadyResponse is the body of /readyz.
type ReadyResponse struct {
	Status  string            `json:"status"` // ready | degraded | unavailable
	Reasons map[string]string `json:"reasons,omitempty"`
	Checks  []string          `json:"checks"`
}

func (s *Server) registerOps() {
	s.router.Handle(Op{Method: "GET", Path: "/healthz", Summary: "Liveness: the process is up", Tag: "operations", Auth: AuthPublic, Response: HealthResponse{}},
		func(w http.ResponseWriter, r *http.Request) error {
			return WriteJSON(w, http.StatusOK, HealthResponse{Status: "ok", Version: s.Version})
		})
	s.router.Handle(Op{Method: "GET", Path: "/readyz", Summary: "Readiness: the store answers and thresholds hold (degraded lists the reasons)", Tag: "operations", Auth: AuthPublic, Response: ReadyResponse{}},
		func(w http.ResponseWriter, r *http.Request) error {
			ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
			defer cancel()
			resp := ReadyResponse{Status: "ready"}
			s.rmu.Lock()
			for name := range s.checks {
				resp.Checks = append(resp.Checks, name)
			}
			s.rmu.Unlock()
			sort.Strings(resp.Checks)
			if err := s.DB.SQL().PingContext(ctx); err != nil {
				resp.Status = "unavailable"
				resp.Reasons = map[string]string{"store": err.Error()}
				return WriteJSON(w, http.StatusServiceUnavailable, resp)
			}
			if reasons := s.Readiness(ctx); len(reasons) > 0 {
				resp.Status = "degraded"
				resp.Reasons = reasons
			}
			// Degraded is still able to serve: 200 keeps load balancers
			// routing to it while the reasons tell operators what to fix.
			return WriteJSON(w, http.StatusOK, resp)
		})
	metrics := promhttp.HandlerFor(s.Metrics, promhttp.HandlerOpts{})
	s.router.Handle(Op{Method: "GET", Path: "/metrics", Summary: "Prometheus metrics", Tag: "operations", Auth: AuthPublic, Raw: true},
		func(w http.ResponseWriter, r *http.Request) error { metrics.ServeHTTP(w, r); return nil })
	s.router.Handle(Op{Method: "GET", Path: "/v1/openapi.json", Summary: "This API as an OpenAPI 3.1 document", Tag: "operations", Auth: AuthPublic, Raw: true},
		func(w http.ResponseWriter, r *http.Request) error {
			return WriteJSON(w, http.StatusOK, s.router.OpenAPI(s.Version))
		})
}
