package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// inOrder checks that every want appears in out, each after the previous
// one, and reports the first that does not.
func inOrder(t *testing.T, out string, wants ...string) {
	t.Helper()
	rest := out
	for _, w := range wants {
		i := strings.Index(rest, w)
		if i < 0 {
			if strings.Contains(out, w) {
				t.Fatalf("%q appears, but not after the lines before it; output:\n%s", w, out)
			}
			t.Fatalf("%q missing; output:\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}
}

// subsequence checks that want is a subsequence of got.
func subsequence(t *testing.T, got []string, want ...string) {
	t.Helper()
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("event %d (%q) of %v missing or out of order in %v", i, want[i], want, got)
	}
}

// between checks that want appears after from and before to.
func between(t *testing.T, out, from, want, to string) {
	t.Helper()
	i, j, k := strings.Index(out, from), strings.Index(out, want), strings.Index(out, to)
	if i < 0 || j < 0 || k < 0 || !(i < j && j < k) {
		t.Fatalf("want %q between %q and %q; output:\n%s", want, from, to, out)
	}
}

func assertGone(t *testing.T, res Result, tmp string) {
	t.Helper()
	if res.DataDir == "" {
		t.Fatal("Result.DataDir is empty")
	}
	if _, err := os.Stat(res.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data directory %s still exists (stat: %v)", res.DataDir, err)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil || len(entries) != 0 {
		t.Fatalf("the demo left %v in %s (%v)", entries, tmp, err)
	}
}

// The whole story is told, in order, from the hub's real answers and
// deliveries, and nothing is left behind.
func TestRunTellsTheWholeStory(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	var out bytes.Buffer
	res, err := Run(context.Background(), &out, Options{TempDir: tmp})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	s := out.String()
	inOrder(t, s,
		"created invite code INV-",
		"Mira          onboarded with the invite code → Mira#", "(account ready)",
		"Tomas         onboarded with the invite code → Tomas#",
		"Ada           onboarded with the invite code → Ada#",
		"created the world “Weekend Builders” (open to join · owner reports required · at most 12 turns)",
		"Tomas         joined “Weekend Builders”",
		"searched worlds for “open source golang” → Weekend Builders (2 members)",
		"Ada           joined “Weekend Builders”",
		"candidate feed of “Weekend Builders”: 2 members", "1. Mira#", "online", "2. Tomas#",
		"requests a chat with Mira#", adaBrief,
		"accepted at once (Mira's contact policy is open); kickoff queued, nextAction wait_for_sender_runtime_availability",
		"Ada           runner connected; the queued kickoff is delivered",
		"hub → Ada     kickoff: write the opener", "# Background · # Policy · # Task Instruction",
		"Ada → Mira    “"+ada.Script.Kickoff+"”", "the opener; Mira's context document: # Background · # Policy · # Live Turn",
		"live chat established",
		"Mira → Ada    “"+mira.Script.Replies[0]+"”",
		"♥ like recorded: Mira → Ada",
		"Ada → Mira    “"+ada.Script.Replies[0]+"”",
		"Mira → Ada    “"+mira.Script.Replies[1]+"”",
		"Ada → Mira    “"+ada.Script.Replies[1]+"”",
		"Ada asked to end: the chat is ending until Mira answers",
		"Mira → Ada    “"+mira.Script.Replies[2]+"”", "allowReply: false",
		"conversation ended: both_requested_end after 6 turns", "/transcript",
		"kept_silent (reply_not_allowed)",
		"Owner reports",
		"Inbox summary",
		": 6 turns (1 opener, 5 replies)",
		"Ada           inbox: 1 request (0 pending, 1 accepted) · 1 chat (0 live, 1 ended) · 1 like received",
		"outbound chat with Mira#", "ended (both_requested_end) after 6 turns · received a like",
		"Mira          inbox: 1 request (0 pending, 1 accepted) · 1 chat (0 live, 1 ended) · 0 likes received",
		"inbound chat with Ada#", "gave a like",
		"Tomas         inbox: 0 requests",
		"world “Weekend Builders”: 3 members · 1 conversation · 1 like",
		"removed. The whole story took",
	)
	// The two sides' report lines interleave as their runners run; each
	// comes after its request and before the summary.
	for _, w := range []string{
		"hub → Ada     owner report request: # Owner Report Request with the transcript",
		"Ada's owner   gets the report in main:agt_",
		"(announce)",
		"hub → Mira    owner report request",
		"Mira          keeps silent on the request",
		"Mira          files her report herself: POST /v1/reports",
		"directive ANNOUNCE_SKIP",
		"Mira's owner  gets the report in main:agt_",
		"Next step: read CONTRIBUTING.md",
		"Nothing needed from you until then.",
	} {
		between(t, s, "conversation ended", w, "Inbox summary")
	}
	inOrder(t, s, "hub → Ada     owner report request", "Ada's owner   gets the report")
	inOrder(t, s, "hub → Mira    owner report request", "Mira          keeps silent", "Mira          files her report herself", "Mira's owner  gets the report")
	if strings.Contains(s, "\x1b[") {
		t.Fatal("colour codes without Options.Color")
	}
	if res.Elapsed <= 0 {
		t.Fatalf("Elapsed %v", res.Elapsed)
	}
	assertGone(t, res, tmp)
}

// --json tells the same story as one event per line.
func TestRunJSON(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	var out bytes.Buffer
	res, err := Run(context.Background(), &out, Options{TempDir: tmp, JSON: true, Color: true})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	var kinds []string
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	var last int64
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line is not a JSON event: %v\n%s", err, sc.Text())
		}
		if e.Section == "" || e.Actor == "" || e.Text == "" || strings.Contains(e.Text, "\x1b[") {
			t.Fatalf("event %+v", e)
		}
		if e.ElapsedMS < last {
			t.Fatalf("elapsed went backwards at %+v", e)
		}
		last = e.ElapsedMS
		kinds = append(kinds, e.Kind)
	}
	subsequence(t, kinds, "hub", "invite", "onboarded", "onboarded", "onboarded", "world", "joined",
		"search", "joined", "candidates", "request", "accepted", "connected", "kickoff", "opener",
		"turn", "like", "turn", "turn", "turn", "ending", "turn", "ended", "last_word",
		"transcript", "inbox", "inbox", "inbox", "world_stats", "done")
	pos := func(k string) int { return slices.Index(kinds, k) }
	for _, k := range []string{"report_request", "report_silent", "report_filed", "owner_report"} {
		if !(pos("last_word") < pos(k) && pos(k) < pos("transcript")) {
			t.Fatalf("%s not between last_word and transcript: %v", k, kinds)
		}
	}
	n := 0
	for _, k := range kinds {
		if k == "owner_report" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d owner_report events, want 2: %v", n, kinds)
	}
	assertGone(t, res, tmp)
}

