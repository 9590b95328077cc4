package pipeline

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestMain doubles as the helper command exec steps run in tests:
// `<test binary> pipeline-helper MODE [ARG]`.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "pipeline-helper" {
		os.Exit(helper(os.Args[2], os.Args[3:]))
	}
	os.Exit(m.Run())
}

func helper(mode string, args []string) int {
	in, _ := io.ReadAll(os.Stdin)
	var input map[string]any
	_ = json.Unmarshal(in, &input)
	out := func(v any) int {
		b, _ := json.Marshal(v)
		os.Stdout.Write(b)
		return 0
	}
	ok := func(data any) int { return out(map[string]any{"success": true, "data": data, "errors": []any{}}) }
	switch mode {
	case "echo":
		return ok(input)
	case "fetch":
		// Fails its first attempt with a retryable error, then succeeds.
		if os.Getenv("SWITCHBOARD_ATTEMPT") == "1" {
			return out(map[string]any{"success": false, "data": nil, "errors": []any{map[string]any{"code": "UPSTREAM_UNAVAILABLE", "message": "the source did not answer; try again"}}})
		}
		n, _ := input["n"].(float64)
		return ok(map[string]any{"items": []any{n, n + 1}, "source": input["source"]})
	case "merge":
		return ok(map[string]any{"summary": fmt.Sprintf("%v (sum %v, label %v)", input["label"], input["sum"], input["label_status"])})
	case "count":
		// Records each run (one line per run) in the file named by args[0].
		f, err := os.OpenFile(args[0], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return 2
		}
		fmt.Fprintln(f, os.Getenv("SWITCHBOARD_IDEMPOTENCY_KEY"), os.Getenv("SWITCHBOARD_ATTEMPT"))
		f.Close()
		return ok(input)
	case "hang-first":
		// Records the run, then hangs on attempt 1 and succeeds afterwards.
		f, err := os.OpenFile(args[0], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return 2
		}
		fmt.Fprintln(f, os.Getpid(), os.Getenv("SWITCHBOARD_ATTEMPT"))
		f.Close()
		if os.Getenv("SWITCHBOARD_ATTEMPT") == "1" {
			time.Sleep(time.Hour)
		}
		return ok(input)
	case "big":
		n, _ := strconv.Atoi(args[0])
		os.Stdout.WriteString(`{"success": true, "data": "` + strings.Repeat("x", n) + `"}`)
		return 0
	case "garbage":
		os.Stdout.WriteString("this is not JSON")
		return 0
	case "exit3":
		os.Stderr.WriteString("something broke\n")
		return 3
	case "sleep":
		// Starts a grandchild in the same process group, records its pid,
		// and hangs: a timeout must kill both.
		child := exec.Command(os.Args[0], "pipeline-helper", "hang")
		child.Stdin = strings.NewReader("{}")
		if err := child.Start(); err != nil {
			return 2
		}
		os.WriteFile(args[0], []byte(strconv.Itoa(child.Process.Pid)), 0o644)
		time.Sleep(time.Hour)
		return 0
	case "hang":
		time.Sleep(time.Hour)
		return 0
	case "env":
		var names []string
		for _, kv := range os.Environ() {
			names = append(names, strings.SplitN(kv, "=", 2)[0])
		}
		return ok(map[string]any{"names": names, "key": os.Getenv("SWITCHBOARD_IDEMPOTENCY_KEY")})
	}
	return 2
}

// fakeBus records envelopes once the transaction that sent them commits,
// and lets a test answer them.
type fakeBus struct {
	mu     sync.Mutex
	sent   []*protocol.Envelope
	refuse map[string]error
	wake   chan struct{}
}

func newFakeBus() *fakeBus { return &fakeBus{wake: make(chan struct{}, 1), refuse: map[string]error{}} }

