// Package plan turns a pipeline file and the skills it names into a Plan: a
// validated DAG of steps with input templates, conditions and approval
// gates, hashed and serialisable, so each execution pins exactly the
// definition it started with.
//
// A pipeline file:
//
//	id: double-then-add
//	version: 1.2.0                  # optional; pinned with the content hash
//	skills_dir: ./skills            # optional, relative to this file
//	pipeline: [double, add]         # order; a skill's upstream makes it a DAG
//	steps:                          # optional, per step
//	  double: { input: { n: "<<ref:input.n>>" } }
//	  add:
//	    input: { n: "<<ref:double.output.data.n>>" }
//	    when: "<<ref:double.status>> == completed"
//	    upstream: [double]          # extra dependencies for this pipeline
//	    approval: true              # or {message: "…", agents: [agt_…]}
//	    allow_failure: true         # a failure makes the execution partial
//	    timeout: 30s                # overrides the skill's run.timeout
//	    retries: 3                  # overrides the skill's run.retries
//
// Ordering: when no skill in the pipeline declares an upstream (in its
// front-matter `upstream`/`downstream` or the step's `upstream`), the list
// runs in order, each step after the previous one. Otherwise the
// declarations alone form the DAG: steps without upstreams start at once,
// several steps may share an upstream (fan-out) and a step may wait for
// several (fan-in).
package plan

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchboard-hub/switchboard/internal/pipeline/lint"
	"github.com/switchboard-hub/switchboard/internal/pipeline/skill"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Limits on a pipeline file. A thousand steps is far more than a person
// writes by hand, but generated pipelines (one step per shard or record
// batch) reach it; every step is a row the engine loads per transition, so
// the bound also bounds the cost of one transition.
const (
	MaxFileBytes = 256 << 10
	MaxSteps     = 1000
)

// File is a parsed pipeline file, before its skills are known.
type File struct {
	ID          string
	Version     string
	Description string
	SkillsDir   string
	Pipeline    []string
	Steps       map[string]*StepSpec

	lines map[string]int // field path → line, for problems found later
}

// StepSpec is the per-step section of a pipeline file.
type StepSpec struct {
	Input        json.RawMessage // a JSON object template; nil = the execution's input
	When         string
	Approval     *Approval
	AllowFailure bool
	Upstream     []string
	Timeout      time.Duration
	Retries      *int
}

// Approval makes a step wait in waiting_input until the owner, or one of
// Agents, resumes it with data. For a skill with a run, the data is added
// to the step's input as "approval" and the skill then runs; for a skill
// without one, the data becomes the step's output.
type Approval struct {
	Message string   `json:"message,omitempty"`
	Agents  []string `json:"agents,omitempty"`
}

// Line returns the line of a field path recorded while parsing (0 if unknown).
func (f *File) Line(path string) int { return f.lines[path] }

var fileFields = []string{"id", "version", "description", "skills_dir", "pipeline", "steps"}
var stepFields = []string{"input", "when", "approval", "allow_failure", "upstream", "timeout", "retries"}

// ParseFile parses a pipeline file (YAML or JSON). name labels problems; use
// "" for a document submitted inline.
func ParseFile(name string, data []byte) (*File, lint.Problems) {
	c := &lint.Checker{File: name}
	f := &File{Steps: map[string]*StepSpec{}, lines: map[string]int{}}
	if len(data) > MaxFileBytes {
		c.Addf(nil, "", "file is %d bytes; the limit is %d", len(data), MaxFileBytes)
		return f, c.Problems
	}
	root := c.Parse(data)
	if root == nil {
		return f, c.Problems
	}
	fs := c.Fields(root, "", fileFields)
	if id, ok := c.String(fs["id"].Value, "id"); ok {
		if !lint.ValidID(id) {
			c.Addf(fs["id"].Value, "id", "%q is not a valid id: 1–64 letters, digits, '-' or '_'", id)
		}
		f.ID = id
	} else if lint.IsNull(fs["id"].Value) {
		c.Addf(root, "id", "required: the pipeline id")
	}
	f.Version, _ = c.String(fs["version"].Value, "version")
	f.Description, _ = c.String(fs["description"].Value, "description")
	f.SkillsDir, _ = c.String(fs["skills_dir"].Value, "skills_dir")

	items := c.Items(fs["pipeline"].Value, "pipeline")
	if lint.IsNull(fs["pipeline"].Value) {
		c.Addf(root, "pipeline", "required: the list of skill ids to run, e.g. [fetch, transform]")
	} else if len(items) == 0 && fs["pipeline"].Value.Kind == yaml.SequenceNode {
		c.Addf(fs["pipeline"].Value, "pipeline", "must list at least one skill")
	}
	if len(items) > MaxSteps {
		c.Addf(fs["pipeline"].Value, "pipeline", "has %d steps; the limit is %d", len(items), MaxSteps)
	}
	for i, it := range items {
		path := fmt.Sprintf("pipeline[%d]", i)
		f.lines[path] = c.Line(it)
		id, ok := c.String(it, path)
		switch {
		case !ok:
			if lint.IsNull(it) {
				c.Addf(it, path, "must be a skill id")
			}
		case !lint.ValidID(id):
			c.Addf(it, path, "%q is not a valid skill id", id)
		case slices.Contains(f.Pipeline, id):
			c.Addf(it, path, "%q is listed twice; a skill runs at most once per execution (invoke it directly for more)", id)
		default:
			f.Pipeline = append(f.Pipeline, id)
			f.lines["pipeline."+id] = c.Line(it)
		}
	}

	for _, sf := range c.Ordered(fs["steps"].Value, "steps") {
		id := sf.Key.Value
		base := "steps." + id
		f.lines[base] = c.Line(sf.Key)
		if !slices.Contains(f.Pipeline, id) {
			c.Addf(sf.Key, base, "%q is not in pipeline; add it to the pipeline list or remove this section", id)
		}
		spec := &StepSpec{}
		f.Steps[id] = spec
		m := c.Fields(sf.Value, base, stepFields)
		for k, v := range m {
			f.lines[base+"."+k] = c.Line(v.Value)
		}
		if in := m["input"].Value; !lint.IsNull(in) {
			if in.Kind != yaml.MappingNode {
				c.Addf(in, base+".input", "must be a mapping of input names to values or references")
			} else if raw, ok := c.JSON(in, base+".input"); ok {
				spec.Input = raw
				recordLines(c, in, base+".input", f.lines, 0)
			}
		}
		spec.When, _ = c.String(m["when"].Value, base+".when")
		if a := m["approval"].Value; !lint.IsNull(a) {
			if a.Kind == yaml.ScalarNode {
				if on, ok := c.Bool(a, base+".approval"); ok && on {
					spec.Approval = &Approval{}
				}
			} else {
				am := c.Fields(a, base+".approval", []string{"message", "agents"})
				spec.Approval = &Approval{}
				spec.Approval.Message, _ = c.String(am["message"].Value, base+".approval.message")
				for i, ag := range c.StringList(am["agents"].Value, base+".approval.agents") {
					if !protocol.ValidID(ag) {
						c.Addf(am["agents"].Value, fmt.Sprintf("%s.approval.agents[%d]", base, i), "%q is not an agent id", ag)
						continue
					}
					spec.Approval.Agents = append(spec.Approval.Agents, ag)
				}
			}
		}
		spec.AllowFailure, _ = c.Bool(m["allow_failure"].Value, base+".allow_failure")
		for i, u := range c.StringList(m["upstream"].Value, base+".upstream") {
			if !lint.ValidID(u) {
				c.Addf(m["upstream"].Value, fmt.Sprintf("%s.upstream[%d]", base, i), "%q is not a valid skill id", u)
				continue
			}
			spec.Upstream = append(spec.Upstream, u)
		}
		if d, ok := c.Duration(m["timeout"].Value, base+".timeout", skill.MaxTimeout); ok {
			spec.Timeout = d
		}
		if r, ok := c.Int(m["retries"].Value, base+".retries", 0, skill.MaxRetries); ok {
			spec.Retries = &r
		}
	}
	return f, c.Problems
}

