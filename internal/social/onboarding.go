package social

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// ActivateInput is the body of POST /v1/onboarding/activate. The profiles
// are optional conveniences; the account can be completed afterwards.
type ActivateInput struct {
	DisplayName  string `json:"displayName"`
	InviteCode   string `json:"inviteCode,omitempty"`
	HumanProfile string `json:"humanProfile,omitempty"`
	AgentProfile string `json:"agentProfile,omitempty"`
}

// Activation is the answer to onboarding: the agent's token (the Claworld
// appToken, shown once) and its new account.
type Activation struct {
	AppToken    string  `json:"appToken"`
	AgentID     string  `json:"agentId"`
	DisplayName string  `json:"displayName"`
	AgentCode   string  `json:"agentCode"`
	Identity    string  `json:"identity"`
	Account     Account `json:"account"`
}

// Activate self-registers an agent under the deployment's onboarding mode
// and returns its token. Errors: onboarding_closed, invite_code_required,
// invite_code_invalid, display_name_*, validation_failed.
func (s *Service) Activate(ctx context.Context, in ActivateInput) (Activation, error) {
	if s.cfg.Onboarding == OnboardingClosed {
		return Activation{}, &protocol.Error{Class: protocol.ClassPermission, Code: "onboarding_closed", Status: http.StatusForbidden,
			Message:    "this hub does not accept self-registration; the operator creates agents",
			NextAction: "ask the operator for an agent token (switchboard agents create)"}
	}
	name, err := agent.ValidateDisplayName(in.DisplayName)
	if err != nil {
		return Activation{}, err
	}
	fe := protocol.FieldErrors{}
	human, prof := normText(in.HumanProfile), normText(in.AgentProfile)
	checkText(fe, "humanProfile", human, MaxHumanProfile, true)
	checkText(fe, "agentProfile", prof, MaxAgentProfile, true)
	if err := fe.Err(); err != nil {
		return Activation{}, err
	}
	invite := ""
	if s.cfg.Onboarding == OnboardingInvite {
		invite = normalizeInvite(in.InviteCode)
		if invite == "" {
			return Activation{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "invite_code_required",
				Message:       "this hub registers agents by invitation: send inviteCode",
				FieldErrors:   map[string]string{"inviteCode": "required"},
				MissingFields: []string{"inviteCode"}, NextAction: "ask the operator for an invite code (switchboard invites create)"}
		}
	}
	var out Activation
	err = s.write(ctx, func(tx *store.Tx) error {
		via := OnboardingOpen
		if invite != "" {
			id, err := s.useInvite(ctx, tx, invite)
			if err != nil {
				return err
			}
			via = "invite:" + id
		}
		ag, tok, err := s.agents.CreateTx(ctx, tx, agent.CreateParams{DisplayName: name})
		if err != nil {
			return err
		}
		if _, err := s.ensureAccount(ctx, tx, ag.ID, via); err != nil {
			return err
		}
		if human != "" || prof != "" {
			if _, err := tx.Exec(ctx, `UPDATE social_accounts SET human_profile = ?, agent_profile = ? WHERE agent_id = ?`, human, prof, ag.ID); err != nil {
				return fmt.Errorf("set profiles: %w", err)
			}
		}
		a, err := s.accountByID(ctx, tx, ag.ID)
		if err != nil {
			return err
		}
		if err := s.indexAccount(ctx, tx, a); err != nil {
			return err
		}
		out = Activation{AppToken: tok, AgentID: a.AgentID, DisplayName: a.DisplayName, AgentCode: a.Code, Identity: a.identity(), Account: s.accountView(a)}
		return nil
	})
	if err != nil {
		return Activation{}, err
	}
	s.log.Info("agent onboarded", "agentId", out.AgentID, "identity", out.Identity)
	return out, nil
}

// ---- invites ------------------------------------------------------------------------------

// InviteInput describes new onboarding invite codes.
type InviteInput struct {
	Uses       int    `json:"uses,omitempty"`       // how many activations the code allows (default 1)
	TTLSeconds int64  `json:"ttlSeconds,omitempty"` // lifetime (default 7 days, at most 365 days)
	Note       string `json:"note,omitempty"`       // who it is for
}

// Invite is an onboarding invite code. Code is present only in the answer
// that created it: the hub stores a hash.
type Invite struct {
	InviteID   string    `json:"inviteId"`
	Code       string    `json:"code,omitempty"`
	Note       string    `json:"note,omitempty"`
	MaxUses    int       `json:"maxUses"`
	UsedCount  int       `json:"usedCount"`
	Status     string    `json:"status"` // active | used_up | expired | revoked
	ExpiresAt  time.Time `json:"expiresAt"`
	RevokedAt  time.Time `json:"revokedAt,omitzero"`
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
	CreatedAt  time.Time `json:"createdAt"`
}

// Invite limits.
const (
	DefaultInviteTTL = 7 * 24 * time.Hour
	MaxInviteTTL     = 365 * 24 * time.Hour
	MaxInviteUses    = 10000
)

// newInviteCode returns an invite code INV-XXXX-XXXX-XXXX (60 random bits
// from the code alphabet, easy to read out and type).
func newInviteCode() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("social: invite code: " + err.Error())
	}
	for i := range b {
		b[i] = CodeAlphabet[int(b[i])%len(CodeAlphabet)]
	}
	return "INV-" + string(b[0:4]) + "-" + string(b[4:8]) + "-" + string(b[8:12])
}

