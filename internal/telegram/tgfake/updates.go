package tgfake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// update is one queued Update, frozen as JSON when the event happened.
type update struct {
	id        int64
	kind      string // message, business_message, callback_query
	body      json.RawMessage
	forced    bool // an injected duplicate: delivered once regardless of offset
	delivered bool
}

// defaultExcluded are the update kinds Telegram leaves out unless asked.
var defaultExcluded = []string{"chat_member", "message_reaction", "message_reaction_count"}

func (b *Bot) enqueueLocked(kind string, u wUpdate) {
	b.nextUpdate++
	u.UpdateID = b.nextUpdate
	body, err := json.Marshal(u)
	if err != nil {
		panic("tgfake: marshal update: " + err.Error())
	}
	up := &update{id: u.UpdateID, kind: kind, body: body}
	b.history[up.id] = up
	if !b.allowsLocked(kind) {
		return
	}
	b.queue = append(b.queue, up)
	b.signalLocked()
}

func (b *Bot) allowsLocked(kind string) bool {
	if len(b.allowed) == 0 {
		return !slices.Contains(defaultExcluded, kind)
	}
	return slices.Contains(b.allowed, kind)
}

// pollWaiter is the getUpdates request currently waiting; a newer request
// terminates it with 409, as on Telegram.
type pollWaiter struct {
	terminated chan struct{}
}

func (b *Bot) getUpdates(ctx context.Context, p params) ([]json.RawMessage, *apiError) {
	offset, err := p.int64("offset")
	if err != nil {
		return nil, err
	}
	limit, err := p.int64("limit")
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, err := p.int64("timeout")
	if err != nil {
		return nil, err
	}
	allowed, hasAllowed, err := p.stringList("allowed_updates")
	if err != nil {
		return nil, err
	}

	b.s.mu.Lock()
	if b.hook != nil {
		b.s.mu.Unlock()
		return nil, &apiError{code: http.StatusConflict, desc: descWebhookActive}
	}
	if b.poll != nil {
		close(b.poll.terminated)
	}
	me := &pollWaiter{terminated: make(chan struct{})}
	b.poll = me
	if hasAllowed {
		b.allowed = allowed
	}
	b.confirmLocked(offset)
	b.signalLocked()
	b.s.mu.Unlock()

	defer func() {
		b.s.mu.Lock()
		if b.poll == me {
			b.poll = nil
		}
		b.s.mu.Unlock()
	}()

	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	for {
		b.s.mu.Lock()
		if b.hook != nil {
			b.s.mu.Unlock()
			return []json.RawMessage{}, nil
		}
		out := b.takeLocked(int(limit))
		ch := b.notify
		b.s.mu.Unlock()
		if len(out) > 0 || timeout <= 0 {
			return out, nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return []json.RawMessage{}, nil
		case <-me.terminated:
			return nil, &apiError{code: http.StatusConflict, desc: descTerminated}
		case <-ctx.Done():
			return nil, &apiError{code: http.StatusGatewayTimeout, desc: "Gateway Timeout"}
		case <-b.s.closed:
			return []json.RawMessage{}, nil
		}
	}
}

// confirmLocked applies getUpdates' offset: updates below a positive offset
// are confirmed and forgotten; a negative offset keeps only the last -offset
// updates. Injected duplicates survive until delivered once.
func (b *Bot) confirmLocked(offset int64) {
	switch {
	case offset > 0:
		kept := b.queue[:0]
		for _, u := range b.queue {
			if u.id >= offset || (u.forced && !u.delivered) {
				kept = append(kept, u)
			}
		}
		b.queue = kept
	case offset < 0:
		if n := int(-offset); n < len(b.queue) {
			b.queue = append([]*update(nil), b.queue[len(b.queue)-n:]...)
		}
	}
	// a forced copy that was delivered is confirmed by any later call
	kept := b.queue[:0]
	for _, u := range b.queue {
		if !(u.forced && u.delivered) {
			kept = append(kept, u)
		}
	}
	b.queue = kept
}

func (b *Bot) takeLocked(limit int) []json.RawMessage {
	out := []json.RawMessage{}
	for _, u := range b.queue {
		if len(out) == limit {
			break
		}
		out = append(out, u.body)
		u.delivered = true
	}
	return out
}

// --- webhooks -----------------------------------------------------------

