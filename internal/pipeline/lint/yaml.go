package lint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Checker reads YAML nodes field by field and records a Problem for every
// defect instead of stopping at the first one.
type Checker struct {
	File       string // file name used in problems ("" for the submitted document)
	LineOffset int    // added to node lines (front-matter starts after the '---' line)
	Problems   Problems
}

// maxNodes bounds the nodes one document may expand to, so an alias bomb
// ("billion laughs") cannot exhaust memory.
const maxNodes = 200000

var yamlLineErr = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Parse parses text and returns the top-level mapping node, or nil after
// recording a problem when text is not a YAML mapping.
func (c *Checker) Parse(text []byte) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line == "yaml: unmarshal errors:" {
				continue
			}
			p := Problem{File: c.File, Field: "", Message: "invalid YAML: " + strings.TrimPrefix(line, "yaml: ")}
			if m := yamlLineErr.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				// yaml.v3 reports parser errors ("did not find expected …")
				// with a 0-based line and scanner errors with a 1-based one.
				if strings.HasPrefix(m[2], "did not find expected") {
					n++
				}
				p.Line = n + c.LineOffset
				p.Message = "invalid YAML: " + m[2]
			}
			c.Problems = append(c.Problems, p)
		}
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		c.Problems = append(c.Problems, Problem{File: c.File, Line: 1 + c.LineOffset, Message: "empty document; a YAML mapping is required"})
		return nil
	}
	root := deref(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		c.Addf(root, "", "must be a YAML mapping (key: value lines)")
		return nil
	}
	if n := countNodes(root, 0); n > maxNodes {
		c.Addf(root, "", "document expands to more than %d YAML nodes (aliases?); simplify it", maxNodes)
		return nil
	}
	return root
}

func countNodes(n *yaml.Node, acc int) int {
	if n == nil || acc > maxNodes {
		return acc
	}
	acc++
	if n.Kind == yaml.AliasNode {
		return countNodes(n.Alias, acc)
	}
	for _, c := range n.Content {
		acc = countNodes(c, acc)
		if acc > maxNodes {
			return acc
		}
	}
	return acc
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// Addf records a problem located at node n.
func (c *Checker) Addf(n *yaml.Node, field, format string, args ...any) {
	p := Problem{File: c.File, Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		p.Line = n.Line + c.LineOffset
		p.Column = n.Column
	}
	c.Problems = append(c.Problems, p)
}

// Line is the file line of node n (0 for nil).
func (c *Checker) Line(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line + c.LineOffset
}

// Field is one key of a mapping with its value.
type Field struct {
	Key   *yaml.Node
	Value *yaml.Node
}

// Fields returns the members of mapping n by key. It records unknown keys
// (when allowed is non-nil), duplicate keys and non-scalar keys. A nil or
// non-mapping n yields nil after a problem (a null value is not a problem).
func (c *Checker) Fields(n *yaml.Node, field string, allowed []string) map[string]Field {
	n = deref(n)
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		c.Addf(n, field, "must be a mapping")
		return nil
	}
	out := make(map[string]Field, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			c.Addf(k, field, "keys must be plain strings")
			continue
		}
		name := join(field, k.Value)
		if _, dup := out[k.Value]; dup {
			c.Addf(k, name, "defined twice")
			continue
		}
		if allowed != nil && !contains(allowed, k.Value) {
			c.Addf(k, name, "unknown field; allowed fields are %s", strings.Join(allowed, ", "))
			continue
		}
		out[k.Value] = Field{Key: k, Value: v}
	}
	return out
}

// Ordered returns the members of mapping n in document order (duplicates and
// non-scalar keys reported and dropped).
func (c *Checker) Ordered(n *yaml.Node, field string) []Field {
	n = deref(n)
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		c.Addf(n, field, "must be a mapping")
		return nil
	}
	var out []Field
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			c.Addf(k, field, "keys must be plain strings")
			continue
		}
		if seen[k.Value] {
			c.Addf(k, join(field, k.Value), "defined twice")
			continue
		}
		seen[k.Value] = true
		out = append(out, Field{Key: k, Value: v})
	}
	return out
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// IsNull reports whether n is absent or an explicit YAML null.
func IsNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || isNull(n)
}

// String reads a scalar string. Numbers, booleans and dates are accepted as
// their text (YAML turns `version: 1.0` into a float). ok is false when n is
// absent or invalid (a problem is recorded for invalid values).
func (c *Checker) String(n *yaml.Node, field string) (string, bool) {
	n = deref(n)
	if n == nil || isNull(n) {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		c.Addf(n, field, "must be a string")
		return "", false
	}
	return n.Value, true
}

