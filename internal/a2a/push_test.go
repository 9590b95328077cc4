package a2a_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2alog "github.com/a2aproject/a2a-go/v2/log"

	sba2a "github.com/switchboard-hub/switchboard/internal/a2a"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
)

// hook is a webhook that records the push notifications it receives.
type hook struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []hookCall
	arr chan struct{}
}

type hookCall struct {
	path   string
	header http.Header
	body   []byte
}

func newHook(t *testing.T) *hook {
	t.Helper()
	k := &hook{arr: make(chan struct{}, 64)}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		k.mu.Lock()
		k.got = append(k.got, hookCall{path: r.URL.Path, header: r.Header.Clone(), body: body})
		k.mu.Unlock()
		select {
		case k.arr <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(k.srv.Close)
	return k
}

func (k *hook) calls() []hookCall {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]hookCall(nil), k.got...)
}

// waitFor returns the calls once one of them satisfies ok.
func (k *hook) waitFor(t *testing.T, what string, ok func(hookCall) bool) []hookCall {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		calls := k.calls()
		for _, c := range calls {
			if ok(c) {
				return calls
			}
		}
		select {
		case <-k.arr:
		case <-deadline:
			t.Fatalf("webhook never received %s; got %d calls", what, len(calls))
		}
	}
}

// pushed decodes a push notification body: a StreamResponse holding one
// task event.
func pushed(t *testing.T, c hookCall) a2a.Event {
	t.Helper()
	var sr a2a.StreamResponse
	if err := json.Unmarshal(c.body, &sr); err != nil {
		t.Fatalf("push body %s: %v", c.body, err)
	}
	return sr.Event
}

// A task update POSTs to the webhook the caller registered (inline in
// SendMessage, and with CreateTaskPushConfig): the body is the task event,
// the config's token arrives in A2A-Notification-Token and its credentials
// in Authorization. The test hub allows private targets, as an operator
// with webhooks on a private network would.
func TestPUSH_TaskUpdatesReachTheWebhook(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		f := setup(t, h)
		c := f.client(t, "JSONRPC")
		k := newHook(t)
		task := send(t, c, userMsg("book a table"), &a2a.SendMessageConfig{ReturnImmediately: true,
			PushConfig: &a2a.PushConfig{URL: k.srv.URL + "/inline", Token: "tok-inline",
				Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "hook-secret"}}})
		k2 := newHook(t)
		pc, err := c.CreateTaskPushConfig(context.Background(), &a2a.PushConfig{TaskID: task.ID, URL: k2.srv.URL + "/created", Token: "tok-created"})
		if err != nil {
			t.Fatalf("create push config: %v", err)
		}
		f.serve(t, func(p sba2a.Params) answer {
			return answer{progress: []string{"looking"}, result: map[string]string{"text": "booked: " + p.Text}}
		})
		completed := func(c hookCall) bool {
			ev, ok := pushed(t, c).(*a2a.TaskStatusUpdateEvent)
			return ok && ev.Status.State == a2a.TaskStateCompleted
		}
		for _, tc := range []struct {
			k      *hook
			path   string
			token  string
			auth   string
			config string
		}{
			{k, "/inline", "tok-inline", "Bearer hook-secret", "inline"},
			{k2, "/created", "tok-created", "", pc.ID},
		} {
			calls := tc.k.waitFor(t, "the completed status ("+tc.config+")", completed)
			var artifact string
			for _, call := range calls {
				if call.path != tc.path {
					t.Errorf("%s: POST to %s, want %s", tc.config, call.path, tc.path)
				}
				if got := call.header.Get("A2A-Notification-Token"); got != tc.token {
					t.Errorf("%s: token header %q, want %q", tc.config, got, tc.token)
				}
				if got := call.header.Get("Authorization"); got != tc.auth {
					t.Errorf("%s: Authorization %q, want %q", tc.config, got, tc.auth)
				}
				if ct := call.header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("%s: Content-Type %q", tc.config, ct)
				}
				ev := pushed(t, call)
				if ev.TaskInfo().TaskID != task.ID || ev.TaskInfo().ContextID != task.ContextID {
					t.Errorf("%s: event for task %s/%s, want %s/%s", tc.config, ev.TaskInfo().TaskID, ev.TaskInfo().ContextID, task.ID, task.ContextID)
				}
				if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
					artifact = a.Artifact.Parts[0].Text()
				}
			}
			if artifact != "booked: book a table" {
				t.Errorf("%s: artifact pushed %q, want the agent's answer", tc.config, artifact)
			}
		}
	}, withA2A(sba2a.Config{AllowPrivatePush: true, Wait: 30 * time.Second}))
}

