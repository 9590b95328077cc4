package protocol

import (
	"crypto/rand"
	"strings"

	"github.com/google/uuid"
)

// Id prefixes: every id the hub mints says what it names and sorts by
// creation time (UUIDv7 underneath), which keeps indexes append-mostly and
// makes logs readable.
const (
	PrefixAgent     = "agt_"
	PrefixMessage   = "msg_"
	PrefixDelivery  = "dlv_"
	PrefixTrace     = "trc_"
	PrefixWorld     = "wld_"
	PrefixRequest   = "req_"
	PrefixRun       = "run_"
	PrefixInvite    = "inv_"
	PrefixMember    = "mem_"
	PrefixNotice    = "ntf_"
	PrefixTurn      = "trn_"
	PrefixReport    = "rpt_"
	PrefixBot       = "bot_"
	PrefixCaller    = "clr_"
	PrefixTask      = "tsk_"
	PrefixRequestID = "rid_"
)

// crockford is Crockford's base32 alphabet in lower case: no i, l, o, u, so
// ids survive being read aloud or typed.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// NewID returns prefix + 26 characters of Crockford base32 encoding a fresh
// UUIDv7: unique, and lexically sortable by creation time.
func NewID(prefix string) string {
	u, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only if the system randomness source fails.
		panic("protocol.NewID: " + err.Error())
	}
	return prefix + encodeBase32(u[:], 2)
}

// encodeBase32 writes b as Crockford base32, most significant bits first.
// lead zero bits are prepended so that a 16-byte UUID (128 bits + 2) encodes to
// exactly 26 characters; a trailing partial group is zero-padded.
func encodeBase32(b []byte, lead int) string {
	var sb strings.Builder
	sb.Grow((len(b)*8+lead)/5 + 1)
	var acc uint64
	bits := lead
	for _, c := range b {
		acc = acc<<8 | uint64(c)
		bits += 8
		for bits >= 5 {
			bits -= 5
			sb.WriteByte(crockford[(acc>>uint(bits))&31])
		}
	}
	if bits > 0 {
		sb.WriteByte(crockford[(acc<<uint(5-bits))&31])
	}
	return sb.String()
}

// RandomToken returns a URL-safe secret of n random bytes, base32-encoded,
// with the given prefix. Used for agent tokens, invite codes and nonces.
func RandomToken(prefix string, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("protocol.RandomToken: " + err.Error())
	}
	return prefix + encodeBase32(b, 0)
}