type webhook struct {
	url       string
	secret    string
	maxConn   int
	lastErrAt time.Time
	lastErr   string
	stop      chan struct{}
}

func validSecret(s string) bool {
	if len(s) < 1 || len(s) > 256 {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

func (b *Bot) setWebhook(p params) (string, *apiError) {
	raw := p.str("url")
	if raw == "" {
		return b.deleteWebhook(p)
	}
	u, perr := url.Parse(raw)
	if perr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", errBadRequest("bad webhook: An HTTPS URL must be provided for webhook")
	}
	secret := p.str("secret_token")
	if p.has("secret_token") && !validSecret(secret) {
		return "", errBadRequest(descSecretToken)
	}
	allowed, hasAllowed, err := p.stringList("allowed_updates")
	if err != nil {
		return "", err
	}
	drop, err := p.bool("drop_pending_updates")
	if err != nil {
		return "", err
	}
	maxConn, err := p.int64("max_connections")
	if err != nil {
		return "", err
	}
	if maxConn == 0 {
		maxConn = 40
	}

	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if drop {
		b.queue = nil
	}
	if hasAllowed {
		b.allowed = allowed
	}
	if h := b.hook; h != nil {
		same := h.url == raw && h.secret == secret
		h.url, h.secret, h.maxConn = raw, secret, int(maxConn)
		b.signalLocked()
		if same {
			return "Webhook is already set", nil
		}
		return "Webhook was set", nil
	}
	h := &webhook{url: raw, secret: secret, maxConn: int(maxConn), stop: make(chan struct{})}
	b.hook = h
	b.s.workers.Add(1)
	go b.deliver(h)
	b.signalLocked()
	return "Webhook was set", nil
}

func (b *Bot) deleteWebhook(p params) (string, *apiError) {
	drop, err := p.bool("drop_pending_updates")
	if err != nil {
		return "", err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if drop {
		b.queue = nil
	}
	if b.hook == nil {
		return "Webhook is already deleted", nil
	}
	close(b.hook.stop)
	b.hook = nil
	b.signalLocked()
	return "Webhook was deleted", nil
}

func (b *Bot) webhookInfo() wWebhookInfo {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	info := wWebhookInfo{PendingUpdateCount: len(b.queue)}
	if h := b.hook; h != nil {
		info.URL = h.url
		info.MaxConnections = h.maxConn
		info.AllowedUpdates = b.allowed
		if !h.lastErrAt.IsZero() {
			info.LastErrorDate = h.lastErrAt.Unix()
			info.LastErrorMessage = h.lastErr
		}
	}
	return info
}

// deliver POSTs queued updates to the webhook one at a time, in order,
// retrying each on failure up to the server's attempt bound.
func (b *Bot) deliver(h *webhook) {
	defer b.s.workers.Done()
	for {
		b.s.mu.Lock()
		var next *update
		if len(b.queue) > 0 {
			next = b.queue[0]
		}
		target, secret, ch := h.url, h.secret, b.notify
		b.s.mu.Unlock()
		if next == nil {
			select {
			case <-ch:
				continue
			case <-h.stop:
				return
			case <-b.s.closed:
				return
			}
		}
		ok := false
		for attempt := 1; attempt <= b.s.hookAttempts && !ok; attempt++ {
			if attempt > 1 {
				select {
				case <-time.After(b.s.hookRetryDelay):
				case <-h.stop:
					return
				case <-b.s.closed:
					return
				}
			}
			status, errText := b.post(target, secret, next.body)
			ok = status >= 200 && status < 300
			b.s.mu.Lock()
			b.deliveries = append(b.deliveries, Delivery{UpdateID: next.id, Attempt: attempt, Status: status, Err: errText})
			if !ok {
				h.lastErrAt = b.now()
				if errText != "" {
					h.lastErr = "Connection refused"
				} else {
					h.lastErr = fmt.Sprintf("Wrong response from the webhook: %d %s", status, http.StatusText(status))
				}
			}
			b.signalLocked()
			b.s.mu.Unlock()
		}
		// delivered or given up on: either way it leaves the queue
		b.s.mu.Lock()
		if i := slices.Index(b.queue, next); i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
		}
		b.signalLocked()
		b.s.mu.Unlock()
	}
}

func (b *Bot) post(target, secret string, body []byte) (int, string) {
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	resp, err := b.s.hookClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	_ = resp.Body.Close()
	return resp.StatusCode, ""
}
