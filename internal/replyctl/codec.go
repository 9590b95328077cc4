package replyctl

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// MaxCallbackData is Telegram's limit on an inline button's callback data.
const MaxCallbackData = 64

// Namespace is the prefix of every callback data string this package owns,
// without its version number. Data that does not start with Namespace,
// digits and ':' belongs to someone else and is passed through untouched.
const Namespace = "rec"

// CodecVersion is the version written by Encode ("rec1:...").
const CodecVersion = 1

// tagBytes is how much of the HMAC-SHA256 is kept: 96 bits is far beyond
// what an attacker can guess within a button's lifetime, and its base64url
// form (16 characters) keeps the data well under 64 bytes.
const tagBytes = 12

// Nonce length limits: Encode refuses anything else, Decode calls it malformed.
const (
	minNonceLen = 8
	maxNonceLen = 32
)

// Action is what a button asks for.
type Action byte

// The button actions. ActionNone rides on resolved (inert) buttons: a tap on
// one is answered from the stored state and never changes it.
const (
	ActionContinue Action = 'c'
	ActionStop     Action = 's'
	ActionNone     Action = 'n'
)

// Choice is the choice an action makes ("" for ActionNone).
func (a Action) Choice() Choice {
	switch a {
	case ActionContinue:
		return ChoiceContinue
	case ActionStop:
		return ChoiceStop
	}
	return ""
}

func (a Action) valid() bool {
	return a == ActionContinue || a == ActionStop || a == ActionNone
}

// Verdict is how Decode judged a callback data string. The transport acts on
// it: NotOurs → leave the callback to whoever else owns it; Malformed and
// BadSignature → answer the callback ("invalid") and change nothing; OK →
// hand the Callback to the Service.
type Verdict int

// The verdicts, from "not ours" to "verified".
const (
	NotOurs Verdict = iota
	Malformed
	BadSignature
	OK
)

// String names the verdict for logs and metrics labels.
func (v Verdict) String() string {
	switch v {
	case NotOurs:
		return "not_ours"
	case Malformed:
		return "malformed"
	case BadSignature:
		return "bad_signature"
	case OK:
		return "ok"
	}
	return "unknown"
}

// Callback is decoded callback data.
type Callback struct {
	Version int
	Action  Action
	Nonce   string
	Signed  bool // a tag was present and verified
}

// Codec encodes and decodes the callback data of one bot:
//
//	rec1:<action>:<nonce>[:<tag>]
//
// where action is c (continue), s (stop) or n (inert), nonce is 8-32
// characters of [0-9a-z], and tag is base64url(HMAC-SHA256(key,
// "rec1:<bot id>:<action>:<nonce>")[:12]). With keys set, every encoded
// datum carries a tag and Decode rejects data without a valid one; the bot id
// inside the MAC keeps data minted for one bot from verifying at another
// even if they share a key. With no keys, data is unsigned and the nonce
// store alone authenticates a tap (an unguessable nonce bound to its chat).
type Codec struct {
	BotID string
	// Keys are HMAC keys; the first signs, any verifies (for rotation).
	Keys [][]byte
}

// Encode returns the callback data for action on the reply identified by
// nonce. It fails if the nonce is not well-formed or the result would exceed
// Telegram's 64-byte limit, so a bad button never reaches the platform.
func (c Codec) Encode(action Action, nonce string) (string, error) {
	if !action.valid() {
		return "", protocol.Invalid("action", fmt.Sprintf("unknown action %q; want c, s or n", byte(action)))
	}
	if !validNonce(nonce) {
		return "", protocol.Invalid("nonce", fmt.Sprintf("must be %d-%d characters of 0-9 and a-z", minNonceLen, maxNonceLen))
	}
	body := Namespace + strconv.Itoa(CodecVersion) + ":" + string(action) + ":" + nonce
	if len(c.Keys) > 0 {
		body += ":" + c.tag(c.Keys[0], action, nonce)
	}
	if len(body) > MaxCallbackData {
		return "", protocol.Invalid("callbackData", fmt.Sprintf("%d bytes exceeds the %d-byte limit", len(body), MaxCallbackData))
	}
	return body, nil
}

// Decode judges data and, when it is OK, returns what it asks for. It never
// panics and reads at most the first few hundred bytes of hostile input.
func (c Codec) Decode(data string) (Callback, Verdict) {
	rest, ok := strings.CutPrefix(data, Namespace)
	if !ok {
		return Callback{}, NotOurs
	}
	i := 0
	for i < len(rest) && i < 10 && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(rest) || rest[i] != ':' {
		return Callback{}, NotOurs // "recent...", "rec:", "rec1x": not our namespace
	}
	// From here on the data claims to be ours; anything wrong is Malformed.
	if len(data) > MaxCallbackData {
		return Callback{}, Malformed
	}
	if rest[:i] != strconv.Itoa(CodecVersion) {
		return Callback{}, Malformed // another (future or bogus) version
	}
	parts := strings.Split(rest[i+1:], ":")
	if len(parts) != 2 && len(parts) != 3 {
		return Callback{}, Malformed
	}
	if len(parts[0]) != 1 || !Action(parts[0][0]).valid() || !validNonce(parts[1]) {
		return Callback{}, Malformed
	}
	cb := Callback{Version: CodecVersion, Action: Action(parts[0][0]), Nonce: parts[1]}
	if len(parts) == 3 {
		if len(parts[2]) != base64.RawURLEncoding.EncodedLen(tagBytes) {
			return Callback{}, Malformed
		}
		if len(c.Keys) == 0 {
			// Signed by a key since removed: the nonce store still authenticates it.
			return cb, OK
		}
		for _, k := range c.Keys {
			if hmac.Equal([]byte(parts[2]), []byte(c.tag(k, cb.Action, cb.Nonce))) {
				cb.Signed = true
				return cb, OK
			}
		}
		return Callback{}, BadSignature
	}
	if len(c.Keys) > 0 {
		return Callback{}, BadSignature // signing is on: an untagged datum is forged or stale
	}
	return cb, OK
}

func (c Codec) tag(key []byte, action Action, nonce string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(Namespace + strconv.Itoa(CodecVersion) + ":" + c.BotID + ":" + string(action) + ":" + nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:tagBytes])
}

func validNonce(s string) bool {
	if len(s) < minNonceLen || len(s) > maxNonceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// newNonce returns a fresh unguessable nonce: 12 random bytes (96 bits) in
// 20 characters of Crockford base32.
func newNonce() string { return protocol.RandomToken("", 12) }
