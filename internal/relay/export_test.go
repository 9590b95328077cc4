package relay

import "time"

// SetTurnObserver makes the relay hand every turn timing to f (benchmarks
// read exact percentiles instead of histogram buckets); nil stops it.
func SetTurnObserver(s *Service, f func(time.Duration)) {
	s.turns.mu.Lock()
	s.turns.observe = f
	s.turns.mu.Unlock()
}
