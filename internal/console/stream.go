package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// stream serves a page's live region as Server-Sent Events: an "update"
// event with the re-rendered HTML whenever it changed, checked once a
// PollInterval. It ends with an "end" event when the session ends
// (sign-out, expiry) and silently when the console shuts down or the
// browser goes away. Data is HTML escaped by the page's template.
func (c *Console) stream(w http.ResponseWriter, r *http.Request, name string, load loader) {
	if c.ctx.Err() != nil {
		http.Error(w, "the console is shutting down", http.StatusServiceUnavailable)
		return
	}
	v, err := c.session(r.Context(), r)
	if err != nil || v == nil {
		// EventSource gives up on a non-200 answer: the page keeps what it shows.
		http.Error(w, "sign in again", http.StatusUnauthorized)
		return
	}
	// The first load answers for the stream as the page would: an id the
	// viewer may not see is a 404 here too.
	first, err := load(r.Context(), v, r)
	if err != nil {
		pe := protocol.AsError(err)
		http.Error(w, pe.Message, pe.HTTPStatus())
		return
	}
	rc := http.NewResponseController(w)
	c.streams.Add(1)
	c.active.Add(1)
	defer func() {
		c.active.Add(-1)
		c.streams.Done()
	}()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 3000\n\n")
	if err := rc.Flush(); err != nil {
		return
	}
	t := time.NewTicker(c.d.PollInterval)
	defer t.Stop()
	var last string
	keepAlive := time.Now()
	for {
		// The session may have ended since the last tick.
		cur, err := c.sessionByHash(ctx, v.idHash)
		if ctx.Err() != nil {
			return
		}
		if err == nil && cur == nil {
			fmt.Fprint(w, "event: end\ndata: signed out\n\n")
			rc.Flush()
			return
		}
		if err != nil {
			// A passing store error: try again at the next tick.
			c.d.Log.Warn("console: session check failed", "err", err)
		}
		data, err := first, error(nil)
		if first != nil {
			first = nil
		} else {
			data, err = load(ctx, v, r)
		}
		if ctx.Err() != nil {
			return
		}
		var html string
		if err == nil {
			html, err = c.renderLive(name, v, data)
		}
		if err != nil {
			c.d.Log.Warn("console: live update failed", "page", name, "err", err)
		} else if html != last {
			last = html
			if writeEvent(w, "update", html) != nil || rc.Flush() != nil {
				return
			}
			keepAlive = time.Now()
		} else if time.Since(keepAlive) > 15*time.Second {
			// A comment keeps proxies from closing an idle stream.
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			keepAlive = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// writeEvent writes one SSE event; every line of data gets its own data:
// field (the browser joins them with newlines).
func writeEvent(w http.ResponseWriter, event, data string) error {
	var b strings.Builder
	b.WriteString("event: " + event + "\n")
	for _, line := range strings.Split(strings.ReplaceAll(data, "\r", ""), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	_, err := w.Write([]byte(b.String()))
	return err
}
