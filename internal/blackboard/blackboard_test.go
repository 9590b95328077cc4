package blackboard_test

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/blackboard"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newBridge(t *testing.T, c *client.Client, dir string, agents []string, clk clock.Clock) *blackboard.Bridge {
	t.Helper()
	b, err := blackboard.New(c, blackboard.Options{Dir: dir, Agents: agents, Lease: time.Minute, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pass(t *testing.T, b *blackboard.Bridge) blackboard.Stats {
	t.Helper()
	st, err := b.Sync(ctxT(t))
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return st
}

// tree lists the files under dir (relative, sorted), skipping the
// bridge's temporary files.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func readEnvelope(t *testing.T, path string) client.Envelope {
	t.Helper()
	var e client.Envelope
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return e
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func send(t *testing.T, c *client.Client, to, id, event string) {
	t.Helper()
	env := client.NewNotification(to, event, "hello "+id)
	env.ID = id
	if _, err := c.Send(ctxT(t), env); err != nil {
		t.Fatal(err)
	}
}

// statuses is the message log of a message id, as the admin sees it.
func statuses(t *testing.T, h *apptest.Hub, msgID string) string {
	t.Helper()
	tr, err := h.Admin.Trace(ctxT(t), msgID)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, r := range tr.Rows {
		s = append(s, r.Status)
	}
	return strings.Join(s, ",")
}

func fakeHub(c *app.Config) {
	c.Clock = clock.NewFake(time.Now())
	c.Bus.SweepInterval = time.Hour // tests sweep by hand
}

func TestMirrorAndAckByMove(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxT(t)
		_, ac := h.NewAgent("A")
		b, bc := h.NewAgent("B")
		send(t, ac, b.ID, "m1", "first")
		send(t, ac, b.ID, "m2", "second")
		dir := t.TempDir()
		br := newBridge(t, h.Admin, dir, []string{b.ID}, nil)
		if st := pass(t, br); st.Mirrored != 2 {
			t.Fatalf("stats %+v", st)
		}
		inbox := filepath.Join(dir, b.ID, "inbox")
		e := readEnvelope(t, filepath.Join(inbox, "m1.json"))
		if e.ID != "m1" || e.To.Agent != b.ID || e.Type != "notification" || e.TraceID == "" {
			t.Fatalf("inbox file %+v", e)
		}
		if n, _ := e.Notification(); n.Event != "first" || n.Message != "hello m1" {
			t.Fatalf("payload %s", e.Payload)
		}
		// The bridge holds the leases: the agent's own claim finds nothing.
		if ds, err := bc.Inbox(ctx, client.InboxOptions{}); err != nil || len(ds) != 0 {
			t.Fatalf("claim behind the bridge: %d %v", len(ds), err)
		}
		if st := pass(t, br); st != (blackboard.Stats{}) {
			t.Fatalf("a pass with nothing new did %+v", st)
		}

		// The agent moves one file to processed/ and deletes the other.
		if err := os.Rename(filepath.Join(inbox, "m1.json"), filepath.Join(dir, b.ID, "processed", "m1.json")); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(inbox, "m2.json")); err != nil {
			t.Fatal(err)
		}
		if st := pass(t, br); st.Acked != 2 {
			t.Fatalf("stats %+v", st)
		}
		for _, id := range []string{"m1", "m2"} {
			if got := statuses(t, h, id); got != "sent,delivered,processed" {
				t.Errorf("%s: %s", id, got)
			}
		}
		want := []string{b.ID + "/processed/m1.json", b.ID + "/processed/m2.json"}
		if got := tree(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("files %v, want %v", got, want)
		}
		if e := readEnvelope(t, filepath.Join(dir, b.ID, "processed", "m2.json")); e.ID != "m2" {
			t.Fatalf("deleted file not filed in processed/: %+v", e)
		}
	})
}

