package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/blackboard"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

func init() {
	extraCommands = append(extraCommands, newBlackboardCmd)
}

func newBlackboardCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "blackboard",
		Aliases: []string{"bb"},
		Short:   "The seed's file blackboard: mirror inboxes to a folder, write and read envelopes",
		Long: `Agents that can only read and write files use the bus through a folder:
'blackboard sync' mirrors inboxes to <dir>/<agent>/inbox/<msg-id>.json, acks
what agents move to processed/, and sends what they drop in outbox/.
'bb write' and 'bb read' are the seed's blackboard commands over the API.
See docs/blackboard.md.`,
	}
	cmd.AddCommand(newBBSyncCmd(), newBBWriteCmd(), newBBReadCmd())
	return cmd
}

func newBBSyncCmd() *cobra.Command {
	var o blackboard.Options
	var once bool
	cmd := &cobra.Command{
		Use:   "sync --dir DIR",
		Short: "Mirror inboxes into DIR and send what agents drop in their outboxes",
		Long: `Keep DIR in step with the hub, one folder per agent:
  inbox/<msg-id>.json      delivered envelopes (their leases are extended while they stay)
  processed/               move a file here (or delete it) to acknowledge it
  outbox/<name>.json       drop an envelope here (write NAME.json.tmp, then rename) to send it
  sent/, rejected/         where outbox files end up, with a .result.json or .error.json beside them
With the admin token it mirrors every agent (or those named with --agent);
with an agent token, name that agent with --agent.`,
		Example: `  switchboard blackboard sync --dir ./blackboard
  switchboard bb sync --dir /srv/blackboard --agent agt_… --agent agt_… --interval 2s
  switchboard bb sync --dir ./blackboard --once`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			b, err := blackboard.New(newClient(), o)
			if err != nil {
				return err
			}
			if !once {
				fmt.Fprintf(cmd.ErrOrStderr(), "mirroring inboxes into %s every %s (Ctrl-C to stop)\n", o.Dir, o.Interval)
				return b.Run(cmd.Context())
			}
			st, err := b.Sync(cmd.Context())
			if err != nil {
				return err
			}
			return output(cmd, st, func(w io.Writer) {
				fmt.Fprintf(w, "mirrored %d, acked %d, extended %d, sent %d, rejected %d\n", st.Mirrored, st.Acked, st.Extended, st.Sent, st.Rejected)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Dir, "dir", "", "the blackboard folder (required)")
	f.StringArrayVar(&o.Agents, "agent", nil, "mirror this agent (repeatable; default every agent the token sees)")
	f.BoolVar(&once, "once", false, "make one pass and exit")
	f.DurationVar(&o.Interval, "interval", time.Second, "pause between passes")
	f.DurationVar(&o.Lease, "lease", 5*time.Minute, "lease of mirrored deliveries, extended while the file stays in inbox/ (10s–1h)")
	f.IntVar(&o.MaxPending, "max-pending", 1000, "files an agent's inbox/ may hold before the bridge stops claiming")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// seedPath matches the seed's "AGENT/inbox/MSG-ID.json" form of a recipient.
var seedPath = regexp.MustCompile(`^([^/]+)/inbox/([^/]+)\.json$`)

func newBBWriteCmd() *cobra.Command {
	var as string
	cmd := &cobra.Command{
		Use:   "write AGENT FILE",
		Short: "Send the envelope in FILE to AGENT as yourself (the seed's 'blackboard write')",
		Long: `Send the envelope in FILE ('-' for standard input) to AGENT. AGENT is an agent
id, or the seed's path form AGENT/inbox/MSG-ID.json, which also gives the
envelope its id. from.agent defaults to the caller; to.agent, when the file
has one, must name AGENT. The file is checked strictly: a misspelled member
is an error, not silently dropped.`,
		Example: `  switchboard bb write agt_… task.json
  switchboard bb write agt_…/inbox/msg-42.json task.json
  echo '{"type":"notification","payload":{"event":"ping"}}' | switchboard bb write agt_… -`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			to, msgID := args[0], ""
			if m := seedPath.FindStringSubmatch(to); m != nil {
				to, msgID = m[1], m[2]
			}
			var data []byte
			var err error
			if args[1] == "-" {
				data, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), protocol.MaxEnvelopeBytes+1))
			} else {
				data, err = os.ReadFile(args[1])
			}
			if err != nil {
				return err
			}
			env, err := protocol.DecodeEnvelope(data)
			if err != nil {
				return fmt.Errorf("%s: %w", args[1], err)
			}
			if env.To.Agent != "" && env.To.Agent != to {
				return fmt.Errorf("%s: to.agent is %s, not %s; omit it or write to that agent", args[1], env.To.Agent, to)
			}
			env.To.Agent = to
			if msgID != "" {
				if env.ID != "" && env.ID != msgID {
					return fmt.Errorf("%s: id is %s, but the path names %s", args[1], env.ID, msgID)
				}
				env.ID = msgID
			}
			if as != "" {
				env.From.Agent = as
			}
			res, err := newClient().Send(cmd.Context(), env)
			if err != nil {
				return err
			}
			return output(cmd, res, func(w io.Writer) {
				dup := ""
				if res.Duplicate {
					dup = " (duplicate: already accepted)"
				}
				fmt.Fprintf(w, "wrote %s/inbox/%s.json → %d deliveries, trace %s%s\n", to, res.ID, res.Deliveries, res.TraceID, dup)
			})
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "admin only: send as this agent")
	return cmd
}

