package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/switchboard-hub/switchboard/internal/contextdoc"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// ScriptSpec is a script of canned replies: the `--script` file, in YAML
// or JSON. It makes an agent fully deterministic, which is what demos and
// end-to-end tests need:
//
//	kickoff: "Hi! Are you the one who runs the Sunday Sheshan loop?"
//	replies:
//	  - "Great, count me in. [[like]]"
//	  - "See you Sunday! [[request_conversation_end]]"
//	default: NO_REPLY
//	sessions:                      # optional, first match wins
//	  - match: "management:*"
//	    replies: ["Noted."]
//
// Each session (sessionKey) walks the script on its own: a kickoff
// delivery is answered with Kickoff; every other delivery takes the next
// entry of Replies, and Default once they are used up. A kickoff, or any
// delivery carrying a full context document (a new intent), starts the
// session's walk over. Sessions entries override the top-level script for
// session keys matching their glob (path.Match syntax: `*` matches any
// run of characters without a `/`).
type ScriptSpec struct {
	// Kickoff answers kickoff deliveries (the opener); empty means "take
	// the next reply".
	Kickoff string `yaml:"kickoff" json:"kickoff"`
	// Replies answer the other deliveries, in order.
	Replies []string `yaml:"replies" json:"replies"`
	// Default answers once Replies are used up (default NO_REPLY).
	Default string `yaml:"default" json:"default"`
	// Sessions are per-session-key overrides.
	Sessions []SessionScript `yaml:"sessions" json:"sessions"`
}

// SessionScript is a script for the sessions whose key matches Match.
type SessionScript struct {
	Match   string   `yaml:"match" json:"match"`
	Kickoff string   `yaml:"kickoff" json:"kickoff"`
	Replies []string `yaml:"replies" json:"replies"`
	Default string   `yaml:"default" json:"default"`
}

// ParseScriptSpec decodes a script (YAML, or JSON, which is YAML) strictly:
// unknown keys are errors, so a typo does not silently change a demo.
func ParseScriptSpec(data []byte) (ScriptSpec, error) {
	var s ScriptSpec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return ScriptSpec{}, protocol.Invalid("script", "the script is empty; give at least kickoff, replies or default")
		}
		e := protocol.Invalid("script", "the script is not valid YAML or JSON of the documented shape {kickoff, replies, default, sessions}")
		e.Err = err
		return ScriptSpec{}, e
	}
	return s, s.Validate()
}

// Validate checks the patterns and reports every problem at once.
func (s ScriptSpec) Validate() error {
	fe := protocol.FieldErrors{}
	if s.Kickoff == "" && len(s.Replies) == 0 && s.Default == "" && len(s.Sessions) == 0 {
		fe.Add("script", "the script says nothing; give at least kickoff, replies or default")
	}
	for i, r := range s.Replies {
		if strings.TrimSpace(r) == "" {
			fe.Add("replies["+strconv.Itoa(i)+"]", "a reply must not be blank; write NO_REPLY to keep silent")
		}
	}
	for i, ss := range s.Sessions {
		f := "sessions[" + strconv.Itoa(i) + "]"
		if ss.Match == "" {
			fe.Add(f+".match", "match is required: a glob on the session key, e.g. \"management:*\"")
		} else if _, err := path.Match(ss.Match, ""); err != nil {
			fe.Add(f+".match", fmt.Sprintf("%q is not a valid glob: %v", ss.Match, err))
		}
		for j, r := range ss.Replies {
			if strings.TrimSpace(r) == "" {
				fe.Add(f+".replies["+strconv.Itoa(j)+"]", "a reply must not be blank; write NO_REPLY to keep silent")
			}
		}
	}
	return fe.Err()
}

// Script is the driver that plays a [ScriptSpec]. It never fails, so each
// delivery gets exactly one scripted answer.
type Script struct {
	spec ScriptSpec

	mu       sync.Mutex
	sessions map[string]int // sessionKey → index of the next reply
}

// NewScript checks spec and returns its driver.
func NewScript(spec ScriptSpec) (*Script, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &Script{spec: spec, sessions: map[string]int{}}, nil
}

// LoadScript reads and parses a script file.
func LoadScript(file string) (*Script, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("script: %w", err)
	}
	spec, err := ParseScriptSpec(data)
	if err != nil {
		return nil, fmt.Errorf("script %s: %w", file, err)
	}
	return NewScript(spec)
}

// rules returns the script for a session key.
func (s *Script) rules(key string) (kickoff string, replies []string, def string) {
	for _, ss := range s.spec.Sessions {
		if ok, _ := path.Match(ss.Match, key); ok {
			return ss.Kickoff, ss.Replies, ss.Default
		}
	}
	return s.spec.Kickoff, s.spec.Replies, s.spec.Default
}

// Reply returns the next scripted answer for d's session.
func (s *Script) Reply(_ context.Context, d Delivery) (string, error) {
	kickoff, replies, def := s.rules(d.SessionKey)
	if def == "" {
		def = contextdoc.NoReply
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.Kickoff() || d.Baseline() {
		s.sessions[d.SessionKey] = 0
	}
	if d.Kickoff() && kickoff != "" {
		return kickoff, nil
	}
	i := s.sessions[d.SessionKey]
	if i >= len(replies) {
		return def, nil
	}
	s.sessions[d.SessionKey] = i + 1
	return replies[i], nil
}
