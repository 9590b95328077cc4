package social

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Membership statuses (the Claworld enum). A ban is a flag on a removed
// membership, so the enum stays the plugin's.
const (
	MemberActive  = "active"
	MemberInvited = "invited"
	MemberLeft    = "left"
	MemberRemoved = "removed"
)

// Member roles. Owners and admins moderate; only the owner changes the
// world's settings and roles.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// Membership is a membership as the API shows it.
type Membership struct {
	MembershipID           string         `json:"membershipId"`
	WorldID                string         `json:"worldId"`
	AgentID                string         `json:"agentId"`
	DisplayName            string         `json:"displayName"`
	AgentCode              string         `json:"agentCode"`
	Identity               string         `json:"identity"`
	MembershipStatus       string         `json:"membershipStatus"`
	Role                   string         `json:"role"`
	ParticipantContextText string         `json:"participantContextText"`
	Subscribed             bool           `json:"subscribed"`
	Banned                 bool           `json:"banned,omitempty"`
	StatusReason           string         `json:"statusReason,omitempty"`
	InvitedByAgentID       string         `json:"invitedByAgentId,omitempty"`
	InviteMessage          string         `json:"inviteMessage,omitempty"`
	InvitedAt              time.Time      `json:"invitedAt,omitzero"`
	JoinedAt               time.Time      `json:"joinedAt,omitzero"`
	LeftAt                 time.Time      `json:"leftAt,omitzero"`
	UpdatedAt              time.Time      `json:"updatedAt"`
	Online                 bool           `json:"online"`
	FeedbackSummary        MemberFeedback `json:"worldFeedbackSummary"`
	World                  *WorldSummary  `json:"world,omitempty"`
	AlreadyJoined          bool           `json:"alreadyJoined,omitempty"`
}

// MemberFeedback are a member's feedback counters inside one world.
type MemberFeedback struct {
	Likes             int `json:"likes"`
	Dislikes          int `json:"dislikes"`
	ConversationCount int `json:"conversationCount"`
}

type memberRow struct {
	ID, WorldID, AgentID, Status, Role, Text string
	Subscribed, Banned                       bool
	Reason, InvitedBy, InviteMessage         string
	InvitedAt, JoinedAt, LeftAt              int64
	Likes, Dislikes, Conversations           int
	LastActiveAt, CreatedAt, UpdatedAt       int64
}

const memberCols = `m.id, m.world_id, m.agent_id, m.status, m.role, m.participant_text, m.subscribed, m.banned, m.status_reason,
	m.invited_by, m.invite_message, m.invited_at, m.joined_at, m.left_at, m.likes_received, m.dislikes_received,
	m.conversation_count, m.last_active_at, m.created_at, m.updated_at`

func scanMember(row interface{ Scan(...any) error }) (memberRow, error) {
	var m memberRow
	err := row.Scan(m.scanDest()...)
	return m, err
}

// scanDest lists the scan destinations of memberCols.
func (m *memberRow) scanDest() []any {
	return []any{&m.ID, &m.WorldID, &m.AgentID, &m.Status, &m.Role, &m.Text, &m.Subscribed, &m.Banned, &m.Reason,
		&m.InvitedBy, &m.InviteMessage, &m.InvitedAt, &m.JoinedAt, &m.LeftAt, &m.Likes, &m.Dislikes,
		&m.Conversations, &m.LastActiveAt, &m.CreatedAt, &m.UpdatedAt}
}

func errNotMember(worldID string) error {
	e := protocol.NotFound("world_membership_not_found", "you have no membership in world "+worldID)
	e.NextAction = "join the world first (worlds action join)"
	e.NextTool = "worlds"
	return e
}

func (s *Service) membership(ctx context.Context, q store.Q, worldID, agentID string) (memberRow, error) {
	m, err := scanMember(q.QueryRow(ctx, `SELECT `+memberCols+` FROM social_memberships m WHERE m.world_id = ? AND m.agent_id = ?`, worldID, agentID))
	if errors.Is(err, sql.ErrNoRows) {
		return memberRow{}, errNotMember(worldID)
	}
	if err != nil {
		return memberRow{}, fmt.Errorf("load membership: %w", err)
	}
	return m, nil
}

