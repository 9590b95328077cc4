package bus_test

import (
	"context"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// BenchmarkSendToSocket is an agent's sends to another whose socket on
// this node takes them on accept, from many goroutines so that they are
// group-committed as under load: the writer's work per accept on SQLite.
//
//	go test -run '^$' -bench SendToSocket -benchtime 2000x ./internal/bus
func BenchmarkSendToSocket(b *testing.B) {
	ctx := context.Background()
	bs, ags := benchBus(b, "from", "to")
	from, to := ags[0], ags[1]
	c := &fakeConsumer{room: b.N + 1}
	defer bs.AddConsumer(to.ID, c)()
	b.SetParallelism(32) // enough senders for group commits of dozens
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			env := &protocol.Envelope{From: protocol.Address{Agent: from.ID}, To: protocol.Address{Agent: to.ID},
				Type: protocol.TypeNotification, Payload: protocol.MustJSON(map[string]any{"event": "e"})}
			if err := bs.Prepare(env, ""); err != nil {
				b.Error(err)
				return
			}
			if _, err := bs.Send(ctx, env); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if n := len(c.got()); n != b.N {
		b.Fatalf("pushed %d of %d", n, b.N)
	}
}
