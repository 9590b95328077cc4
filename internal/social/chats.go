package social

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Chat statuses. opening, active and ending are live: at most one live
// chat exists per conversation key.
const (
	ChatOpening       = "opening"        // accepted; the sender's kickoff is on its way
	ChatActive        = "active"         // the opener arrived; turns flow
	ChatEnding        = "ending"         // one side asked to end; waiting for the other
	ChatSilent        = "silent"         // ended because a side kept silent with nothing pending
	ChatKickoffFailed = "kickoff_failed" // the kickoff could not be delivered
	ChatEnded         = "ended"          // formally ended (handshake, caps, close)
)

// Kickoff statuses.
const (
	KickoffQueued      = "queued"
	KickoffSent        = "sent"
	KickoffEstablished = "established"
	KickoffFailed      = "failed"
	KickoffSkipped     = "skipped"
)

// Conversation modes.
const (
	ModeDirect = "direct"
	ModeWorld  = "world"
)

// Feedback kinds recorded by the relay from [[like]] / [[dislike]].
const (
	FeedbackLike    = "like"
	FeedbackDislike = "dislike"
)

// Next actions for tools (the Claworld kickoff mapping plus request states).
const (
	NextRuntimeOwnsConversation = "runtime_owns_live_conversation"
	NextWaitOpenerDelivery      = "wait_for_sender_opener_delivery"
	NextWaitRuntime             = "wait_for_sender_runtime_availability"
	NextKickoffFailed           = "backend_kickoff_failed"
	NextWaitPeerAcceptance      = "wait_for_peer_acceptance"
	NextReviewInbound           = "review_inbound_request"
	NextKickoffSkipped          = "kickoff_skipped"
	NextRequestRejected         = "request_rejected"
	NextRequestExpired          = "request_expired"
	NextConversationClosed      = "conversation_closed"
	NextConversationEnded       = "conversation_ended"
)

// IsLive reports whether a chat status is live (opening, active, ending).
func IsLive(status string) bool {
	return status == ChatOpening || status == ChatActive || status == ChatEnding
}

// KickoffNextAction maps a kickoff status to the tool-facing next action.
func KickoffNextAction(status string) string {
	switch status {
	case KickoffEstablished:
		return NextRuntimeOwnsConversation
	case KickoffSent:
		return NextWaitOpenerDelivery
	case KickoffQueued:
		return NextWaitRuntime
	case KickoffFailed:
		return NextKickoffFailed
	case KickoffSkipped:
		return NextKickoffSkipped
	}
	return ""
}

// LocalSessionKey is the session key of one side's conversation session:
// conversation:<viewer>:<peer>, plus :<world> when world-scoped.
func LocalSessionKey(viewer, peer, worldID string) string {
	k := "conversation:" + viewer + ":" + peer
	if worldID != "" {
		k += ":" + worldID
	}
	return k
}

// ParseLocalSessionKey splits a local session key into viewer, peer and
// world; ok is false for anything else.
func ParseLocalSessionKey(key string) (viewer, peer, worldID string, ok bool) {
	parts := strings.Split(key, ":")
	if len(parts) < 3 || len(parts) > 4 || parts[0] != "conversation" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	if len(parts) == 4 {
		if parts[3] == "" {
			return "", "", "", false
		}
		worldID = parts[3]
	}
	return parts[1], parts[2], worldID, true
}

// Kickoff is the progress of an accepted chat's start: the hub sends the
// sender's conversation session a kickoff, the sender writes the opener,
// the hub delivers it to the recipient, and the live chat is established.
// ConversationKey and LocalSessionKey are filled per viewer in views.
type Kickoff struct {
	Status                   string    `json:"status"`
	Reason                   string    `json:"reason,omitempty"`
	SenderKickoffDeliveredAt time.Time `json:"senderKickoffDeliveredAt,omitzero"`
	OpenerAcceptedAt         time.Time `json:"openerAcceptedAt,omitzero"`
	OpenerDeliveredAt        time.Time `json:"openerDeliveredAt,omitzero"`
	LiveChatEstablishedAt    time.Time `json:"liveChatEstablishedAt,omitzero"`
	FailedAt                 time.Time `json:"failedAt,omitzero"`
	ConversationKey          string    `json:"conversationKey"`
	LocalSessionKey          string    `json:"localSessionKey,omitempty"`
	OpenerDeliveryID         string    `json:"openerDeliveryId,omitempty"`
	NextAction               string    `json:"nextAction"`
}

