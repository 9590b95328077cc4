package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/switchboard-hub/switchboard/client"
	sba2a "github.com/switchboard-hub/switchboard/internal/a2a"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// fixture is an A2A-enabled agent on a running hub with one caller.
type fixture struct {
	h       *apptest.Hub
	agentID string
	agent   *client.Client
	caller  client.A2ACaller
	card    *a2a.AgentCard
}

func withA2A(c sba2a.Config) apptest.Options {
	return func(cfg *app.Config) { cfg.A2A = c }
}

func setup(t *testing.T, h *apptest.Hub) *fixture {
	t.Helper()
	ctx := context.Background()
	ag, cl := h.NewAgent("Echo")
	st, err := cl.SetA2A(ctx, ag.ID, client.A2ASettings{Enabled: true, Description: "Echoes what you say.",
		Skills: []client.A2ASkill{{ID: "echo", Name: "Echo", Description: "Repeats the message", Tags: []string{"test"}}}})
	if err != nil {
		t.Fatalf("enable a2a: %v", err)
	}
	if !strings.HasSuffix(st.CardURL, "/a2a/agents/"+ag.ID+"/.well-known/agent-card.json") {
		t.Fatalf("card url %q", st.CardURL)
	}
	caller, err := cl.IssueA2ACaller(ctx, ag.ID, "test client")
	if err != nil {
		t.Fatalf("issue caller: %v", err)
	}
	card, err := agentcard.DefaultResolver.Resolve(ctx, h.URL+"/a2a/agents/"+ag.ID)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	return &fixture{h: h, agentID: ag.ID, agent: cl, caller: caller, card: card}
}

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

func httpClient(tok string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: bearer{tok}}
}

// client connects with the given binding ("JSONRPC", "HTTP+JSON" or "0.3").
func (f *fixture) client(t *testing.T, binding string, token ...string) *a2aclient.Client {
	t.Helper()
	tok := f.caller.Token
	if len(token) > 0 {
		tok = token[0]
	}
	hc := httpClient(tok)
	var ifaces []*a2a.AgentInterface
	for _, i := range f.card.SupportedInterfaces {
		switch {
		case binding == "0.3" && i.ProtocolVersion == a2av0.Version:
			ifaces = append(ifaces, i)
		case binding != "0.3" && i.ProtocolVersion == a2a.Version && string(i.ProtocolBinding) == binding:
			ifaces = append(ifaces, i)
		}
	}
	if len(ifaces) != 1 {
		t.Fatalf("card lists %d interfaces for %s: %+v", len(ifaces), binding, f.card.SupportedInterfaces)
	}
	c, err := a2aclient.NewFromEndpoints(context.Background(), ifaces, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

// answer is how the test agent answers one A2A request.
type answer struct {
	progress []string
	status   protocol.ResponseStatus
	result   any
	errText  string
	silent   bool // never answer
}

// serve runs the agent: it claims A2A requests from its inbox and answers
// each with fn's answer, until the test ends. It returns the params seen.
func (f *fixture) serve(t *testing.T, fn func(p sba2a.Params) answer) *seen {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &seen{}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			ds, err := f.agent.Inbox(ctx, client.InboxOptions{Wait: 2 * time.Second, Limit: 10})
			if err != nil {
				continue
			}
			for _, d := range ds {
				env, err := d.Decode()
				if err != nil {
					continue
				}
				if env.Type == protocol.TypeRequest {
					rp, _ := env.Request()
					var p sba2a.Params
					_ = json.Unmarshal(rp.Params, &p)
					s.add(env, p)
					a := fn(p)
					f.reply(ctx, env, a)
				}
				_, _ = f.agent.Ack(ctx, d.DeliveryID, d.Attempt)
			}
		}
	}()
	return s
}

