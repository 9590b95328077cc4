package bus_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// BenchmarkClaimBesideBacklog claims one fresh delivery of an agent while
// another agent's inbox holds a backlog: the claim must read only its own
// agent's deliveries, so its cost must not grow with the backlog.
//
//	go test -run '^$' -bench ClaimBesideBacklog ./internal/bus
func BenchmarkClaimBesideBacklog(b *testing.B) {
	ctx := context.Background()
	bs, ags := benchBus(b, "busy", "idle")
	busy, idle := ags[0], ags[1]
	send := func(to string) {
		env := &protocol.Envelope{From: protocol.Address{Agent: "system:bench"}, To: protocol.Address{Agent: to},
			Type: protocol.TypeNotification, Payload: protocol.MustJSON(map[string]any{"event": "e"})}
		if _, err := bs.SendSystem(ctx, env); err != nil {
			b.Fatal(err)
		}
	}
	const backlog, writers = 5000, 50
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < backlog/writers; i++ {
				send(busy.ID)
			}
		}()
	}
	wg.Wait()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		send(idle.ID)
		b.StartTimer()
		ds, err := bs.Claim(ctx, idle.ID, bus.ClaimOptions{Limit: 10})
		if err != nil || len(ds) != 1 {
			b.Fatalf("claim: %d deliveries, %v", len(ds), err)
		}
	}
}

// benchBus is a bus over a fresh SQLite file with one agent per name, for
// the benchmarks of this package.
func benchBus(b *testing.B, names ...string) (*bus.Service, []agent.Agent) {
	b.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	reg := agent.New(db, nil)
	agents := make([]agent.Agent, len(names))
	for i, n := range names {
		if agents[i], _, err = reg.Create(ctx, agent.CreateParams{DisplayName: n}); err != nil {
			b.Fatal(err)
		}
	}
	return bus.New(db, reg, nil, nil, bus.Config{}, nil), agents
}
