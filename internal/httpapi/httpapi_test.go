package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
)

type rawResp struct {
	status int
	body   map[string]any
	raw    string
}

func call(t *testing.T, method, url, token, contentType string, body []byte) rawResp {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := rawResp{status: resp.StatusCode, raw: string(b)}
	_ = json.Unmarshal(b, &r.body)
	return r
}

func agentCount(t *testing.T, h *apptest.Hub) int {
	t.Helper()
	as, err := h.Admin.Agents(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return len(as)
}

// Every bad input to agent creation gets the structured error and creates nothing.
func TestCreateAgentBadInput(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		_, agentClient := h.NewAgent("Existing")
		before := agentCount(t, h)
		url := h.URL + "/v1/admin/agents"
		big := []byte(`{"displayName":"` + strings.Repeat("x", 2<<20) + `"}`)
		tests := []struct {
			name, token, ctype string
			body               []byte
			status             int
			code, class        string
		}{
			{"no token", "", "application/json", []byte(`{"displayName":"A"}`), 401, "unauthorized", "E001"},
			{"bad token", "sbt_nope", "application/json", []byte(`{"displayName":"A"}`), 401, "unauthorized", "E001"},
			{"agent token", agentClient.Token, "application/json", []byte(`{"displayName":"A"}`), 403, "admin_required", "E001"},
			{"malformed json", apptest.AdminToken, "application/json", []byte(`{"displayName":`), 400, "invalid_json", "E003"},
			{"empty body", apptest.AdminToken, "application/json", nil, 400, "invalid_json", "E003"},
			{"unknown field", apptest.AdminToken, "application/json", []byte(`{"displayName":"A","tire":"pm"}`), 400, "unknown_field", "E003"},
			{"wrong type", apptest.AdminToken, "application/json", []byte(`{"displayName":42}`), 400, "invalid_json", "E003"},
			{"trailing data", apptest.AdminToken, "application/json", []byte(`{"displayName":"A"} {}`), 400, "invalid_request", "E003"},
			{"not json", apptest.AdminToken, "text/xml", []byte(`<a/>`), 415, "unsupported_media_type", "E003"},
			{"oversize", apptest.AdminToken, "application/json", big, 413, "body_too_large", "E003"},
			{"bad tier", apptest.AdminToken, "application/json", []byte(`{"displayName":"A","tier":"boss"}`), 400, "validation_failed", "E003"},
			{"empty name", apptest.AdminToken, "application/json", []byte(`{"displayName":"  "}`), 400, "display_name_required", "E003"},
			{"reserved char", apptest.AdminToken, "application/json", []byte(`{"displayName":"A#B"}`), 400, "display_name_reserved_character", "E003"},
			{"unknown parent", apptest.AdminToken, "application/json", []byte(`{"displayName":"A","parent":"agt_missing"}`), 400, "invalid_parent", "E003"},
		}
		for _, tt := range tests {
			r := call(t, "POST", url, tt.token, tt.ctype, tt.body)
			if r.status != tt.status || r.body["error"] != tt.code || r.body["class"] != tt.class {
				t.Errorf("%s: got %d %v %v, want %d %s %s (%s)", tt.name, r.status, r.body["error"], r.body["class"], tt.status, tt.code, tt.class, r.raw)
			}
			if _, ok := r.body["message"].(string); !ok {
				t.Errorf("%s: no message in %s", tt.name, r.raw)
			}
			if r.body["requestId"] == nil {
				t.Errorf("%s: no requestId", tt.name)
			}
		}
		if after := agentCount(t, h); after != before {
			t.Fatalf("bad requests changed state: %d agents before, %d after", before, after)
		}
	})
}

func TestRotateTokenOnlyForSelf(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := context.Background()
		a, ac := h.NewAgent("A")
		b, bc := h.NewAgent("B")
		if _, err := ac.RotateToken(ctx, b.ID); client.Code(err) != "not_your_agent" || client.Status(err) != 403 {
			t.Fatalf("rotating another agent's token: %v", err)
		}
		if _, err := bc.Agent(ctx, b.ID); err != nil {
			t.Fatalf("B's token stopped working: %v", err)
		}
		tok, err := ac.RotateToken(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ac.Agent(ctx, a.ID); client.Status(err) != 401 {
			t.Fatalf("old token still valid: %v", err)
		}
		if _, err := h.Client(tok).Agent(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
	})
}

func TestUnknownRouteAndMethod(t *testing.T) {
	h := apptest.Start(t, "")
	r := call(t, "GET", h.URL+"/v1/does-not-exist", apptest.AdminToken, "", nil)
	if r.status != 404 || r.body["error"] != "route_not_found" {
		t.Fatalf("unknown route: %d %s", r.status, r.raw)
	}
	r = call(t, "DELETE", h.URL+"/v1/agents", apptest.AdminToken, "", nil)
	if r.status != 405 || r.body["error"] != "method_not_allowed" {
		t.Fatalf("bad method: %d %s", r.status, r.raw)
	}
}