func (f *fixture) reply(ctx context.Context, req *protocol.Envelope, a answer) {
	if a.silent {
		return
	}
	for _, p := range a.progress {
		payload, _ := json.Marshal(protocol.NotificationPayload{Event: "progress", Message: p})
		_, _ = f.agent.Send(ctx, &protocol.Envelope{TraceID: req.TraceID, From: protocol.Address{Agent: f.agentID}, To: protocol.Address{Agent: sba2a.SystemID},
			Type: protocol.TypeNotification, Payload: payload})
	}
	st := a.status
	if st == "" {
		st = protocol.StatusSuccess
	}
	rp := protocol.ResponsePayload{RequestID: req.ID, Status: st}
	rp.Result, _ = json.Marshal(a.result)
	if a.errText != "" {
		rp.Error, _ = json.Marshal(a.errText)
	}
	payload, _ := json.Marshal(rp)
	_, _ = f.agent.Send(ctx, &protocol.Envelope{TraceID: req.TraceID, From: protocol.Address{Agent: f.agentID}, To: protocol.Address{Agent: sba2a.SystemID},
		Type: protocol.TypeResponse, Payload: payload})
}

type seen struct {
	mu   sync.Mutex
	envs []*protocol.Envelope
	ps   []sba2a.Params
}

func (s *seen) add(env *protocol.Envelope, p sba2a.Params) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.envs = append(s.envs, env)
	s.ps = append(s.ps, p)
}

func (s *seen) all() ([]*protocol.Envelope, []sba2a.Params) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*protocol.Envelope(nil), s.envs...), append([]sba2a.Params(nil), s.ps...)
}

func echo(p sba2a.Params) answer { return answer{result: map[string]string{"text": "echo: " + p.Text}} }

func userMsg(text string) *a2a.Message {
	return a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
}

func send(t *testing.T, c *a2aclient.Client, msg *a2a.Message, cfg *a2a.SendMessageConfig) *a2a.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Config: cfg})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("send answered %T, want a task", res)
	}
	return task
}

func taskText(t *a2a.Task) string {
	var out []string
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			out = append(out, p.Text())
		}
	}
	return strings.Join(out, "|")
}

func statusText(t *a2a.Task) string {
	if t.Status.Message == nil {
		return ""
	}
	var out []string
	for _, p := range t.Status.Message.Parts {
		out = append(out, p.Text())
	}
	return strings.Join(out, "|")
}

// CORE-SEND-001 and CORE-EXECUTION-MODE-001 on every binding and both
// stores: a blocking send completes with the agent's answer; the agent got
// a bus request from system:a2a with the message's text, parts and
// context.
func TestCORE_SEND_001_BlockingSendCompletes(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		f := setup(t, h)
		s := f.serve(t, echo)
		for _, binding := range []string{"JSONRPC", "HTTP+JSON", "0.3"} {
			t.Run(binding, func(t *testing.T) {
				task := send(t, f.client(t, binding), userMsg("hello "+binding), nil)
				if task.Status.State != a2a.TaskStateCompleted {
					t.Fatalf("state %s (%s)", task.Status.State, statusText(task))
				}
				if got, want := taskText(task), "echo: hello "+binding; got != want {
					t.Fatalf("artifact text %q, want %q", got, want)
				}
				envs, ps := s.all()
				env, p := envs[len(envs)-1], ps[len(ps)-1]
				if env.From.Agent != sba2a.SystemID || env.From.Session != "a2a:"+task.ContextID {
					t.Fatalf("request from %+v, want system:a2a session a2a:%s", env.From, task.ContextID)
				}
				rp, _ := env.Request()
				if rp.Action != sba2a.Action || p.TaskID != string(task.ID) || p.ContextID != task.ContextID || p.Caller != "test client" {
					t.Fatalf("request %s params %+v", rp.Action, p)
				}
				var parts []map[string]any
				if err := json.Unmarshal(p.Parts, &parts); err != nil || len(parts) != 1 || parts[0]["text"] != "hello "+binding {
					t.Fatalf("parts %s (%v)", p.Parts, err)
				}
			})
		}
	}, withA2A(sba2a.Config{Wait: 20 * time.Second}))
}

