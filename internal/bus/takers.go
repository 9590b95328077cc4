package bus

import (
	"sync"
	"time"
)

// A Taker is a consumer on this node (a socket) that takes deliveries as
// they are accepted, without claiming them: when it has room and nothing
// older is waiting for it, the accepting transaction leases the new
// delivery to it directly (state leased, attempt 1, the "delivered" log
// row), and the taker pushes it once that transaction has committed. The
// delivery is durable before it is pushed, as a claimed one is, and the
// hop through a claim — a second transaction, a second fsync — is saved.
//
// Anything a taker does not take is queued and claimed as before; a taken
// delivery whose push never happens (the socket closed meanwhile) is
// requeued by the sweeper when its lease runs out, like a claimed one.
type Taker interface {
	// Lease is the lease a taken delivery gets (0: the bus default).
	Lease() time.Duration
	// Reserve is called inside the accepting transaction, which must not
	// wait: it takes a prefetch slot for the delivery and reports true, or
	// reports false when the taker has no room or deliveries may be
	// waiting for it that it has not claimed yet (they come first).
	// session is the delivery's session ("" for any).
	Reserve(deliveryID, session string, leaseUntil time.Time) bool
	// Take hands over a reserved delivery after its transaction committed.
	// It runs on the committing goroutine and must not block. A reserved
	// delivery whose transaction failed is never handed over; its slot
	// frees when its lease would have ended.
	Take(d Delivery)
}

// takers are the Takers of this node, by agent, each with the session it
// serves ("" for all).
type takers struct {
	mu sync.RWMutex
	m  map[string][]takerEntry
}

type takerEntry struct {
	session string
	t       Taker
}

// AddTaker registers t for agentID's deliveries of session ("" for all
// sessions) until the returned function is called.
func (s *Service) AddTaker(agentID, session string, t Taker) (remove func()) {
	s.takers.mu.Lock()
	if s.takers.m == nil {
		s.takers.m = map[string][]takerEntry{}
	}
	s.takers.m[agentID] = append(s.takers.m[agentID], takerEntry{session, t})
	s.takers.mu.Unlock()
	return func() {
		s.takers.mu.Lock()
		defer s.takers.mu.Unlock()
		list := s.takers.m[agentID]
		for i, e := range list {
			if e.t == t {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(s.takers.m, agentID)
		} else {
			s.takers.m[agentID] = list
		}
	}
}

// reserve finds a taker of agentID for a delivery of session and reserves
// a slot with it: a taker of exactly that session first, then one of all
// sessions. Claims match the same way (a delivery without a session goes
// to any connection of the agent).
func (s *Service) reserve(agentID, session, deliveryID string, now time.Time) (Taker, time.Time, bool) {
	s.takers.mu.RLock()
	list := s.takers.m[agentID]
	s.takers.mu.RUnlock()
	for pass := 0; pass < 2; pass++ {
		for _, e := range list {
			exact := e.session == session
			if (pass == 0) != exact || (!exact && e.session != "" && session != "") {
				continue
			}
			lease := e.t.Lease()
			if lease <= 0 {
				lease = s.cfg.LeaseDuration
			}
			until := now.Add(lease)
			if e.t.Reserve(deliveryID, session, until) {
				return e.t, until, true
			}
		}
	}
	return nil, time.Time{}, false
}
