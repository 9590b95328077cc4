package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/pipeline/lint"
	"github.com/switchboard-hub/switchboard/internal/pipeline/skill"
)

func init() {
	extraCommands = append(extraCommands, newPipelineCmd, newSkillsCmd)
}

func newPipelineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Run skill pipelines and follow their executions",
		Long: `Run a pipeline file on the hub and follow it. The file and the skill files of
its skills_dir are read here and sent with the submission, so the hub does not
need to see this machine's disk. See docs/pipelines.md.`,
	}
	cmd.AddCommand(newPipelineRunCmd(), newPipelineValidateCmd(), newPipelineListCmd(), newPipelineStatusCmd(), newPipelineEventsCmd(),
		newPipelineExportCmd(), newPipelineCancelCmd(), newPipelineResumeCmd())
	return cmd
}

// readInput takes --input (JSON text, or @FILE, or - for stdin).
func readInput(cmd *cobra.Command, s string) (json.RawMessage, error) {
	var b []byte
	switch {
	case s == "":
		return nil, nil
	case s == "-":
		var err error
		if b, err = io.ReadAll(cmd.InOrStdin()); err != nil {
			return nil, err
		}
	case strings.HasPrefix(s, "@"):
		var err error
		if b, err = os.ReadFile(s[1:]); err != nil {
			return nil, fmt.Errorf("--input: %w", err)
		}
	default:
		b = []byte(s)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("--input is not valid JSON: give an object such as '{\"n\": 21}', @FILE or - for stdin")
	}
	return b, nil
}

// pipelineInput builds the submission for FILE.
func pipelineInput(cmd *cobra.Command, file, input string, onHub bool) (client.ExecutionInput, error) {
	var in client.ExecutionInput
	if onHub {
		abs, err := filepath.Abs(file)
		if err != nil {
			return in, err
		}
		in.File = abs
	} else {
		var err error
		if in, err = client.ReadPipelineFile(file); err != nil {
			return in, err
		}
	}
	raw, err := readInput(cmd, input)
	in.Input = raw
	return in, err
}

func newPipelineRunCmd() *cobra.Command {
	var input, key string
	var wait, onHub bool
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Submit a pipeline file with its input; prints the execution id (--wait follows it to the end)",
		Example: `  switchboard pipeline run report.yaml --input '{"n": 21}'
  switchboard pipeline run report.yaml --input @input.json --wait
  switchboard pipeline run /srv/pipelines/nightly.yaml --on-hub   # admin: a file on the hub's disk`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := pipelineInput(cmd, args[0], input, onHub)
			if err != nil {
				return err
			}
			in.IdempotencyKey = key
			c := newClient()
			x, err := c.SubmitExecution(cmd.Context(), in)
			if err != nil {
				return err
			}
			if !wait {
				return output(cmd, x, func(w io.Writer) { fmt.Fprintln(w, x.ID) })
			}
			if !g.json {
				fmt.Fprintf(cmd.ErrOrStderr(), "execution %s\n", x.ID)
			}
			x, err = follow(cmd, c, x, !g.json)
			if err != nil {
				return err
			}
			if g.json {
				if err := printJSON(cmd.OutOrStdout(), x); err != nil {
					return err
				}
			}
			return finished(x)
		},
	}
	f := cmd.Flags()
	f.StringVar(&input, "input", "", "the execution input: a JSON object, @FILE, or - for stdin")
	f.BoolVar(&wait, "wait", false, "follow the execution with a live progress view until it finishes; exit 1 if it failed or was cancelled")
	f.StringVar(&key, "idempotency-key", "", "a retried submission with the same key returns the same execution")
	f.BoolVar(&onHub, "on-hub", false, "admin: FILE is a path on the hub's disk (its skills_dir is read there)")
	return cmd
}

// finished turns an unsuccessful end into the command's error (exit 1).
func finished(x *client.Execution) error {
	switch x.Status {
	case "completed", "partial": // partial: only steps allowed to fail failed
		return nil
	case "failed":
		for _, st := range x.Steps {
			if st.Status == "failed" && st.Error != nil {
				return fmt.Errorf("execution %s failed: skill %s: %s: %s", x.ID, st.SkillID, st.Error.Code, st.Error.Message)
			}
		}
	}
	return fmt.Errorf("execution %s ended %s", x.ID, x.Status)
}

