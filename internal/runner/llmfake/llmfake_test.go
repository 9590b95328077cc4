package llmfake

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, auth, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestServer(t *testing.T) {
	srv := New(func(r Request) string { return "echo: " + r.Last().Content + " / " + r.System() })
	defer srv.Close()
	srv.APIKey = "k"
	srv.FailNext(429, 500)
	body := `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"}]}`
	base := strings.TrimSuffix(srv.URL, "/v1")
	tests := []struct {
		url, auth, body string
		status          int
		content         string
	}{
		{srv.URL + "/chat/completions", "Bearer k", body, 429, ""},
		{srv.URL + "/chat/completions", "Bearer k", body, 500, ""},
		{srv.URL + "/chat/completions", "Bearer wrong", body, 401, ""},
		{srv.URL + "/chat/completions", "Bearer k", `{"model":"m","messages":[]}`, 400, ""},
		{srv.URL + "/chat/completions", "Bearer k", `not json`, 400, ""},
		{srv.URL + "/chat/completions", "Bearer k", body, 200, "echo: hi / sys"},
		{base + "/chat/completions", "Bearer k", body, 200, "echo: hi / sys"},
	}
	for i, tc := range tests {
		status, out := post(t, tc.url, tc.auth, tc.body)
		if status != tc.status {
			t.Errorf("%d: status %d, want %d (%v)", i, status, tc.status, out)
			continue
		}
		if status != 200 {
			if e, _ := out["error"].(map[string]any); e["message"] == "" {
				t.Errorf("%d: error without message: %v", i, out)
			}
			continue
		}
		msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		if msg["content"] != tc.content || msg["role"] != "assistant" {
			t.Errorf("%d: message %v", i, msg)
		}
	}
	if got, answered := len(srv.Requests()), len(srv.Answered()); got != len(tests) || answered != 2 {
		t.Errorf("recorded %d requests (%d answered)", got, answered)
	}
}
