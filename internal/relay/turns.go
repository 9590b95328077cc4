package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/contextdoc"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/social"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Turn kinds in the transcript.
const (
	TurnOpener  = "opener"
	TurnReply   = "reply"
	TurnMessage = "message" // sent with POST /v1/orchestration/messages
)

// Answer is what the relay did with a reply or a kept-silent answer.
type Answer struct {
	DeliveryID string `json:"deliveryId"`
	Status     string `json:"status"` // replied | kept_silent
	TurnID     string `json:"turnId,omitempty"`
	// Relayed is false when the answer could not reach the peer (the
	// conversation had ended, or it was a report).
	Relayed    bool   `json:"relayed"`
	ChatStatus string `json:"chatStatus,omitempty"`
	Note       string `json:"note,omitempty"`
}

// Reply records an agent's answer to a relay delivery and relays it. An
// exact NO_REPLY is kept silence. Repeats are refused with 409
// delivery_not_replyable, so a retried reply never makes a second turn.
func (s *Service) Reply(ctx context.Context, agentID, deliveryID, text, source string) (Answer, error) {
	if _, ok := receivedAt(ctx); !ok {
		ctx = withReceived(ctx, time.Now())
	}
	var out Answer
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		out, err = s.replyTx(ctx, tx, agentID, deliveryID, text)
		return err
	})
	return out, err
}

// KeptSilent records that an agent had nothing to say to a delivery.
func (s *Service) KeptSilent(ctx context.Context, agentID, deliveryID, reason, source string) (Answer, error) {
	var out Answer
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		out, err = s.keptSilentTx(ctx, tx, agentID, deliveryID, reason)
		return err
	})
	return out, err
}

// Accepted records that the agent's runtime took a delivery; its lease is
// lengthened so a slow model does not cause a redelivery. Repeats are fine.
func (s *Service) Accepted(ctx context.Context, agentID, deliveryID string) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		d, ok, err := s.loadDelivery(ctx, tx, deliveryID)
		if err != nil {
			return err
		}
		if !ok || d.AgentID != agentID {
			return deliveryNotFound(deliveryID)
		}
		if d.AcceptedAt == 0 {
			if _, err := tx.Exec(ctx, `UPDATE relay_deliveries SET accepted_at = ? WHERE delivery_id = ?`, store.Millis(s.clock.Now()), deliveryID); err != nil {
				return fmt.Errorf("accepted: %w", err)
			}
		}
		if d.Status == StatusPending {
			return s.bus.ExtendTx(ctx, tx, deliveryID, s.cfg.AcceptedLease)
		}
		return nil
	})
}

// answerable loads a delivery an agent is answering and checks it may be.
func (s *Service) answerable(ctx context.Context, tx *store.Tx, agentID, deliveryID string) (deliveryRec, error) {
	d, ok, err := s.loadDelivery(ctx, tx, deliveryID)
	if err != nil {
		return d, err
	}
	if !ok || d.AgentID != agentID {
		return d, deliveryNotFound(deliveryID)
	}
	if d.Status != StatusPending {
		return d, notReplyable(d)
	}
	return d, nil
}

