package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/contextdoc"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/social"
	"github.com/switchboard-hub/switchboard/internal/store"
)

type busDelivery = bus.Delivery

// MainSessionKey is the session of an agent that talks to its owner; owner
// reports are delivered there.
func MainSessionKey(agentID string) string { return "main:" + agentID }

// Report is an owner report filed by an agent.
type Report struct {
	ReportID   string    `json:"reportId"`
	AgentID    string    `json:"agentId"`
	Source     string    `json:"source"`
	ReportText string    `json:"reportText"`
	Announce   bool      `json:"announce"`
	Directive  string    `json:"directive"` // announce | ANNOUNCE_SKIP
	CreatedAt  time.Time `json:"createdAt"`
	// AlreadyFiled is true when this source already had a report: the
	// first one stands.
	AlreadyFiled bool `json:"alreadyFiled,omitempty"`
}

// Reporting limits.
const (
	MaxReportBytes = 32 << 10
	MaxSourceLen   = 300
)

// FileReport delivers an agent's owner report to its owner's main session
// as a notification marked announce (show it to the human, first person)
// or skip (ANNOUNCE_SKIP: record, don't show). It is idempotent per agent
// and source: a repeat returns the first report.
func (s *Service) FileReport(ctx context.Context, agentID, source, text string, announce bool) (Report, error) {
	fe := protocol.FieldErrors{}
	if strings.TrimSpace(source) == "" {
		fe.Add("source", "required: what the report is about (the conversation key or chat request id)")
	} else if len(source) > MaxSourceLen {
		fe.Add("source", fmt.Sprintf("at most %d characters", MaxSourceLen))
	}
	if strings.TrimSpace(text) == "" {
		fe.Add("reportText", "required: the report for your owner")
	} else if len(text) > MaxReportBytes {
		fe.Add("reportText", fmt.Sprintf("at most %d bytes", MaxReportBytes))
	}
	if err := fe.Err(); err != nil {
		return Report{}, err
	}
	var out Report
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		out, _, err = s.fileReportTx(ctx, tx, agentID, source, text, announce)
		return err
	})
	return out, err
}

func directive(announce bool) string {
	if announce {
		return "announce"
	}
	return "ANNOUNCE_SKIP"
}

func (s *Service) fileReportTx(ctx context.Context, tx *store.Tx, agentID, source, text string, announce bool) (Report, bool, error) {
	var r Report
	var ann bool
	var at int64
	err := tx.QueryRow(ctx, `SELECT id, report_text, announce, created_at FROM relay_reports WHERE agent_id = ? AND source = ?`, agentID, source).
		Scan(&r.ReportID, &r.ReportText, &ann, &at)
	if err == nil {
		r.AgentID, r.Source, r.Announce, r.Directive, r.CreatedAt, r.AlreadyFiled = agentID, source, ann, directive(ann), store.FromMillis(at), true
		return r, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Report{}, false, fmt.Errorf("report lookup: %w", err)
	}
	now := s.clock.Now()
	r = Report{ReportID: protocol.NewID(protocol.PrefixReport), AgentID: agentID, Source: source, ReportText: text, Announce: announce,
		Directive: directive(announce), CreatedAt: store.FromMillis(store.Millis(now))}
	title := "Report from your agent"
	body := text
	if !announce {
		body = text + "\n\nANNOUNCE_SKIP"
	}
	notice := social.NoticePayload{NotificationID: protocol.NewID(protocol.PrefixNotice), NotificationType: "owner_report", Title: title, Body: body,
		TargetAgentID: agentID, TargetSessionKey: MainSessionKey(agentID),
		RelatedObjects: map[string]any{"reportId": r.ReportID, "source": source, "announce": announce, "directive": r.Directive}}
	env := &protocol.Envelope{From: protocol.Address{Agent: SystemID}, To: protocol.Address{Agent: agentID, Session: MainSessionKey(agentID)},
		Type: protocol.TypeNotification, TTL: int(s.cfg.NoticeTTL / time.Second),
		Payload: protocol.MustJSON(map[string]any{"event": social.EventNotification, "message": title, "data": notice})}
	res, err := s.bus.SendSystemTx(ctx, tx, env)
	if err != nil {
		return Report{}, false, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO relay_reports (id, agent_id, source, report_text, announce, created_at, message_id) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		r.ReportID, agentID, source, text, announce, store.Millis(now), res.ID); err != nil {
		return Report{}, false, fmt.Errorf("record report: %w", err)
	}
	return r, true, nil
}

