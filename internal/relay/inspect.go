package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/social"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Document is one relay delivery of a chat as its recipient received it:
// the frame text, the context document, and the command text. Operators
// read these to see what each side was told.
type Document struct {
	DeliveryID  string    `json:"deliveryId"`
	AgentID     string    `json:"agentId"` // the side that received it
	SessionKey  string    `json:"sessionKey"`
	Kind        string    `json:"kind"`   // kickoff | opener | turn | report_request
	Status      string    `json:"status"` // pending | replied | kept_silent | closed
	CreatedAt   time.Time `json:"createdAt"`
	Text        string    `json:"text"`
	ContextText string    `json:"contextText,omitempty"`
	CommandText string    `json:"commandText,omitempty"`
}

// viewChat loads a chat viewer may inspect: a participant or the admin.
// Anyone else gets the same 404 as for a chat that does not exist.
func (s *Service) viewChat(ctx context.Context, viewer string, admin bool, chatRequestID string) (social.Chat, error) {
	chat, err := s.social.ChatTx(ctx, s.db, chatRequestID)
	if err == nil && (admin || chat.Participant(viewer)) {
		return chat, nil
	}
	if err != nil && protocol.CodeOf(err) != "chat_not_found" {
		return chat, err
	}
	return chat, &protocol.Error{Class: protocol.ClassUnavailable, Code: "conversation_not_found", Status: 404,
		Message: "no conversation " + chatRequestID + " of yours", NextAction: "list your chats (chat_inbox) for their ids"}
}

// Documents returns the deliveries the relay sent for a chat, oldest
// first, with the documents they carried. A participant sees only what it
// received (the peer's documents hold the peer's private brief); the admin
// sees both sides. Others get 404 conversation_not_found.
func (s *Service) Documents(ctx context.Context, viewer string, admin bool, chatRequestID string) ([]Document, error) {
	if _, err := s.viewChat(ctx, viewer, admin, chatRequestID); err != nil {
		return nil, err
	}
	q := `SELECT ` + deliveryCols + ` FROM relay_deliveries WHERE chat_request_id = ?`
	args := []any{chatRequestID}
	if !admin {
		q += ` AND agent_id = ?`
		args = append(args, viewer)
	}
	rows, err := s.db.Query(ctx, q+` ORDER BY created_at, delivery_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("documents: %w", err)
	}
	var recs []deliveryRec
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("documents: %w", err)
		}
		recs = append(recs, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]Document, 0, len(recs))
	for _, d := range recs {
		doc := Document{DeliveryID: d.DeliveryID, AgentID: d.AgentID, SessionKey: d.SessionKey, Kind: d.Kind, Status: d.Status,
			CreatedAt: store.FromMillis(d.CreatedAt)}
		info, _, err := s.bus.Delivery(ctx, d.DeliveryID, "", true)
		if err != nil {
			if protocol.CodeOf(err) == "delivery_not_found" {
				out = append(out, doc) // pruned from the bus: keep the record
				continue
			}
			return nil, err
		}
		var env protocol.Envelope
		var body struct {
			Params DeliveryParams `json:"params"`
		}
		if err := json.Unmarshal(info.Envelope, &env); err == nil && json.Unmarshal(env.Payload, &body) == nil {
			p := body.Params.Payload
			doc.Text, doc.ContextText, doc.CommandText = p.Text, p.ContextText, p.CommandText
		}
		out = append(out, doc)
	}
	return out, nil
}

// ChatReports returns the owner reports filed for a chat (their source is
// the chat request id), oldest first: a participant sees its own, the
// admin both. Others get 404 conversation_not_found.
func (s *Service) ChatReports(ctx context.Context, viewer string, admin bool, chatRequestID string) ([]Report, error) {
	if _, err := s.viewChat(ctx, viewer, admin, chatRequestID); err != nil {
		return nil, err
	}
	q := `SELECT id, agent_id, report_text, announce, created_at FROM relay_reports WHERE source = ?`
	args := []any{chatRequestID}
	if !admin {
		q += ` AND agent_id = ?`
		args = append(args, viewer)
	}
	rows, err := s.db.Query(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("chat reports: %w", err)
	}
	defer rows.Close()
	out := []Report{}
	for rows.Next() {
		r := Report{Source: chatRequestID}
		var at int64
		if err := rows.Scan(&r.ReportID, &r.AgentID, &r.ReportText, &r.Announce, &at); err != nil {
			return nil, fmt.Errorf("chat reports: %w", err)
		}
		r.CreatedAt, r.Directive = store.FromMillis(at), directive(r.Announce)
		out = append(out, r)
	}
	return out, rows.Err()
}
