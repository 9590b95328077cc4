package social

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Visibility modes of an account.
const (
	VisibilityPublic   = "public"   // searchable and listed
	VisibilityUnlisted = "unlisted" // reachable by exact identity only
	VisibilityPrivate  = "private"  // reachable only by agents it has chatted with
)

// Contact policies of an account.
const (
	PolicyOpen     = "open"              // eligible requests are accepted at once
	PolicyApproval = "approval_required" // requests wait; the management session is notified
	PolicyClosed   = "closed"            // inbound requests are refused before creation
)

// Readiness states, checked in this order.
const (
	ReadinessEmail    = "email_verification_required"
	ReadinessIdentity = "public_identity_incomplete"
	ReadinessProfile  = "account_profile_incomplete"
	ReadinessReady    = "ready"
)

// ParseContactPolicy accepts a contact policy or one of its legacy aliases
// (auto_accept, manual_review, do_not_disturb, reject_all), in any case,
// and returns the canonical value.
func ParseContactPolicy(s string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case PolicyOpen, "auto_accept":
		return PolicyOpen, true
	case PolicyApproval, "manual_review":
		return PolicyApproval, true
	case PolicyClosed, "do_not_disturb", "reject_all":
		return PolicyClosed, true
	}
	return "", false
}

// ParseVisibility accepts a visibility mode in any case.
func ParseVisibility(s string) (string, bool) {
	switch v := strings.ToLower(strings.TrimSpace(s)); v {
	case VisibilityPublic, VisibilityUnlisted, VisibilityPrivate:
		return v, true
	}
	return "", false
}

// account is a stored account joined with its registry entry.
type account struct {
	AgentID, Code, HumanProfile, AgentProfile, Headline string
	Visibility, ContactPolicy, OnboardedVia             string
	EmailVerifiedAt, CreatedAt, UpdatedAt, LastActiveAt int64
	Likes, Dislikes, Conversations                      int
	DisplayName                                         string
	Disabled                                            bool
}

func (a account) identity() string { return FormatIdentity(a.DisplayName, a.Code) }

const accountCols = `a.agent_id, a.code, a.human_profile, a.agent_profile, a.headline, a.visibility_mode, a.contact_policy,
	a.onboarded_via, a.email_verified_at, a.created_at, a.updated_at, a.last_active_at, a.likes_received,
	a.dislikes_received, a.conversation_count, g.display_name, g.disabled`

const accountFrom = ` FROM social_accounts a JOIN agents g ON g.id = a.agent_id`

func scanAccount(row interface{ Scan(...any) error }) (account, error) {
	var a account
	err := row.Scan(a.scanDest()...)
	return a, err
}

// scanDest lists the scan destinations of accountCols.
func (a *account) scanDest() []any {
	return []any{&a.AgentID, &a.Code, &a.HumanProfile, &a.AgentProfile, &a.Headline, &a.Visibility, &a.ContactPolicy,
		&a.OnboardedVia, &a.EmailVerifiedAt, &a.CreatedAt, &a.UpdatedAt, &a.LastActiveAt, &a.Likes,
		&a.Dislikes, &a.Conversations, &a.DisplayName, &a.Disabled}
}

// errAgentNotFound is the one answer for an unknown, hidden or disabled
// target, so a caller cannot tell a private account from a missing one.
func errAgentNotFound(what string) error {
	e := protocol.NotFound("agent_not_found", "no reachable agent with "+what)
	e.NextAction = "check the public identity (Name#CODE) with the person who shared it"
	return e
}

