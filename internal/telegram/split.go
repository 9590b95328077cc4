package telegram

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxMessageLength is Telegram's limit for a message text: 4096 characters
// after entity parsing. Telegram measures text in UTF-16 code units (its
// entity offsets are UTF-16, and an emoji outside the Basic Multilingual
// Plane counts twice), so the splitter counts the same way; counting runes
// instead would let emoji-heavy chunks overflow.
const MaxMessageLength = 4096

// Parse modes accepted by SendParams.ParseMode.
const (
	ParseModeNone       = ""
	ParseModeHTML       = "HTML"
	ParseModeMarkdownV2 = "MarkdownV2"
	ParseModeMarkdown   = "Markdown" // legacy
)

// UTF16Len is the length of s as Telegram counts it.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// SplitText cuts text into chunks whose visible length (what Telegram counts
// after applying parseMode) is at most limit UTF-16 units. A text that fits
// is returned unchanged as the only chunk. Otherwise each cut is made at the
// last paragraph break in the second half of the allowance, else at a line
// break, else at a space, else anywhere (never inside a UTF-16 surrogate
// pair, an HTML tag or entity, an escape, or a link, and not between a
// character and a combining mark). The whitespace at a cut is dropped.
//
// Markup stays valid in every chunk: formatting open at a cut (HTML tags,
// MarkdownV2 or Markdown entities, code blocks with their language) is
// closed at the end of the chunk and reopened at the start of the next, so
// Telegram accepts each chunk on its own. Chunks with no visible text are
// left out; SplitText returns nil when text has none.
func SplitText(text, parseMode string, limit int) []string {
	if limit < 2 {
		limit = 2
	}
	units := tokenize(text, parseMode)
	total := 0
	visible := false
	for _, u := range units {
		total += u.vis
		if u.vis > 0 && !u.space {
			visible = true
		}
	}
	if !visible {
		return nil
	}
	if total <= limit {
		return []string{text}
	}
	// cum[i] is the visible length of units[:i]
	cum := make([]int, len(units)+1)
	for i, u := range units {
		cum[i+1] = cum[i] + u.vis
	}
	var chunks []string
	for s := 0; s < len(units); {
		e := s
		for e < len(units) && cum[e+1]-cum[s] <= limit {
			e++
		}
		if e == len(units) {
			chunks = appendChunk(chunks, text, parseMode, units, s, e)
			break
		}
		if e == s {
			e = s + 1 // one unit larger than the limit: send it as it is
		}
		cut := chooseCut(units, cum, s, e)
		// keep closing markup with the text it closes and opening markup
		// with the text it opens: no empty entities at chunk edges
		for cut < len(units) && units[cut].closes {
			cut++
		}
		for cut > s+1 && units[cut-1].opens {
			cut--
		}
		chunks = appendChunk(chunks, text, parseMode, units, s, cut)
		s = cut
	}
	return chunks
}

// Break qualities, best first.
const (
	breakNone = iota
	breakSpace
	breakLine
	breakParagraph
)

// quality rates a cut before units[b].
func quality(units []unit, b int) int {
	if b <= 0 || b >= len(units) {
		return breakNone
	}
	prev := units[b-1]
	switch {
	case prev.newline && b >= 2 && units[b-2].newline:
		return breakParagraph
	case prev.newline:
		return breakLine
	case prev.space:
		return breakSpace
	}
	return breakNone
}

func chooseCut(units []unit, cum []int, s, e int) int {
	window := cum[e] - cum[s]
	for _, q := range []int{breakParagraph, breakLine, breakSpace} {
		for b := e; b > s; b-- {
			if cum[b]-cum[s] < window/2 {
				break
			}
			if quality(units, b) == q {
				return b
			}
		}
	}
	for _, q := range []int{breakParagraph, breakLine, breakSpace} {
		for b := e; b > s; b-- {
			if quality(units, b) == q {
				return b
			}
		}
	}
	// a hard cut: keep combining marks, variation selectors and joiners with
	// the character they modify
	b := e
	for b > s+1 && (units[b].joinsPrev || units[b-1].joinsNext) {
		b--
	}
	return b
}

