package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/client"
)

func init() {
	extraCommands = append(extraCommands, newSendCmd, newInboxCmd, newAckCmd, newNackCmd, newTraceCmd, newDeadLettersCmd)
}

func newSendCmd() *cobra.Command {
	var (
		typ, action, event, message, params, payload, priority, session, ifOffline, file, as, requestID, status, traceID, id string
		ttl                                                                                                                  int
		deadline                                                                                                             time.Duration
	)
	cmd := &cobra.Command{
		Use:   "send TO",
		Short: "Send an envelope to an agent (or 'broadcast' with --tier)",
		Long: `Send an envelope. TO is an agent id, or 'broadcast' together with --to-tier.
The payload is built from the flags of the message type, or given whole with
--payload; --file sends a complete envelope from a JSON file.`,
		Example: `  switchboard send agt_… --type request --action task.assign --params '{"task":"summarize"}'
  switchboard send agt_… --type request --action review --deadline 30s
  switchboard send agt_… --type notification --event progress --message "3 of 10 done"
  switchboard send broadcast --to-tier worker --type notification --event standup
  switchboard send --file envelope.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var env client.Envelope
			if file != "" {
				b, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(b, &env); err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
			} else {
				if len(args) != 1 {
					return fmt.Errorf("give the recipient (an agent id or 'broadcast') or --file")
				}
				env.To.Agent = args[0]
				env.Type = client.MessageType(typ)
				var p map[string]any
				if payload != "" {
					if err := json.Unmarshal([]byte(payload), &p); err != nil {
						return fmt.Errorf("--payload: %w", err)
					}
				} else {
					p = map[string]any{}
					switch typ {
					case "request":
						p["action"] = action
						if deadline > 0 {
							p["deadline"] = time.Now().Add(deadline).UTC().Format(time.RFC3339Nano)
						}
						if params != "" {
							var pp any
							if err := json.Unmarshal([]byte(params), &pp); err != nil {
								return fmt.Errorf("--params: %w", err)
							}
							p["params"] = pp
						}
					case "notification":
						p["event"], p["message"] = event, message
					case "response":
						p["requestId"], p["status"] = requestID, status
						if params != "" {
							var pp any
							if err := json.Unmarshal([]byte(params), &pp); err != nil {
								return fmt.Errorf("--params: %w", err)
							}
							p["result"] = pp
						}
					case "error":
						p["code"], p["message"], p["requestId"] = event, message, requestID
					}
				}
				b, _ := json.Marshal(p)
				env.Payload = b
			}
			if cmd.Flags().Changed("to-tier") {
				env.To.Tier = client.Tier(tierFlag)
			}
			if id != "" {
				env.ID = id
			}
			if traceID != "" {
				env.TraceID = traceID
			}
			if priority != "" {
				env.Priority = client.Priority(priority)
			}
			if ttl > 0 {
				env.TTL = ttl
			}
			if session != "" {
				env.To.Session = session
			}
			if ifOffline != "" {
				env.To.IfOffline = client.OfflinePolicy(ifOffline)
			}
			if as != "" {
				env.From.Agent = as
			}
			res, err := newClient().Send(cmd.Context(), &env)
			if err != nil {
				return err
			}
			return output(cmd, res, func(w io.Writer) {
				dup := ""
				if res.Duplicate {
					dup = " (duplicate: already accepted)"
				}
				fmt.Fprintf(w, "accepted %s → %d deliveries, trace %s%s\n", res.ID, res.Deliveries, res.TraceID, dup)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", "notification", "request, response, notification or error")
	f.StringVar(&action, "action", "", "request action, e.g. task.assign")
	f.StringVar(&params, "params", "", "request params (or response result) as JSON")
	f.StringVar(&event, "event", "", "notification event (or error code E001…E006)")
	f.StringVar(&message, "message", "", "notification or error message")
	f.StringVar(&requestID, "request-id", "", "for responses and errors: the request answered")
	f.StringVar(&status, "status", "success", "for responses: success, failure or partial")
	f.StringVar(&payload, "payload", "", "the whole payload as JSON (overrides the other payload flags)")
	f.DurationVar(&deadline, "deadline", 0, "for requests: answer within this long, or the hub sends you an E004 timeout error (e.g. 30s)")
	f.StringVar(&priority, "priority", "", "low, normal, high or critical")
	f.IntVar(&ttl, "ttl", 0, "seconds before it expires (default: the hub's)")
	f.StringVar(&session, "session", "", "deliver to this session of the recipient (realtime)")
	f.StringVar(&ifOffline, "if-offline", "", "with --session: queue (default) or fail when the session is not connected")
	f.StringVar(&tierFlag, "to-tier", "", "recipient tier (required for broadcast)")
	f.StringVar(&file, "file", "", "send the envelope in this JSON file")
	f.StringVar(&as, "as", "", "admin only: send as this agent")
	f.StringVar(&id, "id", "", "message id (a repeat of the same id is a duplicate)")
	f.StringVar(&traceID, "trace", "", "trace id to join")
	return cmd
}

var tierFlag string

func newInboxCmd() *cobra.Command {
	var o client.InboxOptions
	var ack bool
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "Claim deliveries from the inbox (long-poll with --wait)",
		Example: `  switchboard inbox --wait 30s
  switchboard inbox --ack --limit 50
  switchboard inbox --agent agt_… --overdue   # admin: another agent's overdue deliveries`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient()
			ds, err := c.Inbox(cmd.Context(), o)
			if err != nil {
				return err
			}
			if ack {
				for _, d := range ds {
					if _, err := c.Ack(cmd.Context(), d.DeliveryID, d.Attempt); err != nil {
						return err
					}
				}
			}
			return output(cmd, ds, func(w io.Writer) {
				if len(ds) == 0 {
					fmt.Fprintln(w, "inbox is empty")
					return
				}
				for _, d := range ds {
					env, _ := d.Decode()
					fmt.Fprintf(w, "%s  attempt %d  lease until %s\n", d.DeliveryID, d.Attempt, d.LeaseUntil.Format(time.RFC3339))
					if env != nil {
						fmt.Fprintf(w, "  %s %s from %s  priority %s  trace %s\n", env.Type, env.ID, env.From.Agent, env.Priority, env.TraceID)
						fmt.Fprintf(w, "  %s\n", string(env.Payload))
					}
				}
				if ack {
					fmt.Fprintf(w, "acked %d\n", len(ds))
				}
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Limit, "limit", 10, "at most this many (1–100)")
	f.DurationVar(&o.Wait, "wait", 0, "long-poll up to this long (max 60s)")
	f.StringVar(&o.Session, "session", "", "only deliveries for this session")
	f.BoolVar(&o.Overdue, "overdue", false, "only deliveries past their priority's target")
	f.DurationVar(&o.Lease, "lease", 0, "lease length (default the hub's)")
	f.StringVar(&o.Agent, "agent", "", "admin only: whose inbox")
	f.BoolVar(&ack, "ack", false, "acknowledge what was claimed")
	return cmd
}

func newAckCmd() *cobra.Command {
	var attempt int
	cmd := &cobra.Command{
		Use:   "ack DELIVERY_ID...",
		Short: "Acknowledge deliveries (processed)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient()
			var out []client.Settle
			for _, id := range args {
				s, err := c.Ack(cmd.Context(), id, attempt)
				if err != nil {
					return err
				}
				out = append(out, s)
			}
			return output(cmd, out, func(w io.Writer) {
				for _, s := range out {
					note := ""
					if s.AlreadyApplied {
						note = " (already acked)"
					}
					fmt.Fprintf(w, "%s %s (attempt %d)%s\n", s.DeliveryID, s.State, s.Attempt, note)
				}
			})
		},
	}
	cmd.Flags().IntVar(&attempt, "attempt", 0, "the attempt you received (refused if it was redelivered since)")
	return cmd
}

func newNackCmd() *cobra.Command {
	var attempt int
	var delay time.Duration
	var reason string
	cmd := &cobra.Command{
		Use:   "nack DELIVERY_ID",
		Short: "Give a delivery back for redelivery",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := newClient().Nack(cmd.Context(), args[0], attempt, delay, reason)
			if err != nil {
				return err
			}
			return output(cmd, s, func(w io.Writer) { fmt.Fprintf(w, "%s %s (attempt %d)\n", s.DeliveryID, s.State, s.Attempt) })
		},
	}
	cmd.Flags().IntVar(&attempt, "attempt", 0, "the attempt you received")
	cmd.Flags().DurationVar(&delay, "delay", 0, "redeliver after this long")
	cmd.Flags().StringVar(&reason, "error", "", "why it failed (kept in the dead letter history)")
	return cmd
}

func newTraceCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "trace ID",
		Short: "Print the message log of a trace (or message id) as a timeline",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tr, err := newClient().Trace(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return output(cmd, tr, func(w io.Writer) { printTimeline(w, tr) })
		},
	}
}

// printTimeline renders a trace as one line per transition, with the time
// since the first row and arrows between agents.
func printTimeline(w io.Writer, tr client.Trace) {
	fmt.Fprintf(w, "trace %s (%d events)\n", tr.TraceID, len(tr.Rows))
	if len(tr.Rows) == 0 {
		return
	}
	start := tr.Rows[0].Timestamp
	rows := make([][]string, len(tr.Rows))
	for i, r := range tr.Rows {
		extra := []string{}
		if r.Attempt > 0 {
			extra = append(extra, fmt.Sprintf("attempt %d", r.Attempt))
		}
		if r.LatencyMs > 0 {
			extra = append(extra, fmt.Sprintf("latency %dms", r.LatencyMs))
		}
		if r.Detail != "" {
			extra = append(extra, r.Detail)
		}
		rows[i] = []string{
			r.Timestamp.Format("15:04:05.000"),
			"+" + r.Timestamp.Sub(start).Round(time.Millisecond).String(),
			strings.ToUpper(r.Status),
			r.Type + " " + r.MsgID,
			r.From + " → " + r.To,
			strings.Join(extra, ", "),
		}
	}
	table(w, []string{"TIME", "SINCE", "STATUS", "MESSAGE", "ROUTE", "DETAIL"}, rows)
}

