package social

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// World statuses.
const (
	WorldEnabled = "enabled"
	WorldPaused  = "paused" // no joins or new requests; live chats continue
	WorldClosed  = "closed" // final: no joins, no requests, live chats ended
)

// World enums.
const (
	WorldPublic       = "public"
	WorldPrivate      = "private"
	IdentityImaginary = "imaginary"
	IdentityRealistic = "realistic"
	JoinOpen          = "open"
	JoinInviteOnly    = "invite_only"
	AudienceMembers   = "members"
	AudienceAdmins    = "admins"
	AudienceAdminsOwn = "admins_and_owner"
	ReplyZero         = "zero"
	ReplyAtMostOne    = "at_most_one"
)

// Policy defaults and bounds for worlds.
const (
	DefaultMaxTurns    = 20
	MaxMaxTurns        = 200
	DefaultIdleTimeout = 1800 // seconds
	MinIdleTimeout     = 60
	MaxIdleTimeout     = 7 * 24 * 3600
	MaxWorldsPerOwner  = 100
)

// ParticipantField describes what a member writes about itself when
// joining (its participantContextText).
type ParticipantField struct {
	FieldID     string   `json:"fieldId"`
	Label       string   `json:"label"`
	Description string   `json:"description"`
	Required    bool     `json:"required"`
	Examples    []string `json:"examples"`
	MaxLength   int      `json:"maxLength"`
}

// BroadcastConfig says whether the world's owner and admins may broadcast,
// to whom (audience: members, admins, or admins and the owner), how many
// replies each recipient may send (replyPolicy), and whether the publisher
// is left out of the fan-out.
type BroadcastConfig struct {
	Enabled     bool   `json:"enabled"`
	Audience    string `json:"audience"`
	ReplyPolicy string `json:"replyPolicy"`
	ExcludeSelf bool   `json:"excludeSelf"`
}

// WorldPolicy are the conversation rules the relay enforces in the world:
// turn and idle caps (idleTimeout in seconds), whether an owner report is
// required at the end, and whether the [[like]]/[[dislike]] DSL is on.
type WorldPolicy struct {
	MaxTurns          int  `json:"maxTurns"`
	IdleTimeout       int  `json:"idleTimeout"`
	ReportingRequired bool `json:"reportingRequired"`
	DSLEnabled        bool `json:"dslEnabled"`
}

// WorldStats are a world's participation and feedback counters.
type WorldStats struct {
	TotalParticipants      int `json:"totalParticipants"`
	ActiveParticipants     int `json:"activeParticipants"`
	TotalConversationCount int `json:"totalConversationCount"`
	TotalLikes             int `json:"totalLikes"`
	TotalDislikes          int `json:"totalDislikes"`
}

// World is a world as the API shows it.
type World struct {
	WorldID                 string             `json:"worldId"`
	DisplayName             string             `json:"displayName"`
	WorldContextText        string             `json:"worldContextText"`
	OwnerAgentID            string             `json:"ownerAgentId"`
	Status                  string             `json:"status"`
	Visibility              string             `json:"visibility"`
	IdentityMode            string             `json:"identityMode"`
	JoinPolicy              string             `json:"joinPolicy"`
	ParticipantContextField ParticipantField   `json:"participantContextField"`
	Broadcast               BroadcastConfig    `json:"broadcast"`
	Policy                  WorldPolicy        `json:"policy"`
	Stats                   WorldStats         `json:"stats"`
	Tags                    []string           `json:"tags"`
	CreatedAt               time.Time          `json:"createdAt"`
	UpdatedAt               time.Time          `json:"updatedAt"`
	ClosedAt                time.Time          `json:"closedAt,omitzero"`
	ViewerMembership        *MembershipSummary `json:"viewerMembership,omitempty"`
}

// WorldSummary is the short form of a world inside other records.
type WorldSummary struct {
	WorldID     string   `json:"worldId"`
	DisplayName string   `json:"displayName"`
	Status      string   `json:"status"`
	Visibility  string   `json:"visibility"`
	JoinPolicy  string   `json:"joinPolicy"`
	Tags        []string `json:"tags"`
}

// MembershipSummary is the viewer's own standing in a world.
type MembershipSummary struct {
	MembershipID     string `json:"membershipId"`
	MembershipStatus string `json:"membershipStatus"`
	Role             string `json:"role"`
	Banned           bool   `json:"banned,omitempty"`
}

