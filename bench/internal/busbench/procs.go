package busbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// freePort asks the kernel for an unused loopback port. Another process
// could take it before the server binds it; on loopback in a benchmark run
// that race is acceptable.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// child is a peer server process started by the bench and stopped by it.
type child struct {
	name   string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
	err    error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startChild runs name with args, capturing its output for error reports.
func startChild(name string, args ...string) (*child, error) {
	c := &child{name: name, cmd: exec.Command(name, args...), stderr: &lockedBuffer{}, done: make(chan struct{})}
	c.cmd.Stdout = c.stderr
	c.cmd.Stderr = c.stderr
	// The child dies with the bench even if the bench is killed.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// waitTCP waits until addr accepts connections or the child exits.
func (c *child) waitTCP(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("%s exited: %v\n%s", c.name, c.err, c.stderr.String())
		case <-ctx.Done():
			return fmt.Errorf("%s did not listen on %s: %w\n%s", c.name, addr, ctx.Err(), c.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop terminates the child (SIGTERM, then SIGKILL after a grace period).
func (c *child) stop() error {
	if c == nil {
		return nil
	}
	select {
	case <-c.done:
		return nil
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	var ee *exec.ExitError
	if c.err != nil && !errors.As(c.err, &ee) {
		return c.err
	}
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }

// tempDir makes a scratch directory for one server's data.
func tempDir(prefix string) (string, error) {
	return os.MkdirTemp("", "sbbench-"+prefix+"-")
}

// cpu returns the CPU time (user + system) the child has used so far.
func (c *child) cpu() time.Duration {
	if c == nil || c.cmd.Process == nil {
		return 0
	}
	return procCPU(c.cmd.Process.Pid)
}

// procCPU reads a process's user and system time from /proc (clock ticks
// of 10 ms on Linux).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may contain spaces; fields resume after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// selfCPU is the CPU time of this process (hub and clients).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg is the one-minute load average, to show how busy the machine was.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// fsyncLatency times n 4 KiB writes each followed by fdatasync in a
// scratch file, and returns the median: every system here waits on this
// once per durable commit, and on a shared machine it varies by 10x.
func fsyncLatency(n int) time.Duration {
	f, err := os.CreateTemp("", "sbbench-fsync-")
	if err != nil {
		return 0
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := f.WriteAt(buf, int64(i)*4096); err != nil {
			return 0
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0
		}
		ds = append(ds, time.Since(start))
	}
	return percentiles(ds).P50
}