func (b *fakeBus) Send(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
	b.mu.Lock()
	err := b.refuse[env.To.Agent]
	b.mu.Unlock()
	if err != nil {
		return err
	}
	if err := env.Validate(); err != nil {
		return err
	}
	tx.AfterCommit(func() {
		b.mu.Lock()
		b.sent = append(b.sent, env)
		b.mu.Unlock()
		signal(b.wake)
	})
	return nil
}

func (b *fakeBus) all() []*protocol.Envelope {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*protocol.Envelope(nil), b.sent...)
}

// tasks returns the task.assign requests sent to agent.
func (b *fakeBus) tasks(agent string) []*protocol.Envelope {
	var out []*protocol.Envelope
	for _, env := range b.all() {
		if env.Type == protocol.TypeRequest && env.To.Agent == agent {
			out = append(out, env)
		}
	}
	return out
}

// notifications returns the events notified to agent, in order.
func (b *fakeBus) notifications(agent string) []string {
	var out []string
	for _, env := range b.all() {
		if env.Type == protocol.TypeNotification && env.To.Agent == agent {
			p, _ := env.Notification()
			out = append(out, p.Event)
		}
	}
	return out
}

func (b *fakeBus) to(agent string, typ protocol.MessageType) []*protocol.Envelope {
	var out []*protocol.Envelope
	for _, env := range b.all() {
		if env.Type == typ && env.To.Agent == agent {
			out = append(out, env)
		}
	}
	return out
}

// waitTasks waits until agent has received n tasks and returns them.
func (b *fakeBus) waitTasks(t *testing.T, agent string, n int) []*protocol.Envelope {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if got := b.tasks(agent); len(got) >= n {
			return got
		}
		select {
		case <-b.wake:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("agent %s received %d tasks, want %d", agent, len(b.tasks(agent)), n)
		}
	}
}

type taskParams struct {
	ExecutionID  string          `json:"execution_id"`
	SkillID      string          `json:"skill_id"`
	Attempt      int             `json:"attempt"`
	Input        json.RawMessage `json:"input"`
	Instructions string          `json:"instructions"`
}

func params(t *testing.T, env *protocol.Envelope) taskParams {
	t.Helper()
	p, err := env.Request()
	if err != nil || p.Action != ActionTaskAssign {
		t.Fatalf("not a task: %v %+v", err, p)
	}
	var tp taskParams
	if err := json.Unmarshal(p.Params, &tp); err != nil {
		t.Fatal(err)
	}
	return tp
}

// reply builds the worker's response to a task.
func reply(task *protocol.Envelope, status protocol.ResponseStatus, result string) *protocol.Envelope {
	payload := fmt.Sprintf(`{"requestId": %q, "status": %q, "result": %s}`, task.ID, status, result)
	return &protocol.Envelope{Version: protocol.Version, ID: protocol.NewID(protocol.PrefixMessage), TraceID: task.TraceID,
		From: protocol.Address{Agent: task.To.Agent}, To: protocol.Address{Agent: SystemAgent}, Type: protocol.TypeResponse,
		Priority: protocol.PriorityNormal, Timestamp: time.Now().UTC(), Payload: json.RawMessage(payload)}
}

func errorReply(task *protocol.Envelope, class protocol.Class, recoverable bool, msg string) *protocol.Envelope {
	payload := fmt.Sprintf(`{"requestId": %q, "code": %q, "message": %q, "recoverable": %v}`, task.ID, class, msg, recoverable)
	return &protocol.Envelope{Version: protocol.Version, ID: protocol.NewID(protocol.PrefixMessage), TraceID: task.TraceID,
		From: protocol.Address{Agent: task.To.Agent}, To: protocol.Address{Agent: SystemAgent}, Type: protocol.TypeError,
		Priority: protocol.PriorityNormal, Timestamp: time.Now().UTC(), Payload: json.RawMessage(payload)}
}

var t0 = time.Date(2026, 1, 14, 10, 0, 0, 0, time.UTC)

type harness struct {
	t   *testing.T
	db  *store.DB
	e   *Engine
	bus *fakeBus
	clk *clock.Fake
	dir string
}

