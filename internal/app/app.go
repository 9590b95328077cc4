// Package app assembles a running hub from its parts: the data directory
// and its lock, the store, the services, the HTTP server and the background
// workers. `switchboard serve`, `switchboard demo` and the end-to-end tests
// all start the real program through it.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchboard-hub/switchboard/internal/a2a"
	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/console"
	"github.com/switchboard-hub/switchboard/internal/gateway"
	"github.com/switchboard-hub/switchboard/internal/httpapi"
	"github.com/switchboard-hub/switchboard/internal/mcpserver"
	"github.com/switchboard-hub/switchboard/internal/pipeline"
	"github.com/switchboard-hub/switchboard/internal/relay"
	"github.com/switchboard-hub/switchboard/internal/social"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/telegram/hosted"
	"github.com/switchboard-hub/switchboard/internal/version"
)

// Config is the hub's configuration. Flags fill it, then SWITCHBOARD_*
// environment variables, then these defaults.
type Config struct {
	Addr       string // listen address (default 127.0.0.1:7600)
	DataDir    string // data directory (default ./.switchboard)
	DB         string // postgres:// URL or a SQLite file path; empty for <DataDir>/switchboard.db
	AdminToken string // fixed admin token; empty generates one at first start
	Onboarding string // open | invite | closed (social layer)
	PublicURL  string // how clients (and Telegram's webhooks) reach this hub, for links and webhook URLs (default http://Addr)
	// SecretKey is the deployment secret that seals stored secrets (bot
	// tokens); empty uses <DataDir>/secret-key, generated at first start.
	// Nodes sharing one PostgreSQL database need the same value.
	SecretKey string
	// Telegram tunes the hosted Telegram bots (intervals, Bot API client).
	Telegram hosted.Tuning

	// Bus tunes the message bus (TTL, leases, attempts, routing rules,
	// thresholds); zero values take the bus defaults.
	Bus bus.Config
	// RoutingRulesFile is a JSON routing table laid over the default rules.
	RoutingRulesFile string
	// Limits are the API's request rate limits; the zero value means
	// httpapi.DefaultLimits, and NoRateLimits turns them off (tests).
	Limits       httpapi.Limits
	NoRateLimits bool
	// Relay tunes live conversations (caps, TTLs); zero values take defaults.
	Relay relay.Config
	// MonitorInterval is how often bus thresholds are evaluated (default 10s).
	MonitorInterval time.Duration
	// A2A tunes the Agent2Agent surface (wait for offline agents, caller
	// rate limits, push notification targets); zero values take defaults.
	A2A a2a.Config
	// Pipelines tunes skill pipelines (skills directory, local commands,
	// retention, output cap).
	Pipelines PipelineConfig

	Logger *slog.Logger
	Clock  clock.Clock
	Out    io.Writer // where the startup banner goes (default stdout)

	ShutdownTimeout time.Duration
}

// DefaultAddr is where the hub listens unless told otherwise.
const DefaultAddr = "127.0.0.1:7600"

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.DataDir == "" {
		c.DataDir = ".switchboard"
	}
	if c.Onboarding == "" {
		c.Onboarding = "invite"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.MonitorInterval == 0 {
		c.MonitorInterval = 10 * time.Second
	}
}

// App is a running hub.
type App struct {
	Config  Config
	Log     *slog.Logger
	DB      *store.DB
	Agents  *agent.Registry
	Bus     *bus.Service
	Gateway *gateway.Gateway
	API     *httpapi.Server
	Metrics *prometheus.Registry
	Social  *social.Service
	Relay   *relay.Service
	// Pipelines runs skill pipelines (system:pipeline on the bus).
	Pipelines *pipeline.Engine
	// Telegram hosts the Telegram bots (reply-end controls).
	Telegram *hosted.Host
	Console  *console.Console
	A2A      *a2a.Service
	MCP      *mcpserver.Server

	// AdminToken is set when this start generated the admin token.
	AdminToken string

	dsn      string
	lock     *dirLock
	listener net.Listener
	srv      *http.Server
	workers  []worker
	// onShutdown run when the server starts shutting down, before it
	// waits for open requests (long-lived streams end through them).
	onShutdown []func()
	stopOnce   sync.Once
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

// worker is a background loop started with the server and stopped before
// the store closes.
type worker struct {
	name string
	run  func(ctx context.Context)
}

// New prepares a hub: it locks the data directory, opens the store (applying
// migrations), and builds the services. Nothing listens until Start.
func New(ctx context.Context, cfg Config) (*App, error) {
	cfg.setDefaults()
	a := &App{Config: cfg, Log: cfg.Logger}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", cfg.DataDir, err)
	}
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	a.lock = lock
	dsn := cfg.DB
	if dsn == "" {
		dsn = filepath.Join(cfg.DataDir, "switchboard.db")
	}
	a.dsn = dsn
	a.DB, err = store.Open(ctx, dsn, store.Options{Logger: cfg.Logger})
	if err != nil {
		a.lock.release()
		return nil, err
	}
	a.Agents = agent.New(a.DB, cfg.Clock)
	tok, created, err := a.Agents.EnsureAdminToken(ctx, cfg.AdminToken)
	if err != nil {
		a.closeStore()
		return nil, err
	}
	if created {
		a.AdminToken = tok
		if err := os.WriteFile(AdminTokenPath(cfg.DataDir), []byte(tok+"\n"), 0o600); err != nil {
			a.closeStore()
			return nil, fmt.Errorf("save admin token: %w", err)
		}
	}
	a.Metrics = prometheus.NewRegistry()
	a.Metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	busCfg := cfg.Bus
	if cfg.RoutingRulesFile != "" {
		rules, err := bus.LoadRules(cfg.RoutingRulesFile)
		if err != nil {
			a.closeStore()
			return nil, err
		}
		busCfg.Rules = rules
	}
	a.Bus = bus.New(a.DB, a.Agents, cfg.Clock, cfg.Logger, busCfg, bus.NewMetrics(a.Metrics))
	a.addWorker("bus-sweeper", a.Bus.Run)
	a.addWorker("bus-monitor", func(ctx context.Context) { a.Bus.Monitor(ctx, cfg.MonitorInterval) })
	a.Gateway = gateway.New(a.Bus, a.Agents, a.DB, cfg.Logger, gateway.Options{HeartbeatInterval: a.Bus.Config().HeartbeatInterval})
	a.API = httpapi.New(httpapi.Deps{
		Log: cfg.Logger, DB: a.DB, Agents: a.Agents, Metrics: a.Metrics, Version: version.Get().Version, Bus: a.Bus,
		WebSocket: a.Gateway,
	})
	a.API.AddReadiness("bus", a.Bus.ReadinessReason)
	switch {
	case cfg.NoRateLimits:
		a.API.Router().SetLimits(httpapi.Limits{})
	case cfg.Limits != (httpapi.Limits{}):
		a.API.Router().SetLimits(cfg.Limits)
	}
	if err := a.wire(ctx); err != nil {
		a.closeStore()
		return nil, err
	}
	return a, nil
}

