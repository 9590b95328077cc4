package social

import (
	"context"
	"database/sql"
	"errors"

	"github.com/switchboard-hub/switchboard/internal/store"
)

// ChatsByConversationTx lists every chat of a conversation key, oldest
// first (the transcript of a pair spans them).
func (s *Service) ChatsByConversationTx(ctx context.Context, q store.Q, conversationKey string) ([]Chat, error) {
	return s.queryChats(ctx, q, `c.conversation_key = ?`, []any{conversationKey}, " ORDER BY c.created_at LIMIT 1000")
}

// LiveChatBetweenTx returns the live chat between two agents (in a world,
// or direct when worldID is empty), or chat_not_found.
func (s *Service) LiveChatBetweenTx(ctx context.Context, q store.Q, a, b, worldID string) (Chat, error) {
	lo, hi := a, b
	if hi < lo {
		lo, hi = hi, lo
	}
	var key string
	err := q.QueryRow(ctx, `SELECT conversation_key FROM social_conversations WHERE agent_low = ? AND agent_high = ? AND world_id = ?`, lo, hi, worldID).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return Chat{}, errChatNotFound("between " + a + " and " + b)
	}
	if err != nil {
		return Chat{}, err
	}
	return s.LiveChatTx(ctx, q, key)
}