// Load reads a pipeline file from disk and, when it names a skills_dir, the
// skills in that directory (relative to the file). Problems in skill files
// are reported with their path relative to the pipeline file's directory.
func Load(path string) (*File, []*skill.Skill, lint.Problems) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, lint.Problems{{File: path, Message: "cannot read: " + err.Error()}}
	}
	f, ps := ParseFile("", data)
	if f.SkillsDir == "" {
		return f, nil, ps
	}
	dir := f.SkillsDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(path), dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		ps = append(ps, lint.Problem{Line: f.Line("skills_dir"), Field: "skills_dir",
			Message: fmt.Sprintf("%s is not a directory (skills_dir is relative to the pipeline file)", dir)})
		return f, nil, ps
	}
	skills, sps := skill.LoadDir(dir)
	for i := range sps {
		sps[i].File = filepath.ToSlash(filepath.Join(f.SkillsDir, sps[i].File))
	}
	for _, s := range skills {
		s.Source = filepath.ToSlash(filepath.Join(f.SkillsDir, s.Source))
	}
	return f, skills, append(ps, sps...)
}

// recordLines remembers the line of every value inside an input mapping,
// under the same dotted paths ref.Find reports.
func recordLines(c *lint.Checker, n *yaml.Node, path string, lines map[string]int, depth int) {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || depth > 64 {
		return
	}
	lines[path] = c.Line(n)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			recordLines(c, n.Content[i+1], path+"."+n.Content[i].Value, lines, depth+1)
		}
	case yaml.SequenceNode:
		for i, x := range n.Content {
			recordLines(c, x, fmt.Sprintf("%s.%d", path, i), lines, depth+1)
		}
	}
}

// SourceFile is a definition file sent to the hub by content.
type SourceFile struct {
	Name    string `json:"name"`    // path for problem reports, e.g. "skills/add.md"
	Content []byte `json:"content"` // the file
}

// Bundle is a pipeline file with the skill files of its skills_dir: what a
// client (`switchboard pipeline run FILE`) sends to a hub that cannot read
// the client's disk. The hub ignores skills_dir in an inline submission and
// uses Skills instead.
type Bundle struct {
	Pipeline []byte       `json:"pipeline"`
	Skills   []SourceFile `json:"skills,omitempty"`
}

// ReadBundle reads the pipeline file at path and every skill file (*.md
// except README.md) under its skills_dir. It does not validate them; the
// hub reports every problem at submission.
func ReadBundle(path string) (*Bundle, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b := &Bundle{Pipeline: data}
	f, _ := ParseFile("", data)
	if f.SkillsDir == "" {
		return b, nil
	}
	dir := f.SkillsDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(path), dir)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.EqualFold(filepath.Ext(p), ".md") || strings.EqualFold(d.Name(), "README.md") {
			return nil
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b.Skills = append(b.Skills, SourceFile{Name: filepath.ToSlash(filepath.Join(f.SkillsDir, rel)), Content: content})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read skills_dir %s: %w", f.SkillsDir, err)
	}
	return b, nil
}
