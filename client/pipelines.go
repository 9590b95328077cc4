package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/switchboard-hub/switchboard/internal/pipeline"
	"github.com/switchboard-hub/switchboard/internal/pipeline/plan"
)

// Pipeline types shared with the hub.
type (
	// Execution is a pipeline execution with its steps.
	Execution = pipeline.Execution
	// StepState is one step of an execution.
	StepState = pipeline.StepState
	// ExecutionStatus is the status of an execution or a step.
	ExecutionStatus = pipeline.Status
	// PipelineEvent is one entry of an execution's event log; Line renders
	// it in the seed's events.log format.
	PipelineEvent = pipeline.Event
	// SkillRecord is a registered skill.
	SkillRecord = pipeline.SkillRecord
	// SkillError is a step's error (code, message, field?, details?).
	SkillError = pipeline.SkillError
	// PipelineSubscription delivers pipeline events to an agent.
	PipelineSubscription = pipeline.Subscription
)

// SkillSource is a definition file sent by content.
type SkillSource struct {
	Name    string `json:"name,omitempty"`
	Content string `json:"content"`
}

// ExecutionInput starts an execution: Pipeline is the pipeline file's text
// (YAML or JSON) and Skills the skill files it needs; the administrator
// may instead name a File on the hub's disk. RunPipelineFile fills these
// from a local file.
type ExecutionInput struct {
	Pipeline       string          `json:"pipeline,omitempty"`
	File           string          `json:"file,omitempty"`
	Skills         []SkillSource   `json:"skills,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Metadata       map[string]any  `json:"metadata,omitempty"`
}

// ReadPipelineFile reads a pipeline file and every skill file of its
// skills_dir into an ExecutionInput, as `switchboard pipeline run` sends it
// to a hub that cannot read the local disk.
func ReadPipelineFile(path string) (ExecutionInput, error) {
	b, err := plan.ReadBundle(path)
	if err != nil {
		return ExecutionInput{}, err
	}
	in := ExecutionInput{Pipeline: string(b.Pipeline)}
	for _, s := range b.Skills {
		in.Skills = append(in.Skills, SkillSource{Name: s.Name, Content: string(s.Content)})
	}
	return in, nil
}

// PutSkill registers (or replaces) a skill in the caller's registry.
func (c *Client) PutSkill(ctx context.Context, name, content string) (SkillRecord, error) {
	var out SkillRecord
	err := c.Do(ctx, http.MethodPost, "/v1/skills", nil, SkillSource{Name: name, Content: content}, &out)
	return out, err
}

// Skills lists the caller's registered skills and the deployment's shared ones.
func (c *Client) Skills(ctx context.Context) ([]SkillRecord, error) {
	var out struct {
		Skills []SkillRecord `json:"skills"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/skills", nil, nil, &out)
	return out.Skills, err
}

// Skill returns one registered skill.
func (c *Client) Skill(ctx context.Context, id string) (SkillRecord, error) {
	var out SkillRecord
	err := c.Do(ctx, http.MethodGet, "/v1/skills/"+esc(id), nil, nil, &out)
	return out, err
}

// DeleteSkill removes a skill from the caller's registry.
func (c *Client) DeleteSkill(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/skills/"+esc(id), nil, nil, nil)
}

