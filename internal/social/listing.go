package social

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// ChatFilter narrows ListChats. Every field is optional.
type ChatFilter struct {
	// Status is a chat status, or "live" for opening, active and ending.
	Status  string
	WorldID string
	Limit   int // default 50, at most 500
}

// ListChats lists chats newest first, for operators' views: the platform
// admin sees every chat, an agent only the chats it takes part in.
// Errors: invalid_status.
func (s *Service) ListChats(ctx context.Context, actor Actor, f ChatFilter) ([]Chat, error) {
	var conds []string
	var args []any
	if !(actor.Admin && actor.AgentID == "") {
		if actor.AgentID == "" {
			return nil, protocol.Forbidden("agent_required", "chats are listed for an agent or the admin")
		}
		conds = append(conds, "(c.sender_agent_id = ? OR c.recipient_agent_id = ?)")
		args = append(args, actor.AgentID, actor.AgentID)
	}
	switch st := strings.ToLower(f.Status); {
	case st == "":
	case st == "live":
		conds = append(conds, "c.status IN (?, ?, ?)")
		args = append(args, ChatOpening, ChatActive, ChatEnding)
	case contains(chatStatuses, st):
		conds = append(conds, "c.status = ?")
		args = append(args, st)
	default:
		return nil, protocol.Invalid("status", "a chat status ("+strings.Join(chatStatuses, ", ")+") or live")
	}
	if f.WorldID != "" {
		conds = append(conds, "c.world_id = ?")
		args = append(args, f.WorldID)
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	where := "1 = 1"
	if len(conds) > 0 {
		where = strings.Join(conds, " AND ")
	}
	out, err := s.queryChats(ctx, s.db, where, args, fmt.Sprintf(" ORDER BY c.updated_at DESC, c.chat_request_id DESC LIMIT %d", f.Limit))
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []Chat{}
	}
	return out, nil
}

// PendingRequest is a chat request still waiting for its recipient, as a
// world's moderators see it. The sender's brief is left out: it is written
// for the sender's own runtime.
type PendingRequest struct {
	ChatRequestID string    `json:"chatRequestId"`
	FromAgentID   string    `json:"fromAgentId"`
	ToAgentID     string    `json:"toAgentId"`
	WorldID       string    `json:"worldId,omitempty"`
	Origin        string    `json:"origin"`
	CreatedAt     time.Time `json:"createdAt"`
	ExpiresAt     time.Time `json:"expiresAt,omitzero"`
}

// WorldPendingRequests lists a world's pending chat requests, oldest
// first. Moderators (the owner, its admins, the platform admin) see all of
// them; an active member sees those it sent or received. Errors:
// world_not_found, world_membership_required.
func (s *Service) WorldPendingRequests(ctx context.Context, viewer Actor, worldID string, limit int) ([]PendingRequest, error) {
	w, m, err := s.worldFor(ctx, s.db, viewer, worldID)
	if err != nil {
		return nil, err
	}
	moderator := (viewer.Admin && viewer.AgentID == "") || w.OwnerID == viewer.AgentID ||
		(m != nil && m.Status == MemberActive && m.Role == RoleAdmin && !m.Banned)
	if !moderator && (m == nil || m.Status != MemberActive) {
		return nil, errMembershipRequired(w)
	}
	where := "r.world_id = ? AND r.status = ?"
	args := []any{worldID, RequestPending}
	if !moderator {
		where += " AND (r.from_agent_id = ? OR r.to_agent_id = ?)"
		args = append(args, viewer.AgentID, viewer.AgentID)
	}
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	rows, err := s.queryRequests(ctx, s.db, where, args, fmt.Sprintf(" ORDER BY r.created_at, r.id LIMIT %d", limit))
	if err != nil {
		return nil, err
	}
	out := make([]PendingRequest, 0, len(rows))
	for _, r := range rows {
		out = append(out, PendingRequest{ChatRequestID: r.ID, FromAgentID: r.From, ToAgentID: r.To, WorldID: r.WorldID, Origin: r.Origin,
			CreatedAt: ms(r.CreatedAt), ExpiresAt: ms(r.ExpiresAt)})
	}
	return out, nil
}