// cancelWriter cancels the demo's context once the story reaches a line.
type cancelWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	at     string
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(string(p), w.at) {
		w.cancel()
	}
	return len(p), nil
}

// An interrupt in the middle of the conversation (Ctrl-C) stops the
// runners and the hub and removes the data directory.
func TestRunInterruptedLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelWriter{at: "kickoff: write the opener", cancel: cancel}
	res, err := Run(ctx, w, Options{TempDir: tmp})
	if err == nil || !strings.Contains(err.Error(), "demo interrupted") {
		t.Fatalf("Run after cancel: %v\n%s", err, w.buf.String())
	}
	if strings.Contains(w.buf.String(), "Inbox summary") {
		t.Fatalf("the story went on after the interrupt:\n%s", w.buf.String())
	}
	assertGone(t, res, tmp)
}

// failWriter fails every write after the first n.
type failWriter struct {
	n int
}

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n <= 0 {
		return 0, errors.New("reader went away")
	}
	w.n--
	return len(p), nil
}

// When the output goes away (demo | head), the story stops and still
// cleans up, and the write error is what Run reports.
func TestRunStopsWhenOutputFails(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	res, err := Run(context.Background(), &failWriter{n: 3}, Options{TempDir: tmp})
	if err == nil || !strings.Contains(err.Error(), "reader went away") {
		t.Fatalf("Run: %v", err)
	}
	assertGone(t, res, tmp)
}

// A step that cannot finish in time fails the demo with the step named,
// rather than hanging it.
func TestRunTimeout(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	var out bytes.Buffer
	res, err := Run(context.Background(), &out, Options{TempDir: tmp, Timeout: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "the demo did not finish within 1ms") {
		t.Fatalf("Run: %v", err)
	}
	assertGone(t, res, tmp)
}
