package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/mcpserver"
	"github.com/switchboard-hub/switchboard/internal/pipeline"
)

var allTools = []string{"account", "chat_inbox", "inbox", "pipeline_run", "pipeline_status", "report_to_owner", "request_chat", "send_message", "worlds"}

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens an MCP session to the hub's /mcp as the agent with token.
func connect(t *testing.T, hubURL, token string) *mcp.ClientSession {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hubURL + "/mcp",
		HTTPClient: &http.Client{Timeout: 60 * time.Second, Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// answer is a tool result's JSON.
type answer map[string]any

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (answer, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v (tool failures must be tool errors)", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks", name, len(res.Content))
	}
	var a answer
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &a); err != nil {
		t.Fatalf("%s: content is not JSON: %v", name, err)
	}
	if a["status"] == nil || a["nextAction"] == nil || a["nextAction"] == "" {
		t.Fatalf("%s: answer without status/nextAction: %v", name, a)
	}
	return a, res.IsError
}

func mustOK(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) answer {
	t.Helper()
	a, isErr := call(t, cs, name, args)
	if isErr {
		t.Fatalf("%s %v: tool error %v", name, args, a)
	}
	return a
}

func TestListTools(t *testing.T) {
	h := apptest.Start(t, "")
	_, cl := h.NewAgent("Tooly")
	cs := connect(t, h.URL, cl.Token)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		sch, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(sch), `"type":"object"`) || !strings.Contains(string(sch), `"properties"`) {
			t.Errorf("%s schema %s", tool.Name, sch)
		}
		if tool.Name == "request_chat" && !strings.Contains(string(sch), "not a message to the peer") {
			t.Errorf("request_chat's openingMessage description lost the brief guidance: %s", sch)
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != strings.Join(allTools, ",") {
		t.Fatalf("tools %v", names)
	}
}

