package busbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSServerArg is the hidden subcommand under which the bench binary runs
// an embedded nats-server in a child process. The machines' packaged
// nats-server (2.9) predates `sync_interval: always`, so the bench embeds
// nats-server v2.15 and still keeps the server in its own process, like
// Redis.
const NATSServerArg = "__nats-server"

// RunNATSServer runs a nats-server from configFile until SIGTERM/SIGINT.
func RunNATSServer(configFile string) error {
	opts, err := server.ProcessConfigFile(configFile)
	if err != nil {
		return err
	}
	opts.NoSigs = true
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	s.ConfigureLogger()
	go s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		return errors.New("nats-server not ready after 15s")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// JetStream is the NATS JetStream peer: file-backed work-queue streams
// fsynced on every write (`sync_interval: always`), subjects bench.<agent>
// (one stream for all agents, or one per agent), and one durable push
// consumer per agent with explicit acks. Each agent
// has its own NATS connection, which it publishes on (waiting for the
// PubAck) and receives its pushes on; acks wait for the server's
// confirmation (DoubleAck).
type JetStream struct {
	// Prefetch is the consumer's MaxAckPending (Switchboard's prefetch).
	Prefetch int
	// Size is the message size.
	Size int
	// StreamPerAgent gives every agent its own stream (BENCH_<i>, subject
	// bench.<i>) instead of one shared stream with a filtered consumer
	// per agent. JetStream orders and fsyncs each stream's writes one at a
	// time, so separate streams let writes to different agents proceed in
	// parallel.
	StreamPerAgent bool

	dir   string
	srv   *child
	url   string
	conns []*nats.Conn
	js    []jetstream.JetStream
	subs  []jetstream.ConsumeContext
	h     Handler
}

// Name implements System.
func (*JetStream) Name() string { return "jetstream" }

// Store implements System.
func (j *JetStream) Store() string {
	if j.StreamPerAgent {
		return "file, sync always, stream per agent"
	}
	return "file, sync always, one stream"
}

// Start implements System.
func (j *JetStream) Start(ctx context.Context, n int, h Handler) error {
	j.h = h
	var err error
	if j.dir, err = tempDir("nats"); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	conf := filepath.Join(j.dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\nmax_payload: 1MB\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", port, filepath.Join(j.dir, "js"))
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if j.srv, err = startChild(exe, NATSServerArg, conf); err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := j.srv.waitTCP(ctx, addr); err != nil {
		return err
	}
	j.url = "nats://" + addr
	for i := 0; i < n; i++ {
		nc, err := nats.Connect(j.url, nats.Name(fmt.Sprintf("agent-%d", i)))
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		j.conns = append(j.conns, nc)
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		j.js = append(j.js, js)
	}
	streams := []string{"BENCH"}
	subjects := [][]string{{"bench.>"}}
	if j.StreamPerAgent {
		streams, subjects = nil, nil
		for i := 0; i < n; i++ {
			streams = append(streams, fmt.Sprintf("BENCH_%d", i))
			subjects = append(subjects, []string{fmt.Sprintf("bench.%d", i)})
		}
	}
	for k, name := range streams {
		if _, err := j.js[0].CreateStream(ctx, jetstream.StreamConfig{
			Name: name, Subjects: subjects[k], Storage: jetstream.FileStorage,
			Retention: jetstream.WorkQueuePolicy, Replicas: 1,
		}); err != nil {
			return fmt.Errorf("create stream: %w", err)
		}
	}
	for i := 0; i < n && h.Delivered != nil; i++ {
		stream := streams[0]
		if j.StreamPerAgent {
			stream = streams[i]
		}
		cons, err := j.js[i].CreateOrUpdatePushConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable: fmt.Sprintf("agent-%d", i), FilterSubject: fmt.Sprintf("bench.%d", i),
			DeliverSubject: fmt.Sprintf("deliver.%d", i), AckPolicy: jetstream.AckExplicitPolicy,
			MaxAckPending: j.Prefetch, AckWait: 60 * time.Second,
		})
		if err != nil {
			return fmt.Errorf("create consumer: %w", err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			data := m.Data()
			h.Delivered(data)
			go func() {
				actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := m.DoubleAck(actx); err != nil {
					h.Failed(fmt.Errorf("ack: %w", err))
					return
				}
				h.Acked(data)
			}()
		})
		if err != nil {
			return fmt.Errorf("consume: %w", err)
		}
		j.subs = append(j.subs, cc)
	}
	return nil
}

// Send implements System.
func (j *JetStream) Send(ctx context.Context, from, to int, st Stamp) error {
	_, err := j.js[from].Publish(ctx, fmt.Sprintf("bench.%d", to), st.Body(j.Size))
	return err
}

// Notes implements System.
func (j *JetStream) Notes() string {
	return "push consumers, DoubleAck, nats-server v2.15.2 in a child process"
}

// ServerCPU is the CPU time the server process has used so far.
func (j *JetStream) ServerCPU() time.Duration { return j.srv.cpu() }

// Close implements System.
func (j *JetStream) Close() error {
	for _, s := range j.subs {
		s.Stop()
	}
	for _, nc := range j.conns {
		nc.Close()
	}
	err := j.srv.stop()
	if j.dir != "" {
		os.RemoveAll(j.dir)
	}
	return err
}
