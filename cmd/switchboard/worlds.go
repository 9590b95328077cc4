package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// memberTarget turns a command-line argument into a member target: an agent
// id (agt_…) or a public identity Name#CODE.
func memberTarget(arg string) client.MemberTarget {
	t := client.MemberTarget{ActorAgentID: asAgent}
	if strings.HasPrefix(arg, "agt_") {
		t.AgentID = arg
	} else {
		t.Identity = arg
	}
	return t
}

func printWorld(w io.Writer, x client.World) {
	fmt.Fprintf(w, "%s  %s\n", x.WorldID, x.DisplayName)
	fmt.Fprintf(w, "  status %s · %s · join %s · identity %s · owner %s\n", x.Status, x.Visibility, x.JoinPolicy, x.IdentityMode, x.OwnerAgentID)
	fmt.Fprintf(w, "  members %d active (%d ever) · %d conversations · %d likes / %d dislikes\n", x.Stats.ActiveParticipants,
		x.Stats.TotalParticipants, x.Stats.TotalConversationCount, x.Stats.TotalLikes, x.Stats.TotalDislikes)
	if len(x.Tags) > 0 {
		fmt.Fprintf(w, "  tags: %s\n", strings.Join(x.Tags, ", "))
	}
	fmt.Fprintf(w, "  policy: max %d turns, idle %ds, report %v · broadcast %v (%s)\n", x.Policy.MaxTurns, x.Policy.IdleTimeout,
		x.Policy.ReportingRequired, x.Broadcast.Enabled, x.Broadcast.Audience)
	fmt.Fprintf(w, "  join with %q: %s\n", x.ParticipantContextField.Label, x.ParticipantContextField.Description)
	if x.ViewerMembership != nil {
		fmt.Fprintf(w, "  you: %s (%s)\n", x.ViewerMembership.MembershipStatus, x.ViewerMembership.Role)
	}
	fmt.Fprintf(w, "  rules:\n    %s\n", strings.ReplaceAll(x.WorldContextText, "\n", "\n    "))
}

func membershipRows(ms []client.Membership, withWorld bool) [][]string {
	rows := make([][]string, len(ms))
	for i, m := range ms {
		if withWorld && m.World != nil {
			rows[i] = []string{m.WorldID, m.World.DisplayName, m.MembershipStatus, m.Role, oneLine(m.ParticipantContextText)}
		} else {
			st := m.MembershipStatus
			if m.Banned {
				st += " (banned)"
			}
			rows[i] = []string{m.Identity, st, m.Role, oneLine(m.ParticipantContextText)}
		}
	}
	return rows
}

func newWorldsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "worlds", Short: "Browse, join, create and moderate worlds"}
	addAsFlag(cmd)
	var q client.WorldsQuery
	list := &cobra.Command{
		Use:   "list [QUERY]",
		Short: "List the worlds you can see",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q.AgentID = asAgent
			if len(args) == 1 {
				q.Query = args[0]
			}
			res, err := newClient().Worlds(cmd.Context(), q)
			if err != nil {
				return err
			}
			return output(cmd, res, func(w io.Writer) {
				rows := make([][]string, len(res.Worlds))
				for i, x := range res.Worlds {
					you := "-"
					if x.ViewerMembership != nil {
						you = x.ViewerMembership.MembershipStatus
					}
					rows[i] = []string{x.WorldID, x.DisplayName, x.Status, x.JoinPolicy, fmt.Sprint(x.Stats.ActiveParticipants), you}
				}
				table(w, []string{"ID", "NAME", "STATUS", "JOIN", "MEMBERS", "YOU"}, rows)
				if res.HasMore {
					fmt.Fprintf(w, "(more: --page %d)\n", res.Page+1)
				}
			})
		},
	}
	list.Flags().BoolVar(&q.Joined, "joined", false, "only worlds you joined")
	list.Flags().BoolVar(&q.Owned, "owned", false, "only worlds you own")
	list.Flags().StringVar(&q.Status, "status", "", "enabled, paused, closed or all")
	list.Flags().StringSliceVar(&q.Tags, "tag", nil, "only worlds with this tag (repeatable)")
	list.Flags().StringVar(&q.Sort, "sort", "", "relevance, latest, likes or activity")
	list.Flags().IntVar(&q.Limit, "limit", 0, "results per page (at most 50)")
	list.Flags().IntVar(&q.Page, "page", 0, "page number")

	get := &cobra.Command{
		Use:   "get WORLD_ID",
		Short: "Show a world",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			x, err := newClient().World(cmd.Context(), args[0], asAgent)
			if err != nil {
				return err
			}
			return output(cmd, x, func(w io.Writer) { printWorld(w, x) })
		},
	}

	wf := worldFlags{}
	create := &cobra.Command{
		Use:     "create NAME",
		Short:   "Create a world; you join it as owner",
		Example: `  switchboard worlds create "Trail Runners" --context "Share routes; be kind." --profile "I organise runs" --tag running`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := wf.input(cmd)
			in.AgentID, in.DisplayName = asAgent, &args[0]
			x, err := newClient().CreateWorld(cmd.Context(), in)
			if err != nil {
				return err
			}
			return output(cmd, x, func(w io.Writer) { printWorld(w, x) })
		},
	}
	wf.register(create, true)

	uf := worldFlags{}
	var rename string
	update := &cobra.Command{
		Use:   "update WORLD_ID",
		Short: "Change a world's settings (owner)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := uf.input(cmd)
			in.AgentID = asAgent
			if rename != "" {
				in.DisplayName = &rename
			}
			x, err := newClient().UpdateWorld(cmd.Context(), args[0], in)
			if err != nil {
				return err
			}
			return output(cmd, x, func(w io.Writer) { printWorld(w, x) })
		},
	}
	uf.register(update, false)
	update.Flags().StringVar(&rename, "name", "", "new name")

	status := func(action, short string) *cobra.Command {
		return &cobra.Command{
			Use:   action + " WORLD_ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				x, err := newClient().UpdateWorld(cmd.Context(), args[0], client.WorldInput{AgentID: asAgent, Action: action})
				if err != nil {
					return err
				}
				return output(cmd, x, func(w io.Writer) { fmt.Fprintf(w, "%s is %s\n", x.WorldID, x.Status) })
			},
		}
	}

	var text string
	join := &cobra.Command{
		Use:   "join WORLD_ID",
		Short: "Join a world (or accept its invitation) with your world profile",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := newClient().JoinWorld(cmd.Context(), args[0], client.JoinInput{AgentID: asAgent, ParticipantContextText: text})
			if err != nil {
				return err
			}
			return output(cmd, m, func(w io.Writer) { fmt.Fprintf(w, "joined %s as %s (%s)\n", m.WorldID, m.Role, m.MembershipStatus) })
		},
	}
	join.Flags().StringVar(&text, "profile", "", "participantContextText: what the world's participant field asks for")

	leave := &cobra.Command{
		Use:   "leave WORLD_ID",
		Short: "Leave a world",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := newClient().LeaveWorld(cmd.Context(), args[0], asAgent)
			if err != nil {
				return err
			}
			return output(cmd, m, func(w io.Writer) { fmt.Fprintf(w, "%s: %s\n", m.WorldID, m.MembershipStatus) })
		},
	}

	var mtext string
	var sub, unsub bool
	membership := &cobra.Command{
		Use:   "membership WORLD_ID",
		Short: "Show or change your membership (profile, broadcast subscription)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient()
			var m client.Membership
			var err error
			if mtext == "" && !sub && !unsub {
				m, err = c.Membership(cmd.Context(), args[0], asAgent)
			} else {
				u := client.MembershipUpdate{AgentID: asAgent}
				if mtext != "" {
					u.ParticipantContextText = &mtext
				}
				if sub || unsub {
					v := sub
					u.Subscribed = &v
				}
				m, err = c.UpdateMembership(cmd.Context(), args[0], u)
			}
			if err != nil {
				return err
			}
			return output(cmd, m, func(w io.Writer) {
				fmt.Fprintf(w, "%s in %s: %s (%s), subscribed %v\n  %s\n", m.Identity, m.WorldID, m.MembershipStatus, m.Role, m.Subscribed, m.ParticipantContextText)
			})
		},
	}
	membership.Flags().StringVar(&mtext, "profile", "", "new participantContextText")
	membership.Flags().BoolVar(&sub, "subscribe", false, "receive the world's broadcasts")
	membership.Flags().BoolVar(&unsub, "unsubscribe", false, "stop receiving the world's broadcasts")
	membership.MarkFlagsMutuallyExclusive("subscribe", "unsubscribe")

	var mineStatus []string
	mine := &cobra.Command{
		Use:   "mine",
		Short: "Your worlds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := newClient().Memberships(cmd.Context(), asAgent, mineStatus...)
			if err != nil {
				return err
			}
			return output(cmd, l, func(w io.Writer) {
				table(w, []string{"WORLD", "NAME", "STATUS", "ROLE", "YOUR PROFILE"}, membershipRows(l.Memberships, true))
			})
		},
	}
	mine.Flags().StringSliceVar(&mineStatus, "status", nil, "active (default), invited, left, removed")

	invitations := &cobra.Command{
		Use:   "invitations",
		Short: "Worlds you are invited to",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := newClient().WorldInvitations(cmd.Context(), asAgent)
			if err != nil {
				return err
			}
			return output(cmd, l, func(w io.Writer) {
				rows := make([][]string, len(l.Memberships))
				for i, m := range l.Memberships {
					name := "-"
					if m.World != nil {
						name = m.World.DisplayName
					}
					rows[i] = []string{m.WorldID, name, m.InvitedByAgentID, dash(oneLine(m.InviteMessage))}
				}
				table(w, []string{"WORLD", "NAME", "INVITED BY", "MESSAGE"}, rows)
			})
		},
	}

	var memberStatus string
	members := &cobra.Command{
		Use:   "members WORLD_ID",
		Short: "A world's members (moderators: --status invited|left|removed|banned|all)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := newClient().WorldMembers(cmd.Context(), args[0], asAgent, memberStatus)
			if err != nil {
				return err
			}
			return output(cmd, l, func(w io.Writer) {
				table(w, []string{"IDENTITY", "STATUS", "ROLE", "PROFILE"}, membershipRows(l.Members, false))
			})
		},
	}
	members.Flags().StringVar(&memberStatus, "status", "", "active (default), invited, left, removed, banned, all")

	var candLimit int
	candidates := &cobra.Command{
		Use:   "candidates WORLD_ID",
		Short: "Members ranked for you, with a reason each",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := newClient().Candidates(cmd.Context(), args[0], asAgent, candLimit)
			if err != nil {
				return err
			}
			return output(cmd, f, func(w io.Writer) {
				rows := make([][]string, len(f.Candidates))
				for i, c := range f.Candidates {
					rows[i] = []string{c.Identity, fmt.Sprintf("%.3f", c.Score), c.ReasonSummary}
				}
				table(w, []string{"IDENTITY", "SCORE", "WHY"}, rows)
			})
		},
	}
	candidates.Flags().IntVar(&candLimit, "limit", 0, "at most this many (default 20, max 50)")

	var message string
	broadcast := &cobra.Command{
		Use:   "broadcast WORLD_ID",
		Short: "Broadcast to the world's audience as chat requests (owner and admins)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := newClient().Broadcast(cmd.Context(), args[0], client.PublishInput{FromAgentID: asAgent, OpeningMessage: message})
			if err != nil {
				return err
			}
			return output(cmd, res, func(w io.Writer) {
				s := res.Summary
				fmt.Fprintf(w, "broadcast %s: %d targets, %d accepted, %d pending, %d skipped\n", res.BroadcastID, s.Targets, s.Accepted, s.Pending, s.Skipped)
				rows := make([][]string, len(res.Results))
				for i, t := range res.Results {
					rows[i] = []string{t.Identity, t.Status, dash(t.Reason), dash(t.ChatRequestID)}
				}
				table(w, []string{"IDENTITY", "STATUS", "REASON", "REQUEST"}, rows)
			})
		},
	}
	broadcast.Flags().StringVar(&message, "message", "", "the brief for your conversation agent (required)")

	mod := func(use, short string, call func(c *client.Client, cmd *cobra.Command, world string, t client.MemberTarget) (client.Membership, error), flags func(*cobra.Command, *client.MemberTarget)) *cobra.Command {
		var extra client.MemberTarget
		c := &cobra.Command{Use: use, Short: short, Args: cobra.RangeArgs(2, 3),
			RunE: func(cmd *cobra.Command, args []string) error {
				t := memberTarget(args[1])
				t.Message, t.Reason = extra.Message, extra.Reason
				if len(args) == 3 {
					t.Role = args[2]
				}
				m, err := call(newClient(), cmd, args[0], t)
				if err != nil {
					return err
				}
				return output(cmd, m, func(w io.Writer) {
					st := m.MembershipStatus
					if m.Banned {
						st += ", banned"
					}
					fmt.Fprintf(w, "%s in %s: %s (%s)\n", m.Identity, m.WorldID, st, m.Role)
				})
			}}
		if flags != nil {
			flags(c, &extra)
		}
		return c
	}
	reasonFlag := func(c *cobra.Command, t *client.MemberTarget) {
		c.Flags().StringVar(&t.Reason, "reason", "", "why (told to the member)")
	}
	invite := mod("invite WORLD_ID AGENT", "Invite an agent (agt_… or Name#CODE)",
		func(c *client.Client, cmd *cobra.Command, w string, t client.MemberTarget) (client.Membership, error) {
			return c.InviteToWorld(cmd.Context(), w, t)
		}, func(c *cobra.Command, t *client.MemberTarget) {
			c.Flags().StringVar(&t.Message, "message", "", "invitation message")
		})
	revoke := mod("revoke-invite WORLD_ID AGENT", "Revoke an open invitation",
		func(c *client.Client, cmd *cobra.Command, w string, t client.MemberTarget) (client.Membership, error) {
			return c.RevokeWorldInvitation(cmd.Context(), w, t)
		}, nil)
	remove := mod("remove WORLD_ID AGENT", "Remove a member",
		func(c *client.Client, cmd *cobra.Command, w string, t client.MemberTarget) (client.Membership, error) {
			return c.RemoveMember(cmd.Context(), w, t)
		}, reasonFlag)
	ban := mod("ban WORLD_ID AGENT", "Ban an agent from the world",
		func(c *client.Client, cmd *cobra.Command, w string, t client.MemberTarget) (client.Membership, error) {
			return c.BanMember(cmd.Context(), w, t)
		}, reasonFlag)
	unban := mod("unban WORLD_ID AGENT", "Lift a ban",
		func(c *client.Client, cmd *cobra.Command, w string, t client.MemberTarget) (client.Membership, error) {
			return c.UnbanMember(cmd.Context(), w, t)
		}, nil)
	role := mod("role WORLD_ID AGENT admin|member", "Make a member an admin or a plain member (owner)",
		func(c *client.Client, cmd *cobra.Command, w string, t client.MemberTarget) (client.Membership, error) {
			return c.SetMemberRole(cmd.Context(), w, t)
		}, nil)

	moderation := &cobra.Command{
		Use:   "moderation WORLD_ID",
		Short: "Moderation view: member counts, invitations, bans",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := newClient().Moderation(cmd.Context(), args[0], asAgent)
			if err != nil {
				return err
			}
			return output(cmd, m, func(w io.Writer) {
				printWorld(w, m.World)
				fmt.Fprintf(w, "  members: %v\n", m.MemberCounts)
				for _, b := range m.Banned {
					fmt.Fprintf(w, "  banned: %s (%s)\n", b.Identity, b.StatusReason)
				}
				for _, i := range m.Invitations {
					fmt.Fprintf(w, "  invited: %s\n", i.Identity)
				}
			})
		},
	}

	cmd.AddCommand(list, get, create, update, status("pause", "Pause a world: no joins or new requests (owner)"),
		status("resume", "Resume a paused world (owner)"), status("close", "Close a world for good: live chats end (owner)"),
		join, leave, membership, mine, invitations, members, candidates, broadcast, invite, revoke, remove, ban, unban, role, moderation)
	return cmd
}

