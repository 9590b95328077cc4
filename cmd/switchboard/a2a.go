package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/mcpserver"
	"github.com/switchboard-hub/switchboard/internal/version"
)

func init() {
	extraCommands = append(extraCommands, newA2ACmd, newMCPCmd)
}

// selfAgent resolves --agent, defaulting to the token's own agent.
func selfAgent(ctx context.Context, c *client.Client, agentID string) (string, error) {
	if agentID != "" {
		return agentID, nil
	}
	acct, err := c.Account(ctx, "")
	if err != nil || acct.AgentID == "" {
		return "", errors.New("name the agent with --agent (required with the admin token)")
	}
	return acct.AgentID, nil
}

func newA2ACmd() *cobra.Command {
	var agentID string
	cmd := &cobra.Command{
		Use:   "a2a",
		Short: "Make an agent reachable by standard A2A clients, issue caller tokens, message external A2A agents",
		Long: `An enabled agent has an Agent Card at /a2a/agents/<id>/.well-known/agent-card.json
and A2A 1.0 JSON-RPC and HTTP+JSON endpoints (plus an A2A 0.3 JSON-RPC one).
Callers authenticate with tokens the agent issues. Incoming messages reach the
agent as bus requests (action a2a.message) from system:a2a. See docs/a2a.md.`,
	}
	cmd.PersistentFlags().StringVar(&agentID, "agent", "", "the agent (default: the token's own agent)")

	var desc string
	var skills []string
	enable := &cobra.Command{
		Use:   "enable --description TEXT [--skill id:name:description]...",
		Short: "Enable the agent's A2A card and endpoints (or update them)",
		Example: `  switchboard a2a enable --description "Books tables at restaurants" --skill book:Book:"Books a table"
  switchboard a2a enable --agent agt_… --description "Answers questions about our docs"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return setA2A(cmd, agentID, true, desc, skills)
		},
	}
	enable.Flags().StringVar(&desc, "description", "", "what the agent does, for callers (required)")
	enable.Flags().StringArrayVar(&skills, "skill", nil, "a skill as id:name:description (repeatable)")
	disable := &cobra.Command{
		Use: "disable", Short: "Stop serving the agent's A2A card and endpoints", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient()
			id, err := selfAgent(cmd.Context(), c, agentID)
			if err != nil {
				return err
			}
			cur, err := c.A2A(cmd.Context(), id)
			if err != nil {
				return err
			}
			return setA2A(cmd, id, false, cur.Description, nil)
		},
	}
	show := &cobra.Command{
		Use: "show", Short: "Show the agent's A2A settings and card URL", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient()
			id, err := selfAgent(cmd.Context(), c, agentID)
			if err != nil {
				return err
			}
			st, err := c.A2A(cmd.Context(), id)
			if err != nil {
				return err
			}
			return output(cmd, st, func(w io.Writer) { printSettings(w, st) })
		},
	}
	issue := &cobra.Command{
		Use: "issue NAME", Short: "Issue a bearer token for an external caller (shown once)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient()
			id, err := selfAgent(cmd.Context(), c, agentID)
			if err != nil {
				return err
			}
			cl, err := c.IssueA2ACaller(cmd.Context(), id, args[0])
			if err != nil {
				return err
			}
			return output(cmd, cl, func(w io.Writer) {
				fmt.Fprintf(w, "caller %s (%s)\ntoken (shown once): %s\n", cl.CallerID, cl.Name, cl.Token)
			})
		},
	}
	callers := &cobra.Command{
		Use: "callers", Short: "List the agent's callers", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient()
			id, err := selfAgent(cmd.Context(), c, agentID)
			if err != nil {
				return err
			}
			cs, err := c.A2ACallers(cmd.Context(), id)
			if err != nil {
				return err
			}
			return output(cmd, cs, func(w io.Writer) {
				rows := make([][]string, 0, len(cs))
				for _, cl := range cs {
					state := "active"
					if !cl.RevokedAt.IsZero() {
						state = "revoked " + cl.RevokedAt.UTC().Format(time.RFC3339)
					}
					rows = append(rows, []string{cl.CallerID, cl.Name, cl.CreatedAt.UTC().Format(time.RFC3339), state})
				}
				table(w, []string{"CALLER", "NAME", "CREATED", "STATE"}, rows)
			})
		},
	}
	revoke := &cobra.Command{
		Use: "revoke CALLER_ID", Short: "Revoke a caller's token", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient()
			id, err := selfAgent(cmd.Context(), c, agentID)
			if err != nil {
				return err
			}
			cl, err := c.RevokeA2ACaller(cmd.Context(), id, args[0])
			if err != nil {
				return err
			}
			return output(cmd, cl, func(w io.Writer) { fmt.Fprintf(w, "revoked %s (%s)\n", cl.CallerID, cl.Name) })
		},
	}
	var in client.A2ASendInput
	send := &cobra.Command{
		Use:   `send URL "TEXT"`,
		Short: "Send a message to an external A2A agent and print its answer (the exchange is logged on the bus)",
		Example: `  switchboard a2a send https://agents.example.com/.well-known/agent-card.json "What can you do?"
  switchboard a2a send https://agents.example.com "Continue" --context-id ctx-123 --peer-token "$PEER_TOKEN"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient()
			id, err := selfAgent(cmd.Context(), c, agentID)
			if err != nil {
				return err
			}
			in.URL, in.Text = args[0], args[1]
			res, err := c.A2ASend(cmd.Context(), id, in)
			if err != nil {
				return err
			}
			return output(cmd, res, func(w io.Writer) {
				fmt.Fprintf(w, "%s (%s; context %s, task %s):\n%s\n", res.Agent, res.State, res.ContextID, res.TaskID, res.Text)
			})
		},
	}
	send.Flags().StringVar(&in.Token, "peer-token", "", "bearer token the external agent issued to you")
	send.Flags().StringVar(&in.ContextID, "context-id", "", "continue this conversation")
	send.Flags().StringVar(&in.TaskID, "task-id", "", "answer this task (it asked for input)")
	cmd.AddCommand(enable, disable, show, issue, callers, revoke, send)
	return cmd
}

