package replyctl

import "strings"

// Locale names one entry of the label/toast table.
type Locale string

// The supported locales. LocaleEN is the fallback for everything else.
const (
	LocaleEN   Locale = "en"
	LocaleZhTW Locale = "zh-TW"
	LocaleZhCN Locale = "zh-CN"
)

// Locales lists the supported locales in a stable order (for validation
// messages and tests).
var Locales = []Locale{LocaleEN, LocaleZhTW, LocaleZhCN}

// Texts are the user-visible strings of one locale: the two button labels,
// the labels a resolved keyboard shows, and the toasts answering a tap (at
// most 200 characters each, Telegram's limit for answerCallbackQuery).
type Texts struct {
	Continue         string // button A
	Stop             string // button B
	ResolvedContinue string // inert button shown after Continue was chosen
	ResolvedStop     string // inert button shown after Stop was chosen

	ToastContinue      string // the tap recorded Continue
	ToastStop          string // the tap recorded Stop
	ToastAlreadyChosen string // a repeat tap on a reply whose choice is already recorded
	ToastNotCurrent    string // a tap on a reply that a newer reply or a typed message replaced
	ToastNotForYou     string // a tap by someone the reply does not address
	ToastExpired       string // a tap after the buttons' lifetime
	ToastInvalid       string // data that does not verify

	ControlsOn     string // answer to "/controls on"
	ControlsOff    string // answer to "/controls off"
	ControlsStatus string // "/controls" status; %s is replaced by On or Off
	On, Off        string
	LocaleSet      string // "/controls lang X"; %s is replaced by the locale name
	LocaleAuto     string // "/controls lang auto"
	LocaleUnknown  string // "/controls lang" with an unsupported value
}

var texts = map[Locale]Texts{
	LocaleEN: {
		Continue:           "A. Continue",
		Stop:               "B. Stop here, no further action needed",
		ResolvedContinue:   "✓ Continue",
		ResolvedStop:       "✓ Stopped here",
		ToastContinue:      "Got it: continuing.",
		ToastStop:          "Got it: stopping here, nothing more needed.",
		ToastAlreadyChosen: "You already chose for this reply.",
		ToastNotCurrent:    "This reply is no longer current.",
		ToastNotForYou:     "These buttons are for the person this reply answers.",
		ToastExpired:       "These buttons have expired.",
		ToastInvalid:       "This button is not valid.",
		ControlsOn:         "Reply controls are on for this chat.",
		ControlsOff:        "Reply controls are off for this chat. Send /controls on to bring them back.",
		ControlsStatus:     "Reply controls: %s. Use /controls on or /controls off.",
		On:                 "on",
		Off:                "off",
		LocaleSet:          "Reply controls will use %s.",
		LocaleAuto:         "Reply controls follow each user's language.",
		LocaleUnknown:      "Unknown language. Use /controls lang en, zh-TW, zh-CN or auto.",
	},
	LocaleZhTW: {
		Continue:           "A. 繼續",
		Stop:               "B. 就這樣吧，不需要額外處理",
		ResolvedContinue:   "✓ 繼續",
		ResolvedStop:       "✓ 就這樣吧",
		ToastContinue:      "好的，繼續。",
		ToastStop:          "好的，就到這裡，不再額外處理。",
		ToastAlreadyChosen: "這則回覆已經選過了。",
		ToastNotCurrent:    "這則回覆已不是最新的。",
		ToastNotForYou:     "這些按鈕只給這則回覆的對象使用。",
		ToastExpired:       "這些按鈕已過期。",
		ToastInvalid:       "這個按鈕無效。",
		ControlsOn:         "此聊天已開啟回覆按鈕。",
		ControlsOff:        "此聊天已關閉回覆按鈕。傳送 /controls on 可重新開啟。",
		ControlsStatus:     "回覆按鈕：%s。使用 /controls on 或 /controls off。",
		On:                 "開啟",
		Off:                "關閉",
		LocaleSet:          "回覆按鈕將使用 %s。",
		LocaleAuto:         "回覆按鈕將依每位使用者的語言顯示。",
		LocaleUnknown:      "不支援的語言。請使用 /controls lang en、zh-TW、zh-CN 或 auto。",
	},
	LocaleZhCN: {
		Continue:           "A. 继续",
		Stop:               "B. 就这样吧，不需要额外处理",
		ResolvedContinue:   "✓ 继续",
		ResolvedStop:       "✓ 就这样吧",
		ToastContinue:      "好的，继续。",
		ToastStop:          "好的，就到这里，不再额外处理。",
		ToastAlreadyChosen: "这条回复已经选过了。",
		ToastNotCurrent:    "这条回复已不是最新的。",
		ToastNotForYou:     "这些按钮只供这条回复的对象使用。",
		ToastExpired:       "这些按钮已过期。",
		ToastInvalid:       "这个按钮无效。",
		ControlsOn:         "此聊天已开启回复按钮。",
		ControlsOff:        "此聊天已关闭回复按钮。发送 /controls on 可重新开启。",
		ControlsStatus:     "回复按钮：%s。使用 /controls on 或 /controls off。",
		On:                 "开启",
		Off:                "关闭",
		LocaleSet:          "回复按钮将使用 %s。",
		LocaleAuto:         "回复按钮将按每位用户的语言显示。",
		LocaleUnknown:      "不支持的语言。请使用 /controls lang en、zh-TW、zh-CN 或 auto。",
	},
}