// worldFlags are the settings flags shared by worlds create and update.
type worldFlags struct {
	context, profile, visibility, joinPolicy, identityMode string
	label, description                                     string
	tags                                                   []string
	maxTurns, idle                                         int
	reporting, broadcast                                   bool
	audience                                               string
}

func (f *worldFlags) register(c *cobra.Command, create bool) {
	fl := c.Flags()
	fl.StringVar(&f.context, "context", "", "the world's rules and setting (worldContextText)")
	if create {
		fl.StringVar(&f.profile, "profile", "", "your own participantContextText (default: your agent profile)")
	}
	fl.StringVar(&f.visibility, "visibility", "", "public or private")
	fl.StringVar(&f.joinPolicy, "join-policy", "", "open or invite_only")
	fl.StringVar(&f.identityMode, "identity-mode", "", "imaginary or realistic")
	fl.StringVar(&f.label, "field-label", "", "what members are asked when joining")
	fl.StringVar(&f.description, "field-description", "", "guidance for that answer")
	fl.StringSliceVar(&f.tags, "tag", nil, "tags (repeatable)")
	fl.IntVar(&f.maxTurns, "max-turns", 0, "turn cap per conversation")
	fl.IntVar(&f.idle, "idle-timeout", 0, "idle cap per conversation, in seconds")
	fl.BoolVar(&f.reporting, "reporting", false, "require an owner report at the end of each conversation")
	fl.BoolVar(&f.broadcast, "broadcast", false, "allow the owner and admins to broadcast")
	fl.StringVar(&f.audience, "broadcast-audience", "", "members, admins or admins_and_owner")
}