// appendChunk renders units[s:e] with the formatting open at s reopened and
// the formatting open at e closed, dropping whitespace at both ends.
func appendChunk(chunks []string, text, mode string, units []unit, s, e int) []string {
	open := stackAt(units, s)
	close := stackAt(units, e)
	// trimming must not make reopened markup touch markup in the text
	// ("`" + "```" is a different token than "`\n```")
	for s < e && units[s].newline && !(open != nil && s+1 < e && units[s+1].marker()) {
		s++
	}
	for e > s && units[e-1].space && !(close != nil && e-2 >= s && units[e-2].marker()) {
		e--
	}
	visible := false
	for _, u := range units[s:e] {
		if u.vis > 0 && !u.space {
			visible = true
			break
		}
	}
	if !visible {
		return chunks
	}
	var b strings.Builder
	writeOpen(&b, open)
	content := text[units[s].start:units[e-1].end]
	// In MarkdownV2 adjacent markers are read greedily ("_" + "__" is "__"
	// + "_"); Telegram ignores \r, which keeps them apart.
	const greedy = "_*~|"
	if mode == ParseModeMarkdownV2 && open != nil && units[s].marker() && strings.IndexByte(greedy, content[0]) >= 0 {
		b.WriteByte('\r')
	}
	b.WriteString(content)
	if mode == ParseModeMarkdownV2 && close != nil && units[e-1].marker() && strings.IndexByte(greedy, content[len(content)-1]) >= 0 {
		b.WriteByte('\r')
	}
	for f := close; f != nil; f = f.parent {
		b.WriteString(f.close)
	}
	return append(chunks, b.String())
}

func stackAt(units []unit, b int) *frame {
	if b == 0 {
		return nil
	}
	return units[b-1].after
}

func writeOpen(b *strings.Builder, f *frame) {
	if f == nil {
		return
	}
	writeOpen(b, f.parent)
	b.WriteString(f.open)
}

// unit is an indivisible piece of text: a character, an escape, an entity,
// a tag, a formatting marker or a whole link.
type unit struct {
	start, end int
	vis        int    // UTF-16 units it adds to the visible text
	space      bool   // whitespace (a space, tab or newline)
	newline    bool   // a line break
	joinsPrev  bool   // a combining mark, variation selector or ZWJ
	joinsNext  bool   // a ZWJ: the next character belongs to this one
	opens      bool   // markup that opens an entity
	closes     bool   // markup that closes an entity
	after      *frame // formatting open after this unit
}

// marker reports markup that opens or closes an entity.
func (u unit) marker() bool { return u.opens || u.closes }

// frame is one open formatting entity: a persistent stack, shared between
// units, so recording the stack at every unit costs nothing.
type frame struct {
	kind   string
	open   string // markup that reopens it
	close  string // markup that closes it
	parent *frame
}

func (f *frame) push(kind, open, close string) *frame {
	return &frame{kind: kind, open: open, close: close, parent: f}
}

// pop closes the innermost frame of kind (and anything opened inside it).
func (f *frame) pop(kind string) *frame {
	for g := f; g != nil; g = g.parent {
		if g.kind == kind {
			return g.parent
		}
	}
	return f
}

func (f *frame) has(kind string) bool {
	for g := f; g != nil; g = g.parent {
		if g.kind == kind {
			return true
		}
	}
	return false
}

func (f *frame) top() string {
	if f == nil {
		return ""
	}
	return f.kind
}

func tokenize(text, mode string) []unit {
	t := &tokenizer{text: text, units: make([]unit, 0, len(text)), linkFrom: -1}
	switch mode {
	case ParseModeHTML:
		t.html()
	case ParseModeMarkdownV2:
		t.markdownV2()
	case ParseModeMarkdown:
		t.markdownV1()
	default:
		for t.i < len(text) {
			t.char()
		}
	}
	return t.units
}

type tokenizer struct {
	text  string
	i     int
	stack *frame
	units []unit

	// memo of the last failed link scan (see link)
	linkFrom, linkClose, linkEnd int
	// noTagEnd is set once a '<' found no '>' after it: none will
	noTagEnd bool
}

// marker emits a zero-width unit of n bytes after changing the stack.
func (t *tokenizer) marker(n int, stack *frame) {
	opens := stack != nil && stack.parent == t.stack
	closes := !opens && stack != t.stack
	t.stack = stack
	t.units = append(t.units, unit{start: t.i, end: t.i + n, after: t.stack, opens: opens, closes: closes})
	t.i += n
}