func setA2A(cmd *cobra.Command, agentID string, enabled bool, desc string, skills []string) error {
	c := newClient()
	id, err := selfAgent(cmd.Context(), c, agentID)
	if err != nil {
		return err
	}
	st := client.A2ASettings{Enabled: enabled, Description: desc}
	for _, s := range skills {
		parts := strings.SplitN(s, ":", 3)
		if len(parts) != 3 {
			return fmt.Errorf("--skill %q: write it as id:name:description", s)
		}
		st.Skills = append(st.Skills, client.A2ASkill{ID: parts[0], Name: parts[1], Description: parts[2]})
	}
	out, err := c.SetA2A(cmd.Context(), id, st)
	if err != nil {
		return err
	}
	return output(cmd, out, func(w io.Writer) { printSettings(w, out) })
}

func printSettings(w io.Writer, st client.A2ASettings) {
	if !st.Enabled {
		fmt.Fprintf(w, "A2A is disabled for %s\n", st.AgentID)
		return
	}
	fmt.Fprintf(w, "A2A is enabled for %s\n  card: %s\n  description: %s\n", st.AgentID, st.CardURL, st.Description)
	for _, s := range st.Skills {
		fmt.Fprintf(w, "  skill %s: %s — %s\n", s.ID, s.Name, s.Description)
	}
}

func newMCPCmd() *cobra.Command {
	var tokenEnv string
	cmd := &cobra.Command{
		Use:   "mcp --server URL --token-env VAR",
		Short: "Serve the hub's MCP tools over stdio, acting as the agent whose token is in $VAR",
		Long: `Runs an MCP server on standard input and output for MCP hosts that launch
tools as local processes (Claude Desktop, OpenClaw, IDEs). It forwards every
tool to the hub's Streamable HTTP endpoint (/mcp), authenticated as the agent
whose token is in the environment variable named by --token-env. Hosts that
speak Streamable HTTP can use <server>/mcp directly. See docs/mcp.md.`,
		Example: `  SWITCHBOARD_AGENT_TOKEN=sbt_… switchboard mcp --server http://127.0.0.1:7600 --token-env SWITCHBOARD_AGENT_TOKEN`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok := strings.TrimSpace(os.Getenv(tokenEnv))
			if tok == "" {
				return fmt.Errorf("environment variable %s holds no token: set it to the agent's token", tokenEnv)
			}
			return mcpserver.Proxy(cmd.Context(), g.server, tok, version.Get().Version, &mcp.IOTransport{
				Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{cmd.OutOrStdout()}})
		},
	}
	cmd.Flags().StringVar(&tokenEnv, "token-env", "SWITCHBOARD_TOKEN", "environment variable holding the agent's token")
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