// Chat is the record of one accepted chat request's conversation — what
// the relay advances and the inbox lists. Its id is the chat request's id.
type Chat struct {
	ChatRequestID     string    `json:"chatRequestId"`
	ConversationKey   string    `json:"conversationKey"`
	WorldID           string    `json:"worldId,omitempty"`
	Mode              string    `json:"mode"`
	SenderAgentID     string    `json:"senderAgentId"`
	RecipientAgentID  string    `json:"recipientAgentId"`
	Status            string    `json:"status"`
	TurnCount         int       `json:"turnCount"`
	LastTurnAt        time.Time `json:"lastTurnAt,omitzero"`
	SenderFeedback    string    `json:"senderFeedback,omitempty"`    // what the sender gave the recipient
	RecipientFeedback string    `json:"recipientFeedback,omitempty"` // what the recipient gave the sender
	EndReason         string    `json:"endReason,omitempty"`
	TranscriptRef     string    `json:"transcriptRef,omitempty"`
	EndedAt           time.Time `json:"endedAt,omitzero"`
	Kickoff           Kickoff   `json:"kickoff"`
	CreatedAt         time.Time `json:"createdAt"`
	UpdatedAt         time.Time `json:"updatedAt"`
}

// Live reports whether the chat is opening, active or ending.
func (c Chat) Live() bool { return IsLive(c.Status) }

// Peer returns the other participant of viewer.
func (c Chat) Peer(viewer string) string {
	if viewer == c.SenderAgentID {
		return c.RecipientAgentID
	}
	return c.SenderAgentID
}

// Participant reports whether agentID takes part in the chat.
func (c Chat) Participant(agentID string) bool {
	return agentID != "" && (agentID == c.SenderAgentID || agentID == c.RecipientAgentID)
}

// LocalSessionKey is viewer's conversation session for this chat.
func (c Chat) LocalSessionKey(viewer string) string {
	return LocalSessionKey(viewer, c.Peer(viewer), c.WorldID)
}

const chatCols = `c.chat_request_id, c.conversation_key, c.world_id, c.mode, c.sender_agent_id, c.recipient_agent_id, c.status,
	c.turn_count, c.last_turn_at, c.sender_feedback, c.recipient_feedback, c.end_reason, c.transcript_ref, c.ended_at,
	c.kickoff_status, c.kickoff_reason, c.sender_kickoff_at, c.opener_accepted_at, c.opener_delivered_at,
	c.live_established_at, c.kickoff_failed_at, c.opener_delivery_id, c.created_at, c.updated_at`

func scanChat(row interface{ Scan(...any) error }) (Chat, error) {
	var c Chat
	var last, ended, kd, oa, od, le, kf, created, updated int64
	err := row.Scan(&c.ChatRequestID, &c.ConversationKey, &c.WorldID, &c.Mode, &c.SenderAgentID, &c.RecipientAgentID, &c.Status,
		&c.TurnCount, &last, &c.SenderFeedback, &c.RecipientFeedback, &c.EndReason, &c.TranscriptRef, &ended,
		&c.Kickoff.Status, &c.Kickoff.Reason, &kd, &oa, &od, &le, &kf, &c.Kickoff.OpenerDeliveryID, &created, &updated)
	if err != nil {
		return c, err
	}
	c.LastTurnAt, c.EndedAt, c.CreatedAt, c.UpdatedAt = ms(last), ms(ended), ms(created), ms(updated)
	c.Kickoff.SenderKickoffDeliveredAt, c.Kickoff.OpenerAcceptedAt, c.Kickoff.OpenerDeliveredAt = ms(kd), ms(oa), ms(od)
	c.Kickoff.LiveChatEstablishedAt, c.Kickoff.FailedAt = ms(le), ms(kf)
	c.Kickoff.ConversationKey = c.ConversationKey
	c.Kickoff.NextAction = KickoffNextAction(c.Kickoff.Status)
	return c, nil
}

