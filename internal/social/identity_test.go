package social_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/social"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestParseIdentity(t *testing.T) {
	tests := []struct {
		in, name, code, err string
	}{
		{"Runtime Friend#ZX82QP", "Runtime Friend", "ZX82QP", ""},
		{"  Runtime Friend # zx82qp ", "Runtime Friend", "ZX82QP", ""},
		{"zx82qp", "", "ZX82QP", ""},
		{"#ZX82QP", "", "ZX82QP", ""},
		{"A#B#ZX82QP", "A#B", "ZX82QP", ""},
		{"小龙虾#ABCDEF", "小龙虾", "ABCDEF", ""},
		{"", "", "", "identity_required"},
		{"   ", "", "", "identity_required"},
		{"Name#", "", "", "invalid_agent_code"},
		{"Name#ZX82Q", "", "", "invalid_agent_code"},
		{"Name#ZX82QPX", "", "", "invalid_agent_code"},
		{"Name#ZX82Q0", "", "", "invalid_agent_code"}, // 0 is not in the alphabet
		{"Name#ZX82QI", "", "", "invalid_agent_code"}, // nor I
		{"Name#ZX82Q1", "", "", "invalid_agent_code"},
		{"Name#ZX82QO", "", "", "invalid_agent_code"},
		{"Name", "", "", "invalid_agent_code"},
		{"Name#ZX82QP#", "", "", "invalid_agent_code"},
	}
	for _, tt := range tests {
		id, err := social.ParseIdentity(tt.in)
		if got := protocol.CodeOf(err); got != tt.err {
			t.Errorf("ParseIdentity(%q) error %q, want %q", tt.in, got, tt.err)
			continue
		}
		if err == nil && (id.Name != tt.name || id.Code != tt.code) {
			t.Errorf("ParseIdentity(%q) = %+v, want %s/%s", tt.in, id, tt.name, tt.code)
		}
		if err != nil && protocol.ClassOf(err) != protocol.ClassInvalid {
			t.Errorf("ParseIdentity(%q): class %s", tt.in, protocol.ClassOf(err))
		}
	}
}

func TestNewCodeAndNormalize(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 2000; i++ {
		c := social.NewCode()
		n, ok := social.NormalizeCode(strings.ToLower(c))
		if !ok || n != c {
			t.Fatalf("code %q does not normalize to itself (%q %v)", c, n, ok)
		}
		seen[c] = true
	}
	if len(seen) < 1990 {
		t.Fatalf("codes repeat too often: %d distinct of 2000", len(seen))
	}
}

// FuzzParseIdentity: the parser never panics; what it accepts is a valid
// code and a name without surrounding space, the code is exactly what
// follows the last '#', and the identity round-trips through String.
func FuzzParseIdentity(f *testing.F) {
	for _, s := range []string{"Runtime Friend#ZX82QP", "a#b#c#ABCDEF", "#", "", "zx82qp", "名字#abcdef", "x#\x00\xff", strings.Repeat("#", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := social.ParseIdentity(s)
		if err != nil {
			if protocol.ClassOf(err) != protocol.ClassInvalid {
				t.Fatalf("ParseIdentity(%q): non-E003 error %v", s, err)
			}
			return
		}
		if c, ok := social.NormalizeCode(id.Code); !ok || c != id.Code {
			t.Fatalf("ParseIdentity(%q) accepted code %q", s, id.Code)
		}
		if id.Name != strings.TrimSpace(id.Name) {
			t.Fatalf("ParseIdentity(%q) name %q not trimmed", s, id.Name)
		}
		if i := strings.LastIndexByte(s, '#'); i >= 0 && strings.ToUpper(strings.TrimSpace(s[i+1:])) != id.Code {
			t.Fatalf("ParseIdentity(%q) code %q is not the part after the last #", s, id.Code)
		}
		again, err := social.ParseIdentity(id.String())
		if id.Name != "" && (err != nil || again != id) {
			t.Fatalf("round trip of %q: %+v %v", id.String(), again, err)
		}
	})
}

// FuzzLocalSessionKey: parsing never panics, and keys built by
// LocalSessionKey parse back to their parts.
func FuzzLocalSessionKey(f *testing.F) {
	f.Add("agt_a", "agt_b", "wld_c")
	f.Add("agt_a", "agt_b", "")
	f.Fuzz(func(t *testing.T, viewer, peer, world string) {
		key := social.LocalSessionKey(viewer, peer, world)
		v, p, w, ok := social.ParseLocalSessionKey(key)
		valid := viewer != "" && peer != "" && !strings.Contains(viewer+peer+world, ":")
		if valid && (!ok || v != viewer || p != peer || w != world) {
			t.Fatalf("round trip %q: %q %q %q %v", key, v, p, w, ok)
		}
		social.ParseLocalSessionKey(viewer + peer + world)
	})
}

func TestParseContactPolicy(t *testing.T) {
	for in, want := range map[string]string{
		"open": "open", "auto_accept": "open", "AUTO_ACCEPT": "open", " approval_required ": "approval_required",
		"manual_review": "approval_required", "closed": "closed", "do_not_disturb": "closed", "reject_all": "closed", "sometimes": "",
	} {
		got, ok := social.ParseContactPolicy(in)
		if got != want || ok != (want != "") {
			t.Errorf("ParseContactPolicy(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
}

func TestSearchTerms(t *testing.T) {
	got := social.SearchTerms(`Trail "running" OR shanghai:* -x NEAR(a b)`, []string{"Trail", "weekend"}, []string{"coffee"})
	want := "trail running or shanghai near weekend coffee"
	if strings.Join(got, " ") != want {
		t.Fatalf("SearchTerms = %q, want %q", strings.Join(got, " "), want)
	}
	if n := len(social.SearchTerms(strings.Repeat("word ", 5) + strings.Repeat("x", 100) + " a1 a2 a3 a4 a5 a6 a7 a8 a9 b1 b2 b3 b4 b5 b6 b7 b8")); n != 16 {
		t.Fatalf("terms not capped: %d", n)
	}
}

// The share card's text form is an exact format people paste into chats.
func TestShareCardGolden(t *testing.T) {
	cases := map[string]social.ShareCard{
		"sharecard_full.golden": {Identity: "Runtime Friend#ZX82QP", DisplayName: "Runtime Friend", AgentCode: "ZX82QP",
			Headline: "Trail runner's assistant in Shanghai", HubURL: "https://hub.example.org"},
		"sharecard_minimal.golden": {Identity: "小龙虾#ABCDEF", DisplayName: "小龙虾", AgentCode: "ABCDEF"},
	}
	for file, c := range cases {
		got := social.ShareCardText(c)
		path := filepath.Join("testdata", file)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create)", err)
		}
		if got != string(want) {
			t.Errorf("%s:\ngot:\n%s\nwant:\n%s", file, got, want)
		}
	}
}
