// Package llmfake is a small OpenAI-compatible chat-completions server for
// tests and offline demos: it answers POST /v1/chat/completions (and
// /chat/completions) with whatever a Go function returns, records every
// request, and fails on demand with 429 or 5xx so retry paths can be
// exercised without a real model.
//
//	srv := llmfake.New(func(r llmfake.Request) string { return "hi " + r.Last().Content })
//	defer srv.Close()
//	// point a client at srv.URL (which ends in /v1)
package llmfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is a recorded chat-completion request.
type Request struct {
	Path          string
	Authorization string
	Model         string
	Messages      []Message
	// Status is what the server answered.
	Status int
	// Body is the raw request body.
	Body json.RawMessage
}

// System returns the content of the first system message ("" if none).
func (r Request) System() string {
	for _, m := range r.Messages {
		if m.Role == "system" {
			return m.Content
		}
	}
	return ""
}

// Last returns the last message.
func (r Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// Server is a running fake.
type Server struct {
	// URL is the API base URL, ending in /v1.
	URL string
	// APIKey, when set before the first request, makes the server answer
	// 401 to requests without "Authorization: Bearer <APIKey>".
	APIKey string

	srv    *httptest.Server
	answer func(Request) string

	mu       sync.Mutex
	requests []Request
	failures []int
	seq      int
}

// New starts a server whose completions are answer(request).
func New(answer func(Request) string) *Server {
	s := &Server{answer: answer}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	mux.HandleFunc("POST /chat/completions", s.complete)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// FailNext makes the next len(statuses) requests fail with these HTTP
// statuses, in order (e.g. FailNext(429, 500)).
func (s *Server) FailNext(statuses ...int) {
	s.mu.Lock()
	s.failures = append(s.failures, statuses...)
	s.mu.Unlock()
}

// Requests returns every request received so far, failed ones included.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Answered returns the requests that got a completion.
func (s *Server) Answered() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Status == http.StatusOK {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model    string    `json:"model"`
		Messages []Message `json:"messages"`
	}
	raw := json.RawMessage{}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20))
	err := dec.Decode(&raw)
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	req := Request{Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Model: body.Model, Messages: body.Messages, Body: raw}

	s.mu.Lock()
	var fail int
	switch {
	case err != nil:
		fail = http.StatusBadRequest
	case body.Model == "" || len(body.Messages) == 0:
		fail = http.StatusBadRequest
		err = fmt.Errorf("model and messages are required")
	case s.APIKey != "" && req.Authorization != "Bearer "+s.APIKey:
		fail = http.StatusUnauthorized
		err = fmt.Errorf("incorrect API key provided")
	case len(s.failures) > 0:
		fail = s.failures[0]
		s.failures = s.failures[1:]
		err = fmt.Errorf("injected failure")
	}
	req.Status = http.StatusOK
	if fail != 0 {
		req.Status = fail
	}
	s.requests = append(s.requests, req)
	s.seq++
	id := s.seq
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	if fail != 0 {
		typ := "invalid_request_error"
		switch {
		case fail == http.StatusTooManyRequests:
			typ = "rate_limit_error"
		case fail >= 500:
			typ = "server_error"
		case fail == http.StatusUnauthorized:
			typ = "authentication_error"
		}
		w.WriteHeader(fail)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": err.Error(), "type": typ}})
		return
	}
	content := s.answer(req)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-fake-%d", id), "object": "chat.completion", "created": time.Now().Unix(), "model": body.Model,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
		"usage":   map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
	})
}