// AdminTokenPath is where a generated admin token is saved (mode 0600).
func AdminTokenPath(dataDir string) string { return filepath.Join(dataDir, "admin-token") }

// wire connects the subsystems to each other and to the API.
func (a *App) wire(ctx context.Context) error {
	if err := a.wireSocial(ctx); err != nil {
		return err
	}
	if err := a.wireRelay(ctx); err != nil {
		return err
	}
	if err := a.wirePipelines(ctx); err != nil {
		return err
	}
	if err := a.wireTelegram(ctx); err != nil {
		return err
	}
	if err := a.wireA2A(ctx); err != nil {
		return err
	}
	if err := a.wireMCP(ctx); err != nil {
		return err
	}
	// The console reads every other subsystem: wire it last.
	return a.wireConsole(ctx)
}

// addWorker registers a background loop.
func (a *App) addWorker(name string, run func(ctx context.Context)) {
	a.workers = append(a.workers, worker{name: name, run: run})
}

// Start listens on the configured address and starts serving and the
// background workers. With Addr "127.0.0.1:0" it picks a free port (URL
// reports it).
func (a *App) Start() error {
	ln, err := net.Listen("tcp", a.Config.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.Config.Addr, err)
	}
	a.listener = ln
	a.srv = &http.Server{
		Handler:           a.API,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(a.Log.Handler(), slog.LevelWarn),
	}
	for _, f := range a.onShutdown {
		a.srv.RegisterOnShutdown(f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	for _, w := range a.workers {
		a.wg.Add(1)
		go func(w worker) {
			defer a.wg.Done()
			w.run(ctx)
		}(w)
	}
	go func() {
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.Log.Error("http server stopped", "err", err)
		}
	}()
	return nil
}

// URL is the base URL clients use to reach this hub.
func (a *App) URL() string {
	if a.listener == nil {
		return "http://" + a.Config.Addr
	}
	return "http://" + a.listener.Addr().String()
}

// PrintBanner tells the operator where the hub listens, where its data
// lives, and (first start only) the admin token.
func (a *App) PrintBanner() {
	w := a.Config.Out
	fmt.Fprintf(w, "switchboard %s listening on %s\n", version.Get().Version, a.URL())
	if a.DB.Dialect() == store.Postgres {
		fmt.Fprintf(w, "  store:   postgres (%s)\n", redactURL(a.Config.DB))
	} else {
		fmt.Fprintf(w, "  store:   sqlite (%s)\n", a.dsn)
	}
	fmt.Fprintf(w, "  data:    %s\n", a.Config.DataDir)
	switch {
	case a.AdminToken != "":
		fmt.Fprintf(w, "  admin token (shown once, saved to %s):\n    %s\n", AdminTokenPath(a.Config.DataDir), a.AdminToken)
	case a.Config.AdminToken != "":
		fmt.Fprintf(w, "  admin token: from SWITCHBOARD_ADMIN_TOKEN / --admin-token\n")
	default:
		fmt.Fprintf(w, "  admin token: in %s\n", AdminTokenPath(a.Config.DataDir))
	}
	fmt.Fprintf(w, "  docs:    %s/v1/openapi.json · health %s/healthz\n", a.URL(), a.URL())
}

func redactURL(s string) string {
	if i := strings.Index(s, "@"); i > 0 {
		if j := strings.Index(s, "://"); j > 0 && j < i {
			return s[:j+3] + "…" + s[i:]
		}
	}
	return s
}

// Serve runs until ctx is cancelled, then shuts down gracefully.
func (a *App) Serve(ctx context.Context) error {
	if a.listener == nil {
		if err := a.Start(); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return a.Close()
}

// Close drains connections, stops the workers and closes the store. It is
// safe to call more than once.
func (a *App) Close() error {
	var err error
	a.stopOnce.Do(func() {
		if a.srv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), a.Config.ShutdownTimeout)
			if e := a.srv.Shutdown(sctx); e != nil {
				a.srv.Close()
			}
			cancel()
		}
		// Hijacked WebSocket connections are not tracked by the HTTP
		// server: close them before the store goes away.
		if a.Gateway != nil {
			a.Gateway.Shutdown()
		}
		if a.cancel != nil {
			a.cancel()
		}
		a.wg.Wait()
		err = a.closeStore()
	})
	return err
}

func (a *App) closeStore() error {
	var err error
	if a.DB != nil {
		err = a.DB.Close()
	}
	a.lock.release()
	return err
}
