package replyctl

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Limits on the parts of a conversation key. They keep the canonical string
// short enough for a URL path segment and a database primary key.
const (
	MaxBotIDLen                = 64
	MaxBusinessConnectionIDLen = 128
)

// ChatKind is the platform-neutral kind of a chat. It decides whether the
// bot's scope covers the chat and whether per-user keys apply; a transport
// maps its own chat types onto it (Telegram: private → KindDirect, group and
// supergroup → KindGroup, channel → KindChannel).
type ChatKind string

// The chat kinds.
const (
	KindDirect  ChatKind = "direct"
	KindGroup   ChatKind = "group"
	KindChannel ChatKind = "channel"
)

// Key identifies one conversation whose reply-end choice is tracked: a bot,
// the business connection it speaks through (if any), a chat, a topic thread
// within the chat (0 for none), and — in group chats when per-user keys are
// configured — the user. Two messages share a choice exactly when they share
// a Key.
type Key struct {
	BotID                string // the hub's (or the embedding bot's) id of the bot; [A-Za-z0-9_-]
	BusinessConnectionID string // Telegram business connection, "" for none
	ChatID               int64  // platform chat id; never 0
	ThreadID             int64  // topic / message thread id, 0 for none
	UserID               int64  // per-user keys in groups; 0 otherwise
}

// String returns the canonical form of k, safe as a URL path segment:
//
//	<bot>:<chat>[:t<thread>][:u<user>][:b<base64url(business connection)>]
//
// Optional parts appear only when non-zero, always in that order, so every
// key has exactly one string form (ParseKey rejects all others).
func (k Key) String() string {
	var b strings.Builder
	b.Grow(len(k.BotID) + 48)
	b.WriteString(k.BotID)
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(k.ChatID, 10))
	if k.ThreadID != 0 {
		b.WriteString(":t")
		b.WriteString(strconv.FormatInt(k.ThreadID, 10))
	}
	if k.UserID != 0 {
		b.WriteString(":u")
		b.WriteString(strconv.FormatInt(k.UserID, 10))
	}
	if k.BusinessConnectionID != "" {
		b.WriteString(":b")
		b.WriteString(base64.RawURLEncoding.EncodeToString([]byte(k.BusinessConnectionID)))
	}
	return b.String()
}

// Chat returns the key of the whole chat k belongs to (no thread, no user):
// per-chat settings such as the /controls opt-out and the language live there.
func (k Key) Chat() Key {
	return Key{BotID: k.BotID, BusinessConnectionID: k.BusinessConnectionID, ChatID: k.ChatID}
}

// Validate reports the first problem with k as an E003 error naming the
// field, so an HTTP caller learns which query parameter to fix.
func (k Key) Validate() error {
	fe := protocol.FieldErrors{}
	if !validBotID(k.BotID) {
		fe.Add("botId", "must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'")
	}
	if k.ChatID == 0 {
		fe.Add("chatId", "must be a non-zero integer chat id")
	}
	if k.ThreadID < 0 {
		fe.Add("threadId", "must be 0 (no topic) or a positive topic thread id")
	}
	if k.UserID < 0 {
		fe.Add("userId", "must be 0 (conversation-wide) or a positive user id")
	}
	if !validBusinessConnectionID(k.BusinessConnectionID) {
		fe.Add("businessConnectionId", "must be at most 128 printable ASCII characters")
	}
	return fe.Err()
}

func validBotID(s string) bool {
	if s == "" || len(s) > MaxBotIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validBusinessConnectionID(s string) bool {
	if len(s) > MaxBusinessConnectionIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// ParseKey parses the canonical string form produced by Key.String. Any other
// spelling of a key (leading zeros, "+", a "t0" part, parts out of order,
// padded base64) is rejected, so one conversation never has two names. Errors
// are E003 naming the field "key".
func ParseKey(s string) (Key, error) {
	bad := func(msg string) (Key, error) {
		e := protocol.Invalid("key", msg)
		e.NextAction = "use the conversation key exactly as Switchboard reported it, e.g. bot_x:-1001234:t42"
		return Key{}, e
	}
	if len(s) > 512 {
		return bad("too long")
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 5 {
		return bad("want <bot>:<chat>[:t<thread>][:u<user>][:b<business connection>]")
	}
	var k Key
	k.BotID = parts[0]
	chat, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return bad("chat id is not an integer")
	}
	k.ChatID = chat
	order := "tub"
	for _, p := range parts[2:] {
		if p == "" {
			return bad("empty part")
		}
		i := strings.IndexByte(order, p[0])
		if i < 0 {
			return bad("unknown part " + strconv.Quote(p[:1]) + "; want t, u or b")
		}
		order = order[i+1:] // each tag once, in order
		v := p[1:]
		switch p[0] {
		case 't', 'u':
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return bad("part " + p[:1] + " is not an integer")
			}
			if p[0] == 't' {
				k.ThreadID = n
			} else {
				k.UserID = n
			}
		case 'b':
			raw, err := base64.RawURLEncoding.Strict().DecodeString(v)
			if err != nil || len(raw) == 0 {
				return bad("business connection part is not base64url")
			}
			k.BusinessConnectionID = string(raw)
		}
	}
	if err := k.Validate(); err != nil {
		pe := protocol.AsError(err)
		return bad(pe.Message)
	}
	if k.String() != s {
		return bad("not in canonical form; expected " + k.String())
	}
	return k, nil
}

// KeyFromParams builds a key from the separate query parameters of
// `GET /v1/replyctl/bots/{bot}/policy?chatId=&threadId=&businessConnectionId=&userId=`.
// Empty optional parameters mean 0 / none. Every bad parameter is reported
// in one E003 error whose FieldErrors name the parameters.
func KeyFromParams(botID, chatID, threadID, businessConnectionID, userID string) (Key, error) {
	fe := protocol.FieldErrors{}
	k := Key{BotID: botID, BusinessConnectionID: businessConnectionID}
	num := func(field, v string, required bool) int64 {
		if v == "" {
			if required {
				fe.Add(field, "is required")
			}
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			fe.Add(field, "must be an integer")
		}
		return n
	}
	k.ChatID = num("chatId", chatID, true)
	k.ThreadID = num("threadId", threadID, false)
	k.UserID = num("userId", userID, false)
	if err := fe.Err(); err != nil {
		return Key{}, err
	}
	if err := k.Validate(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// Where says where a message was sent or received, as a transport sees it.
// A BotConfig turns it into a Key (adding the user only in group chats with
// per-user keys).
type Where struct {
	BusinessConnectionID string
	ChatID               int64
	ThreadID             int64
	Kind                 ChatKind
	UserID               int64 // the user who wrote, tapped, or whom a reply addresses; 0 if unknown
}
