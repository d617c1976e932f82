package stack_test

import (
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/mplsnode/mplsnode/stack"
)

// The ICMP error limit as documented (README, "The CLI": "100 a second,
// bursts of 10"), written here as literals on purpose: an expectation taken
// from stack.ICMPRateLimit or stack.ICMPBurst would follow the code it
// checks.
const (
	documentedICMPRate  = 100 // messages a second
	documentedICMPBurst = 10
)

// TestICMPLimitDocumented checks that a new stack's ICMP error bucket is
// the documented one: the limiter's configured rate and burst, and its
// behaviour: from a full bucket, a tight run of requests is granted the
// burst and no more than the rate refills meanwhile.
//
// Checked by planting the bug: with stack.ICMPBurst doubled to 20 the test
// fails on the configured burst (20, want 10) and on the run (20 granted).
func TestICMPLimitDocumented(t *testing.T) {
	s, err := stack.New(stack.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ns := s.Netstack()
	if got := ns.ICMPLimit(); got != rate.Limit(documentedICMPRate) {
		t.Errorf("got ICMP rate %v a second, want %d (documented)", got, documentedICMPRate)
	}
	if got := ns.ICMPBurst(); got != documentedICMPBurst {
		t.Errorf("got ICMP burst %d, want %d (documented)", got, documentedICMPBurst)
	}
	start := time.Now()
	granted := 0
	for range 10 * documentedICMPBurst {
		if ns.AllowICMPMessage() {
			granted++
		}
	}
	// What the bucket may have refilled while the loop ran (normally
	// nothing: the loop takes microseconds), rounded up.
	refill := int(time.Since(start).Seconds()*documentedICMPRate) + 1
	if granted < documentedICMPBurst || granted > documentedICMPBurst+refill {
		t.Errorf("got %d of %d ICMP messages allowed at once, want the burst %d (plus at most %d refilled)",
			granted, 10*documentedICMPBurst, documentedICMPBurst, refill)
	}
}
