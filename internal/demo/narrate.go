package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Event is one line of the story. With Options.JSON each event is written
// as one JSON object per line, so the demo can be read by programs too.
type Event struct {
	// ElapsedMS is the time since the demo started, in milliseconds.
	ElapsedMS int64 `json:"elapsedMs"`
	// Section is the part of the story (Onboarding, Conversation, …).
	Section string `json:"section"`
	// Kind says what happened: hub, invite, onboarded, world, joined,
	// connected, search, candidates, request, accepted, kickoff,
	// established, opener, turn, like, ending, ended, last_word,
	// report_request, report_silent, report_filed, owner_report,
	// transcript, inbox, world_stats, done.
	Kind string `json:"kind"`
	// Actor is who acted: hub, admin, an agent's name, or "A → B" for a turn.
	Actor string `json:"actor"`
	// Text is the line itself; Details are indented lines under it.
	Text    string   `json:"text"`
	Details []string `json:"details,omitempty"`

	key   string   // marks the event shown, for events that wait on it
	needs []string // keys that must be shown first
}

// narrator prints the story as it happens. Events arrive from the story's
// own goroutine and from the agents' runners; an event that depends on
// another (the hub's "ended" needs the last turn shown, an owner report
// needs its request) waits until that one is printed, so the story reads
// in causal order however the goroutines are scheduled.
type narrator struct {
	w     io.Writer
	color bool
	json  bool
	start time.Time

	mu      sync.Mutex
	section string
	shown   map[string]bool
	pending []Event
	changed chan struct{} // closed and replaced whenever a key is shown
	err     error         // the first write error
	// onError is told about the first write error (the story stops).
	onError func(error)
}

func newNarrator(w io.Writer, color, asJSON bool, start time.Time) *narrator {
	return &narrator{w: w, color: color && !asJSON, json: asJSON, start: start, shown: map[string]bool{}, changed: make(chan struct{})}
}

// emit prints e now, or as soon as the events it needs were printed.
func (n *narrator) emit(e Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.ready(e) {
		n.pending = append(n.pending, e)
		return
	}
	n.print(e)
	n.flushReady()
}

func (n *narrator) ready(e Event) bool {
	for _, k := range e.needs {
		if !n.shown[k] {
			return false
		}
	}
	return true
}

// flushReady prints every pending event whose needs are now met, in the
// order they arrived, until none is left that can go.
func (n *narrator) flushReady() {
	for progress := true; progress; {
		progress = false
		for i, e := range n.pending {
			if n.ready(e) {
				n.pending = slices.Delete(n.pending, i, i+1)
				n.print(e)
				progress = true
				break
			}
		}
	}
}

// flushAll prints whatever is still waiting (the story is over; nothing
// more will arrive), so no line is ever lost.
func (n *narrator) flushAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range n.pending {
		n.print(e)
	}
	n.pending = nil
}

// mark records key as shown without printing anything.
func (n *narrator) mark(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.markLocked(key)
	n.flushReady()
}

func (n *narrator) markLocked(key string) {
	if key == "" || n.shown[key] {
		return
	}
	n.shown[key] = true
	close(n.changed)
	n.changed = make(chan struct{})
}

// seen reports whether key was shown.
func (n *narrator) seen(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.shown[key]
}

// wait blocks until every key was shown, ctx ends, or failed yields an
// error (a runner stopped).
func (n *narrator) wait(ctx context.Context, failed <-chan error, what string, keys ...string) error {
	for {
		n.mu.Lock()
		var missing []string
		for _, k := range keys {
			if !n.shown[k] {
				missing = append(missing, k)
			}
		}
		ch := n.changed
		n.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ch:
		case err := <-failed:
			return fmt.Errorf("waiting for %s: %w", what, err)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s (still missing: %s): %w", what, strings.Join(missing, ", "), context.Cause(ctx))
		}
	}
}

// title prints the story's title line.
func (n *narrator) title(t string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.write(n.paint(bold, t) + "\n\n")
}

// writeErr is the first error writing the story, if any.
func (n *narrator) writeErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// write writes s unless an earlier write failed; call with n.mu held.
func (n *narrator) write(s string) {
	if n.err != nil {
		return
	}
	if _, err := io.WriteString(n.w, s); err != nil {
		n.err = err
		if n.onError != nil {
			n.onError(err)
		}
	}
}

// print writes one event; call with n.mu held.
func (n *narrator) print(e Event) {
	n.markLocked(e.key)
	// The time it is told: a held event is told after its cause.
	e.ElapsedMS = time.Since(n.start).Milliseconds()
	if n.json {
		b, err := json.Marshal(e)
		if err != nil {
			b = []byte(`{"kind":"error","text":"the event could not be encoded"}`)
		}
		n.write(string(b) + "\n")
		return
	}
	var b strings.Builder
	if e.Section != n.section {
		if n.section != "" {
			b.WriteString("\n")
		}
		b.WriteString(n.paint(bold, e.Section) + "\n")
		n.section = e.Section
	}
	at := fmt.Sprintf("%6.2fs", float64(e.ElapsedMS)/1000)
	fmt.Fprintf(&b, "%s  %s  %s\n", n.paint(dim, at), n.actor(e.Actor), n.text(e.Text))
	for _, d := range e.Details {
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat(" ", 7+2+actorWidth+2), n.text(d))
	}
	n.write(b.String())
}

// Terminal styles (ANSI SGR), used only when colour is on.
const (
	reset   = "\x1b[0m"
	bold    = "\x1b[1m"
	dim     = "\x1b[2m"
	red     = "\x1b[31m"
	green   = "\x1b[32m"
	yellow  = "\x1b[33m"
	blue    = "\x1b[34m"
	magenta = "\x1b[35m"
	cyan    = "\x1b[36m"
)

// actorWidth is the width of the actor column ("Mira → Ada" fits).
const actorWidth = 12

var actorColors = map[string]string{"hub": blue, "admin": blue, mira.Name: magenta, tomas.Name: yellow, ada.Name: cyan}

func (n *narrator) paint(style, s string) string {
	if !n.color || s == "" {
		return s
	}
	return style + s + reset
}

// actor pads the actor column and colours each name in it.
func (n *narrator) actor(a string) string {
	pad := actorWidth - len([]rune(a))
	if pad < 0 {
		pad = 0
	}
	if n.color {
		for name, c := range actorColors {
			a = strings.ReplaceAll(a, name, c+bold+name+reset)
		}
	}
	return a + strings.Repeat(" ", pad)
}

// text highlights the conversation tokens in a line.
func (n *narrator) text(s string) string {
	if !n.color {
		return s
	}
	s = strings.ReplaceAll(s, "[[like]]", green+bold+"[[like]]"+reset)
	return strings.ReplaceAll(s, "[[request_conversation_end]]", red+bold+"[[request_conversation_end]]"+reset)
}
