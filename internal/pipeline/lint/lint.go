// Package lint collects every problem in a skill or pipeline definition with
// the file and line it comes from, so an author fixes a file in one pass
// instead of one error per submission. It also holds the strict YAML node
// readers both definition formats share: yaml.v3 nodes carry positions,
// typed decoding into structs does not.
package lint

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Problem is one defect in a definition file.
type Problem struct {
	File    string `json:"file,omitempty"` // "" for the document being submitted itself
	Line    int    `json:"line,omitempty"` // 1-based; 0 when unknown
	Column  int    `json:"column,omitempty"`
	Field   string `json:"field"` // dotted path, e.g. "run.timeout" or "steps.add.when"
	Message string `json:"message"`
}

// String renders the problem the way compilers do, so editors can jump to it:
// "skills/add.md:7:3: run.timeout: must be a duration such as 30s".
func (p Problem) String() string {
	var b strings.Builder
	switch {
	case p.File != "" && p.Line > 0:
		fmt.Fprintf(&b, "%s:%d:", p.File, p.Line)
		if p.Column > 0 {
			fmt.Fprintf(&b, "%d:", p.Column)
		}
		b.WriteByte(' ')
	case p.File != "":
		b.WriteString(p.File + ": ")
	case p.Line > 0:
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Key is the fieldErrors key of the problem: the field path, prefixed with
// the file when the problem is in another file than the submitted document.
func (p Problem) Key() string {
	f := p.Field
	if f == "" {
		f = "(document)"
	}
	if p.File != "" {
		return p.File + ":" + f
	}
	return f
}

// Problems is an ordered list of problems.
type Problems []Problem

// Sort orders problems by file, line, column and field so reports are stable.
func (ps Problems) Sort() {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Field < b.Field
	})
}

// String renders one problem per line.
func (ps Problems) String() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Err converts the problems into one E003 *protocol.Error whose fieldErrors
// list every problem (message prefixed with its line), or nil when there are
// none. code is the machine code, e.g. "invalid_pipeline".
func (ps Problems) Err(code string) error {
	if len(ps) == 0 {
		return nil
	}
	ps.Sort()
	fe := map[string]string{}
	for _, p := range ps {
		msg := p.Message
		if p.Line > 0 {
			msg = fmt.Sprintf("line %d: %s", p.Line, msg)
		}
		k := p.Key()
		if old, ok := fe[k]; ok {
			fe[k] = old + "; " + msg
			continue
		}
		fe[k] = msg
	}
	first := ps[0].String()
	if len(ps) > 1 {
		first += fmt.Sprintf(" (and %d more problems)", len(ps)-1)
	}
	return &protocol.Error{Class: protocol.ClassInvalid, Code: code, Message: first, FieldErrors: fe,
		NextAction: "fix every problem listed in fieldErrors (each names its line) and submit again"}
}

// IDPattern is the grammar of skill and pipeline ids: letters, digits, '-'
// and '_', starting with a letter or digit, at most 64 characters. Dots are
// excluded because references use them as separators.
var IDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ValidID reports whether s is a valid skill or pipeline id.
func ValidID(s string) bool { return IDPattern.MatchString(s) }