// CARD: the card is public, lists the three interfaces and declares the
// bearer scheme; a disabled agent has no card.
func TestAgentCard(t *testing.T) {
	h := apptest.Start(t, "")
	f := setup(t, h)
	base := h.URL + "/a2a/agents/" + f.agentID
	if f.card.Name != "Echo" || f.card.Description != "Echoes what you say." || len(f.card.Skills) != 1 || f.card.Skills[0].ID != "echo" {
		t.Fatalf("card %+v", f.card)
	}
	want := map[string]bool{base + "|JSONRPC|1.0": true, base + "/rest|HTTP+JSON|1.0": true, base + "/v0.3|JSONRPC|0.3": true}
	for _, i := range f.card.SupportedInterfaces {
		k := fmt.Sprintf("%s|%s|%s", i.URL, i.ProtocolBinding, i.ProtocolVersion)
		if !want[k] {
			t.Errorf("unexpected interface %s", k)
		}
		delete(want, k)
	}
	if len(want) > 0 {
		t.Errorf("missing interfaces %v", want)
	}
	if _, ok := f.card.SecuritySchemes[sba2a.SchemeName]; !ok || len(f.card.SecurityRequirements) != 1 {
		t.Fatalf("security %+v %+v", f.card.SecuritySchemes, f.card.SecurityRequirements)
	}
	// The 0.3 form of the card (url + preferredTransport) for older clients.
	resp, err := http.Get(base + "/v0.3/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	resp.Body.Close()
	if raw["url"] != base+"/v0.3" || raw["protocolVersion"] != "0.3" {
		t.Fatalf("0.3 fields: url %v protocolVersion %v", raw["url"], raw["protocolVersion"])
	}
	if _, err := f.agent.SetA2A(context.Background(), f.agentID, client.A2ASettings{Enabled: false}); err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(base + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("disabled agent's card: %d", resp.StatusCode)
	}
}

// Enabling needs a description; another agent cannot change the settings or
// issue callers for this one.
func TestSettingsRefusals(t *testing.T) {
	h := apptest.Start(t, "")
	ctx := context.Background()
	ag, cl := h.NewAgent("A")
	_, other := h.NewAgent("B")
	cases := []struct {
		name string
		c    *client.Client
		in   client.A2ASettings
		code string
	}{
		{"no description", cl, client.A2ASettings{Enabled: true}, "validation_failed"},
		{"bad skill", cl, client.A2ASettings{Enabled: true, Description: "x", Skills: []client.A2ASkill{{ID: "bad id", Name: "n", Description: "d"}}}, "validation_failed"},
		{"other agent", other, client.A2ASettings{Enabled: true, Description: "x"}, "not_your_agent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.SetA2A(ctx, ag.ID, tc.in)
			var pe *client.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err %v", err)
			}
			if tc.code != "validation_failed" && pe.Body.Error != tc.code {
				t.Fatalf("code %s, want %s", pe.Body.Error, tc.code)
			}
			if pe.Body.Class != protocol.ClassInvalid && pe.Body.Class != protocol.ClassPermission {
				t.Fatalf("class %s", pe.Body.Class)
			}
		})
	}
	st, err := cl.A2A(ctx, ag.ID)
	if err != nil || st.Enabled {
		t.Fatalf("refused updates changed state: %+v %v", st, err)
	}
	if _, err := other.IssueA2ACaller(ctx, ag.ID, "x"); err == nil {
		t.Fatal("another agent issued a caller")
	}
	if _, err := cl.IssueA2ACaller(ctx, ag.ID, ""); err == nil {
		t.Fatal("caller without a name")
	}
}

