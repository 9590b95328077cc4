package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// run executes the CLI as a user would, against the hub at h with token.
// The CLI keeps its flags in package variables, so these tests do not run
// in parallel.
func run(t *testing.T, h *apptest.Hub, token, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append([]string{"--server", h.URL, "--token", token}, args...))
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from %s:\n%s", name, path, got)
	}
}

func TestBBWriteAndRead(t *testing.T) {
	h := apptest.Start(t, "")
	a, _ := h.NewAgent("A")
	b, _ := h.NewAgent("B")
	envFile := filepath.Join(t.TempDir(), "task.json")
	os.WriteFile(envFile, []byte(`{"traceId":"trace-1","type":"request","priority":"high","ttl":3600,
		"payload":{"action":"task.assign","params":{"task":"summarize"}}}`), 0o644)

	out, err := run(t, h, a.Token, "", "bb", "write", b.ID+"/inbox/msg-42.json", envFile)
	if err != nil || !strings.Contains(out, "wrote "+b.ID+"/inbox/msg-42.json → 1 deliveries, trace trace-1") {
		t.Fatalf("bb write: %v\n%s", err, out)
	}
	out, err = run(t, h, a.Token, `{"type":"notification","payload":{"event":"ping"}}`, "blackboard", "write", b.ID, "-")
	if err != nil || !strings.Contains(out, "→ 1 deliveries") {
		t.Fatalf("bb write from stdin: %v\n%s", err, out)
	}
	for _, c := range []struct{ name, stdin, target, want string }{
		{"misspelled member", `{"type":"notification","payload":{"event":"x"},"prority":"high"}`, b.ID, "unknown field"},
		{"another recipient", `{"to":{"agent":"` + a.ID + `"},"type":"notification","payload":{"event":"x"}}`, b.ID, "to.agent is " + a.ID},
		{"id differs from the path", `{"id":"other","type":"notification","payload":{"event":"x"}}`, b.ID + "/inbox/msg-9.json", "the path names msg-9"},
		{"forbidden by the hub", `{"type":"notification","payload":{"event":"x"}}`, "agt_nobody", "unknown_recipient"},
	} {
		if out, err := run(t, h, a.Token, c.stdin, "bb", "write", c.target, "-"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\n%s", c.name, err, out)
		}
	}

	out, err = run(t, h, b.Token, "", "bb", "read", "--ack")
	if err != nil {
		t.Fatal(err)
	}
	norm := regexp.MustCompile(`dlv_[0-9a-z]+`).ReplaceAllString(out, "dlv_…")
	norm = regexp.MustCompile(`msg_[0-9a-z]+`).ReplaceAllString(norm, "msg_…")
	norm = regexp.MustCompile(`trc_[0-9a-z]+`).ReplaceAllString(norm, "trc_…")
	norm = regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z`).ReplaceAllString(norm, "TIME")
	norm = strings.NewReplacer(a.ID, "agt_A", b.ID, "agt_B").Replace(norm)
	golden(t, "bb_read", norm)
	if out, err := run(t, h, b.Token, "", "bb", "read"); err != nil || out != "inbox is empty\n" {
		t.Fatalf("read after --ack: %v %q", err, out)
	}
}

func TestBlackboardSyncOnce(t *testing.T) {
	h := apptest.Start(t, "")
	a, ac := h.NewAgent("A")
	b, _ := h.NewAgent("B")
	env := client.NewNotification(b.ID, "hello", "from A")
	env.ID = "hello-1"
	if _, err := ac.Send(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out, err := run(t, h, apptest.AdminToken, "", "blackboard", "sync", "--dir", dir, "--once")
	if err != nil || out != "mirrored 1, acked 0, extended 0, sent 0, rejected 0\n" {
		t.Fatalf("sync: %v %q", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, b.ID, "inbox", "hello-1.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, a.ID, "outbox")); err != nil {
		t.Fatalf("every agent gets its folders: %v", err)
	}
	if _, err := run(t, h, apptest.AdminToken, "", "bb", "sync", "--once"); err == nil || !strings.Contains(err.Error(), "dir") {
		t.Fatalf("sync without --dir: %v", err)
	}
}

// TestSendDeadline: a request sent with --deadline that nobody answers comes
// back to its sender as an E004 error envelope.
func TestSendDeadline(t *testing.T) {
	h := apptest.Start(t, "")
	a, _ := h.NewAgent("A")
	b, _ := h.NewAgent("B")
	out, err := run(t, h, a.Token, "", "--json", "send", b.ID, "--type", "request", "--action", "review", "--deadline", "500ms")
	if err != nil {
		t.Fatalf("send: %v\n%s", err, out)
	}
	var sent struct{ ID string }
	if err := json.Unmarshal([]byte(out), &sent); err != nil || sent.ID == "" {
		t.Fatalf("send output %q: %v", out, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		out, err = run(t, h, a.Token, "", "--json", "inbox", "--wait", "5s", "--ack")
		if err != nil {
			t.Fatalf("inbox: %v\n%s", err, out)
		}
		if strings.Contains(out, `"E004"`) {
			if !strings.Contains(out, sent.ID) {
				t.Fatalf("the E004 does not name request %s:\n%s", sent.ID, out)
			}
			return
		}
	}
	t.Fatalf("no E004 reached the sender; last inbox:\n%s", out)
}