func TestHealthAndReady(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		for _, p := range []string{"/healthz", "/readyz"} {
			r := call(t, "GET", h.URL+p, "", "", nil)
			if r.status != 200 {
				t.Fatalf("%s: %d %s", p, r.status, r.raw)
			}
		}
		r := call(t, "GET", h.URL+"/metrics", "", "", nil)
		if r.status != 200 || !strings.Contains(r.raw, "switchboard_http_request_duration_seconds") {
			t.Fatalf("metrics: %d", r.status)
		}
	})
}

// Every route the assembled hub serves is in the OpenAPI document (with a
// summary and responses) and in the documentation: docs/api.md or one of
// the area pages it links. The routes are walked from the app's router and
// each is probed over HTTP, so the list is what the mux really answers; a
// route added without a line in the docs fails here.
func TestServedRoutesAreDocumented(t *testing.T) {
	h := apptest.Start(t, "")
	r := call(t, "GET", h.URL+"/v1/openapi.json", "", "", nil)
	if r.status != 200 {
		t.Fatalf("openapi: %d", r.status)
	}
	paths, _ := r.body["paths"].(map[string]any)
	docs := docRoutes(t, filepath.Join("..", "..", "docs", "api.md"))
	ops := h.App.API.Router().Ops()
	if len(ops) < 50 {
		t.Fatalf("the router lists only %d routes", len(ops))
	}
	for _, op := range ops {
		route := op.Method + " " + op.Path
		// The mux serves it: a request to a concrete path reaches a handler.
		concrete := strings.NewReplacer("...}", "}").Replace(op.Path)
		concrete = regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(concrete, "x")
		resp := call(t, op.Method, h.URL+concrete, apptest.AdminToken, "application/json", []byte("{}"))
		if code, _ := resp.body["error"].(string); code == "route_not_found" || code == "method_not_allowed" {
			t.Errorf("%s is listed but not served: %s", route, resp.raw)
		}
		// The OpenAPI document describes it.
		p := regexp.MustCompile(`\{([A-Za-z0-9_]+)\.\.\.\}`).ReplaceAllString(op.Path, "{$1}")
		o, _ := paths[p].(map[string]any)[strings.ToLower(op.Method)].(map[string]any)
		if o == nil {
			t.Errorf("%s is served but not in /v1/openapi.json", route)
		} else if s, _ := o["summary"].(string); s == "" || o["responses"] == nil {
			t.Errorf("%s has no summary or responses in /v1/openapi.json", route)
		}
		// The docs mention it.
		if !docs.mention(op.Path) {
			t.Errorf("%s is served but docs/api.md and the pages it links never mention it", route)
		}
	}
	documented := 0
	for _, ops := range paths {
		documented += len(ops.(map[string]any))
	}
	if documented != len(ops) {
		t.Errorf("/v1/openapi.json has %d operations, the router %d", documented, len(ops))
	}
}

// routeDocs holds the hub paths a set of Markdown pages mention, split in
// segments: "*" for a parameter ({id}, $AGENT, <id>), "**" for "..." (any
// rest of the path).
type routeDocs [][]string

var (
	mdLink  = regexp.MustCompile(`\]\(([A-Za-z0-9_-]+\.md)(#[^)]*)?\)`)
	hubPath = regexp.MustCompile(`(?:^|[^a-z_./-])(/(?:v1|a2a|console|mcp|ws|healthz|readyz|metrics)(?:/[^\s` + "`" + `"'()<>\]]*)?)`)
)

// docRoutes reads a page and the Markdown pages it links (one level) and
// collects the hub paths they mention. "a|b" in a segment names both.
func docRoutes(t *testing.T, index string) routeDocs {
	t.Helper()
	raw, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{string(raw)}
	seen := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
		if seen[m[1]] {
			continue
		}
		seen[m[1]] = true
		b, err := os.ReadFile(filepath.Join(filepath.Dir(index), m[1]))
		if err != nil {
			t.Fatalf("%s links %s: %v", index, m[1], err)
		}
		texts = append(texts, string(b))
	}
	if len(seen) == 0 {
		t.Fatalf("%s links no area pages", index)
	}
	var out routeDocs
	for _, text := range texts {
		for _, m := range hubPath.FindAllStringSubmatch(text, -1) {
			p := m[1]
			if i := strings.IndexAny(p, "?[#"); i >= 0 {
				p = p[:i]
			}
			if !strings.HasSuffix(p, "...") {
				p = strings.TrimRight(p, ".,:;")
			}
			alts := [][]string{nil}
			for _, seg := range strings.Split(strings.Trim(p, "/"), "/") {
				var next [][]string
				for _, opt := range strings.Split(seg, "|") {
					switch {
					case opt == "..." || opt == "…":
						opt = "**"
					case strings.ContainsAny(opt, "{$<…") || strings.HasPrefix(opt, ":"):
						opt = "*"
					}
					for _, a := range alts {
						next = append(next, append(append([]string(nil), a...), opt))
					}
				}
				alts = next
			}
			out = append(out, alts...)
		}
	}
	return out
}

