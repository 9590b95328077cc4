package skill

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestParseGood(t *testing.T) {
	s, ps := ParseFile("testdata/good.md")
	if len(ps) > 0 {
		t.Fatalf("problems:\n%s", ps)
	}
	two := 2
	want := &Skill{
		ID: "api-fetch", Name: "Fetch from API", Version: "1.0", Description: "Fetches records", Directory: "_core/",
		Downstream: []string{"transform"},
		Inputs:     []Param{{Name: "url"}, {Name: "limit", Type: "integer"}, {Name: "token", Type: "string", Required: true, Description: "API token"}},
		Outputs:    []Param{{Name: "records"}},
		Tags:       []string{"core"},
		Subscribe:  []string{"skill:failed", "pipeline:*"},
		Run:        Run{Agent: "agt_fetcher", Timeout: Duration(90 * time.Second), Retries: &two},
		CreatedBy:  "manual", CreatedAt: "2026-01-14",
		Body:   "# Fetch\n\nFetch the URL and return the records.\n",
		Source: "testdata/good.md",
	}
	s.Dir, s.Hash, s.Upstream = "", "", nil
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got  %+v\nwant %+v", s, want)
	}
}

// Every problem of a file is reported at once, each with its line.
func TestLintReportsEveryProblemWithLine(t *testing.T) {
	ps := Lint("bad.md", mustRead(t, "testdata/bad.md"))
	golden(t, "bad.lint.golden", ps.String()+"\n")
	for _, p := range ps {
		if p.Line == 0 || p.File != "bad.md" {
			t.Errorf("problem without file/line: %+v", p)
		}
	}
	err := ps.Err("invalid_skill")
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Class != protocol.ClassInvalid || len(pe.FieldErrors) < 10 {
		t.Fatalf("Err() = %#v", err)
	}
	if msg := pe.FieldErrors["bad.md:run.timeout"]; !strings.HasPrefix(msg, "line 15: ") {
		t.Fatalf("run.timeout field error = %q", msg)
	}
}

func TestLintSyntaxErrorLine(t *testing.T) {
	ps := Lint("syntax.md", mustRead(t, "testdata/syntax.md"))
	if len(ps) != 1 || ps[0].Line < 2 || ps[0].Line > 6 || !strings.Contains(ps[0].Message, "invalid YAML") {
		t.Fatalf("problems: %s", ps)
	}
	ps = Lint("nofront.md", mustRead(t, "testdata/nofront.md"))
	if len(ps) != 1 || ps[0].Line != 1 || !strings.Contains(ps[0].Message, "front-matter") {
		t.Fatalf("problems: %s", ps)
	}
}

func TestParseTable(t *testing.T) {
	tests := []struct {
		name, src, problem string
	}{
		{"minimal manual", "---\nid: a\n---\n", ""},
		{"exec string", "---\nid: a\nrun: {exec: ./x.sh}\n---\n", ""},
		{"top-level timeout", "---\nid: a\ntimeout: 30\nretries: 0\nrun: {agent: agt_a}\n---\n", ""},
		{"missing id", "---\nname: x\n---\n", "id: required"},
		{"reserved id", "---\nid: input\n---\n", "reserved"},
		{"self upstream", "---\nid: a\nupstream: [a]\n---\n", "cannot name itself"},
		{"empty exec", "---\nid: a\nrun: {exec: []}\n---\n", "non-empty list"},
		{"bad agent", "---\nid: a\nrun: {agent: 'no spaces allowed'}\n---\n", "not an agent id"},
		{"duplicate key", "---\nid: a\nid: b\n---\n", "defined twice"},
		{"not a mapping", "---\n- a\n- b\n---\n", "must be a YAML mapping"},
		{"timeout too long", "---\nid: a\nrun: {timeout: 48h}\n---\n", "at most 24h"},
		{"negative retries", "---\nid: a\nrun: {retries: -1}\n---\n", "between 0 and 10"},
		{"unterminated", "---\nid: a\n", "front-matter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ps := Parse("x.md", []byte(tt.src))
			if tt.problem == "" {
				if len(ps) > 0 || s == nil || s.ID != "a" {
					t.Fatalf("unexpected problems: %s", ps)
				}
				return
			}
			if !strings.Contains(ps.String(), tt.problem) {
				t.Fatalf("problems %q do not mention %q", ps.String(), tt.problem)
			}
		})
	}
}

// An alias bomb is refused instead of expanding.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("---\nid: a\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	b.WriteString("---\n")
	ps := Lint("bomb.md", []byte(b.String()))
	if !strings.Contains(ps.String(), "expands to more than") {
		t.Fatalf("problems: %s", ps)
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.md", "---\nid: a\nrun: {exec: [./a.sh]}\n---\n")
	write("_core/b.md", "---\nid: b\nrun: {agent: agt_b}\n---\n")
	write("_core/b-copy.md", "---\nid: b\n---\n")
	write("README.md", "not a skill")
	write("notes.txt", "ignored")
	write("bad.md", "---\nid: c\nrun: {retries: x}\n---\n")
	skills, ps := LoadDir(dir)
	if len(skills) != 2 || skills[0].ID != "a" || skills[1].ID != "b" {
		t.Fatalf("skills: %+v", skills)
	}
	if skills[0].Dir != dir || skills[0].Source != "a.md" {
		t.Fatalf("dir/source: %q %q", skills[0].Dir, skills[0].Source)
	}
	got := ps.String()
	for _, want := range []string{"bad.md:3:", "_core/b.md:1: id: skill \"b\" is also defined in _core/b-copy.md"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems %q do not contain %q", got, want)
		}
	}
}

func TestValidateInputs(t *testing.T) {
	s := &Skill{ID: "s", Inputs: []Param{{Name: "url", Type: "string", Required: true}, {Name: "n", Type: "integer"}, {Name: "any"}}}
	if got := s.Validate(map[string]any{"url": "x", "n": float64(3)}); len(got) != 0 {
		t.Fatalf("valid input refused: %v", got)
	}
	got := s.Validate(map[string]any{"n": "three"})
	if len(got) != 2 || !strings.Contains(got[0], `"url" is required`) || !strings.Contains(got[1], "integer") {
		t.Fatalf("got %v", got)
	}
}

func TestMatchEvent(t *testing.T) {
	for _, tt := range []struct {
		p, e string
		want bool
	}{{"*", "skill:failed", true}, {"skill:*", "skill:failed", true}, {"skill:*", "pipeline:failed", false}, {"skill:failed", "skill:failed", true}, {"skill:failed", "skill:started", false}} {
		if got := MatchEvent(tt.p, tt.e); got != tt.want {
			t.Errorf("MatchEvent(%q, %q) = %v", tt.p, tt.e, got)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParse: arbitrary files never panic, and problems always carry a message.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"good.md", "bad.md", "syntax.md", "nofront.md"} {
		b, _ := os.ReadFile(filepath.Join("testdata", name))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, ps := Parse("f.md", data)
		for _, p := range ps {
			if p.Message == "" {
				t.Fatalf("problem without message: %+v", p)
			}
		}
	})
}
