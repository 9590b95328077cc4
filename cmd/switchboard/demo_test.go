package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/demo"
)

// `switchboard demo --json` plays the story on its own hub (no --server
// needed), prints one JSON event per line ending with "done", and leaves
// nothing in the temporary directory; the text form has no colour when the
// output is not a terminal.
func TestDemoCommand(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, args := range [][]string{{"demo", "--json"}, {"demo"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		err := root.ExecuteContext(ctx)
		cancel()
		if err != nil {
			t.Fatalf("switchboard %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		last := lines[len(lines)-1]
		if args[len(args)-1] == "--json" {
			var e demo.Event
			if err := json.Unmarshal([]byte(last), &e); err != nil || e.Kind != "done" {
				t.Fatalf("last line %q: %v", last, err)
			}
		} else if !strings.Contains(last, "removed. The whole story took") || strings.Contains(out.String(), "\x1b[") {
			t.Fatalf("text output:\n%s", out.String())
		}
		if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
			t.Fatalf("left behind in TMPDIR: %v %v", entries, err)
		}
	}
}