// Callers authenticate with their own token: none, a wrong one, another
// agent's caller token, and a revoked one are refused with 401.
func TestCallerAuthAndRevocation(t *testing.T) {
	h := apptest.Start(t, "")
	f := setup(t, h)
	f.serve(t, echo)
	g := setup(t, h) // a second agent with its own caller
	ctx := context.Background()
	post := func(tok string) int {
		req, _ := http.NewRequest("POST", h.URL+"/a2a/agents/"+f.agentID, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, tok := range map[string]string{"none": "", "wrong": "sbc_nope", "other agent's caller": g.caller.Token, "agent token": f.agent.Token} {
		if code := post(tok); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
	if code := post(f.caller.Token); code != http.StatusOK {
		t.Fatalf("valid caller: %d", code)
	}
	if _, err := f.agent.RevokeA2ACaller(ctx, f.agentID, f.caller.CallerID); err != nil {
		t.Fatal(err)
	}
	again, err := f.agent.RevokeA2ACaller(ctx, f.agentID, f.caller.CallerID)
	if err != nil || again.RevokedAt.IsZero() {
		t.Fatalf("second revoke: %+v %v", again, err)
	}
	if code := post(f.caller.Token); code != http.StatusUnauthorized {
		t.Fatalf("revoked caller: %d", code)
	}
	cs, err := f.agent.A2ACallers(ctx, f.agentID)
	if err != nil || len(cs) != 1 || cs[0].RevokedAt.IsZero() || cs[0].Token != "" {
		t.Fatalf("callers %+v %v", cs, err)
	}
}

// Each caller has its own rate limit: past the burst it gets 429 with
// Retry-After, while another caller of the same agent is unaffected.
func TestPerCallerRateLimit(t *testing.T) {
	h := apptest.Start(t, "", withA2A(sba2a.Config{RatePerMinute: 1, Burst: 3}))
	f := setup(t, h)
	other, err := f.agent.IssueA2ACaller(context.Background(), f.agentID, "other")
	if err != nil {
		t.Fatal(err)
	}
	list := func(tok string) (int, string) {
		req, _ := http.NewRequest("GET", h.URL+"/a2a/agents/"+f.agentID+"/rest/tasks", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	for i := 0; i < 3; i++ {
		if code, _ := list(f.caller.Token); code != http.StatusOK {
			t.Fatalf("request %d: %d", i, code)
		}
	}
	code, retry := list(f.caller.Token)
	if code != http.StatusTooManyRequests || retry == "" {
		t.Fatalf("over the limit: %d retry-after %q", code, retry)
	}
	if code, _ := list(other.Token); code != http.StatusOK {
		t.Fatalf("other caller: %d", code)
	}
}

// CORE-STREAM-001: a streaming send yields the task, working status with
// the agent's progress notifications, the artifact and the completed
// status, in that order.
func TestCORE_STREAM_001_StreamsProgressAndResult(t *testing.T) {
	h := apptest.Start(t, "")
	f := setup(t, h)
	f.serve(t, func(p sba2a.Params) answer {
		return answer{progress: []string{"thinking", "almost"}, result: map[string]any{"text": "done", "parts": []map[string]any{{"data": map[string]any{"n": 1}}}}}
	})
	for _, binding := range []string{"JSONRPC", "HTTP+JSON", "0.3"} {
		t.Run(binding, func(t *testing.T) {
			c := f.client(t, binding)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var kinds []string
			var progress []string
			for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: userMsg("go")}) {
				if err != nil {
					t.Fatalf("stream: %v", err)
				}
				switch e := ev.(type) {
				case *a2a.Task:
					kinds = append(kinds, "task")
				case *a2a.TaskStatusUpdateEvent:
					kinds = append(kinds, stateWord(e.Status.State))
					if e.Status.State == a2a.TaskStateWorking && e.Status.Message != nil {
						progress = append(progress, e.Status.Message.Parts[0].Text())
					}
				case *a2a.TaskArtifactUpdateEvent:
					kinds = append(kinds, "artifact")
					if len(e.Artifact.Parts) != 2 || e.Artifact.Parts[0].Text() != "done" || e.Artifact.Parts[1].Data() == nil {
						t.Fatalf("artifact parts %+v", e.Artifact.Parts)
					}
				}
			}
			got := strings.Join(kinds, ",")
			if !strings.HasPrefix(got, "task,") || !strings.HasSuffix(got, "artifact,completed") {
				t.Fatalf("events %s", got)
			}
			if strings.Join(progress, ",") != "thinking,almost" {
				t.Fatalf("progress %v (events %s)", progress, got)
			}
		})
	}
}

func stateWord(s a2a.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_"))
}

// CORE-GET-001, CORE-GET-002, CORE-LIST-001..005: tasks persist in the
// hub's store (both backends), are scoped to their caller, and list with
// filters and pages.
func TestCORE_GET_LIST_TasksPersistPerCaller(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		f := setup(t, h)
		f.serve(t, echo)
		c := f.client(t, "JSONRPC")
		ctx := context.Background()
		var ids []a2a.TaskID
		ctxA := a2a.NewContextID()
		for i := 0; i < 3; i++ {
			m := userMsg(fmt.Sprintf("m%d", i))
			if i < 2 {
				m.ContextID = ctxA
			}
			ids = append(ids, send(t, c, m, nil).ID)
		}
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: ids[0]})
		if err != nil || got.Status.State != a2a.TaskStateCompleted || taskText(got) != "echo: m0" {
			t.Fatalf("CORE-GET-001: %+v %v", got, err)
		}
		if _, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: "no-such-task"}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("CORE-GET-002: %v", err)
		}
		all, err := c.ListTasks(ctx, &a2a.ListTasksRequest{})
		if err != nil || all.TotalSize != 3 || len(all.Tasks) != 3 || all.Tasks[0].ID != ids[2] {
			t.Fatalf("CORE-LIST-001: %+v %v", all, err)
		}
		byCtx, err := c.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: ctxA})
		if err != nil || byCtx.TotalSize != 2 {
			t.Fatalf("CORE-LIST-002 context filter: %+v %v", byCtx, err)
		}
		byState, err := c.ListTasks(ctx, &a2a.ListTasksRequest{Status: a2a.TaskStateWorking})
		if err != nil || byState.TotalSize != 0 {
			t.Fatalf("CORE-LIST-003 status filter: %+v %v", byState, err)
		}
		p1, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 2})
		if err != nil || len(p1.Tasks) != 2 || p1.NextPageToken == "" {
			t.Fatalf("CORE-LIST-004 page 1: %+v %v", p1, err)
		}
		p2, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 2, PageToken: p1.NextPageToken})
		if err != nil || len(p2.Tasks) != 1 || p2.Tasks[0].ID != ids[0] || p2.NextPageToken != "" {
			t.Fatalf("CORE-LIST-004 page 2: %+v %v", p2, err)
		}
		if _, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 101}); err == nil {
			t.Fatal("CORE-LIST-005: page size 101 accepted")
		}
		noArt, _ := c.ListTasks(ctx, &a2a.ListTasksRequest{})
		withArt, _ := c.ListTasks(ctx, &a2a.ListTasksRequest{IncludeArtifacts: true})
		if len(noArt.Tasks[0].Artifacts) != 0 || len(withArt.Tasks[0].Artifacts) != 1 {
			t.Fatal("includeArtifacts is not honored")
		}
		// Another caller of the same agent sees none of these tasks.
		other, err := f.agent.IssueA2ACaller(ctx, f.agentID, "other")
		if err != nil {
			t.Fatal(err)
		}
		oc := f.client(t, "HTTP+JSON", other.Token)
		if _, err := oc.GetTask(ctx, &a2a.GetTaskRequest{ID: ids[0]}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("other caller reads the task: %v", err)
		}
		if l, err := oc.ListTasks(ctx, &a2a.ListTasksRequest{}); err != nil || l.TotalSize != 0 {
			t.Fatalf("other caller lists %+v %v", l, err)
		}
		// Tasks survive a restart.
		h.Restart()
		c = f.client(t, "JSONRPC")
		if got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: ids[1]}); err != nil || taskText(got) != "echo: m1" {
			t.Fatalf("after restart: %+v %v", got, err)
		}
	}, withA2A(sba2a.Config{Wait: 20 * time.Second}))
}