// atom emits an indivisible unit of n bytes worth vis visible units.
func (t *tokenizer) atom(n, vis int) {
	t.units = append(t.units, unit{start: t.i, end: t.i + n, vis: vis, after: t.stack})
	t.i += n
}

// char emits one character.
func (t *tokenizer) char() {
	r, size := utf8.DecodeRuneInString(t.text[t.i:])
	u := unit{start: t.i, end: t.i + size, vis: utf16.RuneLen(r), after: t.stack}
	if u.vis < 1 {
		u.vis = 1 // an invalid byte is sent as U+FFFD
	}
	switch {
	case r == '\n':
		u.space, u.newline = true, true
	case unicode.IsSpace(r):
		u.space = true
	case r == '\u200d':
		u.joinsPrev, u.joinsNext = true, true
	case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || unicode.Is(unicode.Variation_Selector, r) ||
		(r >= 0x1F3FB && r <= 0x1F3FF): // skin tone modifiers
		u.joinsPrev = true
	}
	t.units = append(t.units, u)
	t.i += size
}

func (t *tokenizer) html() {
	for t.i < len(t.text) {
		rest := t.text[t.i:]
		switch rest[0] {
		case '<':
			end := -1
			if !t.noTagEnd {
				end = strings.IndexByte(rest, '>')
			}
			if end < 0 {
				t.noTagEnd = true
				t.char()
				continue
			}
			tag := rest[1:end]
			if name, ok := strings.CutPrefix(tag, "/"); ok {
				name = strings.ToLower(strings.TrimSpace(name))
				next := t.stack.pop(name)
				if name == "" && t.stack != nil {
					next = t.stack.parent // "</>" closes the innermost tag
				}
				t.marker(end+1, next)
				continue
			}
			name := tag
			if sp := strings.IndexAny(name, " \t\n"); sp >= 0 {
				name = name[:sp]
			}
			name = strings.ToLower(name)
			if name == "" {
				t.char()
				continue
			}
			t.marker(end+1, t.stack.push(name, rest[:end+1], "</"+name+">"))
		case '&':
			semi := strings.IndexByte(rest[:min(len(rest), 12)], ';')
			if semi > 1 && semi <= 10 {
				if r, ok := htmlEntity(rest[1:semi]); ok {
					t.atom(semi+1, utf16.RuneLen(r))
					continue
				}
			}
			t.char()
		default:
			t.char()
		}
	}
}

func htmlEntity(name string) (rune, bool) {
	switch name {
	case "lt", "gt", "amp", "quot":
		return 'x', true
	}
	var v int64
	var base int64 = 10
	digits := ""
	switch {
	case strings.HasPrefix(name, "#x") || strings.HasPrefix(name, "#X"):
		base, digits = 16, name[2:]
	case strings.HasPrefix(name, "#"):
		digits = name[1:]
	default:
		return 0, false
	}
	if digits == "" {
		return 0, false
	}
	for _, c := range digits {
		d := int64(-1)
		switch {
		case c >= '0' && c <= '9':
			d = int64(c - '0')
		case base == 16 && c >= 'a' && c <= 'f':
			d = int64(c-'a') + 10
		case base == 16 && c >= 'A' && c <= 'F':
			d = int64(c-'A') + 10
		}
		if d < 0 {
			return 0, false
		}
		v = v*base + d
		if v > unicode.MaxRune {
			return 0, false
		}
	}
	return rune(v), utf8.ValidRune(rune(v))
}

// escape emits a backslash escape as one visible character.
func (t *tokenizer) escape() {
	r, size := utf8.DecodeRuneInString(t.text[t.i+1:])
	t.atom(1+size, utf16.RuneLen(r))
}

