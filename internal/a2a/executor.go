package a2a

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// eventChannel wakes the execution waiting for a request's answer (on any
// node: the store relays notifications between PostgreSQL nodes).
const eventChannel = "a2a_event"

// pollInterval bounds how late an execution notices an answer whose
// wake-up it missed.
const pollInterval = time.Second

// Params are the request params an agent receives for an A2A message.
type Params struct {
	ContextID string `json:"contextId"`
	TaskID    string `json:"taskId"`
	// Text is the message's text parts joined by blank lines.
	Text string `json:"text"`
	// Parts are the message's parts in A2A 1.0 JSON form (text, data, url, raw).
	Parts json.RawMessage `json:"parts"`
	// Caller names who sent the message (the caller token's name).
	Caller string `json:"caller,omitempty"`
}

// Result is what an agent's response envelope carries in payload.result.
type Result struct {
	Text  string          `json:"text,omitempty"`
	Parts json.RawMessage `json:"parts,omitempty"`
	// State "input-required" asks the caller for more input instead of
	// completing the task.
	State string `json:"state,omitempty"`
}

// event kinds recorded for a request.
const (
	kindProgress = "progress"
	kindReply    = "reply"
	kindError    = "error"
	kindDead     = "dead"
)

// executor turns A2A messages for one agent into bus requests.
type executor struct {
	s       *Service
	agentID string
	tasks   *TaskStore
}

var _ a2asrv.AgentExecutor = (*executor)(nil)

// Execute implements a2asrv.AgentExecutor.
func (x *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
		}
		caller, _ := callerOf(ctx)
		reqID, deadline, err := x.s.dispatch(ctx, x.agentID, caller, ec)
		if err != nil {
			x.s.log.Error("a2a: queue request", "agent", x.agentID, "task", ec.TaskID, "err", err)
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "the hub could not queue the message for the agent: "+protocol.AsError(err).Message)), nil)
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		x.s.await(ctx, reqID, deadline, ec, yield)
	}
}

// Cancel implements a2asrv.AgentExecutor: the task is canceled at once and
// the agent is told, so it can stop working on it.
func (x *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask != nil && ec.StoredTask.Status.State.Terminal() {
			yield(nil, a2a.ErrTaskNotCancelable)
			return
		}
		if err := x.s.notifyCanceled(ctx, x.agentID, ec); err != nil {
			x.s.log.Warn("a2a: tell agent about cancel", "agent", x.agentID, "task", ec.TaskID, "err", err)
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, agentText(ec, "canceled by the caller")), nil)
	}
}

func agentText(ec a2a.TaskInfoProvider, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
}

// dispatch records a request for the task and enqueues it for the agent in
// one transaction.
func (s *Service) dispatch(ctx context.Context, agentID, caller string, ec *a2asrv.ExecutorContext) (string, time.Time, error) {
	parts, err := json.Marshal(ec.Message.Parts)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("encode parts: %w", err)
	}
	var texts []string
	for _, p := range ec.Message.Parts {
		if t := p.Text(); t != "" {
			texts = append(texts, t)
		}
	}
	callerName := ""
	_ = s.db.QueryRow(ctx, `SELECT name FROM a2a_callers WHERE id = ?`, caller).Scan(&callerName)
	params, _ := json.Marshal(Params{ContextID: ec.ContextID, TaskID: string(ec.TaskID), Text: strings.Join(texts, "\n\n"), Parts: parts, Caller: callerName})
	payload, _ := json.Marshal(protocol.RequestPayload{Action: Action, Params: params})
	now := s.clock.Now()
	deadline := now.Add(s.cfg.Wait)
	ttl := int(s.cfg.Wait / time.Second)
	if ttl < 1 {
		ttl = 1
	}
	env := &protocol.Envelope{ID: protocol.NewID(protocol.PrefixMessage), TraceID: protocol.NewID(protocol.PrefixTrace),
		From: protocol.Address{Agent: SystemID, Session: "a2a:" + ec.ContextID}, To: protocol.Address{Agent: agentID},
		Type: protocol.TypeRequest, TTL: ttl, Payload: payload}
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO a2a_requests (request_id, trace_id, agent_id, task_id, caller_id, deadline_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			env.ID, env.TraceID, agentID, string(ec.TaskID), caller, store.Millis(deadline), store.Millis(now)); err != nil {
			return err
		}
		_, err := s.bus.SendSystemTx(ctx, tx, env)
		return err
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return env.ID, deadline, nil
}