// The SSRF guard at dial time: the sender the hub builds without
// AllowPrivatePush refuses to connect to a loopback address even when the
// URL reached it (a host name that resolves there passes CheckPushURL); the
// same sender built with private targets allowed delivers to it.
func TestPushSenderRefusesPrivateAddressesWhenDialing(t *testing.T) {
	k := newHook(t)
	u, _ := url.Parse(k.srv.URL)
	_, port, _ := strings.Cut(u.Host, ":")
	ev := a2a.NewStatusUpdateEvent(&a2a.Task{ID: "task-1", ContextID: "ctx-1"}, a2a.TaskStateCompleted, nil)
	for _, tc := range []struct {
		name      string
		allow     bool
		url       string
		delivered bool
	}{
		{"guard on, loopback literal", false, "http://127.0.0.1:" + port + "/hook", false},
		{"guard on, name resolving to loopback", false, "http://localhost:" + port + "/hook", false},
		{"guard on, IPv6 loopback", false, "http://[::1]:" + port + "/hook", false},
		{"private targets allowed", true, "http://127.0.0.1:" + port + "/hook", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			ctx := a2alog.AttachLogger(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)))
			before := len(k.calls())
			sender := sba2a.NewPushSender(sba2a.Config{AllowPrivatePush: tc.allow, PushTimeout: 5 * time.Second})
			if err := sender.SendPush(ctx, &a2a.PushConfig{TaskID: "task-1", URL: tc.url, Token: "t"}, ev); err != nil {
				t.Fatalf("SendPush: %v (the hub's sender logs failures instead of failing the task)", err)
			}
			got := len(k.calls()) - before
			if tc.delivered && got != 1 {
				t.Fatalf("webhook got %d POSTs, want 1; log: %s", got, logs.String())
			}
			if !tc.delivered {
				if got != 0 {
					t.Fatalf("webhook got %d POSTs through the guard", got)
				}
				if !strings.Contains(logs.String(), "blocked address range") {
					t.Fatalf("refusal not logged as the SSRF guard's: %s", logs.String())
				}
			}
		})
	}
}

// SubscribeToTask: a caller that subscribes to a running task sees the
// agent's progress, the artifact and the completed status; another caller
// of the same agent cannot subscribe to it; subscribing to a finished task
// is refused (task not found: only running tasks can be watched).
func TestSubscribeToTask(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		f := setup(t, h)
		other, err := f.agent.IssueA2ACaller(context.Background(), f.agentID, "other")
		if err != nil {
			t.Fatal(err)
		}
		for _, binding := range []string{"JSONRPC", "HTTP+JSON"} {
			t.Run(binding, func(t *testing.T) {
				c := f.client(t, binding)
				task := send(t, c, userMsg("subscribe to me"), &a2a.SendMessageConfig{ReturnImmediately: true})
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				// Another caller of the same agent cannot watch the running task.
				for ev, err := range f.client(t, binding, other.Token).SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
					if !errors.Is(err, a2a.ErrTaskNotFound) {
						t.Fatalf("another caller subscribed to the task: %T %v", ev, err)
					}
					break
				}
				var kinds []string
				var artifact string
				serving := false
				for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
					if err != nil {
						t.Fatalf("subscribe: %v (events so far %v)", err, kinds)
					}
					if ev.TaskInfo().TaskID != task.ID {
						t.Fatalf("event for task %s, want %s", ev.TaskInfo().TaskID, task.ID)
					}
					switch e := ev.(type) {
					case *a2a.Task:
						kinds = append(kinds, "task")
					case *a2a.TaskStatusUpdateEvent:
						kinds = append(kinds, stateWord(e.Status.State))
					case *a2a.TaskArtifactUpdateEvent:
						kinds = append(kinds, "artifact")
						artifact = e.Artifact.Parts[0].Text()
					}
					if !serving {
						// Subscribed: only now does the agent come online and answer.
						serving = true
						f.serve(t, func(p sba2a.Params) answer {
							return answer{progress: []string{"halfway"}, result: map[string]string{"text": "done: " + p.Text}}
						})
					}
				}
				got := strings.Join(kinds, ",")
				if !strings.HasSuffix(got, "working,artifact,completed") || artifact != "done: subscribe to me" {
					t.Fatalf("subscription saw %s (artifact %q)", got, artifact)
				}
				// Once the execution has wound down (the SDK finishes it just
				// after the final event), a subscription finds nothing to
				// follow. Until then it may end at once without events.
				var err error
				for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
					err = nil
					for _, err = range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
						if err != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				if !errors.Is(err, a2a.ErrTaskNotFound) {
					t.Fatalf("subscribe to a completed task: %v, want task not found (no running execution)", err)
				}
			})
		}
	}, withA2A(sba2a.Config{Wait: 30 * time.Second}))
}

// An answer that arrives after a restart is applied by the sweeper, and the
// task's webhook still hears of it: the artifact and the completed status.
func TestPUSH_AnswerAfterRestartReachesTheWebhook(t *testing.T) {
	h := apptest.Start(t, "", withA2A(sba2a.Config{AllowPrivatePush: true, Wait: time.Minute,
		SweepInterval: 200 * time.Millisecond, OrphanGrace: time.Second}))
	f := setup(t, h)
	c := f.client(t, "JSONRPC")
	k := newHook(t)
	task := send(t, c, userMsg("slow job"), &a2a.SendMessageConfig{ReturnImmediately: true,
		PushConfig: &a2a.PushConfig{URL: k.srv.URL + "/hook", Token: "tok-restart"}})
	h.Restart()
	f.serve(t, echo)
	calls := k.waitFor(t, "the completed status after the restart", func(c hookCall) bool {
		ev, ok := pushed(t, c).(*a2a.TaskStatusUpdateEvent)
		return ok && ev.Status.State == a2a.TaskStateCompleted
	})
	var artifact string
	for _, call := range calls {
		if got := call.header.Get("A2A-Notification-Token"); got != "tok-restart" {
			t.Errorf("token header %q", got)
		}
		ev := pushed(t, call)
		if ev.TaskInfo().TaskID != task.ID {
			t.Errorf("event for task %s, want %s", ev.TaskInfo().TaskID, task.ID)
		}
		if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			artifact = a.Artifact.Parts[0].Text()
		}
	}
	if artifact != "echo: slow job" {
		t.Fatalf("artifact pushed %q", artifact)
	}
}
