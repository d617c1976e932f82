// Package leakcheck runs a test binary under gVisor's reference leak
// checking: a PacketBuffer or buffer chunk still referenced when the tests
// are done fails the binary. Only tests import it.
package leakcheck

import (
	"fmt"
	"os"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/refs"
)

// Grace is how long Main lets packets still in flight when the last test
// returns (a TCP segment a stack's goroutine is finishing with, a closed
// peer's reset crossing a pipe) reach their owners before a reference
// still held counts as a leak: a leak holds its reference for ever. (In
// link/mplsendpoint's tests, 3 runs in 40 found a reference held when the
// last test returned; with a second's wait first, 0 in 40.)
const Grace = 5 * time.Second

// Main is a TestMain: it runs m's tests with leak checking on, then fails
// (panics, naming the leaked objects) if a reference is still held Grace
// after they returned, and exits with the tests' code otherwise.
func Main(m *testing.M) {
	refs.SetLeakMode(refs.LeaksPanic)
	code := m.Run()
	start := time.Now()
	for !clean() {
		if time.Since(start) > Grace {
			refs.DoRepeatedLeakCheck() // panics with the leaked objects
			break                      // released in the meantime
		}
		time.Sleep(10 * time.Millisecond)
	}
	if waited := time.Since(start); waited > 10*time.Millisecond {
		fmt.Fprintf(os.Stderr, "leakcheck: references held when the tests returned were released %v later\n", waited.Round(time.Millisecond))
	}
	os.Exit(code)
}

// clean reports whether no reference-counted object is alive.
func clean() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	refs.DoRepeatedLeakCheck()
	return true
}