func newDeadLettersCmd() *cobra.Command {
	var agent, reason string
	var limit int
	cmd := &cobra.Command{
		Use:   "dead-letters",
		Short: "List dead deliveries with reason and history (replay with 'dead-letters replay')",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dl, err := newClient().DeadLetters(cmd.Context(), agent, reason, limit)
			if err != nil {
				return err
			}
			return output(cmd, dl, func(w io.Writer) {
				if len(dl) == 0 {
					fmt.Fprintln(w, "no dead letters")
					return
				}
				rows := make([][]string, len(dl))
				for i, d := range dl {
					note := d.LastError
					if d.ReplayedAs != "" {
						note = "replayed as " + d.ReplayedAs
					}
					rows[i] = []string{d.DeliveryID, d.AgentID, d.Reason, fmt.Sprint(d.Attempts), d.DeadAt.Format(time.RFC3339), note}
				}
				table(w, []string{"DELIVERY", "AGENT", "REASON", "ATTEMPTS", "DEAD AT", "LAST ERROR"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent's (admin)")
	cmd.Flags().StringVar(&reason, "reason", "", "expired or max_attempts")
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many")
	replay := &cobra.Command{
		Use:   "replay DELIVERY_ID",
		Short: "Put a dead delivery back in its inbox as a new delivery",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := newClient().Replay(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return output(cmd, s, func(w io.Writer) { fmt.Fprintf(w, "replayed as %s (%s)\n", s.DeliveryID, s.State) })
		},
	}
	cmd.AddCommand(replay)
	return cmd
}
