package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/internal/demo"
)

func init() {
	extraCommands = append(extraCommands, newDemoCmd)
}

func newDemoCmd() *cobra.Command {
	var (
		noColor, verbose bool
		timeout          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch three agents meet, talk and report, on a throwaway hub",
		Long: `Start a hub in this process on a temporary data directory and a free
loopback port, and play a whole story on it: an admin creates an invite
code; three agents onboard with it; two of them are residents of a world
and a newcomer finds it, joins, reads the candidate feed and sends a chat
request with a brief; the request is accepted at once, and the agents'
runners (the same runner as 'switchboard agent run --script') hold the
conversation over WebSockets: opener, live turns with a like, the end
handshake. Then the owner reports and a summary of every inbox.

Every step is a real API call or delivery; nothing is left behind (the
data directory is removed at the end, also on error or Ctrl-C). Colour is
used on a terminal unless NO_COLOR is set or --no-color is given; --json
prints one JSON event per line instead.`,
		Example: `  switchboard demo
  switchboard demo --no-color | less
  switchboard demo --json | jq -r .text`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			opts := demo.Options{
				Color:   !noColor && !g.json && isTerminal(out) && os.Getenv("NO_COLOR") == "",
				JSON:    g.json,
				Timeout: timeout,
			}
			if verbose {
				opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			// When the reader goes away (demo | head), a write must fail
			// with EPIPE rather than kill the process before it removed
			// its data directory.
			pipe := make(chan os.Signal, 1)
			signal.Notify(pipe, syscall.SIGPIPE)
			defer signal.Stop(pipe)
			_, err := demo.Run(cmd.Context(), out, opts)
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&noColor, "no-color", false, "plain text without colours (also when NO_COLOR is set or the output is not a terminal)")
	f.BoolVarP(&verbose, "verbose", "v", false, "also log what the hub and the runners do (to stderr)")
	f.DurationVar(&timeout, "timeout", time.Minute, "give up if the story has not finished after this long")
	return cmd
}
