package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/httpapi"
)

func newServeCmd() *cobra.Command {
	var cfg app.Config
	var logFormat, logLevel string
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
	f.IntVar(&cfg.Bus.MaxAttempts, "max-attempts", envInt("SWITCHBOARD_MAX_ATTEMPTS", 10), "deliveries of one message before it is dead-lettered (env SWITCHBOARD_MAX_ATTEMPTS)")
	f.DurationVar(&cfg.Bus.DefaultTTL, "default-ttl", envDuration("SWITCHBOARD_DEFAULT_TTL", time.Hour), "TTL of envelopes that give none (env SWITCHBOARD_DEFAULT_TTL)")
	f.DurationVar(&cfg.Bus.LeaseDuration, "lease", envDuration("SWITCHBOARD_LEASE", time.Minute), "how long a claimed delivery stays leased before redelivery (env SWITCHBOARD_LEASE)")
	f.StringVar(&cfg.Pipelines.SkillsDir, "skills-dir", env("SWITCHBOARD_SKILLS_DIR", ""), "skill files registered at start in the deployment's shared registry (env SWITCHBOARD_SKILLS_DIR)")
	f.BoolVar(&cfg.Pipelines.AllowExec, "allow-exec", envBool("SWITCHBOARD_ALLOW_EXEC", false), "let the admin run pipeline skills that execute local commands on this host (env SWITCHBOARD_ALLOW_EXEC)")
	f.DurationVar(&cfg.Pipelines.Retention, "pipeline-retention", envDuration("SWITCHBOARD_PIPELINE_RETENTION", 7*24*time.Hour), "finished pipeline executions older than this are pruned (env SWITCHBOARD_PIPELINE_RETENTION)")
	f.IntVar(&cfg.Pipelines.MaxOutputBytes, "max-output-bytes", envInt("SWITCHBOARD_MAX_OUTPUT_BYTES", 1<<20), "largest standard output one pipeline step may return (env SWITCHBOARD_MAX_OUTPUT_BYTES)")
	f.DurationVar(&cfg.Pipelines.ExecLease, "pipeline-exec-lease", envDuration("SWITCHBOARD_PIPELINE_EXEC_LEASE", 30*time.Second), "lease of a running local command: how soon a crashed node's commands run again (env SWITCHBOARD_PIPELINE_EXEC_LEASE)")
	f.Float64Var(&cfg.Limits.AgentRate, "rate-limit", envFloat("SWITCHBOARD_RATE_LIMIT", httpapi.DefaultLimits.AgentRate), "API requests per second per agent (burst twice that; 0 disables) (env SWITCHBOARD_RATE_LIMIT)")
	f.DurationVar(&cfg.A2A.Wait, "a2a-wait", envDuration("SWITCHBOARD_A2A_WAIT", time.Hour), "how long an A2A message waits for its agent to answer (env SWITCHBOARD_A2A_WAIT)")
	f.IntVar(&cfg.A2A.RatePerMinute, "a2a-rate", envInt("SWITCHBOARD_A2A_RATE", 120), "requests per minute each A2A caller may make (env SWITCHBOARD_A2A_RATE)")
	f.BoolVar(&cfg.A2A.AllowPrivatePush, "a2a-allow-private-push", env("SWITCHBOARD_A2A_ALLOW_PRIVATE_PUSH", "") == "true", "let A2A push notifications reach loopback and private addresses (env SWITCHBOARD_A2A_ALLOW_PRIVATE_PUSH)")
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

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(env(name, "")); err == nil {
		return v
	}
	return def
}

func envBool(name string, def bool) bool {
	if v, err := strconv.ParseBool(env(name, "")); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(env(name, "")); err == nil {
		return v
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(env(name, ""), 64); err == nil {
		return v
	}
	return def
}