func TestOutboxSendsAsAgent(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxT(t)
		a, ac := h.NewAgent("A")
		b, _ := h.NewAgent("B")
		dir := t.TempDir()
		br := newBridge(t, h.Admin, dir, []string{b.ID}, nil)
		pass(t, br) // creates B's folders
		outbox := filepath.Join(dir, b.ID, "outbox")
		writeFile(t, filepath.Join(outbox, "reply.json"), `{"to":{"agent":"`+a.ID+`"},"type":"notification","payload":{"event":"done","message":"no id"}}`)
		writeFile(t, filepath.Join(outbox, "named.json"), `{"id":"b-1","from":{"agent":"`+b.ID+`"},"to":{"agent":"`+a.ID+`"},"type":"notification","payload":{"event":"done"}}`)
		if st := pass(t, br); st.Sent != 2 || st.Rejected != 0 {
			t.Fatalf("stats %+v", st)
		}
		ds, err := ac.Inbox(ctx, client.InboxOptions{Limit: 10})
		if err != nil || len(ds) != 2 {
			t.Fatalf("A's inbox %d %v", len(ds), err)
		}
		for _, d := range ds {
			if e, _ := d.Decode(); e.From.Agent != b.ID {
				t.Fatalf("sent as %s", e.From.Agent)
			}
		}
		var report blackboard.SendReport
		b2, _ := os.ReadFile(filepath.Join(dir, b.ID, "sent", "reply.result.json"))
		if err := json.Unmarshal(b2, &report); err != nil || report.File != "reply.json" || !strings.HasPrefix(report.Result.ID, "bb-") || report.Result.Deliveries != 1 {
			t.Fatalf("report %s %v", b2, err)
		}
		if entries, _ := os.ReadDir(outbox); len(entries) != 0 {
			t.Fatalf("outbox not emptied: %v", entries)
		}

		// The bridge stopped after sending but before filing: the same file
		// (same name, time and content) is sent again and deduplicated.
		sent := filepath.Join(dir, b.ID, "sent", "reply.json")
		info, _ := os.Stat(sent)
		data, _ := os.ReadFile(sent)
		writeFile(t, filepath.Join(outbox, "reply.json"), string(data))
		os.Chtimes(filepath.Join(outbox, "reply.json"), info.ModTime(), info.ModTime())
		if st := pass(t, br); st.Sent != 1 {
			t.Fatalf("stats %+v", st)
		}
		if ds, _ := ac.Inbox(ctx, client.InboxOptions{}); len(ds) != 0 {
			t.Fatalf("resend after a crash delivered again: %d", len(ds))
		}
		var dup int
		for _, f := range tree(t, filepath.Join(dir, b.ID, "sent")) {
			if strings.HasSuffix(f, ".result.json") && f != "reply.result.json" {
				var r blackboard.SendReport
				b, _ := os.ReadFile(filepath.Join(dir, b.ID, "sent", f))
				json.Unmarshal(b, &r)
				if r.Result.Duplicate && r.Result.ID == report.Result.ID {
					dup++
				}
			}
		}
		if dup != 1 {
			t.Fatalf("want one duplicate report beside the first: %v", tree(t, dir))
		}
	})
}