func errChatNotFound(id string) error {
	e := protocol.NotFound("chat_not_found", "no chat "+id)
	e.NextAction = "list your chats (chat_inbox action list)"
	e.NextTool = "chat_inbox"
	return e
}

// ChatTx returns the chat of an accepted chat request.
func (s *Service) ChatTx(ctx context.Context, q store.Q, chatRequestID string) (Chat, error) {
	c, err := scanChat(q.QueryRow(ctx, `SELECT `+chatCols+` FROM social_chats c WHERE c.chat_request_id = ?`, chatRequestID))
	if errors.Is(err, sql.ErrNoRows) {
		return Chat{}, errChatNotFound(chatRequestID)
	}
	if err != nil {
		return Chat{}, fmt.Errorf("load chat %s: %w", chatRequestID, err)
	}
	return c, nil
}

// LiveChatTx returns the live chat (opening, active or ending) of a
// conversation key, or chat_not_found.
func (s *Service) LiveChatTx(ctx context.Context, q store.Q, conversationKey string) (Chat, error) {
	c, err := scanChat(q.QueryRow(ctx, `SELECT `+chatCols+` FROM social_chats c WHERE c.conversation_key = ? AND c.status IN (?, ?, ?)`,
		conversationKey, ChatOpening, ChatActive, ChatEnding))
	if errors.Is(err, sql.ErrNoRows) {
		return Chat{}, errChatNotFound("live in conversation " + conversationKey)
	}
	if err != nil {
		return Chat{}, fmt.Errorf("load live chat: %w", err)
	}
	return c, nil
}

// LiveChatsTx lists live chats (for the relay's restart recovery).
func (s *Service) LiveChatsTx(ctx context.Context, q store.Q, limit int) ([]Chat, error) {
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	return s.queryChats(ctx, q, `c.status IN (?, ?, ?)`, []any{ChatOpening, ChatActive, ChatEnding}, fmt.Sprintf(" ORDER BY c.created_at LIMIT %d", limit))
}

