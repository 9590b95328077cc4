// Package skill parses skill definitions: Markdown files whose YAML
// front-matter says what the skill is (the seed's fields) and how the hub
// runs it (`run`: a worker agent over the bus, or a local command), and whose
// body is the instructions given to the agent.
//
// Parse reports every problem of a file at once, each with its line, so
// `switchboard skill lint` and a rejected submission both show the whole list.
package skill

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchboard-hub/switchboard/internal/pipeline/lint"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Limits on a skill file. They keep one definition from dominating the
// pinned copy stored with every execution.
const (
	MaxFileBytes = 256 << 10
	MaxTimeout   = 24 * time.Hour
	MaxRetries   = 10
)

// Event names a skill may subscribe to in `events.subscribe`. The engine
// emits exactly these; "*" and "skill:*" / "pipeline:*" are wildcards.
var Events = []string{
	"skill:started", "skill:completed", "skill:failed", "skill:retrying", "skill:skipped", "skill:waiting_input",
	"pipeline:started", "pipeline:completed", "pipeline:failed", "pipeline:cancelled",
}

// ValidEventPattern reports whether p names a known event or a wildcard.
func ValidEventPattern(p string) bool {
	return p == "*" || p == "skill:*" || p == "pipeline:*" || slices.Contains(Events, p)
}

// MatchEvent reports whether pattern (an event name or wildcard) matches event.
func MatchEvent(pattern, event string) bool {
	switch pattern {
	case "*":
		return true
	case "skill:*", "pipeline:*":
		return strings.HasPrefix(event, strings.TrimSuffix(pattern, "*"))
	}
	return pattern == event
}

