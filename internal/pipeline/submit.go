package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/switchboard-hub/switchboard/internal/pipeline/lint"
	"github.com/switchboard-hub/switchboard/internal/pipeline/plan"
	"github.com/switchboard-hub/switchboard/internal/pipeline/ref"
	"github.com/switchboard-hub/switchboard/internal/pipeline/skill"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// SubmitRequest starts an execution. The pipeline comes from exactly one of
// File (a pipeline file on the hub's disk, whose skills_dir is read
// relative to it) or Pipeline (the file's content, sent inline). Skills are
// looked up in Skills (files sent inline), then skills_dir (File only),
// then the owner's registry.
type SubmitRequest struct {
	Owner    string          // namespace of the registry and of the execution ("" = the deployment's)
	File     string          // path of a pipeline file on the hub; admin/CLI use only
	Pipeline []byte          // inline pipeline file (YAML or JSON); its skills_dir is ignored
	Skills   []SkillFile     // inline skill files
	Input    json.RawMessage // the execution input: a JSON object (empty = {})
	// IdempotencyKey makes a retried submission safe: a repeat with the same
	// key (per owner) returns the existing execution if the definition and
	// input match, and E003 idempotency_conflict otherwise.
	IdempotencyKey string
	Metadata       map[string]any // copied into state.json's metadata
	// AllowExec permits skills that run local commands and were not taken
	// from the registry (inline or skills_dir). Set it only for admins.
	AllowExec bool
	// Authorize, when set, vets the validated plan before anything is
	// stored: the HTTP layer uses it to check that the caller may address
	// every agent the plan dispatches to. Its error is returned unchanged.
	Authorize func(*plan.Plan) error
}

// Submit validates a pipeline and its input and starts an execution. Every
// problem — unknown skills, dependencies outside the pipeline, cycles,
// malformed or non-upstream references, input the references need — is
// reported at once as an E003 whose fieldErrors name each field (with its
// line), and nothing is stored. A skill running a local command without
// AllowExec is E001 exec_not_allowed.
func (e *Engine) Submit(ctx context.Context, req SubmitRequest) (*Execution, error) {
	p, input, err := e.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	meta := map[string]any{}
	for k, v := range req.Metadata {
		meta[k] = v
	}
	x, err := e.create(ctx, createArgs{owner: req.Owner, plan: p, input: input, idemKey: req.IdempotencyKey, meta: meta})
	if err != nil {
		return nil, err
	}
	return e.Get(ctx, req.Owner, x)
}

// Validate runs every check of Submit without starting anything, for
// `switchboard pipeline lint` style tools. It returns the plan that would run.
func (e *Engine) Validate(ctx context.Context, req SubmitRequest) (*plan.Plan, error) {
	p, _, err := e.prepare(ctx, req)
	return p, err
}

func (e *Engine) prepare(ctx context.Context, req SubmitRequest) (*plan.Plan, json.RawMessage, error) {
	if (req.File == "") == (len(req.Pipeline) == 0) {
		return nil, nil, protocol.Invalid("pipeline", "send exactly one of a pipeline file path or the pipeline definition")
	}
	var f *plan.File
	var local []*skill.Skill
	var ps lint.Problems
	if req.File != "" {
		f, local, ps = plan.Load(req.File)
	} else {
		f, ps = plan.ParseFile("", req.Pipeline)
	}
	for _, sf := range req.Skills {
		s, sps := skill.Parse(sf.Name, sf.Content)
		ps = append(ps, sps...)
		if s != nil && len(sps) == 0 {
			local = append(local, s)
		}
	}
	if err := ps.Err("invalid_pipeline"); err != nil {
		return nil, nil, err
	}
	skills := map[string]*skill.Skill{}
	fromLocal := map[string]bool{}
	for _, s := range local {
		if _, dup := skills[s.ID]; !dup {
			skills[s.ID], fromLocal[s.ID] = s, true
		}
	}
	var missing []string
	for _, id := range f.Pipeline {
		if skills[id] == nil {
			missing = append(missing, id)
		}
	}
	reg, err := e.registrySkills(ctx, e.db, req.Owner, missing)
	if err != nil {
		return nil, nil, err
	}
	for id, rec := range reg {
		skills[id] = rec.Skill
	}
	p, ps := plan.Build(f, skills)
	input, inPS, err := e.decodeInput(req.Input)
	if err != nil {
		return nil, nil, err
	}
	if len(ps) == 0 {
		ps = append(ps, p.CheckInput(inPS)...)
	}
	if err := ps.Err("invalid_pipeline"); err != nil {
		return nil, nil, err
	}
	for _, id := range p.Order {
		if len(skills[id].Run.Exec) > 0 && fromLocal[id] && !req.AllowExec {
			return nil, nil, execForbidden(id)
		}
	}
	if req.Authorize != nil {
		if err := req.Authorize(p); err != nil {
			return nil, nil, err
		}
	}
	return p, input, nil
}

