package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// instantBus answers every task as soon as the dispatching transaction
// commits, with a fixed standard output.
type instantBus struct {
	queue chan *protocol.Envelope
}

func (b *instantBus) Send(ctx context.Context, tx *store.Tx, env *protocol.Envelope) error {
	if env.Type == protocol.TypeRequest {
		tx.AfterCommit(func() { b.queue <- env })
	}
	return nil
}

// BenchmarkStepOverhead measures the engine's cost per agent step on
// SQLite: dispatch (resolve input, record the request, enqueue the task),
// then the answer recorded and the next step dispatched, with a bus that
// answers instantly. One op is one step; executions are chains of 10 steps.
func BenchmarkStepOverhead(b *testing.B) {
	for _, parallel := range []int{1, 8} {
		b.Run(fmt.Sprintf("executions=%d", parallel), func(b *testing.B) {
			db, err := store.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "bench.db"), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			bus := &instantBus{queue: make(chan *protocol.Envelope, 1024)}
			e, err := New(db, Options{Bus: bus, Clock: clock.Real{}})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Stop()
			ctx := context.Background()
			const chain = 10
			var pipeline strings.Builder
			pipeline.WriteString("id: bench\npipeline: [")
			var skills []SkillFile
			for i := 0; i < chain; i++ {
				if i > 0 {
					pipeline.WriteString(", ")
				}
				fmt.Fprintf(&pipeline, "s%d", i)
				skills = append(skills, SkillFile{Name: fmt.Sprintf("s%d.md", i),
					Content: []byte(fmt.Sprintf("---\nid: s%d\nrun: {agent: agt_bench}\n---\nStep %d.\n", i, i))})
			}
			pipeline.WriteString("]\nsteps:\n")
			for i := 1; i < chain; i++ {
				fmt.Fprintf(&pipeline, "  s%d: {input: {prev: \"<<ref:s%d.output.data.n>>\"}}\n", i, i-1)
			}
			result := json.RawMessage(`{"success": true, "data": {"n": 1}, "metadata": {"processed_at": "2026-01-14T10:00:00Z", "duration_ms": 0}, "errors": []}`)
			answer := func(task *protocol.Envelope) {
				payload := mustEncode(obj{{"requestId", task.ID}, {"status", "success"}, {"result", result}})
				env := &protocol.Envelope{Version: protocol.Version, ID: protocol.NewID(protocol.PrefixMessage), TraceID: task.TraceID,
					From: protocol.Address{Agent: task.To.Agent}, To: protocol.Address{Agent: SystemAgent}, Type: protocol.TypeResponse,
					Priority: protocol.PriorityNormal, Payload: payload}
				if err := e.HandleReply(ctx, env); err != nil {
					b.Error(err)
				}
			}
			workers := make(chan struct{})
			for i := 0; i < 8; i++ {
				go func() {
					for {
						select {
						case task := <-bus.queue:
							answer(task)
						case <-workers:
							return
						}
					}
				}()
			}
			defer close(workers)
			runs := (b.N + chain - 1) / chain
			b.ResetTimer()
			sem := make(chan struct{}, parallel)
			errs := make(chan error, runs)
			for i := 0; i < runs; i++ {
				sem <- struct{}{}
				go func() {
					defer func() { <-sem }()
					x, err := e.Submit(ctx, SubmitRequest{Pipeline: []byte(pipeline.String()), Skills: skills})
					if err == nil {
						x, err = e.Wait(ctx, "", x.ID)
					}
					if err == nil && x.Status != StatusCompleted {
						err = fmt.Errorf("status %s", x.Status)
					}
					errs <- err
				}()
			}
			for i := 0; i < runs; i++ {
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(runs*chain)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