// requestReports asks each side's management session for an owner report
// when the conversation's policy requires one.
func (s *Service) requestReports(ctx context.Context, tx *store.Tx, chat social.Chat, cc social.ChatContext) error {
	if !s.policyFor(cc).ReportingRequired {
		return nil
	}
	turns, err := s.transcriptTurns(ctx, tx, chat.ConversationKey, chat.ChatRequestID)
	if err != nil {
		return err
	}
	final, err := s.social.ChatTx(ctx, tx, chat.ChatRequestID)
	if err != nil {
		return err
	}
	for _, agentID := range []string{chat.SenderAgentID, chat.RecipientAgentID} {
		peer := s.participant(cc, chat.Peer(agentID))
		doc := reportRequestDoc(final, peer, turns, cc)
		text := fmt.Sprintf("Your conversation with %s ended (%s). Write the owner report now and reply with it; it goes to your owner's main session.", peer.Identity, final.EndReason)
		_, err := s.send(ctx, tx, outgoing{
			chat: chat, target: agentID, session: social.ManagementSessionKey(agentID), kind: KindReportRequest, wireType: "message",
			from: peer, allowReply: true, reportSrc: chat.ChatRequestID, ttl: s.cfg.NoticeTTL,
			payload: FramePayload{Text: text, ContextText: doc},
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// reportRequestDoc is the document a management session gets when a report
// is due: what to cover and the transcript (fenced: it is the peer's text).
func reportRequestDoc(chat social.Chat, peer social.Participant, turns []TranscriptTurn, cc social.ChatContext) string {
	var b strings.Builder
	b.WriteString("# Owner Report Request\n\n")
	b.WriteString("This is an internal document for you only. Write a complete report to your owner, in the first person, covering:\n\n")
	for _, line := range []string{
		"who the peer is and how they presented themselves",
		"the peer's role, goals, preferences, boundaries and attitude",
		"the current progress of the conversation",
		"the key conclusions or concrete outcomes",
		"unresolved blockers or uncertainties",
		"the recommended next step",
	} {
		b.WriteString("- " + line + "\n")
	}
	b.WriteString("\nReply with the report text: it is filed as your owner report for this conversation (source `" + chat.ChatRequestID + "`). ")
	b.WriteString("To file it without it being shown to your owner, use the `report_to_owner` tool or `POST /v1/reports` with `announce: false` instead. Do not end the report with ANNOUNCE_SKIP.\n\n")
	b.WriteString("## Conversation Facts\n\n")
	fmt.Fprintf(&b, "- Peer: `%s`\n- Ended: %s\n- Turns: %d\n", strings.ReplaceAll(peer.Identity, "`", ""), chat.EndReason, chat.TurnCount)
	if cc.World != nil {
		fmt.Fprintf(&b, "- World ID: `%s`\n", cc.World.WorldID)
	}
	if len(turns) > 0 {
		b.WriteString("\n## Transcript\n")
		for i, t := range turns {
			who := "Peer"
			if t.From != peer.AgentID {
				who = "You"
			}
			fmt.Fprintf(&b, "\n### Turn %d (%s)\n\n%s\n", i+1, who, contextdoc.Fence(t.Text))
		}
	}
	return b.String()
}

// reportSourceOf is the report source of a report request: its chat
// request id, unique per conversation intent (the conversation key is
// shared by every chat of a pair).
func (s *Service) reportSourceOf(ctx context.Context, tx *store.Tx, d deliveryRec) string {
	return d.ChatRequestID
}

// ---- transcript ---------------------------------------------------------------------

// TranscriptTurn is one turn of a conversation.
type TranscriptTurn struct {
	TurnID        string    `json:"turnId"`
	ChatRequestID string    `json:"chatRequestId"`
	Seq           int       `json:"seq"`
	From          string    `json:"from"`
	To            string    `json:"to"`
	Kind          string    `json:"kind"`
	Text          string    `json:"text"`
	Tokens        []string  `json:"tokens,omitempty"`
	DeliveryID    string    `json:"deliveryId,omitempty"`
	Pending       bool      `json:"pending,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
}

// Transcript is the record of a conversation key (every chat of the pair,
// or one chat).
type Transcript struct {
	ConversationKey string           `json:"conversationKey"`
	Chats           []social.Chat    `json:"chats"`
	Turns           []TranscriptTurn `json:"turns"`
}

func (s *Service) transcriptTurns(ctx context.Context, q store.Q, key, chatID string) ([]TranscriptTurn, error) {
	query := `SELECT ` + turnCols + ` FROM relay_turns WHERE conversation_key = ?`
	args := []any{key}
	if chatID != "" {
		query += ` AND chat_request_id = ?`
		args = append(args, chatID)
	}
	rows, err := q.Query(ctx, query+` ORDER BY created_at, seq LIMIT 5000`, args...)
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	defer rows.Close()
	out := []TranscriptTurn{}
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, err
		}
		tt := TranscriptTurn{TurnID: t.ID, ChatRequestID: t.ChatID, Seq: t.Seq, From: t.From, To: t.To, Kind: t.Kind, Text: t.Text,
			DeliveryID: t.DeliveredIn, Pending: t.Pending, CreatedAt: store.FromMillis(t.CreatedAt)}
		if t.Tokens != "" {
			tt.Tokens = strings.Split(t.Tokens, ",")
		}
		out = append(out, tt)
	}
	return out, rows.Err()
}

// Transcript returns the turns of a conversation key to one of its
// participants (or the admin). Others get 404 conversation_not_found.
func (s *Service) Transcript(ctx context.Context, viewer string, admin bool, key, chatID string) (Transcript, error) {
	chats, err := s.social.ChatsByConversationTx(ctx, s.db, key)
	if err != nil {
		return Transcript{}, err
	}
	var mine []social.Chat
	for _, c := range chats {
		if (admin || c.Participant(viewer)) && (chatID == "" || c.ChatRequestID == chatID) {
			mine = append(mine, c)
		}
	}
	if len(mine) == 0 {
		return Transcript{}, &protocol.Error{Class: protocol.ClassUnavailable, Code: "conversation_not_found", Status: 404,
			Message: "no conversation " + key + " of yours", NextAction: "list your chats (chat_inbox) for their conversation keys"}
	}
	turns, err := s.transcriptTurns(ctx, s.db, key, chatID)
	if err != nil {
		return Transcript{}, err
	}
	return Transcript{ConversationKey: key, Chats: mine, Turns: turns}, nil
}

// ---- orchestration messages ------------------------------------------------------------

// MessageResult is the answer to POST /v1/orchestration/messages.
type MessageResult struct {
	Turn struct {
		TurnID string `json:"turnId"`
	} `json:"turn"`
	ConversationKey string `json:"conversationKey"`
	Delivery        struct {
		SessionKey string `json:"sessionKey"`
	} `json:"delivery"`
	Duplicate bool `json:"duplicate,omitempty"`
}

// SendMessage relays a turn outside a live delivery (the sender has no
// delivery to answer, e.g. a follow-up). It needs a live conversation with
// the target and is idempotent per (sender, clientMessageId).
func (s *Service) SendMessage(ctx context.Context, from, target, clientMessageID, text, conversationKey, worldID string) (MessageResult, error) {
	fe := protocol.FieldErrors{}
	if clientMessageID == "" {
		fe.Add("clientMessageId", "required: a unique id you choose, so a retry is not sent twice")
	} else if !protocol.ValidID(clientMessageID) {
		fe.Add("clientMessageId", "1–128 characters from A–Z a–z 0–9 . _ : -")
	}
	if target == "" {
		fe.Add("targetAgentId", "required")
	}
	if strings.TrimSpace(text) == "" {
		fe.Add("payload.text", "required")
	} else if len(text) > s.cfg.MaxTextBytes {
		fe.Add("payload.text", fmt.Sprintf("at most %d bytes", s.cfg.MaxTextBytes))
	}
	if err := fe.Err(); err != nil {
		return MessageResult{}, err
	}
	var out MessageResult
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var turnID, chatID string
		err := tx.QueryRow(ctx, `SELECT id, chat_request_id FROM relay_turns WHERE from_agent = ? AND client_message_id = ?`, from, clientMessageID).Scan(&turnID, &chatID)
		if err == nil {
			c, err := s.social.ChatTx(ctx, tx, chatID)
			if err != nil {
				return err
			}
			out.Turn.TurnID, out.ConversationKey, out.Delivery.SessionKey, out.Duplicate = turnID, c.ConversationKey, c.LocalSessionKey(target), true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		chat, err := s.findLiveChat(ctx, tx, from, target, conversationKey, worldID)
		if err != nil {
			return err
		}
		me, err := s.loadSide(ctx, tx, chat.ChatRequestID, from)
		if err != nil {
			return err
		}
		t, err := s.addTurn(ctx, tx, chat, from, TurnMessage, text, "", clientMessageID)
		if err != nil {
			return err
		}
		if _, err := s.afterTurn(ctx, tx, chat, &me, t); err != nil {
			return err
		}
		out.Turn.TurnID, out.ConversationKey, out.Delivery.SessionKey = t.ID, chat.ConversationKey, chat.LocalSessionKey(target)
		return nil
	})
	return out, err
}

func (s *Service) findLiveChat(ctx context.Context, tx *store.Tx, from, target, key, worldID string) (social.Chat, error) {
	var chat social.Chat
	var err error
	if key != "" {
		chat, err = s.social.LiveChatTx(ctx, tx, key)
	} else {
		chat, err = s.social.LiveChatBetweenTx(ctx, tx, from, target, worldID)
	}
	if err != nil {
		if protocol.CodeOf(err) == "chat_not_found" {
			return chat, &protocol.Error{Class: protocol.ClassInvalid, Code: "no_live_conversation", Status: 409,
				Message:    "there is no live conversation between you and " + target + " to send into",
				NextAction: "start one with a chat request (request_chat)", NextTool: "request_chat"}
		}
		return chat, err
	}
	if !chat.Participant(from) || !chat.Participant(target) || from == target {
		return chat, protocol.Forbidden("not_chat_participant", "the conversation "+chat.ConversationKey+" is not between you and "+target)
	}
	if chat.Status == social.ChatOpening && chat.Kickoff.Status != social.KickoffEstablished {
		return chat, &protocol.Error{Class: protocol.ClassInvalid, Code: "conversation_not_established", Status: 409,
			Message: "the conversation has not started yet: the opener has not been delivered", NextAction: "wait for request.updated with kickoff established"}
	}
	return chat, nil
}
