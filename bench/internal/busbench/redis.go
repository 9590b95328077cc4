package busbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the Redis Streams peer: redis-server with an append-only file
// fsynced before every reply (`appendonly yes`, `appendfsync always`), one
// stream per agent (bench:<agent>) with one consumer group. A producer
// XADDs to the recipient's stream; the recipient blocks in XREADGROUP
// (the reply is Redis's push) and XACKs each entry. Each agent has its own
// small connection pool: Redis cannot multiplex a blocking read with other
// commands on one connection.
type Redis struct {
	// Prefetch is the COUNT of each XREADGROUP (Switchboard's prefetch).
	Prefetch int
	// Size is the message size.
	Size int

	dir     string
	srv     *child
	clients []*redis.Client
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Name implements System.
func (*Redis) Name() string { return "redis" }

// Store implements System.
func (*Redis) Store() string { return "aof, appendfsync always" }

// RedisVersion reports the redis-server on PATH, for the report.
func RedisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// Start implements System.
func (r *Redis) Start(ctx context.Context, n int, h Handler) error {
	var err error
	if r.dir, err = tempDir("redis"); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	r.srv, err = startChild("redis-server", "--port", itoa(port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
		"--protected-mode", "no", "--logfile", "", "--maxclients", "10000")
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := r.srv.waitTCP(ctx, addr); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 8, MinIdleConns: 2, ReadTimeout: -1, WriteTimeout: 10 * time.Second})
		r.clients = append(r.clients, c)
		if err := c.XGroupCreateMkStream(ctx, stream(i), "g", "0").Err(); err != nil {
			return fmt.Errorf("create group: %w", err)
		}
	}
	cctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for i := 0; i < n && h.Delivered != nil; i++ {
		r.wg.Add(1)
		go r.consume(cctx, i, h)
	}
	return nil
}

func stream(i int) string { return fmt.Sprintf("bench:%d", i) }

func (r *Redis) consume(ctx context.Context, i int, h Handler) {
	defer r.wg.Done()
	c := r.clients[i]
	key := stream(i)
	// Like the others' prefetch, at most Prefetch entries are unacked.
	slots := make(chan struct{}, r.Prefetch)
	for ctx.Err() == nil {
		free := r.Prefetch - len(slots)
		if free <= 0 {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{key, ">"},
			Count: int64(free), Block: time.Second}).Result()
		if err != nil {
			if errors.Is(err, redis.Nil) || ctx.Err() != nil {
				continue
			}
			h.Failed(fmt.Errorf("xreadgroup: %w", err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for _, s := range res {
			for _, m := range s.Messages {
				data := []byte(fmt.Sprint(m.Values["d"]))
				h.Delivered(data)
				slots <- struct{}{}
				go func(id string) {
					defer func() { <-slots }()
					actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					if err := c.XAck(actx, key, "g", id).Err(); err != nil {
						h.Failed(fmt.Errorf("xack: %w", err))
						return
					}
					h.Acked(data)
				}(m.ID)
			}
		}
	}
}

// Send implements System.
func (r *Redis) Send(ctx context.Context, from, to int, st Stamp) error {
	return r.clients[from].XAdd(ctx, &redis.XAddArgs{Stream: stream(to), Values: []any{"d", st.Body(r.Size)}}).Err()
}

// Notes implements System.
func (r *Redis) Notes() string { return RedisVersion() }

// ServerCPU is the CPU time the server process has used so far.
func (r *Redis) ServerCPU() time.Duration { return r.srv.cpu() }

// Close implements System.
func (r *Redis) Close() error {
	if r.cancel != nil {
		r.cancel()
	}
	for _, c := range r.clients {
		c.Close()
	}
	r.wg.Wait()
	err := r.srv.stop()
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
	return err
}