func (s *Service) markAnswered(ctx context.Context, tx *store.Tx, d deliveryRec, status string) error {
	if _, err := s.bus.CompleteTx(ctx, tx, d.DeliveryID); err != nil && protocol.CodeOf(err) != "delivery_not_found" {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE relay_deliveries SET status = ?, answered_at = ? WHERE delivery_id = ?`, status, store.Millis(s.clock.Now()), d.DeliveryID)
	if err != nil {
		return fmt.Errorf("mark answered: %w", err)
	}
	return nil
}

func (s *Service) replyTx(ctx context.Context, tx *store.Tx, agentID, deliveryID, text string) (Answer, error) {
	d, err := s.answerable(ctx, tx, agentID, deliveryID)
	if err != nil {
		return Answer{}, err
	}
	if contextdoc.IsNoReply(text) {
		return s.keptSilentTx(ctx, tx, agentID, deliveryID, "no_reply_token")
	}
	if strings.TrimSpace(text) == "" {
		return Answer{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "reply_text_required", MissingFields: []string{"payload.text"},
			Message: "payload.text is empty; send the reply text, or kept_silent (NO_REPLY) when there is nothing to say"}
	}
	if len(text) > s.cfg.MaxTextBytes {
		return Answer{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "reply_too_long", Status: 413,
			Message: fmt.Sprintf("payload.text is %d bytes; a turn may have at most %d", len(text), s.cfg.MaxTextBytes), NextAction: "say it shorter"}
	}
	if !d.AllowReply {
		// The conversation's last word: nothing is relayed, but the
		// delivery is settled so it is not pushed again.
		if err := s.markAnswered(ctx, tx, d, StatusReplied); err != nil {
			return Answer{}, err
		}
		return Answer{DeliveryID: deliveryID, Status: StatusReplied, Note: "this delivery did not allow a reply; nothing was relayed"}, nil
	}
	if err := s.markAnswered(ctx, tx, d, StatusReplied); err != nil {
		return Answer{}, err
	}
	if d.Kind == KindReportRequest {
		src := s.reportSourceOf(ctx, tx, d)
		if _, _, err := s.fileReportTx(ctx, tx, agentID, src, text, true); err != nil {
			return Answer{}, err
		}
		return Answer{DeliveryID: deliveryID, Status: StatusReplied, Note: "filed as the owner report"}, nil
	}
	chat, err := s.social.ChatTx(ctx, tx, d.ChatRequestID)
	if err != nil {
		return Answer{}, err
	}
	if !chat.Live() {
		return Answer{DeliveryID: deliveryID, Status: StatusReplied, ChatStatus: chat.Status, Note: "the conversation has ended; the reply was not relayed"}, nil
	}
	me, err := s.loadSide(ctx, tx, chat.ChatRequestID, agentID)
	if err != nil {
		return Answer{}, err
	}
	if me.outstanding == deliveryID {
		me.outstanding = ""
	}
	kind := TurnReply
	if d.Kind == KindKickoff {
		kind = TurnOpener
	}
	turn, err := s.addTurn(ctx, tx, chat, agentID, kind, text, deliveryID, "")
	if err != nil {
		return Answer{}, err
	}
	if d.Kind == KindKickoff {
		if chat, err = s.social.UpdateKickoffTx(ctx, tx, chat.ChatRequestID, social.KickoffUpdate{OpenerAcceptedAt: s.clock.Now()}); err != nil {
			return Answer{}, err
		}
	}
	chat, err = s.afterTurn(ctx, tx, chat, &me, turn)
	if err != nil {
		return Answer{}, err
	}
	return Answer{DeliveryID: deliveryID, Status: StatusReplied, TurnID: turn.ID, Relayed: true, ChatStatus: chat.Status}, nil
}

// afterTurn applies a new turn: counts it, reads its DSL tokens, relays it
// to the peer (or queues it), applies the ending rules and hands the author
// anything queued for it.
func (s *Service) afterTurn(ctx context.Context, tx *store.Tx, chat social.Chat, me *side, t turnRec) (social.Chat, error) {
	cc, err := s.social.ChatContextTx(ctx, tx, chat.ChatRequestID)
	if err != nil {
		return chat, err
	}
	policy := s.policyFor(cc)
	if chat, err = s.social.RecordTurnTx(ctx, tx, chat.ChatRequestID, t.From); err != nil {
		return chat, err
	}
	for _, tok := range contextdoc.Tokens(t.Text) {
		switch tok {
		case contextdoc.TokenLike, contextdoc.TokenDislike:
			if !policy.DSL {
				continue
			}
			kind := social.FeedbackLike
			if tok == contextdoc.TokenDislike {
				kind = social.FeedbackDislike
			}
			if chat, _, err = s.social.RecordFeedbackTx(ctx, tx, chat.ChatRequestID, t.From, kind); err != nil {
				return chat, err
			}
		case contextdoc.TokenEnd:
			me.endRequested = true
		}
	}
	if err := s.saveSide(ctx, tx, *me); err != nil {
		return chat, err
	}
	peerID := chat.Peer(t.From)
	peer, err := s.loadSide(ctx, tx, chat.ChatRequestID, peerID)
	if err != nil {
		return chat, err
	}
	bothEnd := me.endRequested && peer.endRequested
	capped := policy.MaxTurns > 0 && chat.TurnCount >= policy.MaxTurns
	final := bothEnd || capped
	// Turns queued for either side, read once: the relay to the peer does
	// not touch those queued for the author.
	queued, err := s.pendingTurns(ctx, tx, chat.ChatRequestID, "")
	if err != nil {
		return chat, err
	}
	var forPeer, forMe []turnRec
	for _, q := range queued {
		if q.To == peerID {
			forPeer = append(forPeer, q)
		} else {
			forMe = append(forMe, q)
		}
	}
	if err := s.relayTo(ctx, tx, chat, cc, &peer, t, forPeer, !final); err != nil {
		return chat, err
	}
	switch {
	case bothEnd:
		return s.end(ctx, tx, chat, cc, social.ChatEnded, "both_requested_end")
	case capped:
		return s.end(ctx, tx, chat, cc, social.ChatEnded, "max_turns")
	case me.endRequested && chat.Status == social.ChatActive:
		if chat, err = s.social.SetChatStatusTx(ctx, tx, chat.ChatRequestID, social.ChatEnding); err != nil {
			return chat, err
		}
	}
	// The author answered its outstanding delivery; turns queued for it meanwhile go out now.
	return chat, s.flushQueue(ctx, tx, chat, cc, me, forMe)
}

// relayTo delivers a turn to the peer, with the turns queued for it, or
// queues it while the peer has not answered its outstanding delivery. A
// final turn (the conversation ends with it) is delivered at once without
// inviting a reply.
func (s *Service) relayTo(ctx context.Context, tx *store.Tx, chat social.Chat, cc social.ChatContext, peer *side, t turnRec, queued []turnRec, allowReply bool) error {
	if peer.outstanding != "" && allowReply {
		_, err := tx.Exec(ctx, `UPDATE relay_turns SET pending = ? WHERE id = ?`, true, t.ID)
		return err
	}
	id, err := s.deliverTurns(ctx, tx, chat, cc, peer, append(queued, t), allowReply)
	if err != nil {
		return err
	}
	if at, ok := receivedAt(ctx); ok {
		// Noted before the commit: the commit wakes the peer's connection.
		s.turns.start(id, at)
	}
	return nil
}

// flushQueue delivers the turns waiting for a side that just became free
// (queued: the side's pending turns).
func (s *Service) flushQueue(ctx context.Context, tx *store.Tx, chat social.Chat, cc social.ChatContext, sd *side, queued []turnRec) error {
	if !chat.Live() || sd.outstanding != "" || len(queued) == 0 {
		return nil
	}
	_, err := s.deliverTurns(ctx, tx, chat, cc, sd, queued, true)
	return err
}

// deliverTurns sends turns to one side as one delivery: the last is the
// current turn, earlier ones are "Earlier Queued Turns". The first delivery
// a side gets carries its full context document. It returns the delivery.
func (s *Service) deliverTurns(ctx context.Context, tx *store.Tx, chat social.Chat, cc social.ChatContext, to *side, turns []turnRec, allowReply bool) (string, error) {
	current := turns[len(turns)-1]
	var queued []string
	for _, t := range turns[:len(turns)-1] {
		queued = append(queued, t.Text)
	}
	role := contextdoc.RoleLiveTurn
	if !to.baselineSent {
		role = contextdoc.RoleRecipient
	}
	contextText := ""
	if role == contextdoc.RoleRecipient || len(queued) > 0 {
		doc, err := s.render(s.input(cc, to.agentID, role, queued))
		if err != nil {
			return "", err
		}
		contextText = doc
	}
	kind := KindTurn
	if current.Kind == TurnOpener {
		kind = KindOpener
	}
	wire := "reply"
	if current.Kind == TurnMessage {
		wire = "message"
	}
	id, err := s.send(ctx, tx, outgoing{
		chat: chat, target: to.agentID, session: chat.LocalSessionKey(to.agentID), kind: kind, wireType: wire,
		from: s.participant(cc, current.From), allowReply: allowReply, turnID: current.ID,
		payload: FramePayload{Text: current.Text, ContextText: contextText, UntrustedContext: queued},
	})
	if err != nil {
		return "", err
	}
	ids := make([]any, 0, len(turns)+2)
	ids = append(ids, false, id)
	for _, t := range turns {
		ids = append(ids, t.ID)
	}
	if _, err := tx.Exec(ctx, `UPDATE relay_turns SET pending = ?, delivered_in = ? WHERE id IN (`+store.InClause(len(turns))+`)`, ids...); err != nil {
		return "", fmt.Errorf("mark delivered: %w", err)
	}
	to.baselineSent = true
	if allowReply {
		to.outstanding = id
	}
	if err := s.saveSide(ctx, tx, *to); err != nil {
		return "", err
	}
	if kind == KindOpener {
		if _, err := s.social.UpdateKickoffTx(ctx, tx, chat.ChatRequestID, social.KickoffUpdate{OpenerDeliveryID: id}); err != nil {
			return "", err
		}
	}
	return id, nil
}

func (s *Service) keptSilentTx(ctx context.Context, tx *store.Tx, agentID, deliveryID, reason string) (Answer, error) {
	d, err := s.answerable(ctx, tx, agentID, deliveryID)
	if err != nil {
		return Answer{}, err
	}
	if err := s.markAnswered(ctx, tx, d, StatusKeptSilent); err != nil {
		return Answer{}, err
	}
	out := Answer{DeliveryID: deliveryID, Status: StatusKeptSilent}
	if d.Kind == KindReportRequest || !d.AllowReply {
		return out, nil
	}
	chat, err := s.social.ChatTx(ctx, tx, d.ChatRequestID)
	if err != nil {
		return Answer{}, err
	}
	out.ChatStatus = chat.Status
	if !chat.Live() {
		return out, nil
	}
	cc, err := s.social.ChatContextTx(ctx, tx, chat.ChatRequestID)
	if err != nil {
		return Answer{}, err
	}
	if d.Kind == KindKickoff {
		// The sender's agent declined to open: the chat never starts.
		chat, err = s.social.UpdateKickoffTx(ctx, tx, chat.ChatRequestID, social.KickoffUpdate{Status: social.KickoffFailed, Reason: "sender_kept_silent"})
		if err != nil {
			return Answer{}, err
		}
		if err := s.withdraw(ctx, tx, chat.ChatRequestID); err != nil {
			return Answer{}, err
		}
		if err := s.requestReports(ctx, tx, chat, cc); err != nil {
			return Answer{}, err
		}
		out.ChatStatus = chat.Status
		return out, nil
	}
	me, err := s.loadSide(ctx, tx, chat.ChatRequestID, agentID)
	if err != nil {
		return Answer{}, err
	}
	if me.outstanding == deliveryID {
		me.outstanding = ""
	}
	if err := s.saveSide(ctx, tx, me); err != nil {
		return Answer{}, err
	}
	if queued, err := s.pendingTurns(ctx, tx, chat.ChatRequestID, agentID); err != nil {
		return Answer{}, err
	} else if len(queued) > 0 {
		return out, s.flushQueue(ctx, tx, chat, cc, &me, queued)
	}
	peer, err := s.loadSide(ctx, tx, chat.ChatRequestID, chat.Peer(agentID))
	if err != nil {
		return Answer{}, err
	}
	peerQueued, err := s.pendingTurns(ctx, tx, chat.ChatRequestID, peer.agentID)
	if err != nil {
		return Answer{}, err
	}
	if peer.outstanding == "" && len(peerQueued) == 0 {
		// Nobody owes anybody anything: the exchange is over.
		status, why := social.ChatSilent, "kept_silent"
		if chat.Status == social.ChatEnding {
			status, why = social.ChatEnded, "end_acknowledged_silently"
		}
		chat, err = s.end(ctx, tx, chat, cc, status, why)
		if err != nil {
			return Answer{}, err
		}
		out.ChatStatus = chat.Status
	}
	return out, nil
}

// end finishes a live conversation: the social record ends (both
// management sessions get conversation_ended), unanswered deliveries are
// withdrawn, and owner reports are requested when the policy says so.
func (s *Service) end(ctx context.Context, tx *store.Tx, chat social.Chat, cc social.ChatContext, status, reason string) (social.Chat, error) {
	if err := s.withdraw(ctx, tx, chat.ChatRequestID); err != nil {
		return chat, err
	}
	chat, err := s.social.EndChatTx(ctx, tx, chat.ChatRequestID, social.EndChat{Status: status, Reason: reason, TranscriptRef: TranscriptRef(chat)})
	if err != nil {
		return chat, err
	}
	return chat, s.requestReports(ctx, tx, chat, cc)
}

// TranscriptRef is where a chat's transcript can be read.
func TranscriptRef(chat social.Chat) string {
	return "/v1/conversations/" + chat.ConversationKey + "/transcript?chatRequestId=" + chat.ChatRequestID
}

// ---- turns ----------------------------------------------------------------------------

type turnRec struct {
	ID, ChatID, ConversationKey string
	Seq                         int
	From, To, Kind, Text        string
	Tokens                      string
	ClientMessageID             string
	AnswersDelivery             string
	DeliveredIn                 string
	Pending                     bool
	CreatedAt                   int64
}

const turnCols = `id, chat_request_id, conversation_key, seq, from_agent, to_agent, kind, text, tokens, client_message_id, answers_delivery, delivered_in, pending, created_at`

func scanTurn(row interface{ Scan(...any) error }) (turnRec, error) {
	var t turnRec
	err := row.Scan(&t.ID, &t.ChatID, &t.ConversationKey, &t.Seq, &t.From, &t.To, &t.Kind, &t.Text, &t.Tokens, &t.ClientMessageID, &t.AnswersDelivery, &t.DeliveredIn, &t.Pending, &t.CreatedAt)
	return t, err
}

func (s *Service) addTurn(ctx context.Context, tx *store.Tx, chat social.Chat, from, kind, text, answers, clientID string) (turnRec, error) {
	var seq int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM relay_turns WHERE chat_request_id = ?`, chat.ChatRequestID).Scan(&seq); err != nil {
		return turnRec{}, fmt.Errorf("turn seq: %w", err)
	}
	toks := contextdoc.Tokens(text)
	names := make([]string, len(toks))
	for i, t := range toks {
		names[i] = string(t)
	}
	t := turnRec{ID: protocol.NewID(protocol.PrefixTurn), ChatID: chat.ChatRequestID, ConversationKey: chat.ConversationKey, Seq: seq,
		From: from, To: chat.Peer(from), Kind: kind, Text: text, Tokens: strings.Join(names, ","), ClientMessageID: clientID,
		AnswersDelivery: answers, CreatedAt: store.Millis(s.clock.Now())}
	_, err := tx.Exec(ctx, `INSERT INTO relay_turns (`+turnCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.ChatID, t.ConversationKey, t.Seq, t.From, t.To, t.Kind, t.Text, t.Tokens, t.ClientMessageID, t.AnswersDelivery, t.DeliveredIn, false, t.CreatedAt)
	if err != nil {
		return turnRec{}, fmt.Errorf("record turn: %w", err)
	}
	return t, nil
}

