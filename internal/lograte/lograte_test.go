package lograte_test

import (
	"testing"

	"github.com/mplsnode/mplsnode/internal/lograte"
)

func TestAllowOncePerInterval(t *testing.T) {
	var l lograte.Limiter
	if s, ok := l.Allow(1); !ok || s != 0 {
		t.Fatalf("first Allow = (%d, %v), want (0, true)", s, ok)
	}
	for i := 0; i < 5; i++ {
		if _, ok := l.Allow(2); ok {
			t.Fatalf("Allow #%d within the interval let a warning through", i+2)
		}
	}
	if n := testing.AllocsPerRun(100, func() { l.Allow(1) }); n != 0 {
		t.Errorf("Allow allocates %v times per call, want 0", n)
	}
}
