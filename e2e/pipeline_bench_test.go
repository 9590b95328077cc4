package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// BenchmarkPipelineOverhead measures what the hub adds to every pipeline
// step, through the real hub (in process) on each store: one SDK worker on
// a socket answers every task the instant it arrives, and the steps of a
// chain (100 or 1,000 steps) run one after the other. The gap between the
// worker receiving step i and step i+1 is the hub's per-step overhead:
// accepting and recording step i's result, dispatching step i+1 in the same
// transaction, and pushing it to the worker. One op is one pipeline, from
// submission to its recorded completion.
//
//	go test ./e2e -run '^$' -bench PipelineOverhead -benchtime 3x
func BenchmarkPipelineOverhead(b *testing.B) {
	for _, be := range storetest.Backends() {
		for _, steps := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/steps=%d", be.Name, steps), func(b *testing.B) { benchPipeline(b, be, steps) })
		}
	}
}

func benchPipeline(b *testing.B, be storetest.Backend, steps int) {
	h := apptest.Start(b, be.DSN(b))
	w, wc := h.NewAgent("Bench worker")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := wc.Connect(ctx, client.ConnectOptions{Prefetch: 16})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var received []time.Time
	ts := &client.TaskServer{Handler: func(ctx context.Context, t client.Task) client.StandardOutput {
		mu.Lock()
		received = append(received, time.Now())
		mu.Unlock()
		return client.Succeed(nil)
	}}
	go ts.Serve(ctx, s)

	var pipe strings.Builder
	pipe.WriteString("id: bench\npipeline: [")
	in := client.ExecutionInput{Input: json.RawMessage(`{}`)}
	for i := 0; i < steps; i++ {
		if i > 0 {
			pipe.WriteString(", ")
		}
		fmt.Fprintf(&pipe, "s%d", i)
		in.Skills = append(in.Skills, client.SkillSource{Name: fmt.Sprintf("s%d.md", i),
			Content: fmt.Sprintf("---\nid: s%d\nrun: {agent: %s}\n---\nStep %d.\n", i, w.ID, i)})
	}
	pipe.WriteString("]\n")
	in.Pipeline = pipe.String()

	var gaps []time.Duration
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		mu.Lock()
		received = received[:0]
		mu.Unlock()
		start := time.Now()
		x, err := h.Admin.SubmitExecution(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
		x, err = h.Admin.WaitExecution(wctx, x.ID)
		wcancel()
		if err != nil {
			b.Fatalf("wait for the execution: %v", err)
		}
		if x.Status != "completed" {
			b.Fatalf("execution ended %s", x.Status)
		}
		total += time.Since(start)
		mu.Lock()
		for j := 1; j < len(received); j++ {
			gaps = append(gaps, received[j].Sub(received[j-1]))
		}
		mu.Unlock()
	}
	b.StopTimer()
	slices.Sort(gaps)
	pct := func(p float64) float64 {
		if len(gaps) == 0 {
			return 0
		}
		return float64(gaps[int(p*float64(len(gaps)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms/step")
	b.ReportMetric(pct(0.99), "p99-ms/step")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/pipeline")
	b.ReportMetric(0, "ns/op") // the pipeline's wall time is ms/pipeline
}
