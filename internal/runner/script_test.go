package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

const demoScript = `
# Mira's side of the demo.
kickoff: "Hi Tomas! Still up for the sync tool?"
replies:
  - "Weekends work for me. [[like]]"
  - "Deal. Talk Sunday! [[request_conversation_end]]"
default: NO_REPLY
sessions:
  - match: "management:*"
    replies: ["Noted, I'll tell my owner."]
`

func TestParseScriptSpec(t *testing.T) {
	spec, err := ParseScriptSpec([]byte(demoScript))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Kickoff != "Hi Tomas! Still up for the sync tool?" || len(spec.Replies) != 2 || spec.Default != "NO_REPLY" ||
		len(spec.Sessions) != 1 || spec.Sessions[0].Match != "management:*" {
		t.Errorf("parsed %+v", spec)
	}
	asJSON, err := ParseScriptSpec([]byte(`{"kickoff": "hi", "replies": ["a", "b"]}`))
	if err != nil || asJSON.Kickoff != "hi" || len(asJSON.Replies) != 2 {
		t.Errorf("JSON script: %+v, %v", asJSON, err)
	}
}

func TestParseScriptSpecErrors(t *testing.T) {
	tests := []struct{ name, src, field string }{
		{"empty", "", "script"},
		{"comment only", "# nothing\n", "script"},
		{"unknown key (typo)", "kickof: hi\n", "script"},
		{"wrong type", "replies: {a: b}\n", "script"},
		{"says nothing", "replies: []\n", "script"},
		{"blank reply", "replies: [\"ok\", \"  \"]\n", "replies[1]"},
		{"bad glob", "sessions: [{match: \"[\", replies: [x]}]\n", "sessions[0].match"},
		{"missing match", "sessions: [{replies: [x]}]\n", "sessions[0].match"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScriptSpec([]byte(tc.src))
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Class != protocol.ClassInvalid {
				t.Fatalf("got %v, want an E003 *protocol.Error", err)
			}
			if _, ok := pe.FieldErrors[tc.field]; !ok && !strings.Contains(pe.Code, tc.field) {
				t.Errorf("error %v (fields %v) does not name %q", pe, pe.FieldErrors, tc.field)
			}
		})
	}
}

func TestScriptWalksEachSession(t *testing.T) {
	drv, err := NewScript(ScriptSpec{Kickoff: "opener", Replies: []string{"r1", "r2"},
		Sessions: []SessionScript{{Match: "management:*", Replies: []string{"noted"}, Default: "fine"}}})
	if err != nil {
		t.Fatal(err)
	}
	baseline := "# Background\n\n## Conversation Facts\n"
	steps := []struct {
		session, typ, ctx, want string
	}{
		{"conversation:a:b", DeliveryKickoff, baseline, "opener"},
		{"conversation:a:b", DeliveryReply, "", "r1"},
		{"conversation:a:c", DeliveryReply, baseline, "r1"}, // another session walks on its own
		{"conversation:a:b", DeliveryReply, "# Live Turn\n", "r2"},
		{"conversation:a:b", DeliveryReply, "", "NO_REPLY"},
		{"conversation:a:b", DeliveryReply, "", "NO_REPLY"},
		{"conversation:a:b", DeliveryReply, baseline, "r1"}, // a new intent starts over
		{"conversation:a:b", DeliveryKickoff, baseline, "opener"},
		{"conversation:a:b", DeliveryReply, "", "r1"},
		{"management:a", DeliveryMessage, "", "noted"},
		{"management:a", DeliveryMessage, "", "fine"},
	}
	for i, s := range steps {
		got, err := drv.Reply(context.Background(), Delivery{SessionKey: s.session, Metadata: Metadata{DeliveryType: s.typ},
			Payload: Payload{Text: "x", ContextText: s.ctx}})
		if err != nil || got != s.want {
			t.Errorf("step %d (%s %s): got %q, %v; want %q", i, s.session, s.typ, got, err, s.want)
		}
	}
}

func TestScriptKickoffWithoutKickoffTakesNextReply(t *testing.T) {
	drv, _ := NewScript(ScriptSpec{Replies: []string{"first"}})
	got, _ := drv.Reply(context.Background(), Delivery{SessionKey: "s", Metadata: Metadata{DeliveryType: DeliveryKickoff}})
	if got != "first" {
		t.Errorf("got %q", got)
	}
}

func TestLoadScript(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mira.yaml")
	if err := os.WriteFile(good, []byte(demoScript), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadScript(good); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte("replys: [a]\n"), 0o644)
	if _, err := LoadScript(bad); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("error %v does not name the file", err)
	}
	if _, err := LoadScript(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
}

func FuzzParseScriptSpec(f *testing.F) {
	f.Add([]byte(demoScript))
	f.Add([]byte(`{"kickoff":"a","replies":["b"],"sessions":[{"match":"*","default":"c"}]}`))
	f.Add([]byte("replies: [\"\"]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := ParseScriptSpec(data)
		if err != nil {
			return
		}
		drv, err := NewScript(spec)
		if err != nil {
			t.Fatalf("parsed script fails NewScript: %v", err)
		}
		for _, typ := range []string{DeliveryKickoff, DeliveryReply, DeliveryReply} {
			got, err := drv.Reply(context.Background(), Delivery{SessionKey: "management:x", Metadata: Metadata{DeliveryType: typ}})
			if err != nil {
				t.Fatal(err)
			}
			if got == "" {
				// An empty kickoff falls through to replies/default, which
				// are never blank.
				if typ != DeliveryKickoff || spec.Kickoff != "" {
					t.Fatalf("empty answer from %+v", spec)
				}
			}
		}
	})
}
