package replyctl

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatchLocale(t *testing.T) {
	cases := map[string]Locale{
		"":            LocaleEN,
		"en":          LocaleEN,
		"en-US":       LocaleEN,
		"de":          LocaleEN,
		"zhx":         LocaleEN,
		"zh":          LocaleZhCN,
		"zh-cn":       LocaleZhCN,
		"zh-CN":       LocaleZhCN,
		"zh_SG":       LocaleZhCN,
		"zh-hans":     LocaleZhCN,
		"zh-Hans-HK":  LocaleZhCN,
		"zh-hant":     LocaleZhTW,
		"zh-Hant-CN":  LocaleZhTW,
		"zh-tw":       LocaleZhTW,
		"zh-TW":       LocaleZhTW,
		"zh-hk":       LocaleZhTW,
		"zh-MO":       LocaleZhTW,
		" zh-hant ":   LocaleZhTW,
		"zh-yue":      LocaleZhCN,
		"pt-br":       LocaleEN,
		"zh-" + "tw!": LocaleZhCN,
	}
	for code, want := range cases {
		if got := MatchLocale(code); got != want {
			t.Errorf("MatchLocale(%q) = %s, want %s", code, got, want)
		}
	}
}

func TestParseLocale(t *testing.T) {
	for in, want := range map[string]Locale{"en": LocaleEN, "zh-TW": LocaleZhTW, "zh_tw": LocaleZhTW, "ZH-CN": LocaleZhCN, "zh-hant": LocaleZhTW, "en-GB": LocaleEN} {
		if got, ok := ParseLocale(in); !ok || got != want {
			t.Errorf("ParseLocale(%q) = %s, %v; want %s", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "fr", "klingon"} {
		if got, ok := ParseLocale(in); ok {
			t.Errorf("ParseLocale(%q) = %s, want not ok", in, got)
		}
	}
}

func TestResolveLocale(t *testing.T) {
	cases := []struct {
		chat Locale
		lang string
		def  Locale
		want Locale
	}{
		{"", "", "", LocaleEN},
		{"", "", LocaleZhTW, LocaleZhTW},
		{"", "zh-hk", LocaleZhCN, LocaleZhTW},
		{LocaleZhCN, "zh-hk", LocaleEN, LocaleZhCN},
		{"bogus", "en", LocaleZhTW, LocaleEN},
	}
	for _, c := range cases {
		if got := ResolveLocale(c.chat, c.lang, c.def); got != c.want {
			t.Errorf("ResolveLocale(%q, %q, %q) = %s, want %s", c.chat, c.lang, c.def, got, c.want)
		}
	}
}

// Every locale fills every string, within Telegram's limits, with the
// placeholders the callers format.
func TestTextsComplete(t *testing.T) {
	for _, l := range Locales {
		v := reflect.ValueOf(TextsFor(l))
		for i := 0; i < v.NumField(); i++ {
			name, s := v.Type().Field(i).Name, v.Field(i).String()
			if s == "" {
				t.Errorf("%s.%s is empty", l, name)
			}
			if strings.HasPrefix(name, "Toast") && utf8.RuneCountInString(s) > 200 {
				t.Errorf("%s.%s is longer than 200 characters", l, name)
			}
			wantPct := name == "ControlsStatus" || name == "LocaleSet"
			if strings.Contains(s, "%s") != wantPct {
				t.Errorf("%s.%s: %%s placeholder present=%v, want %v", l, name, !wantPct, wantPct)
			}
		}
	}
	if tw := TextsFor(LocaleZhTW); tw.Continue != "A. 繼續" || tw.Stop != "B. 就這樣吧，不需要額外處理" {
		t.Errorf("zh-TW labels = %q / %q", tw.Continue, tw.Stop)
	}
	if en := TextsFor("xx"); en != TextsFor(LocaleEN) {
		t.Error("unknown locale must fall back to English")
	}
}

func FuzzMatchLocale(f *testing.F) {
	for _, s := range []string{"zh-hant", "en", "", "zh-" + strings.Repeat("x-", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := MatchLocale(s)
		if _, ok := texts[l]; !ok {
			t.Fatalf("MatchLocale(%q) = %q, not a supported locale", s, l)
		}
	})
}
