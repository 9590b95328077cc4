package ref

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Source is what references read: the execution's input and the state of
// each step. Step returns ok=false for a skill the execution does not have.
type Source interface {
	Input() any
	Step(skill string) (status string, output any, ok bool)
}

// Reason classifies a resolution failure.
type Reason string

// The resolution failures.
const (
	ReasonSyntax       Reason = "bad_syntax"
	ReasonUnknownSkill Reason = "unknown_skill"
	ReasonNotCompleted Reason = "not_completed"
	ReasonPathMissing  Reason = "path_missing"
)

// Error is a reference that cannot be resolved. Its message names the
// reference and says what is wrong, because it becomes the step's
// VALIDATION_ERROR that an agent or person reads.
type Error struct {
	Ref    string // canonical reference text, or the bad text for syntax errors
	Field  string // where in the step input ("" for a when condition)
	Reason Reason
	Detail string
}

// Error names the field (when known), the reference and the reason.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Field != "" {
		b.WriteString("input.")
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Ref)
	b.WriteString(": ")
	b.WriteString(e.Detail)
	return b.String()
}

// Resolve returns a copy of template with every reference replaced. A string
// that is exactly one reference takes the referenced value (with its JSON
// type); references inside longer strings are replaced by their text form.
// The first failure (in a stable order) is returned as an *Error.
func Resolve(template any, src Source) (any, error) {
	return resolve(template, "", src)
}

func resolve(v any, path string, src Source) (any, error) {
	switch t := v.(type) {
	case string:
		return resolveString(t, path, src)
	case map[string]any:
		out := make(map[string]any, len(t))
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			r, err := resolve(t[k], joinPath(path, k), src)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			r, err := resolve(x, joinPath(path, strconv.Itoa(i)), src)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

func resolveString(s, path string, src Source) (any, error) {
	if !strings.Contains(s, Open) {
		return s, nil
	}
	parts, err := Scan(s)
	if err != nil {
		se, _ := err.(*SyntaxError)
		e := &Error{Field: path, Reason: ReasonSyntax, Ref: s, Detail: err.Error()}
		if se != nil {
			e.Ref, e.Detail = se.Text, se.Reason+"; "+grammarHelp
		}
		return nil, e
	}
	if len(parts) == 1 && parts[0].IsRef {
		v, err := Value(parts[0].Ref, src)
		if err != nil {
			err.(*Error).Field = path
			return nil, err
		}
		return deepCopy(v), nil
	}
	var b strings.Builder
	for _, p := range parts {
		if !p.IsRef {
			b.WriteString(p.Text)
			continue
		}
		v, err := Value(p.Ref, src)
		if err != nil {
			err.(*Error).Field = path
			return nil, err
		}
		b.WriteString(Text(v))
	}
	return b.String(), nil
}

// Value returns the value one reference points at. Errors are *Error.
func Value(r Ref, src Source) (any, error) {
	text := r.String()
	var base any
	var where string
	switch r.Kind {
	case Input:
		base, where = src.Input(), "input"
	case Status, Output:
		status, out, ok := src.Step(r.Skill)
		if !ok {
			return nil, &Error{Ref: text, Reason: ReasonUnknownSkill, Detail: fmt.Sprintf("the pipeline has no skill %q", r.Skill)}
		}
		if r.Kind == Status {
			return status, nil
		}
		if status != "completed" {
			return nil, &Error{Ref: text, Reason: ReasonNotCompleted,
				Detail: fmt.Sprintf("skill %s has status %s; only the output of a completed skill can be referenced (guard the step with when: \"<<ref:%s.status>> == completed\")", r.Skill, status, r.Skill)}
		}
		base, where = out, r.Skill+".output"
	default:
		return nil, &Error{Ref: text, Reason: ReasonSyntax, Detail: "unknown reference kind"}
	}
	return lookup(base, r.Path, where, text)
}

func lookup(v any, path []string, where, text string) (any, error) {
	for _, seg := range path {
		switch t := v.(type) {
		case map[string]any:
			next, ok := t[seg]
			if !ok {
				return nil, &Error{Ref: text, Reason: ReasonPathMissing,
					Detail: fmt.Sprintf("%s has no field %q (fields: %s)", where, seg, keyList(t))}
			}
			v = next
		case []any:
			i, ok := index(seg)
			if !ok {
				return nil, &Error{Ref: text, Reason: ReasonPathMissing,
					Detail: fmt.Sprintf("%s is an array; %q is not an index (use 0 to %d)", where, seg, len(t)-1)}
			}
			if i >= len(t) {
				return nil, &Error{Ref: text, Reason: ReasonPathMissing,
					Detail: fmt.Sprintf("%s has %d elements; index %d is out of range", where, len(t), i)}
			}
			v = t[i]
		default:
			return nil, &Error{Ref: text, Reason: ReasonPathMissing,
				Detail: fmt.Sprintf("%s is %s, which has no field %q", where, typeName(v), seg)}
		}
		where += "." + seg
	}
	return v, nil
}

func index(seg string) (int, bool) {
	if seg == "" || len(seg) > 9 || (len(seg) > 1 && seg[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return 0, false
		}
		n = n*10 + int(seg[i]-'0')
	}
	return n, true
}

func keyList(m map[string]any) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 10 {
		keys = append(keys[:10], "…")
	}
	return strings.Join(keys, ", ")
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, int, int64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopy(x)
		}
		return out
	}
	return v
}

