package replyctl

import (
	"strings"
	"testing"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func TestCodecRoundTrip(t *testing.T) {
	nonce := "abcdefghjkmnpqrstvwx"
	for _, c := range []Codec{{BotID: "bot_1"}, {BotID: "bot_1", Keys: [][]byte{testKey}}} {
		for _, a := range []Action{ActionContinue, ActionStop, ActionNone} {
			data, err := c.Encode(a, nonce)
			if err != nil {
				t.Fatalf("Encode(%c): %v", a, err)
			}
			if len(data) > MaxCallbackData {
				t.Fatalf("Encode produced %d bytes", len(data))
			}
			if !strings.HasPrefix(data, "rec1:"+string(a)+":"+nonce) {
				t.Fatalf("Encode = %q", data)
			}
			cb, v := c.Decode(data)
			if v != OK || cb.Action != a || cb.Nonce != nonce || cb.Version != 1 || cb.Signed != (len(c.Keys) > 0) {
				t.Fatalf("Decode(%q) = %+v, %v", data, cb, v)
			}
		}
	}
}

func TestCodecEncodeRejects(t *testing.T) {
	c := Codec{BotID: "b", Keys: [][]byte{testKey}}
	for _, tc := range []struct {
		a     Action
		nonce string
	}{
		{'x', "abcdefghjk"},
		{ActionContinue, "short"},
		{ActionContinue, "UPPERCASEUPPER"},
		{ActionContinue, "has:colon12"},
		{ActionContinue, strings.Repeat("a", 33)},
	} {
		if d, err := c.Encode(tc.a, tc.nonce); err == nil {
			t.Errorf("Encode(%c, %q) = %q, want an error", tc.a, tc.nonce, d)
		}
	}
}

// The 64-byte limit is checked, not assumed: the longest nonce with a tag
// fits, and the check itself rejects anything longer.
func TestCodecSizeLimit(t *testing.T) {
	c := Codec{BotID: "b", Keys: [][]byte{testKey}}
	d, err := c.Encode(ActionStop, strings.Repeat("z", maxNonceLen))
	if err != nil {
		t.Fatalf("longest nonce: %v", err)
	}
	if len(d) > MaxCallbackData {
		t.Fatalf("%d bytes", len(d))
	}
	long := "rec1:c:" + strings.Repeat("a", 30) + ":" + strings.Repeat("A", 30)
	if _, v := c.Decode(long); v != Malformed {
		t.Fatalf("Decode of %d bytes = %v, want malformed", len(long), v)
	}
	if _, v := c.Decode("rec1:c:" + strings.Repeat("a", 60)); v != Malformed {
		t.Fatalf("oversize unsigned data = %v, want malformed", v)
	}
}

func TestCodecDecodeVerdicts(t *testing.T) {
	signed := Codec{BotID: "bot_1", Keys: [][]byte{testKey}}
	unsigned := Codec{BotID: "bot_1"}
	nonce := "abcdefghjkmnpqrstvwx"
	good, _ := signed.Encode(ActionContinue, nonce)
	tag := good[strings.LastIndexByte(good, ':')+1:]
	otherBot, _ := Codec{BotID: "bot_2", Keys: [][]byte{testKey}}.Encode(ActionContinue, nonce)
	otherKey, _ := Codec{BotID: "bot_1", Keys: [][]byte{[]byte("another key, sixteen+ bytes")}}.Encode(ActionContinue, nonce)
	flipped := []byte(good)
	if flipped[len(flipped)-1] == 'A' {
		flipped[len(flipped)-1] = 'B'
	} else {
		flipped[len(flipped)-1] = 'A'
	}
	cases := []struct {
		name  string
		codec Codec
		data  string
		want  Verdict
	}{
		{"empty", signed, "", NotOurs},
		{"other plugin", signed, "menu:open", NotOurs},
		{"prefix without version", signed, "rec:c:" + nonce, NotOurs},
		{"word starting with rec", signed, "recent:1", NotOurs},
		{"version without colon", signed, "rec1", NotOurs},
		{"good signed", signed, good, OK},
		{"future version", signed, "rec2:c:" + nonce, Malformed},
		{"unknown action", signed, "rec1:x:" + nonce + ":" + tag, Malformed},
		{"empty action", signed, "rec1::" + nonce, Malformed},
		{"bad nonce chars", signed, "rec1:c:ABCDEFGHJK:" + tag, Malformed},
		{"too many parts", signed, good + ":x", Malformed},
		{"tag wrong length", signed, "rec1:c:" + nonce + ":abc", Malformed},
		{"flipped tag", signed, string(flipped), BadSignature},
		{"tag for another action", signed, "rec1:s:" + nonce + ":" + tag, BadSignature},
		{"minted for another bot", signed, otherBot, BadSignature},
		{"minted with another key", signed, otherKey, BadSignature},
		{"unsigned when signing is on", signed, "rec1:c:" + nonce, BadSignature},
		{"unsigned codec, unsigned data", unsigned, "rec1:c:" + nonce, OK},
		{"unsigned codec ignores a tag", unsigned, good, OK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cb, v := c.codec.Decode(c.data)
			if v != c.want {
				t.Fatalf("Decode(%q) = %v, want %v", c.data, v, c.want)
			}
			if v != OK && cb != (Callback{}) {
				t.Fatalf("non-OK verdict returned data %+v", cb)
			}
		})
	}
}

func TestCodecKeyRotation(t *testing.T) {
	old := Codec{BotID: "b", Keys: [][]byte{testKey}}
	rotated := Codec{BotID: "b", Keys: [][]byte{[]byte("the new key, 16+ bytes long"), testKey}}
	d, _ := old.Encode(ActionStop, "abcdefghjk")
	if _, v := rotated.Decode(d); v != OK {
		t.Fatalf("data signed with the old key: %v, want ok", v)
	}
	d2, _ := rotated.Encode(ActionStop, "abcdefghjk")
	if d2 == d {
		t.Fatal("rotated codec must sign with its first key")
	}
}

func TestNewNonceIsEncodable(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		n := newNonce()
		if !validNonce(n) {
			t.Fatalf("newNonce() = %q is not a valid nonce", n)
		}
		if seen[n] {
			t.Fatalf("duplicate nonce %q", n)
		}
		seen[n] = true
	}
}

func FuzzDecode(f *testing.F) {
	c := Codec{BotID: "bot_1", Keys: [][]byte{testKey}}
	good, _ := c.Encode(ActionContinue, "abcdefghjkmnpqrstvwx")
	for _, s := range []string{good, "", "rec1:c:abcdefghjk", "rec1:s:abcdefghjk:AAAAAAAAAAAAAAAA", "rec", "rec1:", "rec99:n:x", "menu", "rec1:c:" + strings.Repeat("a", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		for _, codec := range []Codec{c, {BotID: "bot_1"}} {
			cb, v := codec.Decode(data)
			if v == NotOurs && strings.HasPrefix(data, "rec1:") {
				t.Fatalf("%q claims our namespace but was judged not ours", data)
			}
			if v != OK {
				continue
			}
			if len(data) > MaxCallbackData {
				t.Fatalf("accepted %d bytes", len(data))
			}
			if cb.Signed || len(codec.Keys) == 0 && strings.Count(data, ":") == 2 {
				again, err := codec.Encode(cb.Action, cb.Nonce)
				if err != nil {
					t.Fatalf("re-encode of accepted %q: %v", data, err)
				}
				if again != data {
					t.Fatalf("accepted %q but encodes it as %q", data, again)
				}
			}
		}
	})
}
