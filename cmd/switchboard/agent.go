package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/internal/runner"
)

func init() {
	extraCommands = append(extraCommands, newAgentCmd)
}

func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agent", Short: "Run an agent against a hub"}
	cmd.AddCommand(newAgentRunCmd())
	return cmd
}

func newAgentRunCmd() *cobra.Command {
	var (
		execCmd, baseURL, model, apiKeyEnv, script, agentID string
		execTimeout                                         time.Duration
		concurrency                                         int
		takeover, verbose                                   bool
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Connect as an agent and answer its deliveries with a command, a model or a script",
		Long: `Connect to the hub as an agent (Claworld wire dialect) and answer every
delivery with one driver:

  --exec CMD          run 'sh -c CMD' per delivery: a JSON document on stdin
                      (context document, message, metadata), the reply on
                      stdout; print exactly NO_REPLY to keep silent
  --openai-base-url   ask any OpenAI-compatible chat-completions server
    --model M           (the context document is the system prompt, the
    --api-key-env VAR   peer turn the user message)
  --script FILE       answer from a YAML/JSON script of canned replies

A delivery is acknowledged only after the driver answered it; a driver
error leaves it unanswered and the hub redelivers it later. The runner
reconnects with backoff, and stops on an authentication refusal or when
another runner for the same agent takes over (unless --takeover).
See docs/agent-runner.md.`,
		Example: `  switchboard agent run --token $MIRA_TOKEN --script mira.yaml
  switchboard agent run --token $TOKEN --exec './my-agent.py'
  switchboard agent run --token $TOKEN --openai-base-url http://127.0.0.1:11434/v1 --model llama3.2
  switchboard agent run --token $TOKEN --openai-base-url https://api.openai.com/v1 --model gpt-4o-mini --api-key-env OPENAI_API_KEY`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			opts := &slog.HandlerOptions{Level: level}
			var log *slog.Logger
			if g.json {
				log = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), opts))
			} else {
				log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), opts))
			}

			drivers := 0
			for _, set := range []bool{execCmd != "", baseURL != "", script != ""} {
				if set {
					drivers++
				}
			}
			if drivers != 1 {
				return errors.New("choose exactly one driver: --exec CMD, --openai-base-url URL --model M, or --script FILE")
			}
			var drv runner.Driver
			switch {
			case execCmd != "":
				drv = &runner.Exec{Command: execCmd, Timeout: execTimeout, Logger: log}
			case baseURL != "":
				cfg := runner.OpenAIConfig{BaseURL: baseURL, Model: model}
				if apiKeyEnv != "" {
					cfg.APIKey = strings.TrimSpace(os.Getenv(apiKeyEnv))
					if cfg.APIKey == "" {
						return fmt.Errorf("--api-key-env %s: the variable is not set or empty", apiKeyEnv)
					}
				}
				o, err := runner.NewOpenAI(cfg)
				if err != nil {
					return err
				}
				drv = o
			default:
				s, err := runner.LoadScript(script)
				if err != nil {
					return err
				}
				drv = s
			}

			if g.token == "" {
				return errors.New("agent run needs the agent's own token: pass --token or set SWITCHBOARD_TOKEN (it is printed once by 'switchboard agents create')")
			}
			c := newClient()
			return runner.Run(cmd.Context(), runner.Config{
				Server: c.BaseURL, Token: c.Token, AgentID: agentID, Driver: drv,
				Concurrency: concurrency, Takeover: takeover, Logger: log,
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&execCmd, "exec", "", "answer with a shell command: delivery JSON on stdin, reply on stdout")
	f.DurationVar(&execTimeout, "exec-timeout", 2*time.Minute, "time allowed per --exec run (the process group is killed after it)")
	f.StringVar(&baseURL, "openai-base-url", "", "answer with an OpenAI-compatible chat-completions server at this base URL (usually ending in /v1)")
	f.StringVar(&model, "model", "", "model name for --openai-base-url")
	f.StringVar(&apiKeyEnv, "api-key-env", "", "environment variable holding the API key for --openai-base-url")
	f.StringVar(&script, "script", "", "answer from a YAML or JSON script of canned replies")
	f.StringVar(&agentID, "agent-id", "", "expected agent id (the hub refuses the connection if the token belongs to another agent)")
	f.IntVar(&concurrency, "concurrency", 4, "sessions answered at once (one session is always answered in order)")
	f.BoolVar(&takeover, "takeover", false, "reconnect even after another runner for this agent took over")
	f.BoolVarP(&verbose, "verbose", "v", false, "debug logging")
	return cmd
}
