package planetest

import (
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/node"
)

// WaitXDPEntries waits (20 s at most) until the XDP program of the node
// whose report is report carries at least want ILM entries with a
// resolved next hop and takes redirects on some link; it fails t when the
// node has no XDP report.
func WaitXDPEntries(t *testing.T, report func() node.Report, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		x := report().XDP
		if x == nil {
			t.Fatal("XDP mode without an XDP report")
		}
		if x.Entries >= want && len(x.EgressOK) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the XDP program carries %d resolved entries (egress ok %v) after 20 s, want %d", x.Entries, x.EgressOK, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
