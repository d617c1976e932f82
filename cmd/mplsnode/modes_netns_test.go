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

// xdpPoppedIP is what n's XDP program popped to IP (0 without XDP).
func xdpPoppedIP(n *procNode) uint64 {
	if x := n.Report().XDP; x != nil {
		return x.PoppedIP
	}
	return 0
}
