// Package console is the hub's web console: server-rendered HTML pages
// under /console for operators (the admin token) and agent owners (an agent
// token), served by the same binary with every asset embedded, so it works
// offline and behind any proxy.
//
// A person signs in with a token; the console exchanges it for a
// server-side session (a random id in an HttpOnly, SameSite=Strict cookie;
// only the id's SHA-256 is stored, in console_sessions) and forgets the
// token. Every state-changing form carries the session's synchronizer CSRF
// token, and cross-site requests are refused by their Origin and
// Sec-Fetch-Site headers as well. The admin sees everything; an agent sees
// only its own agent, deliveries, conversations, traces, dead letters,
// pipelines and bots — anything else answers 404, as if it did not exist.
//
// Pages read the services directly (bus, social, relay, the pipeline
// engine, reply-end controls). Live parts of a page are refreshed over
// Server-Sent Events: the server re-renders the page's live region once a
// PollInterval and sends it when it changed. A stream ends when its session
// ends (sign-out, expiry) and when the console shuts down.
package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/httpapi"
	"github.com/switchboard-hub/switchboard/internal/pipeline"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/relay"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
	"github.com/switchboard-hub/switchboard/internal/social"
	"github.com/switchboard-hub/switchboard/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is mounted.
const Prefix = "/console"

// Pipelines is what the console needs of the pipeline engine
// (*pipeline.Engine implements it). Owner "" means every owner (the admin).
type Pipelines interface {
	List(ctx context.Context, f pipeline.ListFilter) ([]*pipeline.Execution, error)
	Get(ctx context.Context, owner, id string) (*pipeline.Execution, error)
	Events(ctx context.Context, owner, executionID string, after int64, limit int) ([]pipeline.Event, error)
	Cancel(ctx context.Context, owner, id, reason string) (*pipeline.Execution, error)
	Resume(ctx context.Context, req pipeline.ResumeRequest) (*pipeline.Execution, error)
}

// TelegramBot is a hosted Telegram bot as the console lists it.
type TelegramBot struct {
	ID        string // the bot id, also the BotID of its reply-end conversation keys
	AgentID   string // the agent the bot serves
	Username  string
	Mode      string // poll | webhook
	CreatedAt time.Time
}

// TelegramBots lists hosted Telegram bots. agentID "" lists every bot (the
// admin); otherwise only the bots serving that agent. Leave Deps.Bots nil
// when the hub hosts no bots: the Telegram page then says so.
type TelegramBots interface {
	ConsoleBots(ctx context.Context, agentID string) ([]TelegramBot, error)
}

// Deps are the services the console reads and acts on. Pipelines, Replyctl
// and Bots are optional; their pages say when they are not configured.
type Deps struct {
	Log       *slog.Logger
	DB        *store.DB
	Agents    *agent.Registry
	Auth      httpapi.Authenticator // resolves sign-in tokens
	Bus       *bus.Service
	Social    *social.Service
	Relay     *relay.Service
	Metrics   prometheus.Gatherer // for deliveries per second
	Pipelines Pipelines
	Replyctl  *replyctl.DBStore
	Bots      TelegramBots
	Clock     clock.Clock
	Version   string

	// SessionTTL is how long a sign-in lasts (default 12h).
	SessionTTL time.Duration
	// PollInterval is how often live regions are re-rendered (default 1s).
	PollInterval time.Duration
	// SecureCookies forces the Secure attribute on cookies (it is set
	// anyway for requests that arrive over TLS or with
	// X-Forwarded-Proto: https).
	SecureCookies bool
}

// Console serves the web console. Create it with New, mount it at Prefix,
// and call Shutdown when the server stops, so live streams end.
type Console struct {
	d      Deps
	mux    *http.ServeMux
	pages  map[string]*template.Template
	static http.Handler
	rates  *rates

	ctx     context.Context
	cancel  context.CancelFunc
	streams sync.WaitGroup
	active  atomic.Int64

	pipeMu sync.RWMutex
}