// CORE-MULTI-001a, CORE-MULTI-003: a contextId continues a conversation
// (the agent sees the same context and session); an input-required answer
// is continued on the same task. CORE-SEND-002: a message to a finished
// task is refused.
func TestCORE_MULTI_ContextContinues(t *testing.T) {
	h := apptest.Start(t, "")
	f := setup(t, h)
	s := f.serve(t, func(p sba2a.Params) answer {
		if p.Text == "book a table" {
			return answer{result: map[string]any{"text": "for how many?", "state": "input-required"}}
		}
		return echo(p)
	})
	c := f.client(t, "JSONRPC")
	first := send(t, c, userMsg("hi"), nil)
	m := userMsg("again")
	m.ContextID = first.ContextID
	second := send(t, c, m, nil)
	if second.ContextID != first.ContextID || second.ID == first.ID || taskText(second) != "echo: again" {
		t.Fatalf("second task %+v", second)
	}
	envs, _ := s.all()
	if envs[0].From.Session != envs[1].From.Session {
		t.Fatalf("sessions differ: %s vs %s", envs[0].From.Session, envs[1].From.Session)
	}
	ask := send(t, c, userMsg("book a table"), nil)
	if ask.Status.State != a2a.TaskStateInputRequired || statusText(ask) != "for how many?" {
		t.Fatalf("input-required: %s %q", ask.Status.State, statusText(ask))
	}
	follow := userMsg("four")
	follow.TaskID, follow.ContextID = ask.ID, ask.ContextID
	done := send(t, c, follow, nil)
	if done.ID != ask.ID || done.Status.State != a2a.TaskStateCompleted || taskText(done) != "echo: four" {
		t.Fatalf("continued task %s %s %q", done.ID, done.Status.State, taskText(done))
	}
	_, ps := s.all()
	if last := ps[len(ps)-1]; last.TaskID != string(ask.ID) {
		t.Fatalf("follow-up params %+v", last)
	}
	again := userMsg("more")
	again.TaskID, again.ContextID = done.ID, done.ContextID
	if _, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: again}); err == nil {
		t.Fatal("CORE-SEND-002: a message to a completed task was accepted")
	}
}

