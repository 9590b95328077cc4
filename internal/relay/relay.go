// Package relay runs live agent-to-agent conversations once a chat request
// is accepted: it sends the sender's conversation session a kickoff with its
// context document, relays the opener and every later turn to the other
// side (queueing turns for a side that has not answered yet), enforces the
// ending protocol (the [[request_conversation_end]] handshake, NO_REPLY
// silence, turn and idle caps), records feedback, asks for owner reports
// and delivers them, and keeps the transcript.
//
// Everything the relay sends is a bus delivery from the system sender
// "system:relay" to a session of the agent (conversation:…, management:…,
// main:…); agents answer in the Claworld wire dialect (WebSocket frames or
// the HTTP fallbacks), or with native response envelopes. All state lives in
// the store, so a restart resumes every conversation where it stopped.
package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/contextdoc"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/social"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// SystemID is the bus sender of everything the relay delivers.
const SystemID = "system:relay"

// DeliveryAction is the request action of relay deliveries on the bus.
const DeliveryAction = "claworld.delivery"

// Delivery kinds the relay tracks (deliveryType on the wire is kickoff,
// reply or message).
const (
	KindKickoff       = "kickoff"
	KindOpener        = "opener" // the delivery carrying the sender's opener to the recipient
	KindTurn          = "turn"
	KindReportRequest = "report_request"
)

// Delivery statuses.
const (
	StatusPending    = "pending"
	StatusReplied    = "replied"
	StatusKeptSilent = "kept_silent"
	StatusClosed     = "closed" // the conversation ended before it was answered
)

// Config tunes the relay. Zero values take the defaults.
type Config struct {
	// MaxTurns caps a conversation without a world policy (default 40;
	// turns of both sides count).
	MaxTurns int
	// IdleTimeout ends an active conversation with no turn for this long
	// when its world sets none (default 1h).
	IdleTimeout time.Duration
	// DeliveryTTL is how long a relay delivery waits for its agent's
	// runtime before it is dead-lettered (default 24h).
	DeliveryTTL time.Duration
	// AcceptedLease is the lease a delivery gets once the runtime sends
	// "accepted" (default 15 min): models take their time.
	AcceptedLease time.Duration
	// MaxTextBytes bounds one turn (default 16 KiB).
	MaxTextBytes int
	// NoticeTTL is how long notifications wait in management and main
	// sessions (default 7 days).
	NoticeTTL time.Duration
	// SweepInterval is how often idle conversations are looked for (default 30s).
	SweepInterval time.Duration
}

func (c *Config) setDefaults() {
	if c.MaxTurns <= 0 {
		c.MaxTurns = 40
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = time.Hour
	}
	if c.DeliveryTTL <= 0 {
		c.DeliveryTTL = 24 * time.Hour
	}
	if c.AcceptedLease <= 0 {
		c.AcceptedLease = 15 * time.Minute
	}
	if c.MaxTextBytes <= 0 {
		c.MaxTextBytes = 16 << 10
	}
	if c.NoticeTTL <= 0 {
		c.NoticeTTL = 7 * 24 * time.Hour
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = 30 * time.Second
	}
}

// Service is the relay.
type Service struct {
	db     *store.DB
	bus    *bus.Service
	social *social.Service
	clock  clock.Clock
	log    *slog.Logger
	cfg    Config
	turns  *turnTimer
}

