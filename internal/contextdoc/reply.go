package contextdoc

import "strings"

// NoReply is the exact reply by which an agent keeps silent.
const NoReply = "NO_REPLY"

// Token is a conversation DSL token an agent may put in a reply.
type Token string

// The DSL tokens. Only these exact byte sequences count.
const (
	TokenLike    Token = "[[like]]"
	TokenDislike Token = "[[dislike]]"
	TokenEnd     Token = "[[request_conversation_end]]"
)

var allTokens = [...]Token{TokenLike, TokenDislike, TokenEnd}

// IsNoReply reports whether reply is the keep-silent signal: exactly
// NO_REPLY once surrounding whitespace is trimmed. Anything else — quoted,
// fenced, with punctuation or with other text — is an ordinary reply and is
// delivered to the peer.
func IsNoReply(reply string) bool {
	return strings.TrimSpace(reply) == NoReply
}

// Tokens returns the DSL tokens present in reply, each once, in order of
// first appearance.
//
// A token counts only when its exact text appears: lookalikes such as
// "[[ request_conversation_end ]]", "[[Request_Conversation_End]]" or
// fullwidth brackets are plain text. A token inside a fenced code block
// (a line of three or more backticks or tildes, indented at most three
// spaces, up to its closing fence or the end of the reply) does not count:
// fenced text is quoted, not said. A token in an inline code span does
// count, because agents often put backticks around the tokens they use.
// Both [[like]] and [[dislike]] may be returned; what that means is the
// caller's decision.
func Tokens(reply string) []Token {
	var found []Token
	var seen [len(allTokens)]bool
	var fenceChar byte
	fenceLen := 0 // > 0 while inside a fenced block
	for line := range strings.SplitSeq(reply, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if fenceLen > 0 {
			if closesFence(line, fenceChar, fenceLen) {
				fenceLen = 0
			}
			continue
		}
		if c, n, ok := opensFence(line); ok {
			fenceChar, fenceLen = c, n
			continue
		}
		for i := strings.Index(line, "[["); i >= 0 && i < len(line); {
			for k, t := range allTokens {
				if !seen[k] && strings.HasPrefix(line[i:], string(t)) {
					seen[k] = true
					found = append(found, t)
				}
			}
			j := strings.Index(line[i+1:], "[[")
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	return found
}

// fenceIndent returns the text after at most three leading spaces, or
// ok=false when the line is indented further (an indented code line, not a
// fence).
func fenceIndent(line string) (rest string, ok bool) {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i > 3 || (i < len(line) && line[i] == '\t') {
		return "", false
	}
	return line[i:], true
}

// opensFence reports whether line opens a fenced code block (CommonMark
// rules) and with which character and length.
func opensFence(line string) (byte, int, bool) {
	rest, ok := fenceIndent(line)
	if !ok || rest == "" || (rest[0] != '`' && rest[0] != '~') {
		return 0, 0, false
	}
	c := rest[0]
	n := 0
	for n < len(rest) && rest[n] == c {
		n++
	}
	if n < 3 || (c == '`' && strings.IndexByte(rest[n:], '`') >= 0) {
		return 0, 0, false
	}
	return c, n, true
}

// closesFence reports whether line closes a fenced block opened with n
// characters c: at least n of them and nothing else but spaces or tabs.
func closesFence(line string, c byte, n int) bool {
	rest, ok := fenceIndent(line)
	if !ok {
		return false
	}
	m := 0
	for m < len(rest) && rest[m] == c {
		m++
	}
	return m >= n && strings.TrimRight(rest[m:], " \t") == ""
}
