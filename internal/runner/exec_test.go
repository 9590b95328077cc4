package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// checkGolden compares got with testdata/name, rewriting it under -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file (run with -update after checking the change)\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

// wireDelivery is a delivery as the hub sends it, with a metadata field
// this version does not know.
const wireDelivery = `{
  "eventType": "delivery", "deliveryId": "dlv_01JZ", "sessionKey": "conversation:agt_tomas:agt_mira",
  "targetAgentId": "agt_tomas", "chatRequestId": "req_01JZ", "conversationKey": "conversation:agt_mira:agt_tomas",
  "worldId": "wld_trail", "createdAt": "2025-06-01T10:00:00Z",
  "payload": {"text": "Hey! Do you run on Sundays?", "contextText": "# Background\n\n## Conversation Facts\n\n- Mode: ` + "`world`" + `\n",
    "untrustedContext": [{"kind": "note", "text": "from the peer"}]},
  "metadata": {"fromAgentId": "agt_mira", "fromAgentCode": "K7Q2XP", "fromDisplayIdentity": "Mira#K7Q2XP",
    "allowReply": true, "acceptanceRequired": true, "deliveryType": "reply", "turnIndex": 1}
}`

func mustParse(t testing.TB, s string) Delivery {
	t.Helper()
	d, err := parseDelivery([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestExecInputGolden(t *testing.T) {
	// `cat` echoes its stdin, so the reply is exactly the input document.
	out, err := (&Exec{Command: "cat"}).Reply(context.Background(), mustParse(t, wireDelivery))
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(out), "", "  "); err != nil {
		t.Fatalf("stdin is not JSON: %v\n%s", err, out)
	}
	pretty.WriteByte('\n')
	checkGolden(t, "exec_input.golden", pretty.Bytes())
}

func TestExecInputAlwaysHasEveryKey(t *testing.T) {
	b, _ := json.Marshal(NewExecInput(Delivery{DeliveryID: "d", SessionKey: "s", Payload: Payload{Text: "x"}}))
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"deliveryId", "sessionKey", "deliveryType", "conversationKey", "chatRequestId", "worldId",
		"baseline", "contextText", "commandText", "text", "untrustedContext", "metadata"} {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing from %s", k, b)
		}
	}
	if m["metadata"] == nil || m["untrustedContext"] == nil {
		t.Errorf("metadata and untrustedContext must be an object and a list, got %s", b)
	}
}

func TestExecReply(t *testing.T) {
	d := mustParse(t, wireDelivery)
	tests := []struct {
		name, cmd, want, wantErr string
	}{
		{"stdout is the reply", "echo hello", "hello", ""},
		{"trimmed", "printf '\\n  hi there \\n\\n'", "hi there", ""},
		{"NO_REPLY passes through", "echo NO_REPLY", "NO_REPLY", ""},
		{"reads the JSON", `grep -o '"text":"[^"]*"' | head -n 1`, `"text":"Hey! Do you run on Sundays?"`, ""},
		{"environment", `echo "$SWITCHBOARD_DELIVERY_ID $SWITCHBOARD_SESSION_KEY $SWITCHBOARD_DELIVERY_TYPE"`,
			"dlv_01JZ conversation:agt_tomas:agt_mira reply", ""},
		{"non-zero exit", "echo partial; exit 3", "", "exit status 3"},
		{"stderr in the error", "echo 'model offline' >&2; exit 1", "", "model offline"},
		{"no output", "true", "", "printed nothing"},
		{"blank output", "echo '   '", "", "printed nothing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := (&Exec{Command: tc.cmd}).Reply(context.Background(), d)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	e := &Exec{Command: "sleep 60 & echo $! > " + pidFile + "; wait", Timeout: 300 * time.Millisecond}
	_, err := e.Reply(context.Background(), Delivery{DeliveryID: "d", SessionKey: "s"})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("got %v, want a timeout error", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d of the timed-out command is still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc: trust kill
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

func TestExecCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&Exec{Command: "sleep 60"}).Reply(ctx, Delivery{DeliveryID: "d", SessionKey: "s"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestExecDriverThroughRunner(t *testing.T) {
	h := newFakeHub(t)
	// Fails on "fail", answers everything else.
	drv := &Exec{Command: `input=$(cat); case "$input" in *'"text":"fail"'*) echo broken >&2; exit 3;; esac; echo "ok: $SWITCHBOARD_DELIVERY_ID"`}
	r := startRunner(t, h, drv)
	h.waitAuths(1)
	h.deliver(mkDelivery("dlv_1", "conversation:a:b", DeliveryReply, "fail"))
	h.deliver(mkDelivery("dlv_2", "conversation:a:b", DeliveryReply, "fine"))
	if got := h.waitAnswered("dlv_2"); got.text != "ok: dlv_2" {
		t.Errorf("dlv_2: %+v", got)
	}
	// dlv_1 came first in the same session, so its failure is already in.
	if ev := r.ev.wait(t, EventDriverFailed, "dlv_1"); !strings.Contains(ev.Err.Error(), "broken") {
		t.Errorf("failure event %v", ev.Err)
	}
	if a := h.answersOf("dlv_1"); len(a) != 0 {
		t.Errorf("dlv_1 answered %+v; a failed command must not be answered", a)
	}
	h.checkClean()
}
