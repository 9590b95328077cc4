package replyctl

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestDecisionTable(t *testing.T) {
	cases := []struct {
		choice                      Choice
		followUp, proactive, closed bool
	}{
		{ChoiceNone, true, false, false},
		{ChoiceContinue, true, true, false},
		{ChoiceStop, false, false, true},
		{ChoiceSuperseded, true, false, false},
		{ChoiceExpired, true, false, false},
		{"garbage", true, false, false},
	}
	for _, c := range cases {
		st := State{Key: Key{BotID: "b", ChatID: 1}, LastChoice: c.choice, Source: SourceButton, At: t0, ReplyID: "r1", MessageID: 9}
		d := Decide(st, t0)
		if d.FollowUpAllowed != c.followUp || d.ProactiveAllowed != c.proactive || d.Closed != c.closed {
			t.Errorf("%s: got followUp=%v proactive=%v closed=%v", c.choice, d.FollowUpAllowed, d.ProactiveAllowed, d.Closed)
		}
		if d.Hint == "" {
			t.Errorf("%s: empty hint", c.choice)
		}
		if d.Conversation != "b:1" {
			t.Errorf("%s: conversation %q", c.choice, d.Conversation)
		}
		if (d.LastChoice == ChoiceNone) != (d.At.IsZero() && d.Source == SourceNone && d.ReplyID == "") {
			t.Errorf("%s: none must carry no source/at/reply, others must: %+v", c.choice, d)
		}
	}
}

func TestDecideAppliesExpiry(t *testing.T) {
	k := Key{BotID: "b", ChatID: 1}
	live := State{Key: k, LastChoice: ChoiceContinue, Source: SourceButton, At: t0, ChoiceExpiresAt: t0.Add(24 * time.Hour),
		LiveNonce: "abcdefghjk", LiveMessageID: 5, LiveReplyID: "r2", LiveIssuedAt: t0.Add(time.Hour), LiveExpiresAt: t0.Add(2 * time.Hour)}
	cases := []struct {
		name   string
		st     State
		at     time.Time
		want   Choice
		wantAt time.Time
		msg    int64
	}{
		{"choice still valid", live, t0.Add(time.Hour), ChoiceContinue, t0, 0},
		{"live keyboard expired", live, t0.Add(2 * time.Hour), ChoiceExpired, t0.Add(2 * time.Hour), 5},
		{"choice expired, no live", State{Key: k, LastChoice: ChoiceStop, Source: SourceButton, At: t0, MessageID: 3, ChoiceExpiresAt: t0.Add(time.Hour)},
			t0.Add(time.Hour), ChoiceExpired, t0.Add(time.Hour), 3},
		{"expired stays expired", State{Key: k, LastChoice: ChoiceExpired, Source: SourceTimeout, At: t0}, t0.Add(1000 * time.Hour), ChoiceExpired, t0, 0},
	}
	for _, c := range cases {
		d := Decide(c.st, c.at)
		if d.LastChoice != c.want || !d.At.Equal(c.wantAt) || d.MessageID != c.msg {
			t.Errorf("%s: got %s at %v msg %d, want %s at %v msg %d", c.name, d.LastChoice, d.At, d.MessageID, c.want, c.wantAt, c.msg)
		}
		if c.want == ChoiceExpired && d.Source != SourceTimeout {
			t.Errorf("%s: source %q, want timeout", c.name, d.Source)
		}
	}
}

func TestDecisionJSON(t *testing.T) {
	d := Decide(State{Key: Key{BotID: "b", ChatID: 1}, LastChoice: ChoiceStop, Source: SourceButton, At: t0}, t0)
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"lastChoice", "source", "at", "followUpAllowed", "proactiveAllowed", "closed", "hint"} {
		if _, ok := m[f]; !ok {
			t.Errorf("JSON lacks %q: %s", f, b)
		}
	}
	if m["at"] != "2026-03-01T12:00:00Z" {
		t.Errorf("at = %v, want RFC 3339 UTC", m["at"])
	}
	none, _ := json.Marshal(Decide(State{}, t0))
	m = nil
	if err := json.Unmarshal(none, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["at"]; ok {
		t.Errorf("a none decision must omit at: %s", none)
	}
}

func TestShouldAttach(t *testing.T) {
	cases := []struct {
		scope  Scope
		kind   ChatKind
		chat   ChatControls
		wants  bool
		attach bool
		reason string
	}{
		{ScopeAll, KindDirect, ControlsDefault, true, true, ReasonAttach},
		{"", KindGroup, ControlsDefault, true, true, ReasonAttach},
		{ScopeAll, KindDirect, ControlsDefault, false, false, ReasonReplyOptOut},
		{ScopeOff, KindDirect, ControlsOn, true, false, ReasonBotOff},
		{ScopeDM, KindDirect, ControlsDefault, true, true, ReasonAttach},
		{ScopeDM, KindGroup, ControlsDefault, true, false, ReasonOutOfScope},
		{ScopeDM, KindGroup, ControlsOn, true, true, ReasonChatOn},
		{ScopeGroup, KindDirect, ControlsDefault, true, false, ReasonOutOfScope},
		{ScopeGroup, KindGroup, ControlsDefault, true, true, ReasonAttach},
		{ScopeGroup, KindChannel, ControlsDefault, true, true, ReasonAttach},
		{ScopeAll, KindGroup, ControlsOff, true, false, ReasonChatOff},
		{ScopeAll, "", ControlsDefault, true, false, ReasonUnknownChatKey},
	}
	for _, c := range cases {
		attach, reason := ShouldAttach(c.scope, c.kind, c.chat, c.wants)
		if attach != c.attach || reason != c.reason {
			t.Errorf("ShouldAttach(%q, %q, %q, %v) = %v, %s; want %v, %s", c.scope, c.kind, c.chat, c.wants, attach, reason, c.attach, c.reason)
		}
	}
}

func TestParseScopeAndConfig(t *testing.T) {
	for _, s := range []string{"", "off", "dm", "group", "all"} {
		if _, err := ParseScope(s); err != nil {
			t.Errorf("ParseScope(%q): %v", s, err)
		}
	}
	if _, err := ParseScope("everyone"); err == nil {
		t.Error("ParseScope(everyone) succeeded")
	}
	bad := BotConfig{BotID: "", Scope: "x", NonceTTL: -1, Resolve: "explode", Keys: [][]byte{[]byte("short")}, DefaultLocale: "fr"}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad config validated")
	}
	for _, f := range []string{"botId", "scope", "nonceTtl", "resolve", "keys[0]", "defaultLocale"} {
		if e := asProtocol(err); e.FieldErrors[f] == "" {
			t.Errorf("config error does not name %s: %v", f, err)
		}
	}
	if err := (BotConfig{BotID: "bot_1"}).Validate(); err != nil {
		t.Errorf("minimal config: %v", err)
	}
}

func asProtocol(err error) *protocol.Error { return protocol.AsError(err) }
