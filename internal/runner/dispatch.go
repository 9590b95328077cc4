package runner

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/client"
)

// job is one delivery waiting in its session's queue. When the delivery
// was answered before (a redelivery after a lost confirmation), cached
// holds that answer and the driver is not asked again.
type job struct {
	d      Delivery
	cached *answer
}

// sessionQueue serializes the deliveries of one session.
type sessionQueue struct {
	key     string
	jobs    []job
	running bool
}

// dispatch takes a delivery in hand: it ignores one already in hand, and
// queues the rest behind their session's earlier deliveries.
func (r *runner) dispatch(c *conn, d Delivery) {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return
	}
	busy := r.inflight[d.DeliveryID]
	j := job{d: d}
	if a, ok := r.done.get(d.DeliveryID); ok {
		j.cached = &a
	}
	r.inflight[d.DeliveryID] = true
	r.mu.Unlock()

	// "accepted" tells the hub (on this connection, which may be a new
	// one) that the runtime has the turn. It is written before the job is
	// queued so it precedes the answer, and skipped when the answer is
	// already produced and on its way. A lost frame is harmless.
	if j.cached == nil {
		err := c.write(r.driverCtx, clientFrame{Type: "accepted", DeliveryID: d.DeliveryID, SessionKey: d.SessionKey,
			Payload: map[string]string{"source": r.cfg.Source}})
		if err != nil {
			r.log.Debug("could not send accepted", "deliveryId", d.DeliveryID, "err", err)
		}
	}
	switch {
	case busy:
		r.log.Info("delivery arrived again while in hand; it will be answered once", "deliveryId", d.DeliveryID, "session", d.SessionKey)
		r.emit(Event{Kind: EventDuplicate, DeliveryID: d.DeliveryID, SessionKey: d.SessionKey})
	case j.cached != nil:
		r.log.Info("delivery arrived again after it was answered; sending the same answer again",
			"deliveryId", d.DeliveryID, "session", d.SessionKey)
	default:
		r.log.Info("delivery", "deliveryId", d.DeliveryID, "session", d.SessionKey, "type", d.Metadata.DeliveryType,
			"from", d.Metadata.FromDisplayIdentity, "baseline", d.Baseline(), "text", truncate(d.Payload.Text, 160))
		r.emit(Event{Kind: EventDelivery, DeliveryID: d.DeliveryID, SessionKey: d.SessionKey, Text: d.Payload.Text, Delivery: &d})
	}
	if busy {
		return
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		delete(r.inflight, d.DeliveryID)
		return
	}
	s := r.sessions[d.SessionKey]
	if s == nil {
		s = &sessionQueue{key: d.SessionKey}
		r.sessions[d.SessionKey] = s
	}
	s.jobs = append(s.jobs, j)
	if !s.running {
		s.running = true
		r.workers.Add(1)
		go r.work(s)
	}
}

// work answers a session's deliveries one by one until its queue is empty.
func (r *runner) work(s *sessionQueue) {
	defer r.workers.Done()
	for {
		r.mu.Lock()
		if len(s.jobs) == 0 {
			s.running = false
			delete(r.sessions, s.key)
			r.mu.Unlock()
			return
		}
		j := s.jobs[0]
		s.jobs = s.jobs[1:]
		r.mu.Unlock()
		r.handle(j)
	}
}

// handle produces (or reuses) the answer of one delivery and delivers it.
func (r *runner) handle(j job) {
	d := j.d
	// Released exactly once, before the outcome is reported, so a
	// redelivery that arrives after the report is taken in hand again.
	release := sync.OnceFunc(func() { r.release(d.DeliveryID) })
	defer release()
	var a answer
	if j.cached != nil {
		a = *j.cached
	} else {
		if d.ReplyAllowed() {
			text, err := r.callDriver(d)
			if err == nil && strings.TrimSpace(text) == "" {
				err = errors.New("the driver returned an empty reply (answer NO_REPLY to keep silent)")
			}
			if err != nil {
				release()
				if r.driverCtx.Err() != nil {
					r.log.Info("stopped before answering; the hub will redeliver", "deliveryId", d.DeliveryID)
				} else {
					r.log.Error("driver failed; the delivery stays unanswered and the hub will redeliver it",
						"deliveryId", d.DeliveryID, "session", d.SessionKey, "err", err)
				}
				r.emit(Event{Kind: EventDriverFailed, DeliveryID: d.DeliveryID, SessionKey: d.SessionKey, Err: err})
				return
			}
			if isNoReply(text) {
				a = answer{reason: ReasonNoReply}
			} else {
				a = answer{text: strings.TrimSpace(text)}
			}
		} else {
			a = answer{reason: ReasonReplyNotAllowed}
		}
		r.done.put(d.DeliveryID, a)
	}
	r.deliver(d, a, release)
}

// release marks a delivery as no longer in hand, so a later redelivery is
// taken in hand again (and answered from the cache when it was answered).
func (r *runner) release(id string) {
	r.mu.Lock()
	delete(r.inflight, id)
	r.mu.Unlock()
}

// callDriver runs the driver within the concurrency bound, turning a panic
// into an error so one bad turn cannot stop the runner.
func (r *runner) callDriver(d Delivery) (text string, err error) {
	ctx := r.driverCtx
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-r.sem }()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("driver panicked: %v", p)
		}
	}()
	return r.cfg.Driver.Reply(ctx, d)
}

