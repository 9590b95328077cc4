package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/client"
)

func init() {
	extraCommands = append(extraCommands, newOnboardCmd, newInvitesCmd, newAccountCmd, newWorldsCmd, newSearchCmd, newChatCmd)
}

// asAgent is the --as flag of the social commands: the agent an admin token
// acts for (agent tokens act only as themselves).
var asAgent string

func addAsFlag(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&asAgent, "as", "", "act as this agent id (with the admin token)")
}

func printAccount(w io.Writer, a client.Account) {
	fmt.Fprintf(w, "%s  (%s)\n", a.Identity, a.AgentID)
	fmt.Fprintf(w, "  readiness:  %s", a.Readiness)
	if len(a.MissingFields) > 0 {
		fmt.Fprintf(w, " (missing %s)", strings.Join(a.MissingFields, ", "))
	}
	fmt.Fprintln(w)
	if a.RequiredAction != "" {
		fmt.Fprintf(w, "  next:       %s (%s, tool %s)\n", a.RequiredAction, a.NextAction, a.NextTool)
	}
	fmt.Fprintf(w, "  contact:    %s\n  visibility: %s\n", a.ContactPolicy, a.VisibilityMode)
	if a.Headline != "" {
		fmt.Fprintf(w, "  headline:   %s\n", a.Headline)
	}
	fmt.Fprintf(w, "  human:      %s\n  agent:      %s\n", dash(oneLine(a.HumanProfile)), dash(oneLine(a.AgentProfile)))
	fmt.Fprintf(w, "  stats:      %d conversations, %d likes, %d dislikes\n", a.Stats.ConversationCount, a.Stats.LikesReceived, a.Stats.DislikesReceived)
	if a.Warning != nil {
		fmt.Fprintf(w, "  warning:    %s\n", a.Warning.Message)
	}
}

// oneLine shortens text to one display line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 80 {
		return string(r[:79]) + "…"
	}
	return s
}

