package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Environment of the client process BenchmarkIdleConnections starts.
const (
	envIdleURL    = "SWITCHBOARD_IDLE_CLIENTS_URL"
	envIdleTokens = "SWITCHBOARD_IDLE_CLIENTS_TOKENS"
)

// BenchmarkIdleConnections measures the hub's memory per connected agent:
// 10,000 agents each hold one authenticated, idle WebSocket in the Claworld
// dialect (the relay's agents), heartbeating every 15 s as the plugin does.
//
// The clients run in a child process (this test binary again, running
// TestIdleClientProcess), so everything measured in this process is the
// hub's: after the agents exist and before they connect, and again once all
// are connected and settled, the heap in use plus goroutine stacks
// (runtime.MemStats HeapInuse+StackInuse, each after a forced GC) are read;
// the growth divided by the number of connections is B/conn. The process's
// RSS growth is reported beside it (it also holds memory the runtime has
// not returned to the OS).
//
// SWITCHBOARD_IDLE_CONNECTIONS changes the number of connections;
// SWITCHBOARD_BENCH_HEAPPROFILE=file writes the hub's heap profile while
// they are connected.
//
//	go test ./internal/gateway -run '^$' -bench IdleConnections -benchtime 1x
func BenchmarkIdleConnections(b *testing.B) {
	n := 10000
	if v := os.Getenv("SWITCHBOARD_IDLE_CONNECTIONS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	h := apptest.Start(b, "")
	ctx := context.Background()

	// The agents, a thousand per transaction.
	var lines strings.Builder
	for done := 0; done < n; {
		batch := min(1000, n-done)
		err := h.App.DB.Write(ctx, func(tx *store.Tx) error {
			for i := 0; i < batch; i++ {
				a, tok, err := h.App.Agents.CreateTx(ctx, tx, agent.CreateParams{DisplayName: fmt.Sprintf("Idle %d", done+i)})
				if err != nil {
					return err
				}
				fmt.Fprintf(&lines, "%s\t%s\n", a.ID, tok)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		done += batch
	}
	tokens := filepath.Join(b.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(lines.String()), 0o600); err != nil {
		b.Fatal(err)
	}

	before := settledMem()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestIdleClientProcess$", "-test.count", "1")
	cmd.Env = append(os.Environ(), envIdleURL+"="+h.URL, envIdleTokens+"="+tokens)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close() // the child exits when its stdin closes
		cmd.Wait()
	}()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY ") {
				ready <- sc.Text()
			} else {
				fmt.Fprintln(os.Stderr, "clients:", sc.Text())
			}
		}
		close(ready)
	}()
	select {
	case line, ok := <-ready:
		if !ok {
			b.Fatal("the client process exited before connecting")
		}
		b.Logf("clients: %s in %s", line, time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Minute):
		b.Fatal("clients not connected after 10 minutes")
	}
	if got := h.App.Gateway.Count(); got != n {
		b.Fatalf("%d connections on the hub, want %d", got, n)
	}
	// Let connect-time work (presence writes, first heartbeats) finish.
	time.Sleep(5 * time.Second)
	after := settledMem()
	if path := os.Getenv("SWITCHBOARD_BENCH_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
	if got := h.App.Gateway.Count(); got != n {
		b.Fatalf("%d connections left after settling, want %d", got, n)
	}
	per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) }
	b.ReportMetric(per(after.heap+after.stack, before.heap+before.stack), "B/conn")
	b.ReportMetric(per(after.heap, before.heap), "heap-B/conn")
	b.ReportMetric(per(after.stack, before.stack), "stack-B/conn")
	b.ReportMetric(per(after.rss, before.rss), "rss-B/conn")
	b.ReportMetric(per(uint64(after.goroutines), uint64(before.goroutines)), "goroutines/conn")
	b.ReportMetric(0, "ns/op")
}

type memSnapshot struct {
	heap, stack, rss uint64
	goroutines       int
}

func settledMem() memSnapshot {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnapshot{heap: ms.HeapInuse, stack: ms.StackInuse, rss: rssBytes(), goroutines: runtime.NumGoroutine()}
}

// rssBytes is the process's resident set (Linux; 0 elsewhere).
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestIdleClientProcess is the client side of BenchmarkIdleConnections, run
// in a process of its own; without the benchmark's environment it skips.
// It connects every agent listed in the tokens file, prints "READY n", and
// heartbeats every 15 s until its stdin closes.
func TestIdleClientProcess(t *testing.T) {
	url, path := os.Getenv(envIdleURL), os.Getenv(envIdleTokens)
	if url == "" || path == "" {
		t.Skip("the client side of BenchmarkIdleConnections")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type cred struct{ id, token string }
	var creds []cred
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		id, tok, _ := strings.Cut(line, "\t")
		creds = append(creds, cred{id, tok})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conns := make([]*websocket.Conn, len(creds))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(creds) {
					return
				}
				ws, err := dialIdle(ctx, url, creds[i].id, creds[i].token)
				if err != nil {
					errs <- fmt.Errorf("agent %d: %w", i, err)
					return
				}
				conns[i] = ws
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	fmt.Printf("READY %d\n", len(conns))
	for i, ws := range conns {
		go func() {
			// Heartbeats spread over the interval, as independent agents'.
			t := time.NewTimer(time.Duration(rand.Int64N(int64(15 * time.Second))))
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"heartbeat"}`)); err != nil {
					if ctx.Err() == nil {
						fmt.Fprintf(os.Stderr, "agent %d: heartbeat: %v\n", i, err)
					}
					return
				}
				t.Reset(15 * time.Second)
			}
		}()
		go func() {
			for {
				if _, _, err := ws.Read(ctx); err != nil {
					return
				}
			}
		}()
	}
	io.Copy(io.Discard, os.Stdin)
}

func dialIdle(ctx context.Context, url, id, token string) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, client.WebSocketURL(url), nil)
	if err != nil {
		return nil, err
	}
	auth, _ := json.Marshal(map[string]any{"type": "auth", "agentId": id, "credential": map[string]any{"type": "agent_token", "token": token},
		"client": "bench", "clientVersion": "0", "bridgeProtocol": "claworld.delivery_reply.v1"})
	if err := ws.Write(dctx, websocket.MessageText, auth); err != nil {
		return nil, err
	}
	_, data, err := ws.Read(dctx)
	if err != nil {
		return nil, err
	}
	var f struct{ Event string }
	if err := json.Unmarshal(data, &f); err != nil || f.Event != "auth.ok" {
		return nil, fmt.Errorf("auth: %s", data)
	}
	return ws, nil
}
