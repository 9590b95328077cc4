// Package secrets seals the small secrets the hub must keep in its database
// and use again later — Telegram bot tokens, webhook secrets, HMAC keys —
// so that a copy of the database (a backup, a dump, a stolen SQLite file)
// does not hand them out.
//
// A Box encrypts with AES-256-GCM under a key derived with HKDF-SHA256 from
// the deployment secret: SWITCHBOARD_SECRET_KEY when the operator sets one,
// otherwise a random key generated at first start into the data directory
// (file "secret-key", mode 0600). Every sealed value is bound to a context
// string (its table, row and column), so it cannot be moved to another row
// and still open, and carries the id of the key that sealed it, so a node
// started with a different key fails with a message that says so.
//
// Sealed form: "v1.<key id>.<base64url(nonce || ciphertext)>".
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MinSecretLen is the shortest deployment secret accepted. HKDF stretches
// it into a key, but it cannot add entropy that is not there.
const MinSecretLen = 16

// KeyFileName is the file in the data directory that holds the generated
// deployment secret when none is configured.
const KeyFileName = "secret-key"

const (
	version   = "v1"
	sealInfo  = "switchboard secrets v1 seal"
	keyIDInfo = "switchboard secrets v1 key id"
)

// Box seals and opens secrets with one deployment secret. It is safe for
// concurrent use.
type Box struct {
	aead cipher.AEAD
	id   string
}

// New derives a Box from the deployment secret.
func New(secret []byte) (*Box, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("secrets: the secret key must be at least %d bytes", MinSecretLen)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, sealInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("secrets: derive key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	idKey, err := hkdf.Key(sha256.New, secret, nil, keyIDInfo, 6)
	if err != nil {
		return nil, fmt.Errorf("secrets: derive key id: %w", err)
	}
	return &Box{aead: aead, id: hex.EncodeToString(idKey)}, nil
}

// KeyID names the key (12 hex characters) without revealing it, so logs
// and errors can say which key sealed a value.
func (b *Box) KeyID() string { return b.id }

// Seal encrypts plain bound to context (e.g. "telegram_bots/bot_x/token").
func (b *Box) Seal(plain []byte, context string) string {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic("secrets: no randomness: " + err.Error()) // crypto/rand does not fail on supported platforms
	}
	sealed := b.aead.Seal(nonce, nonce, plain, b.aad(context))
	return version + "." + b.id + "." + base64.RawURLEncoding.EncodeToString(sealed)
}

// ErrWrongKey means a value was sealed with another deployment secret.
var ErrWrongKey = errors.New("secrets: sealed with a different secret key")

// ErrCorrupt means a sealed value is malformed, was altered, or belongs to
// another context.
var ErrCorrupt = errors.New("secrets: sealed value is corrupt or belongs elsewhere")

// Open decrypts a value sealed by Seal with the same context. Errors wrap
// ErrWrongKey (with both key ids) or ErrCorrupt.
func (b *Box) Open(sealed, context string) ([]byte, error) {
	parts := strings.SplitN(sealed, ".", 3)
	if len(parts) != 3 || parts[0] != version {
		return nil, ErrCorrupt
	}
	if parts[1] != b.id {
		return nil, fmt.Errorf("%w: the value was sealed with key %s, this hub has key %s", ErrWrongKey, parts[1], b.id)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil || len(raw) < b.aead.NonceSize()+b.aead.Overhead() {
		return nil, ErrCorrupt
	}
	ns := b.aead.NonceSize()
	plain, err := b.aead.Open(nil, raw[:ns], raw[ns:], b.aad(context))
	if err != nil {
		return nil, ErrCorrupt
	}
	return plain, nil
}

func (b *Box) aad(context string) []byte { return []byte(version + "\x00" + context) }

// LoadKey returns the deployment secret: configured when non-empty (the
// operator's SWITCHBOARD_SECRET_KEY), else the contents of
// <dataDir>/secret-key, generated (32 random bytes, base64, mode 0600) on
// first use. created reports a freshly generated key. Nodes sharing one
// PostgreSQL database must be given the same configured secret.
func LoadKey(dataDir, configured string) (secret []byte, created bool, err error) {
	if configured != "" {
		if len(configured) < MinSecretLen {
			return nil, false, fmt.Errorf("secrets: SWITCHBOARD_SECRET_KEY must be at least %d characters", MinSecretLen)
		}
		return []byte(configured), false, nil
	}
	path := filepath.Join(dataDir, KeyFileName)
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if len(s) < MinSecretLen {
			return nil, false, fmt.Errorf("secrets: %s holds fewer than %d characters; restore it from a backup or set SWITCHBOARD_SECRET_KEY", path, MinSecretLen)
		}
		return []byte(s), false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("secrets: read %s: %w", path, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, false, fmt.Errorf("secrets: generate key: %w", err)
	}
	s := base64.RawURLEncoding.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return LoadKey(dataDir, "") // another process won the race
		}
		return nil, false, fmt.Errorf("secrets: create %s: %w", path, err)
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("secrets: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("secrets: write %s: %w", path, err)
	}
	return []byte(s), true, nil
}
