package pipeline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/pipeline/lint"
	"github.com/switchboard-hub/switchboard/internal/pipeline/plan"
	"github.com/switchboard-hub/switchboard/internal/pipeline/skill"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// SkillFile is a skill definition file sent with a request (the Skills of
// a plan.Bundle).
type SkillFile = plan.SourceFile

// SkillRecord is a registered skill.
type SkillRecord struct {
	Owner     string       `json:"owner"`
	Skill     *skill.Skill `json:"skill"`
	AllowExec bool         `json:"allow_exec"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
}

// PutSkillRequest registers (or replaces) one skill in an owner's registry.
type PutSkillRequest struct {
	Owner string
	File  SkillFile
	// AllowExec must be set (by an admin-only caller) to register a skill
	// whose run is a local command: it runs on the hub's host.
	AllowExec bool
}

// PutSkill lints and stores a skill file under its id for the owner,
// replacing an earlier version. Problems are an E003 listing each with its
// line; an exec skill without AllowExec is E001 exec_not_allowed.
func (e *Engine) PutSkill(ctx context.Context, req PutSkillRequest) (*SkillRecord, error) {
	s, ps := skill.Parse(req.File.Name, req.File.Content)
	if err := ps.Err("invalid_skill"); err != nil {
		return nil, err
	}
	if len(s.Run.Exec) > 0 && !req.AllowExec {
		return nil, execForbidden(s.ID)
	}
	now := e.clock.Now()
	err := e.write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO pipeline_skills (owner, skill_id, version, hash, source, content, allow_exec, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (owner, skill_id) DO UPDATE SET version = excluded.version, hash = excluded.hash, source = excluded.source,
content = excluded.content, allow_exec = excluded.allow_exec, updated_at = excluded.updated_at`,
			req.Owner, s.ID, s.Version, s.Hash, req.File.Name, string(req.File.Content), len(s.Run.Exec) > 0, store.Millis(now), store.Millis(now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pipeline: store skill %s: %w", s.ID, err)
	}
	return e.GetSkill(ctx, req.Owner, s.ID)
}

// LoadSkillsDir registers every skill file under dir for the owner. It is
// all or nothing: any problem in any file refuses the whole directory.
func (e *Engine) LoadSkillsDir(ctx context.Context, owner, dir string, allowExec bool) ([]*SkillRecord, error) {
	skills, ps := skill.LoadDir(dir)
	if err := ps.Err("invalid_skill"); err != nil {
		return nil, err
	}
	for _, s := range skills {
		if len(s.Run.Exec) > 0 && !allowExec {
			return nil, execForbidden(s.ID)
		}
	}
	var out []*SkillRecord
	for _, s := range skills {
		content, err := readSource(dir, s.Source)
		if err != nil {
			return nil, err
		}
		rec, err := e.PutSkill(ctx, PutSkillRequest{Owner: owner, File: SkillFile{Name: s.Source, Content: content}, AllowExec: allowExec})
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

func execForbidden(id string) *protocol.Error {
	return &protocol.Error{Class: protocol.ClassPermission, Code: "exec_not_allowed",
		Message:        fmt.Sprintf("skill %s runs a local command on the hub; only an administrator may submit or register such skills", id),
		RequiredAction: "ask an administrator, or change run.exec to run.agent"}
}

// GetSkill returns one registered skill (E002 skill_not_found if absent).
func (e *Engine) GetSkill(ctx context.Context, owner, id string) (*SkillRecord, error) {
	recs, err := e.querySkills(ctx, `WHERE owner = ? AND skill_id = ?`, owner, id)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, protocol.NotFound("skill_not_found", fmt.Sprintf("no skill %q is registered for this owner", id))
	}
	return recs[0], nil
}

// ListSkills returns an owner's registered skills sorted by id (for owner
// "", the deployment's shared registry).
func (e *Engine) ListSkills(ctx context.Context, owner string) ([]*SkillRecord, error) {
	return e.querySkills(ctx, `WHERE owner = ? ORDER BY skill_id`, owner)
}

// DeleteSkill removes a registered skill. Running executions are not
// affected: they pinned their own copy.
func (e *Engine) DeleteSkill(ctx context.Context, owner, id string) error {
	var n int64
	err := e.write(ctx, func(tx *store.Tx) error {
		res, err := tx.Exec(ctx, `DELETE FROM pipeline_skills WHERE owner = ? AND skill_id = ?`, owner, id)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return protocol.NotFound("skill_not_found", fmt.Sprintf("no skill %q is registered for this owner", id))
	}
	return nil
}

func (e *Engine) querySkills(ctx context.Context, where string, args ...any) ([]*SkillRecord, error) {
	rows, err := e.db.Query(ctx, `SELECT owner, source, content, allow_exec, created_at, updated_at FROM pipeline_skills `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("pipeline: skills: %w", err)
	}
	defer rows.Close()
	var out []*SkillRecord
	for rows.Next() {
		var rec SkillRecord
		var source, content string
		var created, updated int64
		if err := rows.Scan(&rec.Owner, &source, &content, &rec.AllowExec, &created, &updated); err != nil {
			return nil, err
		}
		s, ps := skill.Parse(source, []byte(content))
		if len(ps) > 0 {
			return nil, fmt.Errorf("pipeline: stored skill %s no longer parses: %s", source, ps)
		}
		rec.Skill, rec.CreatedAt, rec.UpdatedAt = s, store.FromMillis(created), store.FromMillis(updated)
		out = append(out, &rec)
	}
	return out, rows.Err()
}

// registrySkills returns the owner's registered skills among ids. The
// deployment's own registry (owner "", filled by the administrator and
// --skills-dir) is shared: a skill the owner has not registered is taken
// from it.
func (e *Engine) registrySkills(ctx context.Context, q store.Q, owner string, ids []string) (map[string]*SkillRecord, error) {
	out := map[string]*SkillRecord{}
	if len(ids) == 0 {
		return out, nil
	}
	args := []any{owner}
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := q.Query(ctx, `SELECT owner, source, content, allow_exec FROM pipeline_skills WHERE (owner = ? OR owner = '') AND skill_id IN (`+store.InClause(len(ids))+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("pipeline: registry: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var recOwner, source, content string
		var allow bool
		if err := rows.Scan(&recOwner, &source, &content, &allow); err != nil {
			return nil, err
		}
		s, ps := skill.Parse(source, []byte(content))
		if len(ps) > 0 {
			return nil, fmt.Errorf("pipeline: stored skill %s no longer parses: %s", source, lint.Problems(ps))
		}
		if prev := out[s.ID]; prev != nil && prev.Owner != "" {
			continue // the owner's own skill wins over the shared one
		}
		out[s.ID] = &SkillRecord{Owner: recOwner, Skill: s, AllowExec: allow}
	}
	return out, rows.Err()
}

var errNoRows = sql.ErrNoRows

func isNoRows(err error) bool { return errors.Is(err, errNoRows) }
