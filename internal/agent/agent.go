// Package agent is the registry of agents: who exists, which tier and parent
// each has (the bus routes by them), and which token authenticates each.
// Tokens are random, shown once, and stored as SHA-256 hashes: they carry
// 160 bits of entropy, so a fast hash is enough and lookups stay cheap.
package agent

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// TokenPrefix starts every agent token, so a leaked token is recognisable
// by secret scanners and in logs.
const TokenPrefix = "sbt_"

// MaxDisplayNameLen bounds display names (the Claworld identity rules allow 40).
const MaxDisplayNameLen = 40

// Agent is a registered agent.
type Agent struct {
	ID          string        `json:"agentId"`
	DisplayName string        `json:"displayName"`
	Tier        protocol.Tier `json:"tier"`
	ParentID    string        `json:"parent,omitempty"`
	Owner       string        `json:"owner,omitempty"`
	Disabled    bool          `json:"disabled,omitempty"`
	CreatedAt   time.Time     `json:"createdAt"`
	UpdatedAt   time.Time     `json:"updatedAt"`
}

// CreateParams describe a new agent. Tier may be empty: an agent without a
// parent defaults to command (so standalone agents can talk to each other);
// with a parent it defaults to the tier below the parent's.
type CreateParams struct {
	DisplayName string        `json:"displayName"`
	Tier        protocol.Tier `json:"tier,omitempty"`
	ParentID    string        `json:"parent,omitempty"`
	Owner       string        `json:"owner,omitempty"`
}

// Registry stores agents and authenticates their tokens.
type Registry struct {
	db    *store.DB
	clock clock.Clock

	mu    sync.Mutex
	cache map[string]cachedAuth // token hash → agent, briefly
}

type cachedAuth struct {
	agent Agent
	until time.Time
}

// authCacheTTL bounds how long a rotated or disabled token may still
// authenticate on a node that cached it.
const authCacheTTL = 2 * time.Second

// New returns a registry over db.
func New(db *store.DB, c clock.Clock) *Registry {
	if c == nil {
		c = clock.Real{}
	}
	return &Registry{db: db, clock: c, cache: map[string]cachedAuth{}}
}

// HashToken is the stored form of a token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewToken mints an agent token.
func NewToken() string { return protocol.RandomToken(TokenPrefix, 20) }

// ValidateDisplayName applies the identity rules of the Claworld contract:
// 1–40 characters after trimming, no '#', no tabs or line breaks, no control
// characters. The returned string is the trimmed name.
func ValidateDisplayName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", &protocol.Error{Class: protocol.ClassInvalid, Code: "display_name_required", Message: "displayName is required",
			FieldErrors: map[string]string{"displayName": "required"}, MissingFields: []string{"displayName"},
			NextAction: "choose a display name of 1–40 characters"}
	case !utf8.ValidString(name):
		return "", displayNameErr("display_name_invalid_character", "displayName must be valid UTF-8 text")
	case utf8.RuneCountInString(name) > MaxDisplayNameLen:
		return "", displayNameErr("display_name_too_long", fmt.Sprintf("displayName must be at most %d characters", MaxDisplayNameLen))
	case strings.Contains(name, "#"):
		return "", displayNameErr("display_name_reserved_character", "displayName must not contain '#': it separates the name from the code in Name#CODE")
	case strings.ContainsAny(name, "\t\n\r\v\f\u2028\u2029"):
		return "", displayNameErr("display_name_invalid_whitespace", "displayName must not contain tabs or line breaks")
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) && r != '\u200d' {
			return "", displayNameErr("display_name_invalid_character", "displayName must not contain control or invisible formatting characters")
		}
	}
	return name, nil
}

func displayNameErr(code, msg string) error {
	return &protocol.Error{Class: protocol.ClassInvalid, Code: code, Message: msg,
		FieldErrors: map[string]string{"displayName": msg}, NextAction: "choose another display name and retry"}
}

// Create registers an agent and returns it with its token (shown once).
func (r *Registry) Create(ctx context.Context, p CreateParams) (Agent, string, error) {
	var a Agent
	var token string
	err := r.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		a, token, err = r.CreateTx(ctx, tx, p)
		return err
	})
	return a, token, err
}

