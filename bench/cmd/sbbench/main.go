// Command sbbench measures Switchboard's agent bus against NATS JetStream
// and Redis Streams on the same machine in the same run:
//
//	cd bench && go run ./cmd/sbbench bus --duration 10s
//
// It starts every server itself (the hub in this process on a temporary
// SQLite file or PostgreSQL schema; nats-server and redis-server as child
// processes on free loopback ports with temporary data directories) and
// stops them afterwards. See BENCHMARKS.md at the repository root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/bench/internal/busbench"
)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == busbench.NATSServerArg {
		if err := busbench.RunNATSServer(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "nats-server:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "bus" {
		fmt.Fprintln(os.Stderr, "usage: sbbench bus [flags]   (sbbench bus -h lists the flags)")
		os.Exit(2)
	}
	if err := bus(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "sbbench:", err)
		os.Exit(1)
	}
}

func bus(args []string) error {
	fs := flag.NewFlagSet("bus", flag.ExitOnError)
	duration := fs.Duration("duration", 10*time.Second, "measured window of each run")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured run-in before each window")
	drain := fs.Duration("drain", 10*time.Second, "longest wait for outstanding lifecycles after a window")
	agents := fs.Int("agents", 100, "connected agents (each sends to the next and consumes its own inbox)")
	size := fs.Int("size", 512, "bytes per message (Switchboard: the whole stored envelope)")
	inflight := fs.Int("inflight", 400, "closed loop: lifecycles outstanding at once")
	rate := fs.Int("rate", 1000, "open loop: messages offered per second")
	prefetch := fs.Int("prefetch", 64, "unacknowledged deliveries pushed per consumer")
	stores := fs.String("stores", "sqlite", "Switchboard stores to run: sqlite,postgres (postgres needs --postgres or SWITCHBOARD_TEST_POSTGRES_URL)")
	peers := fs.String("peers", "jetstream,redis", "peers to run side by side: jetstream (one stream per agent), jetstream-one (one shared stream), redis, or none")
	modes := fs.String("modes", "closed,open", "closed (max throughput), open (fixed offered load), publish (durable sends only, no consumers)")
	pgURL := fs.String("postgres", os.Getenv("SWITCHBOARD_TEST_POSTGRES_URL"), "PostgreSQL URL for the postgres store (a fresh schema is created and dropped)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of each Switchboard run to PREFIX-<store>-<mode>.pprof")
	_ = fs.Parse(args)

	w := busbench.Workload{Agents: *agents, Size: *size, Warmup: *warmup, Duration: *duration, InFlight: *inflight, Rate: *rate, Drain: *drain}
	type sysFactory func() busbench.System
	var systems []sysFactory
	for _, s := range split(*stores) {
		switch s {
		case "sqlite":
			systems = append(systems, func() busbench.System { return &busbench.Switchboard{Prefetch: *prefetch, Size: *size} })
		case "postgres":
			if *pgURL == "" {
				return errors.New("--stores postgres needs --postgres URL or SWITCHBOARD_TEST_POSTGRES_URL")
			}
			systems = append(systems, func() busbench.System {
				return &busbench.Switchboard{Postgres: *pgURL, Prefetch: *prefetch, Size: *size}
			})
		default:
			return fmt.Errorf("unknown store %q (sqlite, postgres)", s)
		}
	}
	for _, p := range split(*peers) {
		switch p {
		case "jetstream":
			systems = append(systems, func() busbench.System {
				return &busbench.JetStream{Prefetch: *prefetch, Size: *size, StreamPerAgent: true}
			})
		case "jetstream-one":
			systems = append(systems, func() busbench.System { return &busbench.JetStream{Prefetch: *prefetch, Size: *size} })
		case "redis":
			systems = append(systems, func() busbench.System { return &busbench.Redis{Prefetch: *prefetch, Size: *size} })
		case "none":
		default:
			return fmt.Errorf("unknown peer %q (jetstream, jetstream-one, redis, none)", p)
		}
	}
	var runModes []busbench.Mode
	for _, m := range split(*modes) {
		switch m {
		case "closed":
			runModes = append(runModes, busbench.Closed)
		case "open":
			runModes = append(runModes, busbench.Open)
		case "publish":
			runModes = append(runModes, busbench.Publish)
		default:
			return fmt.Errorf("unknown mode %q (closed, open, publish)", m)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	host, _ := os.Hostname()
	fmt.Printf("sbbench bus: %d agents, %d-byte messages, %s window after %s warm-up, closed loop %d in flight, open loop %d/s, prefetch %d\n",
		w.Agents, w.Size, w.Duration, w.Warmup, w.InFlight, w.Rate, *prefetch)
	fmt.Printf("host %s, %d CPUs, %s, %s\n\n", host, runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format(time.RFC3339))

	var results []busbench.Result
	for _, mode := range runModes {
		for _, f := range systems {
			sys := f()
			label := fmt.Sprintf("%s/%s/%s", sys.Name(), sys.Store(), modeName(mode))
			fmt.Fprintf(os.Stderr, "running %s ...\n", label)
			stopProfile := func() {}
			if *cpuprofile != "" && sys.Name() == "switchboard" {
				var err error
				if stopProfile, err = startProfile(fmt.Sprintf("%s-%s-%s.pprof", *cpuprofile, sys.Store(), modeName(mode))); err != nil {
					return err
				}
			}
			r, err := busbench.Run(ctx, sys, w, mode)
			stopProfile()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				fmt.Fprintf(os.Stderr, "%s failed: %v\n", label, err)
				r.FirstError = err.Error()
			}
			results = append(results, r)
			fmt.Fprintf(os.Stderr, "  %.0f lifecycles/s, send→delivery p50 %s p99 %s\n", r.Throughput, r.Delivery.P50, r.Delivery.P99)
		}
	}
	fmt.Println()
	busbench.WriteTable(os.Stdout, results)
	return nil
}

func modeName(m busbench.Mode) string {
	switch m {
	case busbench.Closed:
		return "closed"
	case busbench.Publish:
		return "publish"
	}
	return "open"
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func startProfile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
