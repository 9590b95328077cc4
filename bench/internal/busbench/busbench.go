// Package busbench runs one message-bus workload against Switchboard and,
// side by side, against NATS JetStream and Redis Streams, so the numbers in
// BENCHMARKS.md come from the same clients, the same machine and the same
// minute.
//
// The workload is the lifecycle of a durable agent message:
//
//	producer sends → broker durably accepts (fsync) and confirms
//	→ broker pushes the message over a socket to the recipient agent
//	→ recipient acknowledges → broker confirms the ack
//
// Every agent is both a producer and a consumer: agent i sends to agent
// (i+1) mod N. Each message carries its send time, so the consumer measures
// send→delivery latency without clock coordination (one process).
package busbench

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"
)

// Handler is how a System reports what happens to each message. Both
// callbacks may run concurrently from many goroutines and must not block.
type Handler struct {
	// Delivered runs when a message reaches its consumer, before the ack.
	Delivered func(msg []byte)
	// Acked runs when the broker has confirmed the consumer's ack: the
	// lifecycle is complete.
	Acked func(msg []byte)
	// Failed reports an error outside a Send call (a failed ack, a broken
	// consumer); the run counts them and prints the first.
	Failed func(err error)
}

// A System is one broker under test: it starts a fresh server, connects the
// agents and runs their consumers, and sends on behalf of an agent.
type System interface {
	// Name is the row label ("switchboard", "jetstream", "redis").
	Name() string
	// Store describes the durability setting ("sqlite", "postgres",
	// "file, sync always", "aof, appendfsync always").
	Store() string
	// Start brings up a fresh server on loopback with n connected agents
	// whose consumers report to h and ack every delivery. With a nil
	// h.Delivered the agents only send (no consumers).
	Start(ctx context.Context, n int, h Handler) error
	// Send makes agent from send body to agent to and returns once the
	// broker has confirmed that the message is durable.
	Send(ctx context.Context, from, to int, body Stamp) error
	// Notes are extra facts for the report (group-commit batches, ...),
	// collected after a run and before Close.
	Notes() string
	// Close stops the consumers and the server and removes its data.
	Close() error
}

// Stamp identifies one message and the moment it was (meant to be) sent.
type Stamp struct {
	Seq  uint64
	Sent time.Time
}

// Body renders the message body: a JSON object carrying the stamp, padded
// with a message string to exactly size bytes (or as small as possible when
// size is too small to hold the stamp). It doubles as a notification
// payload for Switchboard ({"event","message"}).
func (s Stamp) Body(size int) []byte {
	head := `{"event":"bench","seq":` + strconv.FormatUint(s.Seq, 10) + `,"sent":` + strconv.FormatInt(s.Sent.UnixNano(), 10) + `,"message":"`
	const tail = `"}`
	pad := size - len(head) - len(tail)
	if pad < 0 {
		pad = 0
	}
	b := make([]byte, 0, len(head)+pad+len(tail))
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte{'x'}, pad)...)
	b = append(b, tail...)
	return b
}

var (
	seqKey  = []byte(`"seq":`)
	sentKey = []byte(`"sent":`)
)

// ParseStamp finds the stamp in a received message: a body, or a whole
// Switchboard envelope that contains the body as its payload. It scans
// rather than decodes, so every system pays the same small cost.
func ParseStamp(msg []byte) (Stamp, error) {
	seq, err := intAfter(msg, seqKey)
	if err != nil {
		return Stamp{}, err
	}
	sent, err := intAfter(msg, sentKey)
	if err != nil {
		return Stamp{}, err
	}
	return Stamp{Seq: uint64(seq), Sent: time.Unix(0, sent)}, nil
}

func intAfter(msg, key []byte) (int64, error) {
	i := bytes.Index(msg, key)
	if i < 0 {
		return 0, fmt.Errorf("message has no %s field", key)
	}
	rest := msg[i+len(key):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	return strconv.ParseInt(string(rest[:j]), 10, 64)
}
