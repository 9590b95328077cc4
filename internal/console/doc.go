package console

import (
	"strings"
)

// DocSection is one heading of a context document with what follows it up
// to the next heading of the same or a higher level. The root section has
// level 0 and no title.
type DocSection struct {
	Title    string
	Level    int
	Blocks   []DocBlock
	Children []*DocSection
}

// DocBlock is a run of the document's own text, or a fenced block. Fenced
// blocks are where context documents put text that came from another
// agent or a person, so the console marks them untrusted.
type DocBlock struct {
	Untrusted bool
	Text      string
}

// ParseDocument splits a Markdown context document into nested sections
// by its ATX headings (# to ######). A heading inside a fenced block is
// text, never a section: that is how a peer's text is kept from forging a
// "# Policy" of its own. A fence closes on a line of at least as many of
// its characters and nothing else; an unclosed fence runs to the end.
func ParseDocument(doc string) *DocSection {
	root := &DocSection{}
	stack := []*DocSection{root}
	cur := root
	var text []string
	flush := func() {
		if len(text) == 0 {
			return
		}
		t := strings.Trim(strings.Join(text, "\n"), "\n")
		if strings.TrimSpace(t) != "" {
			cur.Blocks = append(cur.Blocks, DocBlock{Text: t})
		}
		text = text[:0]
	}
	lines := strings.Split(strings.ReplaceAll(doc, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if ch, n := fenceOpen(line); n > 0 {
			flush()
			var body []string
			closed := false
			i++
			for ; i < len(lines); i++ {
				if fenceCloses(lines[i], ch, n) {
					closed = true
					break
				}
				body = append(body, lines[i])
			}
			if !closed {
				for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
					body = body[:len(body)-1]
				}
			}
			cur.Blocks = append(cur.Blocks, DocBlock{Untrusted: true, Text: strings.Join(body, "\n")})
			continue
		}
		if level, title, ok := heading(line); ok {
			flush()
			s := &DocSection{Title: title, Level: level}
			for len(stack) > 1 && stack[len(stack)-1].Level >= level {
				stack = stack[:len(stack)-1]
			}
			parent := stack[len(stack)-1]
			parent.Children = append(parent.Children, s)
			stack = append(stack, s)
			cur = s
			continue
		}
		text = append(text, line)
	}
	flush()
	return root
}

// fenceOpen reports the fence character and length of a line opening a
// fenced block (up to three spaces of indentation, then three or more
// backticks or tildes).
func fenceOpen(line string) (byte, int) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return 0, 0
	}
	ch := t[0]
	n := 0
	for n < len(t) && t[n] == ch {
		n++
	}
	if n < 3 || (ch == '`' && strings.ContainsRune(t[n:], '`')) {
		return 0, 0
	}
	return ch, n
}

func fenceCloses(line string, ch byte, n int) bool {
	if len(line)-len(strings.TrimLeft(line, " ")) > 3 {
		return false
	}
	t := strings.TrimSpace(line)
	if len(t) < n {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] != ch {
			return false
		}
	}
	return true
}

func heading(line string) (int, string, bool) {
	n := 0
	for n < len(line) && n < 7 && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(line) && line[n] != ' ' && line[n] != '\t') {
		return 0, "", false
	}
	title := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line[n:]), "#"))
	if title == "" {
		return 0, "", false
	}
	return n, title, true
}
