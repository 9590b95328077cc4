package a2a

import (
	"encoding/json"
	"testing"
)

func TestPageTokenRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		at int64
		id string
	}{{0, "a"}, {1700000000123, "0b8e-task|with-bar"}, {-5, "x"}} {
		at, id, err := decodePageToken(encodePageToken(tc.at, tc.id))
		if err != nil || at != tc.at || id != tc.id {
			t.Errorf("round trip of (%d, %q): (%d, %q, %v)", tc.at, tc.id, at, id, err)
		}
	}
	for _, bad := range []string{"", "!!", "bm9waXBl", "MTIz"} {
		if _, _, err := decodePageToken(bad); err == nil {
			t.Errorf("decodePageToken(%q) accepted", bad)
		}
	}
}

func FuzzDecodePageToken(f *testing.F) {
	f.Add(encodePageToken(1, "t"))
	f.Add("%%%")
	f.Fuzz(func(t *testing.T, s string) {
		at, id, err := decodePageToken(s)
		if err == nil && (id == "" || encodePageToken(at, id) == "") {
			t.Fatalf("accepted %q as (%d, %q)", s, at, id)
		}
	})
}

func TestDecodeResult(t *testing.T) {
	cases := []struct {
		raw   string
		texts []string
		state string
	}{
		{`"plain"`, []string{"plain"}, ""},
		{`{"text":"hi"}`, []string{"hi"}, ""},
		{`{"text":"hi","parts":[{"data":{"a":1}}]}`, []string{"hi", ""}, ""},
		{`{"parts":[{"text":"p1"},{"text":"p2"}]}`, []string{"p1", "p2"}, ""},
		{`{"text":"more?","state":"input-required"}`, []string{"more?"}, "input-required"},
		{`null`, []string{""}, ""},
		{`{"parts":"nope"}`, nil, ""},
	}
	for _, tc := range cases {
		res, parts := decodeResult(json.RawMessage(tc.raw))
		if len(parts) == 0 {
			t.Errorf("%s: no parts", tc.raw)
			continue
		}
		if tc.texts != nil {
			if len(parts) != len(tc.texts) {
				t.Errorf("%s: %d parts, want %d", tc.raw, len(parts), len(tc.texts))
				continue
			}
			for i, want := range tc.texts {
				if got := parts[i].Text(); got != want {
					t.Errorf("%s: part %d = %q, want %q", tc.raw, i, got, want)
				}
			}
		}
		if res.State != tc.state {
			t.Errorf("%s: state %q", tc.raw, res.State)
		}
	}
}

// Whatever an agent puts in its answer, decoding never fails and always
// yields at least one part for the task.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{`"x"`, `{"text":"a","parts":[{"text":"b"}]}`, `{"parts":[{"url":"http://x"}]}`, `[]`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, parts := decodeResult(json.RawMessage(s))
		if len(parts) == 0 {
			t.Fatalf("no parts for %q", s)
		}
	})
}
