package a2a

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// TaskStore is the SDK's task store on the hub's database, scoped to one
// agent. Every task belongs to the caller that created it: another caller
// (of the same agent) gets "task not found", as the A2A specification asks
// for tasks the caller may not see.
type TaskStore struct {
	db      *store.DB
	clock   clock.Clock
	agentID string
}

var _ taskstore.Store = (*TaskStore)(nil)

// NewTaskStore returns the task store of agentID.
func NewTaskStore(db *store.DB, c clock.Clock, agentID string) *TaskStore {
	if c == nil {
		c = clock.Real{}
	}
	return &TaskStore{db: db, clock: c, agentID: agentID}
}

// callerOf is the authenticated caller of the A2A call in ctx.
func callerOf(ctx context.Context) (string, error) {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil && cc.User.Authenticated && cc.User.Name != "" {
		return cc.User.Name, nil
	}
	return "", a2a.ErrUnauthenticated
}

// Create implements taskstore.Store.
func (s *TaskStore) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	caller, err := callerOf(ctx)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	raw, err := json.Marshal(task)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("encode task: %w", err)
	}
	now := store.Millis(s.clock.Now())
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO a2a_tasks (agent_id, id, caller_id, context_id, state, version, task, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?)`, s.agentID, string(task.ID), caller, task.ContextID, string(task.Status.State), string(raw), now, now)
		return err
	})
	if store.IsUniqueViolation(err) {
		return taskstore.TaskVersionMissing, taskstore.ErrTaskAlreadyExists
	}
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task: %w", err)
	}
	return 1, nil
}

// Update implements taskstore.Store with optimistic concurrency on the
// version column.
func (s *TaskStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	caller, err := callerOf(ctx)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	return s.update(ctx, caller, req.Task, req.PrevVersion)
}

func (s *TaskStore) update(ctx context.Context, caller string, task *a2a.Task, prev taskstore.TaskVersion) (taskstore.TaskVersion, error) {
	raw, err := json.Marshal(task)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("encode task: %w", err)
	}
	var version int64
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		var cur int64
		var owner string
		err := tx.QueryRow(ctx, `SELECT version, caller_id FROM a2a_tasks WHERE agent_id = ? AND id = ?`, s.agentID, string(task.ID)).Scan(&cur, &owner)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && owner != caller) {
			return a2a.ErrTaskNotFound
		}
		if err != nil {
			return err
		}
		if prev != taskstore.TaskVersionMissing && int64(prev) != cur {
			return taskstore.ErrConcurrentModification
		}
		version = cur + 1
		_, err = tx.Exec(ctx, `UPDATE a2a_tasks SET state = ?, version = ?, task = ?, updated_at = ? WHERE agent_id = ? AND id = ?`,
			string(task.Status.State), version, string(raw), store.Millis(s.clock.Now()), s.agentID, string(task.ID))
		return err
	})
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	return taskstore.TaskVersion(version), nil
}

// Get implements taskstore.Store.
func (s *TaskStore) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	caller, err := callerOf(ctx)
	if err != nil {
		return nil, err
	}
	st, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if st.User != caller {
		return nil, a2a.ErrTaskNotFound
	}
	return st, nil
}

// get loads a task whoever owns it (for the hub's own bookkeeping).
func (s *TaskStore) get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	var raw, caller string
	var version int64
	err := s.db.QueryRow(ctx, `SELECT task, version, caller_id FROM a2a_tasks WHERE agent_id = ? AND id = ?`, s.agentID, string(id)).
		Scan(&raw, &version, &caller)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, a2a.ErrTaskNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load task: %w", err)
	}
	var t a2a.Task
	if err := json.Unmarshal([]byte(raw), &t); err != nil {
		return nil, fmt.Errorf("decode task %s: %w", id, err)
	}
	return &taskstore.StoredTask{Task: &t, Version: taskstore.TaskVersion(version), User: caller}, nil
}

// Page sizes of ListTasks (the A2A specification's bounds).
const (
	defaultPageSize = 50
	maxPageSize     = 100
)

// List implements taskstore.Store: the caller's tasks, most recently
// updated first, filtered and paged by an opaque token.
func (s *TaskStore) List(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	caller, err := callerOf(ctx)
	if err != nil {
		return nil, err
	}
	size := req.PageSize
	if size == 0 {
		size = defaultPageSize
	}
	if size < 1 || size > maxPageSize {
		return nil, fmt.Errorf("pageSize must be between 1 and %d, got %d: %w", maxPageSize, req.PageSize, a2a.ErrInvalidParams)
	}
	where := []string{"agent_id = ?", "caller_id = ?"}
	args := []any{s.agentID, caller}
	if req.ContextID != "" {
		where = append(where, "context_id = ?")
		args = append(args, req.ContextID)
	}
	if req.Status != a2a.TaskStateUnspecified {
		where = append(where, "state = ?")
		args = append(args, string(req.Status))
	}
	var total int
	if err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM a2a_tasks WHERE `+strings.Join(where, " AND "), args...).Scan(&total); err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	if req.PageToken != "" {
		at, id, err := decodePageToken(req.PageToken)
		if err != nil {
			return nil, err
		}
		where = append(where, "(updated_at < ? OR (updated_at = ? AND id < ?))")
		args = append(args, at, at, id)
	}
	args = append(args, size+1)
	rows, err := s.db.Query(ctx, `SELECT task, updated_at FROM a2a_tasks WHERE `+strings.Join(where, " AND ")+
		` ORDER BY updated_at DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	type row struct {
		task    *a2a.Task
		updated int64
	}
	var page []row
	for rows.Next() {
		var raw string
		var r row
		if err := rows.Scan(&raw, &r.updated); err != nil {
			return nil, err
		}
		r.task = &a2a.Task{}
		if err := json.Unmarshal([]byte(raw), r.task); err != nil {
			return nil, fmt.Errorf("decode task: %w", err)
		}
		page = append(page, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	resp := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, TotalSize: total, PageSize: size}
	if len(page) > size {
		page = page[:size]
		last := page[size-1]
		resp.NextPageToken = encodePageToken(last.updated, string(last.task.ID))
	}
	for _, r := range page {
		t := r.task
		if req.StatusTimestampAfter != nil && t.Status.Timestamp != nil && t.Status.Timestamp.Before(*req.StatusTimestampAfter) {
			continue
		}
		if req.HistoryLength != nil {
			if n := *req.HistoryLength; n == 0 {
				t.History = []*a2a.Message{}
			} else if n > 0 && len(t.History) > n {
				t.History = t.History[len(t.History)-n:]
			}
		}
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		resp.Tasks = append(resp.Tasks, t)
	}
	return resp, nil
}

func encodePageToken(updated int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(updated, 10) + "|" + id))
}

func decodePageToken(tok string) (int64, string, error) {
	bad := fmt.Errorf("pageToken is not a token this server issued: %w", a2a.ErrInvalidParams)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, "", bad
	}
	at, id, ok := strings.Cut(string(raw), "|")
	if !ok || id == "" {
		return 0, "", bad
	}
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return 0, "", bad
	}
	return ms, id, nil
}

// finish moves a task that no live execution is driving to a final state
// (used when an answer or the deadline is found after a restart). A task
// already final is left alone.
func (s *TaskStore) finish(ctx context.Context, id a2a.TaskID, apply func(t *a2a.Task)) error {
	st, err := s.get(ctx, id)
	if err != nil {
		return err
	}
	if st.Task.Status.State.Terminal() {
		return nil
	}
	apply(st.Task)
	now := s.clock.Now().UTC()
	st.Task.Status.Timestamp = &now
	_, err = s.update(ctx, st.User, st.Task, st.Version)
	return err
}

// timeNow is the clock reading used for status timestamps.
func timeNow(c clock.Clock) *time.Time {
	t := c.Now().UTC()
	return &t
}