func TestMalformedOutboxFilesRejected(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		c, _ := h.NewAgent("C")
		p, _ := h.NewAgent("P", client.CreateAgentParams{ParentID: c.ID})
		w, _ := h.NewAgent("W", client.CreateAgentParams{ParentID: p.ID})
		dir := t.TempDir()
		br := newBridge(t, h.Admin, dir, []string{w.ID}, nil)
		pass(t, br)
		outbox := filepath.Join(dir, w.ID, "outbox")
		note := func(to, extra string) string {
			return `{"to":{"agent":"` + to + `"},"type":"notification","payload":{"event":"x"}` + extra + `}`
		}
		bad := map[string]struct {
			content string
			status  float64
			code    string
			class   string
		}{
			"garbage":    {"this is not json", 0, "invalid_json", "E003"},
			"array":      {"[1,2]", 0, "invalid_json", "E003"},
			"empty":      {"", 0, "invalid_json", "E003"},
			"misspelled": {note(p.ID, `,"prority":"high"`), 0, "unknown_field", "E003"},
			"impostor":   {`{"from":{"agent":"` + p.ID + `"},"to":{"agent":"` + c.ID + `"},"type":"notification","payload":{"event":"x"}}`, 0, "not_your_agent", "E001"},
			"big":        {note(p.ID, `,"metadata":{"pad":"`+strings.Repeat("x", protocol.MaxEnvelopeBytes)+`"}`), 0, "envelope_too_large", "E003"},
			"nobody":     {note("agt_nobody", ""), 404, "unknown_recipient", "E002"},
			"forbidden":  {note(c.ID, ""), 403, "forbidden_route", "E001"},
			"invalid":    {`{"to":{"agent":"` + p.ID + `"},"type":"command","payload":{"event":"x"}}`, 400, "validation_failed", "E003"},
			"expired":    {note(p.ID, `,"timestamp":"2020-01-01T00:00:00Z","ttl":60`), 400, "message_expired", "E003"},
		}
		for name, b := range bad {
			writeFile(t, filepath.Join(outbox, name+".json"), b.content)
		}
		if err := os.Symlink("/etc/hostname", filepath.Join(outbox, "link.json")); err != nil {
			t.Fatal(err)
		}
		ignored := []string{".draft.json", "half.json.tmp", "notes.txt"}
		for _, name := range ignored {
			writeFile(t, filepath.Join(outbox, name), "{")
		}
		before := h.BusSnapshot()
		if st := pass(t, br); st.Rejected != len(bad)+1 || st.Sent != 0 {
			t.Fatalf("stats %+v", st)
		}
		if after := h.BusSnapshot(); after != before {
			t.Fatalf("rejected files changed the bus:\n%s\n%s", before, after)
		}
		rejected := filepath.Join(dir, w.ID, "rejected")
		for name, b := range bad {
			kept, err := os.ReadFile(filepath.Join(rejected, name+".json"))
			if err != nil || string(kept) != b.content {
				t.Errorf("%s: rejected file not kept as written (%v)", name, err)
			}
			var e map[string]any
			raw, _ := os.ReadFile(filepath.Join(rejected, name+".error.json"))
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Errorf("%s: error file %s: %v", name, raw, err)
				continue
			}
			if e["error"] != b.code || e["class"] != b.class || e["status"] != b.status || e["file"] != name+".json" || e["message"] == "" || e["rejectedAt"] == nil {
				t.Errorf("%s: error file %s, want %s %s status %v", name, raw, b.code, b.class, b.status)
			}
		}
		var e map[string]any
		raw, _ := os.ReadFile(filepath.Join(rejected, "link.error.json"))
		if json.Unmarshal(raw, &e); e["error"] != "not_a_regular_file" {
			t.Errorf("symlink: %s", raw)
		}
		var left []string
		entries, _ := os.ReadDir(outbox)
		for _, en := range entries {
			left = append(left, en.Name())
		}
		sort.Strings(ignored)
		if strings.Join(left, " ") != strings.Join(ignored, " ") {
			t.Fatalf("outbox holds %v, want only the ignored %v", left, ignored)
		}
		// Not retried: another pass changes nothing.
		files := tree(t, dir)
		if st := pass(t, br); st != (blackboard.Stats{}) {
			t.Fatalf("second pass %+v", st)
		}
		if got := tree(t, dir); strings.Join(got, "\n") != strings.Join(files, "\n") {
			t.Fatalf("second pass moved files:\n%v\n%v", files, got)
		}
		// A rejected name can be used again; it does not overwrite the first.
		writeFile(t, filepath.Join(outbox, "garbage.json"), "still not json")
		if st := pass(t, br); st.Rejected != 1 {
			t.Fatalf("stats %+v", st)
		}
		if kept, _ := os.ReadFile(filepath.Join(rejected, "garbage.json")); string(kept) != "this is not json" {
			t.Fatalf("second rejection overwrote the first: %q", kept)
		}
	})
}