// follow waits for the execution to finish, drawing progress as events
// arrive: redrawn in place on a terminal, one line per event otherwise.
func follow(cmd *cobra.Command, c *client.Client, x *client.Execution, show bool) (*client.Execution, error) {
	w := cmd.OutOrStdout()
	var view *progressView
	if show {
		view = &progressView{w: w, tty: isTerminal(w)}
		view.draw(x, time.Now())
	}
	var after int64
	for {
		page, err := c.ExecutionEvents(cmd.Context(), x.ID, after, 20*time.Second)
		if err != nil {
			return nil, err
		}
		after = page.LastSeq
		if len(page.Events) > 0 || page.Status.Terminal() {
			if x, err = c.Execution(cmd.Context(), x.ID); err != nil {
				return nil, err
			}
		}
		if view != nil {
			view.events(page.Events)
			view.draw(x, time.Now())
		}
		if len(page.Events) == 0 && x.Status.Terminal() {
			if view != nil {
				view.done(x)
			}
			return x, nil
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

// progressView is the live view of `pipeline run --wait`: on a terminal a
// table of steps (state, attempt, duration) redrawn with ANSI cursor moves;
// elsewhere (pipes, logs, CI) one plain line per event.
type progressView struct {
	w     io.Writer
	tty   bool
	lines int // lines drawn last time (terminal)
}

func (v *progressView) events(evs []client.PipelineEvent) {
	if v.tty {
		return
	}
	for _, ev := range evs {
		line := ev.At.Local().Format("15:04:05") + "  " + ev.Type
		if ev.SkillID != "" {
			line += "  " + ev.SkillID
		}
		var d struct {
			Error   *client.SkillError `json:"error"`
			RetryAt string             `json:"retry_at"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		if d.Error != nil {
			line += "  " + d.Error.Code + ": " + d.Error.Message
		}
		fmt.Fprintln(v.w, line)
	}
}

func (v *progressView) draw(x *client.Execution, now time.Time) {
	if !v.tty {
		return
	}
	var b strings.Builder
	if v.lines > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", v.lines)
	}
	rows := progressRows(x, now)
	for _, r := range rows {
		b.WriteString("\x1b[2K")
		b.WriteString(r)
		b.WriteByte('\n')
	}
	v.lines = len(rows)
	fmt.Fprint(v.w, b.String())
}

func (v *progressView) done(x *client.Execution) {
	if v.tty {
		return
	}
	fmt.Fprintf(v.w, "execution %s %s in %s\n", x.ID, x.Status, elapsed(x.StartedAt, x.CompletedAt, time.Now()))
}

// progressRows renders the header and one aligned row per step.
func progressRows(x *client.Execution, now time.Time) []string {
	rows := []string{fmt.Sprintf("%s  %s  %s  %s", x.ID, x.PipelineID, x.Status, elapsed(x.StartedAt, x.CompletedAt, now))}
	width := 5
	for _, st := range x.Steps {
		width = max(width, len(st.SkillID))
	}
	for _, st := range x.Steps {
		mark := map[client.ExecutionStatus]string{"completed": "✓", "failed": "✗", "skipped": "-", "cancelled": "✗", "running": "▸", "retrying": "↻", "waiting_input": "?"}[st.Status]
		if mark == "" {
			mark = " "
		}
		row := fmt.Sprintf("  %s %-*s  %-13s", mark, width, st.SkillID, st.Status)
		if st.Attempt > 0 {
			row += fmt.Sprintf("  attempt %d", st.Attempt)
		}
		if st.StartedAt != nil {
			row += "  " + elapsed(st.StartedAt, st.CompletedAt, now)
		}
		if st.Error != nil && st.Status != "completed" {
			row += "  " + st.Error.Code
		}
		rows = append(rows, strings.TrimRight(row, " "))
	}
	return rows
}

func elapsed(from, to *time.Time, now time.Time) string {
	if from == nil {
		return ""
	}
	end := now
	if to != nil {
		end = *to
	}
	d := end.Sub(*from)
	if d < 0 {
		d = 0
	}
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func newPipelineValidateCmd() *cobra.Command {
	var input string
	var onHub bool
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a pipeline file, its skills and input on the hub without running it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := pipelineInput(cmd, args[0], input, onHub)
			if err != nil {
				return err
			}
			p, err := newClient().ValidatePipeline(cmd.Context(), in)
			if err != nil {
				return err
			}
			return output(cmd, p, func(w io.Writer) { fmt.Fprintf(w, "%s is valid\n", args[0]) })
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "the input to check against the references: JSON, @FILE or -")
	cmd.Flags().BoolVar(&onHub, "on-hub", false, "admin: FILE is a path on the hub's disk")
	return cmd
}

func newPipelineListCmd() *cobra.Command {
	var q client.ExecutionQuery
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List executions, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			xs, err := newClient().Executions(cmd.Context(), q)
			if err != nil {
				return err
			}
			return output(cmd, xs, func(w io.Writer) {
				var rows [][]string
				for _, x := range xs {
					rows = append(rows, []string{x.ID, x.PipelineID, string(x.Status), x.CreatedAt.Local().Format(time.DateTime), elapsed(x.StartedAt, x.CompletedAt, time.Now())})
				}
				table(w, []string{"EXECUTION", "PIPELINE", "STATUS", "CREATED", "DURATION"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&q.Status, "status", "", "only executions in this status")
	cmd.Flags().StringVar(&q.PipelineID, "pipeline", "", "only executions of this pipeline id")
	cmd.Flags().IntVar(&q.Limit, "limit", 50, "at most this many")
	return cmd
}

func newPipelineStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status ID",
		Short: "Show an execution: its status and each step's state, attempt, duration and error",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			x, err := newClient().Execution(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return output(cmd, x, func(w io.Writer) {
				for _, r := range progressRows(x, time.Now()) {
					fmt.Fprintln(w, r)
				}
				for _, st := range x.Steps {
					if st.Error != nil && st.Status != "completed" {
						fmt.Fprintf(w, "%s: %s: %s\n", st.SkillID, st.Error.Code, st.Error.Message)
					}
				}
			})
		},
	}
}

func newPipelineEventsCmd() *cobra.Command {
	var followFlag bool
	var format string
	var after int64
	cmd := &cobra.Command{
		Use:   "events ID",
		Short: "Print an execution's event log (the seed's events.log lines; --follow until it finishes)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "log" && format != "json" {
				return fmt.Errorf("--format must be log or json")
			}
			if g.json {
				format = "json"
			}
			c, w := newClient(), cmd.OutOrStdout()
			print := func(ev client.PipelineEvent) {
				if format == "json" {
					b, _ := json.Marshal(ev)
					fmt.Fprintln(w, string(b))
					return
				}
				fmt.Fprintln(w, ev.Line())
			}
			if !followFlag {
				if format == "log" {
					b, err := c.ExecutionEventLog(cmd.Context(), args[0], after)
					if err != nil {
						return err
					}
					_, err = w.Write(b)
					return err
				}
				for {
					page, err := c.ExecutionEvents(cmd.Context(), args[0], after, 0)
					if err != nil {
						return err
					}
					for _, ev := range page.Events {
						print(ev)
					}
					if len(page.Events) == 0 {
						return nil
					}
					after = page.LastSeq
				}
			}
			_, err := c.FollowExecution(cmd.Context(), args[0], after, print)
			return err
		},
	}
	cmd.Flags().BoolVarP(&followFlag, "follow", "f", false, "keep printing events as they happen, until the execution finishes")
	cmd.Flags().StringVar(&format, "format", "log", "log (the seed's events.log lines) or json (one event object per line)")
	cmd.Flags().Int64Var(&after, "after", 0, "only events after this seq")
	return cmd
}

func newPipelineExportCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "export ID",
		Short:   "Write the execution as the seed's state.json to stdout",
		Example: `  switchboard pipeline export run_… > state.json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := newClient().ExecutionState(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
}

func newPipelineCancelCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel an execution (steps in flight are cancelled and their agents told)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			x, err := newClient().CancelExecution(cmd.Context(), args[0], reason)
			if err != nil {
				return err
			}
			return output(cmd, x, func(w io.Writer) { fmt.Fprintf(w, "%s %s\n", x.ID, x.Status) })
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in pipeline:cancelled)")
	return cmd
}

func newPipelineResumeCmd() *cobra.Command {
	var skillID, data string
	cmd := &cobra.Command{
		Use:     "resume ID",
		Short:   "Release a step waiting at its approval gate, with data",
		Example: `  switchboard pipeline resume run_… --skill review --data '{"approved": true}'`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if skillID == "" {
				return fmt.Errorf("--skill is required: the step waiting for approval")
			}
			raw, err := readInput(cmd, data)
			if err != nil {
				return fmt.Errorf("--data: %w", err)
			}
			x, err := newClient().ResumeExecution(cmd.Context(), args[0], skillID, raw)
			if err != nil {
				return err
			}
			return output(cmd, x, func(w io.Writer) { fmt.Fprintf(w, "%s %s\n", x.ID, x.Status) })
		},
	}
	cmd.Flags().StringVar(&skillID, "skill", "", "the step waiting_input")
	cmd.Flags().StringVar(&data, "data", "", "JSON data for the step (@FILE or - for stdin)")
	return cmd
}

// ---- skills ---------------------------------------------------------------------

func newSkillsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skills",
		Short: "Lint skill files locally, and manage the hub's skill registry",
	}
	cmd.AddCommand(newSkillsLintCmd(), newSkillsPutCmd(), newSkillsListCmd(), newSkillsGetCmd(), newSkillsDeleteCmd())
	return cmd
}

// exitCode ends the program with that code after the command printed its
// own report (lint found problems): main prints nothing more.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func newSkillsLintCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "lint DIR|FILE...",
		Short: "Check skill files without a hub: every problem with its file and line; exit 1 if any",
		Long: `Check skill files (Markdown with YAML front-matter) without a hub. A
directory is searched recursively for *.md files (README.md excepted); two
files defining the same id are a problem. Every problem is printed as
FILE:LINE:COLUMN: FIELD: MESSAGE, and the exit code is 1 when there is any.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var all lint.Problems
			files := 0
			for _, a := range args {
				ps, n := lintPath(a)
				all = append(all, ps...)
				files += n
			}
			w := cmd.OutOrStdout()
			if g.json {
				if all == nil {
					all = lint.Problems{}
				}
				if err := printJSON(w, all); err != nil {
					return err
				}
			} else {
				for _, p := range all {
					fmt.Fprintln(w, p.String())
				}
			}
			if len(all) > 0 {
				if !g.json {
					fmt.Fprintf(w, "%d problems in %d skill files\n", len(all), files)
				}
				return exitCode(1)
			}
			if !g.json {
				fmt.Fprintf(w, "%d skill files, no problems\n", files)
			}
			return nil
		},
	}
}

// lintPath lints a skill file or every skill file under a directory; the
// problems name files as given on the command line.
func lintPath(path string) (lint.Problems, int) {
	st, err := os.Stat(path)
	if err != nil {
		return lint.Problems{{File: path, Message: "cannot read: " + err.Error()}}, 0
	}
	if !st.IsDir() {
		_, ps := skill.ParseFile(path)
		return ps, 1
	}
	skills, ps := skill.LoadDir(path)
	files := map[string]bool{}
	for _, s := range skills {
		files[s.Source] = true
	}
	for i := range ps {
		if ps[i].File != path {
			files[ps[i].File] = true
			ps[i].File = filepath.ToSlash(filepath.Join(path, ps[i].File))
		}
	}
	return ps, len(files)
}

func newSkillsPutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "put FILE...",
		Short: "Register skill files in your registry (the admin's: the deployment's shared one)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient()
			var recs []client.SkillRecord
			for _, f := range args {
				b, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				rec, err := c.PutSkill(cmd.Context(), filepath.ToSlash(f), string(b))
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				recs = append(recs, rec)
			}
			return output(cmd, recs, func(w io.Writer) {
				for _, r := range recs {
					fmt.Fprintf(w, "registered %s %s\n", r.Skill.ID, r.Skill.Version)
				}
			})
		},
	}
}

func skillRun(s *skill.Skill) string {
	switch {
	case s.Run.Agent != "":
		return "agent " + s.Run.Agent
	case len(s.Run.Exec) > 0:
		return "exec " + strings.Join(s.Run.Exec, " ")
	}
	return "approval"
}

func newSkillsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List your registered skills and the deployment's shared ones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			recs, err := newClient().Skills(cmd.Context())
			if err != nil {
				return err
			}
			return output(cmd, recs, func(w io.Writer) {
				var rows [][]string
				for _, r := range recs {
					owner := r.Owner
					if owner == "" {
						owner = "(shared)"
					}
					rows = append(rows, []string{r.Skill.ID, r.Skill.Version, skillRun(r.Skill), owner, r.UpdatedAt.Local().Format(time.DateTime)})
				}
				table(w, []string{"SKILL", "VERSION", "RUN", "OWNER", "UPDATED"}, rows)
			})
		},
	}
}

func newSkillsGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a registered skill",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := newClient().Skill(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return output(cmd, r, func(w io.Writer) {
				s := r.Skill
				fmt.Fprintf(w, "%s %s (%s)\nrun: %s\n", s.ID, s.Version, s.Source, skillRun(s))
				if s.Description != "" {
					fmt.Fprintln(w, s.Description)
				}
				if s.Body != "" {
					fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(s.Body))
				}
			})
		},
	}
}

func newSkillsDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Remove a skill from your registry",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := newClient().DeleteSkill(cmd.Context(), args[0]); err != nil {
				return err
			}
			if !g.json {
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
			}
			return nil
		},
	}
}
