package main

// Helpers of the forwarding-plane tests here that run twice, with the
// label switch in userspace and with its XDP program (issue 14: the same
// bytes on the wire and the same counters in both modes). The nodes are
// `mplsnode run` processes started in each mode's subtest over one
// topology; internal/testkit/wiretest puts frames on the wire and reads them
// back; internal/testkit/planetest holds the modes and their comparison, shared
// with node's in-process tests.

import (
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/node"
)

// procNode is an `mplsnode run` process read through its control socket.
type procNode struct{ p *lsrProc }

// startProcNode starts `mplsnode run` (bin) on conf in ns; it stops (SIGTERM,
// the XDP program detached) when t ends.
func startProcNode(t *testing.T, bin string, ns *netns.NS, conf string) *procNode {
	t.Helper()
	p := startLSR(t, bin, ns, conf)
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("mplsnode run in %s: %v", ns.Name(), err)
		}
	})
	return &procNode{p}
}

// Report returns the node's counters (mplsnode stats --json).
func (n *procNode) Report() node.Report { return n.p.mustReport() }

// waitXDPEntries waits until n's XDP program carries at least want ILM
// entries with a resolved next hop, and takes redirects on some link.
func waitXDPEntries(t *testing.T, n *procNode, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		x := n.Report().XDP
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

// xdpPoppedIP is what n's XDP program popped to IP (0 without XDP).
func xdpPoppedIP(n *procNode) uint64 {
	if x := n.Report().XDP; x != nil {
		return x.PoppedIP
	}
	return 0
}
