// Command switchboard is the Switchboard hub and its command-line client:
// `switchboard serve` runs the hub; the other subcommands talk to a running
// hub over its HTTP API.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code)) // the command already reported why
		}
		printError(root.ErrOrStderr(), err)
		os.Exit(1)
	}
}

// globals are the flags every client subcommand shares.
type globals struct {
	json   bool
	server string
	token  string
}

var g globals

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "switchboard",
		Short: "Self-hosted messaging backbone for AI agents",
		Long: `Switchboard is a messaging backbone for AI agents in one binary: a typed
message bus with durable inboxes, a Claworld-compatible social relay for
agent-to-agent conversations, skill pipelines, and Continue/Stop reply-end
controls for Telegram.

Run the hub with 'switchboard serve'; every other command talks to a running
hub (--server, default $SWITCHBOARD_SERVER or http://127.0.0.1:7600) with a
token (--token, default $SWITCHBOARD_TOKEN, else ./.switchboard/admin-token).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.BoolVar(&g.json, "json", false, "print machine-readable JSON")
	pf.StringVar(&g.server, "server", env("SWITCHBOARD_SERVER", "http://127.0.0.1:7600"), "hub URL (env SWITCHBOARD_SERVER)")
	pf.StringVar(&g.token, "token", env("SWITCHBOARD_TOKEN", ""), "agent or admin token (env SWITCHBOARD_TOKEN)")
	root.AddCommand(newServeCmd(), newVersionCmd(), newAgentsCmd())
	for _, add := range extraCommands {
		root.AddCommand(add())
	}
	return root
}

// extraCommands lets each subsystem's CLI file add its command group.
var extraCommands []func() *cobra.Command

// newClient builds an SDK client from the global flags. Without a token it
// falls back to the admin token a local hub saved in ./.switchboard, so the
// quickstart works without copying secrets around.
func newClient() *client.Client {
	tok := g.token
	if tok == "" {
		if b, err := os.ReadFile(app.AdminTokenPath(env("SWITCHBOARD_DATA", ".switchboard"))); err == nil {
			tok = strings.TrimSpace(string(b))
		}
	}
	c := client.New(g.server, tok)
	c.UserAgent = "switchboard-cli"
	return c
}

// printJSON writes v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// output prints v as JSON with --json, otherwise calls human.
func output(cmd *cobra.Command, v any, human func(w io.Writer)) error {
	if g.json {
		return printJSON(cmd.OutOrStdout(), v)
	}
	human(cmd.OutOrStdout())
	return nil
}

// table writes aligned columns.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

func printError(w io.Writer, err error) {
	var ce *client.Error
	if g.json && errors.As(err, &ce) && len(ce.Raw) > 0 {
		fmt.Fprintln(w, strings.TrimSpace(string(ce.Raw)))
		return
	}
	fmt.Fprintln(w, "error:", err)
	if errors.As(err, &ce) {
		for f, m := range ce.Body.FieldErrors {
			fmt.Fprintf(w, "  %s: %s\n", f, m)
		}
		if ce.Status == 401 {
			fmt.Fprintln(w, "  hint: pass --token or set SWITCHBOARD_TOKEN (the admin token is in .switchboard/admin-token)")
		}
	}
	if strings.Contains(err.Error(), "connection refused") {
		fmt.Fprintf(w, "  hint: is the hub running? start it with 'switchboard serve' or point --server at it\n")
	}
}

// dataDirDefault is the data directory relative to the working directory.
func dataDirDefault() string {
	d := env("SWITCHBOARD_DATA", ".switchboard")
	if abs, err := filepath.Abs(d); err == nil {
		return abs
	}
	return d
}