// New builds the console.
func New(d Deps) (*Console, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.SessionTTL <= 0 {
		d.SessionTTL = 12 * time.Hour
	}
	if d.PollInterval <= 0 {
		d.PollInterval = time.Second
	}
	if d.Auth == nil && d.Agents != nil {
		d.Auth = httpapi.RegistryAuth{Agents: d.Agents}
	}
	if d.DB == nil || d.Agents == nil || d.Bus == nil || d.Social == nil || d.Relay == nil {
		return nil, errors.New("console: DB, Agents, Bus, Social and Relay are required")
	}
	c := &Console{d: d, mux: http.NewServeMux(), rates: newRates(d.Metrics)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	pages, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	c.pages = pages
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	files := http.StripPrefix(Prefix+"/static/", http.FileServerFS(sub))
	c.static = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	c.routes()
	return c, nil
}

// SetPipelines plugs in the pipeline engine after the console was built
// (the engine is wired separately); nil turns the Pipelines page off.
func (c *Console) SetPipelines(p Pipelines) {
	c.pipeMu.Lock()
	c.d.Pipelines = p
	c.pipeMu.Unlock()
}

// SetBots plugs in the hosted Telegram bots; nil means none.
func (c *Console) SetBots(b TelegramBots) {
	c.pipeMu.Lock()
	c.d.Bots = b
	c.pipeMu.Unlock()
}

func (c *Console) pipelines() Pipelines {
	c.pipeMu.RLock()
	defer c.pipeMu.RUnlock()
	return c.d.Pipelines
}

func (c *Console) bots() TelegramBots {
	c.pipeMu.RLock()
	defer c.pipeMu.RUnlock()
	return c.d.Bots
}

// ServeHTTP implements http.Handler for every path under Prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "+
		"form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	c.mux.ServeHTTP(w, r)
}

// Shutdown ends every live stream and refuses new ones; it waits for the
// streams' goroutines to return (at most a few seconds).
func (c *Console) Shutdown() {
	c.cancel()
	done := make(chan struct{})
	go func() { c.streams.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.d.Log.Warn("console streams did not end in time")
	}
}

// ActiveStreams is the number of live streams being served.
func (c *Console) ActiveStreams() int { return int(c.active.Load()) }

func (c *Console) routes() {
	m := c.mux
	m.Handle("GET "+Prefix+"/static/", c.static)
	m.HandleFunc("GET "+Prefix+"/sign-in", c.signInPage)
	m.HandleFunc("POST "+Prefix+"/sign-in", c.signIn)
	m.HandleFunc("POST "+Prefix+"/sign-out", c.action(c.signOut))

	c.live("overview", "GET "+Prefix+"/{$}", "/events/overview", c.loadOverview)
	m.HandleFunc("GET "+Prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
	})
	c.live("agents", "GET "+Prefix+"/agents", "/events/agents", c.loadAgents)
	m.HandleFunc("GET "+Prefix+"/agents/{id}", c.page("agent", c.loadAgent))
	m.HandleFunc("GET "+Prefix+"/deliveries/{id}", c.page("delivery", c.loadDelivery))
	c.live("conversations", "GET "+Prefix+"/conversations", "/events/conversations", c.loadConversations)
	c.live("conversation", "GET "+Prefix+"/conversations/{id}", "/events/conversations/{id}", c.loadConversation)
	m.HandleFunc("GET "+Prefix+"/worlds", c.page("worlds", c.loadWorlds))
	m.HandleFunc("GET "+Prefix+"/worlds/{id}", c.page("world", c.loadWorld))
	m.HandleFunc("GET "+Prefix+"/traces", c.page("traces", c.loadTraceSearch))
	m.HandleFunc("GET "+Prefix+"/traces/{id}", c.page("trace", c.loadTrace))
	m.HandleFunc("GET "+Prefix+"/dead-letters", c.page("deadletters", c.loadDeadLetters))
	m.HandleFunc("GET "+Prefix+"/dead-letters/{id}", c.page("deadletter", c.loadDeadLetter))
	m.HandleFunc("GET "+Prefix+"/dead-letters/{id}/replay", c.page("replay", c.loadDeadLetter))
	m.HandleFunc("POST "+Prefix+"/dead-letters/{id}/replay", c.action(c.replay))
	c.live("pipelines", "GET "+Prefix+"/pipelines", "/events/pipelines", c.loadPipelines)
	c.live("pipeline", "GET "+Prefix+"/pipelines/{id}", "/events/pipelines/{id}", c.loadPipeline)
	m.HandleFunc("GET "+Prefix+"/pipelines/{id}/cancel", c.page("cancel", c.loadPipeline))
	m.HandleFunc("POST "+Prefix+"/pipelines/{id}/cancel", c.action(c.cancelPipeline))
	m.HandleFunc("POST "+Prefix+"/pipelines/{id}/resume", c.action(c.resumePipeline))
	m.HandleFunc("GET "+Prefix+"/telegram", c.page("telegram", c.loadTelegram))
	m.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, protocol.NotFound("page_not_found", "there is no console page "+r.URL.Path))
	})
}

