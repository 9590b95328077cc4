package social

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// InboxFilters are the filters of GET /v1/chat-requests (all optional).
// Status matches a request status (pending, accepted, rejected, expired,
// closed) or a chat status (opening, active, ending, silent,
// kickoff_failed, ended); `live` matches opening, active and ending chats.
type InboxFilters struct {
	AgentID             string `json:"agentId,omitempty"`
	Direction           string `json:"direction,omitempty"`
	Mode                string `json:"mode,omitempty"`
	Status              string `json:"status,omitempty"`
	WorldID             string `json:"worldId,omitempty"`
	ChatRequestID       string `json:"chatRequestId,omitempty"`
	ConversationKey     string `json:"conversationKey,omitempty"`
	LocalSessionKey     string `json:"localSessionKey,omitempty"`
	CounterpartyAgentID string `json:"counterpartyAgentId,omitempty"`
	Limit               int    `json:"limit,omitempty"`
}

// InboxCounts count requests and chats by state.
type InboxCounts struct {
	Total           int `json:"total"`
	Pending         int `json:"pending"`
	PendingInbound  int `json:"pendingInbound"`
	PendingOutbound int `json:"pendingOutbound"`
	Accepted        int `json:"accepted"`
	Rejected        int `json:"rejected"`
	Expired         int `json:"expired"`
	Closed          int `json:"closed"`
	Chats           int `json:"chats"`
	ActiveChats     int `json:"activeChats"`
	EndedChats      int `json:"endedChats"`
}

// Inbox is the answer of GET /v1/chat-requests: the echo of the filters,
// counts over everything of the viewer (global) and over what matches
// (filtered), the pending requests, the recent answered ones, and chats.
type Inbox struct {
	Filters         InboxFilters  `json:"filters"`
	Counts          InboxCountSet `json:"counts"`
	PendingRequests []RequestView `json:"pendingRequests"`
	RecentRequests  []RequestView `json:"recentRequests"`
	Chats           []ChatView    `json:"chats"`
}

// InboxCountSet pairs the global and filtered counts.
type InboxCountSet struct {
	Global   InboxCounts `json:"global"`
	Filtered InboxCounts `json:"filtered"`
}

var requestStatuses = []string{RequestPending, RequestAccepted, RequestRejected, RequestExpired, RequestClosed}
var chatStatuses = []string{ChatOpening, ChatActive, ChatEnding, ChatSilent, ChatKickoffFailed, ChatEnded}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// inboxWhere builds the WHERE clause (over social_chat_requests r LEFT JOIN
// social_chats c) for viewer and filters. none is true when the filters can
// match nothing (a session key that is not the viewer's).
func inboxWhere(viewer string, f InboxFilters) (where string, args []any, none bool) {
	conds := []string{"(r.from_agent_id = ? OR r.to_agent_id = ?)"}
	args = []any{viewer, viewer}
	add := func(c string, a ...any) {
		conds = append(conds, c)
		args = append(args, a...)
	}
	switch f.Direction {
	case "inbound":
		add("r.to_agent_id = ?", viewer)
	case "outbound":
		add("r.from_agent_id = ?", viewer)
	}
	if f.Mode != "" {
		add("r.mode = ?", f.Mode)
	}
	switch {
	case f.Status == "live":
		add("c.status IN (?, ?, ?)", ChatOpening, ChatActive, ChatEnding)
	case contains(requestStatuses, f.Status):
		add("r.status = ?", f.Status)
	case contains(chatStatuses, f.Status):
		add("c.status = ?", f.Status)
	}
	if f.WorldID != "" {
		add("r.world_id = ?", f.WorldID)
	}
	if f.ChatRequestID != "" {
		add("r.id = ?", f.ChatRequestID)
	}
	if f.ConversationKey != "" {
		add("r.conversation_key = ?", f.ConversationKey)
	}
	if f.LocalSessionKey != "" {
		v, peer, world, ok := ParseLocalSessionKey(f.LocalSessionKey)
		if !ok || v != viewer {
			return "", nil, true
		}
		add("((r.from_agent_id = ? AND r.to_agent_id = ?) OR (r.from_agent_id = ? AND r.to_agent_id = ?)) AND r.world_id = ?", viewer, peer, peer, viewer, world)
	}
	if f.CounterpartyAgentID != "" {
		add("((r.from_agent_id = ? AND r.to_agent_id = ?) OR (r.from_agent_id = ? AND r.to_agent_id = ?))", viewer, f.CounterpartyAgentID, f.CounterpartyAgentID, viewer)
	}
	return strings.Join(conds, " AND "), args, false
}

const inboxFrom = ` FROM social_chat_requests r LEFT JOIN social_chats c ON c.chat_request_id = r.id WHERE `