// A failure response fails the task with the agent's reason.
func TestFailureResponseFailsTask(t *testing.T) {
	h := apptest.Start(t, "")
	f := setup(t, h)
	f.serve(t, func(p sba2a.Params) answer {
		return answer{status: protocol.StatusFailure, errText: "cannot do that"}
	})
	task := send(t, f.client(t, "HTTP+JSON"), userMsg("x"), nil)
	if task.Status.State != a2a.TaskStateFailed || statusText(task) != "cannot do that" {
		t.Fatalf("%s %q", task.Status.State, statusText(task))
	}
}

// CORE-EXECUTION-MODE-002 and the offline agent: with returnImmediately the
// caller gets a working task at once; the agent, offline when the message
// arrives, answers after it connects, and the task completes.
func TestCORE_EXECUTION_MODE_002_OfflineAgentAnswersLater(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		f := setup(t, h)
		c := f.client(t, "JSONRPC")
		task := send(t, c, userMsg("are you there?"), &a2a.SendMessageConfig{ReturnImmediately: true})
		if task.Status.State.Terminal() {
			t.Fatalf("returned %s before the agent answered", task.Status.State)
		}
		f.serve(t, echo) // the agent connects now
		got := waitTask(t, c, task.ID, a2a.TaskStateCompleted)
		if taskText(got) != "echo: are you there?" {
			t.Fatalf("answer %q", taskText(got))
		}
	}, withA2A(sba2a.Config{Wait: 30 * time.Second}))
}

