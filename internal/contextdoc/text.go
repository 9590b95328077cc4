package contextdoc

import (
	"strings"
	"unicode"
)

// clean normalizes untrusted text before it goes into a document: invalid
// UTF-8 becomes U+FFFD, every line break (CRLF, CR, NEL, U+2028, U+2029)
// becomes LF, control characters other than LF and tab are dropped, and
// leading blank lines and trailing whitespace are trimmed (the first line
// keeps its indentation).
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\r' || r == '\u0085' || r == '\u2028' || r == '\u2029':
			b.WriteByte('\n')
		case unicode.IsControl(r):
			// dropped: NUL, ESC, form feed, C1 controls...
		default:
			b.WriteRune(r)
		}
	}
	s = strings.TrimRightFunc(b.String(), unicode.IsSpace)
	lead := len(s) - len(strings.TrimLeftFunc(s, unicode.IsSpace))
	if i := strings.LastIndexByte(s[:lead], '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// oneLine cleans s and collapses every run of whitespace, line breaks
// included, into a single space.
func oneLine(s string) string {
	return strings.Join(strings.Fields(clean(s)), " ")
}

// longestRun returns the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// Fence returns s, cleaned as described in the package documentation, as a
// ```` ```text ```` block whose fence is longer than any backtick run in the
// text (at least three backticks), so nothing inside can close it. Use it
// for any untrusted text placed into Markdown an agent will read.
func Fence(s string) string {
	s = clean(s)
	f := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	return f + "text\n" + s + "\n" + f
}

// inline returns s as a one-line inline code span, or "" when s is blank.
// The span's backtick run is longer than any inside s; content that starts
// or ends with a backtick is padded with one space on each side, which
// Markdown strips again.
func inline(s string) string {
	s = oneLine(s)
	if s == "" {
		return ""
	}
	f := strings.Repeat("`", longestRun(s, '`')+1)
	if s[0] == '`' || s[len(s)-1] == '`' {
		s = " " + s + " "
	}
	return f + s + f
}
