package replyctl

import (
	"context"
	"fmt"

	"github.com/switchboard-hub/switchboard/internal/store"
)

// Conversations lists the conversations of the given bots (nil: of every
// bot; empty: none), most recently changed first, with their last choice
// and its source, for operators' views (the web console). States are read
// as stored: a due expiry the sweeper has not written yet still shows the
// old choice. limit defaults to 100, at most 1000.
func (s *DBStore) Conversations(ctx context.Context, botIDs []string, limit int) ([]State, error) {
	if botIDs != nil && len(botIDs) == 0 {
		return []State{}, nil
	}
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	q := `SELECT conv_key, ` + stateCols + ` FROM replyctl_conversations`
	var args []any
	if botIDs != nil {
		q += ` WHERE bot_id IN (` + store.InClause(len(botIDs)) + `)`
		for _, id := range botIDs {
			args = append(args, id)
		}
	}
	q += fmt.Sprintf(` ORDER BY updated_at DESC, conv_key LIMIT %d`, limit)
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("replyctl: list conversations: %w", err)
	}
	defer rows.Close()
	out := []State{}
	for rows.Next() {
		var raw string
		st, err := scanState(keyFirst{rows, &raw}, Key{})
		if err != nil {
			return nil, fmt.Errorf("replyctl: list conversations: %w", err)
		}
		if st.Key, err = ParseKey(raw); err != nil {
			return nil, fmt.Errorf("replyctl: stored conversation has a bad key %q: %w", raw, err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// keyFirst scans the conversation key column ahead of the state columns.
type keyFirst struct {
	row interface{ Scan(...any) error }
	key *string
}

func (k keyFirst) Scan(dest ...any) error { return k.row.Scan(append([]any{k.key}, dest...)...) }
