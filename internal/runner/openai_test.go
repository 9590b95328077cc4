package runner

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/contextdoc"
	"github.com/switchboard-hub/switchboard/internal/runner/llmfake"
)

// docInput is a direct conversation seen by Mira (the sender).
func docInput(role contextdoc.Role, queued ...string) contextdoc.Input {
	return contextdoc.Input{
		Role: role, IntentID: "req_01JZ", ConversationKey: "conversation:agt_mira:agt_tomas", Mode: contextdoc.ModeDirect,
		Brief:  "Find out whether Tomas still wants to build the sync tool. Wrap up once that is clear.",
		You:    contextdoc.Participant{Identity: "Mira#K7Q2XP", GlobalProfile: "Product designer."},
		Peer:   contextdoc.Participant{Identity: "Tomas#R4ZN8W", GlobalProfile: "Backend engineer."},
		Policy: contextdoc.Policy{MaxTurns: 20, IdleTimeout: 30 * time.Minute, DSL: true}, QueuedTurns: queued,
	}
}

func render(t *testing.T, in contextdoc.Input) string {
	t.Helper()
	s, err := contextdoc.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const session = "conversation:agt_mira:agt_tomas"

func kickoffDelivery(t *testing.T, id string) Delivery {
	in := docInput(contextdoc.RoleSenderKickoff)
	return Delivery{DeliveryID: id, SessionKey: session, Metadata: Metadata{DeliveryType: DeliveryKickoff},
		Payload: Payload{Text: contextdoc.KickoffText(in), ContextText: render(t, in), CommandText: contextdoc.CommandText(in)}}
}

func turnDelivery(id, text, contextText string) Delivery {
	return Delivery{DeliveryID: id, SessionKey: session, Metadata: Metadata{DeliveryType: DeliveryReply},
		Payload: Payload{Text: text, ContextText: contextText}}
}

func newTestOpenAI(t *testing.T, srv *llmfake.Server, mod ...func(*OpenAIConfig)) *OpenAI {
	t.Helper()
	cfg := OpenAIConfig{BaseURL: srv.URL, Model: "test-model", Backoff: time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	o, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOpenAIConversationPrompts(t *testing.T) {
	replies := []string{"Hey Tomas! Still up for the sync tool?", "Great, let's do it. [[request_conversation_end]]", "NO_REPLY"}
	srv := llmfake.New(func(r llmfake.Request) string { return replies[min(len(srvAnswered(r)), len(replies)-1)] })
	defer srv.Close()
	srv.APIKey = "sk-test"
	o := newTestOpenAI(t, srv, func(c *OpenAIConfig) { c.APIKey = "sk-test" })
	ctx := context.Background()

	kick := kickoffDelivery(t, "d1")
	if got, err := o.Reply(ctx, kick); err != nil || got != replies[0] {
		t.Fatalf("kickoff: %q, %v", got, err)
	}
	if got, err := o.Reply(ctx, turnDelivery("d2", "Yes! Weekends only though.", "")); err != nil || got != replies[1] {
		t.Fatalf("turn 2: %q, %v", got, err)
	}
	queued := render(t, docInput(contextdoc.RoleLiveTurn, "Also: Rust or Go?"))
	if _, err := o.Reply(ctx, turnDelivery("d3", "Bye [[request_conversation_end]]", queued)); err != nil {
		t.Fatal(err)
	}

	reqs := srv.Answered()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	baseline := render(t, docInput(contextdoc.RoleSenderKickoff))
	base, _, _ := strings.Cut(baseline, "\n# Task Instruction")
	base = strings.TrimSpace(base)
	for i, r := range reqs {
		if r.Model != "test-model" || r.Authorization != "Bearer sk-test" || r.Path != "/v1/chat/completions" {
			t.Errorf("request %d: model %q auth %q path %q", i, r.Model, r.Authorization, r.Path)
		}
		sys := r.System()
		if !strings.HasPrefix(sys, base) {
			t.Errorf("request %d: system prompt does not start with the context document", i)
		}
		if n := strings.Count(sys, "# Task Instruction"); (i == 0) != (n == 1) || n > 1 {
			t.Errorf("request %d: %d task instructions in the system prompt", i, n)
		}
	}
	if got, want := reqs[0].System(), base+"\n\n# Task Instruction\n\n"+kick.Payload.CommandText; got != want {
		t.Errorf("kickoff system prompt:\n%s\nwant:\n%s", got, want)
	}
	// The history grows by one user/assistant pair per turn.
	wantLast := []llmfake.Message{
		{Role: "system", Content: base},
		{Role: "user", Content: kick.Payload.Text},
		{Role: "assistant", Content: replies[0]},
		{Role: "user", Content: "Yes! Weekends only though."},
		{Role: "assistant", Content: replies[1]},
		{Role: "user", Content: strings.TrimSpace(queued) + "\n\nBye [[request_conversation_end]]"},
	}
	if got := reqs[2].Messages; !equalMessages(got, wantLast) {
		t.Errorf("third request messages:\n%s\nwant:\n%s", dump(got), dump(wantLast))
	}
	var b strings.Builder
	for _, m := range reqs[2].Messages {
		b.WriteString("===== " + m.Role + " =====\n" + m.Content + "\n")
	}
	checkGolden(t, "openai_third_turn.golden", []byte(b.String()))
}

// srvAnswered counts earlier answered requests from the request's own
// history (each earlier turn left a user/assistant pair).
func srvAnswered(r llmfake.Request) []struct{} {
	return make([]struct{}, (len(r.Messages)-2)/2)
}

func equalMessages(a, b []llmfake.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func dump(m []llmfake.Message) string {
	b, _ := json.MarshalIndent(m, "", "  ")
	return string(b)
}

func TestOpenAINewBaselineResetsHistory(t *testing.T) {
	srv := llmfake.New(func(llmfake.Request) string { return "ok" })
	defer srv.Close()
	o := newTestOpenAI(t, srv)
	ctx := context.Background()
	for _, d := range []Delivery{kickoffDelivery(t, "d1"), turnDelivery("d2", "first intent turn", "")} {
		if _, err := o.Reply(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// A new intent in the same session: the recipient-side baseline with
	// a queued turn.
	in := docInput(contextdoc.RoleRecipient, "Earlier: hello?")
	in.You, in.Peer = in.Peer, in.You
	doc := render(t, in)
	if _, err := o.Reply(ctx, turnDelivery("d3", "New topic!", doc)); err != nil {
		t.Fatal(err)
	}
	last := srv.Answered()[2]
	if len(last.Messages) != 2 {
		t.Fatalf("history not reset: %s", dump(last.Messages))
	}
	secs := Sections(doc)
	live, _ := section(secs, SectionLiveTurn)
	if want := without(secs, SectionLiveTurn); last.System() != want {
		t.Errorf("system prompt is not the new baseline without its live turn:\n%s", last.System())
	}
	if want := live.Text + "\n\nNew topic!"; last.Last().Content != want {
		t.Errorf("user message %q, want %q", last.Last().Content, want)
	}
	if strings.Contains(last.System(), "sync tool") {
		t.Error("the old intent's brief leaked into the new intent")
	}
	// The next turn builds on the new intent only.
	if _, err := o.Reply(ctx, turnDelivery("d4", "And?", "")); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Answered()[3].Messages); n != 4 {
		t.Errorf("after reset: %d messages, want system + 1 pair + user", n)
	}
}

func TestOpenAIFallbackSystemAndBoundedHistory(t *testing.T) {
	srv := llmfake.New(func(llmfake.Request) string { return "ok" })
	defer srv.Close()
	o := newTestOpenAI(t, srv, func(c *OpenAIConfig) { c.MaxHistory = 4 })
	for i := range 5 {
		if _, err := o.Reply(context.Background(), turnDelivery("d", "turn "+string(rune('a'+i)), "")); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Answered()
	if reqs[0].System() != DefaultFallbackSystem {
		t.Errorf("system without a baseline: %q", reqs[0].System())
	}
	last := reqs[4].Messages
	if len(last) != 1+4+1 || last[1].Content != "turn c" {
		t.Errorf("history not bounded to the last 2 turns:\n%s", dump(last))
	}
}

func TestOpenAIRetries(t *testing.T) {
	tests := []struct {
		name     string
		fail     []int
		apiKey   string
		wantErr  string
		wantReqs int
	}{
		{"429 then 500 then success", []int{429, 500}, "", "", 3},
		{"gives up after max attempts", []int{503, 503, 503, 503}, "", "after 3 attempts", 3},
		{"401 is not retried", nil, "wrong", "api-key-env", 1},
		{"400 is not retried", []int{400}, "", "400 Bad Request", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmfake.New(func(llmfake.Request) string { return "answer" })
			defer srv.Close()
			srv.APIKey = "right"
			srv.FailNext(tc.fail...)
			key := "right"
			if tc.apiKey != "" {
				key = tc.apiKey
			}
			o := newTestOpenAI(t, srv, func(c *OpenAIConfig) { c.MaxAttempts = 3; c.APIKey = key })
			got, err := o.Reply(context.Background(), turnDelivery("d1", "hi", ""))
			if tc.wantErr == "" {
				if err != nil || got != "answer" {
					t.Fatalf("got %q, %v", got, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %q, %v; want an error containing %q", got, err, tc.wantErr)
			}
			if n := len(srv.Requests()); n != tc.wantReqs {
				t.Errorf("%d requests, want %d", n, tc.wantReqs)
			}
			if tc.wantErr != "" {
				// A failed turn is not recorded: the retry starts from the same state.
				srv.APIKey = ""
				o.cfg.APIKey = "right"
				if _, err := o.Reply(context.Background(), turnDelivery("d1", "hi", "")); err != nil {
					t.Fatal(err)
				}
				all := srv.Answered()
				if msgs := all[len(all)-1].Messages; len(msgs) != 2 {
					t.Errorf("failed turn left history behind:\n%s", dump(msgs))
				}
			}
		})
	}
}

func TestOpenAIRetryAfterRead(t *testing.T) {
	hits := 0
	srv := http.NewServeMux()
	srv.HandleFunc("POST /chat/completions", func(w http.ResponseWriter, r *http.Request) {
		hits++
		if hits == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":"slow down"}`))
			return
		}
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"fine"}}]}`))
	})
	ts := newHTTPServer(t, srv)
	o, _ := NewOpenAI(OpenAIConfig{BaseURL: ts, Model: "m", Backoff: time.Millisecond})
	_, retryAfter, err := o.once(context.Background(), []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "slow down") || retryAfter != time.Second {
		t.Fatalf("first attempt: retryAfter %v err %v", retryAfter, err)
	}
	if got, err := o.Complete(context.Background(), []ChatMessage{{Role: "user", Content: "x"}}); err != nil || got != "fine" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestOpenAIEmptyAnswerIsAnError(t *testing.T) {
	srv := llmfake.New(func(llmfake.Request) string { return "  " })
	defer srv.Close()
	o := newTestOpenAI(t, srv)
	if _, err := o.Reply(context.Background(), turnDelivery("d1", "hi", "")); err == nil || !strings.Contains(err.Error(), "no text") {
		t.Fatalf("got %v", err)
	}
}

func TestOpenAIBaseURLWithoutV1(t *testing.T) {
	srv := llmfake.New(func(llmfake.Request) string { return "ok" })
	defer srv.Close()
	o := newTestOpenAI(t, srv, func(c *OpenAIConfig) { c.BaseURL = strings.TrimSuffix(srv.URL, "/v1") + "/" })
	if _, err := o.Reply(context.Background(), turnDelivery("d1", "hi", "")); err != nil {
		t.Fatal(err)
	}
	if p := srv.Requests()[0].Path; p != "/chat/completions" {
		t.Errorf("path %q", p)
	}
}

func TestNewOpenAIErrors(t *testing.T) {
	for _, c := range []OpenAIConfig{{Model: "m"}, {BaseURL: "localhost:11434", Model: "m"}, {BaseURL: "http://x"}} {
		if _, err := NewOpenAI(c); err == nil {
			t.Errorf("NewOpenAI(%+v) accepted", c)
		}
	}
}

func TestOpenAIDriverThroughRunner(t *testing.T) {
	llm := llmfake.New(func(r llmfake.Request) string {
		if strings.Contains(r.Last().Content, "[[request_conversation_end]]") {
			return "NO_REPLY"
		}
		return "Hi! Still keen on the sync tool?"
	})
	defer llm.Close()
	llm.FailNext(429) // the first call is rate limited and retried
	o := newTestOpenAI(t, llm)
	h := newFakeHub(t)
	startRunner(t, h, o)
	h.waitAuths(1)

	kick := kickoffDelivery(t, "dlv_1")
	h.deliver(mkDelivery("dlv_1", session, DeliveryKickoff, kick.Payload.Text, withContext(kick.Payload.ContextText), withCommand(kick.Payload.CommandText)))
	if got := h.waitAnswered("dlv_1"); got.text != "Hi! Still keen on the sync tool?" {
		t.Errorf("opener %+v", got)
	}
	h.deliver(mkDelivery("dlv_2", session, DeliveryReply, "Not anymore, sorry. [[request_conversation_end]]"))
	if got := h.waitAnswered("dlv_2"); got.kind != "kept_silent" || got.reason != ReasonNoReply {
		t.Errorf("second answer %+v", got)
	}
	reqs := llm.Answered()
	if len(reqs) != 2 || len(llm.Requests()) != 3 {
		t.Fatalf("%d answered of %d requests", len(reqs), len(llm.Requests()))
	}
	if !IsBaseline(reqs[1].System()) || len(reqs[1].Messages) != 4 {
		t.Errorf("second request lost the session's context:\n%s", dump(reqs[1].Messages))
	}
	h.checkClean()
}