// CreateTx registers an agent inside the caller's transaction, so other
// subsystems (onboarding) can create an agent and their own records atomically.
func (r *Registry) CreateTx(ctx context.Context, tx *store.Tx, p CreateParams) (Agent, string, error) {
	name, err := ValidateDisplayName(p.DisplayName)
	if err != nil {
		return Agent{}, "", err
	}
	fe := protocol.FieldErrors{}
	if p.Tier != "" && !p.Tier.Valid() {
		fe.Add("tier", "must be one of command, pm, worker")
	}
	if len(p.Owner) > 200 {
		fe.Add("owner", "at most 200 characters")
	}
	if err := fe.Err(); err != nil {
		return Agent{}, "", err
	}
	tier := p.Tier
	if p.ParentID != "" {
		parent, err := r.get(ctx, tx, p.ParentID)
		if err != nil {
			if protocol.CodeOf(err) == "agent_not_found" {
				return Agent{}, "", protocol.Invalid("parent", "no agent with id "+p.ParentID)
			}
			return Agent{}, "", err
		}
		if tier == "" {
			tier = childTier(parent.Tier)
		}
		if !validParent(parent.Tier, tier) {
			return Agent{}, "", &protocol.Error{Class: protocol.ClassInvalid, Code: "invalid_parent",
				Message:     fmt.Sprintf("a %s agent cannot have a %s parent: a worker's parent is a pm, a pm's parent is a command agent", tier, parent.Tier),
				FieldErrors: map[string]string{"parent": "tier mismatch"}, NextAction: "choose a parent one tier above, or omit the parent"}
		}
	}
	if tier == "" {
		tier = protocol.TierCommand
	}
	now := r.clock.Now()
	a := Agent{ID: protocol.NewID(protocol.PrefixAgent), DisplayName: name, Tier: tier, ParentID: p.ParentID, Owner: p.Owner, CreatedAt: now, UpdatedAt: now}
	token := NewToken()
	_, err = tx.Exec(ctx, `INSERT INTO agents (id, display_name, tier, parent_id, owner, token_hash, disabled, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, a.ID, a.DisplayName, string(a.Tier), a.ParentID, a.Owner, HashToken(token), false, store.Millis(now), store.Millis(now))
	if err != nil {
		return Agent{}, "", fmt.Errorf("insert agent: %w", err)
	}
	a.CreatedAt, a.UpdatedAt = store.FromMillis(store.Millis(now)), store.FromMillis(store.Millis(now))
	return a, token, nil
}

func childTier(parent protocol.Tier) protocol.Tier {
	if parent == protocol.TierCommand {
		return protocol.TierPM
	}
	return protocol.TierWorker
}

func validParent(parent, child protocol.Tier) bool {
	return (child == protocol.TierPM && parent == protocol.TierCommand) || (child == protocol.TierWorker && parent == protocol.TierPM)
}

const agentCols = `id, display_name, tier, parent_id, owner, disabled, created_at, updated_at`

func scanAgent(row interface{ Scan(...any) error }) (Agent, error) {
	var a Agent
	var tier string
	var created, updated int64
	if err := row.Scan(&a.ID, &a.DisplayName, &tier, &a.ParentID, &a.Owner, &a.Disabled, &created, &updated); err != nil {
		return Agent{}, err
	}
	a.Tier = protocol.Tier(tier)
	a.CreatedAt, a.UpdatedAt = store.FromMillis(created), store.FromMillis(updated)
	return a, nil
}

// ErrNotFound is wrapped by the E002 error returned for an unknown agent id.
var ErrNotFound = errors.New("agent not found")

func notFound(id string) error {
	e := protocol.NotFound("agent_not_found", "no agent with id "+id)
	e.Err = ErrNotFound
	e.NextAction = "check the agent id (GET /v1/agents lists them)"
	return e
}

// Get returns the agent with id, or an E002 agent_not_found error.
func (r *Registry) Get(ctx context.Context, id string) (Agent, error) {
	return r.get(ctx, r.db, id)
}

// GetTx reads an agent inside a transaction.
func (r *Registry) GetTx(ctx context.Context, tx *store.Tx, id string) (Agent, error) {
	return r.get(ctx, tx, id)
}

func (r *Registry) get(ctx context.Context, q store.Q, id string) (Agent, error) {
	a, err := scanAgent(q.QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Agent{}, notFound(id)
	}
	if err != nil {
		return Agent{}, fmt.Errorf("get agent %s: %w", id, err)
	}
	return a, nil
}

// Filter narrows List.
type Filter struct {
	Tier     protocol.Tier
	ParentID string
	IDs      []string
	Limit    int
}

// List returns agents in creation order.
func (r *Registry) List(ctx context.Context, f Filter) ([]Agent, error) {
	return r.list(ctx, r.db, f)
}

// ListTx lists agents inside a transaction (routing decisions made while enqueueing).
func (r *Registry) ListTx(ctx context.Context, tx *store.Tx, f Filter) ([]Agent, error) {
	return r.list(ctx, tx, f)
}

func (r *Registry) list(ctx context.Context, q store.Q, f Filter) ([]Agent, error) {
	var where []string
	var args []any
	if f.Tier != "" {
		where = append(where, "tier = ?")
		args = append(args, string(f.Tier))
	}
	if f.ParentID != "" {
		where = append(where, "parent_id = ?")
		args = append(args, f.ParentID)
	}
	if len(f.IDs) > 0 {
		where = append(where, "id IN ("+store.InClause(len(f.IDs))+")")
		for _, id := range f.IDs {
			args = append(args, id)
		}
	}
	query := `SELECT ` + agentCols + ` FROM agents`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY id"
	if f.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	defer rows.Close()
	out := []Agent{}
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Authenticate returns the agent owning token. Unknown or disabled tokens
// get the same 401 answer, so a caller cannot probe which agents exist.
func (r *Registry) Authenticate(ctx context.Context, token string) (Agent, error) {
	if !strings.HasPrefix(token, TokenPrefix) || len(token) > 200 {
		return Agent{}, protocol.Unauthenticated("unknown or malformed token")
	}
	h := HashToken(token)
	now := r.clock.Now()
	r.mu.Lock()
	if c, ok := r.cache[h]; ok && now.Before(c.until) {
		r.mu.Unlock()
		return c.agent, nil
	}
	r.mu.Unlock()
	a, err := scanAgent(r.db.QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE token_hash = ?`, h))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && a.Disabled) {
		return Agent{}, protocol.Unauthenticated("unknown, rotated or disabled token")
	}
	if err != nil {
		return Agent{}, fmt.Errorf("authenticate: %w", err)
	}
	r.mu.Lock()
	if len(r.cache) > 10000 {
		r.cache = map[string]cachedAuth{}
	}
	r.cache[h] = cachedAuth{agent: a, until: now.Add(authCacheTTL)}
	r.mu.Unlock()
	return a, nil
}