// Every tool, called with good arguments, answers status and nextAction;
// the state changes are visible through the REST API.
func TestEachTool(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := context.Background()
		a, ac := h.NewAgent("Alice")
		b, bc := h.NewAgent("Bob")
		cs := connect(t, h.URL, ac.Token)
		bs := connect(t, h.URL, bc.Token)

		if got := mustOK(t, cs, "account", map[string]any{"action": "view"}); got["status"] != "ok" {
			t.Fatalf("account view %v", got)
		}
		mustOK(t, cs, "account", map[string]any{"action": "update_profile", "headline": "Trail runner in Shanghai",
			"humanProfile": "Likes trail running", "agentProfile": "Finds running partners"})
		acct, err := ac.Account(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(acct)
		if !strings.Contains(string(raw), "Trail runner in Shanghai") {
			t.Fatalf("profile not updated: %s", raw)
		}

		mustOK(t, bs, "account", map[string]any{"action": "update_profile", "humanProfile": "Organizes runs", "agentProfile": "Hosts the runners world"})
		name, text := "Runners", "People who run trails."
		w, err := h.Admin.CreateWorld(ctx, client.WorldInput{AgentID: b.ID, DisplayName: &name, WorldContextText: &text})
		if err != nil {
			t.Fatalf("create world: %v", err)
		}
		mustOK(t, cs, "worlds", map[string]any{"action": "list"})
		mustOK(t, cs, "worlds", map[string]any{"action": "search", "query": "trails"})
		mustOK(t, cs, "worlds", map[string]any{"action": "get", "worldId": w.WorldID})
		if got := mustOK(t, cs, "worlds", map[string]any{"action": "join", "worldId": w.WorldID, "participantContextText": "I run on weekends"}); got["status"] != "joined" {
			t.Fatalf("join %v", got)
		}
		mustOK(t, cs, "worlds", map[string]any{"action": "update_profile", "worldId": w.WorldID, "participantContextText": "I run every weekend"})
		mustOK(t, cs, "worlds", map[string]any{"action": "candidates", "worldId": w.WorldID})

		// request_chat and chat_inbox: the request reaches Bob, who lists and rejects it.
		req, isErr := call(t, cs, "request_chat", map[string]any{"toAgentId": b.ID,
			"openingMessage": "Open warmly and find out whether they want to run together; end once that is clear."})
		if !isErr {
			inbox := mustOK(t, bs, "chat_inbox", map[string]any{"action": "list"})
			if !strings.Contains(mustJSON(inbox), a.ID) {
				t.Fatalf("Bob's chat inbox lacks Alice's request: %v", inbox)
			}
			// The seed's skills filter with a filters object.
			in := mustOK(t, bs, "chat_inbox", map[string]any{"action": "list", "filters": map[string]any{"direction": "inbound"}})
			if !strings.Contains(mustJSON(in), a.ID) {
				t.Fatalf("Bob's inbound list lacks Alice's request: %v", in)
			}
			if out := mustOK(t, bs, "chat_inbox", map[string]any{"action": "list", "filters": map[string]any{"direction": "outbound"}}); strings.Contains(mustJSON(out), a.ID) {
				t.Fatalf("Bob's outbound list shows Alice's inbound request: %v", out)
			}
			id := req["result"].(map[string]any)["chatRequestId"].(string)
			// Bob's chat policy may have accepted it already; accepting
			// again is "already applied" either way.
			if got := mustOK(t, bs, "chat_inbox", map[string]any{"action": "accept", "chatRequestId": id}); got["status"] != "accepted" {
				t.Fatalf("accept %v", got)
			}
		} else if req["nextAction"] == "" {
			t.Fatalf("request_chat refused without nextAction: %v", req)
		}
		mustOK(t, cs, "worlds", map[string]any{"action": "leave", "worldId": w.WorldID})

		// send_message → Bob's inbox claim → ack.
		sent := mustOK(t, cs, "send_message", map[string]any{"toAgentId": b.ID, "action": "review", "params": map[string]any{"doc": "x"}})
		if sent["status"] != "sent" {
			t.Fatalf("send %v", sent)
		}
		claimed := mustOK(t, bs, "inbox", map[string]any{"action": "claim", "waitSeconds": 5})
		ds := claimed["result"].([]any)
		var dlv map[string]any
		for _, d := range ds {
			m := d.(map[string]any)
			if env := m["envelope"].(map[string]any); env["type"] == "request" {
				dlv = m
			}
		}
		if dlv == nil {
			t.Fatalf("claim %v", claimed)
		}
		if got := mustOK(t, bs, "inbox", map[string]any{"action": "ack", "deliveryId": dlv["deliveryId"], "attempt": dlv["attempt"]}); got["status"] != "acked" {
			t.Fatalf("ack %v", got)
		}

		if got := mustOK(t, cs, "report_to_owner", map[string]any{"reportText": "Met Bob; no match.", "source": "chat-1"}); got["status"] != "filed" {
			t.Fatalf("report %v", got)
		}
		if got := mustOK(t, cs, "report_to_owner", map[string]any{"reportText": "again", "source": "chat-1"}); got["status"] != "already_filed" {
			t.Fatalf("second report %v", got)
		}

		// A malformed pipeline is a tool error listing every problem with
		// its line; an unknown execution is not found.
		got, isErr := call(t, cs, "pipeline_run", map[string]any{"pipeline": "pipeline_id: x"})
		if !isErr || got["error"] != "invalid_pipeline" || got["nextTool"] != "pipeline_run" {
			t.Fatalf("pipeline_run with a bad definition: %v", got)
		}
		got, isErr = call(t, cs, "pipeline_status", map[string]any{"executionId": "run_x"})
		if !isErr || got["status"] != "error" {
			t.Fatalf("pipeline_status of an unknown execution: %v", got)
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Bad arguments are tool errors a model can act on: the code, the fields,
// nextAction and nextTool.
func TestBadArgumentsAreToolErrors(t *testing.T) {
	h := apptest.Start(t, "")
	_, cl := h.NewAgent("Alice")
	cs := connect(t, h.URL, cl.Token)
	cases := []struct {
		name    string
		tool    string
		args    map[string]any
		code    string
		missing string
	}{
		{"missing openingMessage", "request_chat", map[string]any{"toAgentId": "agt_x"}, "missing_fields", "openingMessage"},
		{"no target", "request_chat", map[string]any{"openingMessage": "brief"}, "target_required", "toAgentId"},
		{"unknown action", "account", map[string]any{"action": "delete"}, "invalid_arguments", ""},
		{"missing action", "worlds", map[string]any{}, "missing_fields", "action"},
		{"wrong type", "chat_inbox", map[string]any{"action": "list", "limit": "ten"}, "invalid_arguments", ""},
		{"unknown field", "inbox", map[string]any{"action": "claim", "bogus": 1}, "invalid_arguments", ""},
		{"accept without id", "chat_inbox", map[string]any{"action": "accept"}, "missing_fields", "chatRequestId"},
		{"join without world", "worlds", map[string]any{"action": "join"}, "missing_fields", "worldId"},
		{"request without action", "send_message", map[string]any{"toAgentId": "agt_x"}, "missing_fields", "action"},
		{"unknown recipient", "send_message", map[string]any{"toAgentId": "agt_nobody", "action": "x"}, "unknown_recipient", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, isErr := call(t, cs, tc.tool, tc.args)
			if !isErr {
				t.Fatalf("accepted: %v", got)
			}
			if got["status"] != "error" || got["error"] != tc.code {
				t.Fatalf("error %v, want code %s", got, tc.code)
			}
			if tc.missing != "" {
				if !strings.Contains(mustJSON(got["missingFields"]), `"`+tc.missing+`"`) {
					t.Fatalf("missingFields %v, want %s", got["missingFields"], tc.missing)
				}
				if got["nextTool"] == nil {
					t.Fatalf("no nextTool: %v", got)
				}
			}
		})
	}
}

// The admin token names no agent: /mcp refuses it with a structured error.
func TestAdminTokenRefused(t *testing.T) {
	h := apptest.Start(t, "")
	req, _ := http.NewRequest("POST", h.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+apptest.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusForbidden || body["error"] != "agent_token_required" {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
}

// The stdio server (switchboard mcp) forwards the hub's tools unchanged.
func TestProxyForwardsTools(t *testing.T) {
	h := apptest.Start(t, "")
	_, cl := h.NewAgent("Alice")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := mcp.NewInMemoryTransports()
	errc := make(chan error, 1)
	go func() { errc <- mcpserver.Proxy(ctx, h.URL, cl.Token, "test", st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.ListTools(ctx, nil)
	if err != nil || len(res.Tools) != len(allTools) {
		t.Fatalf("tools %v %v", res, err)
	}
	if got := mustOK(t, cs, "account", map[string]any{"action": "view"}); got["status"] != "ok" {
		t.Fatalf("account via proxy %v", got)
	}
	if got, isErr := call(t, cs, "request_chat", map[string]any{}); !isErr || got["error"] != "missing_fields" {
		t.Fatalf("bad args via proxy %v", got)
	}
	cs.Close()
	cancel()
	<-errc
}

// fakePipelines records submissions (the engine has its own tests).
type fakePipelines struct{ owner string }

func (f *fakePipelines) Submit(ctx context.Context, req pipeline.SubmitRequest) (*pipeline.Execution, error) {
	f.owner = req.Owner
	return &pipeline.Execution{ID: "run_1", Owner: req.Owner, Status: pipeline.StatusRunning}, nil
}

func (f *fakePipelines) Get(ctx context.Context, owner, id string) (*pipeline.Execution, error) {
	return &pipeline.Execution{ID: id, Owner: owner, Status: pipeline.StatusCompleted}, nil
}

// pipeline_run and pipeline_status act as the calling agent.
func TestPipelineTools(t *testing.T) {
	fp := &fakePipelines{}
	s := mcpserver.New(mcpserver.Deps{Pipelines: fp})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.ForAgent("agt_me").Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	run := mustOK(t, cs, "pipeline_run", map[string]any{"pipeline": "pipeline_id: p", "input": map[string]any{"a": 1}})
	if run["status"] != "running" || run["nextTool"] != "pipeline_status" || fp.owner != "agt_me" {
		t.Fatalf("run %v owner %s", run, fp.owner)
	}
	if got := mustOK(t, cs, "pipeline_status", map[string]any{"executionId": "run_1"}); got["status"] != "completed" {
		t.Fatalf("status %v", got)
	}
	// Tools whose service is missing say so.
	if got, isErr := call(t, cs, "account", map[string]any{"action": "view"}); !isErr || got["error"] != "feature_disabled" {
		t.Fatalf("account without social: %v", got)
	}
}
