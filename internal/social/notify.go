package social

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Events pushed to agents' management sessions (the names are the Claworld
// plugin's frame events).
const (
	EventRequestUpdated    = "request.updated"
	EventNotification      = "notification"
	EventWorldInvite       = "world.invite_received"
	EventWorldBroadcast    = "world.broadcast_published"
	EventConversationEnded = "conversation_ended"
)

// Notification types carried in the `notificationType` of notification payloads.
const (
	NoticeChatRequestReceived = "chat_request_received"
	NoticeWorldInvite         = "world_invite_received"
	NoticeWorldBroadcast      = "world_broadcast_published"
	NoticeWorldMemberRemoved  = "world_membership_removed"
	NoticeWorldClosed         = "world_closed"
	NoticeConversationEnded   = "conversation_ended"
)

// Notification is one event for one agent's session.
type Notification struct {
	TargetAgentID string          // who receives it
	SessionKey    string          // the session: management:<agentId>
	Event         string          // request.updated, notification, world.invite_received, …
	Payload       json.RawMessage // the frame's data object
}

// NoticePayload is the data of notification events: the shape the Claworld
// plugin reads for `notification`, `world.invite_received`,
// `world.broadcast_published` and `conversation_ended`.
type NoticePayload struct {
	NotificationID   string         `json:"notificationId"`
	NotificationType string         `json:"notificationType"`
	Title            string         `json:"title"`
	Body             string         `json:"body"`
	TargetAgentID    string         `json:"targetAgentId"`
	TargetSessionKey string         `json:"targetSessionKey"`
	RelatedObjects   map[string]any `json:"relatedObjects"`
}

// RequestUpdate is the data of a request.updated event: the chat request as
// the receiving agent sees it (with its kickoff record and chat), and what
// changed.
type RequestUpdate struct {
	UpdateType string `json:"updateType"`
	RequestView
}

// ManagementSessionKey is the session that receives an agent's notifications.
func ManagementSessionKey(agentID string) string { return "management:" + agentID }

// notify sends one notification through the configured notifier.
func (s *Service) notify(ctx context.Context, tx *store.Tx, target, event string, payload any) error {
	b := s.notifier.Load()
	if b == nil || b.n == nil {
		return nil
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("encode %s notification: %w", event, err)
	}
	return b.n.Notify(ctx, tx, Notification{TargetAgentID: target, SessionKey: ManagementSessionKey(target), Event: event, Payload: raw})
}

// notice sends a notification event with the standard payload.
func (s *Service) notice(ctx context.Context, tx *store.Tx, event, target, typ, title, body string, related map[string]any) error {
	if related == nil {
		related = map[string]any{}
	}
	return s.notify(ctx, tx, target, event, NoticePayload{
		NotificationID: protocol.NewID(protocol.PrefixNotice), NotificationType: typ, Title: title, Body: body,
		TargetAgentID: target, TargetSessionKey: ManagementSessionKey(target), RelatedObjects: related,
	})
}

// Recorder is a Notifier that keeps what committed transactions notified,
// for tests and diagnostics.
type Recorder struct {
	mu   sync.Mutex
	list []Notification
}

// Notify records n once tx commits.
func (r *Recorder) Notify(ctx context.Context, tx *store.Tx, n Notification) error {
	tx.AfterCommit(func() {
		r.mu.Lock()
		r.list = append(r.list, n)
		r.mu.Unlock()
	})
	return nil
}

// All returns every recorded notification in order.
func (r *Recorder) All() []Notification {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Notification(nil), r.list...)
}

// For returns the notifications of one agent and event ("" for any event).
func (r *Recorder) For(agentID, event string) []Notification {
	var out []Notification
	for _, n := range r.All() {
		if n.TargetAgentID == agentID && (event == "" || n.Event == event) {
			out = append(out, n)
		}
	}
	return out
}

// Reset forgets everything recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.list = nil
	r.mu.Unlock()
}

// NopNotifier drops notifications; the hub uses it until the bus is wired.
type NopNotifier struct{}

// Notify does nothing.
func (NopNotifier) Notify(context.Context, *store.Tx, Notification) error { return nil }
