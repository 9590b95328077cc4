package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// The reliability promise of DESIGN.md, tested the hard way: the hub is
// killed with SIGKILL at random moments while senders post envelopes and
// consumers claim and ack them, over HTTP and over sockets, and restarted on
// the same data each time. In the end:
//
//   - every envelope that got a 2xx was delivered to its recipient, with the
//     envelope its sender wrote, and acknowledged;
//   - no message was acknowledged twice, and once an ack got a 2xx the
//     delivery never came back (a redelivery of an unacked delivery after a
//     kill is expected: delivery is at least once);
//   - no agent ever received a delivery addressed to another agent;
//   - the store agrees: one message per (sender, id), one delivery per
//     message, each processed once in the message log.

const (
	adminToken = "sba_crash_test_admin"
	kills      = 5
	senders    = 3
	receivers  = 3
	leaseTime  = 3 * time.Second // short, so deliveries leased at a kill come back quickly
)

var (
	buildOnce sync.Once
	buildDir  string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binary builds ./cmd/switchboard once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		root, err := filepath.Abs("..")
		if err != nil {
			buildErr = err
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "switchboard-e2e-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "switchboard")
		cmd := exec.Command(goTool, "build", "-o", binPath, "./cmd/switchboard")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// hubProcess is `switchboard serve` as a child process on a fixed address
// and data directory, so it can be killed and started again on both.
type hubProcess struct {
	t       *testing.T
	bin     string
	addr    string
	dataDir string
	db      string
	logPath string
	args    []string // extra serve flags

	cmd    *exec.Cmd
	exited chan struct{}
}

// freeAddr picks a loopback port once; restarts reuse it so clients (and
// reconnecting sockets) find the hub at the same URL.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (p *hubProcess) url() string { return "http://" + p.addr }

// env is the test's environment without SWITCHBOARD_* variables, so the
// child hub is configured by its flags alone.
func childEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHBOARD_") {
			out = append(out, kv)
		}
	}
	return out
}

func (p *hubProcess) start() {
	p.t.Helper()
	for try := 0; ; try++ {
		logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			p.t.Fatal(err)
		}
		fmt.Fprintf(logf, "\n=== start %s\n", time.Now().Format(time.RFC3339Nano))
		args := []string{"serve", "--addr", p.addr, "--data", p.dataDir, "--admin-token", adminToken,
			"--lease", leaseTime.String(), "--log-format", "json", "--log-level", "warn"}
		if p.db != "" {
			args = append(args, "--db", p.db)
		}
		args = append(args, p.args...)
		cmd := exec.Command(p.bin, args...)
		cmd.Env = childEnv()
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			p.t.Fatalf("start hub: %v", err)
		}
		exited := make(chan struct{})
		go func() {
			cmd.Wait()
			logf.Close()
			close(exited)
		}()
		p.cmd, p.exited = cmd, exited
		if p.waitHealthy(20 * time.Second) {
			return
		}
		// The port can be briefly unavailable right after a kill; try again.
		p.kill()
		if try == 3 {
			p.t.Fatalf("hub did not become healthy; log:\n%s", p.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (p *hubProcess) waitHealthy(limit time.Duration) bool {
	c := client.New(p.url(), "")
	c.HTTP = &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return false
		default:
		}
		if _, err := c.Health(context.Background()); err == nil {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *hubProcess) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.cmd = nil
}

// stop asks the hub to shut down gracefully.
func (p *hubProcess) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.t.Errorf("hub ignored SIGTERM; killing it")
		p.kill()
	}
	p.cmd = nil
}

func (p *hubProcess) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// sentMsg is what a sender wrote, recorded before its first attempt.
type sentMsg struct {
	from, to string
	payload  map[string]any
}

type receipt struct {
	consumer, deliveryID string
	attempt              int
}

type ackRec struct {
	deliveryID string
	attempt    int
}

// ledger is the test's record of what happened, against which the
// guarantees are checked.
type ledger struct {
	mu         sync.Mutex
	sent       map[string]sentMsg   // envelope id → what was sent
	accepted   map[string]bool      // a send of this id got a 2xx
	receipts   map[string][]receipt // envelope id → every delivery handed to a consumer
	acks       map[string][]ackRec  // envelope id → every ack that got a 2xx (first ones and repeats)
	firstAcks  map[string]int       // envelope id → acks answered as newly applied
	refused    map[string]int       // ack refusals by code (a lease lost to a kill)
	violations []string
}

func newLedger() *ledger {
	return &ledger{sent: map[string]sentMsg{}, accepted: map[string]bool{}, receipts: map[string][]receipt{},
		acks: map[string][]ackRec{}, firstAcks: map[string]int{}, refused: map[string]int{}}
}