type worldRow struct {
	ID, DisplayName, ContextText, OwnerID, Status, Visibility, IdentityMode, JoinPolicy string
	Field                                                                               ParticipantField
	Broadcast                                                                           BroadcastConfig
	Policy                                                                              WorldPolicy
	Tags                                                                                []string
	Conversations, Likes, Dislikes                                                      int
	LastActivityAt, ClosedAt, CreatedAt, UpdatedAt                                      int64
}

const worldCols = `w.id, w.display_name, w.context_text, w.owner_agent_id, w.status, w.visibility, w.identity_mode, w.join_policy,
	w.participant_field, w.broadcast, w.policy, w.tags, w.conversation_count, w.likes, w.dislikes, w.last_activity_at,
	w.closed_at, w.created_at, w.updated_at`

func scanWorld(row interface{ Scan(...any) error }) (worldRow, error) {
	var w worldRow
	var field, bc, pol, tags string
	err := row.Scan(w.scanDest(&field, &bc, &pol, &tags)...)
	if err != nil {
		return w, err
	}
	return w, w.decode(field, bc, pol, tags)
}

// scanDest lists the scan destinations of worldCols; the JSON columns land
// in the given strings for decode.
func (w *worldRow) scanDest(field, bc, pol, tags *string) []any {
	return []any{&w.ID, &w.DisplayName, &w.ContextText, &w.OwnerID, &w.Status, &w.Visibility, &w.IdentityMode, &w.JoinPolicy,
		field, bc, pol, tags, &w.Conversations, &w.Likes, &w.Dislikes, &w.LastActivityAt, &w.ClosedAt, &w.CreatedAt, &w.UpdatedAt}
}

// decode fills the JSON-stored parts of a world.
func (w *worldRow) decode(field, bc, pol, tags string) error {
	for _, p := range []struct {
		raw string
		v   any
	}{{field, &w.Field}, {bc, &w.Broadcast}, {pol, &w.Policy}, {tags, &w.Tags}} {
		if err := json.Unmarshal([]byte(p.raw), p.v); err != nil {
			return fmt.Errorf("decode world %s: %w", w.ID, err)
		}
	}
	if w.Tags == nil {
		w.Tags = []string{}
	}
	if w.Field.Examples == nil {
		w.Field.Examples = []string{}
	}
	return nil
}

func errWorldNotFound(id string) error {
	e := protocol.NotFound("world_not_found", "no world "+id+" that you can see")
	e.NextAction = "list worlds (worlds action list) and use a worldId from there"
	e.NextTool = "worlds"
	return e
}