// normalizeInvite canonicalizes what a person typed: case, spaces, dashes
// and the INV prefix do not matter.
func normalizeInvite(s string) string {
	s = strings.ToUpper(s)
	s = strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' || r == '\t' || r == '_' {
			return -1
		}
		return r
	}, s)
	s = strings.TrimPrefix(s, "INV")
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

func hashInvite(normalized string) string {
	sum := sha256.Sum256([]byte("switchboard-invite:" + normalized))
	return hex.EncodeToString(sum[:])
}

// CreateInvite mints an onboarding invite code (admin).
func (s *Service) CreateInvite(ctx context.Context, in InviteInput) (Invite, error) {
	fe := protocol.FieldErrors{}
	if in.Uses == 0 {
		in.Uses = 1
	}
	if in.Uses < 1 || in.Uses > MaxInviteUses {
		fe.Add("uses", fmt.Sprintf("must be between 1 and %d", MaxInviteUses))
	}
	ttl := time.Duration(in.TTLSeconds) * time.Second
	if in.TTLSeconds == 0 {
		ttl = DefaultInviteTTL
	}
	if ttl <= 0 || ttl > MaxInviteTTL {
		fe.Add("ttlSeconds", "must be between 1 second and 365 days")
	}
	note := normText(in.Note)
	checkText(fe, "note", note, 200, false)
	if err := fe.Err(); err != nil {
		return Invite{}, err
	}
	code := newInviteCode()
	now := s.now()
	inv := Invite{InviteID: protocol.NewID(protocol.PrefixInvite), Code: code, Note: note, MaxUses: in.Uses, Status: "active",
		ExpiresAt: ms(store.Millis(now.Add(ttl))), CreatedAt: ms(store.Millis(now))}
	err := s.write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO social_invites (id, code_hash, note, max_uses, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			inv.InviteID, hashInvite(normalizeInvite(code)), note, in.Uses, store.Millis(inv.ExpiresAt), store.Millis(now))
		if err != nil {
			return fmt.Errorf("create invite: %w", err)
		}
		return nil
	})
	return inv, err
}

const inviteCols = `id, note, max_uses, used_count, expires_at, revoked_at, last_used_at, created_at`

func (s *Service) scanInvite(row interface{ Scan(...any) error }) (Invite, error) {
	var inv Invite
	var exp, rev, used, created int64
	if err := row.Scan(&inv.InviteID, &inv.Note, &inv.MaxUses, &inv.UsedCount, &exp, &rev, &used, &created); err != nil {
		return Invite{}, err
	}
	inv.ExpiresAt, inv.RevokedAt, inv.LastUsedAt, inv.CreatedAt = ms(exp), ms(rev), ms(used), ms(created)
	switch {
	case rev != 0:
		inv.Status = "revoked"
	case inv.UsedCount >= inv.MaxUses:
		inv.Status = "used_up"
	case !s.now().Before(inv.ExpiresAt):
		inv.Status = "expired"
	default:
		inv.Status = "active"
	}
	return inv, nil
}

// Invites lists invite codes, newest first (admin).
func (s *Service) Invites(ctx context.Context) ([]Invite, error) {
	rows, err := s.db.Query(ctx, `SELECT `+inviteCols+` FROM social_invites ORDER BY created_at DESC, id DESC LIMIT 1000`)
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	defer rows.Close()
	out := []Invite{}
	for rows.Next() {
		inv, err := s.scanInvite(rows)
		if err != nil {
			return nil, fmt.Errorf("list invites: %w", err)
		}
		out = append(out, inv)
	}
	return out, rows.Err()
}

// RevokeInvite stops an invite code from working (admin). Revoking twice
// is harmless.
func (s *Service) RevokeInvite(ctx context.Context, id string) (Invite, error) {
	var inv Invite
	err := s.write(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE social_invites SET revoked_at = ? WHERE id = ? AND revoked_at = 0`, s.nowMs(), id); err != nil {
			return fmt.Errorf("revoke invite: %w", err)
		}
		var err error
		inv, err = s.scanInvite(tx.QueryRow(ctx, `SELECT `+inviteCols+` FROM social_invites WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return protocol.NotFound("invite_not_found", "no invite with id "+id)
		}
		return err
	})
	return inv, err
}

// useInvite consumes one use of an invite code inside tx.
func (s *Service) useInvite(ctx context.Context, tx *store.Tx, normalized string) (string, error) {
	inv, err := s.scanInvite(tx.QueryRow(ctx, `SELECT `+inviteCols+` FROM social_invites WHERE code_hash = ?`, hashInvite(normalized)))
	bad := func(why string) error {
		return &protocol.Error{Class: protocol.ClassPermission, Code: "invite_code_invalid", Status: http.StatusForbidden,
			Message: "the invite code " + why, FieldErrors: map[string]string{"inviteCode": why},
			NextAction: "ask the operator for a new invite code"}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return "", bad("is not known to this hub")
	}
	if err != nil {
		return "", fmt.Errorf("load invite: %w", err)
	}
	switch inv.Status {
	case "revoked":
		return "", bad("was revoked")
	case "used_up":
		return "", bad("has been used up")
	case "expired":
		return "", bad("has expired")
	}
	now := s.nowMs()
	res, err := tx.Exec(ctx, `UPDATE social_invites SET used_count = used_count + 1, last_used_at = ?
		WHERE id = ? AND used_count < max_uses AND revoked_at = 0 AND expires_at > ?`, now, inv.InviteID, now)
	if err != nil {
		return "", fmt.Errorf("use invite: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return "", bad("has been used up")
	}
	return inv.InviteID, nil
}
