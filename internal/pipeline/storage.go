package pipeline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/switchboard-hub/switchboard/internal/store"
)

// execRow is a pipeline_executions row.
type execRow struct {
	ID, Owner, PipelineID, DefHash, DefVersion, TraceID string
	Status                                              Status
	Input, Metadata                                     string
	ParentID, ParentSkill                               string
	Depth                                               int
	ReplyTo, IdemKey                                    string
	Version, EventSeq, WakeAt                           int64
	CreatedAt, StartedAt, CompletedAt, UpdatedAt        int64
}

const execCols = `id, owner, pipeline_id, def_hash, def_version, trace_id, status, input, metadata, parent_id, parent_skill,
depth, reply_to, idem_key, version, event_seq, wake_at, created_at, started_at, completed_at, updated_at`

type scanner interface{ Scan(dest ...any) error }

func scanExec(s scanner) (*execRow, error) {
	var x execRow
	err := s.Scan(&x.ID, &x.Owner, &x.PipelineID, &x.DefHash, &x.DefVersion, &x.TraceID, &x.Status, &x.Input, &x.Metadata,
		&x.ParentID, &x.ParentSkill, &x.Depth, &x.ReplyTo, &x.IdemKey, &x.Version, &x.EventSeq, &x.WakeAt,
		&x.CreatedAt, &x.StartedAt, &x.CompletedAt, &x.UpdatedAt)
	if err != nil {
		return nil, err
	}
	return &x, nil
}

// stepRow is a pipeline_steps row.
type stepRow struct {
	ExecutionID, SkillID             string
	Position                         int
	Status                           Status
	Attempt, Failures, Interruptions int
	Input, Output, Error             string // JSON text; "" = none
	RequestID, LeaseOwner            string
	LeaseUntil, NextAttemptAt        int64
	Version                          int64
	StartedAt, CompletedAt           int64
	UpdatedAt                        int64

	dirty bool
	isNew bool
	// lean marks an ended step loaded with only its id, position, status,
	// attempt and request id (what answers are checked against): an ended step never changes again, and loading every earlier
	// step's row would make each transition of a long pipeline read them
	// all. run.fill loads its input, output and error when needed.
	lean bool
}

const stepCols = `execution_id, skill_id, position, status, attempt, failures, interruptions, input, output, error, request_id,
lease_owner, lease_until, next_attempt_at, version, started_at, completed_at, updated_at`

