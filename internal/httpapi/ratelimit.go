package httpapi

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Limits are the request rate limits of the API: per agent on
// authenticated calls (the admin is not limited), and per client address on
// public endpoints anyone may call (self-registration). Zero disables a
// limit.
type Limits struct {
	AgentRate  float64 // sustained requests per second per agent
	AgentBurst int
	IPRate     float64 // sustained public POSTs per second per address
	IPBurst    int
}

// DefaultLimits are generous for agents (a busy agent makes tens of calls a
// second) and tight enough on public endpoints to stop scripted sign-ups.
var DefaultLimits = Limits{AgentRate: 100, AgentBurst: 200, IPRate: 2, IPBurst: 20}

// limiter keeps one token bucket per key, forgetting idle keys.
type limiter struct {
	mu      sync.Mutex
	rate    rate.Limit
	burst   int
	buckets map[string]*bucket
	sweep   time.Time
}

type bucket struct {
	l    *rate.Limiter
	seen time.Time
}

func newLimiter(r float64, burst int) *limiter {
	if r <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = int(math.Ceil(r))
	}
	return &limiter{rate: rate.Limit(r), burst: burst, buckets: map[string]*bucket{}}
}

// allow reports whether key may make a request now, and if not, how long
// until it may.
func (l *limiter) allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.sweep) > time.Minute {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > 10*time.Minute {
				delete(l.buckets, k)
			}
		}
		l.sweep = now
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{l: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[key] = b
	}
	b.seen = now
	r := b.l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func rateLimited(who string, wait time.Duration) *protocol.Error {
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	return &protocol.Error{Class: protocol.ClassUnavailable, Code: "rate_limited", Status: http.StatusTooManyRequests,
		Message:    fmt.Sprintf("too many requests from %s; retry in %ds", who, secs),
		NextAction: "slow down and retry after the Retry-After delay", Extra: map[string]any{"retryAfterSeconds": secs}}
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func setRetryAfter(w http.ResponseWriter, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
}
