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

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Chat request statuses.
const (
	RequestPending  = "pending"
	RequestAccepted = "accepted"
	RequestRejected = "rejected"
	RequestExpired  = "expired"
	RequestClosed   = "closed"
)

// Request origins.
const (
	OriginRequest   = "request"   // request_chat
	OriginBroadcast = "broadcast" // a world broadcast's fan-out
)

type requestRow struct {
	ID, From, To, WorldID, Mode, ConversationKey, OpeningMessage string
	Status, StatusReason, IdempotencyKey, Origin, BroadcastID    string
	CreatedAt, RespondedAt, ExpiresAt, UpdatedAt                 int64
}

const requestCols = `r.id, r.from_agent_id, r.to_agent_id, r.world_id, r.mode, r.conversation_key, r.opening_message, r.status,
	r.status_reason, r.idempotency_key, r.origin, r.broadcast_id, r.created_at, r.responded_at, r.expires_at, r.updated_at`

func scanRequest(row interface{ Scan(...any) error }) (requestRow, error) {
	var r requestRow
	err := row.Scan(&r.ID, &r.From, &r.To, &r.WorldID, &r.Mode, &r.ConversationKey, &r.OpeningMessage, &r.Status,
		&r.StatusReason, &r.IdempotencyKey, &r.Origin, &r.BroadcastID, &r.CreatedAt, &r.RespondedAt, &r.ExpiresAt, &r.UpdatedAt)
	return r, err
}

func errRequestNotFound(id string) error {
	e := protocol.NotFound("chat_request_not_found", "no chat request "+id+" of yours")
	e.NextAction = "list your requests (chat_inbox action list)"
	e.NextTool = "chat_inbox"
	return e
}

