package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/httpapi"
)

func newServeCmd() *cobra.Command {
	var cfg app.Config
	var logFormat, logLevel string
	envs := &envReader{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the hub",
		Long: `Run the hub. With no flags it listens on 127.0.0.1:7600 and keeps its data in
an embedded SQLite database under ./.switchboard. Use --db postgres://... to run
one of several nodes sharing a PostgreSQL database.`,
		Example: `  switchboard serve
  switchboard serve --addr 0.0.0.0:7600 --data /var/lib/switchboard
  SWITCHBOARD_DB=postgres://user@db/switchboard switchboard serve`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := envs.err(); err != nil {
				return err
			}
			if err := checkThresholds(cfg.Bus.Thresholds); err != nil {
				return err
			}
			logger, err := newLogger(logFormat, logLevel)
			if err != nil {
				return err
			}
			slog.SetDefault(logger)
			cfg.Logger = logger
			cfg.Limits.AgentBurst = int(2 * cfg.Limits.AgentRate)
			cfg.Limits.IPRate, cfg.Limits.IPBurst = httpapi.DefaultLimits.IPRate, httpapi.DefaultLimits.IPBurst
			if cfg.Limits.AgentRate <= 0 {
				cfg.Limits.AgentRate, cfg.Limits.AgentBurst = 0, 0
			}
			cfg.Out = cmd.OutOrStdout()
			a, err := app.New(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if err := a.Start(); err != nil {
				a.Close()
				return err
			}
			a.PrintBanner()
			err = a.Serve(cmd.Context())
			fmt.Fprintln(cmd.OutOrStdout(), "switchboard stopped")
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", env("SWITCHBOARD_ADDR", app.DefaultAddr), "listen address (env SWITCHBOARD_ADDR)")
	f.StringVar(&cfg.DataDir, "data", env("SWITCHBOARD_DATA", ".switchboard"), "data directory (env SWITCHBOARD_DATA)")
	f.StringVar(&cfg.DB, "db", env("SWITCHBOARD_DB", ""), "postgres:// URL; empty uses SQLite in the data directory (env SWITCHBOARD_DB)")
	f.StringVar(&cfg.AdminToken, "admin-token", env("SWITCHBOARD_ADMIN_TOKEN", ""), "admin token; empty generates one at first start (env SWITCHBOARD_ADMIN_TOKEN)")
	f.StringVar(&cfg.PublicURL, "public-url", env("SWITCHBOARD_PUBLIC_URL", ""), "URL the outside world reaches this hub at, e.g. https://hub.example.com; Telegram webhooks and A2A cards use it (env SWITCHBOARD_PUBLIC_URL; default the listen address)")
	f.StringVar(&cfg.SecretKey, "secret-key", env("SWITCHBOARD_SECRET_KEY", ""), "deployment secret sealing stored bot tokens, at least 16 characters; same on every node (env SWITCHBOARD_SECRET_KEY; default a key generated in the data directory)")
	f.StringVar(&cfg.Onboarding, "onboarding", env("SWITCHBOARD_ONBOARDING", "invite"), "who may self-register agents: open, invite or closed (env SWITCHBOARD_ONBOARDING)")
	f.StringVar(&cfg.RoutingRulesFile, "routing-rules", env("SWITCHBOARD_ROUTING_RULES", ""), "JSON file of tier routing rules laid over the defaults, e.g. {\"pm->pm\": \"any\"} (env SWITCHBOARD_ROUTING_RULES)")
	f.IntVar(&cfg.Bus.MaxAttempts, "max-attempts", envs.Int("SWITCHBOARD_MAX_ATTEMPTS", 10), "deliveries of one message before it is dead-lettered (env SWITCHBOARD_MAX_ATTEMPTS)")
	f.DurationVar(&cfg.Bus.DefaultTTL, "default-ttl", envs.Duration("SWITCHBOARD_DEFAULT_TTL", time.Hour), "TTL of envelopes that give none (env SWITCHBOARD_DEFAULT_TTL)")
	f.DurationVar(&cfg.Bus.LeaseDuration, "lease", envs.Duration("SWITCHBOARD_LEASE", time.Minute), "how long a claimed delivery stays leased before redelivery (env SWITCHBOARD_LEASE)")
	f.StringVar(&cfg.Pipelines.SkillsDir, "skills-dir", env("SWITCHBOARD_SKILLS_DIR", ""), "skill files registered at start in the deployment's shared registry (env SWITCHBOARD_SKILLS_DIR)")
	f.BoolVar(&cfg.Pipelines.AllowExec, "allow-exec", envs.Bool("SWITCHBOARD_ALLOW_EXEC", false), "let the admin run pipeline skills that execute local commands on this host (env SWITCHBOARD_ALLOW_EXEC)")
	f.DurationVar(&cfg.Pipelines.Retention, "pipeline-retention", envs.Duration("SWITCHBOARD_PIPELINE_RETENTION", 7*24*time.Hour), "finished pipeline executions older than this are pruned (env SWITCHBOARD_PIPELINE_RETENTION)")
	f.IntVar(&cfg.Pipelines.MaxOutputBytes, "max-output-bytes", envs.Int("SWITCHBOARD_MAX_OUTPUT_BYTES", 1<<20), "largest standard output one pipeline step may return (env SWITCHBOARD_MAX_OUTPUT_BYTES)")
	f.DurationVar(&cfg.Pipelines.ExecLease, "pipeline-exec-lease", envs.Duration("SWITCHBOARD_PIPELINE_EXEC_LEASE", 30*time.Second), "lease of a running local command: how soon a crashed node's commands run again (env SWITCHBOARD_PIPELINE_EXEC_LEASE)")
	f.Float64Var(&cfg.Limits.AgentRate, "rate-limit", envs.Float("SWITCHBOARD_RATE_LIMIT", httpapi.DefaultLimits.AgentRate), "API requests per second per agent (burst twice that; 0 disables) (env SWITCHBOARD_RATE_LIMIT)")
	f.DurationVar(&cfg.A2A.Wait, "a2a-wait", envs.Duration("SWITCHBOARD_A2A_WAIT", time.Hour), "how long an A2A message waits for its agent to answer (env SWITCHBOARD_A2A_WAIT)")
	f.IntVar(&cfg.A2A.RatePerMinute, "a2a-rate", envs.Int("SWITCHBOARD_A2A_RATE", 120), "requests per minute each A2A caller may make (env SWITCHBOARD_A2A_RATE)")
	f.BoolVar(&cfg.A2A.AllowPrivatePush, "a2a-allow-private-push", envs.Bool("SWITCHBOARD_A2A_ALLOW_PRIVATE_PUSH", false), "let A2A push notifications reach loopback and private addresses (env SWITCHBOARD_A2A_ALLOW_PRIVATE_PUSH)")
	f.DurationVar(&cfg.Bus.Thresholds.Latency, "alert-latency", envs.Duration("SWITCHBOARD_ALERT_LATENCY", 5*time.Second), "readiness turns degraded when the p95 accept→processed latency exceeds this (env SWITCHBOARD_ALERT_LATENCY)")
	f.IntVar(&cfg.Bus.Thresholds.QueueDepth, "alert-queue-depth", envs.Int("SWITCHBOARD_ALERT_QUEUE_DEPTH", 100), "readiness turns degraded when one agent has this many pending deliveries (env SWITCHBOARD_ALERT_QUEUE_DEPTH)")
	f.Float64Var(&cfg.Bus.Thresholds.ErrorRate, "alert-error-rate", envs.Float("SWITCHBOARD_ALERT_ERROR_RATE", 0.01), "readiness turns degraded when nacks / settled deliveries exceed this fraction (env SWITCHBOARD_ALERT_ERROR_RATE)")
	f.DurationVar(&cfg.Bus.Thresholds.Window, "alert-window", envs.Duration("SWITCHBOARD_ALERT_WINDOW", 5*time.Minute), "window the latency and error-rate alerts are evaluated over (env SWITCHBOARD_ALERT_WINDOW)")
	f.StringVar(&logFormat, "log-format", env("SWITCHBOARD_LOG_FORMAT", "auto"), "auto (text on a terminal, JSON otherwise), json or text (env SWITCHBOARD_LOG_FORMAT)")
	f.StringVar(&logLevel, "log-level", env("SWITCHBOARD_LOG_LEVEL", "info"), "debug, info, warn or error (env SWITCHBOARD_LOG_LEVEL)")
	return cmd
}

func newLogger(format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "auto", "":
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not one of auto, json, text", format)
}

// envReader reads typed SWITCHBOARD_* defaults for serve's flags and keeps
// every value it could not parse, so a typo in the environment stops the
// hub with a message instead of silently running on the default.
type envReader struct{ errs []error }

func (e *envReader) parse(name, def, want string, conv func(string) error) {
	v := env(name, "")
	if v == "" {
		return
	}
	if err := conv(v); err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q is not %s (unset it to use the default, %s)", name, v, want, def))
	}
}

func (e *envReader) Int(name string, def int) int {
	out := def
	e.parse(name, strconv.Itoa(def), "an integer", func(v string) (err error) { out, err = strconv.Atoi(v); return })
	return out
}

func (e *envReader) Bool(name string, def bool) bool {
	out := def
	e.parse(name, strconv.FormatBool(def), "true or false", func(v string) (err error) { out, err = strconv.ParseBool(v); return })
	return out
}

func (e *envReader) Duration(name string, def time.Duration) time.Duration {
	out := def
	e.parse(name, def.String(), "a duration such as 30s or 5m", func(v string) (err error) { out, err = time.ParseDuration(v); return })
	return out
}

func (e *envReader) Float(name string, def float64) float64 {
	out := def
	e.parse(name, strconv.FormatFloat(def, 'g', -1, 64), "a number", func(v string) (err error) { out, err = strconv.ParseFloat(v, 64); return })
	return out
}

func (e *envReader) err() error { return errors.Join(e.errs...) }

// checkThresholds refuses alert limits that could never or would always fire.
func checkThresholds(t bus.Thresholds) error {
	switch {
	case t.Latency <= 0:
		return fmt.Errorf("--alert-latency must be positive, got %s", t.Latency)
	case t.QueueDepth <= 0:
		return fmt.Errorf("--alert-queue-depth must be at least 1, got %d", t.QueueDepth)
	case t.ErrorRate <= 0 || t.ErrorRate > 1:
		return fmt.Errorf("--alert-error-rate is a fraction in (0, 1], e.g. 0.01 for 1%%; got %g", t.ErrorRate)
	case t.Window <= 0:
		return fmt.Errorf("--alert-window must be positive, got %s", t.Window)
	}
	return nil
}
