package a2a

import (
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/store"
)

// Run applies, until ctx ends, the answers and deadlines of requests whose
// execution is gone (the hub restarted while the agent was working or
// offline), so the caller still sees the task complete or fail.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("a2a: sweep", "err", err)
			}
		}
	}
}

// Sweep runs one pass of Run and returns how many tasks it settled.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	cutoff := store.Millis(s.clock.Now().Add(-s.cfg.OrphanGrace))
	rows, err := s.db.Query(ctx, `SELECT request_id, agent_id, task_id FROM a2a_requests
		WHERE applied = ? AND ((answered_at > 0 AND answered_at <= ?) OR deadline_at <= ?) ORDER BY created_at LIMIT 100`, false, cutoff, cutoff)
	if err != nil {
		return 0, err
	}
	type open struct{ req, agent, task string }
	var todo []open
	for rows.Next() {
		var o open
		if err := rows.Scan(&o.req, &o.agent, &o.task); err != nil {
			rows.Close()
			return 0, err
		}
		todo = append(todo, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, o := range todo {
		s.wmu.Lock()
		_, live := s.waiters[o.req]
		s.wmu.Unlock()
		if live {
			continue
		}
		if err := s.settle(ctx, o.req, o.agent, a2a.TaskID(o.task)); err != nil {
			s.log.Warn("a2a: settle orphaned request", "request", o.req, "err", err)
			continue
		}
		n++
	}
	return n, nil
}

// settle applies a request's recorded answer (or its expiry) to its task.
func (s *Service) settle(ctx context.Context, reqID, agentID string, taskID a2a.TaskID) error {
	evs, err := s.eventsAfter(ctx, reqID, 0)
	if err != nil {
		return err
	}
	ts := NewTaskStore(s.db, s.clock, agentID)
	var settled []a2a.Event
	err = ts.finish(ctx, taskID, func(t *a2a.Task) {
		info := t.TaskInfo()
		var out []a2a.Event
		final := false
		for _, e := range evs {
			var fin bool
			out, fin = translate(info, e)
			if fin {
				final = true
				break
			}
		}
		if !final {
			out = []a2a.Event{a2a.NewStatusUpdateEvent(info, a2a.TaskStateFailed, agentText(info, timeoutText(s.cfg.Wait)))}
		}
		settled = out
		for _, ev := range out {
			switch ev := ev.(type) {
			case *a2a.TaskArtifactUpdateEvent:
				t.Artifacts = append(t.Artifacts, ev.Artifact)
			case *a2a.TaskStatusUpdateEvent:
				t.Status = ev.Status
			}
		}
	})
	if err != nil && err != a2a.ErrTaskNotFound {
		return err
	}
	s.markApplied(ctx, reqID)
	if err == nil {
		s.pushSettled(ctx, agentID, taskID, settled)
	}
	return nil
}

// pushSettled sends the events that settled a task to the task's webhooks,
// as its live execution would have: a caller that registered a webhook
// hears of the answer even when it arrived after a restart.
func (s *Service) pushSettled(ctx context.Context, agentID string, taskID a2a.TaskID, events []a2a.Event) {
	if len(events) == 0 {
		return
	}
	configs, err := NewPushStore(s.db, s.clock, agentID, s.cfg.AllowPrivatePush).List(ctx, taskID)
	if err != nil {
		s.log.Warn("a2a: push configs of a settled task", "task", taskID, "err", err)
		return
	}
	for _, c := range configs {
		for _, ev := range events {
			if err := s.push.SendPush(ctx, c, ev); err != nil {
				s.log.Warn("a2a: push a settled task", "task", taskID, "config", c.ID, "err", err)
			}
		}
	}
}
