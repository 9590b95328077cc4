package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/pipeline/ref"
	"github.com/switchboard-hub/switchboard/internal/pipeline/skill"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Event types. Each event is appended to its execution's log with the next
// sequence number and delivered as a bus notification (payload.event = the
// type) to subscribers.
const (
	EventSkillStarted      = "skill:started"       // {skill_id, execution_id}
	EventSkillCompleted    = "skill:completed"     // {skill_id, output, execution_id}
	EventSkillFailed       = "skill:failed"        // {skill_id, error, execution_id}
	EventSkillRetrying     = "skill:retrying"      // {skill_id, execution_id, attempt, error, retry_at}
	EventSkillSkipped      = "skill:skipped"       // {skill_id, execution_id, when}
	EventSkillWaitingInput = "skill:waiting_input" // {skill_id, execution_id, message}
	EventPipelineStarted   = "pipeline:started"    // {execution_id, pipeline}
	EventPipelineCompleted = "pipeline:completed"  // {execution_id, status, results}
	EventPipelineFailed    = "pipeline:failed"     // {execution_id, skill_id, error}
	EventPipelineCancelled = "pipeline:cancelled"  // {execution_id, reason}
)

// Event is one entry of an execution's event log.
type Event struct {
	ExecutionID string          `json:"execution_id"`
	Seq         int64           `json:"seq"`
	Type        string          `json:"type"`
	SkillID     string          `json:"skill_id,omitempty"`
	At          time.Time       `json:"at"`
	Data        json.RawMessage `json:"data"`
}

// Line renders the event in the seed's events.log format:
//
//	2026-01-14T10:00:00Z [skill:started] {"skill_id": "skill-a", "execution_id": "exec-001"}
func (ev Event) Line() string {
	return ev.At.UTC().Format(time.RFC3339) + " [" + ev.Type + "] " + SpacedJSON(ev.Data)
}

