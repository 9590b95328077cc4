package busbench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Workload is what every system is asked to do.
type Workload struct {
	Agents   int           // connected agents, each a producer and a consumer (100)
	Size     int           // bytes per message (512)
	Warmup   time.Duration // run before measuring (discarded)
	Duration time.Duration // measured window
	InFlight int           // closed loop: lifecycles outstanding at once
	Rate     int           // open loop: messages offered per second
	Drain    time.Duration // longest wait for outstanding messages after the window
}

// Mode is closed loop (as fast as InFlight allows) or open loop (Rate/s).
type Mode int

// The modes.
const (
	Closed Mode = iota + 1
	Open
	// Publish is a closed loop of durable sends with no consumers: the
	// accept path alone, to compare with the peers' publish figures.
	Publish
)

// Result is one (system, mode) measurement.
type Result struct {
	System, Store, Mode string
	Offered             int     // open loop: offered messages/s
	Throughput          float64 // completed lifecycles (acks confirmed; Publish: accepts) per second in the window
	Sent, Delivered     int     // messages sent in the window, and how many of those were delivered
	Accept              Percentiles
	Delivery            Percentiles // send → delivery at the consumer
	Lifecycle           Percentiles // send → ack confirmed
	Errors              int
	FirstError          string
	Notes               string
	// CPU used during the measured window by this process (for
	// Switchboard: hub and clients; for the peers: their clients) and by
	// the peer's server process.
	CPUSelf, CPUServer time.Duration
	// Load is the one-minute load average at the window's start and end:
	// other work on the machine shows here.
	Load string
	// Fsync is the median latency of a 4 KiB write + fdatasync measured
	// just before the run.
	Fsync time.Duration

	window time.Duration
}

// CPUPerOp is the CPU time of one completed lifecycle (or accept), all
// processes together: a figure that other load on the machine disturbs
// much less than throughput.
func (r Result) CPUPerOp() time.Duration {
	if r.Throughput == 0 {
		return 0
	}
	return time.Duration(float64(r.CPUSelf+r.CPUServer) / (r.Throughput * r.window.Seconds()))
}

// Percentiles of a latency distribution.
type Percentiles struct {
	N             int
	P50, P99, Max time.Duration
}

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(ds))+0.5) - 1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	return Percentiles{N: len(ds), P50: at(0.50), P99: at(0.99), Max: ds[len(ds)-1]}
}

// recorder collects the samples of one run. A sample counts when the
// message's send time falls inside the measured window; throughput counts
// acks confirmed inside the window.
type recorder struct {
	from, to time.Time

	mu        sync.Mutex
	accept    []time.Duration
	delivery  []time.Duration
	lifecycle []time.Duration
	sent      int
	delivered map[uint64]bool
	acked     atomic.Int64 // acks confirmed inside the window
	settled   atomic.Int64 // acks confirmed, all time
	errs      atomic.Int64
	firstErr  atomic.Value
	inflight  chan struct{} // closed loop tokens (nil in open loop)
	// publishOnly counts accepts as completions and returns the token at
	// once (no consumers).
	publishOnly bool
}

func (r *recorder) inWindow(t time.Time) bool { return !t.Before(r.from) && t.Before(r.to) }

func (r *recorder) fail(err error) {
	if r.errs.Add(1) == 1 {
		r.firstErr.Store(err.Error())
	}
}

func (r *recorder) handler() Handler {
	return Handler{
		Delivered: func(msg []byte) {
			now := time.Now()
			st, err := ParseStamp(msg)
			if err != nil {
				r.fail(err)
				return
			}
			if r.inWindow(st.Sent) {
				r.mu.Lock()
				r.delivery = append(r.delivery, now.Sub(st.Sent))
				r.delivered[st.Seq] = true
				r.mu.Unlock()
			}
		},
		Acked: func(msg []byte) {
			now := time.Now()
			r.settled.Add(1)
			if r.inWindow(now) {
				r.acked.Add(1)
			}
			if st, err := ParseStamp(msg); err == nil && r.inWindow(st.Sent) {
				r.mu.Lock()
				r.lifecycle = append(r.lifecycle, now.Sub(st.Sent))
				r.mu.Unlock()
			}
			if r.inflight != nil {
				<-r.inflight
			}
		},
		Failed: r.fail,
	}
}