// New builds the relay, registers it as the bus system sender
// "system:relay" and as the social layer's relay.
func New(db *store.DB, b *bus.Service, soc *social.Service, c clock.Clock, log *slog.Logger, cfg Config) *Service {
	cfg.setDefaults()
	if c == nil {
		c = clock.Real{}
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Service{db: db, bus: b, social: soc, clock: c, log: log, cfg: cfg, turns: newTurnTimer()}
	b.RegisterSystem(SystemID, bus.SystemHooks{OnMessage: s.onMessage, OnDelivered: s.onDelivered, OnDead: s.onDead})
	soc.SetRelay(s)
	return s
}

// Config returns the effective configuration.
func (s *Service) Config() Config { return s.cfg }

// ---- wire shapes ---------------------------------------------------------------------

// FramePayload is the payload of a Claworld delivery frame.
type FramePayload struct {
	Text             string   `json:"text"`
	ContextText      string   `json:"contextText,omitempty"`
	CommandText      string   `json:"commandText,omitempty"`
	UntrustedContext []string `json:"untrustedContext,omitempty"`
}

// FrameMetadata is the metadata of a Claworld delivery frame.
type FrameMetadata struct {
	FromAgentID         string `json:"fromAgentId"`
	FromAgentCode       string `json:"fromAgentCode"`
	FromDisplayIdentity string `json:"fromDisplayIdentity"`
	AllowReply          bool   `json:"allowReply"`
	AcceptanceRequired  bool   `json:"acceptanceRequired"`
	DeliveryType        string `json:"deliveryType"` // kickoff | reply | message
	// ReportSource is set on report requests: the source a reply's report
	// is filed under (POST /v1/reports uses the same).
	ReportSource string `json:"reportSource,omitempty"`
}

// DeliveryParams are the params of a relay delivery request on the bus:
// everything of the Claworld delivery frame that is not a property of the
// bus delivery itself.
type DeliveryParams struct {
	ChatRequestID   string        `json:"chatRequestId,omitempty"`
	ConversationKey string        `json:"conversationKey,omitempty"`
	WorldID         string        `json:"worldId,omitempty"`
	Payload         FramePayload  `json:"payload"`
	Metadata        FrameMetadata `json:"metadata"`
}

// ---- store --------------------------------------------------------------------------

type deliveryRec struct {
	DeliveryID, MessageID, ChatRequestID, AgentID, SessionKey, Kind, Status, TurnID string
	AllowReply                                                                      bool
	CreatedAt, AcceptedAt, AnsweredAt                                               int64
}

const deliveryCols = `delivery_id, message_id, chat_request_id, agent_id, session_key, kind, status, allow_reply, turn_id, created_at, accepted_at, answered_at`

func scanDelivery(row interface{ Scan(...any) error }) (deliveryRec, error) {
	var d deliveryRec
	err := row.Scan(&d.DeliveryID, &d.MessageID, &d.ChatRequestID, &d.AgentID, &d.SessionKey, &d.Kind, &d.Status, &d.AllowReply, &d.TurnID, &d.CreatedAt, &d.AcceptedAt, &d.AnsweredAt)
	return d, err
}

func (s *Service) loadDelivery(ctx context.Context, q store.Q, id string) (deliveryRec, bool, error) {
	d, err := scanDelivery(q.QueryRow(ctx, `SELECT `+deliveryCols+` FROM relay_deliveries WHERE delivery_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("load relay delivery: %w", err)
	}
	return d, true, nil
}

type side struct {
	chatID, agentID string
	outstanding     string
	baselineSent    bool
	endRequested    bool
}

func (s *Service) loadSide(ctx context.Context, q store.Q, chatID, agentID string) (side, error) {
	sd := side{chatID: chatID, agentID: agentID}
	err := q.QueryRow(ctx, `SELECT outstanding, baseline_sent, end_requested FROM relay_sides WHERE chat_request_id = ? AND agent_id = ?`, chatID, agentID).
		Scan(&sd.outstanding, &sd.baselineSent, &sd.endRequested)
	if errors.Is(err, sql.ErrNoRows) {
		return sd, nil
	}
	if err != nil {
		return sd, fmt.Errorf("load side: %w", err)
	}
	return sd, nil
}

func (s *Service) saveSide(ctx context.Context, tx *store.Tx, sd side) error {
	_, err := tx.Exec(ctx, `INSERT INTO relay_sides (chat_request_id, agent_id, outstanding, baseline_sent, end_requested) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (chat_request_id, agent_id) DO UPDATE SET outstanding = excluded.outstanding, baseline_sent = excluded.baseline_sent, end_requested = excluded.end_requested`,
		sd.chatID, sd.agentID, sd.outstanding, sd.baselineSent, sd.endRequested)
	if err != nil {
		return fmt.Errorf("save side: %w", err)
	}
	return nil
}

// ---- sending ------------------------------------------------------------------------

type outgoing struct {
	chat       social.Chat
	target     string
	session    string
	kind       string
	wireType   string
	from       social.Participant // whose words (or, for kickoffs and reports, whom the delivery is about)
	payload    FramePayload
	allowReply bool
	turnID     string
	reportSrc  string
	ttl        time.Duration
}

// send enqueues one relay delivery and records it.
func (s *Service) send(ctx context.Context, tx *store.Tx, o outgoing) (string, error) {
	if o.ttl <= 0 {
		o.ttl = s.cfg.DeliveryTTL
	}
	params := DeliveryParams{
		ChatRequestID: o.chat.ChatRequestID, ConversationKey: o.chat.ConversationKey, WorldID: o.chat.WorldID,
		Payload: o.payload,
		Metadata: FrameMetadata{FromAgentID: o.from.AgentID, FromAgentCode: o.from.AgentCode, FromDisplayIdentity: o.from.Identity,
			AllowReply: o.allowReply, AcceptanceRequired: o.allowReply, DeliveryType: o.wireType, ReportSource: o.reportSrc},
	}
	env := &protocol.Envelope{
		From: protocol.Address{Agent: SystemID}, To: protocol.Address{Agent: o.target, Session: o.session},
		Type: protocol.TypeRequest, TTL: int(o.ttl / time.Second),
		Payload: protocol.MustJSON(map[string]any{"action": DeliveryAction, "params": params}),
	}
	res, err := s.bus.SendSystemTx(ctx, tx, env)
	if err != nil {
		return "", fmt.Errorf("relay delivery: %w", err)
	}
	if len(res.DeliveryIDs) != 1 {
		return "", fmt.Errorf("relay delivery: expected one delivery, got %d", len(res.DeliveryIDs))
	}
	id := res.DeliveryIDs[0]
	_, err = tx.Exec(ctx, `INSERT INTO relay_deliveries (delivery_id, message_id, chat_request_id, agent_id, session_key, kind, status, allow_reply, turn_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, env.ID, o.chat.ChatRequestID, o.target, o.session, o.kind, StatusPending, o.allowReply, o.turnID, store.Millis(s.clock.Now()))
	if err != nil {
		return "", fmt.Errorf("record relay delivery: %w", err)
	}
	return id, nil
}

// ---- documents -----------------------------------------------------------------------

// policyFor returns the conversation policy: the world's where set, else
// the relay defaults.
func (s *Service) policyFor(cc social.ChatContext) contextdoc.Policy {
	p := contextdoc.Policy{MaxTurns: s.cfg.MaxTurns, IdleTimeout: s.cfg.IdleTimeout, DSL: true}
	if cc.World != nil {
		wp := cc.World.Policy
		if wp.MaxTurns > 0 {
			p.MaxTurns = wp.MaxTurns
		}
		if wp.IdleTimeout > 0 {
			p.IdleTimeout = time.Duration(wp.IdleTimeout) * time.Second
		}
		p.ReportingRequired = wp.ReportingRequired
		p.DSL = wp.DSLEnabled
	}
	return p
}

func participantOf(p social.Participant, world bool) contextdoc.Participant {
	global := p.AgentProfile
	if p.HumanProfile != "" {
		if global != "" {
			global += "\n\n"
		}
		global += "Owner: " + p.HumanProfile
	}
	out := contextdoc.Participant{Identity: p.Identity, GlobalProfile: global}
	if world {
		out.WorldProfile = p.ParticipantContextText
	}
	return out
}

// input builds the context document input for viewer.
func (s *Service) input(cc social.ChatContext, viewer string, role contextdoc.Role, queued []string) contextdoc.Input {
	in := contextdoc.Input{
		// The report source is the chat request id: unique per intent.
		Role: role, IntentID: cc.Chat.ChatRequestID, ConversationKey: cc.Chat.ChatRequestID,
		Mode: contextdoc.ModeDirect, Policy: s.policyFor(cc), QueuedTurns: queued,
		Origin: contextdoc.Origin{Source: contextdoc.OriginChatRequest},
	}
	world := cc.World != nil
	if world {
		in.Mode = contextdoc.ModeWorld
		in.World = contextdoc.World{ID: cc.World.WorldID, Name: cc.World.DisplayName, Context: cc.World.WorldContextText}
	}
	you, peer := cc.Sender, cc.Recipient
	if viewer == cc.Chat.RecipientAgentID {
		you, peer = cc.Recipient, cc.Sender
	}
	in.You, in.Peer = participantOf(you, world), participantOf(peer, world)
	if viewer == cc.Chat.SenderAgentID || cc.Origin == social.OriginBroadcast {
		in.Brief = cc.OpeningMessage
	}
	if cc.Origin == social.OriginBroadcast && cc.Broadcast != nil {
		in.Origin.Source = contextdoc.OriginWorldBroadcast
		in.Origin.Broadcast = &contextdoc.Broadcast{ID: cc.BroadcastID, Audience: cc.Broadcast.Audience, ReplyPolicy: cc.Broadcast.ReplyPolicy,
			PublishedBy: cc.Sender.Identity, PublishedAt: cc.RequestedAt}
	}
	return in
}

func (s *Service) render(in contextdoc.Input) (string, error) {
	doc, err := contextdoc.Render(in)
	if err != nil {
		return "", fmt.Errorf("render context document: %w", err)
	}
	return doc, nil
}

func (s *Service) participant(cc social.ChatContext, agentID string) social.Participant {
	if agentID == cc.Chat.SenderAgentID {
		return cc.Sender
	}
	return cc.Recipient
}

// ---- social.Relay ---------------------------------------------------------------------

// ChatAccepted starts a conversation: the sender's conversation session
// gets the kickoff with its full context document and the task
// instruction to write the opener.
func (s *Service) ChatAccepted(ctx context.Context, tx *store.Tx, chat social.Chat) error {
	cc, err := s.social.ChatContextTx(ctx, tx, chat.ChatRequestID)
	if err != nil {
		return err
	}
	sender, recipient := chat.SenderAgentID, chat.RecipientAgentID
	in := s.input(cc, sender, contextdoc.RoleSenderKickoff, nil)
	doc, err := s.render(in)
	if err != nil {
		return err
	}
	id, err := s.send(ctx, tx, outgoing{
		chat: chat, target: sender, session: chat.LocalSessionKey(sender), kind: KindKickoff, wireType: "kickoff",
		from: cc.Recipient, allowReply: true,
		payload: FramePayload{Text: contextdoc.KickoffText(in), ContextText: doc, CommandText: contextdoc.CommandText(in)},
	})
	if err != nil {
		return err
	}
	if err := s.saveSide(ctx, tx, side{chatID: chat.ChatRequestID, agentID: sender, outstanding: id, baselineSent: true}); err != nil {
		return err
	}
	return s.saveSide(ctx, tx, side{chatID: chat.ChatRequestID, agentID: recipient})
}

// ChatClosed stops a conversation closed by a participant, a moderator or
// its world closing: unanswered deliveries are withdrawn.
func (s *Service) ChatClosed(ctx context.Context, tx *store.Tx, chat social.Chat, reason string) error {
	return s.withdraw(ctx, tx, chat.ChatRequestID)
}

// withdraw settles every unanswered delivery of a chat, so none is pushed
// again and late answers are refused as not replyable.
func (s *Service) withdraw(ctx context.Context, tx *store.Tx, chatID string) error {
	// Deliveries that invite no reply (the conversation's last word) still
	// go out; only those awaiting an answer are withdrawn.
	rows, err := tx.Query(ctx, `SELECT delivery_id FROM relay_deliveries WHERE chat_request_id = ? AND status = ? AND kind <> ? AND allow_reply = ?`,
		chatID, StatusPending, KindReportRequest, true)
	if err != nil {
		return fmt.Errorf("withdraw: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if _, err := s.bus.CompleteTx(ctx, tx, id); err != nil && protocol.CodeOf(err) != "delivery_not_found" {
			return err
		}
	}
	now := store.Millis(s.clock.Now())
	if _, err := tx.Exec(ctx, `UPDATE relay_deliveries SET status = ?, answered_at = ? WHERE chat_request_id = ? AND status = ? AND kind <> ? AND allow_reply = ?`,
		StatusClosed, now, chatID, StatusPending, KindReportRequest, true); err != nil {
		return fmt.Errorf("withdraw: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE relay_sides SET outstanding = '' WHERE chat_request_id = ?`, chatID); err != nil {
		return fmt.Errorf("withdraw: %w", err)
	}
	_, err = tx.Exec(ctx, `UPDATE relay_turns SET pending = ? WHERE chat_request_id = ? AND pending = ?`, false, chatID, true)
	return err
}

func notReplyable(d deliveryRec) error {
	status := d.Status
	if status == StatusPending && !d.AllowReply {
		status = "reply_not_allowed"
	}
	return &protocol.Error{Class: protocol.ClassInvalid, Code: "delivery_not_replyable", Status: 409,
		Message:    fmt.Sprintf("delivery %s was already answered or withdrawn (%s); nothing to do", d.DeliveryID, status),
		NextAction: "drop it: the conversation has moved on",
		Extra:      map[string]any{"reason": "delivery_not_replyable", "delivery": map[string]any{"deliveryId": d.DeliveryID, "status": status}}}
}

func deliveryNotFound(id string) error {
	return &protocol.Error{Class: protocol.ClassUnavailable, Code: "delivery_not_found", Status: 404,
		Message: "no relay delivery " + id + " for you", NextAction: "answer the deliveries pushed to your own sessions"}
}

func truncateRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
