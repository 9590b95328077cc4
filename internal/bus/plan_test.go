package bus

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/store"
)

// The bus's hot and periodic queries read bus_deliveries through the
// indexes made for them — on SQLite, whose planner has no statistics and
// falls back to scanning every delivery ever made when a query and the
// partial indexes do not fit (an OR over two partial indexes did).
func TestDeliveryQueriesUseTheirIndexes(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "plan.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cases := []struct {
		name  string
		query string
		args  int
		want  []string
	}{
		{"claim", claimSQL(ClaimOptions{Limit: 10}, ""), 6, []string{"USING INDEX bus_deliveries_claim (agent_id=? AND state=?)"}},
		{"claim for a session", claimSQL(ClaimOptions{Limit: 10, Session: "s"}, ""), 7, []string{"USING INDEX bus_deliveries_claim (agent_id=? AND state=?)"}},
		{"overdue claim", claimSQL(ClaimOptions{Limit: 10, Overdue: true}, ""), 10, []string{"USING INDEX bus_deliveries_claim (agent_id=? AND state=?)"}},
		{"queued ahead of a push", queuedAhead, 4, []string{"USING INDEX bus_deliveries_claim (agent_id=? AND state=? AND priority<?)"}},
		// Bound as the sweep binds them: the plan depends on the LIMIT's
		// value (with a large one SQLite prefers to walk the primary key in
		// ORDER BY order).
		{"sweep", sweepDue, 5, []string{"USING INDEX bus_deliveries_lease (lease_until<?)", "USING INDEX bus_deliveries_expiry (expires_at<?)"}},
		{"pending by agent", pendingByAgent, 0, []string{"USING INDEX bus_deliveries_available", "USING INDEX bus_deliveries_lease"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := make([]any, tc.args)
			for i := range args {
				args[i] = sweepBatch
			}
			rows, err := db.Query(ctx, "EXPLAIN QUERY PLAN "+tc.query, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			all := strings.Join(plan, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("plan lacks %q:\n%s", w, all)
				}
			}
			for _, line := range plan {
				whole := line == "SCAN bus_deliveries" || strings.HasPrefix(line, "SCAN bus_deliveries USING INDEX sqlite_autoindex") ||
					strings.HasPrefix(line, "SCAN bus_deliveries USING COVERING INDEX bus_deliveries_claim")
				if whole {
					t.Errorf("plan reads every delivery (%s):\n%s", line, all)
				}
			}
		})
	}
}