func (r *recorder) send(ctx context.Context, sys System, from, to int, st Stamp) {
	err := sys.Send(ctx, from, to, st)
	done := time.Now()
	if err != nil {
		if ctx.Err() == nil {
			r.fail(fmt.Errorf("send: %w", err))
		}
		if r.inflight != nil {
			<-r.inflight
		}
		return
	}
	if r.inWindow(st.Sent) {
		r.mu.Lock()
		r.sent++
		r.accept = append(r.accept, done.Sub(st.Sent))
		r.mu.Unlock()
	}
	if r.publishOnly {
		r.settled.Add(1)
		if r.inWindow(done) {
			r.acked.Add(1)
		}
		<-r.inflight
	}
}

// Run starts sys, runs the workload in mode, and stops sys.
func Run(ctx context.Context, sys System, w Workload, mode Mode) (res Result, err error) {
	res = Result{System: sys.Name(), Store: sys.Store()}
	rec := &recorder{delivered: map[uint64]bool{}}
	res.Fsync = fsyncLatency(50)
	h := rec.handler()
	switch mode {
	case Closed:
		res.Mode = fmt.Sprintf("closed, %d in flight", w.InFlight)
		rec.inflight = make(chan struct{}, w.InFlight)
	case Publish:
		res.Mode = fmt.Sprintf("publish only, %d in flight", w.InFlight)
		rec.inflight = make(chan struct{}, w.InFlight)
		rec.publishOnly = true
		h = Handler{Failed: rec.fail}
	default:
		res.Mode = "open"
		res.Offered = w.Rate
	}
	if err := sys.Start(ctx, w.Agents, h); err != nil {
		sys.Close()
		return res, fmt.Errorf("%s: start: %w", sys.Name(), err)
	}
	defer func() {
		if cerr := sys.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("%s: close: %w", sys.Name(), cerr)
		}
	}()

	start := time.Now()
	rec.from = start.Add(w.Warmup)
	rec.to = rec.from.Add(w.Duration)
	sendCtx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	var seq atomic.Uint64
	var wg sync.WaitGroup
	switch mode {
	case Closed, Publish:
		// One producer per agent, each with one send outstanding; the
		// tokens bound the lifecycles in flight (a token returns when the
		// ack is confirmed).
		for i := 0; i < w.Agents; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				for {
					select {
					case rec.inflight <- struct{}{}:
					case <-sendCtx.Done():
						return
					}
					if !time.Now().Before(rec.to) {
						<-rec.inflight
						return
					}
					rec.send(sendCtx, sys, i, (i+1)%w.Agents, Stamp{Seq: seq.Add(1), Sent: time.Now()})
				}
			}(i)
		}
	case Open:
		// Messages are due at fixed intervals whether or not earlier ones
		// finished; each is stamped with the time it was due, so a stall
		// shows up in the latency instead of thinning the load.
		interval := time.Second / time.Duration(w.Rate)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				due := start.Add(time.Duration(k) * interval)
				if !due.Before(rec.to) {
					return
				}
				if d := time.Until(due); d > 0 {
					select {
					case <-time.After(d):
					case <-sendCtx.Done():
						return
					}
				}
				from := k % w.Agents
				wg.Add(1)
				go func() {
					defer wg.Done()
					rec.send(sendCtx, sys, from, (from+1)%w.Agents, Stamp{Seq: seq.Add(1), Sent: due})
				}()
			}
		}()
	}

	// Wait out the window (sampling CPU at both ends), then let
	// outstanding lifecycles finish.
	serverCPU := func() time.Duration {
		if sc, ok := sys.(interface{ ServerCPU() time.Duration }); ok {
			return sc.ServerCPU()
		}
		return 0
	}
	select {
	case <-time.After(time.Until(rec.from)):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	self0, server0, load0 := selfCPU(), serverCPU(), loadAvg()
	select {
	case <-time.After(time.Until(rec.to)):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.CPUSelf, res.CPUServer = selfCPU()-self0, serverCPU()-server0
	res.Load = load0 + "→" + loadAvg()
	res.window = w.Duration
	deadline := time.Now().Add(w.Drain)
	for time.Now().Before(deadline) {
		if rec.settled.Load() >= int64(seq.Load()) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopSending()
	wg.Wait()
	res.Notes = sys.Notes()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	res.Throughput = float64(rec.acked.Load()) / w.Duration.Seconds()
	res.Sent = rec.sent
	res.Delivered = len(rec.delivered)
	res.Accept = percentiles(rec.accept)
	res.Delivery = percentiles(rec.delivery)
	res.Lifecycle = percentiles(rec.lifecycle)
	res.Errors = int(rec.errs.Load())
	if s, ok := rec.firstErr.Load().(string); ok {
		res.FirstError = s
	}
	if res.Sent == 0 {
		return res, errors.New(sys.Name() + ": no message was accepted in the measured window")
	}
	return res, nil
}