func (s *Service) accountByID(ctx context.Context, q store.Q, id string) (account, error) {
	a, err := scanAccount(q.QueryRow(ctx, `SELECT `+accountCols+accountFrom+` WHERE a.agent_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return account{}, errAgentNotFound("id " + id)
	}
	if err != nil {
		return account{}, fmt.Errorf("load account %s: %w", id, err)
	}
	return a, nil
}

func (s *Service) accountByCode(ctx context.Context, q store.Q, code string) (account, error) {
	a, err := scanAccount(q.QueryRow(ctx, `SELECT `+accountCols+accountFrom+` WHERE a.code = ?`, code))
	if errors.Is(err, sql.ErrNoRows) {
		return account{}, errAgentNotFound("code " + code)
	}
	if err != nil {
		return account{}, fmt.Errorf("load account by code: %w", err)
	}
	return a, nil
}

// accountsByID loads several accounts (missing ones are absent from the map).
func (s *Service) accountsByID(ctx context.Context, q store.Q, ids []string) (map[string]account, error) {
	out := map[string]account{}
	ids = uniq(ids)
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := q.Query(ctx, `SELECT `+accountCols+accountFrom+` WHERE a.agent_id IN (`+store.InClause(len(ids))+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("load accounts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		a, err := scanAccount(rows)
		if err != nil {
			return nil, fmt.Errorf("load accounts: %w", err)
		}
		out[a.AgentID] = a
	}
	return out, rows.Err()
}

func uniq(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// ensureAccount returns the agent's account, creating it (with a fresh
// unique code and the Claworld defaults: public, open) on first use. Agents
// the admin created directly get their account this way.
func (s *Service) ensureAccount(ctx context.Context, tx *store.Tx, agentID, onboardedVia string) (account, error) {
	a, err := s.accountByID(ctx, tx, agentID)
	if err == nil {
		return a, nil
	}
	if protocol.CodeOf(err) != "agent_not_found" {
		return account{}, err
	}
	if _, err := s.agents.GetTx(ctx, tx, agentID); err != nil {
		return account{}, err
	}
	now := s.nowMs()
	for attempt := 0; ; attempt++ {
		res, err := tx.Exec(ctx, `INSERT INTO social_accounts (agent_id, code, visibility_mode, contact_policy, onboarded_via, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, agentID, NewCode(), VisibilityPublic, PolicyOpen, onboardedVia, now, now)
		if err != nil {
			return account{}, fmt.Errorf("create account: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			break
		}
		// Nothing inserted: either a concurrent caller created this account
		// (use it) or the random code was taken (draw another).
		if a, err := s.accountByID(ctx, tx, agentID); err == nil {
			return a, nil
		}
		if attempt >= 20 {
			return account{}, errors.New("create account: could not find a free code")
		}
	}
	a, err = s.accountByID(ctx, tx, agentID)
	if err != nil {
		return account{}, err
	}
	return a, s.indexAccount(ctx, tx, a)
}

// ---- views ------------------------------------------------------------------------

// Account is an agent's own view of its social account.
type Account struct {
	AgentID        string       `json:"agentId"`
	DisplayName    string       `json:"displayName"`
	AgentCode      string       `json:"agentCode"`
	Identity       string       `json:"identity"`
	HumanProfile   string       `json:"humanProfile"`
	AgentProfile   string       `json:"agentProfile"`
	Headline       string       `json:"headline"`
	VisibilityMode string       `json:"visibilityMode"`
	ContactPolicy  string       `json:"contactPolicy"`
	EmailVerified  bool         `json:"emailVerified"`
	Status         string       `json:"status"`
	Readiness      string       `json:"readiness"`
	RequiredAction string       `json:"requiredAction,omitempty"`
	NextAction     string       `json:"nextAction"`
	NextTool       string       `json:"nextTool,omitempty"`
	MissingFields  []string     `json:"missingFields"`
	Stats          AccountStats `json:"stats"`
	ShareCard      ShareCard    `json:"shareCard"`
	CreatedAt      time.Time    `json:"createdAt"`
	UpdatedAt      time.Time    `json:"updatedAt"`
	Updated        []string     `json:"updated,omitempty"`
	Warning        *Warning     `json:"warning,omitempty"`
}

// AccountStats are the feedback and activity counters of an account.
type AccountStats struct {
	LikesReceived     int `json:"likesReceived"`
	DislikesReceived  int `json:"dislikesReceived"`
	ConversationCount int `json:"conversationCount"`
}

// Warning is a non-fatal remark on a successful call (for example a stale
// display name that still resolved by code).
type Warning struct {
	Code               string `json:"code"`
	Message            string `json:"message"`
	RequestedName      string `json:"requestedDisplayName,omitempty"`
	CurrentDisplayName string `json:"currentDisplayName,omitempty"`
	CurrentIdentity    string `json:"currentIdentity,omitempty"`
}

// RequestChatRef is what a caller passes to request_chat to reach an agent.
type RequestChatRef struct {
	WorldID     string `json:"worldId,omitempty"`
	DisplayName string `json:"displayName"`
	AgentCode   string `json:"agentCode"`
}

// readiness is the first unmet step of account setup.
type readiness struct {
	state, requiredAction, nextAction, nextTool string
	missing                                     []string
}

func (s *Service) readinessOf(a account) readiness {
	if s.cfg.RequireEmailVerification && a.EmailVerifiedAt == 0 {
		return readiness{ReadinessEmail, "verify_email", "ask_operator_to_verify_email", "", []string{"emailVerified"}}
	}
	if strings.TrimSpace(a.DisplayName) == "" || a.Code == "" {
		return readiness{ReadinessIdentity, "set_public_identity", "update_identity", "account", []string{"displayName"}}
	}
	var missing []string
	if strings.TrimSpace(a.HumanProfile) == "" {
		missing = append(missing, "humanProfile")
	}
	if strings.TrimSpace(a.AgentProfile) == "" {
		missing = append(missing, "agentProfile")
	}
	if len(missing) > 0 {
		return readiness{ReadinessProfile, "complete_account_profile", "update_profile", "account", missing}
	}
	return readiness{ReadinessReady, "", "browse_worlds", "worlds", []string{}}
}

// requireReady refuses social actions (joining and creating worlds,
// requesting chats) until the account is ready; the error carries the
// same requiredAction / nextAction / nextTool / missingFields as the view.
func (s *Service) requireReady(a account) error {
	r := s.readinessOf(a)
	if r.state == ReadinessReady {
		return nil
	}
	msg := "your account is not ready: "
	switch r.state {
	case ReadinessEmail:
		msg += "the deployment requires a verified email; ask the operator to verify it"
	case ReadinessIdentity:
		msg += "set a display name first"
	default:
		msg += "fill in " + strings.Join(r.missing, " and ") + " first (account action update_profile)"
	}
	return &protocol.Error{Class: protocol.ClassInvalid, Code: r.state, Status: http.StatusConflict, Message: msg,
		RequiredAction: r.requiredAction, NextAction: r.nextAction, NextTool: r.nextTool, MissingFields: r.missing}
}

func (s *Service) accountView(a account) Account {
	r := s.readinessOf(a)
	return Account{
		AgentID: a.AgentID, DisplayName: a.DisplayName, AgentCode: a.Code, Identity: a.identity(),
		HumanProfile: a.HumanProfile, AgentProfile: a.AgentProfile, Headline: a.Headline,
		VisibilityMode: a.Visibility, ContactPolicy: a.ContactPolicy, EmailVerified: a.EmailVerifiedAt != 0,
		Status: r.state, Readiness: r.state, RequiredAction: r.requiredAction, NextAction: r.nextAction, NextTool: r.nextTool,
		MissingFields: r.missing,
		Stats:         AccountStats{LikesReceived: a.Likes, DislikesReceived: a.Dislikes, ConversationCount: a.Conversations},
		ShareCard:     s.shareCard(a), CreatedAt: ms(a.CreatedAt), UpdatedAt: ms(a.UpdatedAt),
	}
}

// ---- account calls ------------------------------------------------------------------

// Account returns the actor's account, creating it on first use.
func (s *Service) Account(ctx context.Context, actor Actor) (Account, error) {
	id, err := requireAgent(actor, "agentId")
	if err != nil {
		return Account{}, err
	}
	a, err := s.accountByID(ctx, s.db, id)
	if protocol.CodeOf(err) == "agent_not_found" {
		err = s.write(ctx, func(tx *store.Tx) error {
			a, err = s.ensureAccount(ctx, tx, id, "")
			return err
		})
	}
	if err != nil {
		return Account{}, err
	}
	return s.accountView(a), nil
}

// Account update actions (POST /v1/account).
const (
	ActionView              = "view"
	ActionUpdateIdentity    = "update_identity"
	ActionUpdateProfile     = "update_profile"
	ActionUpdateChatPolicy  = "update_chat_policy"
	ActionUpdate            = "update"
	ActionMarkEmailVerified = "mark_email_verified"
)

// AccountUpdate is the body of POST /v1/account. Action chooses which
// fields apply; `update` (or no action with fields) applies every given
// field. chatPolicy is a legacy alias of contactPolicy.
type AccountUpdate struct {
	Action         string  `json:"action,omitempty"`
	AgentID        string  `json:"agentId,omitempty"`
	DisplayName    *string `json:"displayName,omitempty"`
	HumanProfile   *string `json:"humanProfile,omitempty"`
	AgentProfile   *string `json:"agentProfile,omitempty"`
	Headline       *string `json:"headline,omitempty"`
	ContactPolicy  *string `json:"contactPolicy,omitempty"`
	ChatPolicy     *string `json:"chatPolicy,omitempty"`
	VisibilityMode *string `json:"visibilityMode,omitempty"`
	EmailVerified  *bool   `json:"emailVerified,omitempty"`
}

// UpdateAccount applies an account action. Errors: invalid_action,
// display_name_* (identity rules), validation_failed (field limits),
// invalid_contact_policy, invalid_visibility_mode, admin_required
// (mark_email_verified), nothing_to_update.
func (s *Service) UpdateAccount(ctx context.Context, actor Actor, u AccountUpdate) (Account, error) {
	id, err := requireAgent(actor, "agentId")
	if err != nil {
		return Account{}, err
	}
	action := strings.ToLower(strings.TrimSpace(u.Action))
	if u.ContactPolicy == nil && u.ChatPolicy != nil {
		u.ContactPolicy = u.ChatPolicy
	}
	has := func(fields ...bool) bool {
		for _, f := range fields {
			if f {
				return true
			}
		}
		return false
	}
	identityGiven := u.DisplayName != nil
	profileGiven := has(u.HumanProfile != nil, u.AgentProfile != nil, u.Headline != nil)
	policyGiven := has(u.ContactPolicy != nil, u.VisibilityMode != nil)
	var apply struct{ identity, profile, policy, email bool }
	switch action {
	case "":
		if !identityGiven && !profileGiven && !policyGiven && u.EmailVerified == nil {
			return s.Account(ctx, actor)
		}
		apply.identity, apply.profile, apply.policy, apply.email = true, true, true, u.EmailVerified != nil
	case ActionView, "get", "share_card":
		return s.Account(ctx, actor)
	case ActionUpdate:
		apply.identity, apply.profile, apply.policy, apply.email = true, true, true, u.EmailVerified != nil
	case ActionUpdateIdentity:
		if !identityGiven {
			return Account{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "display_name_required", Message: "update_identity needs displayName",
				FieldErrors: map[string]string{"displayName": "required"}, MissingFields: []string{"displayName"}, NextAction: "send the new displayName"}
		}
		apply.identity = true
	case ActionUpdateProfile:
		apply.profile = true
	case ActionUpdateChatPolicy, "update_policy", "update_contact_policy", "update_visibility":
		apply.policy = true
	case ActionMarkEmailVerified:
		if !actor.Admin {
			return Account{}, protocol.Forbidden("admin_required", "only the operator (admin token) can mark an email verified")
		}
		t := true
		if u.EmailVerified == nil {
			u.EmailVerified = &t
		}
		apply.email = true
	default:
		return Account{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "invalid_action",
			Message:     "unknown account action " + quote(u.Action) + "; use view, update_identity, update_profile or update_chat_policy",
			FieldErrors: map[string]string{"action": "one of view, update_identity, update_profile, update_chat_policy, update"}}
	}
	if apply.email && u.EmailVerified != nil && !actor.Admin {
		return Account{}, protocol.Forbidden("admin_required", "only the operator (admin token) can mark an email verified")
	}

	fe := protocol.FieldErrors{}
	var name, human, agentProfile, headline, policy, vis string
	if apply.identity && u.DisplayName != nil {
		n, err := agent.ValidateDisplayName(*u.DisplayName)
		if err != nil {
			return Account{}, err
		}
		name = n
	}
	if apply.profile {
		if u.HumanProfile != nil {
			human = normText(*u.HumanProfile)
			checkText(fe, "humanProfile", human, MaxHumanProfile, true)
		}
		if u.AgentProfile != nil {
			agentProfile = normText(*u.AgentProfile)
			checkText(fe, "agentProfile", agentProfile, MaxAgentProfile, true)
		}
		if u.Headline != nil {
			headline = normText(*u.Headline)
			checkText(fe, "headline", headline, MaxHeadline, false)
		}
		if action == ActionUpdateProfile && !profileGiven {
			return Account{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "nothing_to_update",
				Message: "update_profile needs humanProfile, agentProfile or headline", MissingFields: []string{"humanProfile", "agentProfile"},
				NextAction: "send the profile fields to change"}
		}
	}
	if apply.policy {
		if u.ContactPolicy != nil {
			p, ok := ParseContactPolicy(*u.ContactPolicy)
			if !ok {
				return Account{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "invalid_contact_policy",
					Message:     "contactPolicy must be open, approval_required or closed (legacy: auto_accept, manual_review, do_not_disturb, reject_all)",
					FieldErrors: map[string]string{"contactPolicy": "one of open, approval_required, closed"}}
			}
			policy = p
		}
		if u.VisibilityMode != nil {
			v, ok := ParseVisibility(*u.VisibilityMode)
			if !ok {
				return Account{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "invalid_visibility_mode",
					Message:     "visibilityMode must be public, unlisted or private",
					FieldErrors: map[string]string{"visibilityMode": "one of public, unlisted, private"}}
			}
			vis = v
		}
		if action == ActionUpdateChatPolicy && !policyGiven {
			return Account{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "nothing_to_update",
				Message: "update_chat_policy needs contactPolicy or visibilityMode", MissingFields: []string{"contactPolicy"},
				NextAction: "send contactPolicy (open, approval_required, closed) or visibilityMode (public, unlisted, private)"}
		}
	}
	if err := fe.Err(); err != nil {
		return Account{}, err
	}

	var out account
	var changed []string
	err = s.write(ctx, func(tx *store.Tx) error {
		a, err := s.ensureAccount(ctx, tx, id, "")
		if err != nil {
			return err
		}
		now := s.nowMs()
		set := func(col string, val any, field string) error {
			_, err := tx.Exec(ctx, `UPDATE social_accounts SET `+col+` = ?, updated_at = ? WHERE agent_id = ?`, val, now, id)
			if err != nil {
				return fmt.Errorf("update account %s: %w", col, err)
			}
			changed = append(changed, field)
			return nil
		}
		if apply.identity && u.DisplayName != nil && name != a.DisplayName {
			if err := s.agents.SetDisplayNameTx(ctx, tx, id, name); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE social_accounts SET updated_at = ? WHERE agent_id = ?`, now, id); err != nil {
				return fmt.Errorf("touch account: %w", err)
			}
			changed = append(changed, "displayName")
		}
		if apply.profile {
			if u.HumanProfile != nil && human != a.HumanProfile {
				if err := set("human_profile", human, "humanProfile"); err != nil {
					return err
				}
			}
			if u.AgentProfile != nil && agentProfile != a.AgentProfile {
				if err := set("agent_profile", agentProfile, "agentProfile"); err != nil {
					return err
				}
			}
			if u.Headline != nil && headline != a.Headline {
				if err := set("headline", headline, "headline"); err != nil {
					return err
				}
			}
		}
		if apply.policy {
			if u.ContactPolicy != nil && policy != a.ContactPolicy {
				if err := set("contact_policy", policy, "contactPolicy"); err != nil {
					return err
				}
			}
			if u.VisibilityMode != nil && vis != a.Visibility {
				if err := set("visibility_mode", vis, "visibilityMode"); err != nil {
					return err
				}
			}
		}
		if apply.email && u.EmailVerified != nil {
			v := int64(0)
			if *u.EmailVerified {
				v = now
			}
			if err := set("email_verified_at", v, "emailVerified"); err != nil {
				return err
			}
		}
		out, err = s.accountByID(ctx, tx, id)
		if err != nil {
			return err
		}
		if len(changed) > 0 {
			return s.indexAccount(ctx, tx, out)
		}
		return nil
	})
	if err != nil {
		return Account{}, err
	}
	v := s.accountView(out)
	v.Updated = changed
	return v, nil
}

func quote(s string) string {
	if utf8.RuneCountInString(s) > 60 {
		s = string([]rune(s)[:60]) + "…"
	}
	return fmt.Sprintf("%q", s)
}

// ---- share card -------------------------------------------------------------------------

// ShareCard is how an agent tells others how to reach it: its public
// identity plus the exact request_chat arguments.
type ShareCard struct {
	Identity    string         `json:"identity"`
	DisplayName string         `json:"displayName"`
	AgentCode   string         `json:"agentCode"`
	Headline    string         `json:"headline,omitempty"`
	HubURL      string         `json:"hubUrl,omitempty"`
	RequestChat RequestChatRef `json:"requestChat"`
	Text        string         `json:"text"`
}

func (s *Service) shareCard(a account) ShareCard {
	c := ShareCard{Identity: a.identity(), DisplayName: a.DisplayName, AgentCode: a.Code, Headline: a.Headline,
		HubURL: s.cfg.PublicURL, RequestChat: RequestChatRef{DisplayName: a.DisplayName, AgentCode: a.Code}}
	c.Text = ShareCardText(c)
	return c
}

// ShareCardText renders a share card as plain text, for pasting into a chat.
func ShareCardText(c ShareCard) string {
	var b strings.Builder
	b.WriteString(c.Identity)
	b.WriteString("\n")
	if c.Headline != "" {
		b.WriteString(c.Headline)
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Chat with me on Switchboard: request a chat with displayName %q and agentCode %q.\n", c.DisplayName, c.AgentCode)
	if c.HubURL != "" {
		fmt.Fprintf(&b, "Hub: %s\n", c.HubURL)
	}
	return b.String()
}

// ShareCard returns the actor's share card.
func (s *Service) ShareCard(ctx context.Context, actor Actor) (ShareCard, error) {
	a, err := s.Account(ctx, actor)
	if err != nil {
		return ShareCard{}, err
	}
	return a.ShareCard, nil
}

// ---- public profiles -----------------------------------------------------------------------

// PublicProfile is what other agents may see of an account.
type PublicProfile struct {
	AgentID       string         `json:"agentId"`
	DisplayName   string         `json:"displayName"`
	AgentCode     string         `json:"agentCode"`
	Identity      string         `json:"identity"`
	Headline      string         `json:"headline"`
	AgentProfile  string         `json:"agentProfile"`
	HumanProfile  string         `json:"humanProfile"`
	ContactPolicy string         `json:"contactPolicy"`
	Online        bool           `json:"online"`
	Stats         AccountStats   `json:"stats"`
	RequestChat   RequestChatRef `json:"requestChat"`
	Warning       *Warning       `json:"warning,omitempty"`
}

// isCounterpart reports whether a and b have ever had a chat (accepted
// request) together; counterparts are not strangers to each other.
func isCounterpart(ctx context.Context, q store.Q, a, b string) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM social_chats WHERE (sender_agent_id = ? AND recipient_agent_id = ?)
		OR (sender_agent_id = ? AND recipient_agent_id = ?)`, a, b, b, a).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("counterpart check: %w", err)
	}
	return n > 0, nil
}

// visible applies the visibility rules: disabled agents are gone; public
// accounts are seen by everyone, unlisted ones only when addressed by exact
// identity (code or id), private ones only by their counterparts.
func (s *Service) visible(ctx context.Context, q store.Q, viewer Actor, a account, exact bool) (bool, error) {
	if viewer.Admin && viewer.AgentID == "" {
		return true, nil
	}
	if viewer.AgentID == a.AgentID {
		return true, nil
	}
	if a.Disabled {
		return false, nil
	}
	switch a.Visibility {
	case VisibilityPublic:
		return true, nil
	case VisibilityUnlisted:
		if exact {
			return true, nil
		}
	}
	return isCounterpart(ctx, q, viewer.AgentID, a.AgentID)
}

func (s *Service) publicProfile(ctx context.Context, a account) PublicProfile {
	on := s.online(ctx, []string{a.AgentID})
	return PublicProfile{
		AgentID: a.AgentID, DisplayName: a.DisplayName, AgentCode: a.Code, Identity: a.identity(),
		Headline: a.Headline, AgentProfile: a.AgentProfile, HumanProfile: a.HumanProfile, ContactPolicy: a.ContactPolicy,
		Online:      on[a.AgentID],
		Stats:       AccountStats{LikesReceived: a.Likes, DislikesReceived: a.Dislikes, ConversationCount: a.Conversations},
		RequestChat: RequestChatRef{DisplayName: a.DisplayName, AgentCode: a.Code},
	}
}

// PublicProfile returns an agent's public profile by id. Hidden and unknown
// agents both answer agent_not_found.
func (s *Service) PublicProfile(ctx context.Context, viewer Actor, agentID string) (PublicProfile, error) {
	a, err := s.accountByID(ctx, s.db, agentID)
	if err != nil {
		return PublicProfile{}, err
	}
	ok, err := s.visible(ctx, s.db, viewer, a, true)
	if err != nil {
		return PublicProfile{}, err
	}
	if !ok {
		return PublicProfile{}, errAgentNotFound("id " + agentID)
	}
	return s.publicProfile(ctx, a), nil
}

// LookupIdentity resolves `Name#CODE` (or a bare code, or a name plus a
// separate code) to a public profile. Resolution is by code; a stale or
// different name still resolves and carries a warning.
func (s *Service) LookupIdentity(ctx context.Context, viewer Actor, identity, displayName, code string) (PublicProfile, error) {
	id, err := parseTarget(identity, displayName, code)
	if err != nil {
		return PublicProfile{}, err
	}
	a, err := s.accountByCode(ctx, s.db, id.Code)
	if err != nil {
		return PublicProfile{}, err
	}
	ok, err := s.visible(ctx, s.db, viewer, a, true)
	if err != nil {
		return PublicProfile{}, err
	}
	if !ok {
		return PublicProfile{}, errAgentNotFound("code " + id.Code)
	}
	p := s.publicProfile(ctx, a)
	p.Warning = staleNameWarning(id.Name, a)
	return p, nil
}

// parseTarget combines the tolerant ways a target is named: identity
// `Name#CODE`, displayName holding `Name#CODE`, or displayName + agentCode.
func parseTarget(identity, displayName, code string) (Identity, error) {
	switch {
	case strings.TrimSpace(code) != "":
		c, ok := NormalizeCode(code)
		if !ok {
			return Identity{}, invalidCode("agentCode", code)
		}
		name := strings.TrimSpace(displayName)
		if i := strings.LastIndexByte(name, '#'); i >= 0 {
			name = strings.TrimSpace(name[:i])
		}
		if name == "" && identity != "" {
			if id, err := ParseIdentity(identity); err == nil {
				name = id.Name
			}
		}
		return Identity{Name: name, Code: c}, nil
	case strings.TrimSpace(identity) != "":
		return ParseIdentity(identity)
	case strings.Contains(displayName, "#"):
		id, err := ParseIdentity(displayName)
		if err != nil {
			if pe := protocol.AsError(err); pe.Code == "invalid_agent_code" {
				return Identity{}, invalidCode("displayName", displayName[strings.LastIndexByte(displayName, '#')+1:])
			}
		}
		return id, err
	}
	return Identity{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "agent_code_required",
		Message:       "name the agent by its public identity: displayName and agentCode (or identity Name#CODE)",
		FieldErrors:   map[string]string{"agentCode": "required"},
		MissingFields: []string{"agentCode"}, NextAction: "ask for the person's public identity (Name#CODE) or share card; do not guess the code"}
}

func staleNameWarning(given string, a account) *Warning {
	if given == "" || strings.EqualFold(strings.TrimSpace(given), a.DisplayName) {
		return nil
	}
	return &Warning{Code: "display_name_stale",
		Message:       fmt.Sprintf("resolved by code %s; the display name is now %q, not %q — use the current identity next time", a.Code, a.DisplayName, given),
		RequestedName: given, CurrentDisplayName: a.DisplayName, CurrentIdentity: a.identity()}
}
