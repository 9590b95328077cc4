package ref

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Ref
		err  string
	}{
		{"<<ref:api-fetch.output.data.0.url>>", Ref{Kind: Output, Skill: "api-fetch", Path: []string{"data", "0", "url"}}, ""},
		{"<<ref:a.output>>", Ref{Kind: Output, Skill: "a"}, ""},
		{"<<ref:a_1.status>>", Ref{Kind: Status, Skill: "a_1"}, ""},
		{"<<ref:input>>", Ref{Kind: Input}, ""},
		{"<<ref:input.n>>", Ref{Kind: Input, Path: []string{"n"}}, ""},
		{"<<ref:input.数据.x>>", Ref{Kind: Input, Path: []string{"数据", "x"}}, ""},
		{"<<ref:>>", Ref{}, "empty"},
		{"<<ref:a>>", Ref{}, "not what to read"},
		{"<<ref:a.outputs>>", Ref{}, "output or status"},
		{"<<ref:a.status.x>>", Ref{}, "status has no fields"},
		{"<<ref:a..output>>", Ref{}, "empty path segment"},
		{"<<ref:a.output.>>", Ref{}, "empty path segment"},
		{"<<ref:-a.output>>", Ref{}, "not a skill id"},
		{"<<ref:a.output.x y>>", Ref{}, "not allowed"},
		{"ref:a.output", Ref{}, "must look like"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.err != "" {
			var se *SyntaxError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Parse(%q) err = %v, want SyntaxError containing %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if len(got.Path) == 0 {
			got.Path = nil
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if got.String() != tt.in {
			t.Errorf("String() = %q, want %q", got.String(), tt.in)
		}
	}
}

func TestScan(t *testing.T) {
	parts, err := Scan("a << b <<ref:x.status>> and <<ref:input.n>>!")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, p := range parts {
		if p.IsRef {
			kinds = append(kinds, "ref:"+p.Ref.String())
		} else {
			kinds = append(kinds, "text:"+p.Text)
		}
	}
	want := []string{"text:a << b ", "ref:<<ref:x.status>>", "text: and ", "ref:<<ref:input.n>>", "text:!"}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("got %q, want %q", kinds, want)
	}
	for _, bad := range []string{"x <<ref:a.output", "<<ref:a.<<ref:b.status>>>>", "<<ref:a.bogus>> tail"} {
		if _, err := Scan(bad); err == nil {
			t.Errorf("Scan(%q) accepted", bad)
		}
	}
}

type fakeSource struct {
	input any
	steps map[string][2]any // status, output
}

func (f fakeSource) Input() any { return f.input }
func (f fakeSource) Step(s string) (string, any, bool) {
	st, ok := f.steps[s]
	if !ok {
		return "", nil, false
	}
	return st[0].(string), st[1], true
}

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := Decode([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestResolve(t *testing.T) {
	src := fakeSource{
		input: mustDecode(t, `{"n": 21, "who": "ann", "tags": ["x", "y"]}`),
		steps: map[string][2]any{
			"fetch":  {"completed", mustDecode(t, `{"success": true, "data": {"items": [{"url": "https://e/1"}, {"url": "https://e/2"}], "count": 2, "ok": true, "none": null}}`)},
			"broken": {"failed", nil},
			"later":  {"pending", nil},
		},
	}
	tests := []struct {
		name, template, want string
		reason               Reason
		msg                  string
	}{
		{"typed number", `{"n": "<<ref:input.n>>"}`, `{"n":21}`, "", ""},
		{"typed object", `{"d": "<<ref:fetch.output.data.items.1>>"}`, `{"d":{"url":"https://e/2"}}`, "", ""},
		{"typed bool and null", `["<<ref:fetch.output.data.ok>>", "<<ref:fetch.output.data.none>>"]`, `[true,null]`, "", ""},
		{"whole input", `"<<ref:input>>"`, `{"n":21,"tags":["x","y"],"who":"ann"}`, "", ""},
		{"status", `{"s": "<<ref:broken.status>>"}`, `{"s":"failed"}`, "", ""},
		{"interpolation", `{"t": "hi <<ref:input.who>>, n=<<ref:input.n>> tags=<<ref:input.tags>> ok=<<ref:fetch.output.data.ok>>"}`,
			`{"t":"hi ann, n=21 tags=[\"x\",\"y\"] ok=true"}`, "", ""},
		{"literal untouched", `{"t": "a << b >> c", "n": 3}`, `{"n":3,"t":"a << b >> c"}`, "", ""},
		{"not completed", `{"x": "<<ref:broken.output.data>>"}`, "", ReasonNotCompleted, "status failed"},
		{"pending", `{"x": "n=<<ref:later.output>>"}`, "", ReasonNotCompleted, "status pending"},
		{"unknown skill", `{"x": "<<ref:ghost.output>>"}`, "", ReasonUnknownSkill, `no skill "ghost"`},
		{"missing key", `{"x": "<<ref:fetch.output.data.nope>>"}`, "", ReasonPathMissing, `no field "nope"`},
		{"index out of range", `{"x": "<<ref:fetch.output.data.items.5.url>>"}`, "", ReasonPathMissing, "out of range"},
		{"non-numeric index", `{"x": "<<ref:fetch.output.data.items.first>>"}`, "", ReasonPathMissing, "not an index"},
		{"into scalar", `{"x": "<<ref:input.n.digits>>"}`, "", ReasonPathMissing, "a number"},
		{"bad syntax", `{"x": "<<ref:fetch.output..a>>"}`, "", ReasonSyntax, "empty path segment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(mustDecode(t, tt.template), src)
			if tt.reason != "" {
				var re *Error
				if !errors.As(err, &re) || re.Reason != tt.reason || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("err = %v, want %s containing %q", err, tt.reason, tt.msg)
				}
				if !strings.Contains(err.Error(), "<<ref:") || !strings.HasPrefix(err.Error(), "input.x: ") {
					t.Fatalf("error does not name the ref and field: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := Encode(got)
			if string(b) != tt.want {
				t.Fatalf("got %s, want %s", b, tt.want)
			}
		})
	}
}

// Resolving must not alias the source: editing the result leaves the
// upstream output untouched.
func TestResolveCopies(t *testing.T) {
	out := mustDecode(t, `{"data": {"a": [1]}}`)
	src := fakeSource{input: map[string]any{}, steps: map[string][2]any{"s": {"completed", out}}}
	got, err := Resolve("<<ref:s.output.data>>", src)
	if err != nil {
		t.Fatal(err)
	}
	got.(map[string]any)["a"].([]any)[0] = "changed"
	if b, _ := json.Marshal(out); string(b) != `{"data":{"a":[1]}}` {
		t.Fatalf("source mutated: %s", b)
	}
}

func TestFind(t *testing.T) {
	refs, errs := Find(mustDecode(t, `{"a": "<<ref:x.output.y>>", "b": ["<<ref:input.q>> and <<ref:z.status>>", "<<ref:bad>>"]}`))
	var got []string
	for _, r := range refs {
		got = append(got, r.Path+"="+r.Ref.String())
	}
	want := []string{"a=<<ref:x.output.y>>", "b.0=<<ref:input.q>>", "b.0=<<ref:z.status>>"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("refs %q, want %q", got, want)
	}
	if len(errs) != 1 || errs[0].Path != "b.1" {
		t.Fatalf("errs %+v", errs)
	}
}

func TestWhen(t *testing.T) {
	src := fakeSource{
		input: mustDecode(t, `{"flag": true, "mode": "fast lane", "n": 3}`),
		steps: map[string][2]any{"a": {"completed", mustDecode(t, `{"success": true}`)}, "b": {"skipped", nil}},
	}
	tests := []struct {
		cond string
		want bool
		err  string
	}{
		{"<<ref:a.status>> == completed", true, ""},
		{"<<ref:b.status>> != completed", true, ""},
		{"  <<ref:input.flag>>==true ", true, ""},
		{"<<ref:input.n>> == 3", true, ""},
		{"<<ref:input.n>> != 3", false, ""},
		{`<<ref:input.mode>> == "fast lane"`, true, ""},
		{`<<ref:input.mode>> == 'fast lane'`, true, ""},
		{"<<ref:a.output.success>> == true", true, ""},
		{"<<ref:input.flag>>", false, "followed by == or !="},
		{"<<ref:input.flag>> = true", false, "followed by == or !="},
		{"<<ref:input.flag>> ==", false, "value is missing"},
		{"true == <<ref:input.flag>>", false, "must start with a reference"},
		{"<<ref:input.flag>> == <<ref:input.n>>", false, "literal"},
		{`<<ref:input.mode>> == "open`, false, "unbalanced"},
		{"<<ref:input.flag >> == true", false, "not allowed"},
	}
	for _, tt := range tests {
		c, err := ParseWhen(tt.cond)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseWhen(%q) err = %v, want %q", tt.cond, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseWhen(%q): %v", tt.cond, err)
			continue
		}
		got, err := c.Eval(src)
		if err != nil || got != tt.want {
			t.Errorf("Eval(%q) = %v, %v; want %v", tt.cond, got, err, tt.want)
		}
		if c2, err := ParseWhen(c.String()); err != nil || !reflect.DeepEqual(c2, c) {
			t.Errorf("round trip of %q via %q: %+v, %v", tt.cond, c.String(), c2, err)
		}
	}
	c, _ := ParseWhen("<<ref:b.output.x>> == 1")
	if _, err := c.Eval(src); err == nil {
		t.Fatal("condition on a skipped skill's output evaluated without error")
	}
}
