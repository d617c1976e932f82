// Package lograte keeps drop warnings from flooding the log: for each reason
// a Limiter lets one warning through per Interval and counts the events it
// held back, so the next warning can say how many were suppressed. It is
// lock-free and allocates nothing, for use on the packet path.
package lograte

import (
	"sync/atomic"
	"time"
)

// Interval is the minimum time between two warnings for the same reason.
const Interval = time.Second

// Limiter rate-limits the warnings of one reason. The zero value is ready
// to use; keep one per reason (an array indexed by the reason).
type Limiter struct {
	last       atomic.Int64  // unix nanoseconds of the last warning let through
	suppressed atomic.Uint64 // events held back since then
}

// Allow records n events now. It reports whether a warning may be logged
// and, if so, how many events were held back since the last one; otherwise
// the n events join the held-back count.
func (l *Limiter) Allow(n uint64) (suppressed uint64, ok bool) {
	now := time.Now().UnixNano()
	last := l.last.Load()
	if now-last < int64(Interval) || !l.last.CompareAndSwap(last, now) {
		l.suppressed.Add(n)
		return 0, false
	}
	return l.suppressed.Swap(0), true
}