// decodeInput checks that the input is a JSON object within the size limit.
func (e *Engine) decodeInput(raw json.RawMessage) (json.RawMessage, any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if len(raw) > e.opts.MaxInputBytes {
		return nil, nil, protocol.Invalid("input", fmt.Sprintf("is %d bytes; the limit is %d", len(raw), e.opts.MaxInputBytes))
	}
	v, err := ref.Decode(raw)
	if err != nil {
		return nil, nil, protocol.Invalid("input", "not valid JSON: "+err.Error())
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, nil, protocol.Invalid("input", `must be a JSON object, e.g. {"n": 21}`)
	}
	norm, err := ref.Encode(v)
	if err != nil {
		return nil, nil, protocol.Invalid("input", err.Error())
	}
	return norm, v, nil
}

type createArgs struct {
	owner       string
	plan        *plan.Plan
	input       json.RawMessage
	idemKey     string
	meta        map[string]any
	parentID    string
	parentSkill string
	depth       int
	replyTo     string
	traceID     string
	// inTx creates inside an existing transaction (direct invocation).
	inTx *store.Tx
}

// create stores the pinned plan and a new execution with its steps, then
// advances it in the same transaction (dispatching its first steps).
func (e *Engine) create(ctx context.Context, a createArgs) (string, error) {
	id := protocol.NewID(protocol.PrefixRun)
	trace := a.traceID
	if trace == "" {
		trace = protocol.NewID(protocol.PrefixTrace)
	}
	meta := map[string]any{}
	for k, v := range a.meta {
		meta[k] = v
	}
	meta["pipeline_id"] = a.plan.ID
	meta["definition_hash"] = a.plan.Hash
	if a.plan.Version != "" {
		meta["definition_version"] = a.plan.Version
	}
	metaJSON, err := ref.Encode(meta)
	if err != nil {
		return "", protocol.Invalid("metadata", "cannot be encoded as JSON: "+err.Error())
	}
	def := a.plan.Marshal()
	body := func(tx *store.Tx) error {
		now := e.clock.Now()
		if a.idemKey != "" {
			var existing, hash, input string
			err := tx.QueryRow(ctx, `SELECT id, def_hash, input FROM pipeline_executions WHERE owner = ? AND idem_key = ?`, a.owner, a.idemKey).Scan(&existing, &hash, &input)
			if err == nil {
				if hash != a.plan.Hash || input != string(a.input) {
					return protocol.Conflict("idempotency_conflict", fmt.Sprintf("idempotency key %q was used for execution %s with a different definition or input", a.idemKey, existing))
				}
				id = existing
				return nil
			}
			if !isNoRows(err) {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO pipeline_definitions (hash, definition, created_at) VALUES (?, ?, ?) ON CONFLICT (hash) DO NOTHING`,
			a.plan.Hash, string(def), store.Millis(now)); err != nil {
			return fmt.Errorf("pipeline: store definition: %w", err)
		}
		x := &execRow{ID: id, Owner: a.owner, PipelineID: a.plan.ID, DefHash: a.plan.Hash, DefVersion: a.plan.Version, TraceID: trace,
			Status: StatusPending, Input: string(a.input), Metadata: string(metaJSON), ParentID: a.parentID, ParentSkill: a.parentSkill,
			Depth: a.depth, ReplyTo: a.replyTo, IdemKey: a.idemKey, Version: 1, CreatedAt: store.Millis(now), UpdatedAt: store.Millis(now)}
		if err := insertExec(ctx, tx, x); err != nil {
			return fmt.Errorf("pipeline: insert execution: %w", err)
		}
		e.plans.put(a.plan.Hash, a.plan)
		r := &run{e: e, ctx: ctx, tx: tx, now: now, x: x, plan: a.plan, steps: map[string]*stepRow{}, outputs: map[string]any{}}
		r.input, _ = ref.Decode(a.input)
		for i, sid := range a.plan.Order {
			st := &stepRow{ExecutionID: id, SkillID: sid, Position: i, Status: StatusPending, Version: 1, UpdatedAt: store.Millis(now), isNew: true}
			if err := insertStep(ctx, tx, st); err != nil {
				return fmt.Errorf("pipeline: insert step: %w", err)
			}
			st.isNew = false
			r.order = append(r.order, st)
			r.steps[sid] = st
		}
		if err := r.advance(); err != nil {
			return err
		}
		return r.save()
	}
	if a.inTx != nil {
		return id, body(a.inTx)
	}
	return id, e.write(ctx, body)
}

func readSource(dir, rel string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return nil, fmt.Errorf("pipeline: read %s: %w", rel, err)
	}
	return b, nil
}
