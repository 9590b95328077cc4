package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/pipeline/lint"
	"github.com/switchboard-hub/switchboard/internal/pipeline/ref"
	"github.com/switchboard-hub/switchboard/internal/pipeline/skill"
)

// Plan is a validated pipeline with its skills inlined. Its JSON form is
// what an execution pins; Hash identifies that content.
type Plan struct {
	ID          string           `json:"id"`
	Version     string           `json:"version,omitempty"`
	Description string           `json:"description,omitempty"`
	Order       []string         `json:"pipeline"`
	Steps       map[string]*Step `json:"steps"`
	// Hash is the SHA-256 (hex) of the plan's canonical JSON.
	Hash string `json:"-"`
}

// Step is one skill in a plan with the settings of this pipeline.
type Step struct {
	Skill        *skill.Skill    `json:"skill"`
	Upstream     []string        `json:"upstream,omitempty"` // direct dependencies
	Input        json.RawMessage `json:"input,omitempty"`    // template; nil = the execution's input
	When         string          `json:"when,omitempty"`
	Approval     *Approval       `json:"approval,omitempty"`
	AllowFailure bool            `json:"allow_failure,omitempty"`
	Timeout      skill.Duration  `json:"timeout,omitempty"` // 0 = the skill's, then the engine default
	Retries      *int            `json:"retries,omitempty"` // nil = the skill's, then the engine default
}