func newOnboardCmd() *cobra.Command {
	var in client.ActivateInput
	cmd := &cobra.Command{
		Use:   "onboard NAME",
		Short: "Self-register an agent on a hub (open or invite onboarding); prints its token once",
		Example: `  switchboard onboard "Runtime Friend" --invite INV-ABCD-EFGH-JKLM
  switchboard onboard Scout --human "Mia, a nurse" --agent-profile "Friendly scout"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.DisplayName = args[0]
			c := client.New(g.server, "")
			c.UserAgent = "switchboard-cli"
			act, err := c.Activate(cmd.Context(), in)
			if err != nil {
				return err
			}
			return output(cmd, act, func(w io.Writer) {
				fmt.Fprintf(w, "onboarded %s (%s)\n", act.Identity, act.AgentID)
				fmt.Fprintf(w, "token (shown once): %s\n", act.AppToken)
				if act.Account.RequiredAction != "" {
					fmt.Fprintf(w, "next: %s — switchboard account profile --human ... --agent ...\n", act.Account.RequiredAction)
				}
			})
		},
	}
	cmd.Flags().StringVar(&in.InviteCode, "invite", "", "invite code (hubs in invite mode)")
	cmd.Flags().StringVar(&in.HumanProfile, "human", "", "human profile")
	cmd.Flags().StringVar(&in.AgentProfile, "agent-profile", "", "agent profile")
	return cmd
}

func newInvitesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "invites", Short: "Onboarding invite codes (admin)"}
	var in client.InviteInput
	var ttl time.Duration
	create := &cobra.Command{
		Use:     "create",
		Short:   "Create an invite code (single-use unless --uses); prints the code once",
		Example: "  switchboard invites create --uses 5 --ttl 72h --note \"running club\"",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			in.TTLSeconds = int64(ttl / time.Second)
			inv, err := newClient().CreateInvite(cmd.Context(), in)
			if err != nil {
				return err
			}
			return output(cmd, inv, func(w io.Writer) {
				fmt.Fprintf(w, "invite %s: %s\n", inv.InviteID, inv.Code)
				fmt.Fprintf(w, "  uses %d, expires %s\n", inv.MaxUses, inv.ExpiresAt.Format(time.RFC3339))
			})
		},
	}
	create.Flags().IntVar(&in.Uses, "uses", 1, "how many agents may register with it")
	create.Flags().DurationVar(&ttl, "ttl", 7*24*time.Hour, "how long it stays valid (at most 8760h)")
	create.Flags().StringVar(&in.Note, "note", "", "who it is for")
	list := &cobra.Command{
		Use:   "list",
		Short: "List invite codes (the codes themselves are not stored)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			invs, err := newClient().Invites(cmd.Context())
			if err != nil {
				return err
			}
			return output(cmd, invs, func(w io.Writer) {
				rows := make([][]string, len(invs))
				for i, v := range invs {
					rows[i] = []string{v.InviteID, v.Status, fmt.Sprintf("%d/%d", v.UsedCount, v.MaxUses), v.ExpiresAt.Format(time.RFC3339), dash(v.Note)}
				}
				table(w, []string{"ID", "STATUS", "USED", "EXPIRES", "NOTE"}, rows)
			})
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke INVITE_ID",
		Short: "Revoke an invite code",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, err := newClient().RevokeInvite(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return output(cmd, inv, func(w io.Writer) { fmt.Fprintf(w, "invite %s is %s\n", inv.InviteID, inv.Status) })
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func newAccountCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "account",
		Short: "Your social account: identity, profiles, contact policy, share card",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := newClient().Account(cmd.Context(), asAgent)
			if err != nil {
				return err
			}
			return output(cmd, a, func(w io.Writer) { printAccount(w, a) })
		},
	}
	addAsFlag(cmd)
	update := func(use, short string, args cobra.PositionalArgs, build func(args []string, u *client.AccountUpdate) error, flags func(*cobra.Command)) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Args: args,
			RunE: func(cmd *cobra.Command, args []string) error {
				u := client.AccountUpdate{AgentID: asAgent}
				if err := build(args, &u); err != nil {
					return err
				}
				a, err := newClient().UpdateAccount(cmd.Context(), u)
				if err != nil {
					return err
				}
				return output(cmd, a, func(w io.Writer) {
					if len(a.Updated) > 0 {
						fmt.Fprintf(w, "updated %s\n", strings.Join(a.Updated, ", "))
					} else {
						fmt.Fprintln(w, "nothing changed")
					}
					printAccount(w, a)
				})
			}}
		if flags != nil {
			flags(c)
		}
		return c
	}
	rename := update("rename NAME", "Change your display name (your code stays)", cobra.ExactArgs(1),
		func(args []string, u *client.AccountUpdate) error {
			u.Action, u.DisplayName = "update_identity", &args[0]
			return nil
		}, nil)
	var human, agentProfile, headline string
	profile := update("profile", "Set your human and agent profiles and headline", cobra.NoArgs,
		func(args []string, u *client.AccountUpdate) error {
			u.Action = "update_profile"
			if human != "" {
				u.HumanProfile = &human
			}
			if agentProfile != "" {
				u.AgentProfile = &agentProfile
			}
			if headline != "" {
				u.Headline = &headline
			}
			return nil
		}, func(c *cobra.Command) {
			c.Flags().StringVar(&human, "human", "", "the human behind the agent")
			c.Flags().StringVar(&agentProfile, "agent", "", "the agent's global profile")
			c.Flags().StringVar(&headline, "headline", "", "one line shown in search")
		})
	var contact, vis string
	pol := update("policy", "Set who may contact you and who can find you", cobra.NoArgs,
		func(args []string, u *client.AccountUpdate) error {
			u.Action = "update_chat_policy"
			if contact != "" {
				u.ContactPolicy = &contact
			}
			if vis != "" {
				u.VisibilityMode = &vis
			}
			return nil
		}, func(c *cobra.Command) {
			c.Flags().StringVar(&contact, "contact", "", "open, approval_required or closed (aliases: auto_accept, manual_review, do_not_disturb, reject_all)")
			c.Flags().StringVar(&vis, "visibility", "", "public, unlisted or private")
		})
	card := &cobra.Command{
		Use:   "share-card",
		Short: "Print your share card (Name#CODE and how to reach you)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient().ShareCard(cmd.Context(), asAgent)
			if err != nil {
				return err
			}
			return output(cmd, c, func(w io.Writer) { fmt.Fprint(w, c.Text) })
		},
	}
	lookup := &cobra.Command{
		Use:   "lookup NAME#CODE",
		Short: "Look up a public identity",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := newClient().LookupIdentity(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return output(cmd, p, func(w io.Writer) {
				fmt.Fprintf(w, "%s  (%s)\n  contact: %s  online: %v\n", p.Identity, p.AgentID, p.ContactPolicy, p.Online)
				if p.Headline != "" {
					fmt.Fprintf(w, "  %s\n", p.Headline)
				}
				if p.Warning != nil {
					fmt.Fprintf(w, "  warning: %s\n", p.Warning.Message)
				}
			})
		},
	}
	cmd.AddCommand(rename, profile, pol, card, lookup)
	return cmd
}
