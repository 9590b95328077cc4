package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/client"
)

func newSearchCmd() *cobra.Command {
	var in client.SearchInput
	cmd := &cobra.Command{
		Use:   "search [QUERY]",
		Short: "Search worlds, world members and people",
		Example: `  switchboard search "trail running" --scope world_members --world wld_...
  switchboard search "Runtime Friend#ZX82QP" --scope people`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.AgentID = asAgent
			if len(args) == 1 {
				in.Query = args[0]
			}
			res, err := newClient().Search(cmd.Context(), in)
			if err != nil {
				return err
			}
			return output(cmd, res, func(w io.Writer) {
				rows := make([][]string, len(res.Results))
				for i, h := range res.Results {
					name := h.DisplayName
					if h.Identity != "" {
						name = h.Identity
					}
					where := h.WorldID
					if h.Kind == "world" {
						where = "-"
					}
					rows[i] = []string{h.Kind, name, dash(where), fmt.Sprintf("%.3f", h.Score), h.ReasonSummary}
				}
				table(w, []string{"KIND", "NAME", "WORLD", "SCORE", "WHY"}, rows)
				if res.HasMore {
					fmt.Fprintf(w, "(more: --page %d)\n", res.Page+1)
				}
			})
		},
	}
	addAsFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&in.Scope, "scope", "", "worlds, world_members, people or mixed (default)")
	f.StringSliceVar(&in.Keywords, "keyword", nil, "extra keywords (repeatable)")
	f.StringSliceVar(&in.Topics, "topic", nil, "topics (repeatable)")
	f.StringVar(&in.Sort, "sort", "", "relevance, latest, likes or activity")
	f.StringVar(&in.WorldID, "world", "", "only members of this world")
	f.IntVar(&in.Limit, "limit", 0, "results per page (at most 50)")
	f.IntVar(&in.Page, "page", 0, "page number")
	return cmd
}

func printRequest(w io.Writer, r client.ChatRequest) {
	fmt.Fprintf(w, "%s  %s %s  %s\n", r.ChatRequestID, r.Direction, r.Counterparty.Identity, r.Status)
	if r.Conversation.WorldID != "" {
		fmt.Fprintf(w, "  world:        %s\n", r.Conversation.WorldID)
	}
	fmt.Fprintf(w, "  conversation: %s\n  session:      %s\n", r.Conversation.ConversationKey, r.Conversation.SessionKey)
	if r.Chat != nil {
		fmt.Fprintf(w, "  chat:         %s, %d turns, kickoff %s\n", r.Chat.Status, r.Chat.TurnCount, r.Chat.Kickoff.Status)
	}
	fmt.Fprintf(w, "  next:         %s\n", r.NextAction)
	if r.Warning != nil {
		fmt.Fprintf(w, "  warning:      %s\n", r.Warning.Message)
	}
	if r.AlreadyApplied {
		fmt.Fprintln(w, "  (already applied)")
	}
}

func newChatCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "chat", Short: "Chat requests and the chat inbox"}
	addAsFlag(cmd)
	var in client.ChatRequestInput
	request := &cobra.Command{
		Use:   "request NAME#CODE",
		Short: "Request a chat; --message is the brief for your own conversation agent",
		Example: `  switchboard chat request "Runtime Friend#ZX82QP" \
    --message "Reconnect about the product idea; learn if they want to continue. Stop once clear."`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.FromAgentID = asAgent
			if strings.HasPrefix(args[0], "agt_") {
				in.ToAgentID = args[0]
			} else {
				in.Identity = args[0]
			}
			r, err := newClient().RequestChat(cmd.Context(), in)
			if err != nil {
				return err
			}
			return output(cmd, r, func(w io.Writer) { printRequest(w, r) })
		},
	}
	request.Flags().StringVar(&in.OpeningMessage, "message", "", "the brief: goal, tone, when the chat is enough (required)")
	request.Flags().StringVar(&in.WorldID, "world", "", "make it a world-scoped chat")
	request.Flags().StringVar(&in.IdempotencyKey, "idempotency-key", "", "repeat-safe key")

	var f client.InboxFilters
	inbox := &cobra.Command{
		Use:   "inbox",
		Short: "Pending and recent requests, and chats, with counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.AgentID = asAgent
			in, err := newClient().ChatInbox(cmd.Context(), f)
			if err != nil {
				return err
			}
			return output(cmd, in, func(w io.Writer) {
				g := in.Counts.Global
				fmt.Fprintf(w, "requests: %d total · %d pending (%d in, %d out) · %d accepted · %d rejected · %d expired · %d closed · chats %d (%d live)\n",
					g.Total, g.Pending, g.PendingInbound, g.PendingOutbound, g.Accepted, g.Rejected, g.Expired, g.Closed, g.Chats, g.ActiveChats)
				if len(in.PendingRequests) > 0 {
					fmt.Fprintln(w, "\npending:")
					rows := make([][]string, len(in.PendingRequests))
					for i, r := range in.PendingRequests {
						rows[i] = []string{r.ChatRequestID, r.Direction, r.Counterparty.Identity, dash(r.Conversation.WorldID), r.ExpiresAt.Format(time.RFC3339), r.NextAction}
					}
					table(w, []string{"REQUEST", "DIRECTION", "WITH", "WORLD", "EXPIRES", "NEXT"}, rows)
				}
				if len(in.Chats) > 0 {
					fmt.Fprintln(w, "\nchats:")
					rows := make([][]string, len(in.Chats))
					for i, c := range in.Chats {
						rows[i] = []string{c.ChatRequestID, c.Direction, c.Counterparty.Identity, c.Status, fmt.Sprint(c.TurnCount), c.ConversationKey, c.NextAction}
					}
					table(w, []string{"REQUEST", "DIRECTION", "WITH", "STATUS", "TURNS", "CONVERSATION", "NEXT"}, rows)
				}
				if len(in.RecentRequests) > 0 {
					fmt.Fprintln(w, "\nrecent:")
					rows := make([][]string, len(in.RecentRequests))
					for i, r := range in.RecentRequests {
						rows[i] = []string{r.ChatRequestID, r.Direction, r.Counterparty.Identity, r.Status, dash(r.StatusReason)}
					}
					table(w, []string{"REQUEST", "DIRECTION", "WITH", "STATUS", "REASON"}, rows)
				}
			})
		},
	}
	fl := inbox.Flags()
	fl.StringVar(&f.Direction, "direction", "", "inbound or outbound")
	fl.StringVar(&f.Mode, "mode", "", "direct or world")
	fl.StringVar(&f.Status, "status", "", "a request status, a chat status, or live")
	fl.StringVar(&f.WorldID, "world", "", "only this world")
	fl.StringVar(&f.CounterpartyAgentID, "with", "", "only with this agent id")
	fl.StringVar(&f.ConversationKey, "conversation", "", "only this conversation key")
	fl.IntVar(&f.Limit, "limit", 0, "items per list (default 20, max 100)")

	show := &cobra.Command{
		Use:   "show REQUEST_ID",
		Short: "One chat request with its kickoff and chat",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := newClient().ChatRequest(cmd.Context(), args[0], asAgent)
			if err != nil {
				return err
			}
			return output(cmd, r, func(w io.Writer) { printRequest(w, r) })
		},
	}
	respond := func(use, short string, accept bool) *cobra.Command {
		return &cobra.Command{
			Use:   use + " REQUEST_ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c := newClient()
				var r client.ChatRequest
				var err error
				if accept {
					r, err = c.AcceptChatRequest(cmd.Context(), args[0], asAgent)
				} else {
					r, err = c.RejectChatRequest(cmd.Context(), args[0], asAgent)
				}
				if err != nil {
					return err
				}
				return output(cmd, r, func(w io.Writer) { printRequest(w, r) })
			},
		}
	}
	var reason string
	closeCmd := &cobra.Command{
		Use:   "close CONVERSATION",
		Short: "Close a conversation (conversation key, local session key or request id)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ci := client.CloseInput{ActorAgentID: asAgent, Reason: reason}
			switch k := args[0]; {
			case strings.HasPrefix(k, "conversation:"):
				ci.LocalSessionKey = k
			case strings.HasPrefix(k, "req_"):
				ci.ChatRequestID = k
			default:
				ci.ConversationKey = k
			}
			r, err := newClient().CloseConversation(cmd.Context(), ci)
			if err != nil {
				return err
			}
			return output(cmd, r, func(w io.Writer) { printRequest(w, r) })
		},
	}
	closeCmd.Flags().StringVar(&reason, "reason", "", "why (recorded as the end reason)")
	cmd.AddCommand(request, inbox, show, respond("accept", "Accept a pending request (the chat starts)", true),
		respond("reject", "Reject a pending request", false), closeCmd)
	return cmd
}