func waitTask(t *testing.T, c *a2aclient.Client, id a2a.TaskID, want a2a.TaskState) *a2a.Task {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.GetTask(context.Background(), &a2a.GetTaskRequest{ID: id})
		if err == nil && got.Status.State == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %+v %v, want %s", id, got, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// An agent that never answers: the task fails with a clear message after
// the configured wait.
func TestUnansweredTaskFailsAfterWait(t *testing.T) {
	h := apptest.Start(t, "", withA2A(sba2a.Config{Wait: 2 * time.Second}))
	f := setup(t, h)
	c := f.client(t, "JSONRPC")
	task := send(t, c, userMsg("hello?"), nil)
	if task.Status.State != a2a.TaskStateFailed || !strings.Contains(statusText(task), "did not") {
		t.Fatalf("%s %q", task.Status.State, statusText(task))
	}
}

// A restart while the agent works: the answer that arrives afterwards is
// applied by the sweeper, and the caller sees the task complete.
func TestAnswerAfterRestartCompletesTask(t *testing.T) {
	h := apptest.Start(t, "", withA2A(sba2a.Config{Wait: time.Minute, SweepInterval: 200 * time.Millisecond, OrphanGrace: time.Second}))
	f := setup(t, h)
	c := f.client(t, "JSONRPC")
	task := send(t, c, userMsg("slow job"), &a2a.SendMessageConfig{ReturnImmediately: true})
	h.Restart()
	f.serve(t, echo)
	c = f.client(t, "JSONRPC")
	got := waitTask(t, c, task.ID, a2a.TaskStateCompleted)
	if taskText(got) != "echo: slow job" {
		t.Fatalf("answer %q", taskText(got))
	}
}

// CORE-CANCEL-001..003: a working task cancels (and the agent is told); a
// finished one is not cancelable; an unknown one is not found.
func TestCORE_CANCEL(t *testing.T) {
	h := apptest.Start(t, "")
	f := setup(t, h)
	c := f.client(t, "HTTP+JSON")
	ctx := context.Background()
	task := send(t, c, userMsg("long job"), &a2a.SendMessageConfig{ReturnImmediately: true})
	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CORE-CANCEL-001: %+v %v", got, err)
	}
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: "nope"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("CORE-CANCEL-003: %v", err)
	}
	// The agent finds the request and the cancel notification in its inbox.
	ds, err := f.agent.Inbox(ctx, client.InboxOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, d := range ds {
		env, _ := d.Decode()
		if env.Type == protocol.TypeNotification {
			n, _ := env.Notification()
			events = append(events, n.Event)
		}
		_, _ = f.agent.Ack(ctx, d.DeliveryID, d.Attempt)
	}
	if strings.Join(events, ",") != sba2a.CancelEvent {
		t.Fatalf("agent notifications %v", events)
	}
	f.serve(t, echo)
	done := send(t, c, userMsg("quick"), nil)
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: done.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("CORE-CANCEL-002: cancel of a completed task: %v", err)
	}
}

// PUSH-CREATE-001, PUSH-GET-001, PUSH-LIST-001, PUSH-DEL-001 and the SSRF
// guard: loopback and private webhook targets are refused unless the hub
// allows private targets; allowed ones are stored, listed and deleted.
func TestPUSH_ConfigsAndSSRFGuard(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allowPrivate=%v", allow), func(t *testing.T) {
			h := apptest.Start(t, "", withA2A(sba2a.Config{AllowPrivatePush: allow}))
			f := setup(t, h)
			c := f.client(t, "JSONRPC")
			ctx := context.Background()
			task := send(t, c, userMsg("x"), &a2a.SendMessageConfig{ReturnImmediately: true})
			for _, u := range []string{"http://127.0.0.1:9/hook", "http://localhost/hook", "http://10.1.2.3/hook", "http://[::1]/hook", "http://169.254.169.254/latest"} {
				_, err := c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, URL: u})
				if allow && err != nil {
					t.Errorf("%s refused with private targets allowed: %v", u, err)
				}
				if !allow && err == nil {
					t.Errorf("%s accepted", u)
				}
			}
			if _, err := c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, URL: "ftp://example.com/x"}); err == nil {
				t.Error("ftp URL accepted")
			}
			pc, err := c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, URL: "https://hooks.example.com/a2a", Token: "t1"})
			if err != nil || pc.ID == "" {
				t.Fatalf("PUSH-CREATE-001: %+v %v", pc, err)
			}
			got, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: pc.ID})
			if err != nil || got.URL != "https://hooks.example.com/a2a" || got.Token != "t1" {
				t.Fatalf("PUSH-GET-001: %+v %v", got, err)
			}
			list, err := c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
			want := 1
			if allow {
				want = 6
			}
			if err != nil || len(list) != want {
				t.Fatalf("PUSH-LIST-001: %d configs %v, want %d", len(list), err, want)
			}
			if err := c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: pc.ID}); err != nil {
				t.Fatalf("PUSH-DEL-001: %v", err)
			}
			if _, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: pc.ID}); err == nil {
				t.Fatal("deleted config still readable")
			}
		})
	}
}

