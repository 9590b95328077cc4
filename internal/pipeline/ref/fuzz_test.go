package ref

import (
	"reflect"
	"strings"
	"testing"
)

var seeds = []string{
	"<<ref:a.output>>", "<<ref:api-fetch.output.data.0.url>>", "<<ref:x.status>>", "<<ref:input>>", "<<ref:input.a.b>>",
	"<<ref:>>", "<<ref:a..b>>", "x <<ref:a.output.y>> y", "<<ref:<<ref:a.status>>>>", "<<ref:a.output", "<<<<ref:a.status>>>>",
	"<<ref:input.数据>>", "<<ref:a.output.\x00>>", "plain",
}

// Parse never panics, and whatever it accepts renders back to itself.
func FuzzParse(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		if r.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, r.String())
		}
		r2, err := Parse(r.String())
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-parse of %q: %+v %v", s, r2, err)
		}
	})
}

// Scan never panics, and on success its parts concatenate back to the input.
func FuzzScan(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts, err := Scan(s)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, p := range parts {
			if p.IsRef {
				if p.Ref.String() != p.Text {
					t.Fatalf("ref part %q renders as %q", p.Text, p.Ref.String())
				}
			} else if strings.Contains(p.Text, Open) {
				t.Fatalf("literal part %q contains an opening delimiter", p.Text)
			}
			b.WriteString(p.Text)
		}
		if b.String() != s {
			t.Fatalf("parts of %q join to %q", s, b.String())
		}
		// Resolving against an empty source must fail cleanly or succeed.
		_, _ = Resolve(s, fakeSource{input: map[string]any{}})
	})
}

// ParseWhen never panics; accepted conditions round-trip.
func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"<<ref:a.status>> == completed", `<<ref:input.x>> != "a b"`, "<<ref:a.status>>==", "x == y", "<<ref:a.status>> == 'q'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseWhen(s)
		if err != nil {
			return
		}
		c2, err := ParseWhen(c.String())
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip of %q via %q: %+v %v", s, c.String(), c2, err)
		}
	})
}
