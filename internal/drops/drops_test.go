package drops_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/internal/drops"
)

type reason uint8

// TestCounters counts by reason, ignores reasons out of range, snapshots,
// and logs one warning a second per reason naming the reason, remedy,
// label and cause. Checked by planting: Add counting into reason 0 fails
// the per-reason counts.
func TestCounters(t *testing.T) {
	var log bytes.Buffer
	c := drops.New[reason]("test: drop", []string{"a", "b"}, []string{"fix a", "fix b"}, slog.New(slog.NewTextHandler(&log, nil)))
	c.Add(0, 1, 100, nil)
	c.Add(1, 3, -1, errors.New("boom"))
	c.Add(1, 2, -1, nil) // counted, warning held back
	c.Add(7, 1, -1, nil) // out of range: ignored
	if c.Load(0) != 1 || c.Load(1) != 5 || c.Load(7) != 0 {
		t.Errorf("counts %d %d %d, want 1 5 0", c.Load(0), c.Load(1), c.Load(7))
	}
	snap := make([]uint64, 3)
	c.Snapshot(snap)
	if snap[0] != 1 || snap[1] != 5 || snap[2] != 0 {
		t.Errorf("snapshot %v, want [1 5 0]", snap)
	}
	out := log.String()
	if strings.Count(out, "test: drop") != 2 || !strings.Contains(out, "reason=a") || !strings.Contains(out, "label=100") ||
		!strings.Contains(out, `remedy="fix b"`) || !strings.Contains(out, "cause=boom") {
		t.Errorf("log:\n%s\nwant two warnings naming reason, remedy, label and cause", out)
	}
}

// BenchmarkAdd: counting a drop whose warning is held back allocates
// nothing (it is on the packet path).
func BenchmarkAdd(b *testing.B) {
	c := drops.New[reason]("test: drop", []string{"a"}, []string{"fix a"}, slog.New(slog.DiscardHandler))
	c.Add(0, 1, 5, nil)
	b.ReportAllocs()
	for range b.N {
		c.Add(0, 1, 5, nil)
	}
}
