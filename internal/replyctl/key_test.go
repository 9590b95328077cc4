package replyctl

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

func TestKeyStringRoundTrip(t *testing.T) {
	cases := []struct {
		key  Key
		want string
	}{
		{Key{BotID: "bot_1", ChatID: 42}, "bot_1:42"},
		{Key{BotID: "bot_1", ChatID: -1001234567890, ThreadID: 7}, "bot_1:-1001234567890:t7"},
		{Key{BotID: "b", ChatID: -5, ThreadID: 7, UserID: 99}, "b:-5:t7:u99"},
		{Key{BotID: "b", ChatID: -5, UserID: 99}, "b:-5:u99"},
		{Key{BotID: "b", ChatID: 5, BusinessConnectionID: "AbC-_x"}, "b:5:bQWJDLV94"},
		{Key{BotID: "b-2", ChatID: 5, ThreadID: 1, UserID: 2, BusinessConnectionID: "z:z/+="}, "b-2:5:t1:u2:bejp6Lys9"},
	}
	for _, c := range cases {
		if got := c.key.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.key, got, c.want)
		}
		back, err := ParseKey(c.want)
		if err != nil {
			t.Errorf("ParseKey(%q): %v", c.want, err)
			continue
		}
		if back != c.key {
			t.Errorf("ParseKey(%q) = %+v, want %+v", c.want, back, c.key)
		}
	}
}

func TestParseKeyRejects(t *testing.T) {
	for _, s := range []string{
		"", "bot", "bot:", ":5", "bot:0", "bot:-0", "bot:+5", "bot:05", "bot:5:", "bot:5:t0", "bot:5:u0",
		"bot:5:t-1", "bot:5:u-3", "bot:5:x1", "bot:5:u1:t2", "bot:5:t1:t2", "bot:5:b", "bot:5:bQQ==", "bot:5:b!!",
		"bo t:5", "bot/x:5", "bot:5:t1:u2:bQQ:extra", "bot:abc", strings.Repeat("a", 65) + ":5",
		"bot:5:bQR", // non-canonical trailing bits
		"bot:99999999999999999999",
	} {
		_, err := ParseKey(s)
		if err == nil {
			t.Errorf("ParseKey(%q) succeeded, want an error", s)
			continue
		}
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Class != protocol.ClassInvalid || pe.FieldErrors["key"] == "" {
			t.Errorf("ParseKey(%q) error %v is not an E003 naming field key", s, err)
		}
	}
}

func TestKeyValidate(t *testing.T) {
	cases := []struct {
		key   Key
		field string // "" = valid
	}{
		{Key{BotID: "bot_1", ChatID: 1}, ""},
		{Key{BotID: "", ChatID: 1}, "botId"},
		{Key{BotID: "bot:1", ChatID: 1}, "botId"},
		{Key{BotID: "b", ChatID: 0}, "chatId"},
		{Key{BotID: "b", ChatID: 1, ThreadID: -1}, "threadId"},
		{Key{BotID: "b", ChatID: 1, UserID: -1}, "userId"},
		{Key{BotID: "b", ChatID: 1, BusinessConnectionID: "has space"}, "businessConnectionId"},
		{Key{BotID: "b", ChatID: 1, BusinessConnectionID: strings.Repeat("x", 129)}, "businessConnectionId"},
	}
	for _, c := range cases {
		err := c.key.Validate()
		if c.field == "" {
			if err != nil {
				t.Errorf("%+v: unexpected error %v", c.key, err)
			}
			continue
		}
		pe := protocol.AsError(err)
		if err == nil || pe.FieldErrors[c.field] == "" {
			t.Errorf("%+v: error %v does not name %s", c.key, err, c.field)
		}
	}
}

func TestKeyFromParams(t *testing.T) {
	k, err := KeyFromParams("bot_1", "-100", "3", "bc1", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Key{BotID: "bot_1", ChatID: -100, ThreadID: 3, BusinessConnectionID: "bc1"}); k != want {
		t.Fatalf("got %+v, want %+v", k, want)
	}
	_, err = KeyFromParams("bot_1", "", "x", "", "y")
	pe := protocol.AsError(err)
	for _, f := range []string{"chatId", "threadId", "userId"} {
		if pe == nil || pe.FieldErrors[f] == "" {
			t.Errorf("error %v does not name %s", err, f)
		}
	}
}

func TestKeyOf(t *testing.T) {
	w := Where{ChatID: -5, ThreadID: 3, Kind: KindGroup, UserID: 9, BusinessConnectionID: "bc"}
	if k := (BotConfig{BotID: "b"}).KeyOf(w); k.UserID != 0 || k.ThreadID != 3 || k.BusinessConnectionID != "bc" {
		t.Errorf("chat-wide key = %+v", k)
	}
	if k := (BotConfig{BotID: "b", PerUserInGroups: true}).KeyOf(w); k.UserID != 9 {
		t.Errorf("per-user group key = %+v", k)
	}
	w.Kind = KindDirect
	if k := (BotConfig{BotID: "b", PerUserInGroups: true}).KeyOf(w); k.UserID != 0 {
		t.Errorf("per-user setting must not split direct chats: %+v", k)
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"bot_1:42", "b:-5:t7:u99", "b:5:bQWJDLV94", "b:5:t1:u2:bejp6Lys9", "x:0", "a:1:t", "::", "b:5:bQR"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			return
		}
		if err := k.Validate(); err != nil {
			t.Fatalf("ParseKey(%q) returned an invalid key %+v: %v", s, k, err)
		}
		if got := k.String(); got != s {
			t.Fatalf("ParseKey(%q).String() = %q: parsed key is not canonical", s, got)
		}
	})
}

func FuzzKeyRoundTrip(f *testing.F) {
	f.Add("bot_1", "", int64(5), int64(0), int64(0))
	f.Add("b", "bc/+=", int64(-100), int64(3), int64(9))
	f.Fuzz(func(t *testing.T, bot, bc string, chat, thread, user int64) {
		k := Key{BotID: bot, BusinessConnectionID: bc, ChatID: chat, ThreadID: thread, UserID: user}
		if k.Validate() != nil {
			return
		}
		back, err := ParseKey(k.String())
		if err != nil {
			t.Fatalf("ParseKey(%q) of a valid key: %v", k.String(), err)
		}
		if back != k {
			t.Fatalf("round trip %+v → %q → %+v", k, k.String(), back)
		}
	})
}