// mention reports whether the docs name a route's ServeMux path: the same
// segments, parameters matching parameters; a {rest...} parameter matches
// any further segments ("..." included).
func (d routeDocs) mention(pattern string) bool {
	var want []string
	for _, seg := range strings.Split(strings.Trim(pattern, "/"), "/") {
		switch {
		case strings.HasSuffix(seg, "...}"):
			seg = "**"
		case strings.HasPrefix(seg, "{"):
			seg = "*"
		}
		want = append(want, seg)
	}
	rest := len(want) > 0 && want[len(want)-1] == "**"
	if rest {
		want = want[:len(want)-1]
	}
	for _, got := range d {
		if len(got) < len(want) || (!rest && len(got) != len(want)) || (rest && len(got) == len(want)) {
			continue
		}
		ok := true
		for i, w := range want {
			if got[i] != w {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// Bad input to the agent read and token endpoints: each refusal is the
// structured error with its class, and nothing changes (a refused rotation
// leaves the agent's token working).
func TestAgentsAPIBadInput(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		a, ac := h.NewAgent("Alpha")
		b, bc := h.NewAgent("Beta")
		h.NewAgent("Gamma", client.CreateAgentParams{Tier: "worker"})
		tests := []struct {
			name, method, path, token string
			status                    int
			code, class, field        string
		}{
			{"list, no token", "GET", "/v1/agents", "", 401, "unauthorized", "E001", ""},
			{"list, invalid token", "GET", "/v1/agents", "sbt_not-a-token", 401, "unauthorized", "E001", ""},
			{"list, unknown tier", "GET", "/v1/agents?tier=boss", apptest.AdminToken, 400, "invalid_tier", "E003", "tier"},
			{"list, unknown tier as an agent", "GET", "/v1/agents?tier=boss", ac.Token, 400, "invalid_tier", "E003", "tier"},
			{"get, no token", "GET", "/v1/agents/" + a.ID, "", 401, "unauthorized", "E001", ""},
			{"get, invalid token", "GET", "/v1/agents/" + a.ID, "sbt_not-a-token", 401, "unauthorized", "E001", ""},
			{"get, unknown id", "GET", "/v1/agents/agt_missing", apptest.AdminToken, 404, "agent_not_found", "E002", ""},
			{"get, unknown id as an agent", "GET", "/v1/agents/agt_missing", ac.Token, 404, "agent_not_found", "E002", ""},
			{"rotate, no token", "POST", "/v1/agents/" + a.ID + "/rotate-token", "", 401, "unauthorized", "E001", ""},
			{"rotate, invalid token", "POST", "/v1/agents/" + a.ID + "/rotate-token", "sbt_not-a-token", 401, "unauthorized", "E001", ""},
			{"rotate, unknown id (admin)", "POST", "/v1/agents/agt_missing/rotate-token", apptest.AdminToken, 404, "agent_not_found", "E002", ""},
			{"rotate, unknown id (agent)", "POST", "/v1/agents/agt_missing/rotate-token", ac.Token, 403, "not_your_agent", "E001", ""},
			{"rotate, another agent's token", "POST", "/v1/agents/" + b.ID + "/rotate-token", ac.Token, 403, "not_your_agent", "E001", ""},
		}
		for _, tt := range tests {
			r := call(t, tt.method, h.URL+tt.path, tt.token, "", nil)
			if r.status != tt.status || r.body["error"] != tt.code || r.body["class"] != tt.class {
				t.Errorf("%s: got %d %v %v, want %d %s %s (%s)", tt.name, r.status, r.body["error"], r.body["class"], tt.status, tt.code, tt.class, r.raw)
				continue
			}
			if msg, _ := r.body["message"].(string); msg == "" {
				t.Errorf("%s: no message in %s", tt.name, r.raw)
			}
			if tt.field != "" {
				fe, _ := r.body["fieldErrors"].(map[string]any)
				if _, ok := fe[tt.field]; !ok {
					t.Errorf("%s: fieldErrors does not name %s: %s", tt.name, tt.field, r.raw)
				}
			}
		}
		// Nothing was rotated: both agents' tokens still work.
		for _, c := range []*client.Client{ac, bc} {
			if _, err := c.Agent(context.Background(), a.ID); err != nil {
				t.Fatalf("a token stopped working after refused calls: %v", err)
			}
		}
		// What the table refuses works with the right token: any agent may
		// list and read agents (the directory teams route by); the tier
		// filter keeps the worker out.
		for _, tok := range []string{apptest.AdminToken, ac.Token} {
			r := call(t, "GET", h.URL+"/v1/agents?tier=command", tok, "", nil)
			if list, _ := r.body["agents"].([]any); r.status != 200 || len(list) != 2 {
				t.Errorf("list command-tier agents: %d %s", r.status, r.raw)
			}
			if r := call(t, "GET", h.URL+"/v1/agents/"+b.ID, tok, "", nil); r.status != 200 || r.body["agentId"] != b.ID {
				t.Errorf("get: %d %s", r.status, r.raw)
			}
		}
	})
}