// RotateToken replaces an agent's token; the old one stops working at once
// on this node and within a couple of seconds on others.
func (r *Registry) RotateToken(ctx context.Context, id string) (string, error) {
	token := NewToken()
	err := r.db.Write(ctx, func(tx *store.Tx) error {
		res, err := tx.Exec(ctx, `UPDATE agents SET token_hash = ?, updated_at = ? WHERE id = ?`, HashToken(token), store.Millis(r.clock.Now()), id)
		if err != nil {
			return fmt.Errorf("rotate token: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound(id)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.cache = map[string]cachedAuth{}
	r.mu.Unlock()
	return token, nil
}

// SetDisplayNameTx renames an agent inside the caller's transaction (the
// social layer's identity updates).
func (r *Registry) SetDisplayNameTx(ctx context.Context, tx *store.Tx, id, name string) error {
	name, err := ValidateDisplayName(name)
	if err != nil {
		return err
	}
	res, err := tx.Exec(ctx, `UPDATE agents SET display_name = ?, updated_at = ? WHERE id = ?`, name, store.Millis(r.clock.Now()), id)
	if err != nil {
		return fmt.Errorf("rename agent: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound(id)
	}
	r.mu.Lock()
	r.cache = map[string]cachedAuth{}
	r.mu.Unlock()
	return nil
}

// SetDisabled enables or disables an agent; a disabled agent's token stops
// authenticating.
func (r *Registry) SetDisabled(ctx context.Context, id string, disabled bool) error {
	err := r.db.Write(ctx, func(tx *store.Tx) error {
		res, err := tx.Exec(ctx, `UPDATE agents SET disabled = ?, updated_at = ? WHERE id = ?`, disabled, store.Millis(r.clock.Now()), id)
		if err != nil {
			return fmt.Errorf("disable agent: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound(id)
		}
		return nil
	})
	r.mu.Lock()
	r.cache = map[string]cachedAuth{}
	r.mu.Unlock()
	return err
}

// ---- admin token ------------------------------------------------------------

const adminTokenKey = "admin_token_hash"

// AdminTokenPrefix starts generated admin tokens.
const AdminTokenPrefix = "sba_"

// EnsureAdminToken makes the deployment's admin token known to the store.
// With configured != "", that token becomes the admin token. Otherwise, if
// none was ever set, a new one is generated and returned with created=true
// (the caller prints it once and saves it); if one exists, "" is returned.
func (r *Registry) EnsureAdminToken(ctx context.Context, configured string) (token string, created bool, err error) {
	if configured != "" {
		err = r.setSetting(ctx, adminTokenKey, HashToken(configured))
		return configured, false, err
	}
	var existing string
	err = r.db.QueryRow(ctx, `SELECT value FROM settings WHERE key = ?`, adminTokenKey).Scan(&existing)
	if err == nil {
		return "", false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, fmt.Errorf("read admin token: %w", err)
	}
	token = protocol.RandomToken(AdminTokenPrefix, 24)
	if err := r.setSetting(ctx, adminTokenKey, HashToken(token)); err != nil {
		return "", false, err
	}
	return token, true, nil
}

// IsAdminToken reports whether token is the deployment's admin token,
// comparing hashes in constant time.
func (r *Registry) IsAdminToken(ctx context.Context, token string) (bool, error) {
	var h string
	err := r.db.QueryRow(ctx, `SELECT value FROM settings WHERE key = ?`, adminTokenKey).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read admin token: %w", err)
	}
	return subtle.ConstantTimeCompare([]byte(h), []byte(HashToken(token))) == 1, nil
}

func (r *Registry) setSetting(ctx context.Context, key, value string) error {
	return r.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, key, value, store.Millis(r.clock.Now()))
		if err != nil {
			return fmt.Errorf("write setting %s: %w", key, err)
		}
		return nil
	})
}
