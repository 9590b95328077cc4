package pipeline

import (
	"context"
	"fmt"

	"github.com/switchboard-hub/switchboard/internal/store"
)

// Prune deletes executions that finished more than Options.Retention ago,
// with their steps, events and requests, and the pinned definitions no
// execution uses any more. It returns how many executions it deleted.
// Tick calls it every PruneInterval.
func (e *Engine) Prune(ctx context.Context) (int, error) {
	cutoff := store.Millis(e.clock.Now().Add(-e.opts.Retention))
	total := 0
	for {
		var n int64
		err := e.write(ctx, func(tx *store.Tx) error {
			rows, err := tx.Query(ctx, `SELECT id FROM pipeline_executions WHERE completed_at > 0 AND completed_at < ?
AND status IN ('completed', 'failed', 'partial', 'cancelled') ORDER BY completed_at LIMIT 500`, cutoff)
			if err != nil {
				return err
			}
			var ids []any
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
			}
			rows.Close()
			if len(ids) == 0 {
				return nil
			}
			in := store.InClause(len(ids))
			for _, table := range []string{"pipeline_events", "pipeline_requests", "pipeline_steps"} {
				if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE execution_id IN (`+in+`)`, ids...); err != nil {
					return err
				}
			}
			res, err := tx.Exec(ctx, `DELETE FROM pipeline_executions WHERE id IN (`+in+`)`, ids...)
			if err != nil {
				return err
			}
			n, _ = res.RowsAffected()
			_, err = tx.Exec(ctx, `DELETE FROM pipeline_definitions WHERE NOT EXISTS
(SELECT 1 FROM pipeline_executions x WHERE x.def_hash = pipeline_definitions.hash)`)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("pipeline: prune: %w", err)
		}
		total += int(n)
		if n < 500 {
			return total, nil
		}
	}
}