// pendingTurns returns the turns queued for to ("" for both sides) in order.
func (s *Service) pendingTurns(ctx context.Context, q store.Q, chatID, to string) ([]turnRec, error) {
	query, args := `SELECT `+turnCols+` FROM relay_turns WHERE chat_request_id = ? AND to_agent = ? AND pending = ? ORDER BY seq`, []any{chatID, to, true}
	if to == "" {
		query, args = `SELECT `+turnCols+` FROM relay_turns WHERE chat_request_id = ? AND pending = ? ORDER BY seq`, []any{chatID, true}
	}
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pending turns: %w", err)
	}
	defer rows.Close()
	var out []turnRec
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// ---- bus hooks ---------------------------------------------------------------------

// onDelivered advances kickoff progress when the kickoff reaches the
// sender's runtime and when the opener reaches the recipient's.
func (s *Service) onDelivered(ctx context.Context, tx *store.Tx, bd busDelivery) error {
	d, ok, err := s.loadDelivery(ctx, tx, bd.DeliveryID)
	if err != nil || !ok {
		return err
	}
	now := s.clock.Now()
	var u social.KickoffUpdate
	switch d.Kind {
	case KindKickoff:
		u = social.KickoffUpdate{Status: social.KickoffSent, SenderKickoffDeliveredAt: now}
	case KindOpener:
		u = social.KickoffUpdate{Status: social.KickoffEstablished, OpenerDeliveredAt: now, LiveChatEstablishedAt: now}
	default:
		return nil
	}
	chat, err := s.social.ChatTx(ctx, tx, d.ChatRequestID)
	if err != nil || !chat.Live() {
		return err
	}
	_, err = s.social.UpdateKickoffTx(ctx, tx, d.ChatRequestID, u)
	return err
}