// SpacedJSON re-renders JSON with the separators of the seed's log lines
// (", " and ": ", as Python's json.dumps writes them) and no other white
// space. Invalid JSON is returned unchanged.
func SpacedJSON(raw []byte) string {
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return string(raw)
	}
	src := compact.Bytes()
	var b strings.Builder
	b.Grow(len(src) + len(src)/8)
	inString, escaped := false, false
	for _, c := range src {
		b.WriteByte(c)
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// kv and obj build JSON objects whose members keep the order they are
// written in (the seed's event data puts skill_id first).
type kv struct {
	K string
	V any
}

type obj []kv

// MarshalJSON writes the members in order, without HTML escaping.
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := ref.Encode(m.K)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		var v []byte
		switch t := m.V.(type) {
		case json.RawMessage:
			if len(t) == 0 {
				v = []byte("null")
			} else {
				v = t
			}
		default:
			v, err = ref.Encode(t)
			if err != nil {
				return nil, err
			}
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func mustEncode(v any) json.RawMessage {
	b, err := ref.Encode(v)
	if err != nil {
		panic(fmt.Sprintf("pipeline: encode: %v", err)) // plain data built by the engine
	}
	return b
}

// rawOrNull returns stored JSON text as a raw message (null when empty).
func rawOrNull(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("null")
	}
	return json.RawMessage(s)
}

// maxNotifyData bounds the event data carried in a notification; larger
// data (a big output) is replaced by a stub and read from the event log.
const maxNotifyData = 64 << 10

type pendingEvent struct {
	typ, skill string
	data       obj
	extra      []string // recipients beyond the subscribers (approvers)
}

func (r *run) emit(typ, skillID string, data obj, extra ...string) {
	r.events = append(r.events, pendingEvent{typ: typ, skill: skillID, data: data, extra: extra})
}

// flushEvents appends the pending events to the log and notifies subscribers.
func (r *run) flushEvents() error {
	for _, pe := range r.events {
		r.x.EventSeq++
		data := mustEncode(pe.data)
		if _, err := r.tx.Exec(r.ctx, `INSERT INTO pipeline_events (execution_id, seq, type, skill_id, data, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			r.x.ID, r.x.EventSeq, pe.typ, pe.skill, string(data), store.Millis(r.now)); err != nil {
			return fmt.Errorf("pipeline: append event: %w", err)
		}
		to, err := r.recipients(pe.typ, pe.extra)
		if err != nil {
			return err
		}
		if len(to) == 0 || r.e.bus == nil {
			continue
		}
		if len(data) > maxNotifyData {
			data = mustEncode(obj{{"skill_id", pe.skill}, {"execution_id", r.x.ID}, {"truncated", true}})
		}
		msg := fmt.Sprintf("%s in execution %s of pipeline %s", pe.typ, r.x.ID, r.x.PipelineID)
		if pe.skill != "" {
			msg = fmt.Sprintf("%s: skill %s in execution %s of pipeline %s", pe.typ, pe.skill, r.x.ID, r.x.PipelineID)
		}
		payload := mustEncode(obj{{"event", pe.typ}, {"message", msg}, {"data", data}})
		meta := mustEncode(obj{{"executionId", r.x.ID}, {"pipelineId", r.x.PipelineID}, {"seq", r.x.EventSeq}})
		for _, agent := range to {
			env := r.e.envelope(agent, r.x.TraceID, protocol.TypeNotification, payload, meta, r.now, r.e.opts.EventTTL)
			if err := r.e.send(r.ctx, r.tx, env); err != nil {
				// A subscriber the bus refuses (unknown agent, full inbox)
				// must not stop the pipeline; a store error must.
				var perr *protocol.Error
				if !errors.As(err, &perr) {
					return err
				}
				r.e.log.Warn("event notification refused", "to", agent, "event", pe.typ, "execution", r.x.ID, "err", err)
			}
		}
	}
	r.events = nil
	return nil
}

type subRow struct{ agent, event, pipeline, execution string }

func (r *run) recipients(typ string, extra []string) ([]string, error) {
	var out []string
	add := func(a string) {
		for _, x := range out {
			if x == a {
				return
			}
		}
		out = append(out, a)
	}
	for _, id := range r.plan.Order {
		s := r.plan.Steps[id].Skill
		if s.Run.Agent == "" {
			continue
		}
		for _, p := range s.Subscribe {
			if skill.MatchEvent(p, typ) {
				add(s.Run.Agent)
				break
			}
		}
	}
	if r.subs == nil {
		rows, err := r.tx.Query(r.ctx, `SELECT agent_id, event, pipeline_id, execution_id FROM pipeline_subscriptions WHERE owner = ? ORDER BY agent_id, id`, r.x.Owner)
		if err != nil {
			return nil, fmt.Errorf("pipeline: subscriptions: %w", err)
		}
		r.subs = []subRow{}
		for rows.Next() {
			var s subRow
			if err := rows.Scan(&s.agent, &s.event, &s.pipeline, &s.execution); err != nil {
				rows.Close()
				return nil, err
			}
			r.subs = append(r.subs, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	for _, s := range r.subs {
		if skill.MatchEvent(s.event, typ) && (s.pipeline == "" || s.pipeline == r.x.PipelineID) && (s.execution == "" || s.execution == r.x.ID) {
			add(s.agent)
		}
	}
	for _, a := range extra {
		add(a)
	}
	return out, nil
}

// envelope builds a system envelope from SystemAgent.
func (e *Engine) envelope(to, trace string, typ protocol.MessageType, payload, meta json.RawMessage, now time.Time, ttl time.Duration) *protocol.Envelope {
	secs := int((ttl + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	if secs > protocol.MaxTTLSeconds {
		secs = protocol.MaxTTLSeconds
	}
	return &protocol.Envelope{
		Version: protocol.Version, ID: protocol.NewID(protocol.PrefixMessage), TraceID: trace,
		From: protocol.Address{Agent: SystemAgent}, To: protocol.Address{Agent: to},
		Type: typ, Priority: protocol.PriorityNormal, Timestamp: now.UTC(), TTL: secs,
		Payload: payload, Metadata: meta,
	}
}

// send validates and enqueues an envelope. An envelope the engine built
// that does not validate is a bug or an oversized payload; it is refused
// here rather than by the bus.
func (e *Engine) send(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
	if e.bus == nil {
		return protocol.Errorf(protocol.ClassUnavailable, "no_bus", "the pipeline engine has no bus to reach agents")
	}
	if err := env.Validate(); err != nil {
		return err
	}
	return e.bus.Send(ctx, tx, env)
}

// Events returns an execution's events with seq > after, oldest first, at
// most limit (default and maximum 1000). owner "" reads any execution.
func (e *Engine) Events(ctx context.Context, owner, executionID string, after int64, limit int) ([]Event, error) {
	if _, err := e.visible(ctx, owner, executionID); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	rows, err := e.db.Query(ctx, `SELECT seq, type, skill_id, data, created_at FROM pipeline_events WHERE execution_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
		executionID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("pipeline: events: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		ev := Event{ExecutionID: executionID}
		var data string
		var at int64
		if err := rows.Scan(&ev.Seq, &ev.Type, &ev.SkillID, &data, &at); err != nil {
			return nil, err
		}
		ev.Data, ev.At = json.RawMessage(data), store.FromMillis(at)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// EventLog renders all of an execution's events in the seed's events.log
// format, one line each.
func (e *Engine) EventLog(ctx context.Context, owner, executionID string) ([]byte, error) {
	var b bytes.Buffer
	var after int64
	for {
		evs, err := e.Events(ctx, owner, executionID, after, 1000)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			b.WriteString(ev.Line())
			b.WriteByte('\n')
			after = ev.Seq
		}
		if len(evs) < 1000 {
			return b.Bytes(), nil
		}
	}
}

// WaitEvents is Events that waits: when the execution has no events after
// seq after yet and has not finished, it blocks until one is appended, the
// execution finishes, or ctx ends (then it returns no events and no error:
// the caller asks again). It backs `pipeline events --follow`, the live
// progress view and the long-polling events endpoint.
func (e *Engine) WaitEvents(ctx context.Context, owner, executionID string, after int64, limit int) ([]Event, error) {
	ch := e.addWaiter(executionID)
	defer e.removeWaiter(executionID, ch)
	t := time.NewTicker(4 * e.opts.PollInterval)
	defer t.Stop()
	for {
		evs, err := e.Events(ctx, owner, executionID, after, limit)
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		x, err := e.visible(ctx, owner, executionID)
		if err != nil {
			return nil, err
		}
		if x.Status.Terminal() && x.EventSeq <= after {
			return nil, nil
		}
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			return nil, nil
		}
	}
}