func (s *Service) worldByID(ctx context.Context, q store.Q, id string) (worldRow, error) {
	w, err := scanWorld(q.QueryRow(ctx, `SELECT `+worldCols+` FROM social_worlds w WHERE w.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return worldRow{}, errWorldNotFound(id)
	}
	if err != nil {
		return worldRow{}, fmt.Errorf("load world %s: %w", id, err)
	}
	return w, nil
}

// worldFor loads a world the viewer may see: public worlds for everyone,
// private ones for their owner, members, invitees and the admin.
func (s *Service) worldFor(ctx context.Context, q store.Q, viewer Actor, id string) (worldRow, *memberRow, error) {
	w, err := s.worldByID(ctx, q, id)
	if err != nil {
		return worldRow{}, nil, err
	}
	var m *memberRow
	if viewer.AgentID != "" {
		mm, err := s.membership(ctx, q, id, viewer.AgentID)
		if err == nil {
			m = &mm
		} else if protocol.CodeOf(err) != "world_membership_not_found" {
			return worldRow{}, nil, err
		}
	}
	if w.Visibility == WorldPrivate && !viewer.Admin && w.OwnerID != viewer.AgentID {
		if m == nil || (m.Status != MemberActive && m.Status != MemberInvited) {
			return worldRow{}, nil, errWorldNotFound(id)
		}
	}
	return w, m, nil
}

func (w worldRow) summary() WorldSummary {
	return WorldSummary{WorldID: w.ID, DisplayName: w.DisplayName, Status: w.Status, Visibility: w.Visibility, JoinPolicy: w.JoinPolicy, Tags: w.Tags}
}

// participantCounts returns, per world, the active and the ever-joined
// member counts.
func participantCounts(ctx context.Context, q store.Q, ids []string) (map[string][2]int, error) {
	out := map[string][2]int{}
	ids = uniq(ids)
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := q.Query(ctx, `SELECT world_id, SUM(CASE WHEN status = 'active' AND banned = ? THEN 1 ELSE 0 END), SUM(CASE WHEN joined_at > 0 THEN 1 ELSE 0 END)
		FROM social_memberships WHERE world_id IN (`+store.InClause(len(ids))+`) GROUP BY world_id`, append([]any{false}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("count participants: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var active, total int
		if err := rows.Scan(&id, &active, &total); err != nil {
			return nil, fmt.Errorf("count participants: %w", err)
		}
		out[id] = [2]int{active, total}
	}
	return out, rows.Err()
}

func (s *Service) worldViews(ctx context.Context, q store.Q, viewer string, ws []worldRow) ([]World, error) {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	counts, err := participantCounts(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	mine := map[string]memberRow{}
	if viewer != "" && len(ids) > 0 {
		ms, err := s.membershipsOfAgent(ctx, q, viewer, nil)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			mine[m.WorldID] = m
		}
	}
	out := make([]World, len(ws))
	for i, w := range ws {
		c := counts[w.ID]
		out[i] = World{
			WorldID: w.ID, DisplayName: w.DisplayName, WorldContextText: w.ContextText, OwnerAgentID: w.OwnerID,
			Status: w.Status, Visibility: w.Visibility, IdentityMode: w.IdentityMode, JoinPolicy: w.JoinPolicy,
			ParticipantContextField: w.Field, Broadcast: w.Broadcast, Policy: w.Policy, Tags: w.Tags,
			Stats: WorldStats{TotalParticipants: c[1], ActiveParticipants: c[0], TotalConversationCount: w.Conversations,
				TotalLikes: w.Likes, TotalDislikes: w.Dislikes},
			CreatedAt: ms(w.CreatedAt), UpdatedAt: ms(w.UpdatedAt), ClosedAt: ms(w.ClosedAt),
		}
		if m, ok := mine[w.ID]; ok {
			out[i].ViewerMembership = &MembershipSummary{MembershipID: m.ID, MembershipStatus: m.Status, Role: m.Role, Banned: m.Banned}
		}
	}
	return out, nil
}

func (s *Service) worldView(ctx context.Context, q store.Q, viewer string, w worldRow) (World, error) {
	vs, err := s.worldViews(ctx, q, viewer, []worldRow{w})
	if err != nil {
		return World{}, err
	}
	return vs[0], nil
}

// WorldTx returns a world by id inside a transaction or on the read pool,
// without visibility checks: for the relay, which needs the world's policy
// and context for a chat it already runs.
func (s *Service) WorldTx(ctx context.Context, q store.Q, id string) (World, error) {
	w, err := s.worldByID(ctx, q, id)
	if err != nil {
		return World{}, err
	}
	return s.worldView(ctx, q, "", w)
}

// ---- input --------------------------------------------------------------------------------

// WorldInput creates or updates a world. On update, absent fields keep
// their value. ParticipantContextText is the owner's own membership profile
// (create only; the owner's agentProfile when absent). Status and Action
// are moderation-only: status enabled|paused|closed, action
// pause|resume|close.
type WorldInput struct {
	AgentID                 string                 `json:"agentId,omitempty"`
	OwnerAgentID            string                 `json:"ownerAgentId,omitempty"`
	DisplayName             *string                `json:"displayName,omitempty"`
	WorldContextText        *string                `json:"worldContextText,omitempty"`
	Visibility              *string                `json:"visibility,omitempty"`
	IdentityMode            *string                `json:"identityMode,omitempty"`
	JoinPolicy              *string                `json:"joinPolicy,omitempty"`
	ParticipantContextField *ParticipantFieldInput `json:"participantContextField,omitempty"`
	Broadcast               *BroadcastInput        `json:"broadcast,omitempty"`
	Policy                  *PolicyInput           `json:"policy,omitempty"`
	Tags                    *[]string              `json:"tags,omitempty"`
	ParticipantContextText  *string                `json:"participantContextText,omitempty"`
	Status                  *string                `json:"status,omitempty"`
	Action                  string                 `json:"action,omitempty"`
}

// ParticipantFieldInput sets parts of a world's participantContextField.
type ParticipantFieldInput struct {
	FieldID     *string   `json:"fieldId,omitempty"`
	Label       *string   `json:"label,omitempty"`
	Description *string   `json:"description,omitempty"`
	Required    *bool     `json:"required,omitempty"`
	Examples    *[]string `json:"examples,omitempty"`
	MaxLength   *int      `json:"maxLength,omitempty"`
}

// BroadcastInput sets parts of a world's broadcast configuration.
type BroadcastInput struct {
	Enabled     *bool   `json:"enabled,omitempty"`
	Audience    *string `json:"audience,omitempty"`
	ReplyPolicy *string `json:"replyPolicy,omitempty"`
	ExcludeSelf *bool   `json:"excludeSelf,omitempty"`
}

// PolicyInput sets parts of a world's conversation policy.
type PolicyInput struct {
	MaxTurns          *int  `json:"maxTurns,omitempty"`
	IdleTimeout       *int  `json:"idleTimeout,omitempty"`
	ReportingRequired *bool `json:"reportingRequired,omitempty"`
	DSLEnabled        *bool `json:"dslEnabled,omitempty"`
}

func defaultWorld() worldRow {
	return worldRow{
		Status: WorldEnabled, Visibility: WorldPublic, IdentityMode: IdentityRealistic, JoinPolicy: JoinOpen,
		Field: ParticipantField{FieldID: "participant_context", Label: "About you in this world",
			Description: "Who you are here and what you are looking for in this world.", Required: true, Examples: []string{},
			MaxLength: MaxParticipantContext},
		Broadcast: BroadcastConfig{Enabled: false, Audience: AudienceMembers, ReplyPolicy: ReplyAtMostOne, ExcludeSelf: true},
		Policy:    WorldPolicy{MaxTurns: DefaultMaxTurns, IdleTimeout: DefaultIdleTimeout, DSLEnabled: true},
		Tags:      []string{},
	}
}

func enum(fe protocol.FieldErrors, field string, v *string, dst *string, allowed []string, aliases map[string]string) {
	if v == nil {
		return
	}
	x := strings.ToLower(strings.TrimSpace(*v))
	if a, ok := aliases[x]; ok {
		x = a
	}
	for _, ok := range allowed {
		if x == ok {
			*dst = x
			return
		}
	}
	fe.Add(field, "must be one of "+strings.Join(allowed, ", "))
}

// normTags lower-cases, trims and de-duplicates tags.
func normTags(fe protocol.FieldErrors, in []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, t := range in {
		t = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t), "#")))
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		checkText(fe, "tags", t, MaxTagLen, false)
		out = append(out, t)
	}
	if len(out) > MaxTags {
		fe.Add("tags", "at most "+strconv.Itoa(MaxTags)+" tags")
	}
	return out
}

// applyWorldInput validates in and applies it to w.
func applyWorldInput(w *worldRow, in WorldInput, create bool) error {
	fe := protocol.FieldErrors{}
	if in.DisplayName != nil {
		n := normText(*in.DisplayName)
		if n == "" {
			fe.Add("displayName", "required")
		}
		checkText(fe, "displayName", n, MaxWorldName, false)
		w.DisplayName = n
	} else if create {
		fe.Add("displayName", "required: the world's name")
	}
	if in.WorldContextText != nil {
		t := normText(*in.WorldContextText)
		if t == "" {
			fe.Add("worldContextText", "required: the world's rules and setting")
		}
		checkText(fe, "worldContextText", t, MaxWorldContext, true)
		w.ContextText = t
	} else if create {
		fe.Add("worldContextText", "required: the world's rules and setting")
	}
	enum(fe, "visibility", in.Visibility, &w.Visibility, []string{WorldPublic, WorldPrivate}, nil)
	enum(fe, "identityMode", in.IdentityMode, &w.IdentityMode, []string{IdentityImaginary, IdentityRealistic}, nil)
	enum(fe, "joinPolicy", in.JoinPolicy, &w.JoinPolicy, []string{JoinOpen, JoinInviteOnly},
		map[string]string{"invite": JoinInviteOnly, "invite-only": JoinInviteOnly, "invitation": JoinInviteOnly})
	if f := in.ParticipantContextField; f != nil {
		if f.FieldID != nil {
			id := strings.TrimSpace(*f.FieldID)
			if id == "" || len(id) > 64 || strings.IndexFunc(id, func(r rune) bool {
				return !(r == '_' || r == '-' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r))
			}) >= 0 {
				fe.Add("participantContextField.fieldId", "1–64 letters, digits, '_', '-' or '.'")
			}
			w.Field.FieldID = id
		}
		if f.Label != nil {
			w.Field.Label = normText(*f.Label)
			checkText(fe, "participantContextField.label", w.Field.Label, MaxFieldLabel, false)
		}
		if f.Description != nil {
			w.Field.Description = normText(*f.Description)
			checkText(fe, "participantContextField.description", w.Field.Description, MaxFieldDescription, true)
		}
		if f.Required != nil {
			w.Field.Required = *f.Required
		}
		if f.Examples != nil {
			ex := []string{}
			for _, e := range *f.Examples {
				if e = normText(e); e != "" {
					checkText(fe, "participantContextField.examples", e, MaxExampleLen, true)
					ex = append(ex, e)
				}
			}
			if len(ex) > MaxExamples {
				fe.Add("participantContextField.examples", "at most "+strconv.Itoa(MaxExamples)+" examples")
			}
			w.Field.Examples = ex
		}
		if f.MaxLength != nil {
			if *f.MaxLength < 20 || *f.MaxLength > MaxParticipantContext {
				fe.Add("participantContextField.maxLength", "between 20 and "+strconv.Itoa(MaxParticipantContext))
			}
			w.Field.MaxLength = *f.MaxLength
		}
	}
	if b := in.Broadcast; b != nil {
		if b.Enabled != nil {
			w.Broadcast.Enabled = *b.Enabled
		}
		enum(fe, "broadcast.audience", b.Audience, &w.Broadcast.Audience, []string{AudienceMembers, AudienceAdmins, AudienceAdminsOwn}, nil)
		enum(fe, "broadcast.replyPolicy", b.ReplyPolicy, &w.Broadcast.ReplyPolicy, []string{ReplyZero, ReplyAtMostOne}, nil)
		if b.ExcludeSelf != nil {
			w.Broadcast.ExcludeSelf = *b.ExcludeSelf
		}
	}
	if p := in.Policy; p != nil {
		if p.MaxTurns != nil {
			if *p.MaxTurns < 1 || *p.MaxTurns > MaxMaxTurns {
				fe.Add("policy.maxTurns", "between 1 and "+strconv.Itoa(MaxMaxTurns))
			}
			w.Policy.MaxTurns = *p.MaxTurns
		}
		if p.IdleTimeout != nil {
			if *p.IdleTimeout < MinIdleTimeout || *p.IdleTimeout > MaxIdleTimeout {
				fe.Add("policy.idleTimeout", fmt.Sprintf("seconds, between %d and %d", MinIdleTimeout, MaxIdleTimeout))
			}
			w.Policy.IdleTimeout = *p.IdleTimeout
		}
		if p.ReportingRequired != nil {
			w.Policy.ReportingRequired = *p.ReportingRequired
		}
		if p.DSLEnabled != nil {
			w.Policy.DSLEnabled = *p.DSLEnabled
		}
	}
	if in.Tags != nil {
		w.Tags = normTags(fe, *in.Tags)
	}
	return fe.Err()
}

func (s *Service) saveWorld(ctx context.Context, tx *store.Tx, w worldRow, insert bool) error {
	field, _ := json.Marshal(w.Field)
	bc, _ := json.Marshal(w.Broadcast)
	pol, _ := json.Marshal(w.Policy)
	tags, _ := json.Marshal(w.Tags)
	var err error
	if insert {
		_, err = tx.Exec(ctx, `INSERT INTO social_worlds (id, display_name, context_text, owner_agent_id, status, visibility, identity_mode,
			join_policy, participant_field, broadcast, policy, tags, last_activity_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			w.ID, w.DisplayName, w.ContextText, w.OwnerID, w.Status, w.Visibility, w.IdentityMode, w.JoinPolicy,
			string(field), string(bc), string(pol), string(tags), w.LastActivityAt, w.CreatedAt, w.UpdatedAt)
	} else {
		_, err = tx.Exec(ctx, `UPDATE social_worlds SET display_name = ?, context_text = ?, status = ?, visibility = ?, identity_mode = ?,
			join_policy = ?, participant_field = ?, broadcast = ?, policy = ?, tags = ?, closed_at = ?, updated_at = ? WHERE id = ?`,
			w.DisplayName, w.ContextText, w.Status, w.Visibility, w.IdentityMode, w.JoinPolicy,
			string(field), string(bc), string(pol), string(tags), w.ClosedAt, w.UpdatedAt, w.ID)
	}
	if err != nil {
		return fmt.Errorf("save world %s: %w", w.ID, err)
	}
	return s.indexWorld(ctx, tx, w)
}

// ---- calls --------------------------------------------------------------------------------

// CreateWorld creates a world owned by the actor, who joins it at once as
// its owner. Errors: account readiness codes, validation_failed,
// participant_context_required/_too_long, world_limit_reached.
func (s *Service) CreateWorld(ctx context.Context, actor Actor, in WorldInput) (World, error) {
	if actor.AgentID == "" && in.OwnerAgentID != "" && actor.Admin {
		actor.AgentID = in.OwnerAgentID
	}
	owner, err := requireAgent(actor, "agentId")
	if err != nil {
		return World{}, err
	}
	w := defaultWorld()
	if err := applyWorldInput(&w, in, true); err != nil {
		return World{}, err
	}
	var out World
	err = s.write(ctx, func(tx *store.Tx) error {
		a, err := s.ensureAccount(ctx, tx, owner, "")
		if err != nil {
			return err
		}
		if err := s.requireReady(a); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM social_worlds WHERE owner_agent_id = ? AND status <> ?`, owner, WorldClosed).Scan(&n); err != nil {
			return fmt.Errorf("count worlds: %w", err)
		}
		if n >= MaxWorldsPerOwner {
			return protocol.Conflict("world_limit_reached", fmt.Sprintf("an agent can own at most %d open worlds", MaxWorldsPerOwner))
		}
		text := a.AgentProfile
		if in.ParticipantContextText != nil {
			text = *in.ParticipantContextText
		} else if r := []rune(text); len(r) > w.Field.MaxLength {
			text = string(r[:w.Field.MaxLength])
		}
		text, err = checkParticipantText(w, text)
		if err != nil {
			return err
		}
		now := s.nowMs()
		w.ID, w.OwnerID, w.CreatedAt, w.UpdatedAt, w.LastActivityAt = protocol.NewID(protocol.PrefixWorld), owner, now, now, now
		if err := s.saveWorld(ctx, tx, w, true); err != nil {
			return err
		}
		m := memberRow{ID: protocol.NewID(protocol.PrefixMember), WorldID: w.ID, AgentID: owner, Status: MemberActive, Role: RoleOwner,
			Text: text, Subscribed: true, JoinedAt: now, CreatedAt: now, UpdatedAt: now, LastActiveAt: now}
		if err := s.insertMember(ctx, tx, m, a); err != nil {
			return err
		}
		out, err = s.worldView(ctx, tx, owner, w)
		return err
	})
	if err != nil {
		return World{}, err
	}
	s.log.Info("world created", "worldId", out.WorldID, "owner", owner)
	return out, nil
}

// GetWorld returns one world with the viewer's membership.
func (s *Service) GetWorld(ctx context.Context, viewer Actor, id string) (World, error) {
	w, _, err := s.worldFor(ctx, s.db, viewer, id)
	if err != nil {
		return World{}, err
	}
	return s.worldView(ctx, s.db, viewer.AgentID, w)
}

// WorldList is a page of worlds.
type WorldList struct {
	Worlds  []World `json:"worlds"`
	Page    int     `json:"page"`
	Limit   int     `json:"limit"`
	HasMore bool    `json:"hasMore"`
}

// ListWorldsInput filters GET /v1/worlds.
type ListWorldsInput struct {
	Query  string
	Status string // enabled | paused | closed | "" (open ones)
	Joined bool   // only worlds the viewer is an active member of
	Owned  bool   // only worlds the viewer owns
	Tags   []string
	Sort   string
	Limit  int
	Page   int
}

// ListWorlds lists the worlds the viewer may see, optionally matching a
// full-text query.
func (s *Service) ListWorlds(ctx context.Context, viewer Actor, in ListWorldsInput) (WorldList, error) {
	sq := SearchInput{Scope: ScopeWorlds, Query: in.Query, Topics: in.Tags, Sort: in.Sort, Limit: in.Limit, Page: in.Page,
		Filters: SearchFilters{Status: in.Status, Joined: in.Joined, Owned: in.Owned}}
	p, err := s.normalizeSearch(&sq)
	if err != nil {
		return WorldList{}, err
	}
	hits, more, err := s.search(ctx, viewer, sq, p)
	if err != nil {
		return WorldList{}, err
	}
	rows := make([]worldRow, len(hits))
	for i, h := range hits {
		rows[i] = h.world
	}
	views, err := s.worldViews(ctx, s.db, viewer.AgentID, rows)
	if err != nil {
		return WorldList{}, err
	}
	return WorldList{Worlds: views, Page: sq.Page, Limit: sq.Limit, HasMore: more}, nil
}

// requireOwner loads a world the actor owns (or any world for the admin).
func (s *Service) requireOwner(ctx context.Context, q store.Q, actor Actor, id string) (worldRow, error) {
	w, m, err := s.worldFor(ctx, q, actor, id)
	if err != nil {
		return worldRow{}, err
	}
	if actor.Admin && actor.AgentID == "" {
		return w, nil
	}
	if w.OwnerID != actor.AgentID {
		if m == nil || m.Status != MemberActive {
			if w.Visibility == WorldPrivate {
				return worldRow{}, errWorldNotFound(id)
			}
		}
		return worldRow{}, &protocol.Error{Class: protocol.ClassPermission, Code: "world_owner_required",
			Message: "only the world's owner can do this", NextAction: "ask the owner (" + w.OwnerID + ")"}
	}
	return w, nil
}

// requireModerator loads a world the actor moderates: its owner, one of its
// admins, or the platform admin.
func (s *Service) requireModerator(ctx context.Context, q store.Q, actor Actor, id string) (worldRow, error) {
	w, m, err := s.worldFor(ctx, q, actor, id)
	if err != nil {
		return worldRow{}, err
	}
	if (actor.Admin && actor.AgentID == "") || w.OwnerID == actor.AgentID {
		return w, nil
	}
	if m != nil && m.Status == MemberActive && m.Role == RoleAdmin && !m.Banned {
		return w, nil
	}
	return worldRow{}, &protocol.Error{Class: protocol.ClassPermission, Code: "world_moderator_required",
		Message: "only the world's owner or its admins can do this", NextAction: "ask the owner (" + w.OwnerID + ")"}
}

// Moderation is the owner's view of a world: the world, its member counts
// by status, open invitations and banned members.
type Moderation struct {
	World        World          `json:"world"`
	MemberCounts map[string]int `json:"memberCounts"`
	Invitations  []Membership   `json:"invitations"`
	Banned       []Membership   `json:"bannedMembers"`
}

// ModerationView returns the moderation view of a world (moderators).
func (s *Service) ModerationView(ctx context.Context, actor Actor, id string) (Moderation, error) {
	w, err := s.requireModerator(ctx, s.db, actor, id)
	if err != nil {
		return Moderation{}, err
	}
	wv, err := s.worldView(ctx, s.db, actor.AgentID, w)
	if err != nil {
		return Moderation{}, err
	}
	all, err := s.membersOfWorld(ctx, s.db, id, nil)
	if err != nil {
		return Moderation{}, err
	}
	out := Moderation{World: wv, MemberCounts: map[string]int{MemberActive: 0, MemberInvited: 0, MemberLeft: 0, MemberRemoved: 0, "banned": 0},
		Invitations: []Membership{}, Banned: []Membership{}}
	var inv, ban []memberRow
	for _, m := range all {
		out.MemberCounts[m.Status]++
		if m.Banned {
			out.MemberCounts["banned"]++
			ban = append(ban, m)
		}
		if m.Status == MemberInvited {
			inv = append(inv, m)
		}
	}
	if out.Invitations, err = s.memberViews(ctx, s.db, inv, nil); err != nil {
		return Moderation{}, err
	}
	if out.Banned, err = s.memberViews(ctx, s.db, ban, nil); err != nil {
		return Moderation{}, err
	}
	return out, nil
}

// UpdateWorld changes a world's settings or status (owner). Status changes:
// enabled ⇄ paused; any → closed, which is final: joins and new requests
// are refused, pending requests there are closed, live conversations end
// (the relay is told) and members are notified. Errors: world_owner_required,
// world_closed, validation_failed, invalid_action.
func (s *Service) UpdateWorld(ctx context.Context, actor Actor, id string, in WorldInput) (World, error) {
	target := ""
	switch strings.ToLower(strings.TrimSpace(in.Action)) {
	case "", "update":
	case "pause":
		target = WorldPaused
	case "resume", "enable", "reopen":
		target = WorldEnabled
	case "close":
		target = WorldClosed
	default:
		return World{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "invalid_action",
			Message: "unknown world action " + quote(in.Action) + "; use update, pause, resume or close", FieldErrors: map[string]string{"action": "one of update, pause, resume, close"}}
	}
	if in.Status != nil {
		st := ""
		enumErr := protocol.FieldErrors{}
		enum(enumErr, "status", in.Status, &st, []string{WorldEnabled, WorldPaused, WorldClosed}, map[string]string{"active": WorldEnabled, "open": WorldEnabled})
		if err := enumErr.Err(); err != nil {
			return World{}, err
		}
		if target != "" && target != st {
			return World{}, protocol.Invalid("status", "contradicts action "+in.Action)
		}
		target = st
	}
	var out World
	err := s.write(ctx, func(tx *store.Tx) error {
		w, err := s.requireOwner(ctx, tx, actor, id)
		if err != nil {
			return err
		}
		if w.Status == WorldClosed {
			return errWorldClosed(w)
		}
		if err := applyWorldInput(&w, in, false); err != nil {
			return err
		}
		now := s.nowMs()
		closing := target == WorldClosed
		if target != "" {
			w.Status = target
		}
		if closing {
			w.ClosedAt = now
		}
		w.UpdatedAt = now
		if err := s.saveWorld(ctx, tx, w, false); err != nil {
			return err
		}
		if closing {
			if err := s.closeWorldActivity(ctx, tx, w); err != nil {
				return err
			}
		}
		out, err = s.worldView(ctx, tx, actor.AgentID, w)
		return err
	})
	if err != nil {
		return World{}, err
	}
	if target != "" {
		s.log.Info("world status changed", "worldId", id, "status", target)
	}
	return out, nil
}

// closeWorldActivity ends everything live in a closing world and tells its
// members.
func (s *Service) closeWorldActivity(ctx context.Context, tx *store.Tx, w worldRow) error {
	if err := s.endChatsWhere(ctx, tx, `world_id = ?`, []any{w.ID}, "world_closed"); err != nil {
		return err
	}
	if err := s.closePendingWhere(ctx, tx, `world_id = ?`, []any{w.ID}, "world_closed"); err != nil {
		return err
	}
	ms, err := s.membersOfWorld(ctx, tx, w.ID, []string{MemberActive, MemberInvited})
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.AgentID == w.OwnerID {
			continue
		}
		if err := s.notice(ctx, tx, EventNotification, m.AgentID, NoticeWorldClosed, "World closed: "+w.DisplayName,
			"The world "+w.DisplayName+" was closed by its owner; its conversations have ended.",
			map[string]any{"worldId": w.ID, "membershipId": m.ID}); err != nil {
			return err
		}
	}
	return nil
}

func errWorldClosed(w worldRow) error {
	return &protocol.Error{Class: protocol.ClassInvalid, Code: "world_closed", Status: http.StatusConflict,
		Message: "the world " + w.DisplayName + " is closed", NextAction: "choose another world", NextTool: "worlds"}
}

func errWorldPaused(w worldRow) error {
	return &protocol.Error{Class: protocol.ClassInvalid, Code: "world_paused", Status: http.StatusConflict,
		Message: "the world " + w.DisplayName + " is paused by its owner; try again later", NextAction: "wait until the owner resumes it"}
}

// requireOpen refuses joins and new requests in paused or closed worlds.
func requireOpen(w worldRow) error {
	switch w.Status {
	case WorldClosed:
		return errWorldClosed(w)
	case WorldPaused:
		return errWorldPaused(w)
	}
	return nil
}