// onDead handles relay deliveries that never reached their runtime: a lost
// kickoff or opener fails the kickoff; a lost turn ends the conversation.
func (s *Service) onDead(ctx context.Context, tx *store.Tx, bd busDelivery, reason string) error {
	d, ok, err := s.loadDelivery(ctx, tx, bd.DeliveryID)
	if err != nil || !ok || d.Status != StatusPending {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE relay_deliveries SET status = ?, answered_at = ? WHERE delivery_id = ?`, StatusClosed, store.Millis(s.clock.Now()), d.DeliveryID); err != nil {
		return err
	}
	if d.Kind == KindReportRequest {
		return nil
	}
	chat, err := s.social.ChatTx(ctx, tx, d.ChatRequestID)
	if err != nil || !chat.Live() {
		return err
	}
	cc, err := s.social.ChatContextTx(ctx, tx, chat.ChatRequestID)
	if err != nil {
		return err
	}
	switch d.Kind {
	case KindKickoff, KindOpener:
		why := "kickoff_undeliverable"
		if d.Kind == KindOpener {
			why = "opener_undeliverable"
		}
		if chat, err = s.social.UpdateKickoffTx(ctx, tx, chat.ChatRequestID, social.KickoffUpdate{Status: social.KickoffFailed, Reason: why + " (" + reason + ")"}); err != nil {
			return err
		}
		if err := s.withdraw(ctx, tx, chat.ChatRequestID); err != nil {
			return err
		}
		return s.requestReports(ctx, tx, chat, cc)
	default:
		_, err = s.end(ctx, tx, chat, cc, social.ChatEnded, "peer_unreachable")
		return err
	}
}

// onMessage lets agents on the native dialect answer relay deliveries with
// response envelopes: result.text is the reply; an exact NO_REPLY, an
// empty text or result.keptSilent is kept silence.
func (s *Service) onMessage(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
	if env.Type != protocol.TypeResponse {
		return nil // notifications and errors addressed to the relay are only logged by the bus
	}
	p, err := env.Response()
	if err != nil {
		return protocol.Invalid("payload", "not a response payload")
	}
	var id string
	err = tx.QueryRow(ctx, `SELECT delivery_id FROM relay_deliveries WHERE message_id = ? AND agent_id = ?`, p.RequestID, env.From.Agent).Scan(&id)
	if err != nil {
		return deliveryNotFound(p.RequestID)
	}
	var r struct {
		Text       string `json:"text"`
		KeptSilent bool   `json:"keptSilent"`
	}
	_ = json.Unmarshal(p.Result, &r)
	if r.KeptSilent || strings.TrimSpace(r.Text) == "" || p.Status == protocol.StatusFailure {
		_, err = s.keptSilentTx(ctx, tx, env.From.Agent, id, "native_response")
		return err
	}
	_, err = s.replyTx(ctx, tx, env.From.Agent, id, r.Text)
	return err
}

// ---- idle sweeper ------------------------------------------------------------------

// Run ends idle conversations until ctx ends.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.SweepIdle(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("relay idle sweep failed", "err", err)
			}
		}
	}
}

// SweepIdle ends active conversations with no turn within their idle
// timeout and returns how many it ended. Opening conversations are bounded
// by the kickoff delivery's TTL instead.
func (s *Service) SweepIdle(ctx context.Context) (int, error) {
	chats, err := s.social.LiveChatsTx(ctx, s.db, 0)
	if err != nil {
		return 0, err
	}
	now := s.clock.Now()
	ended := 0
	for _, c := range chats {
		if c.Status == social.ChatOpening {
			continue
		}
		// Skip chats that cannot be idle yet without a write: with a
		// thousand live conversations a transaction each would hold the
		// single writer every sweep. A world may set a shorter timeout than
		// the relay's, but never below social.MinIdleTimeout.
		floor := s.cfg.IdleTimeout
		if c.WorldID != "" {
			floor = min(floor, social.MinIdleTimeout*time.Second)
		}
		last := c.LastTurnAt
		if last.IsZero() {
			last = c.UpdatedAt
		}
		if now.Sub(last) < floor {
			continue
		}
		err := s.db.Write(ctx, func(tx *store.Tx) error {
			// Re-read inside the transaction: a turn may have just arrived.
			cc, err := s.social.ChatContextTx(ctx, tx, c.ChatRequestID)
			if err != nil {
				return err
			}
			last := cc.Chat.LastTurnAt
			if last.IsZero() {
				last = cc.Chat.UpdatedAt
			}
			if !cc.Chat.Live() || now.Sub(last) < s.policyFor(cc).IdleTimeout {
				return nil
			}
			if _, err := s.end(ctx, tx, cc.Chat, cc, social.ChatEnded, "idle_timeout"); err != nil {
				return err
			}
			ended++
			return nil
		})
		if err != nil {
			return ended, err
		}
	}
	return ended, nil
}