func (l *ledger) violate(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.violations) < 50 {
		l.violations = append(l.violations, fmt.Sprintf(format, args...))
	}
}

// received checks a delivery against what was sent and records it.
func (l *ledger) received(consumer string, d client.Delivery) (string, bool) {
	env, err := d.Decode()
	if err != nil {
		l.violate("%s: undecodable delivery %s: %v", consumer, d.DeliveryID, err)
		return "", false
	}
	var payload map[string]any
	_ = json.Unmarshal(env.Payload, &payload)
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.sent[env.ID]
	switch {
	case !ok:
		l.violations = append(l.violations, fmt.Sprintf("%s received %s, which nobody sent", consumer, env.ID))
		return "", false
	case env.To.Agent != consumer || s.to != consumer:
		l.violations = append(l.violations, fmt.Sprintf("%s received %s addressed to %s (sent to %s)", consumer, env.ID, env.To.Agent, s.to))
		return "", false
	case env.From.Agent != s.from || !reflect.DeepEqual(payload, s.payload):
		l.violations = append(l.violations, fmt.Sprintf("%s received %s altered: from %s payload %s", consumer, env.ID, env.From.Agent, env.Payload))
		return "", false
	}
	l.receipts[env.ID] = append(l.receipts[env.ID], receipt{consumer: consumer, deliveryID: d.DeliveryID, attempt: d.Attempt})
	return env.ID, true
}

func (l *ledger) acked(id string, d client.Delivery, s client.Settle) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks[id] = append(l.acks[id], ackRec{deliveryID: d.DeliveryID, attempt: d.Attempt})
	if !s.AlreadyApplied {
		l.firstAcks[id]++
	}
}

func (l *ledger) ackRefused(code string) {
	l.mu.Lock()
	l.refused[code]++
	l.mu.Unlock()
}

func (l *ledger) acceptedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

