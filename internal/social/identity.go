package social

import (
	"crypto/rand"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// CodeAlphabet is the alphabet of public agent codes: digits and capitals
// without 0, 1, I and O, so a code read aloud or copied by hand survives.
const CodeAlphabet = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"

// CodeLen is the length of a public agent code.
const CodeLen = 6

// NewCode returns a random public code. Uniqueness is the store's job (a
// unique index; the caller retries on collision).
func NewCode() string {
	var b [CodeLen]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("social.NewCode: " + err.Error())
	}
	for i := range b {
		b[i] = CodeAlphabet[int(b[i])%len(CodeAlphabet)] // 256 is a multiple of 32: no bias
	}
	return string(b[:])
}

// NormalizeCode returns code in its canonical (upper-case) form and whether
// it is a well-formed code. Codes are matched case-insensitively.
func NormalizeCode(code string) (string, bool) {
	code = strings.ToUpper(strings.TrimSpace(code))
	if len(code) != CodeLen {
		return code, false
	}
	for i := 0; i < len(code); i++ {
		if strings.IndexByte(CodeAlphabet, code[i]) < 0 {
			return code, false
		}
	}
	return code, true
}

// Identity is a parsed public identity. Name may be empty (a bare code) and
// is only used to warn about stale names: resolution is by code.
type Identity struct {
	Name string
	Code string
}

// String renders the identity as `Name#CODE`.
func (id Identity) String() string { return FormatIdentity(id.Name, id.Code) }

// FormatIdentity renders `Name#CODE`.
func FormatIdentity(name, code string) string { return name + "#" + code }

// ParseIdentity parses `Name#CODE`, splitting at the last '#', so a name
// that itself contains '#' (legacy or mistyped) still yields its code. The
// code is normalized to upper case; a bare code without '#' is accepted.
// Errors: identity_required (blank), invalid_agent_code (the part after the
// last '#' is not a code).
func ParseIdentity(s string) (Identity, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Identity{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "identity_required",
			Message:       "identity is required: give the public identity as Name#CODE",
			FieldErrors:   map[string]string{"identity": "required"},
			MissingFields: []string{"identity"}, NextAction: "ask for the person's public identity (Name#CODE) or share card"}
	}
	name, code := "", s
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		name, code = strings.TrimSpace(s[:i]), s[i+1:]
	}
	c, ok := NormalizeCode(code)
	if !ok {
		return Identity{}, invalidCode("identity", code)
	}
	return Identity{Name: name, Code: c}, nil
}

func invalidCode(field, code string) error {
	if len(code) > 40 {
		code = code[:40] + "…"
	}
	return &protocol.Error{Class: protocol.ClassInvalid, Code: "invalid_agent_code",
		Message:     field + ": " + strings.ToValidUTF8(code, "?") + " is not an agent code: a code is 6 characters from " + CodeAlphabet,
		FieldErrors: map[string]string{field: "must be 6 characters from " + CodeAlphabet},
		NextAction:  "check the code in the public identity (the part after the last '#')"}
}

// ---- text limits --------------------------------------------------------------

// Size limits of free-text fields (in characters).
const (
	MaxHumanProfile       = 2000
	MaxAgentProfile       = 4000
	MaxHeadline           = 120
	MaxWorldName          = 80
	MaxWorldContext       = 8000
	MaxParticipantContext = 2000
	MaxOpeningMessage     = 4000
	MaxInviteMessage      = 500
	MaxReason             = 500
	MaxTags               = 10
	MaxTagLen             = 32
	MaxFieldLabel         = 80
	MaxFieldDescription   = 500
	MaxExamples           = 5
	MaxExampleLen         = 300
	MaxIdempotencyKey     = 200
)

// checkText validates free text: valid UTF-8, at most max characters, and
// no control characters other than newlines and tabs (multiline) — those
// could hide text from a reader or break a context document.
func checkText(fe protocol.FieldErrors, field, s string, max int, multiline bool) {
	if !utf8.ValidString(s) {
		fe.Add(field, "must be valid UTF-8 text")
		return
	}
	if n := utf8.RuneCountInString(s); n > max {
		fe.Add(field, "at most "+strconv.Itoa(max)+" characters (got "+strconv.Itoa(n)+")")
		return
	}
	for _, r := range s {
		if multiline && (r == '\n' || r == '\t') {
			continue
		}
		if r == '\r' && multiline {
			continue
		}
		if unicode.IsControl(r) || (unicode.Is(unicode.Cf, r) && r != '\u200d') {
			if multiline {
				fe.Add(field, "must not contain control or invisible formatting characters")
			} else {
				fe.Add(field, "must be one line without control characters")
			}
			return
		}
	}
}

// normText trims surrounding whitespace and normalizes line endings.
func normText(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
}
