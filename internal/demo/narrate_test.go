package demo

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// An event that needs another waits for it, however the goroutines that
// report them are scheduled; the rest print at once, in arrival order.
func TestNarratorHoldsEventsUntilTheirCause(t *testing.T) {
	var out bytes.Buffer
	n := newNarrator(&out, false, false, time.Now())
	n.emit(Event{Section: "S", Actor: "hub", Text: "ended", key: "ended", needs: []string{"turn:2"}})
	n.emit(Event{Section: "S", Actor: "hub", Text: "report", needs: []string{"ended"}})
	n.emit(Event{Section: "S", Actor: "Ada → Mira", Text: "one", key: "turn:1"})
	if strings.Contains(out.String(), "ended") {
		t.Fatalf("printed before its cause:\n%s", out.String())
	}
	n.emit(Event{Section: "S", Actor: "Mira → Ada", Text: "two", key: "turn:2"})
	inOrder(t, out.String(), "one", "two", "ended", "report")

	n.emit(Event{Section: "T", Actor: "hub", Text: "orphan", needs: []string{"never"}})
	if strings.Contains(out.String(), "orphan") {
		t.Fatal("printed an event whose cause never came")
	}
	n.flushAll()
	inOrder(t, out.String(), "report", "\nT\n", "orphan")
}

func TestNarratorWait(t *testing.T) {
	n := newNarrator(&bytes.Buffer{}, false, false, time.Now())
	done := make(chan error, 1)
	go func() { done <- n.wait(context.Background(), nil, "a and b", "a", "b") }()
	n.mark("a")
	n.emit(Event{Section: "S", Actor: "x", Text: "b", key: "b"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	failed := make(chan error, 1)
	failed <- errors.New("runner stopped")
	if err := n.wait(context.Background(), failed, "c", "c"); err == nil || !strings.Contains(err.Error(), "waiting for c: runner stopped") {
		t.Fatalf("wait with a failed runner: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.wait(ctx, nil, "c", "c", "a"); err == nil || !strings.Contains(err.Error(), "still missing: c") {
		t.Fatalf("wait after cancel: %v", err)
	}
}

func TestNarratorLayoutAndColour(t *testing.T) {
	ev := Event{Section: "Conversation", Actor: "Mira → Ada", Text: "Deal [[request_conversation_end]] [[like]]", Details: []string{"more"}}
	var plain bytes.Buffer
	n := newNarrator(&plain, false, false, time.Now())
	n.emit(ev)
	lines := strings.Split(plain.String(), "\n")
	if lines[0] != "Conversation" || !strings.HasPrefix(lines[1], "  0.0") ||
		!strings.HasSuffix(lines[1], "s  Mira → Ada    Deal [[request_conversation_end]] [[like]]") ||
		lines[2] != strings.Repeat(" ", 23)+"more" {
		t.Fatalf("plain layout:\n%s", plain.String())
	}

	var col bytes.Buffer
	n = newNarrator(&col, true, false, time.Now())
	n.emit(ev)
	for _, want := range []string{bold + "Conversation" + reset, magenta + bold + "Mira" + reset, cyan + bold + "Ada" + reset,
		red + bold + "[[request_conversation_end]]" + reset, green + bold + "[[like]]" + reset} {
		if !strings.Contains(col.String(), want) {
			t.Fatalf("colour output lacks %q:\n%q", want, col.String())
		}
	}
	if !strings.Contains(col.String(), reset+"    Deal") {
		t.Fatalf("the actor column is padded by its visible width: %q", col.String())
	}
}
