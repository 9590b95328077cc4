package tgfake

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseText(t *testing.T) {
	cases := []struct {
		mode, in, want, err string
	}{
		{"", "plain *text*", "plain *text*", ""},
		{"HTML", "<b>bold</b> &amp; <a href=\"https://x.y\">link</a> &#x1F600;", "bold & link 😀", ""},
		{"HTML", "<span class=\"tg-spoiler\">s</span>", "s", ""},
		{"HTML", "<b><i>x</b></i>", "", "Unmatched end tag at byte offset 7, expected \"</i>\", found \"</b>\""},
		{"HTML", "<br>", "", "Unsupported start tag \"br\" at byte offset 0"},
		{"HTML", "a < b", "", "Unclosed start tag"},
		{"MarkdownV2", "*bold* _it_ __u__ ~s~ ||sp|| `c` [t](https://x.y/\\)) \\.", "bold it u s sp c t .", ""},
		{"MarkdownV2", "```go\nfmt.Println(1)\n```", "fmt.Println(1)\n", ""},
		{"MarkdownV2", "*open", "", "Can't find end of Bold entity at byte offset 0"},
		{"MarkdownV2", "```\ncode", "", "Can't find end of Pre entity at byte offset 0"},
		{"MarkdownV2", "1+1", "", "Character '+' is reserved"},
		{"MarkdownV2", ">quote\n>more", "quote\nmore", ""},
		{"Markdown", "*b* _i_ `c` [t](u) ```\npre```", "b i c t pre", ""},
		{"Markdown", "*open", "", "Can't find end of the entity starting at byte offset 0"},
	}
	for _, tc := range cases {
		got, err := parseText(tc.in, tc.mode)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "Bad Request: can't parse entities: ") {
				t.Errorf("%s %q: err = %v, want %q", tc.mode, tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %q = %q, %v; want %q", tc.mode, tc.in, got, err, tc.want)
		}
	}
}

func TestUTF16Len(t *testing.T) {
	for in, want := range map[string]int{"": 0, "abc": 3, "é": 1, "繼續": 2, "😀": 2, "👍🏽": 4} {
		if got := utf16Len(in); got != want {
			t.Errorf("utf16Len(%q) = %d, want %d", in, got, want)
		}
	}
}

func FuzzParseText(f *testing.F) {
	for _, s := range []string{"<b>x</b>", "*a* \\. `c`", "```go\nx\n```", "[a](b)", "&amp;&#128512;", "<a href='x'>y"} {
		f.Add(s, "HTML")
		f.Add(s, "MarkdownV2")
		f.Add(s, "Markdown")
	}
	f.Fuzz(func(t *testing.T, text, mode string) {
		visible, err := parseText(text, mode)
		if err != nil {
			if _, ok := err.(*apiError); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if utf8.ValidString(text) && !utf8.ValidString(visible) {
			t.Fatalf("valid input produced invalid visible text %q", visible)
		}
	})
}

func FuzzParseReplyMarkup(f *testing.F) {
	f.Add(twoButtons, false)
	f.Add(`{"inline_keyboard":[[{"text":"a","url":"https://x"}]]}`, true)
	f.Add(`{"keyboard":[["a"]]}`, false)
	f.Add(`{"inline_keyboard":[[{"text":"a","callback_data":"x","url":"y"}]]}`, true)
	f.Add(`{"inline_keyboard":[[]]}`, true)
	f.Fuzz(func(t *testing.T, raw string, inlineOnly bool) {
		kb, err := parseReplyMarkup(raw, inlineOnly)
		if err != nil {
			if kb != nil || !strings.HasPrefix(err.desc, "Bad Request: ") || err.code != 400 {
				t.Fatalf("bad failure: %v %+v", kb, err)
			}
			return
		}
		for _, row := range kb {
			for _, b := range row {
				actions := 0
				if b.CallbackData != "" {
					actions++
					if len(b.CallbackData) > 64 {
						t.Fatalf("accepted %d-byte callback data", len(b.CallbackData))
					}
				}
				if b.URL != "" {
					actions++
				}
				if b.Disabled {
					actions++
				}
				if b.Other != "" {
					actions++
				}
				if actions != 1 {
					t.Fatalf("button with %d actions accepted: %+v", actions, b)
				}
			}
		}
	})
}