func TestCheckPushURL(t *testing.T) {
	cases := []struct {
		url     string
		private bool
		ok      bool
	}{
		{"https://example.com/hook", false, true},
		{"http://8.8.8.8/x", false, true},
		{"http://127.0.0.1/x", false, false},
		{"http://127.0.0.1/x", true, true},
		{"http://192.168.1.5/x", false, false},
		{"http://172.16.0.1/x", false, false},
		{"http://[fe80::1]/x", false, false},
		{"http://0.0.0.0/x", false, false},
		{"http://api.localhost/x", false, false},
		{"http://localhost./x", false, false},
		{"http://API.LocalHost./x", false, false},
		{"http://127.0.0.1./x", false, false},
		{"https://user:pw@example.com/x", false, false},
		{"file:///etc/passwd", true, false},
		{"not a url", true, false},
	}
	for _, tc := range cases {
		if got := sba2a.CheckPushURL(tc.url, tc.private) == ""; got != tc.ok {
			t.Errorf("CheckPushURL(%q, %v) ok=%v, want %v", tc.url, tc.private, got, tc.ok)
		}
	}
}

func FuzzCheckPushURL(f *testing.F) {
	for _, s := range []string{"https://example.com/x", "http://127.0.0.1:80/", "http://[::ffff:10.0.0.1]/", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if sba2a.CheckPushURL(s, false) == "" && sba2a.CheckPushURL(s, true) != "" {
			t.Fatalf("%q allowed without private targets but refused with them", s)
		}
	})
}

// Outbound: an agent reaches an external A2A agent (here another agent of
// the same hub, through its public endpoints) and the exchange is logged
// on the bus.
func TestOutboundSend(t *testing.T) {
	h := apptest.Start(t, "", withA2A(sba2a.Config{Wait: 20 * time.Second}))
	target := setup(t, h)
	target.serve(t, echo)
	sender, sc := h.NewAgent("Sender")
	ctx := context.Background()
	res, err := sc.A2ASend(ctx, sender.ID, client.A2ASendInput{URL: h.URL + "/a2a/agents/" + target.agentID + "/.well-known/agent-card.json",
		Text: "ping", Token: target.caller.Token})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != "completed" || res.Text != "echo: ping" || res.Agent != "Echo" || res.TraceID == "" {
		t.Fatalf("result %+v", res)
	}
	ds, err := sc.Inbox(ctx, client.InboxOptions{Limit: 5})
	if err != nil || len(ds) != 1 {
		t.Fatalf("log notification: %d %v", len(ds), err)
	}
	env, _ := ds[0].Decode()
	n, _ := env.Notification()
	if n.Event != "a2a.sent" || !strings.Contains(n.Message, `"echo: ping"`) {
		t.Fatalf("notification %+v", n)
	}
	if _, err := sc.A2ASend(ctx, sender.ID, client.A2ASendInput{URL: "not a url", Text: ""}); err == nil {
		t.Fatal("bad input accepted")
	}
	// Without the token the external agent refuses, and the error says so.
	_, err = sc.A2ASend(ctx, sender.ID, client.A2ASendInput{URL: h.URL + "/a2a/agents/" + target.agentID, Text: "ping"})
	var pe *client.Error
	if !errors.As(err, &pe) || pe.Body.Error != "a2a_peer_failed" {
		t.Fatalf("no token: %v", err)
	}
}
