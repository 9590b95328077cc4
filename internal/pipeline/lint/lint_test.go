package lint

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "a.md", Line: 3, Column: 5, Field: "run.timeout", Message: "bad"}, "a.md:3:5: run.timeout: bad"},
		{Problem{File: "a.md", Line: 3, Message: "bad"}, "a.md:3: bad"},
		{Problem{File: "a.md", Field: "id", Message: "bad"}, "a.md: id: bad"},
		{Problem{Line: 7, Column: 2, Field: "steps.x", Message: "bad"}, "line 7: steps.x: bad"},
		{Problem{Message: "bad"}, "bad"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestErr(t *testing.T) {
	if (Problems{}).Err("x") != nil {
		t.Fatal("no problems must be no error")
	}
	ps := Problems{
		{Line: 9, Field: "steps.b", Message: "second"},
		{Line: 2, Field: "pipeline[0]", Message: "first"},
		{Line: 4, Field: "steps.b", Message: "same field"},
		{File: "s.md", Line: 1, Field: "id", Message: "in a skill file"},
	}
	err := ps.Err("invalid_pipeline")
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Class != protocol.ClassInvalid || pe.Code != "invalid_pipeline" {
		t.Fatalf("%#v", err)
	}
	want := map[string]string{
		"pipeline[0]": "line 2: first",
		"steps.b":     "line 4: same field; line 9: second",
		"s.md:id":     "line 1: in a skill file",
	}
	for k, v := range want {
		if pe.FieldErrors[k] != v {
			t.Errorf("fieldErrors[%s] = %q, want %q", k, pe.FieldErrors[k], v)
		}
	}
	if !strings.HasPrefix(pe.Message, "line 2: pipeline[0]: first (and 3 more problems)") {
		t.Errorf("message %q", pe.Message)
	}
}

func TestCheckerReaders(t *testing.T) {
	c := &Checker{File: "f.yaml", LineOffset: 10}
	root := c.Parse([]byte("s: 1.0\nl: [a, b]\nb: yes\nt: true\ni: 7\nd: 90s\nds: 30\nj: {x: [1, 2.5, null, \"<a>\"], y: 2026-01-14}\nbad: {k: .nan}\n"))
	if root == nil {
		t.Fatal(c.Problems)
	}
	f := c.Fields(root, "", nil)
	if s, _ := c.String(f["s"].Value, "s"); s != "1.0" {
		t.Errorf("string %q", s)
	}
	if l := c.StringList(f["l"].Value, "l"); strings.Join(l, ",") != "a,b" {
		t.Errorf("list %v", l)
	}
	if v, ok := c.Bool(f["t"].Value, "t"); !v || !ok {
		t.Error("bool")
	}
	if _, ok := c.Bool(f["b"].Value, "b"); ok { // YAML 1.2: "yes" is a string
		t.Error("yes accepted as a boolean")
	}
	if v, ok := c.Int(f["i"].Value, "i", 0, 5); ok || v != 0 {
		t.Error("out-of-range int accepted")
	}
	if d, _ := c.Duration(f["d"].Value, "d", time.Hour); d != 90*time.Second {
		t.Errorf("duration %v", d)
	}
	if d, _ := c.Duration(f["ds"].Value, "ds", time.Hour); d != 30*time.Second {
		t.Errorf("seconds %v", d)
	}
	if j, ok := c.JSON(f["j"].Value, "j"); !ok || string(j) != `{"x":[1,2.5,null,"<a>"],"y":"2026-01-14"}` {
		t.Errorf("json %s", j)
	}
	if _, ok := c.JSON(f["bad"].Value, "bad"); ok {
		t.Error("NaN accepted")
	}
	got := c.Problems.String()
	for _, want := range []string{"f.yaml:13:4: b: must be true or false", "f.yaml:15:4: i: must be between 0 and 5", "f.yaml:19:10: bad.k: NaN"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
}
