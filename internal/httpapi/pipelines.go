package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/pipeline"
	"github.com/switchboard-hub/switchboard/internal/pipeline/plan"
	"github.com/switchboard-hub/switchboard/internal/pipeline/skill"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// PipelineOptions configure the pipeline routes.
type PipelineOptions struct {
	// AllowExec lets the administrator submit and register skills that run
	// local commands on the hub's host (serve --allow-exec). Agents never may.
	AllowExec bool
}

// SkillSource is a definition file sent by content: a skill (Markdown with
// YAML front-matter).
type SkillSource struct {
	Name    string `json:"name,omitempty"` // a path for problem reports, e.g. "skills/add.md"
	Content string `json:"content"`
}

// SkillList is the answer to GET /v1/skills.
type SkillList struct {
	Skills []*pipeline.SkillRecord `json:"skills"`
}

// SubmitExecutionRequest starts an execution (and is what
// POST /v1/pipelines/validate checks). Send the pipeline file's content in
// pipeline — its text as a JSON string, or the file as a JSON object — with
// the skill files it needs in skills (its skills_dir is not read: the hub
// cannot see the client's disk); skills not sent come from the caller's
// registry, then the deployment's. The administrator may instead name a
// pipeline file on the hub's disk in file (its skills_dir is read relative
// to it).
type SubmitExecutionRequest struct {
	Pipeline       json.RawMessage `json:"pipeline,omitempty"`
	File           string          `json:"file,omitempty"`
	Skills         []SkillSource   `json:"skills,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Metadata       map[string]any  `json:"metadata,omitempty"`
}

// ValidateResponse is the plan a valid pipeline would run.
type ValidateResponse struct {
	Valid bool       `json:"valid"`
	Plan  *plan.Plan `json:"plan"`
}

// ExecutionList is the answer to GET /v1/executions.
type ExecutionList struct {
	Executions []*pipeline.Execution `json:"executions"`
}

// EventList is a page of an execution's event log.
type EventList struct {
	ExecutionID string           `json:"execution_id"`
	Status      pipeline.Status  `json:"status"`
	Events      []pipeline.Event `json:"events"`
	// LastSeq is the seq to pass as after for the next page (unchanged
	// when there were no new events).
	LastSeq int64 `json:"last_seq"`
}

// CancelExecutionRequest cancels an execution.
type CancelExecutionRequest struct {
	Reason string `json:"reason,omitempty"`
}

// ResumeExecutionRequest answers a step waiting at its approval gate.
type ResumeExecutionRequest struct {
	Skill string          `json:"skill"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// InvokeSkillRequest is a direct invocation by a running step: the agent
// running skill_id of the execution runs skill as a child execution.
type InvokeSkillRequest struct {
	SkillID        string          `json:"skill_id"`
	Attempt        int             `json:"attempt,omitempty"`
	Skill          string          `json:"skill"`
	Input          json.RawMessage `json:"input,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// InvokeSkillResponse is the child execution; once it has finished, result
// is the invoked skill's standard output.
type InvokeSkillResponse struct {
	Execution *pipeline.Execution `json:"execution"`
	Result    json.RawMessage     `json:"result"`
}

// PipelineSubscribeRequest subscribes an agent to pipeline events. An
// agent subscribes itself to its own executions; the administrator names
// the agent and whose executions (owner: an agent id, or "" for the
// deployment's own).
type PipelineSubscribeRequest struct {
	AgentID     string   `json:"agent_id,omitempty"`
	Owner       string   `json:"owner,omitempty"`
	Events      []string `json:"events"`
	PipelineID  string   `json:"pipeline_id,omitempty"`
	ExecutionID string   `json:"execution_id,omitempty"`
}

// SubscriptionList lists pipeline subscriptions.
type SubscriptionList struct {
	Subscriptions []pipeline.Subscription `json:"subscriptions"`
}

// MountPipelines registers the skills, executions and subscriptions routes
// once the engine exists (it is built after the API).
func (s *Server) MountPipelines(e *pipeline.Engine, opts PipelineOptions) {
	if s.pipelines != nil || e == nil {
		return
	}
	s.pipelines, s.pipelineOpts = e, opts
	tag := "pipelines"
	idle := []Param{{Name: "wait", Type: "integer", Description: "seconds to wait for new events (0–60)"}}
	s.router.Handle(Op{Method: "POST", Path: "/v1/skills", Summary: "Register (or replace) a skill in your registry (the admin's go to the deployment's shared registry)",
		Tag: tag, Request: SkillSource{}, Response: pipeline.SkillRecord{}, MaxBody: skill.MaxFileBytes * 2}, s.putSkill)
	s.router.Handle(Op{Method: "GET", Path: "/v1/skills", Summary: "Your registered skills and the deployment's shared ones",
		Tag: tag, Response: SkillList{}, Query: []Param{{Name: "owner", Description: "admin only: an agent whose registry to list"}}}, s.listSkills)
	s.router.Handle(Op{Method: "GET", Path: "/v1/skills/{id}", Summary: "One skill: yours, else the deployment's shared one", Tag: tag, Response: pipeline.SkillRecord{}}, s.getSkill)
	s.router.Handle(Op{Method: "DELETE", Path: "/v1/skills/{id}", Summary: "Remove a skill from your registry (running executions keep their copy)", Tag: tag, Status: http.StatusNoContent}, s.deleteSkill)
	s.router.Handle(Op{Method: "POST", Path: "/v1/pipelines/validate", Summary: "Check a pipeline, its skills and input without running it: every problem with its file and line",
		Tag: tag, Request: SubmitExecutionRequest{}, Response: ValidateResponse{}, MaxBody: 8 << 20}, s.validatePipeline)
	s.router.Handle(Op{Method: "POST", Path: "/v1/executions", Summary: "Run a pipeline: the definition inline (or, admin, a file on the hub), its skills and the input",
		Tag: tag, Request: SubmitExecutionRequest{}, Response: pipeline.Execution{}, Status: http.StatusCreated, MaxBody: 8 << 20}, s.submitExecution)
	s.router.Handle(Op{Method: "GET", Path: "/v1/executions", Summary: "Executions, newest first (yours; the admin sees all)", Tag: tag, Response: ExecutionList{},
		Query: []Param{{Name: "status"}, {Name: "pipeline_id"}, {Name: "before", Description: "page: executions created before this id"}, {Name: "limit", Type: "integer", Description: "1–500 (default 50)"}}}, s.listExecutions)
	s.router.Handle(Op{Method: "GET", Path: "/v1/executions/{id}", Summary: "An execution with its steps", Tag: tag, Response: pipeline.Execution{}}, s.getExecution)
	s.router.Handle(Op{Method: "GET", Path: "/v1/executions/{id}/state", Summary: "The execution as the seed's state.json", Tag: tag, Response: map[string]any{}}, s.executionState)
	s.router.Handle(Op{Method: "GET", Path: "/v1/executions/{id}/events", Summary: "The event log after a seq (format=log: the seed's events.log lines); wait long-polls for new events",
		Tag: tag, Response: EventList{}, Query: append([]Param{{Name: "after", Type: "integer", Description: "only events with a greater seq"},
			{Name: "limit", Type: "integer", Description: "1–1000 (default 1000)"}, {Name: "format", Description: "json (default) or log"}}, idle...)}, s.executionEvents)
	s.router.Handle(Op{Method: "POST", Path: "/v1/executions/{id}/cancel", Summary: "Cancel an execution: steps in flight are cancelled and their agents told",
		Tag: tag, Request: CancelExecutionRequest{}, Response: pipeline.Execution{}}, s.cancelExecution)
	s.router.Handle(Op{Method: "POST", Path: "/v1/executions/{id}/resume", Summary: "Release a step waiting at its approval gate with data (the owner, the admin or a listed approver)",
		Tag: tag, Request: ResumeExecutionRequest{}, Response: pipeline.Execution{}}, s.resumeExecution)
	s.router.Handle(Op{Method: "POST", Path: "/v1/executions/{id}/invoke", Summary: "A running step invokes another skill as a child execution; wait returns its output",
		Tag: tag, Request: InvokeSkillRequest{}, Response: InvokeSkillResponse{}, Status: http.StatusCreated,
		Query: []Param{{Name: "wait", Type: "integer", Description: "seconds to wait for the child to finish (0–300)"}}}, s.invokeSkill)
	s.router.Handle(Op{Method: "POST", Path: "/v1/pipeline-subscriptions", Summary: "Subscribe an agent to pipeline events (delivered as bus notifications)",
		Tag: tag, Request: PipelineSubscribeRequest{}, Response: SubscriptionList{}, Status: http.StatusCreated}, s.subscribePipeline)
	s.router.Handle(Op{Method: "GET", Path: "/v1/pipeline-subscriptions", Summary: "An agent's pipeline subscriptions", Tag: tag, Response: SubscriptionList{},
		Query: []Param{{Name: "agent_id", Description: "admin: whose subscriptions"}}}, s.listPipelineSubscriptions)
	s.router.Handle(Op{Method: "DELETE", Path: "/v1/pipeline-subscriptions/{id}", Summary: "Remove a pipeline subscription", Tag: tag, Status: http.StatusNoContent,
		Query: []Param{{Name: "agent_id", Description: "admin: whose subscription"}}}, s.deletePipelineSubscription)
}

// pipelineOwner is the namespace a caller works in: an agent's own, or
// the deployment's ("") for the administrator, who also sees every owner's
// executions.
func pipelineOwner(p Principal) string {
	if p.Admin {
		return ""
	}
	return p.Agent.ID
}

// ---- skills ------------------------------------------------------------------

func (s *Server) putSkill(w http.ResponseWriter, r *http.Request) error {
	var req SkillSource
	if err := Decode(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Content) == "" {
		return &protocol.Error{Class: protocol.ClassInvalid, Code: "content_required", Message: "content is required: the skill file (Markdown with YAML front-matter)",
			FieldErrors: map[string]string{"content": "required"}, MissingFields: []string{"content"}}
	}
	name := req.Name
	if name == "" {
		name = "skill.md"
	}
	p := PrincipalFrom(r)
	if sk, ps := skill.Parse(name, []byte(req.Content)); len(ps) == 0 && sk.Run.Agent != "" {
		if err := s.mayDispatch(r.Context(), p, map[string]string{"run.agent": sk.Run.Agent}); err != nil {
			return err
		}
	}
	rec, err := s.pipelines.PutSkill(r.Context(), pipeline.PutSkillRequest{Owner: pipelineOwner(p),
		File: pipeline.SkillFile{Name: name, Content: []byte(req.Content)}, AllowExec: p.Admin && s.pipelineOpts.AllowExec})
	if err != nil {
		return execHint(err, p.Admin)
	}
	return WriteJSON(w, http.StatusOK, rec)
}

func (s *Server) listSkills(w http.ResponseWriter, r *http.Request) error {
	p := PrincipalFrom(r)
	owner := pipelineOwner(p)
	if o := r.URL.Query().Get("owner"); o != "" {
		if !p.Admin && o != owner {
			return &protocol.Error{Class: protocol.ClassPermission, Code: "not_your_registry", Message: "owner names another agent's registry; an agent lists its own",
				FieldErrors: map[string]string{"owner": "must be your own agent id or omitted"}}
		}
		owner = o
	}
	out, err := s.pipelines.ListSkills(r.Context(), owner)
	if err != nil {
		return err
	}
	if owner != "" {
		shared, err := s.pipelines.ListSkills(r.Context(), "")
		if err != nil {
			return err
		}
		own := map[string]bool{}
		for _, rec := range out {
			own[rec.Skill.ID] = true
		}
		for _, rec := range shared {
			if !own[rec.Skill.ID] {
				out = append(out, rec)
			}
		}
	}
	if out == nil {
		out = []*pipeline.SkillRecord{}
	}
	return WriteJSON(w, http.StatusOK, SkillList{Skills: out})
}

func (s *Server) getSkill(w http.ResponseWriter, r *http.Request) error {
	owner := pipelineOwner(PrincipalFrom(r))
	rec, err := s.pipelines.GetSkill(r.Context(), owner, r.PathValue("id"))
	if protocol.CodeOf(err) == "skill_not_found" && owner != "" {
		rec, err = s.pipelines.GetSkill(r.Context(), "", r.PathValue("id"))
	}
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, rec)
}

func (s *Server) deleteSkill(w http.ResponseWriter, r *http.Request) error {
	if err := s.pipelines.DeleteSkill(r.Context(), pipelineOwner(PrincipalFrom(r)), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// execHint adds what to do to an exec_not_allowed refusal.
func execHint(err error, admin bool) error {
	pe := protocol.AsError(err)
	if pe.Code != "exec_not_allowed" {
		return err
	}
	c := *pe
	if admin {
		c.RequiredAction = "start the hub with --allow-exec (SWITCHBOARD_ALLOW_EXEC=true) to let the administrator run local commands"
	}
	return &c
}

// ---- executions --------------------------------------------------------------

// submitRequest turns the body into the engine's request for this caller.
func (s *Server) submitRequest(r *http.Request) (pipeline.SubmitRequest, error) {
	var req SubmitExecutionRequest
	if err := Decode(r, &req); err != nil {
		return pipeline.SubmitRequest{}, err
	}
	p := PrincipalFrom(r)
	out := pipeline.SubmitRequest{Owner: pipelineOwner(p), Input: req.Input, IdempotencyKey: req.IdempotencyKey, Metadata: req.Metadata,
		AllowExec: p.Admin && s.pipelineOpts.AllowExec}
	if len(req.IdempotencyKey) > protocol.MaxIDLen {
		return out, protocol.Invalid("idempotency_key", fmt.Sprintf("at most %d characters", protocol.MaxIDLen))
	}
	def := bytes.TrimSpace(req.Pipeline)
	switch {
	case req.File != "" && len(def) > 0:
		return out, protocol.Invalid("pipeline", "send either pipeline (the definition) or file (a path on the hub), not both")
	case req.File != "":
		if !p.Admin {
			return out, &protocol.Error{Class: protocol.ClassPermission, Code: "file_not_allowed",
				Message:     "file names a path on the hub's disk, which only the administrator may run",
				FieldErrors: map[string]string{"file": "admin only"}, NextAction: "send the pipeline file's content in pipeline and its skills in skills (switchboard pipeline run FILE does this)"}
		}
		out.File = req.File
	case len(def) == 0 || bytes.Equal(def, []byte("null")):
		return out, &protocol.Error{Class: protocol.ClassInvalid, Code: "pipeline_required",
			Message:     "pipeline is required: the pipeline file's content (YAML text as a JSON string, or a JSON object)",
			FieldErrors: map[string]string{"pipeline": "required"}, MissingFields: []string{"pipeline"}}
	case def[0] == '"':
		var text string
		if err := json.Unmarshal(def, &text); err != nil {
			return out, protocol.Invalid("pipeline", "not a valid JSON string")
		}
		out.Pipeline = []byte(text)
	case def[0] == '{':
		out.Pipeline = def
	default:
		return out, protocol.Invalid("pipeline", "must be the pipeline file's text (a JSON string) or a JSON object")
	}
	for i, sf := range req.Skills {
		name := sf.Name
		if name == "" {
			name = fmt.Sprintf("skills[%d]", i)
		}
		out.Skills = append(out.Skills, pipeline.SkillFile{Name: name, Content: []byte(sf.Content)})
	}
	out.Authorize = func(pl *plan.Plan) error {
		targets := map[string]string{}
		for _, id := range pl.Order {
			st := pl.Steps[id]
			if st.Skill.Run.Agent != "" {
				targets["steps."+id+".run.agent"] = st.Skill.Run.Agent
			}
			if st.Approval != nil {
				for i, a := range st.Approval.Agents {
					targets[fmt.Sprintf("steps.%s.approval.agents[%d]", id, i)] = a
				}
			}
		}
		return s.mayDispatch(r.Context(), p, targets)
	}
	return out, nil
}

// mayDispatch checks the agents a definition makes the hub address (field →
// agent id): each must exist, and an agent caller may name only itself and
// the agents the routing rules let it send to — the hub does not send a
// task on an agent's behalf that the agent could not send itself.
func (s *Server) mayDispatch(ctx context.Context, p Principal, targets map[string]string) error {
	unknown := protocol.FieldErrors{}
	forbidden := map[string]string{}
	for field, id := range targets {
		if !p.Admin && id == p.Agent.ID {
			continue
		}
		to, err := s.Agents.Get(ctx, id)
		if protocol.CodeOf(err) == "agent_not_found" {
			unknown.Add(field, "no agent "+id)
			continue
		}
		if err != nil {
			return err
		}
		if p.Admin || s.Bus == nil {
			continue
		}
		if err := s.Bus.Config().Rules.Check(p.Agent, to); err != nil {
			forbidden[field] = protocol.AsError(err).Message
		}
	}
	if err := unknown.Err(); err != nil {
		pe := protocol.AsError(err)
		pe.Code = "unknown_agent"
		pe.Message = "the definition names agents that do not exist"
		pe.NextAction = "create the agents first (switchboard agents create), or fix the ids in run.agent / approval.agents"
		return pe
	}
	if len(forbidden) > 0 {
		return &protocol.Error{Class: protocol.ClassPermission, Code: "agent_not_reachable",
			Message:     "the definition dispatches to agents you may not send to under the routing rules",
			FieldErrors: forbidden, NextAction: "run it with a token that may reach those agents (their PM, or the admin), or change run.agent"}
	}
	return nil
}

func (s *Server) validatePipeline(w http.ResponseWriter, r *http.Request) error {
	req, err := s.submitRequest(r)
	if err != nil {
		return err
	}
	pl, err := s.pipelines.Validate(r.Context(), req)
	if err != nil {
		return execHint(err, PrincipalFrom(r).Admin)
	}
	return WriteJSON(w, http.StatusOK, ValidateResponse{Valid: true, Plan: pl})
}

func (s *Server) submitExecution(w http.ResponseWriter, r *http.Request) error {
	req, err := s.submitRequest(r)
	if err != nil {
		return err
	}
	x, err := s.pipelines.Submit(r.Context(), req)
	if err != nil {
		return execHint(err, PrincipalFrom(r).Admin)
	}
	return WriteJSON(w, http.StatusCreated, x)
}

func (s *Server) listExecutions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := QueryInt(r, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	f := pipeline.ListFilter{Owner: pipelineOwner(PrincipalFrom(r)), Status: pipeline.Status(q.Get("status")), PipelineID: q.Get("pipeline_id"),
		Before: q.Get("before"), Limit: limit}
	switch f.Status {
	case "", pipeline.StatusPending, pipeline.StatusRunning, pipeline.StatusCompleted, pipeline.StatusFailed, pipeline.StatusPartial, pipeline.StatusCancelled:
	default:
		return protocol.Invalid("status", "must be one of pending, running, completed, failed, partial, cancelled")
	}
	xs, err := s.pipelines.List(r.Context(), f)
	if err != nil {
		return err
	}
	if xs == nil {
		xs = []*pipeline.Execution{}
	}
	return WriteJSON(w, http.StatusOK, ExecutionList{Executions: xs})
}

func (s *Server) getExecution(w http.ResponseWriter, r *http.Request) error {
	x, err := s.pipelines.Get(r.Context(), pipelineOwner(PrincipalFrom(r)), r.PathValue("id"))
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, x)
}

func (s *Server) executionState(w http.ResponseWriter, r *http.Request) error {
	b, err := s.pipelines.StateJSON(r.Context(), pipelineOwner(PrincipalFrom(r)), r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, err = w.Write(b)
	return err
}

func (s *Server) executionEvents(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return protocol.Invalid("after", "must be a whole number ≥ 0 (the last seq you have)")
		}
		after = n
	}
	limit, err := QueryInt(r, "limit", 1000, 1, 1000)
	if err != nil {
		return err
	}
	wait, err := QueryInt(r, "wait", 0, 0, 60)
	if err != nil {
		return err
	}
	format := q.Get("format")
	if format != "" && format != "json" && format != "log" {
		return protocol.Invalid("format", "must be json or log")
	}
	owner, id := pipelineOwner(PrincipalFrom(r)), r.PathValue("id")
	var evs []pipeline.Event
	if wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(wait)*time.Second)
		evs, err = s.pipelines.WaitEvents(ctx, owner, id, after, limit)
		cancel()
	} else {
		evs, err = s.pipelines.Events(r.Context(), owner, id, after, limit)
	}
	if err != nil {
		return err
	}
	x, err := s.pipelines.Get(r.Context(), owner, id)
	if err != nil {
		return err
	}
	if x.Status.Terminal() && len(evs) < limit {
		// The last events commit with the final status: once the status
		// reads terminal, a second look finds any the first one missed, so
		// "no events and finished" really is the end of the log.
		last := after
		if len(evs) > 0 {
			last = evs[len(evs)-1].Seq
		}
		more, err := s.pipelines.Events(r.Context(), owner, id, last, limit-len(evs))
		if err != nil {
			return err
		}
		evs = append(evs, more...)
	}
	if format == "log" {
		var b bytes.Buffer
		for _, ev := range evs {
			b.WriteString(ev.Line())
			b.WriteByte('\n')
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
		_, err := w.Write(b.Bytes())
		return err
	}
	last := after
	if len(evs) > 0 {
		last = evs[len(evs)-1].Seq
	}
	if evs == nil {
		evs = []pipeline.Event{}
	}
	return WriteJSON(w, http.StatusOK, EventList{ExecutionID: id, Status: x.Status, Events: evs, LastSeq: last})
}

func (s *Server) cancelExecution(w http.ResponseWriter, r *http.Request) error {
	var req CancelExecutionRequest
	if err := decodeOptional(r, &req); err != nil {
		return err
	}
	if len(req.Reason) > protocol.MaxMessageLen {
		return protocol.Invalid("reason", fmt.Sprintf("at most %d bytes", protocol.MaxMessageLen))
	}
	x, err := s.pipelines.Cancel(r.Context(), pipelineOwner(PrincipalFrom(r)), r.PathValue("id"), req.Reason)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, x)
}

func (s *Server) resumeExecution(w http.ResponseWriter, r *http.Request) error {
	var req ResumeExecutionRequest
	if err := Decode(r, &req); err != nil {
		return err
	}
	if req.Skill == "" {
		return &protocol.Error{Class: protocol.ClassInvalid, Code: "skill_required", Message: "skill is required: the step waiting at its approval gate",
			FieldErrors: map[string]string{"skill": "required"}, MissingFields: []string{"skill"}}
	}
	p := PrincipalFrom(r)
	rr := pipeline.ResumeRequest{ExecutionID: r.PathValue("id"), SkillID: req.Skill, Data: req.Data}
	if !p.Admin {
		// The owner resumes as the owner; another agent only as an approver
		// (or the step's own agent), and otherwise cannot see the execution.
		x, err := s.pipelines.Get(r.Context(), "", rr.ExecutionID)
		if err != nil {
			return err
		}
		if x.Owner != p.Agent.ID {
			if !mayApprove(x, req.Skill, p.Agent.ID) {
				return protocol.NotFound("execution_not_found", "no execution "+rr.ExecutionID)
			}
			rr.Actor = p.Agent.ID
		} else {
			rr.Owner = p.Agent.ID
		}
	}
	x, err := s.pipelines.Resume(r.Context(), rr)
	if err != nil {
		return err
	}
	if rr.Actor != "" {
		x.Steps, x.Input = nil, nil // an approver sees the outcome, not the owner's data
	}
	return WriteJSON(w, http.StatusOK, x)
}

func runsAStep(x *pipeline.Execution, agentID string) bool {
	for _, st := range x.Steps {
		if st.Agent == agentID {
			return true
		}
	}
	return false
}

func mayApprove(x *pipeline.Execution, skillID, agentID string) bool {
	for _, st := range x.Steps {
		if st.SkillID != skillID {
			continue
		}
		if st.Agent == agentID {
			return true
		}
		if st.Approval != nil {
			for _, a := range st.Approval.Agents {
				if a == agentID {
					return true
				}
			}
		}
	}
	return false
}

func (s *Server) invokeSkill(w http.ResponseWriter, r *http.Request) error {
	var req InvokeSkillRequest
	if err := Decode(r, &req); err != nil {
		return err
	}
	fe := protocol.FieldErrors{}
	if req.SkillID == "" {
		fe.Add("skill_id", "required: the running step that invokes")
	}
	if req.Skill == "" {
		fe.Add("skill", "required: the skill to invoke")
	}
	if err := fe.Err(); err != nil {
		return err
	}
	wait, err := QueryInt(r, "wait", 0, 0, 300)
	if err != nil {
		return err
	}
	p := PrincipalFrom(r)
	ir := pipeline.InvokeRequest{ExecutionID: r.PathValue("id"), SkillID: req.SkillID, Attempt: req.Attempt, Skill: req.Skill,
		Input: req.Input, IdempotencyKey: req.IdempotencyKey}
	if !p.Admin {
		ir.Caller = p.Agent.ID // only the agent running the step may invoke for it
		// Nor may an agent that neither owns the execution nor runs one of
		// its steps learn that it exists.
		x, err := s.pipelines.Get(r.Context(), "", ir.ExecutionID)
		if err != nil {
			return err
		}
		if x.Owner != p.Agent.ID && !runsAStep(x, p.Agent.ID) {
			return protocol.NotFound("execution_not_found", "no execution "+ir.ExecutionID)
		}
	}
	x, err := s.pipelines.Invoke(r.Context(), ir)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(wait)*time.Second)
		done, err := s.pipelines.Wait(ctx, "", x.ID)
		cancel()
		if err == nil {
			x, status = done, http.StatusOK
		} else if ctx.Err() == nil {
			return err
		}
	}
	return WriteJSON(w, status, InvokeSkillResponse{Execution: x, Result: x.Result()})
}

// ---- subscriptions -----------------------------------------------------------

func (s *Server) subscribePipeline(w http.ResponseWriter, r *http.Request) error {
	var req PipelineSubscribeRequest
	if err := Decode(r, &req); err != nil {
		return err
	}
	p := PrincipalFrom(r)
	agentID, err := p.Self(req.AgentID, "agent_id")
	if err != nil {
		return err
	}
	owner := pipelineOwner(p)
	if p.Admin {
		owner = req.Owner
		if _, err := s.Agents.Get(r.Context(), agentID); err != nil {
			if protocol.CodeOf(err) == "agent_not_found" {
				return &protocol.Error{Class: protocol.ClassUnavailable, Code: "unknown_agent", Message: "agent_id: no agent " + agentID,
					FieldErrors: map[string]string{"agent_id": "unknown agent"}}
			}
			return err
		}
	} else if req.Owner != "" && req.Owner != owner {
		return &protocol.Error{Class: protocol.ClassPermission, Code: "not_your_executions",
			Message: "owner names another agent; an agent subscribes to its own executions", FieldErrors: map[string]string{"owner": "must be your own agent id or omitted"}}
	}
	subs, err := s.pipelines.Subscribe(r.Context(), pipeline.SubscribeRequest{AgentID: agentID, Owner: owner, Events: req.Events,
		PipelineID: req.PipelineID, ExecutionID: req.ExecutionID})
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusCreated, SubscriptionList{Subscriptions: subs})
}

func (s *Server) subscriptionAgent(r *http.Request) (string, error) {
	return PrincipalFrom(r).Self(r.URL.Query().Get("agent_id"), "agent_id")
}

func (s *Server) listPipelineSubscriptions(w http.ResponseWriter, r *http.Request) error {
	agentID, err := s.subscriptionAgent(r)
	if err != nil {
		return err
	}
	subs, err := s.pipelines.Subscriptions(r.Context(), agentID)
	if err != nil {
		return err
	}
	if subs == nil {
		subs = []pipeline.Subscription{}
	}
	return WriteJSON(w, http.StatusOK, SubscriptionList{Subscriptions: subs})
}

func (s *Server) deletePipelineSubscription(w http.ResponseWriter, r *http.Request) error {
	agentID, err := s.subscriptionAgent(r)
	if err != nil {
		return err
	}
	if err := s.pipelines.Unsubscribe(r.Context(), agentID, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
