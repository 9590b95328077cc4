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
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	reg := agent.New(db, nil)
	bs := bus.New(db, reg, nil, nil, bus.Config{}, nil)
	busy, _, err := reg.Create(ctx, agent.CreateParams{DisplayName: "busy"})
	if err != nil {
		b.Fatal(err)
	}
	idle, _, err := reg.Create(ctx, agent.CreateParams{DisplayName: "idle"})
	if err != nil {
		b.Fatal(err)
	}
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
