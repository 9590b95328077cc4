package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/version"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := version.Get()
			return output(cmd, v, func(w io.Writer) {
				fmt.Fprintf(w, "switchboard %s (commit %s, %s)\n", v.Version, v.Commit, v.GoVersion)
			})
		},
	}
}

func newAgentsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "Create, list and manage agents"}
	var p client.CreateAgentParams
	var tier string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an agent (admin); prints its id and token (shown once)",
		Example: `  switchboard agents create "Planner"
  switchboard agents create "Researcher" --parent agt_... --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p.DisplayName = args[0]
			p.Tier = client.Tier(tier)
			a, err := newClient().CreateAgent(cmd.Context(), p)
			if err != nil {
				return err
			}
			return output(cmd, a, func(w io.Writer) {
				fmt.Fprintf(w, "created %s (%s, tier %s)\n", a.ID, a.DisplayName, a.Tier)
				fmt.Fprintf(w, "token (shown once): %s\n", a.Token)
			})
		},
	}
	create.Flags().StringVar(&tier, "tier", "", "command, pm or worker (default: command, or one below the parent)")
	create.Flags().StringVar(&p.ParentID, "parent", "", "parent agent id (a worker's pm, a pm's command agent)")
	create.Flags().StringVar(&p.Owner, "owner", "", "owner label (who runs this agent)")

	var listTier, listParent string
	list := &cobra.Command{
		Use:   "list",
		Short: "List agents with tier, parent and liveness",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			as, err := newClient().Agents(cmd.Context(), client.Tier(listTier), listParent)
			if err != nil {
				return err
			}
			return output(cmd, as, func(w io.Writer) {
				rows := make([][]string, len(as))
				for i, a := range as {
					seen := "-"
					if !a.LastSeen.IsZero() {
						seen = a.LastSeen.Format("2006-01-02 15:04:05Z")
					}
					rows[i] = []string{a.ID, a.DisplayName, string(a.Tier), dash(a.ParentID), a.Liveness, seen}
				}
				table(w, []string{"ID", "NAME", "TIER", "PARENT", "LIVENESS", "LAST SEEN"}, rows)
			})
		},
	}
	list.Flags().StringVar(&listTier, "tier", "", "only this tier")
	list.Flags().StringVar(&listParent, "parent", "", "only children of this agent")

	rotate := &cobra.Command{
		Use:   "rotate-token AGENT_ID",
		Short: "Replace an agent's token; the old one stops working",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := newClient().RotateToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return output(cmd, map[string]string{"agentId": args[0], "token": tok}, func(w io.Writer) {
				fmt.Fprintf(w, "new token for %s (shown once): %s\n", args[0], tok)
			})
		},
	}
	cmd.AddCommand(create, list, rotate)
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