// Skill is one parsed skill definition. It is stored (as JSON) inside every
// execution that uses it, so later edits never change a running pipeline.
type Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name,omitempty"`
	Version     string   `json:"version,omitempty"`
	Description string   `json:"description,omitempty"`
	Directory   string   `json:"directory,omitempty"`
	Upstream    []string `json:"upstream,omitempty"`
	Downstream  []string `json:"downstream,omitempty"`
	Inputs      []Param  `json:"inputs,omitempty"`
	Outputs     []Param  `json:"outputs,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Subscribe   []string `json:"subscribe,omitempty"` // events.subscribe
	Run         Run      `json:"run"`
	CreatedBy   string   `json:"created_by,omitempty"`
	CreatedAt   string   `json:"created_at,omitempty"`
	UpdatedAt   string   `json:"updated_at,omitempty"`
	// Body is the Markdown after the front-matter: the instructions sent to
	// the agent that runs the skill.
	Body string `json:"body,omitempty"`
	// Source is the file the skill was read from (for messages), and Dir the
	// directory an exec command runs in ("" = the hub's working directory).
	Source string `json:"source,omitempty"`
	Dir    string `json:"dir,omitempty"`
	// Hash is the SHA-256 of the file content, hex.
	Hash string `json:"hash,omitempty"`
}

// Run says how the hub executes the skill. At most one of Agent and Exec is
// set; a skill with neither can only be an approval step, whose output is
// the data a person or agent resumes it with.
type Run struct {
	Agent   string   `json:"agent,omitempty"` // worker agent id: a task.assign request over the bus
	Exec    []string `json:"exec,omitempty"`  // argv of a local command
	Timeout Duration `json:"timeout,omitempty"`
	Retries *int     `json:"retries,omitempty"` // nil = the engine default
}

// Manual reports whether the skill has no executor.
func (r Run) Manual() bool { return r.Agent == "" && len(r.Exec) == 0 }

// Param is a declared input or output.
type Param struct {
	Name        string `json:"name"`
	Type        string `json:"type,omitempty"` // string, number, integer, boolean, object, array, any
	Required    bool   `json:"required,omitempty"`
	Description string `json:"description,omitempty"`
}

// ParamTypes are the types a declared input or output may have.
var ParamTypes = []string{"string", "number", "integer", "boolean", "object", "array", "any"}

// Duration is a time.Duration that reads and writes as Go duration text
// ("1m30s") in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads duration text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Reserved skill ids: "input" names the execution's input in references.
var reserved = []string{"input"}

var topFields = []string{"id", "name", "version", "description", "directory", "upstream", "downstream", "inputs", "outputs",
	"tags", "events", "run", "timeout", "retries", "created_by", "created_at", "updated_at"}

// Parse reads one skill file. name labels problems (usually the path). It
// returns the skill (possibly partial) and every problem found; the skill is
// usable only when there are no problems.
func Parse(name string, data []byte) (*Skill, lint.Problems) {
	c := &lint.Checker{File: name}
	if len(data) > MaxFileBytes {
		c.Addf(nil, "", "file is %d bytes; the limit is %d", len(data), MaxFileBytes)
		return nil, c.Problems
	}
	front, body, offset, ok := splitFrontMatter(data)
	if !ok {
		c.Problems = append(c.Problems, lint.Problem{File: name, Line: 1,
			Message: "missing YAML front-matter: the file must start with a line '---', then the fields (id, run, …), then a closing '---'"})
		return nil, c.Problems
	}
	c.LineOffset = offset
	sum := sha256.Sum256(data)
	s := &Skill{Body: strings.TrimLeft(body, "\n"), Source: name, Hash: hex.EncodeToString(sum[:])}
	root := c.Parse(front)
	if root == nil {
		return s, c.Problems
	}
	f := c.Fields(root, "", topFields)

	if v, ok := c.String(f["id"].Value, "id"); !ok {
		if f["id"].Value == nil || lint.IsNull(f["id"].Value) {
			c.Addf(root, "id", "required: the skill id (letters, digits, '-', '_')")
		}
	} else if !lint.ValidID(v) {
		c.Addf(f["id"].Value, "id", "%q is not a valid id: 1–64 letters, digits, '-' or '_', starting with a letter or digit", v)
	} else if slices.Contains(reserved, v) {
		c.Addf(f["id"].Value, "id", "%q is reserved (<<ref:input…>> names the execution input); choose another id", v)
	} else {
		s.ID = v
	}
	s.Name, _ = c.String(f["name"].Value, "name")
	s.Version, _ = c.String(f["version"].Value, "version")
	s.Description, _ = c.String(f["description"].Value, "description")
	s.Directory, _ = c.String(f["directory"].Value, "directory")
	s.CreatedBy, _ = c.String(f["created_by"].Value, "created_by")
	s.CreatedAt, _ = c.String(f["created_at"].Value, "created_at")
	s.UpdatedAt, _ = c.String(f["updated_at"].Value, "updated_at")
	s.Tags = c.StringList(f["tags"].Value, "tags")
	s.Upstream = idList(c, f["upstream"].Value, "upstream", s.ID)
	s.Downstream = idList(c, f["downstream"].Value, "downstream", s.ID)
	s.Inputs = params(c, f["inputs"].Value, "inputs")
	s.Outputs = params(c, f["outputs"].Value, "outputs")

	if ev := c.Fields(f["events"].Value, "events", []string{"subscribe"}); ev != nil {
		subs := c.StringList(ev["subscribe"].Value, "events.subscribe")
		items := c.Items(ev["subscribe"].Value, "events.subscribe")
		for i, p := range subs {
			if !ValidEventPattern(p) {
				var at *yaml.Node
				if i < len(items) {
					at = items[i]
				}
				c.Addf(at, fmt.Sprintf("events.subscribe[%d]", i), "unknown event %q; known events are %s (or *, skill:*, pipeline:*)", p, strings.Join(Events, ", "))
				continue
			}
			if !slices.Contains(s.Subscribe, p) {
				s.Subscribe = append(s.Subscribe, p)
			}
		}
	}
	parseRun(c, f, s)
	c.Problems.Sort()
	return s, c.Problems
}

func parseRun(c *lint.Checker, f map[string]lint.Field, s *Skill) {
	run := c.Fields(f["run"].Value, "run", []string{"agent", "exec", "timeout", "retries"})
	if a, ok := c.String(run["agent"].Value, "run.agent"); ok {
		if !protocol.ValidID(a) {
			c.Addf(run["agent"].Value, "run.agent", "%q is not an agent id", a)
		} else {
			s.Run.Agent = a
		}
	}
	if n := run["exec"].Value; !lint.IsNull(n) {
		if n.Kind == yaml.ScalarNode {
			// A single string is the program with no arguments; it is not
			// split on spaces (no shell is involved).
			if n.Value == "" {
				c.Addf(n, "run.exec", "must name a program")
			} else {
				s.Run.Exec = []string{n.Value}
			}
		} else if argv := c.StringList(n, "run.exec"); len(argv) == 0 || argv[0] == "" {
			c.Addf(n, "run.exec", "must be a non-empty list: [program, arg, …]")
		} else {
			s.Run.Exec = argv
		}
	}
	if run["agent"].Value != nil && run["exec"].Value != nil && !lint.IsNull(run["agent"].Value) && !lint.IsNull(run["exec"].Value) {
		c.Addf(run["exec"].Key, "run", "set either agent or exec, not both")
	}
	// timeout and retries are accepted under run (the spec) and at the top
	// level (where the seed's other fields live), but not both.
	for _, k := range []string{"timeout", "retries"} {
		if top := f[k]; top.Value != nil && run[k].Value != nil {
			c.Addf(top.Key, k, "also set as run.%s; keep one", k)
		}
	}
	for _, src := range []struct {
		fs   map[string]lint.Field
		path string
	}{{run, "run."}, {f, ""}} {
		if d, ok := c.Duration(src.fs["timeout"].Value, src.path+"timeout", MaxTimeout); ok {
			s.Run.Timeout = Duration(d)
		}
		if r, ok := c.Int(src.fs["retries"].Value, src.path+"retries", 0, MaxRetries); ok {
			s.Run.Retries = &r
		}
	}
}

func idList(c *lint.Checker, n *yaml.Node, field, self string) []string {
	ids := c.StringList(n, field)
	items := c.Items(n, field)
	var out []string
	for i, id := range ids {
		var at *yaml.Node
		if i < len(items) {
			at = items[i]
		}
		switch {
		case !lint.ValidID(id):
			c.Addf(at, fmt.Sprintf("%s[%d]", field, i), "%q is not a valid skill id", id)
		case id == self:
			c.Addf(at, fmt.Sprintf("%s[%d]", field, i), "a skill cannot name itself")
		case slices.Contains(out, id):
			c.Addf(at, fmt.Sprintf("%s[%d]", field, i), "%q is listed twice", id)
		default:
			out = append(out, id)
		}
	}
	return out
}

// params reads a list of declared inputs/outputs. Each entry is a name
// ("url"), a one-key mapping name → type ("url: string"), or a mapping
// {name, type, required, description}.
func params(c *lint.Checker, n *yaml.Node, field string) []Param {
	var out []Param
	for i, item := range c.Items(n, field) {
		path := fmt.Sprintf("%s[%d]", field, i)
		var p Param
		switch item.Kind {
		case yaml.ScalarNode:
			p.Name = item.Value
		case yaml.MappingNode:
			if hasKey(item, "name") {
				fs := c.Fields(item, path, []string{"name", "type", "required", "description"})
				p.Name, _ = c.String(fs["name"].Value, path+".name")
				p.Type, _ = c.String(fs["type"].Value, path+".type")
				p.Required, _ = c.Bool(fs["required"].Value, path+".required")
				p.Description, _ = c.String(fs["description"].Value, path+".description")
			} else if len(item.Content) == 2 && item.Content[0].Kind == yaml.ScalarNode {
				p.Name = item.Content[0].Value
				p.Type, _ = c.String(item.Content[1], path+"."+p.Name)
			} else {
				c.Addf(item, path, "must be a name, `name: type`, or {name, type, required, description}")
				continue
			}
		default:
			c.Addf(item, path, "must be a name, `name: type`, or {name, type, required, description}")
			continue
		}
		if p.Name == "" {
			c.Addf(item, path, "name is required")
			continue
		}
		if p.Type != "" && !slices.Contains(ParamTypes, p.Type) {
			c.Addf(item, path+".type", "unknown type %q; use one of %s", p.Type, strings.Join(ParamTypes, ", "))
			continue
		}
		out = append(out, p)
	}
	return out
}

func hasKey(m *yaml.Node, key string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return true
		}
	}
	return false
}

// splitFrontMatter splits "---\n<yaml>\n---\n<body>". offset is the number
// of lines before the YAML (1: the opening '---').
func splitFrontMatter(data []byte) (front []byte, body string, offset int, ok bool) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") && text != "---" {
		return nil, "", 0, false
	}
	rest := strings.TrimPrefix(text, "---")
	rest = strings.TrimPrefix(rest, "\n")
	lines := strings.SplitAfter(rest, "\n")
	var fm strings.Builder
	for i, l := range lines {
		t := strings.TrimRight(l, "\n\r \t")
		if t == "---" || t == "..." {
			return []byte(fm.String()), strings.Join(lines[i+1:], ""), 1, true
		}
		fm.WriteString(l)
	}
	return nil, "", 0, false
}

// Lint parses a skill file and returns only its problems.
func Lint(name string, data []byte) lint.Problems {
	_, ps := Parse(name, data)
	return ps
}

// ParseFile reads and parses the skill file at path; Dir is set to the
// file's directory so exec commands may use paths relative to it.
func ParseFile(path string) (*Skill, lint.Problems) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, lint.Problems{{File: path, Message: "cannot read: " + err.Error()}}
	}
	s, ps := Parse(path, data)
	if s != nil {
		if abs, err := filepath.Abs(filepath.Dir(path)); err == nil {
			s.Dir = abs
		}
	}
	return s, ps
}

// LoadDir reads every skill file (*.md, except README.md) under dir,
// recursively (the seed groups skills in sub-directories such as _core/).
// Problem file names are relative to dir. Two files defining the same id
// are a problem.
func LoadDir(dir string) ([]*Skill, lint.Problems) {
	var out []*Skill
	var problems lint.Problems
	byID := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			problems = append(problems, lint.Problem{File: path, Message: "cannot read: " + err.Error()})
			return nil
		}
		if d.IsDir() || !strings.EqualFold(filepath.Ext(path), ".md") || strings.EqualFold(d.Name(), "README.md") {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		s, ps := ParseFile(path)
		for i := range ps {
			ps[i].File = filepath.ToSlash(rel)
		}
		problems = append(problems, ps...)
		if s == nil || len(ps) > 0 {
			return nil
		}
		s.Source = filepath.ToSlash(rel)
		if other, dup := byID[s.ID]; dup {
			problems = append(problems, lint.Problem{File: s.Source, Line: 1, Field: "id",
				Message: fmt.Sprintf("skill %q is also defined in %s", s.ID, other)})
			return nil
		}
		byID[s.ID] = s.Source
		out = append(out, s)
		return nil
	})
	if err != nil {
		problems = append(problems, lint.Problem{File: dir, Message: "cannot read: " + err.Error()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	problems.Sort()
	return out, problems
}

// Validate checks a declared-input contract against a resolved input object:
// required inputs must be present and typed inputs must have their type. It
// returns one message per violation, naming the input.
func (s *Skill) Validate(input map[string]any) []string {
	var out []string
	for _, p := range s.Inputs {
		v, ok := input[p.Name]
		if !ok {
			if p.Required {
				out = append(out, fmt.Sprintf("input %q is required by skill %s", p.Name, s.ID))
			}
			continue
		}
		if p.Type != "" && p.Type != "any" && !hasType(v, p.Type) {
			out = append(out, fmt.Sprintf("input %q must be of type %s", p.Name, p.Type))
		}
	}
	return out
}

func hasType(v any, t string) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "number", "integer":
		switch n := v.(type) {
		case json.Number:
			if t == "integer" {
				_, err := n.Int64()
				return err == nil
			}
			return true
		case float64:
			return t == "number" || n == float64(int64(n))
		case int, int64:
			return true
		}
	}
	return false
}
