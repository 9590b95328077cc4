package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustBox(t testing.TB, secret string) *Box {
	t.Helper()
	b, err := New([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSealOpenRoundTrip(t *testing.T) {
	b := mustBox(t, "a deployment secret of some length")
	plain := []byte("7000000001:AAFxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
	s1 := b.Seal(plain, "telegram_bots/bot_1/token")
	s2 := b.Seal(plain, "telegram_bots/bot_1/token")
	if s1 == s2 {
		t.Fatal("two seals of the same value must differ (fresh nonce)")
	}
	if strings.Contains(s1, "AAFx") {
		t.Fatal("sealed value leaks the plaintext")
	}
	if !strings.HasPrefix(s1, "v1."+b.KeyID()+".") {
		t.Fatalf("sealed form %q", s1)
	}
	got, err := b.Open(s1, "telegram_bots/bot_1/token")
	if err != nil || string(got) != string(plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	b := mustBox(t, "a deployment secret of some length")
	other := mustBox(t, "another deployment secret entirely")
	if b.KeyID() == other.KeyID() {
		t.Fatal("different secrets must have different key ids")
	}
	sealed := b.Seal([]byte("token"), "telegram_bots/bot_1/token")
	flip := []byte(sealed)
	flip[len(flip)-3] ^= 1
	cases := []struct {
		name    string
		box     *Box
		sealed  string
		context string
		want    error
	}{
		{"other key", other, sealed, "telegram_bots/bot_1/token", ErrWrongKey},
		{"other row", b, sealed, "telegram_bots/bot_2/token", ErrCorrupt},
		{"other column", b, sealed, "telegram_bots/bot_1/webhook_secret", ErrCorrupt},
		{"altered", b, string(flip), "telegram_bots/bot_1/token", ErrCorrupt},
		{"truncated", b, sealed[:len(sealed)-4], "telegram_bots/bot_1/token", ErrCorrupt},
		{"empty", b, "", "x", ErrCorrupt},
		{"plaintext", b, "7000000001:AAF", "x", ErrCorrupt},
		{"other version", b, "v2" + sealed[2:], "telegram_bots/bot_1/token", ErrCorrupt},
		{"padded base64", b, sealed + "==", "telegram_bots/bot_1/token", ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.box.Open(c.sealed, c.context)
			if !errors.Is(err, c.want) || got != nil {
				t.Fatalf("Open = %q, %v; want %v", got, err, c.want)
			}
		})
	}
	if _, err := other.Open(sealed, "telegram_bots/bot_1/token"); !strings.Contains(err.Error(), b.KeyID()) || !strings.Contains(err.Error(), other.KeyID()) {
		t.Fatalf("wrong-key error should name both key ids: %v", err)
	}
}

func TestNewRefusesShortSecret(t *testing.T) {
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("a 5-byte secret must be refused")
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := LoadKey(dir, "too short"); err == nil {
		t.Fatal("a short configured key must be refused")
	}
	k, created, err := LoadKey(dir, "configured secret value")
	if err != nil || created || string(k) != "configured secret value" {
		t.Fatalf("configured: %q %v %v", k, created, err)
	}
	if _, err := os.Stat(filepath.Join(dir, KeyFileName)); !os.IsNotExist(err) {
		t.Fatal("a configured key must not create the key file")
	}

	k1, created, err := LoadKey(dir, "")
	if err != nil || !created || len(k1) < MinSecretLen {
		t.Fatalf("generated: %q %v %v", k1, created, err)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	k2, created, err := LoadKey(dir, "")
	if err != nil || created || string(k2) != string(k1) {
		t.Fatalf("second load: %q %v %v", k2, created, err)
	}

	if err := os.WriteFile(filepath.Join(dir, KeyFileName), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadKey(dir, ""); err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_SECRET_KEY") {
		t.Fatalf("damaged key file: %v", err)
	}
}

// FuzzOpen feeds arbitrary stored values to Open: it must never panic and
// never accept anything Seal did not produce for that context.
func FuzzOpen(f *testing.F) {
	b := mustBox(f, "a deployment secret of some length")
	f.Add(b.Seal([]byte("token"), "ctx"), "ctx")
	f.Add("v1."+b.KeyID()+".AAAA", "ctx")
	f.Add("v1..", "")
	f.Fuzz(func(t *testing.T, sealed, context string) {
		plain, err := b.Open(sealed, context)
		if err == nil && string(plain) != "token" {
			t.Fatalf("Open accepted %q as %q", sealed, plain)
		}
	})
}