// Build validates f against the skills it names and returns the plan. It
// reports every problem: unknown skills, dependencies outside the pipeline,
// cycles, malformed references and conditions, references to skills that
// are not (transitively) upstream, and skills that cannot run.
func Build(f *File, skills map[string]*skill.Skill) (*Plan, lint.Problems) {
	var ps lint.Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, lint.Problem{Line: f.Line(path), Field: path, Message: fmt.Sprintf(format, args...)})
	}
	p := &Plan{ID: f.ID, Version: f.Version, Description: f.Description, Steps: map[string]*Step{}}
	for i, id := range f.Pipeline {
		s, ok := skills[id]
		if !ok {
			add(fmt.Sprintf("pipeline[%d]", i), "unknown skill %q: put its file in skills_dir, send it with the submission, or register it", id)
			continue
		}
		p.Order = append(p.Order, id)
		st := &Step{Skill: s}
		if spec := f.Steps[id]; spec != nil {
			st.Input, st.When, st.Approval, st.AllowFailure = spec.Input, spec.When, spec.Approval, spec.AllowFailure
			st.Timeout, st.Retries = skill.Duration(spec.Timeout), spec.Retries
		}
		if s.Run.Manual() && st.Approval == nil {
			add("steps."+id, "skill %s has no run (agent or exec), so only a person or agent can complete it: mark the step `approval: true`", id)
		}
		p.Steps[id] = st
	}

	// Dependencies: front-matter upstream, step upstream, and the reverse of
	// front-matter downstream (ignored when the downstream skill is not in
	// this pipeline: a skill may feed several pipelines).
	declared := map[string][]string{}
	dag := false
	for i, id := range f.Pipeline {
		st := p.Steps[id]
		if st == nil {
			continue
		}
		var deps []string
		for _, u := range st.Skill.Upstream {
			if _, ok := p.Steps[u]; !ok && !slices.Contains(f.Pipeline, u) {
				add(fmt.Sprintf("pipeline[%d]", i), "skill %s declares upstream %q, which is not in the pipeline; add %s to pipeline", id, u, u)
				continue
			}
			deps = appendNew(deps, u)
		}
		if spec := f.Steps[id]; spec != nil {
			for _, u := range spec.Upstream {
				if u == id {
					add("steps."+id+".upstream", "a step cannot depend on itself")
					continue
				}
				if !slices.Contains(f.Pipeline, u) {
					add("steps."+id+".upstream", "%q is not in the pipeline", u)
					continue
				}
				deps = appendNew(deps, u)
			}
		}
		for _, other := range f.Pipeline {
			if o := p.Steps[other]; o != nil && other != id && slices.Contains(o.Skill.Downstream, id) {
				deps = appendNew(deps, other)
			}
		}
		if len(deps) > 0 {
			dag = true
		}
		declared[id] = deps
	}
	for i, id := range p.Order {
		st := p.Steps[id]
		if dag {
			st.Upstream = declared[id]
		} else if i > 0 {
			st.Upstream = []string{p.Order[i-1]}
		}
		// Keep only dependencies that resolved to steps (unknown skills were reported).
		st.Upstream = slices.DeleteFunc(st.Upstream, func(u string) bool { return p.Steps[u] == nil })
	}
	if cyc := p.cycle(); cyc != nil {
		add("pipeline", "dependency cycle: %s; remove one of these upstream links", strings.Join(cyc, " → "))
		return p, ps
	}

	for _, id := range p.Order {
		st := p.Steps[id]
		anc := p.Ancestors(id)
		check := func(path string, r ref.Ref) {
			if r.Kind == ref.Input {
				return
			}
			switch {
			case r.Skill == id:
				add(path, "%s refers to this step itself; a step can only read its upstreams", r)
			case p.Steps[r.Skill] == nil:
				add(path, "%s refers to %q, which is not a skill of this pipeline", r, r.Skill)
			case !anc[r.Skill]:
				add(path, "%s refers to %s, which is not upstream of %s; add %s to the upstream of %s", r, r.Skill, id, r.Skill, id)
			}
		}
		if st.Input != nil {
			tmpl, err := ref.Decode(st.Input)
			if err != nil {
				add("steps."+id+".input", "not valid JSON: %v", err)
			} else {
				refs, errs := ref.Find(tmpl)
				for _, e := range errs {
					add("steps."+id+".input."+e.Path, "%v", e.Err)
				}
				for _, r := range refs {
					check("steps."+id+".input."+r.Path, r.Ref)
				}
			}
		}
		if st.When != "" {
			c, err := ref.ParseWhen(st.When)
			if err != nil {
				add("steps."+id+".when", "%v", err)
			} else {
				check("steps."+id+".when", c.Ref)
			}
		}
	}
	if len(ps) > 0 {
		return p, ps
	}
	p.Hash = p.hash()
	return p, nil
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// cycle returns one dependency cycle (first node repeated at the end), or nil.
func (p *Plan) cycle() []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found []string
	var visit func(id string) bool
	visit = func(id string) bool {
		color[id] = grey
		stack = append(stack, id)
		for _, u := range p.Steps[id].Upstream {
			switch color[u] {
			case grey:
				i := slices.Index(stack, u)
				// stack runs downstream → upstream; print in execution order.
				cyc := append([]string{}, stack[i:]...)
				slices.Reverse(cyc)
				// Start at the step listed first in the pipeline.
				first := 0
				for j, s := range cyc {
					if slices.Index(p.Order, s) < slices.Index(p.Order, cyc[first]) {
						first = j
					}
				}
				cyc = append(cyc[first:], cyc[:first]...)
				found = append(cyc, cyc[0])
				return true
			case white:
				if visit(u) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
		return false
	}
	for _, id := range p.Order {
		if color[id] == white && visit(id) {
			return found
		}
	}
	return nil
}

// Ancestors returns every skill transitively upstream of id.
func (p *Plan) Ancestors(id string) map[string]bool {
	out := map[string]bool{}
	var walk func(string)
	walk = func(s string) {
		st := p.Steps[s]
		if st == nil {
			return
		}
		for _, u := range st.Upstream {
			if !out[u] {
				out[u] = true
				walk(u)
			}
		}
	}
	walk(id)
	return out
}

// CheckInput verifies, before anything runs, that every <<ref:input…>> of a
// step without a `when` condition resolves against the execution input.
// (A conditional step may legitimately read optional input; it is checked
// when it starts.)
func (p *Plan) CheckInput(input any) lint.Problems {
	var ps lint.Problems
	src := inputOnly{input}
	for _, id := range p.Order {
		st := p.Steps[id]
		if st.When != "" || st.Input == nil {
			continue
		}
		tmpl, err := ref.Decode(st.Input)
		if err != nil {
			continue
		}
		refs, _ := ref.Find(tmpl)
		for _, r := range refs {
			if r.Ref.Kind != ref.Input {
				continue
			}
			if _, err := ref.Value(r.Ref, src); err != nil {
				ps = append(ps, lint.Problem{Field: "input", Message: fmt.Sprintf("steps.%s.input.%s needs %v", id, r.Path, err)})
			}
		}
	}
	return ps
}

type inputOnly struct{ in any }

func (s inputOnly) Input() any                      { return s.in }
func (s inputOnly) Step(string) (string, any, bool) { return "", nil, false }

// Marshal returns the plan's canonical JSON (what is pinned and hashed).
func (p *Plan) Marshal() []byte {
	b, err := ref.Encode(p)
	if err != nil {
		panic(fmt.Sprintf("plan: marshal: %v", err)) // plain data; cannot fail
	}
	return b
}

func (p *Plan) hash() string {
	sum := sha256.Sum256(p.Marshal())
	return hex.EncodeToString(sum[:])
}

// Decode reads a pinned plan and recomputes its hash.
func Decode(data []byte) (*Plan, error) {
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("decode plan: %w", err)
	}
	for _, id := range p.Order {
		if p.Steps[id] == nil || p.Steps[id].Skill == nil {
			return nil, fmt.Errorf("decode plan: step %q has no skill", id)
		}
	}
	p.Hash = p.hash()
	return &p, nil
}

// Single builds the one-step plan of a direct invocation: skill s run with
// the caller's input as is.
func Single(s *skill.Skill) *Plan {
	p := &Plan{ID: "invoke-" + s.ID, Order: []string{s.ID}, Steps: map[string]*Step{s.ID: {Skill: s}}}
	p.Hash = p.hash()
	return p
}

// Skills returns the plan's skills sorted by id.
func (p *Plan) Skills() []*skill.Skill {
	out := make([]*skill.Skill, 0, len(p.Steps))
	for _, st := range p.Steps {
		out = append(out, st.Skill)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