// TextsFor returns the table entry of l, falling back to English for an
// unknown locale so a caller always has something to show.
func TextsFor(l Locale) Texts {
	if t, ok := texts[l]; ok {
		return t
	}
	return texts[LocaleEN]
}

// ParseLocale accepts a per-chat locale setting: one of the supported
// locale names (case-insensitive, '_' or '-'), or anything MatchLocale
// understands. ok is false when the value names no supported locale, so a
// "/controls lang xx" can be refused instead of silently becoming English.
func ParseLocale(s string) (Locale, bool) {
	n := normLang(s)
	for _, l := range Locales {
		if n == strings.ToLower(string(l)) {
			return l, true
		}
	}
	l := MatchLocale(s)
	if l == LocaleEN && !strings.HasPrefix(n, "en") {
		return "", false
	}
	return l, true
}

// MatchLocale maps a user's language code (Telegram's IETF tag, e.g. "en",
// "zh-hans", "zh-TW", "pt-br") to a supported locale:
//
//   - Traditional Chinese — zh-hant*, zh-tw, zh-hk, zh-mo (and zh-*-tw/hk/mo) → zh-TW
//   - other Chinese — zh, zh-cn, zh-sg, zh-hans* → zh-CN
//   - everything else → en
func MatchLocale(languageCode string) Locale {
	n := normLang(languageCode)
	if n != "zh" && !strings.HasPrefix(n, "zh-") {
		return LocaleEN
	}
	for _, sub := range strings.Split(n, "-")[1:] {
		switch sub {
		case "hant", "tw", "hk", "mo":
			return LocaleZhTW
		case "hans", "cn", "sg":
			return LocaleZhCN
		}
	}
	return LocaleZhCN
}

func normLang(s string) string {
	if len(s) > 35 { // longest sensible BCP 47 tag
		s = s[:35]
	}
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "_", "-"))
}

// ResolveLocale picks the locale for a chat: the chat's own setting wins,
// then the user's language code, then the bot's default, then English.
func ResolveLocale(chatSetting Locale, languageCode string, botDefault Locale) Locale {
	if _, ok := texts[chatSetting]; ok {
		return chatSetting
	}
	if languageCode != "" {
		return MatchLocale(languageCode)
	}
	if _, ok := texts[botDefault]; ok {
		return botDefault
	}
	return LocaleEN
}