// pending lists accepted ids not yet acknowledged.
func (l *ledger) pending() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id := range l.accepted {
		if len(l.acks[id]) == 0 {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// retryable reports whether err means the hub was unreachable (killed,
// restarting), as opposed to an answer from it.
func retryable(err error) bool {
	return err != nil && client.Code(err) == "" && client.Status(err) == 0
}

func newClient(url, token string) *client.Client {
	c := client.New(url, token)
	c.HTTP = &http.Client{Timeout: 10 * time.Second}
	return c
}

// send posts envelopes with their own ids until ctx ends, retrying each id
// until the hub answers (a retry after a kill may be a duplicate of an
// envelope the hub had already accepted; the answer says so).
func send(ctx context.Context, l *ledger, c *client.Client, senderIdx int, from string, to []string) {
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("s%d-%05d", senderIdx, n)
		recipient := to[n%len(to)]
		payload := map[string]any{"event": "load", "message": id, "sender": from, "recipient": recipient, "n": float64(n)}
		raw, _ := json.Marshal(payload)
		l.mu.Lock()
		l.sent[id] = sentMsg{from: from, to: recipient, payload: payload}
		l.mu.Unlock()
		for ctx.Err() == nil {
			env := &client.Envelope{ID: id, To: client.Address{Agent: recipient}, Type: "notification", Payload: raw}
			res, err := c.Send(ctx, env)
			if err == nil {
				if res.ID != id {
					l.violate("send %s answered for %s", id, res.ID)
				}
				l.mu.Lock()
				l.accepted[id] = true
				l.mu.Unlock()
				break
			}
			if !retryable(err) {
				if ctx.Err() == nil {
					l.violate("send %s refused: %v", id, err)
				}
				return
			}
			sleep(ctx, 30*time.Millisecond)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// ackRefusalOK lists the answers a consumer may get when its lease was lost
// to a kill: the delivery was (or will be) redelivered.
func ackRefusalOK(code string) bool {
	switch code {
	case "stale_attempt", "lease_expired", "delivery_not_leased":
		return true
	}
	return false
}

// work is how long a consumer spends on each delivery before acking it.
// While the senders run it is long enough that consumers fall behind and
// always hold leased, unacknowledged deliveries when the hub is killed; the
// drain sets it to zero.
var work atomic.Int64

func doWork(ctx context.Context) { sleep(ctx, time.Duration(work.Load())) }

// pollConsumer claims batches over HTTP long-polls and acks each delivery
// over HTTP. When the hub dies under an ack it repeats that ack until the
// restarted hub answers (acks are idempotent), and drops the rest of the
// batch, as a consumer that crashed with the hub would: those deliveries
// must come back when their lease ends.
func pollConsumer(ctx context.Context, l *ledger, c *client.Client, me string) {
	for ctx.Err() == nil {
		ds, err := c.Inbox(ctx, client.InboxOptions{Limit: 20, Wait: time.Second})
		if err != nil {
			if !retryable(err) && ctx.Err() == nil {
				l.violate("%s inbox: %v", me, err)
			}
			sleep(ctx, 30*time.Millisecond)
			continue
		}
		abandon := false
		for _, d := range ds {
			id, ok := l.received(me, d)
			if !ok || abandon {
				continue
			}
			doWork(ctx)
			for ctx.Err() == nil {
				s, err := c.Ack(ctx, d.DeliveryID, d.Attempt)
				if err == nil {
					l.acked(id, d, s)
					break
				}
				if !retryable(err) {
					if ackRefusalOK(client.Code(err)) {
						l.ackRefused(client.Code(err))
					} else if ctx.Err() == nil {
						l.violate("%s ack %s: %v", me, d.DeliveryID, err)
					}
					break
				}
				abandon = true
				sleep(ctx, 30*time.Millisecond) // hub down: repeat the same ack
			}
		}
	}
}

// socketConsumer receives pushed deliveries and acks them on the socket,
// which reconnects by itself after each kill.
func socketConsumer(ctx context.Context, l *ledger, c *client.Client, me string) {
	var s *client.Socket
	for ctx.Err() == nil {
		var err error
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		s, err = c.Connect(cctx, client.ConnectOptions{Prefetch: 32})
		cancel()
		if err == nil {
			break
		}
		sleep(ctx, 50*time.Millisecond)
	}
	if s == nil {
		return
	}
	defer s.Close()
	for {
		d, err := s.Receive(ctx)
		if err != nil {
			return
		}
		id, ok := l.received(me, d)
		if !ok {
			continue
		}
		doWork(ctx)
		for ctx.Err() == nil {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			st, err := s.Ack(actx, d)
			cancel()
			if err == nil {
				l.acked(id, d, st)
				break
			}
			if code := client.Code(err); code != "" {
				if ackRefusalOK(code) {
					l.ackRefused(code)
				} else {
					l.violate("%s socket ack %s: %v", me, d.DeliveryID, err)
				}
				break
			}
			sleep(ctx, 30*time.Millisecond) // connection lost: repeat the ack on the next one
		}
	}
}

func TestKill9UnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the hub repeatedly; skipped with -short")
	}
	bin := binary(t)
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		db := ""
		if strings.HasPrefix(dsn, "postgres") {
			db = dsn
		}
		dataDir := t.TempDir()
		// Without rate limits: the senders drive the hub as fast as it
		// accepts, and a 429 would stop a sender (any refusal is a
		// violation here), leaving no load across the kills.
		p := &hubProcess{t: t, bin: bin, addr: freeAddr(t), dataDir: dataDir, db: db, logPath: filepath.Join(dataDir, "hub.log"),
			args: []string{"--rate-limit", "0"}}
		p.start()
		defer p.kill()
		defer func() {
			if t.Failed() {
				t.Logf("hub log:\n%s", p.logTail())
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()

		admin := newClient(p.url(), adminToken)
		var senderIDs, receiverIDs []string
		var senderClients, receiverClients []*client.Client
		for i := 0; i < senders; i++ {
			a, err := admin.CreateAgent(ctx, client.CreateAgentParams{DisplayName: fmt.Sprintf("Sender %d", i)})
			if err != nil {
				t.Fatal(err)
			}
			senderIDs, senderClients = append(senderIDs, a.ID), append(senderClients, newClient(p.url(), a.Token))
		}
		for i := 0; i < receivers; i++ {
			a, err := admin.CreateAgent(ctx, client.CreateAgentParams{DisplayName: fmt.Sprintf("Receiver %d", i)})
			if err != nil {
				t.Fatal(err)
			}
			receiverIDs, receiverClients = append(receiverIDs, a.ID), append(receiverClients, newClient(p.url(), a.Token))
		}

		l := newLedger()
		work.Store(int64(20 * time.Millisecond))
		consumeCtx, stopConsumers := context.WithCancel(ctx)
		sendCtx, stopSenders := context.WithCancel(ctx)
		var consumers, producers sync.WaitGroup
		for i, id := range receiverIDs {
			consumers.Add(1)
			go func() {
				defer consumers.Done()
				if i%2 == 1 {
					socketConsumer(consumeCtx, l, receiverClients[i], id)
				} else {
					pollConsumer(consumeCtx, l, receiverClients[i], id)
				}
			}()
		}
		for i := range senderIDs {
			producers.Add(1)
			go func() {
				defer producers.Done()
				send(sendCtx, l, senderClients[i], i, senderIDs[i], receiverIDs)
			}()
		}

		seed := time.Now().UnixNano()
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		t.Logf("kill schedule seed %d", seed)
		var atKill []int
		for k := 0; k < kills; k++ {
			sleep(ctx, time.Duration(600+rng.IntN(1400))*time.Millisecond)
			atKill = append(atKill, l.acceptedCount())
			p.kill()
			p.start()
		}
		sleep(ctx, time.Second)
		stopSenders()
		producers.Wait()
		atKill = append(atKill, l.acceptedCount())
		for i := 1; i < len(atKill); i++ {
			if atKill[i] <= atKill[i-1] {
				t.Errorf("no envelope was accepted between kill %d and the next (%v): the load did not survive the restart", i, atKill)
			}
		}

		// Drain: everything accepted must be acknowledged (deliveries leased
		// at a kill come back when their lease ends).
		work.Store(0)
		deadline := time.Now().Add(30 * time.Second)
		for len(l.pending()) > 0 && time.Now().Before(deadline) {
			sleep(ctx, 100*time.Millisecond)
		}
		stopConsumers()
		consumers.Wait()
		p.stop()

		l.mu.Lock()
		defer l.mu.Unlock()
		for _, v := range l.violations {
			t.Error(v)
		}
		missing := 0
		for id := range l.accepted {
			if len(l.acks[id]) == 0 {
				if missing++; missing <= 10 {
					t.Errorf("%s was accepted (2xx) but never delivered and acknowledged; receipts %+v", id, l.receipts[id])
				}
			}
		}
		if missing > 0 {
			t.Errorf("%d of %d accepted envelopes were lost", missing, len(l.accepted))
		}
		redelivered := 0
		for id, acks := range l.acks {
			if l.firstAcks[id] > 1 {
				t.Errorf("%s was acknowledged %d times", id, l.firstAcks[id])
			}
			for _, a := range acks[1:] {
				if a != acks[0] {
					t.Errorf("%s: acks of different attempts both succeeded: %+v", id, acks)
				}
			}
			for _, r := range l.receipts[id] {
				if r.deliveryID != acks[0].deliveryID || r.attempt > acks[0].attempt {
					t.Errorf("%s came back after its ack got a 2xx: acked %+v, received %+v", id, acks[0], r)
				}
			}
			if len(l.receipts[id]) > 1 {
				redelivered++
			}
		}
		t.Logf("%d accepted, %d acknowledged, %d redelivered after a kill, refused acks %v, accepted at each kill %v",
			len(l.accepted), len(l.acks), redelivered, l.refused, atKill)
		if len(l.accepted) < 40 {
			t.Errorf("only %d envelopes accepted: too little load to mean anything", len(l.accepted))
		}
		// (40 is a floor for a loaded machine; a quiet one accepts hundreds.)
		// Consumers are kept behind the senders, so every kill finds some
		// holding a claimed batch they then abandon: the run must have
		// exercised redelivery, or it proved nothing about it.
		if redelivered == 0 {
			t.Errorf("no delivery was redelivered across %d kills", kills)
		}

		checkStore(t, p, l)
	})
}

// checkStore opens the hub's store after the final shutdown and checks its
// own record: one message per accepted id (retries were deduplicated), one
// delivery per message to the right agent, every accepted one acked, and
// at most one "processed" log row per delivery.
func checkStore(t *testing.T, p *hubProcess, l *ledger) {
	dsn := p.db
	if dsn == "" {
		dsn = filepath.Join(p.dataDir, "switchboard.db")
	}
	ctx := context.Background()
	db, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatalf("open the hub's store: %v", err)
	}
	defer db.Close()
	rows, err := db.Query(ctx, `SELECT m.client_id, m.sender, d.agent_id, d.state FROM bus_messages m JOIN bus_deliveries d ON d.message_id = m.id`)
	if err != nil {
		t.Fatal(err)
	}
	perID := map[string]int{}
	for rows.Next() {
		var id, sender, agentID, state string
		if err := rows.Scan(&id, &sender, &agentID, &state); err != nil {
			t.Fatal(err)
		}
		perID[id]++
		s, ok := l.sent[id]
		switch {
		case !ok:
			t.Errorf("store holds %s, which no sender sent", id)
		case sender != s.from || agentID != s.to:
			t.Errorf("store: %s from %s to %s, sent from %s to %s", id, sender, agentID, s.from, s.to)
		case l.accepted[id] && state != "acked":
			t.Errorf("store: accepted %s is %s, not acked", id, state)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range l.accepted {
		if perID[id] != 1 {
			t.Errorf("store: accepted %s has %d deliveries, want 1", id, perID[id])
		}
	}
	rows, err = db.Query(ctx, `SELECT delivery_id, COUNT(*) FROM bus_log WHERE status = 'processed' GROUP BY delivery_id HAVING COUNT(*) > 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		t.Errorf("store: delivery %s was processed %d times", id, n)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