// Cond is a parsed `when` condition: exactly `<<ref:…>> == value` or
// `<<ref:…>> != value`. The referenced value's text form is compared with
// value as text; value may be quoted ("…" or '…') to keep spaces.
type Cond struct {
	Ref   Ref
	Op    string // "==" or "!="
	Value string
}

// String renders the condition canonically.
func (c *Cond) String() string {
	v := c.Value
	if v == "" || strings.TrimSpace(v) != v || strings.ContainsAny(v, "\"'") {
		b, _ := Encode(v)
		v = string(b)
	}
	return c.Ref.String() + " " + c.Op + " " + v
}

// MaxWhenLen bounds a condition's text.
const MaxWhenLen = 2048

// ParseWhen parses a condition.
func ParseWhen(s string) (*Cond, error) {
	bad := func(reason string) (*Cond, error) {
		return nil, &SyntaxError{Text: clip(s), Reason: reason + `; a condition is exactly "<<ref:…>> == value" or "<<ref:…>> != value"`}
	}
	if len(s) > MaxWhenLen {
		return bad(fmt.Sprintf("longer than %d characters", MaxWhenLen))
	}
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, Open) {
		return bad("must start with a reference")
	}
	end := strings.Index(t, Close)
	if end < 0 {
		return bad("the reference has no closing >>")
	}
	r, err := Parse(t[:end+len(Close)])
	if err != nil {
		return nil, err
	}
	rest := strings.TrimSpace(t[end+len(Close):])
	var op string
	switch {
	case strings.HasPrefix(rest, "=="):
		op = "=="
	case strings.HasPrefix(rest, "!="):
		op = "!="
	default:
		return bad("the reference must be followed by == or !=")
	}
	val := strings.TrimSpace(rest[2:])
	if val == "" {
		return bad(`the value is missing (write "" for the empty string)`)
	}
	if strings.Contains(val, Open) {
		return bad("the value must be a literal, not a reference")
	}
	switch {
	case len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"':
		var u string
		if err := json.Unmarshal([]byte(val), &u); err != nil {
			return bad("the quoted value is not a valid JSON string")
		}
		val = u
	case len(val) >= 2 && val[0] == '\'' && val[len(val)-1] == '\'':
		val = val[1 : len(val)-1]
	case strings.ContainsAny(val, "\"'"):
		return bad("unbalanced quotes in the value")
	}
	if !utf8.ValidString(val) || strings.IndexFunc(val, unicode.IsControl) >= 0 {
		return bad("the value contains a control character or invalid UTF-8")
	}
	return &Cond{Ref: r, Op: op, Value: val}, nil
}

// Eval resolves the reference and compares. A reference that cannot be
// resolved is an error (*Error), not false.
func (c *Cond) Eval(src Source) (bool, error) {
	v, err := Value(c.Ref, src)
	if err != nil {
		return false, err
	}
	eq := Text(v) == c.Value
	if c.Op == "!=" {
		return !eq, nil
	}
	return eq, nil
}