func newHarness(t *testing.T, db *store.DB, mod func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, db: db, bus: newFakeBus(), clk: clock.NewFake(t0), dir: t.TempDir()}
	h.e = h.engine(mod)
	return h
}

func (h *harness) engine(mod func(*Options)) *Engine {
	opts := Options{Bus: h.bus, Clock: h.clk, PollInterval: 20 * time.Millisecond, BackoffBase: time.Second, BackoffMax: time.Minute,
		Rand: func() float64 { return 0.5 }}
	if mod != nil {
		mod(&opts)
	}
	e, err := New(h.db, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(e.Stop)
	return e
}

// skill writes a skill file into the harness directory; @HELPER@ is
// replaced by the test binary.
func (h *harness) writeFile(rel, content string) string {
	h.t.Helper()
	self, _ := os.Executable()
	content = strings.ReplaceAll(content, "@HELPER@", self)
	p := filepath.Join(h.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// copyDir copies testdata/<name> into the harness directory.
func (h *harness) copyDir(name string) string {
	h.t.Helper()
	src := filepath.Join("testdata", name)
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		h.writeFile(filepath.Join(name, rel), string(b))
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return filepath.Join(h.dir, name)
}

func (h *harness) submitInline(pipeline string, input string, skills ...string) *Execution {
	h.t.Helper()
	self, _ := os.Executable()
	req := SubmitRequest{Pipeline: []byte(pipeline), Input: json.RawMessage(input), AllowExec: true}
	for i, s := range skills {
		req.Skills = append(req.Skills, SkillFile{Name: fmt.Sprintf("skill%d.md", i), Content: []byte(strings.ReplaceAll(s, "@HELPER@", self))})
	}
	x, err := h.e.Submit(context.Background(), req)
	if err != nil {
		h.t.Fatalf("submit: %v", err)
	}
	return x
}

func (h *harness) get(id string) *Execution {
	h.t.Helper()
	x, err := h.e.Get(context.Background(), "", id)
	if err != nil {
		h.t.Fatal(err)
	}
	return x
}

func (h *harness) step(id, skill string) StepState {
	h.t.Helper()
	for _, st := range h.get(id).Steps {
		if st.SkillID == skill {
			return st
		}
	}
	h.t.Fatalf("no step %s", skill)
	return StepState{}
}

// waitStep waits until the step reaches status.
func (h *harness) waitStep(id, skill string, status Status) StepState {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := h.step(id, skill)
		if st.Status == status {
			return st
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("step %s is %s (attempt %d, error %+v), want %s", skill, st.Status, st.Attempt, st.Error, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) wait(id string) *Execution {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x, err := h.e.Wait(ctx, "", id)
	if err != nil {
		h.t.Fatalf("wait: %v (status %s)", err, h.get(id).Status)
	}
	return x
}

func (h *harness) tick() {
	h.t.Helper()
	if err := h.e.Tick(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) answer(task *protocol.Envelope, result string) {
	h.t.Helper()
	if err := h.e.HandleReply(context.Background(), reply(task, protocol.StatusSuccess, result)); err != nil {
		h.t.Fatalf("reply: %v", err)
	}
}

func countRows(t *testing.T, db *store.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

var hashRe = regexp.MustCompile(`[0-9a-f]{64}`)

// normalise replaces the ids and hashes that differ between runs.
func normalise(b []byte, execID string) []byte {
	s := strings.ReplaceAll(string(b), execID, "exec-001")
	return []byte(hashRe.ReplaceAllString(s, "<hash>"))
}

func protoErr(t *testing.T, err error) *protocol.Error {
	t.Helper()
	pe, ok := err.(*protocol.Error)
	if !ok {
		var target *protocol.Error
		if e := protocol.AsError(err); e != nil && e.Code != "internal" {
			return e
		}
		t.Fatalf("want a *protocol.Error, got %T %v", err, err)
		return target
	}
	return pe
}

func newClock() *clock.Fake { return clock.NewFake(t0) }

func readFileIfExists(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	return b, err
}
