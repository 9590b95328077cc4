package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/relay"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// BenchmarkRelayTurn measures the hub's overhead per relayed turn with
// many live conversations at once, through the real hub (in process) on
// each store: 2 agents per conversation, each on its own WebSocket in the
// Claworld dialect, each answering every delivery the moment it arrives
// (think=0), or after a think time, as a model would (uniform within ±50 %
// of think, so the conversations do not march in step).
//
// One op is one relayed turn: ns/op is wall time per turn across all
// conversations (1/throughput). hub-p50/p99 are the relay's own timing —
// from the reply frame reaching the hub to the peer's delivery, committed,
// being written to the peer's socket (what switchboard_relay_turn_seconds
// observes), exact per sample; e2e-p50/p99 add both clients' socket I/O
// (reply written by one agent → delivery read by the other).
// SWITCHBOARD_BENCH_CPUPROFILE=file writes a CPU profile of the measured
// window alone.
//
//	go test ./internal/relay -run '^$' -bench RelayTurn -benchtime 20000x
func BenchmarkRelayTurn(b *testing.B) {
	for _, be := range storetest.Backends() {
		for _, think := range []time.Duration{0, 2 * time.Second, 10 * time.Second} {
			b.Run(fmt.Sprintf("%s/conversations=1000/think=%s", be.Name, think), func(b *testing.B) {
				benchRelayTurn(b, be, 1000, think)
			})
		}
	}
}

// turnAgent is one bench agent: a Claworld-dialect socket whose reader
// answers every delivery that allows a reply.
type turnAgent struct {
	id, token, code, name string
	ws                    *websocket.Conn
}

type turnBench struct {
	think     time.Duration
	measuring atomic.Bool
	stopped   atomic.Bool
	turns     chan struct{} // one per relayed turn delivered, while measuring
	errors    atomic.Int64
	firstErr  atomic.Value
	convs     sync.Map // chatRequestId → *atomic.Int64: when the last reply was written (unix ns)
	mu        sync.Mutex
	e2e       []time.Duration
	hub       []time.Duration
	delivered atomic.Int64 // relayed turns delivered, all phases
}

type benchDelivery struct {
	DeliveryID    string `json:"deliveryId"`
	SessionKey    string `json:"sessionKey"`
	ChatRequestID string `json:"chatRequestId"`
	Metadata      struct {
		AllowReply   bool   `json:"allowReply"`
		DeliveryType string `json:"deliveryType"`
	} `json:"metadata"`
}

func (tb *turnBench) conv(chatID string) *atomic.Int64 {
	v, _ := tb.convs.LoadOrStore(chatID, new(atomic.Int64))
	return v.(*atomic.Int64)
}

func (tb *turnBench) fail(err error) {
	tb.errors.Add(1)
	tb.firstErr.CompareAndSwap(nil, err.Error())
}

// serve reads a's frames until the socket closes, answering deliveries.
func (tb *turnBench) serve(ctx context.Context, a *turnAgent) {
	var n int
	for {
		_, data, err := a.ws.Read(ctx)
		if err != nil {
			return
		}
		var f struct {
			Event string          `json:"event"`
			Data  json.RawMessage `json:"data"`
		}
		if json.Unmarshal(data, &f) != nil {
			continue
		}
		switch f.Event {
		case "delivery":
		case "error":
			if !tb.stopped.Load() {
				tb.fail(fmt.Errorf("%s: %s", a.name, f.Data))
			}
			continue
		default:
			continue // reply.accepted, request.updated, …
		}
		now := time.Now()
		var d benchDelivery
		if err := json.Unmarshal(f.Data, &d); err != nil {
			tb.fail(err)
			continue
		}
		if d.Metadata.DeliveryType == "reply" {
			tb.delivered.Add(1)
			if tb.measuring.Load() {
				if sent := tb.conv(d.ChatRequestID).Load(); sent > 0 {
					tb.mu.Lock()
					tb.e2e = append(tb.e2e, now.Sub(time.Unix(0, sent)))
					tb.mu.Unlock()
				}
				select {
				case tb.turns <- struct{}{}:
				default:
				}
			}
		}
		if !d.Metadata.AllowReply || tb.stopped.Load() {
			continue
		}
		n++
		reply := func() {
			b, _ := json.Marshal(map[string]any{"type": "reply", "deliveryId": d.DeliveryID, "sessionKey": d.SessionKey,
				"payload": map[string]any{"text": a.name + " says turn " + strconv.Itoa(n), "source": "bench"}})
			tb.conv(d.ChatRequestID).Store(time.Now().UnixNano())
			if err := a.ws.Write(ctx, websocket.MessageText, b); err != nil && !tb.stopped.Load() {
				tb.fail(err)
			}
		}
		if tb.think > 0 {
			// Models take their time, never exactly the same: ±50 %.
			time.AfterFunc(tb.think/2+rand.N(tb.think), reply)
		} else {
			reply()
		}
	}
}

