package replyctl

import (
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// DefaultTTL is how long buttons stay tappable and how long a choice
// governs the policy when a BotConfig leaves the TTLs at zero.
const DefaultTTL = 24 * time.Hour

// ResolveMode is how a keyboard looks once its reply's choice is recorded.
// Keyboards resolved any other way (superseded by a newer reply, overridden
// by a typed message, expired) are always removed.
type ResolveMode string

// The resolve modes.
const (
	// ResolveMark replaces the two buttons with one inert button naming the
	// choice ("✓ Continue"). The default.
	ResolveMark ResolveMode = "mark"
	// ResolveDisable keeps both labels, marks the chosen one with "✓ " and
	// makes both inert.
	ResolveDisable ResolveMode = "disable"
	// ResolveRemove removes the keyboard.
	ResolveRemove ResolveMode = "remove"
)

// BotConfig is one bot's reply-end settings. The hub keeps it with the bot;
// an embedding bot builds it once. Zero values pick the defaults.
type BotConfig struct {
	BotID string
	Scope Scope // which chats get controls; "" means all
	// PerUserInGroups gives each user of a group chat their own conversation
	// (and choice); otherwise the whole chat (topic) shares one.
	PerUserInGroups bool
	// AdminsMayChoose lets chat administrators choose on a reply addressed
	// to someone else.
	AdminsMayChoose bool
	NonceTTL        time.Duration // how long buttons are tappable (default DefaultTTL)
	ChoiceTTL       time.Duration // how long a choice governs the policy (default DefaultTTL)
	Keys            [][]byte      // HMAC keys for callback data; first signs, any verifies; none = unsigned
	Resolve         ResolveMode   // look of a chosen keyboard (default ResolveMark)
	DefaultLocale   Locale        // when neither the chat nor the user says (default en)
}

// Validate reports configuration mistakes as one E003 error.
func (c BotConfig) Validate() error {
	fe := protocol.FieldErrors{}
	if !validBotID(c.BotID) {
		fe.Add("botId", "must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'")
	}
	if _, err := ParseScope(string(c.Scope)); err != nil {
		fe.Add("scope", "must be one of off, dm, group, all")
	}
	if c.NonceTTL < 0 {
		fe.Add("nonceTtl", "must not be negative")
	}
	if c.ChoiceTTL < 0 {
		fe.Add("choiceTtl", "must not be negative")
	}
	switch c.Resolve {
	case "", ResolveMark, ResolveDisable, ResolveRemove:
	default:
		fe.Add("resolve", "must be one of mark, disable, remove")
	}
	for i, k := range c.Keys {
		if len(k) < 16 {
			fe.Add(fmt.Sprintf("keys[%d]", i), "an HMAC key must be at least 16 bytes")
		}
	}
	if c.DefaultLocale != "" {
		if _, ok := texts[c.DefaultLocale]; !ok {
			fe.Add("defaultLocale", "must be one of en, zh-TW, zh-CN")
		}
	}
	return fe.Err()
}

func (c BotConfig) nonceTTL() time.Duration {
	if c.NonceTTL <= 0 {
		return DefaultTTL
	}
	return c.NonceTTL
}

func (c BotConfig) choiceTTL() time.Duration {
	if c.ChoiceTTL <= 0 {
		return DefaultTTL
	}
	return c.ChoiceTTL
}

// KeyOf is the conversation a message at w belongs to. The user becomes
// part of the key only in group chats with PerUserInGroups.
func (c BotConfig) KeyOf(w Where) Key {
	k := Key{BotID: c.BotID, BusinessConnectionID: w.BusinessConnectionID, ChatID: w.ChatID, ThreadID: w.ThreadID}
	if c.PerUserInGroups && w.Kind == KindGroup {
		k.UserID = w.UserID
	}
	return k
}

// Codec is the callback data codec of this bot.
func (c BotConfig) Codec() Codec { return Codec{BotID: c.BotID, Keys: c.Keys} }
