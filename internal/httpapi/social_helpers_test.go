package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/app/apptest"
)

// callWith sends a request with the given headers and a raw body.
func callWith(t *testing.T, method, url string, headers map[string]string, body string) rawResp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
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

// socialState is a fingerprint of everything the social layer stores: a
// refused call must leave it unchanged.
func socialState(t *testing.T, h *apptest.Hub) string {
	t.Helper()
	ctx := context.Background()
	queries := []string{
		`SELECT agent_id || '|' || code || '|' || human_profile || '|' || agent_profile || '|' || visibility_mode || '|' || contact_policy || '|' || updated_at FROM social_accounts`,
		`SELECT id || '|' || display_name || '|' || status FROM agents`,
		`SELECT id || '|' || status || '|' || visibility || '|' || updated_at || '|' || conversation_count FROM social_worlds`,
		`SELECT id || '|' || status || '|' || role || '|' || participant_text || '|' || updated_at FROM social_memberships`,
		`SELECT id || '|' || status || '|' || updated_at FROM social_chat_requests`,
		`SELECT chat_request_id || '|' || status || '|' || updated_at FROM social_chats`,
		`SELECT conversation_key FROM social_conversations`,
		`SELECT id || '|' || used_count || '|' || revoked_at FROM social_invites`,
		`SELECT id FROM social_broadcasts`,
	}
	var parts []string
	for _, q := range queries {
		q = strings.Replace(q, "FROM agents", "FROM (SELECT id, display_name, CAST(disabled AS TEXT) AS status FROM agents) x", 1)
		rows, err := h.App.DB.Query(ctx, q)
		if err != nil {
			t.Fatalf("state %s: %v", q, err)
		}
		var rs []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			rs = append(rs, s)
		}
		rows.Close()
		sort.Strings(rs)
		parts = append(parts, strings.Join(rs, ";"))
	}
	return strings.Join(parts, "\n")
}