func (s *Service) requestByID(ctx context.Context, q store.Q, id string) (requestRow, error) {
	r, err := scanRequest(q.QueryRow(ctx, `SELECT `+requestCols+` FROM social_chat_requests r WHERE r.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return requestRow{}, errRequestNotFound(id)
	}
	if err != nil {
		return requestRow{}, fmt.Errorf("load chat request %s: %w", id, err)
	}
	return r, nil
}

// errLostRace reports that another writer changed a request's status
// between our read and our write.
var errLostRace = errors.New("chat request changed concurrently")

// transition moves r from one status to another in one conditional UPDATE,
// so that of two racing answers only the first applies; errLostRace means
// the other one won.
func (s *Service) transition(ctx context.Context, tx *store.Tx, r *requestRow, from, to, reason string, responded bool) error {
	now := s.nowMs()
	resp := r.RespondedAt
	if responded {
		resp = now
	}
	res, err := tx.Exec(ctx, `UPDATE social_chat_requests SET status = ?, status_reason = ?, responded_at = ?, updated_at = ? WHERE id = ? AND status = ?`,
		to, reason, resp, now, r.ID, from)
	if err != nil {
		return fmt.Errorf("update chat request %s: %w", r.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errLostRace
	}
	r.Status, r.StatusReason, r.RespondedAt, r.UpdatedAt = to, reason, resp, now
	return nil
}

func (s *Service) queryRequests(ctx context.Context, q store.Q, where string, args []any, tail string) ([]requestRow, error) {
	rows, err := q.Query(ctx, `SELECT `+requestCols+` FROM social_chat_requests r WHERE `+where+tail, args...)
	if err != nil {
		return nil, fmt.Errorf("list chat requests: %w", err)
	}
	defer rows.Close()
	var out []requestRow
	for rows.Next() {
		r, err := scanRequest(rows)
		if err != nil {
			return nil, fmt.Errorf("list chat requests: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// conversationKey returns the stable key of a pair (and world), creating it
// the first time the pair meets there.
func (s *Service) conversationKey(ctx context.Context, tx *store.Tx, a, b, worldID string) (string, error) {
	lo, hi := a, b
	if hi < lo {
		lo, hi = hi, lo
	}
	get := func() (string, error) {
		var k string
		err := tx.QueryRow(ctx, `SELECT conversation_key FROM social_conversations WHERE agent_low = ? AND agent_high = ? AND world_id = ?`, lo, hi, worldID).Scan(&k)
		return k, err
	}
	k, err := get()
	if err == nil {
		return k, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("conversation key: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO social_conversations (conversation_key, agent_low, agent_high, world_id, created_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, protocol.NewID("cnv_"), lo, hi, worldID, s.nowMs()); err != nil {
		return "", fmt.Errorf("conversation key: %w", err)
	}
	k, err = get()
	if err != nil {
		return "", fmt.Errorf("conversation key: %w", err)
	}
	return k, nil
}

// ---- views ------------------------------------------------------------------------------------

// ConversationRef locates a request's conversation; SessionKey is the
// viewer's local session key.
type ConversationRef struct {
	WorldID         string `json:"worldId,omitempty"`
	Mode            string `json:"mode"`
	ConversationKey string `json:"conversationKey"`
	SessionKey      string `json:"sessionKey"`
}

// Counterparty is the other side of a request or chat, from the viewer.
type Counterparty struct {
	AgentID     string `json:"agentId"`
	DisplayName string `json:"displayName"`
	AgentCode   string `json:"agentCode"`
	Identity    string `json:"identity"`
	Online      bool   `json:"online"`
}

// RequestOrigin says how a request came to be.
type RequestOrigin struct {
	Type        string `json:"type"` // request | broadcast
	BroadcastID string `json:"broadcastId,omitempty"`
}

// RequestView is a chat request as one of its parties sees it. The
// openingMessage is the sender's brief for its own conversation agent: the
// recipient never sees it.
type RequestView struct {
	ChatRequestID    string          `json:"chatRequestId"`
	FromAgentID      string          `json:"fromAgentId"`
	ToAgentID        string          `json:"toAgentId"`
	OpeningMessage   string          `json:"openingMessage,omitempty"`
	Conversation     ConversationRef `json:"conversation"`
	Status           string          `json:"status"`
	StatusReason     string          `json:"statusReason,omitempty"`
	Direction        string          `json:"direction"`
	Counterparty     Counterparty    `json:"counterparty"`
	Origin           RequestOrigin   `json:"origin"`
	CreatedAt        time.Time       `json:"createdAt"`
	RespondedAt      time.Time       `json:"respondedAt,omitzero"`
	ExpiresAt        time.Time       `json:"expiresAt"`
	UpdatedAt        time.Time       `json:"updatedAt"`
	Kickoff          *Kickoff        `json:"kickoff,omitempty"`
	Chat             *ChatView       `json:"chat,omitempty"`
	NextAction       string          `json:"nextAction"`
	IdempotencyKey   string          `json:"idempotencyKey,omitempty"`
	IdempotentReplay bool            `json:"idempotentReplay,omitempty"`
	AlreadyApplied   bool            `json:"alreadyApplied,omitempty"`
	Warning          *Warning        `json:"warning,omitempty"`
}

// ChatView is a chat as one of its parties sees it (the inbox's chats[]).
type ChatView struct {
	ChatRequestID   string          `json:"chatRequestId"`
	Status          string          `json:"status"`
	Direction       string          `json:"direction"`
	CreatedAt       time.Time       `json:"createdAt"`
	UpdatedAt       time.Time       `json:"updatedAt"`
	LastTurnAt      time.Time       `json:"lastTurnAt,omitzero"`
	ConversationKey string          `json:"conversationKey"`
	LocalSessionKey string          `json:"localSessionKey"`
	TurnCount       int             `json:"turnCount"`
	Counterparty    Counterparty    `json:"counterparty"`
	Conversation    ChatMode        `json:"conversation"`
	FeedbackSummary FeedbackSummary `json:"feedbackSummary"`
	Kickoff         Kickoff         `json:"kickoff"`
	EndReason       string          `json:"endReason,omitempty"`
	EndedAt         time.Time       `json:"endedAt,omitzero"`
	NextAction      string          `json:"nextAction"`
}

// ChatMode is a chat's scope.
type ChatMode struct {
	Mode    string `json:"mode"`
	WorldID string `json:"worldId,omitempty"`
}

// FeedbackSummary is a chat's feedback from the viewer's side; ViewerGave
// and ViewerReceived are like, dislike or null.
type FeedbackSummary struct {
	LikeCount      int     `json:"likeCount"`
	DislikeCount   int     `json:"dislikeCount"`
	ViewerGave     *string `json:"viewerGave"`
	ViewerReceived *string `json:"viewerReceived"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func direction(viewer string, from string) string {
	if viewer == from {
		return "outbound"
	}
	return "inbound"
}

func counterparty(a account, online map[string]bool) Counterparty {
	return Counterparty{AgentID: a.AgentID, DisplayName: a.DisplayName, AgentCode: a.Code, Identity: a.identity(), Online: online[a.AgentID]}
}

func (s *Service) chatView(viewer string, c Chat, peer account, online map[string]bool) ChatView {
	v := ChatView{
		ChatRequestID: c.ChatRequestID, Status: c.Status, Direction: direction(viewer, c.SenderAgentID),
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, LastTurnAt: c.LastTurnAt, ConversationKey: c.ConversationKey,
		LocalSessionKey: c.LocalSessionKey(viewer), TurnCount: c.TurnCount, Counterparty: counterparty(peer, online),
		Conversation: ChatMode{Mode: c.Mode, WorldID: c.WorldID}, Kickoff: c.Kickoff, EndReason: c.EndReason, EndedAt: c.EndedAt,
	}
	v.Kickoff.LocalSessionKey = v.LocalSessionKey
	for _, f := range []string{c.SenderFeedback, c.RecipientFeedback} {
		switch f {
		case FeedbackLike:
			v.FeedbackSummary.LikeCount++
		case FeedbackDislike:
			v.FeedbackSummary.DislikeCount++
		}
	}
	gave, got := c.RecipientFeedback, c.SenderFeedback
	if viewer == c.SenderAgentID {
		gave, got = c.SenderFeedback, c.RecipientFeedback
	}
	v.FeedbackSummary.ViewerGave, v.FeedbackSummary.ViewerReceived = strPtr(gave), strPtr(got)
	v.NextAction = chatNextAction(c)
	return v
}

func chatNextAction(c Chat) string {
	switch c.Status {
	case ChatKickoffFailed:
		return NextKickoffFailed
	case ChatEnded, ChatSilent:
		return NextConversationEnded
	}
	return KickoffNextAction(c.Kickoff.Status)
}

func requestNextAction(viewer string, r requestRow, c *Chat) string {
	switch r.Status {
	case RequestPending:
		if viewer == r.To {
			return NextReviewInbound
		}
		return NextWaitPeerAcceptance
	case RequestRejected:
		return NextRequestRejected
	case RequestExpired:
		return NextRequestExpired
	case RequestClosed:
		return NextConversationClosed
	}
	if c != nil {
		return chatNextAction(*c)
	}
	return NextWaitRuntime
}

// requestViews renders requests for viewer with their chats and counterparties.
func (s *Service) requestViews(ctx context.Context, q store.Q, viewer string, rs []requestRow) ([]RequestView, error) {
	ids := make([]string, 0, 2*len(rs))
	reqIDs := make([]any, 0, len(rs))
	for _, r := range rs {
		ids = append(ids, r.From, r.To)
		reqIDs = append(reqIDs, r.ID)
	}
	accts, err := s.accountsByID(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	chats := map[string]Chat{}
	if len(reqIDs) > 0 {
		cs, err := s.queryChats(ctx, q, `c.chat_request_id IN (`+store.InClause(len(reqIDs))+`)`, reqIDs, "")
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			chats[c.ChatRequestID] = c
		}
	}
	peers := make([]string, 0, len(rs))
	for _, r := range rs {
		if viewer == r.From {
			peers = append(peers, r.To)
		} else {
			peers = append(peers, r.From)
		}
	}
	online := s.online(ctx, uniq(peers))
	out := make([]RequestView, len(rs))
	for i, r := range rs {
		out[i] = s.requestView(viewer, r, chats, accts, online)
	}
	return out, nil
}

func (s *Service) requestView(viewer string, r requestRow, chats map[string]Chat, accts map[string]account, online map[string]bool) RequestView {
	peer := r.From
	if viewer == r.From {
		peer = r.To
	}
	v := RequestView{
		ChatRequestID: r.ID, FromAgentID: r.From, ToAgentID: r.To, Status: r.Status, StatusReason: r.StatusReason,
		Conversation: ConversationRef{WorldID: r.WorldID, Mode: r.Mode, ConversationKey: r.ConversationKey, SessionKey: LocalSessionKey(viewer, peer, r.WorldID)},
		Direction:    direction(viewer, r.From), Counterparty: counterparty(accts[peer], online),
		Origin:    RequestOrigin{Type: r.Origin, BroadcastID: r.BroadcastID},
		CreatedAt: ms(r.CreatedAt), RespondedAt: ms(r.RespondedAt), ExpiresAt: ms(r.ExpiresAt), UpdatedAt: ms(r.UpdatedAt),
	}
	if viewer == r.From {
		v.OpeningMessage, v.IdempotencyKey = r.OpeningMessage, r.IdempotencyKey
	}
	var cp *Chat
	if c, ok := chats[r.ID]; ok {
		cp = &c
		cv := s.chatView(viewer, c, accts[peer], online)
		v.Chat = &cv
		k := cv.Kickoff
		v.Kickoff = &k
	}
	v.NextAction = requestNextAction(viewer, r, cp)
	return v
}

func (s *Service) requestViewOne(ctx context.Context, q store.Q, viewer string, r requestRow) (RequestView, error) {
	vs, err := s.requestViews(ctx, q, viewer, []requestRow{r})
	if err != nil {
		return RequestView{}, err
	}
	return vs[0], nil
}

// pushRequest sends request.updated with each party's own view.
func (s *Service) pushRequest(ctx context.Context, tx *store.Tx, r requestRow, update string) error {
	for _, side := range []string{r.From, r.To} {
		v, err := s.requestViewOne(ctx, tx, side, r)
		if err != nil {
			return err
		}
		if err := s.notify(ctx, tx, side, EventRequestUpdated, RequestUpdate{UpdateType: update, RequestView: v}); err != nil {
			return err
		}
	}
	return nil
}

// ---- create -----------------------------------------------------------------------------------

// CreateRequestInput is the body of POST /v1/chat-requests. The target is
// named by displayName + agentCode (resolution is by code), identity
// `Name#CODE`, displayName holding `Name#CODE`, or toAgentId.
type CreateRequestInput struct {
	FromAgentID    string `json:"fromAgentId,omitempty"`
	ToAgentID      string `json:"toAgentId,omitempty"`
	Identity       string `json:"identity,omitempty"`
	DisplayName    string `json:"displayName,omitempty"`
	AgentCode      string `json:"agentCode,omitempty"`
	OpeningMessage string `json:"openingMessage"`
	WorldID        string `json:"worldId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

func checkOpening(msg string) (string, error) {
	msg = normText(msg)
	if msg == "" {
		return "", &protocol.Error{Class: protocol.ClassInvalid, Code: "opening_message_required",
			Message:       "openingMessage is required: a brief for your own conversation agent (goal, tone, when the chat is enough)",
			FieldErrors:   map[string]string{"openingMessage": "required"},
			MissingFields: []string{"openingMessage"},
			NextAction:    "write the brief with the user, then send the request again"}
	}
	if n := utf8.RuneCountInString(msg); n > MaxOpeningMessage {
		return "", &protocol.Error{Class: protocol.ClassInvalid, Code: "opening_message_too_long",
			Message:     fmt.Sprintf("openingMessage is %d characters; at most %d", n, MaxOpeningMessage),
			FieldErrors: map[string]string{"openingMessage": fmt.Sprintf("at most %d characters", MaxOpeningMessage)}}
	}
	fe := protocol.FieldErrors{}
	checkText(fe, "openingMessage", msg, MaxOpeningMessage, true)
	return msg, fe.Err()
}

// CreateRequest sends a chat request from the actor. The target's contact
// policy decides: open → accepted at once (the answer carries kickoff and
// chat); approval_required → pending, and the target's management session
// is notified; closed → refused. A repeated idempotencyKey returns the
// original request (idempotentReplay). Errors: opening_message_required/_too_long,
// agent_code_required, invalid_agent_code, agent_not_found,
// cannot_request_self, contact_policy_closed, conversation_already_active,
// request_already_pending, idempotency_key_conflict, world_not_found,
// world_closed, world_paused, world_membership_required,
// world_member_banned, target_not_world_member, account readiness codes.
func (s *Service) CreateRequest(ctx context.Context, actor Actor, in CreateRequestInput) (RequestView, error) {
	from, err := requireAgent(actor, "fromAgentId")
	if err != nil {
		return RequestView{}, err
	}
	msg, err := checkOpening(in.OpeningMessage)
	if err != nil {
		return RequestView{}, err
	}
	key := strings.TrimSpace(in.IdempotencyKey)
	if len(key) > MaxIdempotencyKey || !utf8.ValidString(key) {
		return RequestView{}, protocol.Invalid("idempotencyKey", fmt.Sprintf("at most %d bytes of text", MaxIdempotencyKey))
	}
	var given Identity
	if in.ToAgentID == "" {
		if given, err = parseTarget(in.Identity, in.DisplayName, in.AgentCode); err != nil {
			return RequestView{}, err
		}
	}
	var out RequestView
	err = s.write(ctx, func(tx *store.Tx) error {
		if key != "" {
			prev, err := s.queryRequests(ctx, tx, `r.from_agent_id = ? AND r.idempotency_key = ?`, []any{from, key}, "")
			if err != nil {
				return err
			}
			if len(prev) == 1 {
				return s.replay(ctx, tx, from, prev[0], in, given, msg, &out)
			}
		}
		sender, err := s.ensureAccount(ctx, tx, from, "")
		if err != nil {
			return err
		}
		if err := s.requireReady(sender); err != nil {
			return err
		}
		var target account
		if in.ToAgentID != "" {
			target, err = s.accountByID(ctx, tx, in.ToAgentID)
		} else {
			target, err = s.accountByCode(ctx, tx, given.Code)
		}
		if err != nil {
			return err
		}
		if ok, err := s.visible(ctx, tx, AgentActor(from), target, true); err != nil {
			return err
		} else if !ok || target.Disabled {
			return errAgentNotFound("that identity")
		}
		if target.AgentID == from {
			return protocol.Conflict("cannot_request_self", "you cannot send a chat request to yourself")
		}
		var world *worldRow
		if in.WorldID != "" {
			w, err := s.requireWorldPair(ctx, tx, AgentActor(from), in.WorldID, from, target)
			if err != nil {
				return err
			}
			world = &w
		}
		r, err := s.createRequestTx(ctx, tx, sender, target, world, msg, key, OriginRequest, "")
		if err != nil {
			return err
		}
		out, err = s.requestViewOne(ctx, tx, from, r)
		out.Warning = staleNameWarning(given.Name, target)
		return err
	})
	if err != nil {
		return RequestView{}, err
	}
	return out, nil
}

// replay answers a repeated idempotency key with the original request, or
// idempotency_key_conflict when the key was used for a different request.
func (s *Service) replay(ctx context.Context, tx *store.Tx, from string, prev requestRow, in CreateRequestInput, given Identity, msg string, out *RequestView) error {
	same := prev.OpeningMessage == msg && prev.WorldID == in.WorldID
	if in.ToAgentID != "" {
		same = same && prev.To == in.ToAgentID
	} else {
		to, err := s.accountByID(ctx, tx, prev.To)
		same = same && err == nil && to.Code == given.Code
	}
	if !same {
		return protocol.Conflict("idempotency_key_conflict", "idempotencyKey "+quote(in.IdempotencyKey)+" was already used for a different request ("+prev.ID+")")
	}
	v, err := s.requestViewOne(ctx, tx, from, prev)
	if err != nil {
		return err
	}
	v.IdempotentReplay = true
	*out = v
	return nil
}

// requireWorldPair checks that a world-scoped request may be made: the
// world is open and both sides are active, unbanned members.
func (s *Service) requireWorldPair(ctx context.Context, tx *store.Tx, actor Actor, worldID, from string, target account) (worldRow, error) {
	w, m, err := s.worldFor(ctx, tx, actor, worldID)
	if err != nil {
		return worldRow{}, err
	}
	if m != nil && m.Banned {
		return worldRow{}, errBanned(w)
	}
	if err := requireOpen(w); err != nil {
		return worldRow{}, err
	}
	if m == nil || m.Status != MemberActive {
		return worldRow{}, errMembershipRequired(w)
	}
	tm, err := s.membership(ctx, tx, worldID, target.AgentID)
	if err != nil || tm.Status != MemberActive || tm.Banned {
		return worldRow{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "target_not_world_member", Status: http.StatusConflict,
			Message:    target.identity() + " is not an active member of " + w.DisplayName,
			NextAction: "pick someone from the world's candidates, or send a direct request without worldId", NextTool: "worlds"}
	}
	return w, nil
}

// createRequestTx creates a request from sender to target after the
// caller's identity and world checks, applying the target's contact policy
// and the one-conversation-at-a-time rule.
func (s *Service) createRequestTx(ctx context.Context, tx *store.Tx, sender, target account, world *worldRow, msg, key, origin, broadcastID string) (requestRow, error) {
	if target.ContactPolicy == PolicyClosed {
		return requestRow{}, &protocol.Error{Class: protocol.ClassPermission, Code: "contact_policy_closed",
			Message:    target.identity() + " does not accept chat requests right now",
			NextAction: "tell the user this agent is not taking requests; do not retry"}
	}
	worldID, mode := "", ModeDirect
	if world != nil {
		worldID, mode = world.ID, ModeWorld
	}
	key2, err := s.conversationKey(ctx, tx, sender.AgentID, target.AgentID, worldID)
	if err != nil {
		return requestRow{}, err
	}
	if live, err := s.LiveChatTx(ctx, tx, key2); err == nil {
		return requestRow{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "conversation_already_active", Status: http.StatusConflict,
			Message:    "a conversation with " + target.identity() + " is already active here",
			NextAction: "follow the active conversation (chat_inbox), or close it before requesting a new one", NextTool: "chat_inbox",
			Extra: map[string]any{"chatRequestId": live.ChatRequestID, "conversationKey": live.ConversationKey,
				"localSessionKey": live.LocalSessionKey(sender.AgentID)}}
	} else if protocol.CodeOf(err) != "chat_not_found" {
		return requestRow{}, err
	}
	pend, err := s.queryRequests(ctx, tx, `r.conversation_key = ? AND r.status = ?`, []any{key2, RequestPending}, "")
	if err != nil {
		return requestRow{}, err
	}
	if len(pend) > 0 {
		p := pend[0]
		e := &protocol.Error{Class: protocol.ClassInvalid, Code: "request_already_pending", Status: http.StatusConflict,
			Message:    "a chat request between you and " + target.identity() + " is already pending (" + p.ID + ")",
			NextAction: NextWaitPeerAcceptance, NextTool: "chat_inbox", Extra: map[string]any{"chatRequestId": p.ID}}
		if p.To == sender.AgentID {
			e.Message = target.identity() + " already sent you a request (" + p.ID + "); accept it instead"
			e.NextAction = NextReviewInbound
		}
		return requestRow{}, e
	}
	now := s.now()
	r := requestRow{ID: protocol.NewID(protocol.PrefixRequest), From: sender.AgentID, To: target.AgentID, WorldID: worldID, Mode: mode,
		ConversationKey: key2, OpeningMessage: msg, Status: RequestPending, IdempotencyKey: key, Origin: origin, BroadcastID: broadcastID,
		CreatedAt: store.Millis(now), ExpiresAt: store.Millis(now.Add(s.cfg.RequestTTL)), UpdatedAt: store.Millis(now)}
	_, err = tx.Exec(ctx, `INSERT INTO social_chat_requests (id, from_agent_id, to_agent_id, world_id, mode, conversation_key, opening_message,
		status, idempotency_key, origin, broadcast_id, created_at, expires_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.From, r.To, r.WorldID, r.Mode, r.ConversationKey, r.OpeningMessage, r.Status, r.IdempotencyKey, r.Origin, r.BroadcastID,
		r.CreatedAt, r.ExpiresAt, r.UpdatedAt)
	if err != nil {
		if store.IsUniqueViolation(err) {
			return requestRow{}, protocol.Conflict("request_already_pending", "a chat request between you and "+target.identity()+" is already pending")
		}
		return requestRow{}, fmt.Errorf("insert chat request: %w", err)
	}
	if target.ContactPolicy == PolicyOpen {
		return s.acceptTx(ctx, tx, r, "auto_accepted")
	}
	if err := s.pushRequest(ctx, tx, r, "created"); err != nil {
		return requestRow{}, err
	}
	related := map[string]any{"chatRequestId": r.ID, "fromAgentId": sender.AgentID, "fromIdentity": sender.identity(),
		"conversationKey": r.ConversationKey}
	title := "Chat request from " + sender.identity()
	body := sender.identity() + " wants to chat"
	if world != nil {
		related["worldId"] = world.ID
		body += " in " + world.DisplayName
	}
	body += ". Accept or reject it (chat_inbox)."
	return r, s.notice(ctx, tx, EventNotification, target.AgentID, NoticeChatRequestReceived, title, body, related)
}

// acceptTx accepts a pending request: the chat is created (opening, kickoff
// queued), counters move, the relay is told, both parties are notified.
func (s *Service) acceptTx(ctx context.Context, tx *store.Tx, r requestRow, reason string) (requestRow, error) {
	if err := s.transition(ctx, tx, &r, RequestPending, RequestAccepted, reason, true); err != nil {
		return requestRow{}, err
	}
	now := r.RespondedAt
	_, err := tx.Exec(ctx, `INSERT INTO social_chats (chat_request_id, conversation_key, world_id, mode, sender_agent_id, recipient_agent_id,
		status, kickoff_status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.ConversationKey, r.WorldID, r.Mode, r.From, r.To, ChatOpening, KickoffQueued, now, now)
	if err != nil {
		if store.IsUniqueViolation(err) {
			return requestRow{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "conversation_already_active", Status: http.StatusConflict,
				Message: "a conversation between these agents is already active here", NextTool: "chat_inbox"}
		}
		return requestRow{}, fmt.Errorf("create chat: %w", err)
	}
	for _, id := range []string{r.From, r.To} {
		if _, err := tx.Exec(ctx, `UPDATE social_accounts SET conversation_count = conversation_count + 1, last_active_at = ? WHERE agent_id = ?`, now, id); err != nil {
			return requestRow{}, fmt.Errorf("count conversation: %w", err)
		}
		if r.WorldID != "" {
			if _, err := tx.Exec(ctx, `UPDATE social_memberships SET conversation_count = conversation_count + 1, last_active_at = ? WHERE world_id = ? AND agent_id = ?`,
				now, r.WorldID, id); err != nil {
				return requestRow{}, fmt.Errorf("count conversation: %w", err)
			}
		}
	}
	if r.WorldID != "" {
		if _, err := tx.Exec(ctx, `UPDATE social_worlds SET conversation_count = conversation_count + 1, last_activity_at = ? WHERE id = ?`, now, r.WorldID); err != nil {
			return requestRow{}, fmt.Errorf("count conversation: %w", err)
		}
	}
	if rl := s.getRelay(); rl != nil {
		c, err := s.ChatTx(ctx, tx, r.ID)
		if err != nil {
			return requestRow{}, err
		}
		if err := rl.ChatAccepted(ctx, tx, c); err != nil {
			return requestRow{}, fmt.Errorf("relay: chat accepted: %w", err)
		}
	}
	return r, s.pushRequest(ctx, tx, r, "accepted")
}

// ---- respond ----------------------------------------------------------------------------------

// RespondInput is the body of accept and reject.
type RespondInput struct {
	ActorAgentID string `json:"actorAgentId,omitempty"`
}

// loadForRecipient loads a request the actor may answer. Strangers get
// chat_request_not_found; the sender gets not_request_recipient.
func (s *Service) loadForRecipient(ctx context.Context, q store.Q, actor Actor, id string) (requestRow, error) {
	r, err := s.requestByID(ctx, q, id)
	if err != nil {
		return requestRow{}, err
	}
	switch actor.AgentID {
	case r.To:
		return r, nil
	case r.From:
		return requestRow{}, protocol.Forbidden("not_request_recipient", "only the recipient ("+r.To+") can answer this request; you sent it")
	}
	return requestRow{}, errRequestNotFound(id)
}

// respondable checks a request can still be answered; an expired one is
// marked expired (committed) and reported as chat_request_expired.
func (s *Service) respondable(ctx context.Context, tx *store.Tx, r requestRow) (expired bool, err error) {
	if r.Status == RequestPending && s.nowMs() >= r.ExpiresAt {
		return true, s.expireTx(ctx, tx, r)
	}
	switch r.Status {
	case RequestPending:
		return false, nil
	case RequestExpired:
		return false, errExpired(r.ID)
	}
	return false, &protocol.Error{Class: protocol.ClassInvalid, Code: "chat_request_not_pending", Status: http.StatusConflict,
		Message: "chat request " + r.ID + " is " + r.Status + ", not pending", Extra: map[string]any{"status": r.Status},
		NextAction: "list the inbox for current requests", NextTool: "chat_inbox"}
}

func errExpired(id string) error {
	return &protocol.Error{Class: protocol.ClassInvalid, Code: "chat_request_expired", Status: http.StatusGone,
		Message: "chat request " + id + " expired before it was answered", NextAction: "the sender may send a new request"}
}

// AcceptRequest accepts a pending request (its recipient). Accepting an
// accepted request again returns it with alreadyApplied. Errors:
// chat_request_not_found, not_request_recipient, chat_request_expired,
// chat_request_not_pending, conversation_already_active, world_closed,
// world_paused, target_not_world_member.
func (s *Service) AcceptRequest(ctx context.Context, actor Actor, id string) (RequestView, error) {
	return s.respond(ctx, actor, id, true)
}

// RejectRequest rejects a pending request (its recipient). Errors as
// AcceptRequest.
func (s *Service) RejectRequest(ctx context.Context, actor Actor, id string) (RequestView, error) {
	return s.respond(ctx, actor, id, false)
}

func (s *Service) respond(ctx context.Context, actor Actor, id string, accept bool) (RequestView, error) {
	if _, err := requireAgent(actor, "actorAgentId"); err != nil {
		return RequestView{}, err
	}
	var out RequestView
	var expired bool
	err := s.write(ctx, func(tx *store.Tx) error {
		r, err := s.loadForRecipient(ctx, tx, actor, id)
		if err != nil {
			return err
		}
		want := RequestRejected
		if accept {
			want = RequestAccepted
		}
		if r.Status == want {
			out, err = s.requestViewOne(ctx, tx, actor.AgentID, r)
			out.AlreadyApplied = true
			return err
		}
		if expired, err = s.respondable(ctx, tx, r); err != nil || expired {
			return err
		}
		if accept {
			if r.WorldID != "" {
				sender, err := s.accountByID(ctx, tx, r.From)
				if err != nil {
					return err
				}
				// Both sides must still be members of an open world.
				if _, err := s.requireWorldPair(ctx, tx, AgentActor(r.To), r.WorldID, r.To, sender); err != nil {
					return err
				}
			}
			if live, err := s.LiveChatTx(ctx, tx, r.ConversationKey); err == nil {
				if live.ChatRequestID == r.ID { // a racing accept of this very request won
					return s.afterRace(ctx, tx, actor.AgentID, r.ID, want, &out)
				}
				return &protocol.Error{Class: protocol.ClassInvalid, Code: "conversation_already_active", Status: http.StatusConflict,
					Message: "a conversation with this agent is already active here", NextTool: "chat_inbox",
					Extra: map[string]any{"chatRequestId": live.ChatRequestID, "conversationKey": live.ConversationKey}}
			}
			r2, err := s.acceptTx(ctx, tx, r, "accepted_by_recipient")
			if errors.Is(err, errLostRace) {
				return s.afterRace(ctx, tx, actor.AgentID, r.ID, want, &out)
			}
			if err != nil {
				return err
			}
			r = r2
		} else {
			err := s.transition(ctx, tx, &r, RequestPending, RequestRejected, "rejected_by_recipient", true)
			if errors.Is(err, errLostRace) {
				return s.afterRace(ctx, tx, actor.AgentID, r.ID, want, &out)
			}
			if err != nil {
				return err
			}
			if err := s.pushRequest(ctx, tx, r, "rejected"); err != nil {
				return err
			}
		}
		out, err = s.requestViewOne(ctx, tx, actor.AgentID, r)
		return err
	})
	if err != nil {
		return RequestView{}, err
	}
	if expired {
		return RequestView{}, errExpired(id)
	}
	return out, nil
}

// afterRace answers a respond call that lost a race: the same answer is
// already applied (alreadyApplied), anything else is not pending anymore.
func (s *Service) afterRace(ctx context.Context, tx *store.Tx, viewer, id, want string, out *RequestView) error {
	r, err := s.requestByID(ctx, tx, id)
	if err != nil {
		return err
	}
	if r.Status != want {
		_, err := s.respondable(ctx, tx, r)
		return err
	}
	v, err := s.requestViewOne(ctx, tx, viewer, r)
	v.AlreadyApplied = true
	*out = v
	return err
}

// ---- close ------------------------------------------------------------------------------------

// CloseInput is the body of POST /v1/chat-requests/conversations/close:
// the conversation by conversationKey or the caller's localSessionKey (or
// a chatRequestId).
type CloseInput struct {
	ActorAgentID    string `json:"actorAgentId,omitempty"`
	ConversationKey string `json:"conversationKey,omitempty"`
	LocalSessionKey string `json:"localSessionKey,omitempty"`
	ChatRequestID   string `json:"chatRequestId,omitempty"`
	Reason          string `json:"reason,omitempty"`
}

// CloseConversation ends the actor's live chat in a conversation (the relay
// is told; both parties are notified), or withdraws a pending request
// there. Closing what is already over returns its state with
// alreadyApplied. Errors: conversation_required, conversation_not_found.
func (s *Service) CloseConversation(ctx context.Context, actor Actor, in CloseInput) (RequestView, error) {
	me, err := requireAgent(actor, "actorAgentId")
	if err != nil {
		return RequestView{}, err
	}
	reason := normText(in.Reason)
	fe := protocol.FieldErrors{}
	checkText(fe, "reason", reason, MaxReason, false)
	if err := fe.Err(); err != nil {
		return RequestView{}, err
	}
	if in.ConversationKey == "" && in.LocalSessionKey == "" && in.ChatRequestID == "" {
		return RequestView{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "conversation_required",
			Message: "name the conversation: conversationKey or localSessionKey", MissingFields: []string{"conversationKey", "localSessionKey"},
			NextAction: "take conversationKey or localSessionKey from the inbox (chat_inbox)", NextTool: "chat_inbox"}
	}
	notFound := func() error {
		e := protocol.NotFound("conversation_not_found", "no conversation of yours matches")
		e.NextTool = "chat_inbox"
		e.NextAction = "list your chats and use their conversationKey"
		return e
	}
	var out RequestView
	err = s.write(ctx, func(tx *store.Tx) error {
		var rs []requestRow
		var err error
		switch {
		case in.ChatRequestID != "":
			rs, err = s.queryRequests(ctx, tx, `r.id = ?`, []any{in.ChatRequestID}, "")
		case in.ConversationKey != "":
			rs, err = s.queryRequests(ctx, tx, `r.conversation_key = ?`, []any{in.ConversationKey}, " ORDER BY r.created_at DESC, r.id DESC LIMIT 1")
		default:
			viewer, peer, world, ok := ParseLocalSessionKey(in.LocalSessionKey)
			if !ok || viewer != me {
				return notFound()
			}
			rs, err = s.queryRequests(ctx, tx, `((r.from_agent_id = ? AND r.to_agent_id = ?) OR (r.from_agent_id = ? AND r.to_agent_id = ?)) AND r.world_id = ?`,
				[]any{me, peer, peer, me, world}, " ORDER BY r.created_at DESC, r.id DESC LIMIT 1")
		}
		if err != nil {
			return err
		}
		if len(rs) == 0 || (rs[0].From != me && rs[0].To != me) {
			return notFound()
		}
		r := rs[0]
		if reason == "" {
			reason = "closed_by_participant"
		}
		switch r.Status {
		case RequestPending:
			err := s.transition(ctx, tx, &r, RequestPending, RequestClosed, reason, false)
			if errors.Is(err, errLostRace) {
				if r, err = s.requestByID(ctx, tx, r.ID); err != nil {
					return err
				}
				out, err = s.requestViewOne(ctx, tx, me, r)
				out.AlreadyApplied = true
				return err
			}
			if err != nil {
				return err
			}
			if err := s.pushRequest(ctx, tx, r, "closed"); err != nil {
				return err
			}
		case RequestAccepted:
			c, err := s.ChatTx(ctx, tx, r.ID)
			if err != nil {
				return err
			}
			if !c.Live() {
				out, err = s.requestViewOne(ctx, tx, me, r)
				out.AlreadyApplied = true
				return err
			}
			if _, err := s.finishChat(ctx, tx, c, EndChat{Status: ChatEnded, Reason: reason}, true); err != nil {
				return err
			}
			if r, err = s.requestByID(ctx, tx, r.ID); err != nil {
				return err
			}
		default:
			out, err = s.requestViewOne(ctx, tx, me, r)
			out.AlreadyApplied = true
			return err
		}
		out, err = s.requestViewOne(ctx, tx, me, r)
		return err
	})
	return out, err
}

// closePendingWhere closes pending requests matching where (columns of
// social_chat_requests) with reason, notifying both parties.
func (s *Service) closePendingWhere(ctx context.Context, tx *store.Tx, where string, args []any, reason string) error {
	rs, err := s.queryRequests(ctx, tx, `(`+where+`) AND r.status = ?`, append(args, RequestPending), " ORDER BY r.created_at")
	if err != nil {
		return err
	}
	for _, r := range rs {
		err := s.transition(ctx, tx, &r, RequestPending, RequestClosed, reason, false)
		if errors.Is(err, errLostRace) {
			continue
		}
		if err != nil {
			return err
		}
		if err := s.pushRequest(ctx, tx, r, "closed"); err != nil {
			return err
		}
	}
	return nil
}

// ---- expiry -----------------------------------------------------------------------------------

func (s *Service) expireTx(ctx context.Context, tx *store.Tx, r requestRow) error {
	err := s.transition(ctx, tx, &r, RequestPending, RequestExpired, "not_answered_in_time", false)
	if errors.Is(err, errLostRace) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.pushRequest(ctx, tx, r, "expired")
}

// ExpireDue marks pending requests past their expiry as expired and
// notifies both parties; it returns how many it expired. The sweeper calls
// it periodically; it is safe on several nodes at once.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	total := 0
	for {
		due, err := s.queryRequests(ctx, s.db, `r.status = ? AND r.expires_at <= ?`, []any{RequestPending, s.nowMs()}, " ORDER BY r.expires_at LIMIT 200")
		if err != nil {
			return total, err
		}
		if len(due) == 0 {
			return total, nil
		}
		err = s.write(ctx, func(tx *store.Tx) error {
			for _, r := range due {
				if err := s.expireTx(ctx, tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += len(due)
		if len(due) < 200 {
			return total, nil
		}
	}
}

// RunExpirySweeper expires due requests every interval until ctx ends.
func (s *Service) RunExpirySweeper(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := s.ExpireDue(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("chat request expiry sweep failed", "err", err)
		} else if n > 0 {
			s.log.Info("chat requests expired", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
