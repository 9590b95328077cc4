package blackboard_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/blackboard"
)

// Whatever an agent drops in its outbox, one pass files it in sent/ or
// rejected/ byte for byte, with its report or error beside it: never lost,
// never left behind to be retried forever. The hub is a stand-in that
// accepts every envelope that reaches it.
func FuzzOutboxFile(f *testing.F) {
	for _, seed := range []string{
		`{"to":{"agent":"agt_b"},"type":"notification","payload":{"event":"x"}}`,
		`{"id":"m-1","from":{"agent":"agt_a"},"to":{"agent":"agt_b"},"type":"request","payload":{"action":"a"}}`,
		`{"from":{"agent":"agt_other"},"to":{"agent":"agt_b"}}`,
		`{"to":{"agent":"agt_b"},"prority":"high"}`,
		`[]`, ``, `{`, `null`, `{"to":{"agent":"agt_b"}} {}`,
	} {
		f.Add([]byte(seed))
	}
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/inbox":
			io.WriteString(w, `{"deliveries":[]}`)
		case "/v1/messages":
			var env client.Envelope
			if json.NewDecoder(r.Body).Decode(&env) != nil {
				w.WriteHeader(400)
				io.WriteString(w, `{"error":"invalid_json","class":"E003","message":"bad"}`)
				return
			}
			w.WriteHeader(202)
			json.NewEncoder(w).Encode(client.SendResult{ID: env.ID, TraceID: "t", Deliveries: 1})
		default:
			w.WriteHeader(404)
		}
	}))
	defer hub.Close()
	c := client.New(hub.URL, "token")
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := t.TempDir()
		b, err := blackboard.New(c, blackboard.Options{Dir: dir, Agents: []string{"agt_a"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		outbox := filepath.Join(dir, "agt_a", "outbox")
		if err := os.MkdirAll(outbox, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outbox, "f.json"), content, 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := b.Sync(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.Sent+st.Rejected != 1 {
			t.Fatalf("stats %+v", st)
		}
		if _, err := os.Stat(filepath.Join(outbox, "f.json")); err == nil {
			t.Fatal("file left in outbox")
		}
		folder, companion := "sent", "f.result.json"
		if st.Rejected == 1 {
			folder, companion = "rejected", "f.error.json"
		}
		kept, err := os.ReadFile(filepath.Join(dir, "agt_a", folder, "f.json"))
		if err != nil || string(kept) != string(content) {
			t.Fatalf("%s/f.json: %v, content changed", folder, err)
		}
		var report map[string]any
		raw, err := os.ReadFile(filepath.Join(dir, "agt_a", folder, companion))
		if err != nil || json.Unmarshal(raw, &report) != nil {
			t.Fatalf("%s: %v %s", companion, err, raw)
		}
	})
}