func (s *Service) inboxCounts(ctx context.Context, q store.Q, viewer, where string, args []any) (InboxCounts, error) {
	var out InboxCounts
	rows, err := q.Query(ctx, `SELECT r.status, CASE WHEN r.to_agent_id = ? THEN 1 ELSE 0 END, COALESCE(c.status, ''), COUNT(*)`+
		inboxFrom+where+` GROUP BY 1, 2, 3`, append([]any{viewer}, args...)...)
	if err != nil {
		return out, fmt.Errorf("count inbox: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rs, cs string
		var inbound, n int
		if err := rows.Scan(&rs, &inbound, &cs, &n); err != nil {
			return out, fmt.Errorf("count inbox: %w", err)
		}
		out.Total += n
		switch rs {
		case RequestPending:
			out.Pending += n
			if inbound == 1 {
				out.PendingInbound += n
			} else {
				out.PendingOutbound += n
			}
		case RequestAccepted:
			out.Accepted += n
		case RequestRejected:
			out.Rejected += n
		case RequestExpired:
			out.Expired += n
		case RequestClosed:
			out.Closed += n
		}
		if cs != "" {
			out.Chats += n
			if IsLive(cs) {
				out.ActiveChats += n
			} else {
				out.EndedChats += n
			}
		}
	}
	return out, rows.Err()
}

// Inbox lists the actor's chat requests and chats. Errors: invalid_direction,
// invalid_mode, invalid_status, invalid_limit.
func (s *Service) Inbox(ctx context.Context, actor Actor, f InboxFilters) (Inbox, error) {
	viewer, err := requireAgent(actor, "agentId")
	if err != nil {
		return Inbox{}, err
	}
	f.AgentID = viewer
	f.Direction, f.Mode, f.Status = strings.ToLower(f.Direction), strings.ToLower(f.Mode), strings.ToLower(f.Status)
	if f.Direction != "" && f.Direction != "inbound" && f.Direction != "outbound" {
		return Inbox{}, protocol.Invalid("direction", "one of inbound, outbound")
	}
	if f.Mode != "" && f.Mode != ModeDirect && f.Mode != ModeWorld {
		return Inbox{}, protocol.Invalid("mode", "one of direct, world")
	}
	if f.Status != "" && f.Status != "live" && !contains(requestStatuses, f.Status) && !contains(chatStatuses, f.Status) {
		return Inbox{}, protocol.Invalid("status", "a request status ("+strings.Join(requestStatuses, ", ")+"), a chat status ("+strings.Join(chatStatuses, ", ")+") or live")
	}
	if f.Limit == 0 {
		f.Limit = 20
	}
	if f.Limit < 1 || f.Limit > 100 {
		return Inbox{}, protocol.Invalid("limit", "between 1 and 100")
	}
	out := Inbox{Filters: f, PendingRequests: []RequestView{}, RecentRequests: []RequestView{}, Chats: []ChatView{}}
	gw, gargs, _ := inboxWhere(viewer, InboxFilters{})
	if out.Counts.Global, err = s.inboxCounts(ctx, s.db, viewer, gw, gargs); err != nil {
		return Inbox{}, err
	}
	where, args, none := inboxWhere(viewer, f)
	if none {
		return out, nil
	}
	if out.Counts.Filtered, err = s.inboxCounts(ctx, s.db, viewer, where, args); err != nil {
		return Inbox{}, err
	}
	limit := fmt.Sprintf(" LIMIT %d", f.Limit)
	pending, err := s.inboxRequests(ctx, viewer, where+" AND r.status = ?", append(append([]any{}, args...), RequestPending), " ORDER BY r.created_at DESC, r.id DESC"+limit)
	if err != nil {
		return Inbox{}, err
	}
	recent, err := s.inboxRequests(ctx, viewer, where+" AND r.status <> ?", append(append([]any{}, args...), RequestPending), " ORDER BY r.updated_at DESC, r.id DESC"+limit)
	if err != nil {
		return Inbox{}, err
	}
	out.PendingRequests, out.RecentRequests = pending, recent
	chatReqs, err := s.inboxRequests(ctx, viewer, where+" AND c.chat_request_id IS NOT NULL", args, " ORDER BY c.updated_at DESC, r.id DESC"+limit)
	if err != nil {
		return Inbox{}, err
	}
	for _, v := range chatReqs {
		if v.Chat != nil {
			out.Chats = append(out.Chats, *v.Chat)
		}
	}
	return out, nil
}

func (s *Service) inboxRequests(ctx context.Context, viewer, where string, args []any, tail string) ([]RequestView, error) {
	rows, err := s.db.Query(ctx, `SELECT `+requestCols+inboxFrom+where+tail, args...)
	if err != nil {
		return nil, fmt.Errorf("list inbox: %w", err)
	}
	var rs []requestRow
	for rows.Next() {
		r, err := scanRequest(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("list inbox: %w", err)
		}
		rs = append(rs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list inbox: %w", err)
	}
	if len(rs) == 0 {
		return []RequestView{}, nil
	}
	return s.requestViews(ctx, s.db, viewer, rs)
}

// Request returns one chat request as the actor sees it.
func (s *Service) Request(ctx context.Context, actor Actor, id string) (RequestView, error) {
	viewer, err := requireAgent(actor, "agentId")
	if err != nil {
		return RequestView{}, err
	}
	r, err := s.requestByID(ctx, s.db, id)
	if err != nil {
		return RequestView{}, err
	}
	if r.From != viewer && r.To != viewer {
		return RequestView{}, errRequestNotFound(id)
	}
	return s.requestViewOne(ctx, s.db, viewer, r)
}
