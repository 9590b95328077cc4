package telegram

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/telegram/tgfake"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestSplitText(t *testing.T) {
	cases := []struct {
		name, text, mode string
		limit            int
		want             []string
	}{
		{"fits unchanged", "  hello\n\n", "", 20, []string{"  hello\n\n"}},
		{"nothing visible", " \n\t ", "", 20, nil},
		{"only markup", "<b></b>", "HTML", 20, nil},
		{"paragraph break preferred", "aaaa bb\n\ncc\ndd ee", "", 12, []string{"aaaa bb", "cc\ndd ee"}},
		{"late line break beats early paragraph break", "aaa\n\nbbb\nccc ddd", "", 12, []string{"aaa\n\nbbb", "ccc ddd"}},
		{"line break in the second half", "aaaa bbbb\ncc dd", "", 12, []string{"aaaa bbbb", "cc dd"}},
		{"early paragraph loses to a late space", "a\n\nbbbbbbb ccc", "", 12, []string{"a\n\nbbbbbbb", "ccc"}},
		{"space", "one two three four", "", 9, []string{"one two", "three", "four"}},
		{"hard cut", "abcdefghij", "", 4, []string{"abcd", "efgh", "ij"}},
		{"surrogate pairs stay whole", "😀😀😀", "", 3, []string{"😀", "😀", "😀"}},
		{"combining marks stay with their letter", "e\u0301e\u0301e\u0301", "", 3, []string{"e\u0301", "e\u0301", "e\u0301"}},
		{"zwj sequences stay whole", "ab👩\u200d💻", "", 5, []string{"ab", "👩\u200d💻"}},
		{"html tags closed and reopened", "<b>one two three</b>", "HTML", 9, []string{"<b>one two</b>", "<b>three</b>"}},
		{"html tags do not count", "<a href=\"https://example.com/very/long\">ab cd</a>", "HTML", 3, []string{"<a href=\"https://example.com/very/long\">ab</a>", "<a href=\"https://example.com/very/long\">cd</a>"}},
		{"html entities count once", "&lt;&lt; &gt;&gt;", "HTML", 3, []string{"&lt;&lt;", "&gt;&gt;"}},
		{"html nested", "<b>x <i>a b</i></b>", "HTML", 4, []string{"<b>x <i>a</i></b>", "<b><i>b</i></b>"}},
		{"no empty entity at a cut", "aaa <b>bbb</b>", "HTML", 5, []string{"aaa", "<b>bbb</b>"}},
		{"markdownv2 pre reopened with language", "```go\nl1\nl2\nl3\n```", "MarkdownV2", 6, []string{"```go\nl1\nl2```", "```go\nl3\n```"}},
		{"markdownv2 escapes stay whole", "a\\.b\\.c\\.d", "MarkdownV2", 3, []string{"a\\.b", "\\.c\\.", "d"}},
		{"markdownv2 bold", "*aa bb*", "MarkdownV2", 3, []string{"*aa*", "*bb*"}},
		{"markdownv2 link is atomic", "x [ab cd](https://e.x) y", "MarkdownV2", 7, []string{"x", "[ab cd](https://e.x) y"}},
		{"legacy markdown", "_aa bb_ cc", "Markdown", 3, []string{"_aa_", "_bb_", "cc"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := SplitText(tc.text, tc.mode, tc.limit)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Fatalf("SplitText(%q, %q, %d)\n got %q\nwant %q", tc.text, tc.mode, tc.limit, got, tc.want)
			}
		})
	}
}

// TestSplitGolden pins the exact chunks of a realistic long reply. Run with
// -update to rewrite testdata/*.golden after an intended change.
func TestSplitGolden(t *testing.T) {
	for _, name := range []string{"reply.html", "reply.md2"} {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			mode := ParseModeHTML
			if strings.HasSuffix(name, ".md2") {
				mode = ParseModeMarkdownV2
			}
			chunks := SplitText(string(in), mode, 300)
			for i, c := range chunks {
				visible, err := tgfake.ParseText(c, mode)
				if err != nil {
					t.Fatalf("chunk %d refused: %v\n%s", i, err, c)
				}
				if tgfake.VisibleLength(visible) > 300 {
					t.Fatalf("chunk %d has %d visible units", i, tgfake.VisibleLength(visible))
				}
			}
			got := strings.Join(chunks, "\n=====8<=====\n") + "\n"
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("chunks differ from %s (run with -update if intended):\n%s", golden, got)
			}
		})
	}
}

// FuzzSplitText checks, for any text Telegram would accept, that every
// chunk is accepted too, fits the limit, and that together the chunks show
// the same text apart from whitespace at the cuts.
func FuzzSplitText(f *testing.F) {
	seeds := []struct{ text, mode string }{
		{"hello world\n\nsecond paragraph", ""},
		{"<b>bold <i>both</i></b> &amp; <a href=\"x\">link</a>\n<pre>code\nmore</pre>", "HTML"},
		{"*bold _both_* \\. `code` ```go\nx\ny\n``` [l](u)", "MarkdownV2"},
		{"*b* _i_ `c` ```\npre\n``` [t](u)", "Markdown"},
		{"😀😀 e\u0301 👩\u200d💻", ""},
	}
	for _, s := range seeds {
		f.Add(s.text, s.mode, 7)
	}
	f.Fuzz(func(t *testing.T, text, mode string, limit int) {
		if !utf8.ValidString(text) || limit < 8 || limit > 64 {
			return
		}
		switch mode {
		case "", ParseModeHTML, ParseModeMarkdownV2, ParseModeMarkdown:
		default:
			return
		}
		visible, err := tgfake.ParseText(text, mode)
		if err != nil {
			return
		}
		chunks := SplitText(text, mode, limit)
		var joined strings.Builder
		for i, c := range chunks {
			v, err := tgfake.ParseText(c, mode)
			if err != nil {
				t.Fatalf("chunk %d of %q (%s, %d) refused: %v\nchunks: %q", i, text, mode, limit, err, chunks)
			}
			if strings.TrimSpace(v) == "" {
				t.Fatalf("chunk %d of %q is empty: %q", i, text, chunks)
			}
			if tgfake.VisibleLength(v) > limit && len(chunks) > 1 && !strings.Contains(c, "](") {
				t.Fatalf("chunk %d of %q has %d units > %d: %q", i, text, tgfake.VisibleLength(v), limit, chunks)
			}
			joined.WriteString(v)
		}
		if strip(joined.String()) != strip(visible) {
			t.Fatalf("text changed: %q -> %q (chunks %q)", visible, joined.String(), chunks)
		}
	})
}