// notifyCanceled closes the task's open requests and tells the agent.
func (s *Service) notifyCanceled(ctx context.Context, agentID string, ec *a2asrv.ExecutorContext) error {
	payload, _ := json.Marshal(protocol.NotificationPayload{Event: CancelEvent,
		Message: fmt.Sprintf("the caller canceled A2A task %s (context %s); stop working on it, an answer is no longer needed", ec.TaskID, ec.ContextID)})
	return s.db.Write(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE a2a_requests SET applied = ? WHERE agent_id = ? AND task_id = ? AND applied = ?`, true, agentID, string(ec.TaskID), false); err != nil {
			return err
		}
		_, err := s.bus.SendSystemTx(ctx, tx, &protocol.Envelope{From: protocol.Address{Agent: SystemID, Session: "a2a:" + ec.ContextID},
			To: protocol.Address{Agent: agentID}, Type: protocol.TypeNotification, Payload: payload})
		return err
	})
}

type recorded struct {
	seq  int64
	kind string
	body json.RawMessage
}

func (s *Service) eventsAfter(ctx context.Context, reqID string, after int64) ([]recorded, error) {
	rows, err := s.db.Query(ctx, `SELECT seq, kind, body FROM a2a_events WHERE request_id = ? AND seq > ? ORDER BY seq`, reqID, after)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []recorded
	for rows.Next() {
		var r recorded
		var body string
		if err := rows.Scan(&r.seq, &r.kind, &body); err != nil {
			return nil, err
		}
		r.body = json.RawMessage(body)
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *Service) markApplied(ctx context.Context, reqID string) {
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE a2a_requests SET applied = ? WHERE request_id = ?`, true, reqID)
		return err
	})
	if err != nil {
		s.log.Warn("a2a: mark request applied", "request", reqID, "err", err)
	}
}

func (s *Service) wake(reqID string) {
	s.wmu.Lock()
	ch := s.waiters[reqID]
	s.wmu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// await streams the agent's progress and answer for one request as task
// events until the answer, the deadline, or the end of the execution.
func (s *Service) await(ctx context.Context, reqID string, deadline time.Time, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
	ch := make(chan struct{}, 1)
	s.wmu.Lock()
	s.waiters[reqID] = ch
	s.wmu.Unlock()
	defer func() {
		s.wmu.Lock()
		delete(s.waiters, reqID)
		s.wmu.Unlock()
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var seq int64
	for {
		evs, err := s.eventsAfter(ctx, reqID, seq)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("a2a: read request events", "request", reqID, "err", err)
		}
		for _, e := range evs {
			seq = e.seq
			out, final := translate(ec, e)
			for _, ev := range out {
				if !yield(ev, nil) {
					return
				}
			}
			if final {
				s.markApplied(context.WithoutCancel(ctx), reqID)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-ticker.C:
		case <-timer.C:
			s.markApplied(context.WithoutCancel(ctx), reqID)
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, timeoutText(s.cfg.Wait))), nil)
			return
		}
	}
}

func timeoutText(wait time.Duration) string {
	return fmt.Sprintf("the agent did not answer within %s (it may be offline); the message expired unanswered — send it again later", wait)
}

// translate turns one recorded event into task events; final reports that
// the request is settled.
func translate(info a2a.TaskInfoProvider, e recorded) (out []a2a.Event, final bool) {
	switch e.kind {
	case kindProgress:
		var n protocol.NotificationPayload
		_ = json.Unmarshal(e.body, &n)
		var msg *a2a.Message
		if n.Message != "" {
			msg = agentText(info, n.Message)
		}
		ev := a2a.NewStatusUpdateEvent(info, a2a.TaskStateWorking, msg)
		if n.Progress != nil {
			ev.SetMeta("progress", map[string]any{"current": n.Progress.Current, "total": n.Progress.Total, "percent": n.Progress.Percent})
		}
		return []a2a.Event{ev}, false
	case kindReply:
		var p protocol.ResponsePayload
		_ = json.Unmarshal(e.body, &p)
		if p.Status == protocol.StatusFailure {
			return []a2a.Event{a2a.NewStatusUpdateEvent(info, a2a.TaskStateFailed, agentText(info, failureText(p)))}, true
		}
		res, parts := decodeResult(p.Result)
		msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, info, parts...)
		if strings.EqualFold(res.State, "input-required") {
			return []a2a.Event{a2a.NewStatusUpdateEvent(info, a2a.TaskStateInputRequired, msg)}, true
		}
		art := a2a.NewArtifactEvent(info, parts...)
		art.Artifact.Name = "response"
		art.LastChunk = true
		return []a2a.Event{art, a2a.NewStatusUpdateEvent(info, a2a.TaskStateCompleted, msg)}, true
	case kindError:
		var p protocol.ErrorPayload
		_ = json.Unmarshal(e.body, &p)
		text := p.Message
		if p.Suggestion != "" {
			text += " (" + p.Suggestion + ")"
		}
		return []a2a.Event{a2a.NewStatusUpdateEvent(info, a2a.TaskStateFailed, agentText(info, "the agent answered with an error: "+text))}, true
	case kindDead:
		var reason string
		_ = json.Unmarshal(e.body, &reason)
		text := "the message could not be delivered to the agent (" + reason + ")"
		if reason == "expired" {
			text = "the agent did not pick up the message before it expired (it may be offline); send it again later"
		}
		return []a2a.Event{a2a.NewStatusUpdateEvent(info, a2a.TaskStateFailed, agentText(info, text))}, true
	}
	return nil, false
}