// StringList reads a sequence of scalar strings; a single scalar is not
// accepted (it is usually a missing dash).
func (c *Checker) StringList(n *yaml.Node, field string) []string {
	n = deref(n)
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		c.Addf(n, field, "must be a list, e.g. [a, b]")
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		item = deref(item)
		if item.Kind != yaml.ScalarNode || isNull(item) {
			c.Addf(item, fmt.Sprintf("%s[%d]", field, i), "must be a string")
			continue
		}
		out = append(out, item.Value)
	}
	return out
}

// Items returns the elements of a sequence node (nil after a problem when n
// is not a sequence).
func (c *Checker) Items(n *yaml.Node, field string) []*yaml.Node {
	n = deref(n)
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		c.Addf(n, field, "must be a list")
		return nil
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, x := range n.Content {
		out[i] = deref(x)
	}
	return out
}

// Bool reads a YAML boolean.
func (c *Checker) Bool(n *yaml.Node, field string) (bool, bool) {
	n = deref(n)
	if n == nil || isNull(n) {
		return false, false
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		c.Addf(n, field, "must be true or false")
		return false, false
	}
	return b, true
}

// Int reads an integer within [lo, hi].
func (c *Checker) Int(n *yaml.Node, field string, lo, hi int) (int, bool) {
	n = deref(n)
	if n == nil || isNull(n) {
		return 0, false
	}
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		c.Addf(n, field, "must be a whole number")
		return 0, false
	}
	if v < lo || v > hi {
		c.Addf(n, field, "must be between %d and %d", lo, hi)
		return 0, false
	}
	return v, true
}

// Duration reads a duration written as Go text ("30s", "2m", "1h30m") or as
// whole seconds, within (0, max].
func (c *Checker) Duration(n *yaml.Node, field string, max time.Duration) (time.Duration, bool) {
	n = deref(n)
	if n == nil || isNull(n) {
		return 0, false
	}
	if n.Kind != yaml.ScalarNode {
		c.Addf(n, field, "must be a duration such as 30s, 5m or 1h")
		return 0, false
	}
	var d time.Duration
	if n.ShortTag() == "!!int" {
		secs, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil || secs > int64(max/time.Second) {
			c.Addf(n, field, "must be at most %s", max)
			return 0, false
		}
		d = time.Duration(secs) * time.Second
	} else {
		var err error
		d, err = time.ParseDuration(n.Value)
		if err != nil {
			c.Addf(n, field, "must be a duration such as 30s, 5m or 1h (got %q)", n.Value)
			return 0, false
		}
	}
	if d <= 0 || d > max {
		c.Addf(n, field, "must be more than 0 and at most %s", max)
		return 0, false
	}
	return d, true
}

// JSON converts any YAML value to JSON. Mapping keys must be scalars;
// timestamps and other tagged scalars become strings; NaN and infinities are
// refused because JSON cannot carry them.
func (c *Checker) JSON(n *yaml.Node, field string) (json.RawMessage, bool) {
	before := len(c.Problems)
	v := c.toAny(n, field, 0)
	if len(c.Problems) > before {
		return nil, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		c.Addf(n, field, "cannot be represented as JSON: %v", err)
		return nil, false
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), true
}

// orderedMap keeps YAML key order when converted to JSON.
type orderedMap struct {
	keys []string
	vals map[string]any
}

func (m orderedMap) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range m.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, err := marshalNoEscape(k)
		if err != nil {
			return nil, err
		}
		buf.Write(kb)
		buf.WriteByte(':')
		vb, err := marshalNoEscape(m.vals[k])
		if err != nil {
			return nil, err
		}
		buf.Write(vb)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func (c *Checker) toAny(n *yaml.Node, field string, depth int) any {
	n = deref(n)
	if n == nil {
		return nil
	}
	if depth > 64 {
		c.Addf(n, field, "nested more than 64 levels deep")
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := orderedMap{vals: map[string]any{}}
		for _, f := range c.Ordered(n, field) {
			m.keys = append(m.keys, f.Key.Value)
			m.vals[f.Key.Value] = c.toAny(f.Value, join(field, f.Key.Value), depth+1)
		}
		return m
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, x := range n.Content {
			out[i] = c.toAny(x, fmt.Sprintf("%s.%d", field, i), depth+1)
		}
		return out
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if n.Decode(&b) == nil {
				return b
			}
		case "!!int":
			var i int64
			if n.Decode(&i) == nil {
				return json.Number(strconv.FormatInt(i, 10))
			}
			var f float64
			if n.Decode(&f) == nil && !math.IsInf(f, 0) {
				return f
			}
		case "!!float":
			var f float64
			if n.Decode(&f) == nil {
				if math.IsNaN(f) || math.IsInf(f, 0) {
					c.Addf(n, field, "NaN and infinity cannot be represented in JSON")
					return nil
				}
				return f
			}
		}
		return n.Value
	}
	c.Addf(n, field, "unsupported YAML value")
	return nil
}