// deliver sends an answer until the hub confirms it, says it was already
// answered, or refuses it; transport failures fall back to HTTP and are
// retried with backoff until the shutdown grace ends.
func (r *runner) deliver(d Delivery, a answer, release func()) {
	ctx := r.answerCtx
	backoff := r.cfg.MinBackoff
	for {
		c, up := r.current()
		via := "socket"
		var err error
		if c != nil {
			err = c.answer(ctx, d, a, r.cfg.Source, r.cfg.AnswerTimeout)
			var he *HubError
			if err != nil && !errors.As(err, &he) && ctx.Err() == nil {
				r.log.Warn("socket answer failed; posting it over HTTP", "deliveryId", d.DeliveryID, "err", err)
				via, err = "http", r.answerHTTP(ctx, d, a)
			}
		} else {
			via, err = "http", r.answerHTTP(ctx, d, a)
		}
		var he *HubError
		if err == nil || errors.As(err, &he) {
			release()
		}
		switch {
		case err == nil:
			if a.silent() {
				r.log.Info("kept silent", "deliveryId", d.DeliveryID, "session", d.SessionKey, "reason", a.reason, "via", via)
			} else {
				r.log.Info("replied", "deliveryId", d.DeliveryID, "session", d.SessionKey, "via", via, "text", truncate(a.text, 160))
			}
			r.emit(Event{Kind: EventAnswered, DeliveryID: d.DeliveryID, SessionKey: d.SessionKey, Text: a.text, Reason: a.reason, Via: via})
			return
		case errors.As(err, &he) && he.Code == codeNotReplyable:
			r.log.Info("delivery was already answered; nothing to do", "deliveryId", d.DeliveryID, "via", via)
			r.emit(Event{Kind: EventAlreadyAnswered, DeliveryID: d.DeliveryID, SessionKey: d.SessionKey, Via: via})
			return
		case errors.As(err, &he):
			// The hub will redeliver after the lease; ask the driver again
			// then rather than repeating a refused answer.
			r.done.remove(d.DeliveryID)
			r.log.Error("the hub refused the answer", "deliveryId", d.DeliveryID, "session", d.SessionKey, "code", he.Code, "message", he.Message, "via", via)
			r.emit(Event{Kind: EventRefused, DeliveryID: d.DeliveryID, SessionKey: d.SessionKey, Via: via, Err: err})
			return
		}
		if ctx.Err() != nil {
			r.log.Error("stopping before the hub confirmed the answer; it will redeliver the turn", "deliveryId", d.DeliveryID, "err", err)
			return
		}
		wait := jitter(backoff)
		r.log.Warn("could not deliver the answer; retrying", "deliveryId", d.DeliveryID, "err", err, "in", wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		case <-up: // a connection came up: try it now
		}
		backoff = min(backoff*2, r.cfg.MaxBackoff)
	}
}

// answerHTTP posts an answer to the HTTP fallback. A 4xx comes back as a
// *HubError (final); transport errors and 5xx are plain errors (retry).
func (r *runner) answerHTTP(ctx context.Context, d Delivery, a answer) error {
	from := d.TargetAgentID
	if from == "" {
		r.mu.Lock()
		from = r.agentID
		r.mu.Unlock()
	}
	if from == "" {
		from = r.cfg.AgentID
	}
	path := "/v1/runtime-deliveries/" + url.PathEscape(d.DeliveryID)
	var body any
	if a.silent() {
		path += "/kept-silent"
		body = map[string]any{"fromAgentId": from, "reason": a.reason, "source": r.cfg.Source}
	} else {
		path += "/reply"
		body = map[string]any{"fromAgentId": from, "payload": map[string]string{"text": a.text, "source": r.cfg.Source}}
	}
	err := r.hub.Do(ctx, http.MethodPost, path, nil, body, nil)
	if st := client.Status(err); st >= 400 && st < 500 && st != http.StatusRequestTimeout && st != http.StatusTooManyRequests {
		var ce *client.Error
		errors.As(err, &ce)
		code := client.Code(err)
		if code == "" {
			code = fmt.Sprintf("http_%d", st)
		}
		msg := ce.Body.Message
		if msg == "" && ce.Body.Reason != code {
			msg = ce.Body.Reason
		}
		return &HubError{Code: code, Message: msg}
	}
	return err
}

// answerCache remembers recent answers by delivery id (least recently
// used first out), so a redelivery is answered without the driver.
type answerCache struct {
	mu    sync.Mutex
	cap   int
	order *list.List // of string ids, most recent at the front
	items map[string]*list.Element
	vals  map[string]answer
}

func newAnswerCache(n int) *answerCache {
	return &answerCache{cap: n, order: list.New(), items: map[string]*list.Element{}, vals: map[string]answer{}}
}

func (c *answerCache) get(id string) (answer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.vals[id]
	if ok {
		c.order.MoveToFront(c.items[id])
	}
	return a, ok
}

func (c *answerCache) put(id string, a answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[id]; ok {
		c.order.MoveToFront(e)
	} else {
		c.items[id] = c.order.PushFront(id)
	}
	c.vals[id] = a
	for c.order.Len() > c.cap {
		e := c.order.Back()
		id := e.Value.(string)
		c.order.Remove(e)
		delete(c.items, id)
		delete(c.vals, id)
	}
}

func (c *answerCache) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[id]; ok {
		c.order.Remove(e)
		delete(c.items, id)
		delete(c.vals, id)
	}
}
