package plan

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/pipeline/ref"
	"github.com/switchboard-hub/switchboard/internal/pipeline/skill"
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

func byID(skills []*skill.Skill) map[string]*skill.Skill {
	m := map[string]*skill.Skill{}
	for _, s := range skills {
		m[s.ID] = s
	}
	return m
}

func mustSkill(t *testing.T, src string) *skill.Skill {
	t.Helper()
	s, ps := skill.Parse("inline.md", []byte(src))
	if len(ps) > 0 {
		t.Fatalf("skill: %s", ps)
	}
	return s
}

func TestBuildDAG(t *testing.T) {
	f, skills, ps := Load("testdata/dag/pipeline.yaml")
	if len(ps) > 0 {
		t.Fatalf("problems:\n%s", ps)
	}
	p, ps := Build(f, byID(skills))
	if len(ps) > 0 {
		t.Fatalf("problems:\n%s", ps)
	}
	deps := map[string][]string{}
	for id, st := range p.Steps {
		deps[id] = st.Upstream
	}
	want := map[string][]string{"fetch": nil, "left": {"fetch"}, "right": {"fetch"}, "merge": {"left", "right"}, "review": {"merge"}}
	if !reflect.DeepEqual(deps, want) {
		t.Fatalf("deps = %v, want %v", deps, want)
	}
	if p.Steps["review"].Approval == nil || p.Steps["review"].Approval.Agents[0] != "agt_boss" {
		t.Fatalf("approval = %+v", p.Steps["review"].Approval)
	}
	if p.Steps["fetch"].Skill.Source != "skills/fetch.md" || p.Steps["fetch"].Skill.Dir == "" {
		t.Fatalf("source %q dir %q", p.Steps["fetch"].Skill.Source, p.Steps["fetch"].Skill.Dir)
	}
	if len(p.Hash) != 64 {
		t.Fatalf("hash %q", p.Hash)
	}
	// The pinned form decodes to the same content and hash.
	q, err := Decode(p.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if q.Hash != p.Hash || !reflect.DeepEqual(q.Order, p.Order) {
		t.Fatalf("decoded plan differs: %s vs %s", q.Hash, p.Hash)
	}
	// Any change to a skill changes the hash.
	skills2 := byID(skills)
	changed := *skills2["left"]
	changed.Body = "Different instructions.\n"
	skills2["left"] = &changed
	p2, _ := Build(f, skills2)
	if p2.Hash == p.Hash {
		t.Fatal("hash ignores the skill body")
	}
	if !strings.Contains(string(p.Marshal()), "<<ref:input.url>>") {
		t.Fatal("templates are HTML-escaped in the pinned JSON")
	}
}

func TestSequentialWhenNoUpstreams(t *testing.T) {
	f, ps := ParseFile("", []byte("id: s\npipeline: [a, b, c]\n"))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	p, ps := Build(f, map[string]*skill.Skill{
		"a": mustSkill(t, "---\nid: a\nrun: {agent: agt_a}\n---\n"),
		"b": mustSkill(t, "---\nid: b\nrun: {agent: agt_a}\n---\n"),
		"c": mustSkill(t, "---\nid: c\nrun: {agent: agt_a}\n---\n"),
	})
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	if p.Steps["a"].Upstream != nil || p.Steps["b"].Upstream[0] != "a" || p.Steps["c"].Upstream[0] != "b" {
		t.Fatalf("not a chain: %v %v %v", p.Steps["a"].Upstream, p.Steps["b"].Upstream, p.Steps["c"].Upstream)
	}
	if !p.Ancestors("c")["a"] {
		t.Fatal("a is not an ancestor of c")
	}
}

// Every problem in a pipeline is reported at once, with lines, before
// anything runs.
func TestBuildReportsEveryProblem(t *testing.T) {
	data, _ := os.ReadFile("testdata/bad.yaml")
	f, ps := ParseFile("", data)
	p, bps := Build(f, map[string]*skill.Skill{
		"a": mustSkill(t, "---\nid: a\nrun: {agent: agt_a}\n---\n"),
		"b": mustSkill(t, "---\nid: b\nrun: {agent: agt_a}\n---\n"),
		"c": mustSkill(t, "---\nid: c\n---\n"),
	})
	ps = append(ps, bps...)
	ps.Sort()
	golden(t, "bad.problems.golden", ps.String()+"\n")
	if p.Hash != "" {
		t.Fatal("an invalid plan got a hash")
	}
	err := ps.Err("invalid_pipeline")
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Class != protocol.ClassInvalid {
		t.Fatalf("err %v", err)
	}
	for _, field := range []string{"pipeline[3]", "pipeline[4]", "steps.a.input.x", "steps.a.input.y", "steps.a.input.z", "steps.b.when", "steps.c.when", "steps.c.input.n", "steps.c.approvel", "steps.c", "steps.d"} {
		if _, ok := pe.FieldErrors[field]; !ok {
			t.Errorf("fieldErrors lacks %s: %v", field, pe.FieldErrors)
		}
	}
}

func TestCycle(t *testing.T) {
	f, _ := ParseFile("", []byte("id: cyc\npipeline: [x, y, z]\nsteps:\n  x: {upstream: [z]}\n"))
	_, ps := Build(f, map[string]*skill.Skill{
		"x": mustSkill(t, "---\nid: x\nrun: {agent: agt_a}\n---\n"),
		"y": mustSkill(t, "---\nid: y\nupstream: [x]\nrun: {agent: agt_a}\n---\n"),
		"z": mustSkill(t, "---\nid: z\nupstream: [y]\nrun: {agent: agt_a}\n---\n"),
	})
	if len(ps) != 1 || ps[0].Field != "pipeline" || !strings.Contains(ps[0].Message, "x → y → z → x") {
		t.Fatalf("problems: %s", ps)
	}
}

func TestRefToNonUpstream(t *testing.T) {
	// left and right are siblings: right cannot read left.
	f, _ := ParseFile("", []byte("id: sib\npipeline: [root, left, right]\nsteps:\n  right: {input: {v: \"<<ref:left.output.data>>\"}}\n"))
	_, ps := Build(f, map[string]*skill.Skill{
		"root":  mustSkill(t, "---\nid: root\nrun: {agent: agt_a}\n---\n"),
		"left":  mustSkill(t, "---\nid: left\nupstream: [root]\nrun: {agent: agt_a}\n---\n"),
		"right": mustSkill(t, "---\nid: right\nupstream: [root]\nrun: {agent: agt_a}\n---\n"),
	})
	if len(ps) != 1 || ps[0].Field != "steps.right.input.v" || !strings.Contains(ps[0].Message, "not upstream of right") || ps[0].Line != 4 {
		t.Fatalf("problems: %+v", ps)
	}
}

func TestCheckInput(t *testing.T) {
	f, _ := ParseFile("", []byte("id: i\npipeline: [a, b]\nsteps:\n  a: {input: {n: \"<<ref:input.n>>\", m: \"<<ref:input.deep.x>>\"}}\n  b: {when: \"<<ref:input.flag>> == true\", input: {o: \"<<ref:input.optional>>\"}}\n"))
	p, ps := Build(f, map[string]*skill.Skill{
		"a": mustSkill(t, "---\nid: a\nrun: {agent: agt_a}\n---\n"),
		"b": mustSkill(t, "---\nid: b\nrun: {agent: agt_a}\n---\n"),
	})
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	in, _ := ref.Decode([]byte(`{"n": 1}`))
	got := p.CheckInput(in)
	if len(got) != 1 || !strings.Contains(got[0].Message, "steps.a.input.m needs") || !strings.Contains(got[0].Message, `no field "deep"`) {
		t.Fatalf("problems: %s", got)
	}
	in, _ = ref.Decode([]byte(`{"n": 1, "deep": {"x": 2}}`))
	if got := p.CheckInput(in); len(got) != 0 {
		t.Fatalf("problems: %s", got)
	}
}

func TestLoadReportsSkillFileProblems(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sk"), 0o755)
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("id: p\nskills_dir: sk\npipeline: [a]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "sk", "a.md"), []byte("---\nid: a\nrun: {timeout: never}\n---\n"), 0o644)
	_, _, ps := Load(filepath.Join(dir, "p.yaml"))
	if len(ps) != 1 || ps[0].File != "sk/a.md" || ps[0].Line != 3 {
		t.Fatalf("problems: %+v", ps)
	}
	_, _, ps = Load(filepath.Join(dir, "missing.yaml"))
	if len(ps) != 1 {
		t.Fatalf("problems: %+v", ps)
	}
}

// FuzzParseFile: arbitrary pipeline documents never panic.
func FuzzParseFile(f *testing.F) {
	for _, name := range []string{"bad.yaml", "dag/pipeline.yaml"} {
		b, _ := os.ReadFile(filepath.Join("testdata", name))
		f.Add(b)
	}
	f.Add([]byte("id: x\npipeline: [a]\nsteps: {a: {input: {n: [1, {b: null}]}, when: '<<ref:input.x>> == 1'}}"))
	skills := map[string]*skill.Skill{"a": {ID: "a", Run: skill.Run{Agent: "agt_a"}}, "b": {ID: "b", Upstream: []string{"a"}, Run: skill.Run{Agent: "agt_a"}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, ps := ParseFile("", data)
		if len(ps) > 0 {
			return
		}
		p, ps := Build(file, skills)
		if len(ps) == 0 {
			if _, err := Decode(p.Marshal()); err != nil {
				t.Fatalf("valid plan does not round-trip: %v", err)
			}
		}
	})
}

func TestReadBundle(t *testing.T) {
	b, err := ReadBundle("testdata/dag/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range b.Skills {
		names = append(names, s.Name)
	}
	want := []string{"skills/fetch.md", "skills/left.md", "skills/merge.md", "skills/review.md", "skills/right.md"}
	if !reflect.DeepEqual(names, want) || !strings.HasPrefix(string(b.Pipeline), "id: fan") {
		t.Fatalf("bundle %v", names)
	}
	// The bundle builds the same plan as the file on disk.
	f, ps := ParseFile("", b.Pipeline)
	skills := map[string]*skill.Skill{}
	for _, sf := range b.Skills {
		s, sps := skill.Parse(sf.Name, sf.Content)
		ps = append(ps, sps...)
		skills[s.ID] = s
	}
	p, bps := Build(f, skills)
	if len(ps)+len(bps) > 0 || p.Steps["merge"].Upstream[1] != "right" {
		t.Fatalf("%s %s", ps, bps)
	}
}
