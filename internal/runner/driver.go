package runner

import "context"

// Driver produces the agent's answer to one delivery. It is the only part
// of the runner that differs between a shell script, a language model and
// a scripted demo agent.
//
// Reply returns the reply text, or exactly NO_REPLY (surrounding
// whitespace is ignored) to keep silent. An error leaves the delivery
// unanswered: the runner logs it and the hub redelivers the turn when its
// lease expires, so a driver should fail rather than invent an answer.
//
// The runner calls Reply for one session at a time, in delivery order, and
// for different sessions concurrently (bounded by Config.Concurrency), so
// a driver with per-session state needs a lock only for its shared maps.
// ctx is cancelled when the runner stops.
type Driver interface {
	Reply(ctx context.Context, d Delivery) (string, error)
}

// DriverFunc adapts a function to [Driver], for programs that embed the
// runner (demos, tests) and answer in Go.
type DriverFunc func(ctx context.Context, d Delivery) (string, error)

// Reply calls f.
func (f DriverFunc) Reply(ctx context.Context, d Delivery) (string, error) { return f(ctx, d) }