// A restarted bridge rewrites the same file for the same message, keeps
// the lease across lost leases and redeliveries, and acks what the agent
// processed even when its own record was lost.
func TestBridgeRestartIsIdempotent(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxT(t)
		fake := h.App.Config.Clock.(*clock.Fake)
		expireLeases := func() {
			t.Helper()
			fake.Advance(2 * time.Minute)
			if err := h.App.Bus.Sweep(ctx, fake.Now().Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		_, ac := h.NewAgent("A")
		b, _ := h.NewAgent("B")
		send(t, ac, b.ID, "m1", "first")
		dir := t.TempDir()
		first := newBridge(t, h.Admin, dir, []string{b.ID}, fake)
		if st := pass(t, first); st.Mirrored != 1 {
			t.Fatalf("stats %+v", st)
		}
		files := tree(t, dir)
		content, _ := os.ReadFile(filepath.Join(dir, b.ID, "inbox", "m1.json"))

		// Restart: a new bridge on the same folder adds nothing.
		second := newBridge(t, h.Admin, dir, []string{b.ID}, fake)
		if st := pass(t, second); st != (blackboard.Stats{}) {
			t.Fatalf("restarted bridge did %+v", st)
		}
		// The bridge was down past its lease: the hub redelivers, and the
		// same file stays (one file, same name and content).
		expireLeases()
		if st := pass(t, second); st.Mirrored != 0 {
			t.Fatalf("redelivery mirrored again: %+v", st)
		}
		if got := tree(t, dir); strings.Join(got, " ") != strings.Join(files, " ") {
			t.Fatalf("files after redelivery %v, want %v", got, files)
		}
		if now, _ := os.ReadFile(filepath.Join(dir, b.ID, "inbox", "m1.json")); string(now) != string(content) {
			t.Fatalf("file changed:\n%s\n%s", content, now)
		}
		var rec blackboard.Record
		raw, _ := os.ReadFile(filepath.Join(dir, b.ID, ".deliveries", "m1.json"))
		if json.Unmarshal(raw, &rec); rec.Attempt != 2 || rec.LeaseLost {
			t.Fatalf("record after redelivery %s", raw)
		}

		// The agent processes it while the lease is lost: the late ack is
		// refused, and the redelivery is acked instead of shown again.
		expireLeases()
		os.Rename(filepath.Join(dir, b.ID, "inbox", "m1.json"), filepath.Join(dir, b.ID, "processed", "m1.json"))
		if st := pass(t, second); st.Acked != 1 || st.Mirrored != 0 {
			t.Fatalf("stats %+v", st)
		}
		if got := statuses(t, h, "m1"); !strings.HasSuffix(got, "delivered,processed") {
			t.Fatalf("m1 log %s", got)
		}

		// The bridge stopped between writing a file and its record, and the
		// agent processed the file meanwhile: the redelivery is acked.
		send(t, ac, b.ID, "m2", "second")
		pass(t, second)
		os.Remove(filepath.Join(dir, b.ID, ".deliveries", "m2.json"))
		os.Rename(filepath.Join(dir, b.ID, "inbox", "m2.json"), filepath.Join(dir, b.ID, "processed", "m2.json"))
		expireLeases()
		third := newBridge(t, h.Admin, dir, []string{b.ID}, fake)
		if st := pass(t, third); st.Acked != 1 || st.Mirrored != 0 {
			t.Fatalf("stats %+v", st)
		}
		want := []string{b.ID + "/processed/m1.json", b.ID + "/processed/m2.json"}
		if got := tree(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("files %v, want %v", got, want)
		}
	}, fakeHub)
}

// While a file stays in inbox/ the bridge keeps its delivery leased.
func TestLeaseExtendedWhileInInbox(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := ctxT(t)
		fake := h.App.Config.Clock.(*clock.Fake)
		_, ac := h.NewAgent("A")
		b, bc := h.NewAgent("B")
		send(t, ac, b.ID, "slow", "work")
		br := newBridge(t, h.Admin, t.TempDir(), []string{b.ID}, fake)
		pass(t, br)
		for i := 0; i < 4; i++ {
			fake.Advance(40 * time.Second) // past half of the one-minute lease
			if st := pass(t, br); st.Extended != 1 {
				t.Fatalf("round %d: %+v", i, st)
			}
			fake.Advance(40 * time.Second) // past the original lease
			if err := h.App.Bus.Sweep(ctx, fake.Now().Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			if ds, _ := bc.Inbox(ctx, client.InboxOptions{}); len(ds) != 0 {
				t.Fatalf("round %d: the lease ran out while the file was in inbox/", i)
			}
			if st := pass(t, br); st.Extended != 1 {
				t.Fatalf("round %d, second pass: %+v", i, st)
			}
		}
		if got := statuses(t, h, "slow"); got != "sent,delivered" {
			t.Fatalf("log %s: the delivery should have been delivered once and kept", got)
		}
	}, fakeHub)
}

// With an agent's own token the bridge serves that agent alone.
func TestAgentTokenBridge(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		a, ac := h.NewAgent("A")
		b, bc := h.NewAgent("B")
		send(t, ac, b.ID, "m1", "hi")
		dir := t.TempDir()
		br := newBridge(t, bc, dir, []string{b.ID}, nil)
		pass(t, br)
		writeFile(t, filepath.Join(dir, b.ID, "outbox", "answer.json"), `{"to":{"agent":"`+a.ID+`"},"type":"notification","payload":{"event":"ok"}}`)
		os.Rename(filepath.Join(dir, b.ID, "inbox", "m1.json"), filepath.Join(dir, b.ID, "processed", "m1.json"))
		if st := pass(t, br); st.Acked != 1 || st.Sent != 1 {
			t.Fatalf("stats %+v", st)
		}
		other := newBridge(t, bc, t.TempDir(), []string{a.ID}, nil)
		if _, err := other.Sync(ctxT(t)); client.Code(err) != "not_your_agent" {
			t.Fatalf("mirroring another agent with an agent token: %v", err)
		}
	})
}