// loader loads a page's data for a viewer; the same function feeds the
// page and its live stream.
type loader func(ctx context.Context, v *viewer, r *http.Request) (any, error)

// page serves a signed-in page.
func (c *Console) page(name string, load loader) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok := c.signedIn(w, r)
		if !ok {
			return
		}
		data, err := load(r.Context(), v, r)
		if to, ok := isRedirect(err); ok {
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		if err != nil {
			c.renderError(w, r, v, err)
			return
		}
		c.render(w, r, http.StatusOK, name, v, data, "")
	}
}

// live serves a page with a live region and its event stream.
func (c *Console) live(name, pattern, stream string, load loader) {
	method, path, _ := strings.Cut(pattern, " ")
	c.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		v, ok := c.signedIn(w, r)
		if !ok {
			return
		}
		data, err := load(r.Context(), v, r)
		if err != nil {
			c.renderError(w, r, v, err)
			return
		}
		src := Prefix + stream
		for _, seg := range strings.Split(stream, "/") {
			if strings.HasPrefix(seg, "{") {
				key := strings.Trim(seg, "{}")
				src = strings.Replace(src, seg, r.PathValue(key), 1)
			}
		}
		if r.URL.RawQuery != "" {
			src += "?" + r.URL.RawQuery
		}
		c.render(w, r, http.StatusOK, name, v, data, src)
	})
	_ = path
	c.mux.HandleFunc(method+" "+Prefix+stream, func(w http.ResponseWriter, r *http.Request) {
		c.stream(w, r, name, load)
	})
}

// layout is what every page template gets.
type layout struct {
	Title   string
	Page    string
	Viewer  *viewer
	CSRF    string
	Live    string // the live region's event stream ("" for none)
	Version string
	Flash   string
	Data    any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v *viewer, data any, live string) {
	t, ok := c.pages[name]
	if !ok {
		c.d.Log.Error("console: no template", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	l := layout{Title: pageTitles[name], Page: name, Viewer: v, Live: live, Version: c.d.Version, Data: data, Flash: r.URL.Query().Get("done")}
	if v != nil {
		l.CSRF = v.csrf
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", l); err != nil {
		c.d.Log.Error("console: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// renderLive renders a page's live region alone (for its stream).
func (c *Console) renderLive(name string, v *viewer, data any) (string, error) {
	var buf bytes.Buffer
	l := layout{Page: name, Viewer: v, CSRF: v.csrf, Version: c.d.Version, Data: data}
	if err := c.pages[name].ExecuteTemplate(&buf, "live", l); err != nil {
		return "", fmt.Errorf("render live %s: %w", name, err)
	}
	return buf.String(), nil
}

// errorView is the body of an error page.
type errorView struct {
	Status  int
	Code    string
	Message string
	Next    string
}

func (c *Console) renderError(w http.ResponseWriter, r *http.Request, v *viewer, err error) {
	pe := protocol.AsError(err)
	status := pe.HTTPStatus()
	if pe.Class == protocol.ClassSystem {
		c.d.Log.Error("console: internal error", "path", r.URL.Path, "err", err, "requestId", httpapi.RequestID(r.Context()))
		pe = &protocol.Error{Class: protocol.ClassSystem, Code: "internal_error", Message: "something went wrong on the hub; the log has the details"}
		status = http.StatusInternalServerError
	}
	next := pe.NextAction
	if next == "" && pe.RequiredAction != "" {
		next = pe.RequiredAction
	}
	c.render(w, r, status, "error", v, errorView{Status: status, Code: pe.Code, Message: pe.Message, Next: next}, "")
}

var pageTitles = map[string]string{
	"signin": "Sign in", "overview": "Overview", "agents": "Agents", "agent": "Agent", "delivery": "Delivery",
	"conversations": "Conversations", "conversation": "Conversation", "worlds": "Worlds", "world": "World",
	"traces": "Traces", "trace": "Trace", "deadletters": "Dead letters", "deadletter": "Dead letter", "replay": "Replay a dead letter",
	"pipelines": "Pipelines", "pipeline": "Pipeline execution", "cancel": "Cancel an execution", "telegram": "Telegram", "error": "Error",
}

// hashID is what the store keeps of a session id.
func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}