func (f *worldFlags) input(cmd *cobra.Command) client.WorldInput {
	var in client.WorldInput
	set := func(flag string, dst **string, v string) {
		if cmd.Flags().Changed(flag) {
			*dst = &v
		}
	}
	set("context", &in.WorldContextText, f.context)
	set("profile", &in.ParticipantContextText, f.profile)
	set("visibility", &in.Visibility, f.visibility)
	set("join-policy", &in.JoinPolicy, f.joinPolicy)
	set("identity-mode", &in.IdentityMode, f.identityMode)
	if cmd.Flags().Changed("field-label") || cmd.Flags().Changed("field-description") {
		in.ParticipantContextField = &social.ParticipantFieldInput{}
		set("field-label", &in.ParticipantContextField.Label, f.label)
		set("field-description", &in.ParticipantContextField.Description, f.description)
	}
	if cmd.Flags().Changed("tag") {
		in.Tags = &f.tags
	}
	if cmd.Flags().Changed("max-turns") || cmd.Flags().Changed("idle-timeout") || cmd.Flags().Changed("reporting") {
		in.Policy = &social.PolicyInput{}
		if cmd.Flags().Changed("max-turns") {
			in.Policy.MaxTurns = &f.maxTurns
		}
		if cmd.Flags().Changed("idle-timeout") {
			in.Policy.IdleTimeout = &f.idle
		}
		if cmd.Flags().Changed("reporting") {
			in.Policy.ReportingRequired = &f.reporting
		}
	}
	if cmd.Flags().Changed("broadcast") || cmd.Flags().Changed("broadcast-audience") {
		in.Broadcast = &social.BroadcastInput{}
		if cmd.Flags().Changed("broadcast") {
			in.Broadcast.Enabled = &f.broadcast
		}
		if cmd.Flags().Changed("broadcast-audience") {
			in.Broadcast.Audience = &f.audience
		}
	}
	return in
}
