package replyctl

import (
	"fmt"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

func TestParseControlsCommand(t *testing.T) {
	cases := []struct {
		text string
		ok   bool
		want ControlsCommand
	}{
		{"/controls", true, ControlsCommand{Action: "status"}},
		{"/controls off", true, ControlsCommand{Action: "off"}},
		{"  /controls   ON ", true, ControlsCommand{Action: "on"}},
		{"/controls@SwitchBot off", true, ControlsCommand{Action: "off"}},
		{"/controls@switchbot on", true, ControlsCommand{Action: "on"}},
		{"/controls@OtherBot off", false, ControlsCommand{}},
		{"/controls lang zh-TW", true, ControlsCommand{Action: "lang", Arg: "zh-TW"}},
		{"/controls lang", true, ControlsCommand{Action: "lang"}},
		{"/controls maybe", true, ControlsCommand{Action: "status"}},
		{"/controlsoff", false, ControlsCommand{}},
		{"controls off", false, ControlsCommand{}},
		{"", false, ControlsCommand{}},
		{"/start", false, ControlsCommand{}},
	}
	for _, c := range cases {
		got, ok := ParseControlsCommand(c.text, "SwitchBot")
		if ok != c.ok || got != c.want {
			t.Errorf("ParseControlsCommand(%q) = %+v, %v; want %+v, %v", c.text, got, ok, c.want, c.ok)
		}
	}
}

func TestHandleControlsCommand(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		svc := New(NewDBStore(db), Options{Clock: clock.NewFake(t0)})
		cfg := BotConfig{BotID: "bot_1"}
		en, tw := TextsFor(LocaleEN), TextsFor(LocaleZhTW)
		steps := []struct {
			cmd    ControlsCommand
			lang   string
			reply  string
			attach bool
		}{
			{ControlsCommand{Action: "status"}, "en", fmt.Sprintf(en.ControlsStatus, en.On), true},
			{ControlsCommand{Action: "off"}, "en", en.ControlsOff, false},
			{ControlsCommand{Action: "status"}, "en", fmt.Sprintf(en.ControlsStatus, en.Off), false},
			{ControlsCommand{Action: "on"}, "zh-hk", tw.ControlsOn, true},
			{ControlsCommand{Action: "lang", Arg: "tlh"}, "en", en.LocaleUnknown, true},
			{ControlsCommand{Action: "lang", Arg: "zh-tw"}, "en", fmt.Sprintf(tw.LocaleSet, LocaleZhTW), true},
			{ControlsCommand{Action: "off"}, "en", tw.ControlsOff, false}, // the chat's locale now wins
			{ControlsCommand{Action: "lang", Arg: "auto"}, "en", en.LocaleAuto, false},
		}
		for i, s := range steps {
			reply, err := svc.HandleControlsCommand(ctx, cfg, group, s.cmd, s.lang)
			if err != nil {
				t.Fatal(err)
			}
			if reply != s.reply {
				t.Fatalf("step %d: reply %q, want %q", i, reply, s.reply)
			}
			ok, _, err := svc.ShouldAttach(ctx, cfg, group)
			if err != nil || ok != s.attach {
				t.Fatalf("step %d: attach %v, want %v (%v)", i, ok, s.attach, err)
			}
		}
	})
}