// bbMessage is one message as 'bb read --json' prints it.
type bbMessage struct {
	File       string          `json:"file"`
	DeliveryID string          `json:"deliveryId"`
	Attempt    int             `json:"attempt"`
	LeaseUntil time.Time       `json:"leaseUntil"`
	Envelope   json.RawMessage `json:"envelope"`
}

func newBBReadCmd() *cobra.Command {
	var o client.InboxOptions
	var ack bool
	cmd := &cobra.Command{
		Use:   "read",
		Short: "Print your inbox as the seed's 'blackboard read' does: one envelope per message file",
		Long: `Claim messages from your inbox and print each as the file the blackboard
would hold (AGENT/inbox/MSG-ID.json) followed by its envelope. Without --ack
the messages stay leased for --lease and then come back (each read counts as
a delivery attempt); with --ack they are acknowledged, like moving them to
processed/.`,
		Example: `  switchboard bb read
  switchboard bb read --ack --limit 50
  switchboard bb read --wait 30s --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient()
			ds, err := c.Inbox(cmd.Context(), o)
			if err != nil {
				return err
			}
			msgs := make([]bbMessage, 0, len(ds))
			for _, d := range ds {
				env, err := d.Decode()
				if err != nil {
					return err
				}
				msgs = append(msgs, bbMessage{File: env.To.Agent + "/inbox/" + env.ID + ".json", DeliveryID: d.DeliveryID, Attempt: d.Attempt,
					LeaseUntil: d.LeaseUntil, Envelope: d.Envelope})
				if ack {
					if _, err := c.Ack(cmd.Context(), d.DeliveryID, d.Attempt); err != nil {
						return err
					}
				}
			}
			return output(cmd, msgs, func(w io.Writer) {
				if len(msgs) == 0 {
					fmt.Fprintln(w, "inbox is empty")
					return
				}
				for _, m := range msgs {
					state := "leased until " + m.LeaseUntil.UTC().Format(time.RFC3339)
					if ack {
						state = "acked"
					}
					fmt.Fprintf(w, "== %s  (delivery %s, attempt %d, %s)\n", m.File, m.DeliveryID, m.Attempt, state)
					var buf bytes.Buffer
					if json.Indent(&buf, m.Envelope, "", "  ") != nil {
						buf.Reset()
						buf.Write(m.Envelope)
					}
					fmt.Fprintf(w, "%s\n", buf.Bytes())
				}
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&ack, "ack", false, "acknowledge what was read (like moving it to processed/)")
	f.IntVar(&o.Limit, "limit", 10, "at most this many (1–100)")
	f.DurationVar(&o.Wait, "wait", 0, "long-poll up to this long for a message (max 60s)")
	f.DurationVar(&o.Lease, "lease", 0, "how long unacknowledged messages stay hidden (default the hub's)")
	f.StringVar(&o.Session, "session", "", "only messages for this session")
	f.StringVar(&o.Agent, "agent", "", "admin only: whose inbox")
	return cmd
}
