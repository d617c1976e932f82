// Package drops is the data path's one drop-counter type: a counter per
// reason and a rate-limited warning (package lograte) that names the
// reason, the remedy, the label involved and the cause. The link endpoint
// (link/mplsendpoint) and the forwarding plane (forward) each keep a
// Counters over their own reason type; the reason names are the counter
// names of `mplsnode stats` and /metrics. Counting and (suppressed)
// warnings allocate nothing.
package drops

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/mplsnode/mplsnode/internal/lograte"
)

// Counters counts discards by reason R, a small integer type whose values
// index names. Create it with New; it is safe for concurrent use.
type Counters[R ~uint8] struct {
	msg      string
	names    []string
	remedies []string
	log      *slog.Logger
	n        []atomic.Uint64
	warn     []lograte.Limiter
}

// New returns counters for len(names) reasons: names[r] is reason r's
// counter name, remedies[r] what an operator can do about it (logged with
// the warning). msg is the warning's message ("label switch: drop"); log
// nil means no warnings.
func New[R ~uint8](msg string, names, remedies []string, log *slog.Logger) *Counters[R] {
	return &Counters[R]{msg: msg, names: names, remedies: remedies, log: log,
		n: make([]atomic.Uint64, len(names)), warn: make([]lograte.Limiter, len(names))}
}

// Add counts n discards for reason r and logs at most one warning a second
// per reason, with the label involved (none if label < 0) and the cause
// (if not nil). An r out of range is ignored.
func (c *Counters[R]) Add(r R, n uint64, label int64, cause error) {
	if int(r) >= len(c.n) {
		return
	}
	c.n[r].Add(n)
	if c.log == nil {
		return
	}
	suppressed, ok := c.warn[r].Allow(n)
	if !ok {
		return
	}
	attrs := []slog.Attr{
		slog.String("reason", c.names[r]),
		slog.String("remedy", c.remedies[r]),
		slog.Uint64("suppressed", suppressed),
	}
	if label >= 0 {
		attrs = append(attrs, slog.Int64("label", label))
	}
	if cause != nil {
		attrs = append(attrs, slog.String("cause", cause.Error()))
	}
	c.log.LogAttrs(context.Background(), slog.LevelWarn, c.msg, attrs...)
}

// Load returns reason r's count (0 for an r out of range).
func (c *Counters[R]) Load(r R) uint64 {
	if int(r) >= len(c.n) {
		return 0
	}
	return c.n[r].Load()
}

// Snapshot copies every count into dst (up to its length).
func (c *Counters[R]) Snapshot(dst []uint64) {
	for i := range min(len(dst), len(c.n)) {
		dst[i] = c.n[i].Load()
	}
}