// link emits a whole [text](url) as one unit, if one starts here. A failed
// attempt is remembered: every '[' before the same ']' fails the same way,
// so text full of brackets is still scanned in linear time.
func (t *tokenizer) link(prefix int) bool {
	start := t.i + prefix // the '['
	if t.linkFrom < 0 || start >= t.linkClose || start < t.linkFrom {
		t.linkFrom, t.linkClose, t.linkEnd = start, len(t.text), -1
		j := start + 1
		for ; j < len(t.text) && t.text[j] != ']'; j++ {
			if t.text[j] == '\\' {
				j++
			}
		}
		if j < len(t.text) {
			t.linkClose = j
			if j+1 < len(t.text) && t.text[j+1] == '(' {
				k := j + 2
				for ; k < len(t.text) && t.text[k] != ')'; k++ {
					if t.text[k] == '\\' {
						k++
					}
				}
				if k < len(t.text) {
					t.linkEnd = k
				}
			}
		}
	}
	if t.linkEnd < 0 || t.linkClose >= len(t.text) {
		return false
	}
	// the visible part is the link text; counting its escapes too only
	// errs on the safe side
	vis := UTF16Len(t.text[start+1 : t.linkClose])
	end := t.linkEnd + 1
	t.linkFrom = -1
	t.atom(end-t.i, vis)
	return true
}

func (t *tokenizer) fence() string {
	rest := t.text[t.i+3:]
	if nl := strings.IndexByte(rest, '\n'); nl >= 0 && !strings.ContainsAny(rest[:nl], " `") {
		return "```" + rest[:nl+1]
	}
	return "```"
}

func (t *tokenizer) markdownV2() {
	for t.i < len(t.text) {
		rest := t.text[t.i:]
		if rest[0] == '\\' && len(rest) > 1 {
			t.escape()
			continue
		}
		switch t.stack.top() {
		case "pre":
			if strings.HasPrefix(rest, "```") {
				t.marker(3, t.stack.pop("pre"))
			} else {
				t.char()
			}
			continue
		case "code":
			if rest[0] == '`' {
				t.marker(1, t.stack.pop("code"))
			} else {
				t.char()
			}
			continue
		}
		lineStart := t.i == 0 || t.text[t.i-1] == '\n'
		switch {
		case lineStart && strings.HasPrefix(rest, "**>"):
			t.atom(3, 0) // expandable blockquote marker
		case lineStart && rest[0] == '>':
			t.atom(1, 0) // blockquote marker
		case strings.HasPrefix(rest, "```"):
			open := t.fence()
			t.marker(len(open), t.stack.push("pre", open, "```"))
		case rest[0] == '`':
			t.marker(1, t.stack.push("code", "`", "`"))
		case strings.HasPrefix(rest, "||"):
			t.toggle(2, "spoiler", "||")
		case strings.HasPrefix(rest, "__"):
			t.toggle(2, "underline", "__")
		case rest[0] == '_':
			t.toggle(1, "italic", "_")
		case rest[0] == '*':
			t.toggle(1, "bold", "*")
		case rest[0] == '~':
			t.toggle(1, "strike", "~")
		case rest[0] == '[':
			if !t.link(0) {
				t.char()
			}
		case strings.HasPrefix(rest, "!["):
			if !t.link(1) {
				t.char()
			}
		default:
			t.char()
		}
	}
}

func (t *tokenizer) toggle(n int, kind, mark string) {
	if t.stack.has(kind) {
		t.marker(n, t.stack.pop(kind))
		return
	}
	t.marker(n, t.stack.push(kind, mark, mark))
}

func (t *tokenizer) markdownV1() {
	for t.i < len(t.text) {
		rest := t.text[t.i:]
		switch top := t.stack.top(); top {
		case "pre":
			if strings.HasPrefix(rest, "```") {
				t.marker(3, nil)
			} else {
				t.char()
			}
			continue
		case "code", "bold", "italic":
			if closer := map[string]byte{"code": '`', "bold": '*', "italic": '_'}[top]; rest[0] == closer {
				t.marker(1, nil)
			} else {
				t.char()
			}
			continue
		}
		switch {
		case rest[0] == '\\' && len(rest) > 1 && strings.IndexByte("_*`[", rest[1]) >= 0:
			t.atom(2, 1)
		case strings.HasPrefix(rest, "```"):
			open := t.fence()
			t.marker(len(open), t.stack.push("pre", open, "```"))
		case rest[0] == '`':
			t.marker(1, t.stack.push("code", "`", "`"))
		case rest[0] == '*':
			t.marker(1, t.stack.push("bold", "*", "*"))
		case rest[0] == '_':
			t.marker(1, t.stack.push("italic", "_", "_"))
		case rest[0] == '[':
			if !t.link(0) {
				t.char()
			}
		default:
			t.char()
		}
	}
}