func scanStep(s scanner) (*stepRow, error) {
	var st stepRow
	err := s.Scan(&st.ExecutionID, &st.SkillID, &st.Position, &st.Status, &st.Attempt, &st.Failures, &st.Interruptions,
		&st.Input, &st.Output, &st.Error, &st.RequestID, &st.LeaseOwner, &st.LeaseUntil, &st.NextAttemptAt, &st.Version,
		&st.StartedAt, &st.CompletedAt, &st.UpdatedAt)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// lockMode says how a transaction reads an execution row.
type lockMode int

const (
	lockNone lockMode = iota // plain read (SQLite's single writer serialises anyway)
	lockWait                 // PostgreSQL: FOR UPDATE, waiting for other writers
	lockSkip                 // PostgreSQL: FOR UPDATE SKIP LOCKED (scheduler claims)
)

func (e *Engine) lockClause(m lockMode) string {
	if e.db.Dialect() != store.Postgres {
		return ""
	}
	switch m {
	case lockWait:
		return " FOR UPDATE"
	case lockSkip:
		return e.db.SkipLocked()
	}
	return ""
}

func (e *Engine) getExec(ctx context.Context, q store.Q, id string, m lockMode) (*execRow, error) {
	x, err := scanExec(q.QueryRow(ctx, `SELECT `+execCols+` FROM pipeline_executions WHERE id = ?`+e.lockClause(m), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: load execution %s: %w", id, err)
	}
	return x, nil
}

func getSteps(ctx context.Context, q store.Q, id string) ([]*stepRow, error) {
	rows, err := q.Query(ctx, `SELECT `+stepCols+` FROM pipeline_steps WHERE execution_id = ? ORDER BY position`, id)
	if err != nil {
		return nil, fmt.Errorf("pipeline: load steps of %s: %w", id, err)
	}
	defer rows.Close()
	var out []*stepRow
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// terminalSQL lists the terminal step statuses for SQL.
const terminalSQL = `('completed', 'failed', 'skipped', 'cancelled')`

// getStepsLean loads an execution's steps for a transition: the steps
// still in play in full, and the ended ones (see stepRow.lean) with only
// their id, position and status, so a transition of a long pipeline does
// not read every earlier step's row.
func getStepsLean(ctx context.Context, q store.Q, id string) ([]*stepRow, error) {
	rows, err := q.Query(ctx, `SELECT `+stepCols+` FROM pipeline_steps WHERE execution_id = ? AND status NOT IN `+terminalSQL, id)
	if err != nil {
		return nil, fmt.Errorf("pipeline: load steps of %s: %w", id, err)
	}
	var out []*stepRow
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = q.Query(ctx, `SELECT skill_id, position, status, attempt, request_id FROM pipeline_steps WHERE execution_id = ? AND status IN `+terminalSQL, id)
	if err != nil {
		return nil, fmt.Errorf("pipeline: load steps of %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		st := &stepRow{ExecutionID: id, lean: true}
		if err := rows.Scan(&st.SkillID, &st.Position, &st.Status, &st.Attempt, &st.RequestID); err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *stepRow) int { return a.Position - b.Position })
	return out, nil
}

func insertExec(ctx context.Context, tx *store.Tx, x *execRow) error {
	_, err := tx.Exec(ctx, `INSERT INTO pipeline_executions (`+execCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		x.ID, x.Owner, x.PipelineID, x.DefHash, x.DefVersion, x.TraceID, string(x.Status), x.Input, x.Metadata, x.ParentID, x.ParentSkill,
		x.Depth, x.ReplyTo, x.IdemKey, x.Version, x.EventSeq, x.WakeAt, x.CreatedAt, x.StartedAt, x.CompletedAt, x.UpdatedAt)
	return err
}

// updateExec writes the mutable columns if the row still has the version
// that was read, and bumps it.
func updateExec(ctx context.Context, tx *store.Tx, x *execRow) error {
	res, err := tx.Exec(ctx, `UPDATE pipeline_executions SET status = ?, version = version + 1, event_seq = ?, wake_at = ?,
started_at = ?, completed_at = ?, updated_at = ? WHERE id = ? AND version = ?`,
		string(x.Status), x.EventSeq, x.WakeAt, x.StartedAt, x.CompletedAt, x.UpdatedAt, x.ID, x.Version)
	if err != nil {
		return fmt.Errorf("pipeline: update execution %s: %w", x.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return errStale
	}
	x.Version++
	return nil
}

func insertStep(ctx context.Context, tx *store.Tx, st *stepRow) error {
	_, err := tx.Exec(ctx, `INSERT INTO pipeline_steps (`+stepCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		st.ExecutionID, st.SkillID, st.Position, string(st.Status), st.Attempt, st.Failures, st.Interruptions, st.Input, st.Output, st.Error,
		st.RequestID, st.LeaseOwner, st.LeaseUntil, st.NextAttemptAt, st.Version, st.StartedAt, st.CompletedAt, st.UpdatedAt)
	return err
}

// updateStep writes one step's own row, guarded by its version.
func updateStep(ctx context.Context, tx *store.Tx, st *stepRow) error {
	res, err := tx.Exec(ctx, `UPDATE pipeline_steps SET status = ?, attempt = ?, failures = ?, interruptions = ?, input = ?, output = ?,
error = ?, request_id = ?, lease_owner = ?, lease_until = ?, next_attempt_at = ?, version = version + 1, started_at = ?,
completed_at = ?, updated_at = ? WHERE execution_id = ? AND skill_id = ? AND version = ?`,
		string(st.Status), st.Attempt, st.Failures, st.Interruptions, st.Input, st.Output, st.Error, st.RequestID, st.LeaseOwner,
		st.LeaseUntil, st.NextAttemptAt, st.StartedAt, st.CompletedAt, st.UpdatedAt, st.ExecutionID, st.SkillID, st.Version)
	if err != nil {
		return fmt.Errorf("pipeline: update step %s/%s: %w", st.ExecutionID, st.SkillID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return errStale
	}
	st.Version++
	return nil
}

// requestRow is a pipeline_requests row: one bus request of an agent step.
type requestRow struct {
	RequestID, ExecutionID, SkillID string
	Attempt                         int
	AgentID, SettledBy, Outcome     string
	CreatedAt, SettledAt            int64
}

func getRequest(ctx context.Context, q store.Q, id string) (*requestRow, error) {
	var r requestRow
	err := q.QueryRow(ctx, `SELECT request_id, execution_id, skill_id, attempt, agent_id, settled_by, outcome, created_at, settled_at
FROM pipeline_requests WHERE request_id = ?`, id).Scan(&r.RequestID, &r.ExecutionID, &r.SkillID, &r.Attempt, &r.AgentID,
		&r.SettledBy, &r.Outcome, &r.CreatedAt, &r.SettledAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: load request %s: %w", id, err)
	}
	return &r, nil
}

func settleRequest(ctx context.Context, tx *store.Tx, requestID, by, outcome string, at int64) error {
	if requestID == "" {
		return nil
	}
	_, err := tx.Exec(ctx, `UPDATE pipeline_requests SET settled_by = ?, outcome = ?, settled_at = ? WHERE request_id = ? AND settled_at = 0`,
		by, outcome, at, requestID)
	return err
}