// ValidatePipeline checks a pipeline, its skills and input without running
// it; problems come back as an *Error whose FieldErrors name each file and line.
func (c *Client) ValidatePipeline(ctx context.Context, in ExecutionInput) (json.RawMessage, error) {
	var out struct {
		Plan json.RawMessage `json:"plan"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/pipelines/validate", nil, in, &out)
	return out.Plan, err
}

// SubmitExecution starts an execution.
func (c *Client) SubmitExecution(ctx context.Context, in ExecutionInput) (*Execution, error) {
	var out Execution
	if err := c.Do(ctx, http.MethodPost, "/v1/executions", nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExecutionQuery filters Executions.
type ExecutionQuery struct {
	Status     string
	PipelineID string
	Before     string
	Limit      int
}

// Executions lists executions, newest first (the caller's; the admin's: all).
func (c *Client) Executions(ctx context.Context, f ExecutionQuery) ([]*Execution, error) {
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "pipeline_id": f.PipelineID, "before": f.Before} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out struct {
		Executions []*Execution `json:"executions"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/executions", q, nil, &out)
	return out.Executions, err
}

// Execution returns an execution with its steps.
func (c *Client) Execution(ctx context.Context, id string) (*Execution, error) {
	var out Execution
	if err := c.Do(ctx, http.MethodGet, "/v1/executions/"+esc(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExecutionState returns the execution exported as the seed's state.json,
// byte for byte.
func (c *Client) ExecutionState(ctx context.Context, id string) ([]byte, error) {
	var out []byte
	err := c.Do(ctx, http.MethodGet, "/v1/executions/"+esc(id)+"/state", nil, nil, &out)
	return out, err
}

// EventPage is a page of an execution's event log.
type EventPage struct {
	ExecutionID string          `json:"execution_id"`
	Status      ExecutionStatus `json:"status"`
	Events      []PipelineEvent `json:"events"`
	LastSeq     int64           `json:"last_seq"`
}

// ExecutionEvents returns the events after seq after; with wait > 0 the hub
// holds the request until there is one or the execution finishes.
func (c *Client) ExecutionEvents(ctx context.Context, id string, after int64, wait time.Duration) (EventPage, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if wait > 0 {
		q.Set("wait", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	}
	var out EventPage
	err := c.Do(ctx, http.MethodGet, "/v1/executions/"+esc(id)+"/events", q, nil, &out)
	return out, err
}

// ExecutionEventLog returns the events after seq after in the seed's
// events.log format, one line each.
func (c *Client) ExecutionEventLog(ctx context.Context, id string, after int64) ([]byte, error) {
	var out []byte
	q := url.Values{"format": {"log"}, "after": {strconv.FormatInt(after, 10)}}
	err := c.Do(ctx, http.MethodGet, "/v1/executions/"+esc(id)+"/events", q, nil, &out)
	return out, err
}

// FollowExecution calls fn with every event of the execution, from seq
// after on, as they are appended, and returns the execution once it has
// finished (or ctx's error).
func (c *Client) FollowExecution(ctx context.Context, id string, after int64, fn func(PipelineEvent)) (*Execution, error) {
	for {
		page, err := c.ExecutionEvents(ctx, id, after, 25*time.Second)
		if err != nil {
			return nil, err
		}
		for _, ev := range page.Events {
			if fn != nil {
				fn(ev)
			}
		}
		after = page.LastSeq
		if len(page.Events) == 0 && page.Status.Terminal() {
			return c.Execution(ctx, id)
		}
	}
}

// WaitExecution blocks until the execution has finished and returns it.
func (c *Client) WaitExecution(ctx context.Context, id string) (*Execution, error) {
	return c.FollowExecution(ctx, id, 1<<62, nil)
}

// CancelExecution cancels an execution.
func (c *Client) CancelExecution(ctx context.Context, id, reason string) (*Execution, error) {
	var out Execution
	if err := c.Do(ctx, http.MethodPost, "/v1/executions/"+esc(id)+"/cancel", nil, map[string]string{"reason": reason}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResumeExecution releases a step waiting at its approval gate with data.
func (c *Client) ResumeExecution(ctx context.Context, id, skill string, data json.RawMessage) (*Execution, error) {
	var out Execution
	body := map[string]any{"skill": skill}
	if len(data) > 0 {
		body["data"] = data
	}
	if err := c.Do(ctx, http.MethodPost, "/v1/executions/"+esc(id)+"/resume", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// InvokeInput is a direct invocation by a running step.
type InvokeInput struct {
	SkillID        string          `json:"skill_id"` // the running step that invokes
	Attempt        int             `json:"attempt,omitempty"`
	Skill          string          `json:"skill"` // the skill to run
	Input          json.RawMessage `json:"input,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// InvokeResult is the child execution and, once it finished, its output.
type InvokeResult struct {
	Execution *Execution      `json:"execution"`
	Result    json.RawMessage `json:"result"`
}

// InvokeSkill runs a skill as a child execution of the invoking step and
// waits up to wait for its standard output.
func (c *Client) InvokeSkill(ctx context.Context, executionID string, in InvokeInput, wait time.Duration) (InvokeResult, error) {
	q := url.Values{}
	if wait > 0 {
		q.Set("wait", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	}
	var out InvokeResult
	err := c.Do(ctx, http.MethodPost, "/v1/executions/"+esc(executionID)+"/invoke", q, in, &out)
	return out, err
}

// PipelineSubscribeInput subscribes an agent to pipeline events: an agent
// subscribes itself to its own executions; the admin names AgentID and
// Owner (an agent id, or "" for the deployment's executions).
type PipelineSubscribeInput struct {
	AgentID     string   `json:"agent_id,omitempty"`
	Owner       string   `json:"owner,omitempty"`
	Events      []string `json:"events"`
	PipelineID  string   `json:"pipeline_id,omitempty"`
	ExecutionID string   `json:"execution_id,omitempty"`
}

// SubscribePipeline records subscriptions; matching events arrive as bus
// notifications whose payload.event is the event type.
func (c *Client) SubscribePipeline(ctx context.Context, in PipelineSubscribeInput) ([]PipelineSubscription, error) {
	var out struct {
		Subscriptions []PipelineSubscription `json:"subscriptions"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/pipeline-subscriptions", nil, in, &out)
	return out.Subscriptions, err
}

// PipelineSubscriptions lists an agent's subscriptions ("" = the caller).
func (c *Client) PipelineSubscriptions(ctx context.Context, agentID string) ([]PipelineSubscription, error) {
	q := url.Values{}
	if agentID != "" {
		q.Set("agent_id", agentID)
	}
	var out struct {
		Subscriptions []PipelineSubscription `json:"subscriptions"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/pipeline-subscriptions", q, nil, &out)
	return out.Subscriptions, err
}

// DeletePipelineSubscription removes a subscription (agentID "" = the caller).
func (c *Client) DeletePipelineSubscription(ctx context.Context, id, agentID string) error {
	q := url.Values{}
	if agentID != "" {
		q.Set("agent_id", agentID)
	}
	return c.Do(ctx, http.MethodDelete, "/v1/pipeline-subscriptions/"+esc(id), q, nil, nil)
}