// decodeResult reads payload.result: {text, parts, state}, or a bare string.
// An answer without content still completes the task, with an empty text.
func decodeResult(raw json.RawMessage) (Result, []*a2a.Part) {
	var res Result
	var str string
	if json.Unmarshal(raw, &str) == nil {
		res.Text = str
	} else {
		_ = json.Unmarshal(raw, &res)
	}
	var parts a2a.ContentParts
	if len(res.Parts) > 0 {
		if err := json.Unmarshal(res.Parts, &parts); err != nil {
			parts = nil
			res.Text = strings.TrimSpace(res.Text + "\n\n(unreadable parts: " + err.Error() + ")")
		}
	}
	if res.Text != "" {
		parts = append([]*a2a.Part{a2a.NewTextPart(res.Text)}, parts...)
	}
	if len(parts) == 0 {
		parts = []*a2a.Part{a2a.NewTextPart("")}
	}
	return res, parts
}

func failureText(p protocol.ResponsePayload) string {
	var str string
	if json.Unmarshal(p.Error, &str) == nil && str != "" {
		return str
	}
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(p.Error, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	if res, _ := decodeResult(p.Result); res.Text != "" {
		return res.Text
	}
	return "the agent reported a failure"
}

// onMessage records what the agent sent back for an A2A request. It runs in
// the bus transaction; answers to requests that are not ours (or already
// settled) are accepted and ignored, so an agent's retry never errors.
func (s *Service) onMessage(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
	var reqID, kind string
	var body []byte
	switch env.Type {
	case protocol.TypeResponse:
		p, err := env.Response()
		if err != nil {
			return err
		}
		reqID, kind, body = p.RequestID, kindReply, env.Payload
	case protocol.TypeError:
		p, err := env.ErrorPayload()
		if err != nil {
			return err
		}
		reqID, kind, body = p.RequestID, kindError, env.Payload
	case protocol.TypeNotification:
		// Progress travels on the request's trace.
		err := tx.QueryRow(ctx, `SELECT request_id FROM a2a_requests WHERE trace_id = ? AND agent_id = ? AND applied = ? ORDER BY created_at DESC LIMIT 1`,
			env.TraceID, env.From.Agent, false).Scan(&reqID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		kind, body = kindProgress, env.Payload
	default:
		return nil
	}
	if reqID == "" {
		return nil
	}
	var agentID string
	var applied bool
	err := tx.QueryRow(ctx, `SELECT agent_id, applied FROM a2a_requests WHERE request_id = ?`, reqID).Scan(&agentID, &applied)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && (applied || agentID != env.From.Agent)) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.record(ctx, tx, reqID, kind, body)
}

func (s *Service) record(ctx context.Context, tx *store.Tx, reqID, kind string, body []byte) error {
	now := store.Millis(s.clock.Now())
	if _, err := tx.Exec(ctx, `INSERT INTO a2a_events (request_id, kind, body, created_at) VALUES (?, ?, ?, ?)`, reqID, kind, string(body), now); err != nil {
		return fmt.Errorf("record a2a event: %w", err)
	}
	if kind != kindProgress {
		if _, err := tx.Exec(ctx, `UPDATE a2a_requests SET answered_at = ? WHERE request_id = ? AND answered_at = 0`, now, reqID); err != nil {
			return err
		}
	}
	tx.Notify(eventChannel, reqID)
	return nil
}

// onDead records that a request could not be delivered (expired unanswered
// in an offline agent's inbox, or too many attempts).
func (s *Service) onDead(ctx context.Context, tx *store.Tx, d bus.Delivery, reason string) error {
	env, err := d.Decode()
	if err != nil || env.Type != protocol.TypeRequest {
		return nil
	}
	var applied bool
	err = tx.QueryRow(ctx, `SELECT applied FROM a2a_requests WHERE request_id = ?`, env.ID).Scan(&applied)
	if errors.Is(err, sql.ErrNoRows) || applied {
		return nil
	}
	if err != nil {
		return err
	}
	body, _ := json.Marshal(reason)
	return s.record(ctx, tx, env.ID, kindDead, body)
}