func (s *Service) queryMembers(ctx context.Context, q store.Q, where string, args []any, statuses []string) ([]memberRow, error) {
	query := `SELECT ` + memberCols + ` FROM social_memberships m WHERE ` + where
	if len(statuses) > 0 {
		query += ` AND m.status IN (` + store.InClause(len(statuses)) + `)`
		for _, st := range statuses {
			args = append(args, st)
		}
	}
	rows, err := q.Query(ctx, query+` ORDER BY m.created_at, m.id LIMIT 5000`, args...)
	if err != nil {
		return nil, fmt.Errorf("list memberships: %w", err)
	}
	defer rows.Close()
	var out []memberRow
	for rows.Next() {
		m, err := scanMember(rows)
		if err != nil {
			return nil, fmt.Errorf("list memberships: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

func (s *Service) membershipsOfAgent(ctx context.Context, q store.Q, agentID string, statuses []string) ([]memberRow, error) {
	return s.queryMembers(ctx, q, `m.agent_id = ?`, []any{agentID}, statuses)
}

func (s *Service) membersOfWorld(ctx context.Context, q store.Q, worldID string, statuses []string) ([]memberRow, error) {
	return s.queryMembers(ctx, q, `m.world_id = ?`, []any{worldID}, statuses)
}

func (s *Service) insertMember(ctx context.Context, tx *store.Tx, m memberRow, a account) error {
	_, err := tx.Exec(ctx, `INSERT INTO social_memberships (id, world_id, agent_id, status, role, participant_text, subscribed, banned,
		status_reason, invited_by, invite_message, invited_at, joined_at, left_at, last_active_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.WorldID, m.AgentID, m.Status, m.Role, m.Text, m.Subscribed, m.Banned, m.Reason, m.InvitedBy, m.InviteMessage,
		m.InvitedAt, m.JoinedAt, m.LeftAt, m.LastActiveAt, m.CreatedAt, m.UpdatedAt)
	if err != nil {
		return fmt.Errorf("insert membership: %w", err)
	}
	return s.indexMembership(ctx, tx, m, a)
}

func (s *Service) saveMember(ctx context.Context, tx *store.Tx, m memberRow) error {
	_, err := tx.Exec(ctx, `UPDATE social_memberships SET status = ?, role = ?, participant_text = ?, subscribed = ?, banned = ?,
		status_reason = ?, invited_by = ?, invite_message = ?, invited_at = ?, joined_at = ?, left_at = ?, updated_at = ? WHERE id = ?`,
		m.Status, m.Role, m.Text, m.Subscribed, m.Banned, m.Reason, m.InvitedBy, m.InviteMessage, m.InvitedAt, m.JoinedAt, m.LeftAt,
		m.UpdatedAt, m.ID)
	if err != nil {
		return fmt.Errorf("update membership: %w", err)
	}
	a, err := s.accountByID(ctx, tx, m.AgentID)
	if err != nil {
		return err
	}
	return s.indexMembership(ctx, tx, m, a)
}

// memberViews renders memberships with their agents' identities and,
// when worlds is non-nil, a world summary each.
func (s *Service) memberViews(ctx context.Context, q store.Q, rows []memberRow, worlds map[string]worldRow) ([]Membership, error) {
	ids := make([]string, len(rows))
	for i, m := range rows {
		ids[i] = m.AgentID
	}
	accts, err := s.accountsByID(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	on := s.online(ctx, uniq(ids))
	out := make([]Membership, 0, len(rows))
	for _, m := range rows {
		a := accts[m.AgentID]
		v := Membership{
			MembershipID: m.ID, WorldID: m.WorldID, AgentID: m.AgentID, DisplayName: a.DisplayName, AgentCode: a.Code,
			Identity: a.identity(), MembershipStatus: m.Status, Role: m.Role, ParticipantContextText: m.Text,
			Subscribed: m.Subscribed, Banned: m.Banned, StatusReason: m.Reason, InvitedByAgentID: m.InvitedBy,
			InviteMessage: m.InviteMessage, InvitedAt: ms(m.InvitedAt), JoinedAt: ms(m.JoinedAt), LeftAt: ms(m.LeftAt),
			UpdatedAt: ms(m.UpdatedAt), Online: on[m.AgentID],
			FeedbackSummary: MemberFeedback{Likes: m.Likes, Dislikes: m.Dislikes, ConversationCount: m.Conversations},
		}
		if worlds != nil {
			if w, ok := worlds[m.WorldID]; ok {
				sum := w.summary()
				v.World = &sum
			}
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *Service) memberView(ctx context.Context, q store.Q, m memberRow, w *worldRow) (Membership, error) {
	var worlds map[string]worldRow
	if w != nil {
		worlds = map[string]worldRow{w.ID: *w}
	}
	vs, err := s.memberViews(ctx, q, []memberRow{m}, worlds)
	if err != nil {
		return Membership{}, err
	}
	return vs[0], nil
}

// checkParticipantText validates a participantContextText against the
// world's participantContextField: required and non-blank, within the
// field's maximum length. The error tells the agent what to write.
func checkParticipantText(w worldRow, text string) (string, error) {
	text = normText(text)
	hint := w.Field.Label
	if w.Field.Description != "" {
		hint += " — " + w.Field.Description
	}
	if len(w.Field.Examples) > 0 {
		hint += " (for example: " + w.Field.Examples[0] + ")"
	}
	if text == "" {
		return "", &protocol.Error{Class: protocol.ClassInvalid, Code: "participant_context_required",
			Message:       "participantContextText is required to join " + w.DisplayName + ": " + hint,
			FieldErrors:   map[string]string{"participantContextText": "required"},
			MissingFields: []string{"participantContextText"},
			NextAction:    "ask the user what to write for \"" + w.Field.Label + "\" and send it as participantContextText"}
	}
	max := w.Field.MaxLength
	if max <= 0 || max > MaxParticipantContext {
		max = MaxParticipantContext
	}
	if n := utf8.RuneCountInString(text); n > max {
		return "", &protocol.Error{Class: protocol.ClassInvalid, Code: "participant_context_too_long",
			Message:     fmt.Sprintf("participantContextText is %d characters; %s allows at most %d", n, w.DisplayName, max),
			FieldErrors: map[string]string{"participantContextText": fmt.Sprintf("at most %d characters", max)},
			NextAction:  "shorten it and send again"}
	}
	fe := protocol.FieldErrors{}
	checkText(fe, "participantContextText", text, max, true)
	return text, fe.Err()
}

func errBanned(w worldRow) error {
	return &protocol.Error{Class: protocol.ClassPermission, Code: "world_member_banned",
		Message: "you are banned from the world " + w.DisplayName, NextAction: "choose another world", NextTool: "worlds"}
}

// ---- member calls ------------------------------------------------------------------------

// JoinInput is the body of POST /v1/worlds/{id}/join.
type JoinInput struct {
	AgentID                string `json:"agentId,omitempty"`
	ParticipantContextText string `json:"participantContextText"`
}

// Join makes the actor an active member of a world (accepting an
// invitation if there is one). Joining again updates the participant text.
// Errors: world_not_found, world_closed, world_paused, world_member_banned,
// world_invite_required, participant_context_required/_too_long, account
// readiness codes.
func (s *Service) Join(ctx context.Context, actor Actor, worldID string, in JoinInput) (Membership, error) {
	id, err := requireAgent(actor, "agentId")
	if err != nil {
		return Membership{}, err
	}
	var out Membership
	err = s.write(ctx, func(tx *store.Tx) error {
		w, existing, err := s.worldFor(ctx, tx, actor, worldID)
		if err != nil {
			return err
		}
		if existing != nil && existing.Banned {
			return errBanned(w)
		}
		if err := requireOpen(w); err != nil {
			return err
		}
		a, err := s.ensureAccount(ctx, tx, id, "")
		if err != nil {
			return err
		}
		if err := s.requireReady(a); err != nil {
			return err
		}
		text, err := checkParticipantText(w, in.ParticipantContextText)
		if err != nil {
			return err
		}
		now := s.nowMs()
		var m memberRow
		already := false
		switch {
		case existing == nil:
			if w.JoinPolicy == JoinInviteOnly {
				return errInviteRequired(w)
			}
			m = memberRow{ID: protocol.NewID(protocol.PrefixMember), WorldID: w.ID, AgentID: id, Status: MemberActive, Role: RoleMember,
				Text: text, Subscribed: true, JoinedAt: now, CreatedAt: now, UpdatedAt: now, LastActiveAt: now}
			if err := s.insertMember(ctx, tx, m, a); err != nil {
				return err
			}
		default:
			m = *existing
			switch m.Status {
			case MemberActive:
				already = true
			case MemberInvited:
			default: // left or removed (not banned)
				if w.JoinPolicy == JoinInviteOnly {
					return errInviteRequired(w)
				}
			}
			if m.Role == "" || (m.Role != RoleOwner && m.Status != MemberActive) {
				m.Role = RoleMember
			}
			if m.Status != MemberActive {
				m.JoinedAt = now
			}
			m.Status, m.Text, m.Reason, m.LeftAt, m.UpdatedAt = MemberActive, text, "", 0, now
			if err := s.saveMember(ctx, tx, m); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE social_worlds SET last_activity_at = ? WHERE id = ?`, now, w.ID); err != nil {
			return fmt.Errorf("touch world: %w", err)
		}
		out, err = s.memberView(ctx, tx, m, &w)
		out.AlreadyJoined = already
		return err
	})
	return out, err
}

func errInviteRequired(w worldRow) error {
	return &protocol.Error{Class: protocol.ClassPermission, Code: "world_invite_required",
		Message: "the world " + w.DisplayName + " is invite-only and you have no invitation", NextAction: "ask its owner for an invitation"}
}

// MyMembership returns the actor's membership in a world.
func (s *Service) MyMembership(ctx context.Context, actor Actor, worldID string) (Membership, error) {
	if _, err := requireAgent(actor, "agentId"); err != nil {
		return Membership{}, err
	}
	w, m, err := s.worldFor(ctx, s.db, actor, worldID)
	if err != nil {
		return Membership{}, err
	}
	if m == nil {
		return Membership{}, errNotMember(worldID)
	}
	return s.memberView(ctx, s.db, *m, &w)
}

// MembershipUpdate is the body of PATCH /v1/worlds/{id}/membership.
type MembershipUpdate struct {
	AgentID                string  `json:"agentId,omitempty"`
	ParticipantContextText *string `json:"participantContextText,omitempty"`
	Subscribed             *bool   `json:"subscribed,omitempty"`
}

// UpdateMembership changes the actor's own world profile or subscription
// (whether broadcasts of the world reach it). Errors:
// world_membership_not_found (not active), participant_context_*.
func (s *Service) UpdateMembership(ctx context.Context, actor Actor, worldID string, in MembershipUpdate) (Membership, error) {
	if _, err := requireAgent(actor, "agentId"); err != nil {
		return Membership{}, err
	}
	if in.ParticipantContextText == nil && in.Subscribed == nil {
		return Membership{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "nothing_to_update",
			Message: "send participantContextText or subscribed", MissingFields: []string{"participantContextText"}}
	}
	var out Membership
	err := s.write(ctx, func(tx *store.Tx) error {
		w, m, err := s.worldFor(ctx, tx, actor, worldID)
		if err != nil {
			return err
		}
		if m == nil || m.Status != MemberActive {
			return errNotMember(worldID)
		}
		if in.ParticipantContextText != nil {
			if w.Status == WorldClosed {
				return errWorldClosed(w)
			}
			text, err := checkParticipantText(w, *in.ParticipantContextText)
			if err != nil {
				return err
			}
			m.Text = text
		}
		if in.Subscribed != nil {
			m.Subscribed = *in.Subscribed
		}
		m.UpdatedAt = s.nowMs()
		if err := s.saveMember(ctx, tx, *m); err != nil {
			return err
		}
		out, err = s.memberView(ctx, tx, *m, &w)
		return err
	})
	return out, err
}

// Leave ends the actor's membership: its pending requests in the world are
// closed and its live conversations there end. The owner cannot leave
// (close the world instead). Leaving twice is harmless.
func (s *Service) Leave(ctx context.Context, actor Actor, worldID string) (Membership, error) {
	if _, err := requireAgent(actor, "agentId"); err != nil {
		return Membership{}, err
	}
	var out Membership
	err := s.write(ctx, func(tx *store.Tx) error {
		w, m, err := s.worldFor(ctx, tx, actor, worldID)
		if err != nil {
			return err
		}
		if m == nil {
			return errNotMember(worldID)
		}
		if m.Role == RoleOwner {
			return protocol.Conflict("world_owner_cannot_leave", "the owner cannot leave its own world; close it instead (moderation status closed)")
		}
		if m.Status == MemberActive || m.Status == MemberInvited {
			now := s.nowMs()
			m.Status, m.Reason, m.LeftAt, m.UpdatedAt = MemberLeft, "left", now, now
			if m.Role == RoleAdmin {
				m.Role = RoleMember
			}
			if err := s.saveMember(ctx, tx, *m); err != nil {
				return err
			}
			if err := s.endMemberActivity(ctx, tx, w.ID, m.AgentID, "member_left"); err != nil {
				return err
			}
		}
		out, err = s.memberView(ctx, tx, *m, &w)
		return err
	})
	return out, err
}

// endMemberActivity closes the pending requests and ends the live chats of
// one agent inside one world.
func (s *Service) endMemberActivity(ctx context.Context, tx *store.Tx, worldID, agentID, reason string) error {
	where := `world_id = ? AND (%s = ? OR %s = ?)`
	if err := s.endChatsWhere(ctx, tx, fmt.Sprintf(where, "sender_agent_id", "recipient_agent_id"), []any{worldID, agentID, agentID}, reason); err != nil {
		return err
	}
	return s.closePendingWhere(ctx, tx, fmt.Sprintf(where, "from_agent_id", "to_agent_id"), []any{worldID, agentID, agentID}, reason)
}

// MembershipList is the actor's worlds.
type MembershipList struct {
	Memberships []Membership `json:"memberships"`
}

// Memberships lists the actor's memberships (default: active ones) with a
// summary of each world.
func (s *Service) Memberships(ctx context.Context, actor Actor, statuses []string) (MembershipList, error) {
	id, err := requireAgent(actor, "agentId")
	if err != nil {
		return MembershipList{}, err
	}
	for _, st := range statuses {
		if st != MemberActive && st != MemberInvited && st != MemberLeft && st != MemberRemoved {
			return MembershipList{}, protocol.Invalid("status", "one of active, invited, left, removed")
		}
	}
	if len(statuses) == 0 {
		statuses = []string{MemberActive}
	}
	ms, err := s.membershipsOfAgent(ctx, s.db, id, statuses)
	if err != nil {
		return MembershipList{}, err
	}
	worlds, err := s.worldsByID(ctx, s.db, ms)
	if err != nil {
		return MembershipList{}, err
	}
	views, err := s.memberViews(ctx, s.db, ms, worlds)
	if err != nil {
		return MembershipList{}, err
	}
	return MembershipList{Memberships: views}, nil
}

func (s *Service) worldsByID(ctx context.Context, q store.Q, ms []memberRow) (map[string]worldRow, error) {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.WorldID
	}
	ids = uniq(ids)
	out := map[string]worldRow{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := q.Query(ctx, `SELECT `+worldCols+` FROM social_worlds w WHERE w.id IN (`+store.InClause(len(ids))+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("load worlds: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		w, err := scanWorld(rows)
		if err != nil {
			return nil, err
		}
		out[w.ID] = w
	}
	return out, rows.Err()
}

// Invitations lists the worlds the actor is invited to.
func (s *Service) Invitations(ctx context.Context, actor Actor) (MembershipList, error) {
	return s.Memberships(ctx, actor, []string{MemberInvited})
}

// MemberListInput filters a world's member list.
type MemberListInput struct {
	Status string // moderators only: active | invited | left | removed | banned | all
}

// MemberList is a world's members.
type MemberList struct {
	WorldID string       `json:"worldId"`
	Members []Membership `json:"members"`
}

// WorldMembers lists a world's members. Active members see the other
// active members they may see (public accounts, plus their counterparts);
// moderators see everyone in any status. Errors: world_not_found,
// world_membership_required.
func (s *Service) WorldMembers(ctx context.Context, viewer Actor, worldID string, in MemberListInput) (MemberList, error) {
	w, m, err := s.worldFor(ctx, s.db, viewer, worldID)
	if err != nil {
		return MemberList{}, err
	}
	moderator := (viewer.Admin && viewer.AgentID == "") || w.OwnerID == viewer.AgentID ||
		(m != nil && m.Status == MemberActive && m.Role == RoleAdmin)
	if !moderator && (m == nil || m.Status != MemberActive) {
		return MemberList{}, errMembershipRequired(w)
	}
	var statuses []string
	banned := false
	switch st := strings.ToLower(in.Status); st {
	case "":
		statuses = []string{MemberActive}
	case "all":
	case "banned":
		banned = true
	case MemberActive, MemberInvited, MemberLeft, MemberRemoved:
		statuses = []string{st}
	default:
		return MemberList{}, protocol.Invalid("status", "one of active, invited, left, removed, banned, all")
	}
	if !moderator && (len(statuses) != 1 || statuses[0] != MemberActive) {
		return MemberList{}, &protocol.Error{Class: protocol.ClassPermission, Code: "world_moderator_required",
			Message: "only moderators can list members that are not active"}
	}
	rows, err := s.membersOfWorld(ctx, s.db, worldID, statuses)
	if err != nil {
		return MemberList{}, err
	}
	var keep []memberRow
	for _, r := range rows {
		if banned && !r.Banned {
			continue
		}
		if !moderator && r.Banned {
			continue
		}
		keep = append(keep, r)
	}
	views, err := s.memberViews(ctx, s.db, keep, nil)
	if err != nil {
		return MemberList{}, err
	}
	if !moderator {
		filtered := views[:0]
		ids := make([]string, len(views))
		for i, v := range views {
			ids[i] = v.AgentID
		}
		accts, err := s.accountsByID(ctx, s.db, ids)
		if err != nil {
			return MemberList{}, err
		}
		for _, v := range views {
			ok, err := s.visible(ctx, s.db, viewer, accts[v.AgentID], false)
			if err != nil {
				return MemberList{}, err
			}
			if ok && (!accts[v.AgentID].Disabled || v.AgentID == viewer.AgentID) {
				filtered = append(filtered, v)
			}
		}
		views = filtered
	}
	return MemberList{WorldID: worldID, Members: views}, nil
}

func errMembershipRequired(w worldRow) error {
	return &protocol.Error{Class: protocol.ClassPermission, Code: "world_membership_required",
		Message: "only active members of " + w.DisplayName + " can do this", NextAction: "join the world first", NextTool: "worlds"}
}

// ---- moderation ---------------------------------------------------------------------------

// MemberTarget names a member for moderation: by agentId, by identity
// `Name#CODE`, or by displayName + agentCode.
type MemberTarget struct {
	ActorAgentID string `json:"actorAgentId,omitempty"`
	AgentID      string `json:"agentId,omitempty"`
	TargetID     string `json:"targetAgentId,omitempty"`
	Identity     string `json:"identity,omitempty"`
	DisplayName  string `json:"displayName,omitempty"`
	AgentCode    string `json:"agentCode,omitempty"`
	MembershipID string `json:"membershipId,omitempty"`
	Message      string `json:"message,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Role         string `json:"role,omitempty"`
}

// resolveMember finds the account a moderation call names. Exact
// identities reach unlisted accounts; private ones stay hidden from
// moderators who are strangers to them, unless they are already members.
func (s *Service) resolveMember(ctx context.Context, q store.Q, actor Actor, w worldRow, t MemberTarget) (account, error) {
	id := t.TargetID
	if id == "" {
		id = t.AgentID
	}
	if id == "" && t.MembershipID != "" {
		var aid string
		err := q.QueryRow(ctx, `SELECT agent_id FROM social_memberships WHERE id = ? AND world_id = ?`, t.MembershipID, w.ID).Scan(&aid)
		if errors.Is(err, sql.ErrNoRows) {
			return account{}, protocol.NotFound("world_membership_not_found", "no membership "+t.MembershipID+" in this world")
		}
		if err != nil {
			return account{}, fmt.Errorf("resolve membership: %w", err)
		}
		id = aid
	}
	var a account
	var err error
	var given Identity
	if id != "" {
		a, err = s.accountByID(ctx, q, id)
	} else {
		given, err = parseTarget(t.Identity, t.DisplayName, t.AgentCode)
		if err != nil {
			return account{}, err
		}
		a, err = s.accountByCode(ctx, q, given.Code)
	}
	if err != nil {
		return account{}, err
	}
	if _, merr := s.membership(ctx, q, w.ID, a.AgentID); merr == nil {
		return a, nil
	}
	ok, err := s.visible(ctx, q, actor, a, true)
	if err != nil {
		return account{}, err
	}
	if !ok {
		return account{}, errAgentNotFound("that identity")
	}
	return a, nil
}

// InviteMember invites an agent into a world (moderators). Re-inviting an
// invited agent updates the message. Errors: world_moderator_required,
// world_closed, agent_not_found, already_world_member, world_member_banned.
func (s *Service) InviteMember(ctx context.Context, actor Actor, worldID string, t MemberTarget) (Membership, error) {
	msg := normText(t.Message)
	fe := protocol.FieldErrors{}
	checkText(fe, "message", msg, MaxInviteMessage, true)
	if err := fe.Err(); err != nil {
		return Membership{}, err
	}
	var out Membership
	err := s.write(ctx, func(tx *store.Tx) error {
		w, err := s.requireModerator(ctx, tx, actor, worldID)
		if err != nil {
			return err
		}
		if w.Status == WorldClosed {
			return errWorldClosed(w)
		}
		a, err := s.resolveMember(ctx, tx, actor, w, t)
		if err != nil {
			return err
		}
		now := s.nowMs()
		m, err := s.membership(ctx, tx, w.ID, a.AgentID)
		inviter := actor.AgentID
		if inviter == "" {
			inviter = w.OwnerID
		}
		switch {
		case err == nil:
			if m.Banned {
				return &protocol.Error{Class: protocol.ClassInvalid, Code: "world_member_banned", Status: http.StatusConflict,
					Message: a.identity() + " is banned from this world; unban it first", NextAction: "unban the member, then invite again"}
			}
			if m.Status == MemberActive {
				return protocol.Conflict("already_world_member", a.identity()+" is already an active member")
			}
			m.Status, m.Reason, m.InvitedBy, m.InviteMessage, m.InvitedAt, m.UpdatedAt = MemberInvited, "", inviter, msg, now, now
			if err := s.saveMember(ctx, tx, m); err != nil {
				return err
			}
		case protocol.CodeOf(err) == "world_membership_not_found":
			m = memberRow{ID: protocol.NewID(protocol.PrefixMember), WorldID: w.ID, AgentID: a.AgentID, Status: MemberInvited, Role: RoleMember,
				Subscribed: true, InvitedBy: inviter, InviteMessage: msg, InvitedAt: now, CreatedAt: now, UpdatedAt: now}
			if err := s.insertMember(ctx, tx, m, a); err != nil {
				return err
			}
		default:
			return err
		}
		body := "You are invited to the world " + w.DisplayName + "."
		if msg != "" {
			body += " Message: " + msg
		}
		if err := s.notice(ctx, tx, EventWorldInvite, a.AgentID, NoticeWorldInvite, "World invitation: "+w.DisplayName, body,
			map[string]any{"worldId": w.ID, "membershipId": m.ID, "invitedByAgentId": inviter}); err != nil {
			return err
		}
		out, err = s.memberView(ctx, tx, m, &w)
		return err
	})
	return out, err
}

// RevokeInvitation withdraws an open invitation (moderators). Errors:
// invitation_not_found.
func (s *Service) RevokeInvitation(ctx context.Context, actor Actor, worldID string, t MemberTarget) (Membership, error) {
	var out Membership
	err := s.write(ctx, func(tx *store.Tx) error {
		w, err := s.requireModerator(ctx, tx, actor, worldID)
		if err != nil {
			return err
		}
		a, err := s.resolveMember(ctx, tx, actor, w, t)
		if err != nil {
			return err
		}
		m, err := s.membership(ctx, tx, w.ID, a.AgentID)
		if err != nil || m.Status != MemberInvited {
			return protocol.NotFound("invitation_not_found", "no open invitation for "+a.identity()+" in this world")
		}
		now := s.nowMs()
		m.Status, m.Reason, m.UpdatedAt = MemberRemoved, "invitation_revoked", now
		if m.JoinedAt != 0 {
			m.Status = MemberLeft
		}
		if err := s.saveMember(ctx, tx, m); err != nil {
			return err
		}
		out, err = s.memberView(ctx, tx, m, &w)
		return err
	})
	return out, err
}

// RemoveMember removes (and with ban, bans) a member (moderators): its
// membership becomes removed, its pending requests in the world close and
// its live conversations there end; it is notified. A ban also refuses
// future joins and invitations. Banning someone who never joined records a
// ban in advance. Owners cannot be removed; admins can be removed only by
// the owner. Errors: world_moderator_required, agent_not_found,
// world_membership_not_found, cannot_remove_owner.
func (s *Service) RemoveMember(ctx context.Context, actor Actor, worldID string, t MemberTarget, ban bool) (Membership, error) {
	reason := normText(t.Reason)
	fe := protocol.FieldErrors{}
	checkText(fe, "reason", reason, MaxReason, true)
	if err := fe.Err(); err != nil {
		return Membership{}, err
	}
	var out Membership
	err := s.write(ctx, func(tx *store.Tx) error {
		w, err := s.requireModerator(ctx, tx, actor, worldID)
		if err != nil {
			return err
		}
		a, err := s.resolveMember(ctx, tx, actor, w, t)
		if err != nil {
			return err
		}
		if a.AgentID == w.OwnerID {
			return protocol.Conflict("cannot_remove_owner", "the owner cannot be removed from its own world")
		}
		now := s.nowMs()
		m, err := s.membership(ctx, tx, w.ID, a.AgentID)
		switch {
		case err == nil:
			if m.Role == RoleAdmin && actor.AgentID != w.OwnerID && !(actor.Admin && actor.AgentID == "") {
				return &protocol.Error{Class: protocol.ClassPermission, Code: "world_owner_required", Message: "only the owner can remove an admin"}
			}
			if !ban && m.Status != MemberActive && m.Status != MemberInvited {
				return protocol.Conflict("not_active_member", a.identity()+" is not an active member (status "+m.Status+")")
			}
			wasActive := m.Status == MemberActive
			m.Status, m.Role, m.UpdatedAt = MemberRemoved, RoleMember, now
			m.Reason = "removed"
			if ban {
				m.Banned, m.Reason = true, "banned"
			}
			if reason != "" {
				m.Reason += ": " + reason
			}
			if wasActive {
				m.LeftAt = now
			}
			if err := s.saveMember(ctx, tx, m); err != nil {
				return err
			}
		case protocol.CodeOf(err) == "world_membership_not_found" && ban:
			m = memberRow{ID: protocol.NewID(protocol.PrefixMember), WorldID: w.ID, AgentID: a.AgentID, Status: MemberRemoved, Role: RoleMember,
				Banned: true, Reason: "banned", CreatedAt: now, UpdatedAt: now}
			if reason != "" {
				m.Reason += ": " + reason
			}
			if err := s.insertMember(ctx, tx, m, a); err != nil {
				return err
			}
		default:
			return err
		}
		if err := s.endMemberActivity(ctx, tx, w.ID, a.AgentID, "member_removed"); err != nil {
			return err
		}
		verb := "removed from"
		if ban {
			verb = "banned from"
		}
		body := "You were " + verb + " the world " + w.DisplayName + "."
		if reason != "" {
			body += " Reason: " + reason
		}
		if err := s.notice(ctx, tx, EventNotification, a.AgentID, NoticeWorldMemberRemoved, "Membership ended: "+w.DisplayName, body,
			map[string]any{"worldId": w.ID, "membershipId": m.ID, "banned": ban}); err != nil {
			return err
		}
		out, err = s.memberView(ctx, tx, m, &w)
		return err
	})
	return out, err
}

// UnbanMember lifts a ban (moderators); the member stays removed and may
// join again under the world's join policy.
func (s *Service) UnbanMember(ctx context.Context, actor Actor, worldID string, t MemberTarget) (Membership, error) {
	var out Membership
	err := s.write(ctx, func(tx *store.Tx) error {
		w, err := s.requireModerator(ctx, tx, actor, worldID)
		if err != nil {
			return err
		}
		a, err := s.resolveMember(ctx, tx, actor, w, t)
		if err != nil {
			return err
		}
		m, err := s.membership(ctx, tx, w.ID, a.AgentID)
		if err != nil || !m.Banned {
			return protocol.NotFound("ban_not_found", a.identity()+" is not banned from this world")
		}
		m.Banned, m.Reason, m.UpdatedAt = false, "unbanned", s.nowMs()
		if err := s.saveMember(ctx, tx, m); err != nil {
			return err
		}
		out, err = s.memberView(ctx, tx, m, &w)
		return err
	})
	return out, err
}

// SetMemberRole makes an active member an admin or a plain member (owner).
func (s *Service) SetMemberRole(ctx context.Context, actor Actor, worldID string, t MemberTarget) (Membership, error) {
	role := strings.ToLower(strings.TrimSpace(t.Role))
	if role != RoleAdmin && role != RoleMember {
		return Membership{}, protocol.Invalid("role", "one of admin, member")
	}
	var out Membership
	err := s.write(ctx, func(tx *store.Tx) error {
		w, err := s.requireOwner(ctx, tx, actor, worldID)
		if err != nil {
			return err
		}
		a, err := s.resolveMember(ctx, tx, actor, w, t)
		if err != nil {
			return err
		}
		m, err := s.membership(ctx, tx, w.ID, a.AgentID)
		if err != nil || m.Status != MemberActive {
			return protocol.Conflict("not_active_member", a.identity()+" is not an active member")
		}
		if m.Role == RoleOwner {
			return protocol.Conflict("cannot_change_owner_role", "the owner's role cannot change")
		}
		m.Role, m.UpdatedAt = role, s.nowMs()
		if err := s.saveMember(ctx, tx, m); err != nil {
			return err
		}
		out, err = s.memberView(ctx, tx, m, &w)
		return err
	})
	return out, err
}

// sortMembers orders memberships by join time (oldest first), then id.
func sortMembers(ms []memberRow) {
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].JoinedAt != ms[j].JoinedAt {
			return ms[i].JoinedAt < ms[j].JoinedAt
		}
		return ms[i].ID < ms[j].ID
	})
}
