package replyctl

import (
	"context"
	"fmt"
	"strings"
)

// ControlsCommand is a parsed "/controls" chat command.
type ControlsCommand struct {
	Action string // "status", "on", "off" or "lang"
	Arg    string // for "lang": the requested locale, or "auto"
}

// ParseControlsCommand recognizes the chat command that opts a chat out of
// (or back into) the controls and sets their language:
//
//	/controls            → status
//	/controls on|off     → switch
//	/controls lang <l>   → en, zh-TW, zh-CN or auto
//
// "/controls@OtherBot ..." is someone else's command: ok is false. Any other
// argument is answered with the status (which explains the usage).
func ParseControlsCommand(text, botUsername string) (ControlsCommand, bool) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return ControlsCommand{}, false
	}
	cmd, target, hasTarget := strings.Cut(fields[0], "@")
	if !strings.EqualFold(cmd, "/controls") {
		return ControlsCommand{}, false
	}
	if hasTarget && !strings.EqualFold(target, botUsername) {
		return ControlsCommand{}, false
	}
	if len(fields) < 2 {
		return ControlsCommand{Action: "status"}, true
	}
	switch a := strings.ToLower(fields[1]); a {
	case "on", "off":
		return ControlsCommand{Action: a}, true
	case "lang", "language":
		c := ControlsCommand{Action: "lang"}
		if len(fields) > 2 {
			c.Arg = fields[2]
		}
		return c, true
	}
	return ControlsCommand{Action: "status"}, true
}

// HandleControlsCommand applies cmd to the chat at w and returns the text
// to answer with, in the chat's language. Whether a group member may run it
// (e.g. only admins) is the transport's call.
func (s *Service) HandleControlsCommand(ctx context.Context, cfg BotConfig, w Where, cmd ControlsCommand, languageCode string) (string, error) {
	key := cfg.KeyOf(w)
	cs, err := s.ChatSettings(ctx, key)
	if err != nil {
		return "", err
	}
	t := TextsFor(ResolveLocale(cs.Locale, languageCode, cfg.DefaultLocale))
	switch cmd.Action {
	case "on", "off":
		if err := s.SetChatControls(ctx, key, cmd.Action == "on"); err != nil {
			return "", err
		}
		if cmd.Action == "on" {
			return t.ControlsOn, nil
		}
		return t.ControlsOff, nil
	case "lang":
		if strings.EqualFold(cmd.Arg, "auto") {
			if err := s.SetChatLocale(ctx, key, ""); err != nil {
				return "", err
			}
			return TextsFor(ResolveLocale("", languageCode, cfg.DefaultLocale)).LocaleAuto, nil
		}
		l, ok := ParseLocale(cmd.Arg)
		if !ok {
			return t.LocaleUnknown, nil
		}
		if err := s.SetChatLocale(ctx, key, l); err != nil {
			return "", err
		}
		return fmt.Sprintf(TextsFor(l).LocaleSet, l), nil
	}
	on, _ := ShouldAttach(cfg.Scope, w.Kind, cs.Controls, true)
	state := t.Off
	if on {
		state = t.On
	}
	return fmt.Sprintf(t.ControlsStatus, state), nil
}