func benchRelayTurn(b *testing.B, be storetest.Backend, conversations int, think time.Duration) {
	h := apptest.Start(b, be.DSN(b), func(c *app.Config) {
		c.Relay.MaxTurns = 1 << 30 // conversations go on for the whole run
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tb := &turnBench{think: think, turns: make(chan struct{}, 1<<20)}
	relay.SetTurnObserver(h.App.Relay, func(d time.Duration) {
		if tb.measuring.Load() {
			tb.mu.Lock()
			tb.hub = append(tb.hub, d)
			tb.mu.Unlock()
		}
	})

	// Agents, activated concurrently.
	agents := make([]*turnAgent, 2*conversations)
	parallel(b, len(agents), func(i int) error {
		name := fmt.Sprintf("Agent %d", i)
		act, err := client.New(h.URL, "").Activate(ctx, client.ActivateInput{DisplayName: name,
			HumanProfile: name + "'s owner, who likes trail running", AgentProfile: name + ": a friendly agent who plans weekend runs"})
		if err != nil {
			return err
		}
		agents[i] = &turnAgent{id: act.AgentID, token: act.AppToken, code: act.AgentCode, name: name}
		return nil
	})
	// Their sockets, answering from the start.
	parallel(b, len(agents), func(i int) error {
		a := agents[i]
		ws, _, err := websocket.Dial(ctx, client.WebSocketURL(h.URL), nil)
		if err != nil {
			return err
		}
		ws.SetReadLimit(4 << 20)
		auth, _ := json.Marshal(map[string]any{"type": "auth", "agentId": a.id, "credential": map[string]any{"type": "agent_token", "token": a.token},
			"client": "bench", "clientVersion": "0", "bridgeProtocol": relay.ClaworldProtocol})
		if err := ws.Write(ctx, websocket.MessageText, auth); err != nil {
			return err
		}
		_, data, err := ws.Read(ctx)
		if err != nil {
			return err
		}
		var f struct{ Event string }
		if err := json.Unmarshal(data, &f); err != nil || f.Event != "auth.ok" {
			return fmt.Errorf("auth: %s", data)
		}
		a.ws = ws
		go tb.serve(ctx, a)
		return nil
	})
	// Heartbeats every 15 s, as the plugin sends them (a socket silent for
	// three intervals is closed), spread as independent agents' are.
	for _, a := range agents {
		go func() {
			t := time.NewTimer(rand.N(15 * time.Second))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				a.ws.Write(ctx, websocket.MessageText, []byte(`{"type":"heartbeat"}`))
				t.Reset(15 * time.Second)
			}
		}()
	}
	defer func() {
		tb.stopped.Store(true)
		for _, a := range agents {
			a.ws.Close(websocket.StatusNormalClosure, "")
		}
	}()
	// Conversations: agent 2i asks agent 2i+1; the kickoff, the opener and
	// every turn after are answered by the sockets.
	parallel(b, conversations, func(i int) error {
		from, to := agents[2*i], agents[2*i+1]
		_, err := h.Client(from.token).RequestChat(ctx, client.ChatRequestInput{DisplayName: to.name, AgentCode: to.code,
			OpeningMessage: "Chat about anything; keep going."})
		return err
	})
	// Warm up: every conversation established and a few turns in.
	deadline := time.Now().Add(5 * time.Minute)
	for tb.delivered.Load() < int64(3*conversations) {
		if time.Now().After(deadline) {
			b.Fatalf("warm-up: %d turns delivered in 5 minutes; errors %d (%v)", tb.delivered.Load(), tb.errors.Load(), tb.firstErr.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := tb.errors.Load(); n > 0 {
		b.Fatalf("%d errors during warm-up, first: %v", n, tb.firstErr.Load())
	}

	if path := os.Getenv("SWITCHBOARD_BENCH_CPUPROFILE"); path != "" {
		// The measured window only: -cpuprofile would include the setup.
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	st0 := h.App.DB.Stats()
	rt0 := readRuntime()
	tb.measuring.Store(true)
	start := time.Now()
	for b.Loop() {
		select {
		case <-tb.turns:
		case <-time.After(time.Minute):
			b.Fatalf("no turn for a minute; errors %d (%v)", tb.errors.Load(), tb.firstErr.Load())
		}
	}
	elapsed := time.Since(start)
	tb.measuring.Store(false)
	tb.stopped.Store(true)
	rt := readRuntime()
	if n := tb.errors.Load(); n > 0 {
		b.Fatalf("%d errors, first: %v", n, tb.firstErr.Load())
	}

	tb.mu.Lock()
	defer tb.mu.Unlock()
	b.ReportMetric(pctMs(tb.hub, 0.50), "hub-p50-ms")
	b.ReportMetric(pctMs(tb.hub, 0.90), "hub-p90-ms")
	b.ReportMetric(pctMs(tb.hub, 0.99), "hub-p99-ms")
	b.ReportMetric(pctMs(tb.e2e, 0.50), "e2e-p50-ms")
	b.ReportMetric(pctMs(tb.e2e, 0.99), "e2e-p99-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "turns/s")
	b.ReportMetric(float64((rt.cpu-rt0.cpu).Microseconds())/float64(b.N), "cpu-µs/turn")
	st := h.App.DB.Stats()
	b.Logf("runnable goroutines waited for a CPU: p50 %s, p99 %s; GC pauses p99 %s (the machine's share of the figures)",
		histDiffPct(rt0.sched, rt.sched, 0.5), histDiffPct(rt0.sched, rt.sched, 0.99), histDiffPct(rt0.gc, rt.gc, 0.99))
	b.Logf("%d hub samples, %d e2e samples in %s; store: %d commits, %d write requests (%.1f per commit)", len(tb.hub), len(tb.e2e), elapsed.Round(time.Millisecond),
		st.Batches-st0.Batches, st.Requests-st0.Requests, float64(st.Requests-st0.Requests)/float64(max(1, st.Batches-st0.Batches)))
}

// pctMs is the p-th percentile of ds in milliseconds (0 when empty).
func pctMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
}

// parallel runs fn(0..n-1) on 32 goroutines and fails b on the first error.
func parallel(b *testing.B, n int, fn func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// runtimeStats are process figures read before and after the measured
// window: CPU time (hub and clients), and the Go scheduler's and GC's
// latency histograms.
type runtimeStats struct {
	cpu       time.Duration
	sched, gc *metrics.Float64Histogram
}

func readRuntime() runtimeStats {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	ms := []metrics.Sample{{Name: "/sched/latencies:seconds"}, {Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(ms)
	return runtimeStats{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		sched: ms[0].Value.Float64Histogram(), gc: ms[1].Value.Float64Histogram()}
}

// histDiffPct is the p-th percentile of the samples b added to a (same
// buckets), as the upper bound of its bucket.
func histDiffPct(a, b *metrics.Float64Histogram, p float64) time.Duration {
	var total uint64
	for i := range b.Counts {
		total += b.Counts[i] - a.Counts[i]
	}
	if total == 0 {
		return 0
	}
	var acc uint64
	for i := range b.Counts {
		acc += b.Counts[i] - a.Counts[i]
		if float64(acc) >= p*float64(total) {
			return time.Duration(b.Buckets[i+1] * float64(time.Second)).Round(time.Microsecond)
		}
	}
	return 0
}