func (s *Service) queryChats(ctx context.Context, q store.Q, where string, args []any, tail string) ([]Chat, error) {
	rows, err := q.Query(ctx, `SELECT `+chatCols+` FROM social_chats c WHERE `+where+tail, args...)
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	defer rows.Close()
	var out []Chat
	for rows.Next() {
		c, err := scanChat(rows)
		if err != nil {
			return nil, fmt.Errorf("list chats: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Participant is one side of a chat as the context document needs it.
type Participant struct {
	AgentID                string `json:"agentId"`
	DisplayName            string `json:"displayName"`
	AgentCode              string `json:"agentCode"`
	Identity               string `json:"identity"`
	Headline               string `json:"headline,omitempty"`
	HumanProfile           string `json:"humanProfile,omitempty"`
	AgentProfile           string `json:"agentProfile,omitempty"`
	ParticipantContextText string `json:"participantContextText,omitempty"`
	WorldRole              string `json:"worldRole,omitempty"`
}

// ChatContext is everything the relay renders a context document from: the
// chat, the sender's brief (openingMessage), its origin, the world (when
// world-scoped) and both participants' profiles.
type ChatContext struct {
	Chat           Chat             `json:"chat"`
	OpeningMessage string           `json:"openingMessage"`
	Origin         string           `json:"origin"` // request | broadcast
	BroadcastID    string           `json:"broadcastId,omitempty"`
	World          *World           `json:"world,omitempty"`
	Sender         Participant      `json:"sender"`
	Recipient      Participant      `json:"recipient"`
	RequestedAt    time.Time        `json:"requestedAt"`
	Broadcast      *BroadcastConfig `json:"broadcast,omitempty"`
}

// ChatContextTx gathers a chat's context for the relay.
func (s *Service) ChatContextTx(ctx context.Context, q store.Q, chatRequestID string) (ChatContext, error) {
	c, err := s.ChatTx(ctx, q, chatRequestID)
	if err != nil {
		return ChatContext{}, err
	}
	r, err := s.requestByID(ctx, q, chatRequestID)
	if err != nil {
		return ChatContext{}, err
	}
	out := ChatContext{Chat: c, OpeningMessage: r.OpeningMessage, Origin: r.Origin, BroadcastID: r.BroadcastID, RequestedAt: ms(r.CreatedAt)}
	accts, err := s.accountsByID(ctx, q, []string{c.SenderAgentID, c.RecipientAgentID})
	if err != nil {
		return ChatContext{}, err
	}
	part := func(id string) Participant {
		a := accts[id]
		return Participant{AgentID: id, DisplayName: a.DisplayName, AgentCode: a.Code, Identity: a.identity(), Headline: a.Headline,
			HumanProfile: a.HumanProfile, AgentProfile: a.AgentProfile}
	}
	out.Sender, out.Recipient = part(c.SenderAgentID), part(c.RecipientAgentID)
	if c.WorldID != "" {
		w, err := s.WorldTx(ctx, q, c.WorldID)
		if err != nil {
			return ChatContext{}, err
		}
		out.World = &w
		if r.Origin == OriginBroadcast {
			bc := w.Broadcast
			out.Broadcast = &bc
		}
		for _, p := range []*Participant{&out.Sender, &out.Recipient} {
			if m, err := s.membership(ctx, q, c.WorldID, p.AgentID); err == nil {
				p.ParticipantContextText, p.WorldRole = m.Text, m.Role
			}
		}
	}
	return out, nil
}

// ---- relay updates --------------------------------------------------------------------------

// KickoffUpdate is a kickoff progress report from the relay. Empty fields
// keep their value; zero times keep theirs.
type KickoffUpdate struct {
	Status                   string
	Reason                   string
	SenderKickoffDeliveredAt time.Time
	OpenerAcceptedAt         time.Time
	OpenerDeliveredAt        time.Time
	LiveChatEstablishedAt    time.Time
	FailedAt                 time.Time
	OpenerDeliveryID         string
}

func validKickoff(s string) bool {
	switch s {
	case KickoffQueued, KickoffSent, KickoffEstablished, KickoffFailed, KickoffSkipped:
		return true
	}
	return false
}

// liveCond restricts an UPDATE of social_chats to live chats, so that an
// update racing with an ending never revives or rewrites a finished chat.
const liveCond = ` AND status IN ('opening', 'active', 'ending')`

// updateLive runs an UPDATE on a live chat and tells chat_not_found from
// chat_not_live when nothing matched.
func (s *Service) updateLive(ctx context.Context, tx *store.Tx, chatRequestID, sets string, args ...any) (Chat, error) {
	res, err := tx.Exec(ctx, `UPDATE social_chats SET `+sets+` WHERE chat_request_id = ?`+liveCond, append(args, chatRequestID)...)
	if err != nil {
		return Chat{}, fmt.Errorf("update chat %s: %w", chatRequestID, err)
	}
	c, err := s.ChatTx(ctx, tx, chatRequestID)
	if err != nil {
		return Chat{}, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Chat{}, protocol.Conflict("chat_not_live", "chat "+chatRequestID+" already ended ("+c.Status+")")
	}
	return c, nil
}

// UpdateKickoffTx records kickoff progress and pushes request.updated to
// both parties. Only the given fields change (each in one statement, so
// concurrent reports do not overwrite each other). established moves an
// opening chat to active (stamping liveChatEstablishedAt unless given);
// failed ends the chat as kickoff_failed. Errors: chat_not_found,
// invalid_kickoff_status, chat_not_live (the chat already ended).
func (s *Service) UpdateKickoffTx(ctx context.Context, tx *store.Tx, chatRequestID string, u KickoffUpdate) (Chat, error) {
	if u.Status != "" && !validKickoff(u.Status) {
		return Chat{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "invalid_kickoff_status",
			Message: "kickoff status must be one of queued, sent, established, failed, skipped"}
	}
	now := s.nowMs()
	sets := []string{"updated_at = ?"}
	args := []any{now}
	set := func(expr string, v any) {
		sets = append(sets, expr)
		args = append(args, v)
	}
	setTime := func(col string, t time.Time) bool {
		if t.IsZero() {
			return false
		}
		set(col+" = ?", store.Millis(t))
		return true
	}
	if u.Status != "" {
		set("kickoff_status = ?", u.Status)
	}
	if u.Reason != "" {
		set("kickoff_reason = ?", u.Reason)
	}
	if u.OpenerDeliveryID != "" {
		set("opener_delivery_id = ?", u.OpenerDeliveryID)
	}
	setTime("sender_kickoff_at", u.SenderKickoffDeliveredAt)
	setTime("opener_accepted_at", u.OpenerAcceptedAt)
	setTime("opener_delivered_at", u.OpenerDeliveredAt)
	established := setTime("live_established_at", u.LiveChatEstablishedAt)
	failed := setTime("kickoff_failed_at", u.FailedAt)
	update := "kickoff"
	switch u.Status {
	case KickoffEstablished:
		if !established {
			set("live_established_at = CASE WHEN live_established_at = 0 THEN ? ELSE live_established_at END", now)
		}
		sets = append(sets, "status = CASE WHEN status = 'opening' THEN 'active' ELSE status END")
	case KickoffFailed:
		if !failed {
			set("kickoff_failed_at = CASE WHEN kickoff_failed_at = 0 THEN ? ELSE kickoff_failed_at END", now)
		}
		reason := "kickoff_failed"
		if u.Reason != "" {
			reason += ": " + u.Reason
		}
		set("status = ?", ChatKickoffFailed)
		set("ended_at = ?", now)
		set("end_reason = CASE WHEN end_reason = '' THEN ? ELSE end_reason END", reason)
		update = "kickoff_failed"
	}
	c, err := s.updateLive(ctx, tx, chatRequestID, strings.Join(sets, ", "), args...)
	if err != nil {
		return Chat{}, err
	}
	return s.reloadAndPush(ctx, tx, c, update)
}

// SetChatStatusTx moves a live chat between live statuses (opening,
// active, ending) and pushes request.updated. Ending statuses go through
// EndChatTx. Errors: chat_not_found, chat_not_live, invalid_status.
func (s *Service) SetChatStatusTx(ctx context.Context, tx *store.Tx, chatRequestID, status string) (Chat, error) {
	if !IsLive(status) {
		return Chat{}, protocol.Invalid("status", "one of opening, active, ending (end a chat with EndChatTx)")
	}
	c, err := s.ChatTx(ctx, tx, chatRequestID)
	if err != nil {
		return Chat{}, err
	}
	if c.Status == status {
		return c, nil
	}
	if c, err = s.updateLive(ctx, tx, chatRequestID, "status = ?, updated_at = ?", status, s.nowMs()); err != nil {
		return Chat{}, err
	}
	return s.reloadAndPush(ctx, tx, c, "status")
}

// RecordTurnTx counts one delivered turn from fromAgentID: the chat's turn
// count and last turn time, and activity stamps on the sender's account,
// membership and world. An opening chat becomes active, which is pushed to
// both parties as request.updated; a turn that changes nothing but the
// count is not pushed (two notifications per turn would cost more than the
// turn itself; the inbox and the next push carry the count). Errors:
// chat_not_found, chat_not_live, not_chat_participant.
func (s *Service) RecordTurnTx(ctx context.Context, tx *store.Tx, chatRequestID, fromAgentID string) (Chat, error) {
	c, err := s.ChatTx(ctx, tx, chatRequestID)
	if err != nil {
		return Chat{}, err
	}
	if !c.Participant(fromAgentID) {
		return Chat{}, protocol.Forbidden("not_chat_participant", fromAgentID+" is not a participant of chat "+chatRequestID)
	}
	before := c.Status
	n := s.nowMs()
	c, err = s.updateLive(ctx, tx, chatRequestID, `turn_count = turn_count + 1, last_turn_at = ?, updated_at = ?,
		status = CASE WHEN status = 'opening' THEN 'active' ELSE status END`, n, n)
	if err != nil {
		return Chat{}, err
	}
	if _, err := tx.Exec(ctx, `UPDATE social_accounts SET last_active_at = ? WHERE agent_id = ?`, n, fromAgentID); err != nil {
		return Chat{}, fmt.Errorf("stamp activity: %w", err)
	}
	if c.WorldID != "" {
		if _, err := tx.Exec(ctx, `UPDATE social_memberships SET last_active_at = ? WHERE world_id = ? AND agent_id = ?`, n, c.WorldID, fromAgentID); err != nil {
			return Chat{}, fmt.Errorf("stamp activity: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE social_worlds SET last_activity_at = ? WHERE id = ?`, n, c.WorldID); err != nil {
			return Chat{}, fmt.Errorf("stamp activity: %w", err)
		}
	}
	if c.Status == before {
		return c, nil
	}
	return s.reloadAndPush(ctx, tx, c, "turn")
}

// RecordFeedbackTx records [[like]] or [[dislike]] from fromAgentID about
// its peer. Only the first feedback per direction counts (applied=false for
// later ones); it updates the chat, the peer's account and world member
// counters and the world's totals. Errors: chat_not_found,
// not_chat_participant, invalid_feedback.
func (s *Service) RecordFeedbackTx(ctx context.Context, tx *store.Tx, chatRequestID, fromAgentID, kind string) (Chat, bool, error) {
	if kind != FeedbackLike && kind != FeedbackDislike {
		return Chat{}, false, protocol.Invalid("feedback", "one of like, dislike")
	}
	c, err := s.ChatTx(ctx, tx, chatRequestID)
	if err != nil {
		return Chat{}, false, err
	}
	if !c.Participant(fromAgentID) {
		return Chat{}, false, protocol.Forbidden("not_chat_participant", fromAgentID+" is not a participant of chat "+chatRequestID)
	}
	col := "recipient_feedback"
	if fromAgentID == c.SenderAgentID {
		col = "sender_feedback"
	}
	res, err := tx.Exec(ctx, `UPDATE social_chats SET `+col+` = ?, updated_at = ? WHERE chat_request_id = ? AND `+col+` = ''`,
		kind, s.nowMs(), chatRequestID)
	if err != nil {
		return Chat{}, false, fmt.Errorf("record feedback: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return c, false, nil
	}
	peer := c.Peer(fromAgentID)
	acol, wcol := "likes_received", "likes"
	if kind == FeedbackDislike {
		acol, wcol = "dislikes_received", "dislikes"
	}
	if _, err := tx.Exec(ctx, `UPDATE social_accounts SET `+acol+` = `+acol+` + 1 WHERE agent_id = ?`, peer); err != nil {
		return Chat{}, false, fmt.Errorf("count feedback: %w", err)
	}
	if c.WorldID != "" {
		if _, err := tx.Exec(ctx, `UPDATE social_memberships SET `+acol+` = `+acol+` + 1 WHERE world_id = ? AND agent_id = ?`, c.WorldID, peer); err != nil {
			return Chat{}, false, fmt.Errorf("count feedback: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE social_worlds SET `+wcol+` = `+wcol+` + 1 WHERE id = ?`, c.WorldID); err != nil {
			return Chat{}, false, fmt.Errorf("count feedback: %w", err)
		}
	}
	c, err = s.reloadAndPush(ctx, tx, c, "feedback")
	return c, true, err
}

// EndChat describes how a conversation ended.
type EndChat struct {
	Status        string // ended | silent | kickoff_failed (default ended)
	Reason        string // e.g. both_requested_end, max_turns, idle_timeout, kept_silent
	TranscriptRef string // where the transcript can be read, for the owner report
}

// EndChatTx ends a live chat on the relay's behalf (end-token handshake,
// silence, caps): the chat gets its final status, both parties get
// request.updated and a conversation_ended notification with the transcript
// reference. The relay is not called back. Ending an ended chat again is a
// no-op returning the chat. Errors: chat_not_found, invalid_chat_status.
func (s *Service) EndChatTx(ctx context.Context, tx *store.Tx, chatRequestID string, e EndChat) (Chat, error) {
	if e.Status == "" {
		e.Status = ChatEnded
	}
	if e.Status != ChatEnded && e.Status != ChatSilent && e.Status != ChatKickoffFailed {
		return Chat{}, protocol.Invalid("status", "one of ended, silent, kickoff_failed")
	}
	c, err := s.ChatTx(ctx, tx, chatRequestID)
	if err != nil {
		return Chat{}, err
	}
	if !c.Live() {
		return c, nil
	}
	return s.finishChat(ctx, tx, c, e, false)
}

// finishChat ends a live chat: final status, reason, transcript, and
// notifications; with forced (a close, a removal, a world closing) the
// request becomes closed and the relay is told to stop. The end is one
// conditional UPDATE, so of two racing endings only the first takes effect;
// the second returns the ended chat and notifies nobody.
func (s *Service) finishChat(ctx context.Context, tx *store.Tx, c Chat, e EndChat, forced bool) (Chat, error) {
	now := s.nowMs()
	sets := `status = ?, end_reason = ?, ended_at = ?, updated_at = ?,
		kickoff_reason = CASE WHEN kickoff_status IN ('queued', 'sent') AND kickoff_reason = '' THEN ? ELSE kickoff_reason END,
		kickoff_status = CASE WHEN kickoff_status IN ('queued', 'sent') THEN 'skipped' ELSE kickoff_status END`
	args := []any{e.Status, e.Reason, now, now, "chat_ended_before_kickoff: " + e.Reason}
	if e.TranscriptRef != "" {
		sets += `, transcript_ref = ?`
		args = append(args, e.TranscriptRef)
	}
	c, err := s.updateLive(ctx, tx, c.ChatRequestID, sets, args...)
	if protocol.CodeOf(err) == "chat_not_live" {
		return s.ChatTx(ctx, tx, c.ChatRequestID)
	}
	if err != nil {
		return Chat{}, err
	}
	if forced {
		if _, err := tx.Exec(ctx, `UPDATE social_chat_requests SET status = ?, status_reason = ?, updated_at = ? WHERE id = ? AND status = ?`,
			RequestClosed, e.Reason, now, c.ChatRequestID, RequestAccepted); err != nil {
			return Chat{}, fmt.Errorf("close request: %w", err)
		}
		if r := s.getRelay(); r != nil {
			if err := r.ChatClosed(ctx, tx, c, e.Reason); err != nil {
				return Chat{}, fmt.Errorf("relay: chat closed: %w", err)
			}
		}
	}
	c, err = s.reloadAndPush(ctx, tx, c, "ended")
	if err != nil {
		return Chat{}, err
	}
	accts, err := s.accountsByID(ctx, tx, []string{c.SenderAgentID, c.RecipientAgentID})
	if err != nil {
		return Chat{}, err
	}
	for _, side := range []string{c.SenderAgentID, c.RecipientAgentID} {
		peer := accts[c.Peer(side)]
		related := map[string]any{"chatRequestId": c.ChatRequestID, "conversationKey": c.ConversationKey,
			"localSessionKey": c.LocalSessionKey(side), "status": c.Status, "reason": c.EndReason, "turnCount": c.TurnCount,
			"counterpartyAgentId": peer.AgentID, "counterpartyIdentity": peer.identity()}
		if c.WorldID != "" {
			related["worldId"] = c.WorldID
		}
		if c.TranscriptRef != "" {
			related["transcriptRef"] = c.TranscriptRef
		}
		body := fmt.Sprintf("The conversation with %s ended (%s) after %d turns.", peer.identity(), c.EndReason, c.TurnCount)
		if err := s.notice(ctx, tx, EventConversationEnded, side, NoticeConversationEnded, "Conversation ended", body, related); err != nil {
			return Chat{}, err
		}
	}
	return c, nil
}

// endChatsWhere force-ends the live chats matching where (columns of
// social_chats) with reason.
func (s *Service) endChatsWhere(ctx context.Context, tx *store.Tx, where string, args []any, reason string) error {
	chats, err := s.queryChats(ctx, tx, `(`+where+`) AND c.status IN (?, ?, ?)`, append(args, ChatOpening, ChatActive, ChatEnding), " ORDER BY c.created_at")
	if err != nil {
		return err
	}
	for _, c := range chats {
		if _, err := s.finishChat(ctx, tx, c, EndChat{Status: ChatEnded, Reason: reason}, true); err != nil {
			return err
		}
	}
	return nil
}

// reloadAndPush re-reads a chat (normalizing times to stored precision) and
// pushes the request's new state to both parties.
func (s *Service) reloadAndPush(ctx context.Context, tx *store.Tx, c Chat, update string) (Chat, error) {
	c, err := s.ChatTx(ctx, tx, c.ChatRequestID)
	if err != nil {
		return Chat{}, err
	}
	r, err := s.requestByID(ctx, tx, c.ChatRequestID)
	if err != nil {
		return Chat{}, err
	}
	return c, s.pushRequest(ctx, tx, r, update)
}
