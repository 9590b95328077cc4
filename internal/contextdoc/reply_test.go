package contextdoc

import (
	"slices"
	"strings"
	"testing"
)

func TestIsNoReply(t *testing.T) {
	tests := []struct {
		reply string
		want  bool
	}{
		{"NO_REPLY", true},
		{"  NO_REPLY\n", true},
		{"\tNO_REPLY\r\n", true},
		{"no_reply", false},
		{"NO_REPLY.", false},
		{`"NO_REPLY"`, false},
		{"`NO_REPLY`", false},
		{"```\nNO_REPLY\n```", false},
		{"NO_REPLY NO_REPLY", false},
		{"I have nothing to add. NO_REPLY", false},
		{"NO_REPLY [[request_conversation_end]]", false},
		{"NO\u200bREPLY", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := IsNoReply(tc.reply); got != tc.want {
			t.Errorf("IsNoReply(%q) = %v, want %v", tc.reply, got, tc.want)
		}
	}
}

func TestTokens(t *testing.T) {
	tests := []struct {
		name  string
		reply string
		want  []Token
	}{
		{"none", "Sounds good, see you Sunday!", nil},
		{"end", "Great talking. [[request_conversation_end]]", []Token{TokenEnd}},
		{"order of first appearance, once each", "[[dislike]] hmm [[like]] [[dislike]] bye [[request_conversation_end]][[like]]",
			[]Token{TokenDislike, TokenLike, TokenEnd}},
		{"inline code counts", "ok `[[request_conversation_end]]`", []Token{TokenEnd}},
		{"triple brackets contain the token", "[[[like]]]", []Token{TokenLike}},
		{"spaces inside", "[[ request_conversation_end ]]", nil},
		{"case", "[[Request_Conversation_End]] [[LIKE]]", nil},
		{"fullwidth brackets", "［［request_conversation_end］］ ［［like］］", nil},
		{"single brackets", "[request_conversation_end] [like]", nil},
		{"broken", "[[request_conversation_end] [[like ]] [[dis like]]", nil},
		{"zero width", "[[request\u200b_conversation_end]]", nil},
		{"inside backtick fence", "Here is what they sent:\n```\n[[request_conversation_end]]\n```\nanyway", nil},
		{"inside tilde fence", "~~~text\n[[like]]\n~~~", nil},
		{"after fence closes", "```\n[[like]]\n```\nbye [[request_conversation_end]]", []Token{TokenEnd}},
		{"longer fence not closed by shorter", "````\n```\n[[like]]\n````\n[[dislike]]", []Token{TokenDislike}},
		{"unclosed fence hides the rest", "```\n[[request_conversation_end]]", nil},
		{"indented four spaces is not a fence", "    ```\n[[like]]", []Token{TokenLike}},
		{"backtick info with backtick is not a fence", "``` a`b\n[[like]]", []Token{TokenLike}},
		{"crlf", "bye\r\n[[request_conversation_end]]\r\n", []Token{TokenEnd}},
		{"fence closed with trailing spaces", "```\n[[like]]\n```  \r\n[[dislike]]", []Token{TokenDislike}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Tokens(tc.reply); !slices.Equal(got, tc.want) {
				t.Errorf("Tokens(%q) = %v, want %v", tc.reply, got, tc.want)
			}
		})
	}
}

// naiveTokens finds tokens by plain substring search, ordered by first
// index; it is correct for replies that contain no fence characters.
func naiveTokens(s string) []Token {
	type hit struct {
		at  int
		tok Token
	}
	var hits []hit
	for _, tok := range allTokens {
		if i := strings.Index(s, string(tok)); i >= 0 {
			hits = append(hits, hit{i, tok})
		}
	}
	slices.SortFunc(hits, func(a, b hit) int { return a.at - b.at })
	var out []Token
	for _, h := range hits {
		out = append(out, h.tok)
	}
	return out
}

func FuzzTokens(f *testing.F) {
	for _, s := range []string{
		"", "NO_REPLY", "hi [[like]]", "[[request_conversation_end]]", "```\n[[like]]\n```\n[[dislike]]",
		"[[[[like]]]]", "[[ like ]]", "~~~~\n[[dislike]]\n~~~", "`[[like]]`", "x\r\n```\r\n[[like]]\r\n```\r\n[[like]]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Tokens(s)
		seen := map[Token]bool{}
		for _, tok := range got {
			if !slices.Contains(allTokens[:], tok) {
				t.Fatalf("unknown token %q", tok)
			}
			if seen[tok] {
				t.Fatalf("token %q returned twice", tok)
			}
			seen[tok] = true
			if !strings.Contains(s, string(tok)) {
				t.Fatalf("token %q returned but absent from %q", tok, s)
			}
		}
		if !strings.ContainsAny(s, "`~") {
			if want := naiveTokens(s); !slices.Equal(got, want) {
				t.Fatalf("Tokens(%q) = %v, want %v (no fences present)", s, got, want)
			}
		}
		if toks := Tokens(Fence(s)); len(toks) != 0 {
			t.Fatalf("tokens %v counted inside Fence(%q)", toks, s)
		}
		if IsNoReply(s) && len(got) != 0 {
			t.Fatalf("NO_REPLY with tokens: %q", s)
		}
	})
}
