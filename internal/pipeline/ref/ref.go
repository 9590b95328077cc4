// Package ref implements the closed reference grammar steps use to read each
// other's results and the execution's input:
//
//	<<ref:SKILL.output>>            a skill's whole standard output
//	<<ref:SKILL.output.PATH>>       one value inside it
//	<<ref:SKILL.status>>            a skill's status ("completed", "skipped", …)
//	<<ref:input>>                   the execution's input object
//	<<ref:input.PATH>>              one value inside it
//
// PATH is dot-separated; a segment that is a decimal number indexes an array
// (api-fetch.output.data.0.url). Segments may contain any printable
// character except '.', '<', '>' and white space. SKILL is a skill id
// (letters, digits, '-', '_').
//
// A string that is exactly one reference is replaced by the referenced value
// with its JSON type; references inside a longer string are replaced by
// their text form (strings as-is, other values as compact JSON).
package ref

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind says what a reference reads.
type Kind int

// The reference kinds.
const (
	Input  Kind = iota + 1 // input[.PATH]
	Output                 // SKILL.output[.PATH]
	Status                 // SKILL.status
)

// Ref is one parsed reference.
type Ref struct {
	Kind  Kind
	Skill string   // "" for Input
	Path  []string // segments after input / output
}

// Open and Close delimit a reference.
const (
	Open  = "<<ref:"
	Close = ">>"
)

// MaxRefLen bounds the text between the delimiters.
const MaxRefLen = 1024

// String renders the reference in its canonical form, e.g. "<<ref:a.output.x>>".
func (r Ref) String() string {
	var b strings.Builder
	b.WriteString(Open)
	switch r.Kind {
	case Input:
		b.WriteString("input")
	case Output:
		b.WriteString(r.Skill)
		b.WriteString(".output")
	case Status:
		b.WriteString(r.Skill)
		b.WriteString(".status")
	}
	for _, s := range r.Path {
		b.WriteByte('.')
		b.WriteString(s)
	}
	b.WriteString(Close)
	return b.String()
}

// SyntaxError is a malformed reference.
type SyntaxError struct {
	Text   string // the offending text (the reference, or the string around it)
	Reason string
}

// Error names the bad text and what is wrong with it.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("bad reference %q: %s", e.Text, e.Reason)
}

// The reference grammar, as help text for error messages.
const grammarHelp = "use <<ref:SKILL.output.PATH>>, <<ref:SKILL.output>>, <<ref:SKILL.status>>, <<ref:input>> or <<ref:input.PATH>>"

// Parse parses exactly one reference, delimiters included.
func Parse(s string) (Ref, error) {
	if !strings.HasPrefix(s, Open) || !strings.HasSuffix(s, Close) || len(s) < len(Open)+len(Close) {
		return Ref{}, &SyntaxError{Text: s, Reason: "must look like <<ref:…>>"}
	}
	return parseBody(s[len(Open):len(s)-len(Close)], s)
}

func parseBody(body, text string) (Ref, error) {
	bad := func(reason string) (Ref, error) { return Ref{}, &SyntaxError{Text: text, Reason: reason} }
	if len(body) > MaxRefLen {
		return bad(fmt.Sprintf("longer than %d characters", MaxRefLen))
	}
	if body == "" {
		return bad("empty; " + grammarHelp)
	}
	segs := strings.Split(body, ".")
	for i, s := range segs {
		if s == "" {
			return bad(fmt.Sprintf("empty path segment at position %d (two dots, or a leading or trailing dot)", i+1))
		}
		if !validSegment(s) {
			return bad(fmt.Sprintf("segment %q contains a character that is not allowed (white space, '<', '>' or a control character)", s))
		}
	}
	if segs[0] == "input" {
		return Ref{Kind: Input, Path: segs[1:]}, nil
	}
	if !validSkill(segs[0]) {
		return bad(fmt.Sprintf("%q is not a skill id (letters, digits, '-', '_'); %s", segs[0], grammarHelp))
	}
	if len(segs) < 2 {
		return bad(fmt.Sprintf("%q names a skill but not what to read; write %s.output, %s.output.PATH or %s.status", segs[0], segs[0], segs[0], segs[0]))
	}
	switch segs[1] {
	case "output":
		return Ref{Kind: Output, Skill: segs[0], Path: segs[2:]}, nil
	case "status":
		if len(segs) > 2 {
			return bad("status has no fields; write " + segs[0] + ".status")
		}
		return Ref{Kind: Status, Skill: segs[0]}, nil
	}
	return bad(fmt.Sprintf("after the skill id comes output or status, not %q", segs[1]))
}

func validSkill(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-' && c != '_') {
			return false
		}
	}
	return true
}

func validSegment(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == '<' || r == '>' || r == '.' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// Part is a piece of a string: literal text, or a reference.
type Part struct {
	Text  string
	Ref   Ref
	IsRef bool
}

// Scan splits s into literal text and references. An "<<ref:" that does
// not form a valid reference is an error (it is almost always a typo);
// other text, including a lone "<<", is literal.
func Scan(s string) ([]Part, error) {
	var parts []Part
	for {
		i := strings.Index(s, Open)
		if i < 0 {
			if s != "" {
				parts = append(parts, Part{Text: s})
			}
			return parts, nil
		}
		if i > 0 {
			parts = append(parts, Part{Text: s[:i]})
		}
		rest := s[i+len(Open):]
		j := strings.Index(rest, Close)
		if j < 0 {
			return nil, &SyntaxError{Text: clip(s[i:]), Reason: "unterminated: no closing >>"}
		}
		body := rest[:j]
		text := s[i : i+len(Open)+j+len(Close)]
		if k := strings.Index(body, "<<"); k >= 0 {
			return nil, &SyntaxError{Text: clip(text), Reason: "references cannot be nested"}
		}
		r, err := parseBody(body, text)
		if err != nil {
			return nil, err
		}
		parts = append(parts, Part{Ref: r, IsRef: true, Text: text})
		s = rest[j+len(Close):]
	}
}

func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	cut := 80
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Located is a reference (or a syntax error) found at a path inside a
// template value, e.g. "n" or "items.0".
type Located struct {
	Path string
	Ref  Ref
	Err  error
}

// Find walks a decoded JSON template and returns every reference and every
// syntax error with where it was found. Map keys are visited in sorted
// order so results are stable.
func Find(template any) (refs, errs []Located) {
	walk(template, "", func(path, s string) {
		parts, err := Scan(s)
		if err != nil {
			errs = append(errs, Located{Path: path, Err: err})
			return
		}
		for _, p := range parts {
			if p.IsRef {
				refs = append(refs, Located{Path: path, Ref: p.Ref})
			}
		}
	})
	return refs, errs
}

func walk(v any, path string, fn func(path, s string)) {
	switch t := v.(type) {
	case string:
		fn(path, t)
	case map[string]any:
		for _, k := range sortedKeys(t) {
			walk(t[k], joinPath(path, k), fn)
		}
	case []any:
		for i, x := range t {
			walk(x, joinPath(path, strconv.Itoa(i)), fn)
		}
	}
}

func joinPath(p, k string) string {
	if p == "" {
		return k
	}
	return p + "." + k
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Decode parses JSON into the value form references operate on (objects as
// map[string]any, numbers as json.Number so they keep their exact text).
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return v, nil
}

// Encode marshals a value without HTML escaping, so "<<ref:…>>" stays
// readable in stored templates.
func Encode(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// Text is the text form of a value used when a reference sits inside a
// longer string: strings as-is, null as "null", everything else as compact
// JSON.
func Text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := Encode(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
