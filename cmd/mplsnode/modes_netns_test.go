package main

// Helpers of the forwarding-plane tests here that run twice, with the
// label switch in userspace and with its XDP program (issue 14: the same
// bytes on the wire and the same counters in both modes). The nodes are
// `mplsnode run` processes started in each mode's subtest over one
// topology; internal/wiretest puts frames on the wire and reads them
// back. node's tests have the in-process counterparts.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/netns"
	"github.com/mplsnode/mplsnode/node"
)

// fwdMode is one way the forwarding plane runs.
type fwdMode struct {
	name string
	xdp  bool
}

// fwdModes are the two modes every forwarding-plane e2e test runs in.
var fwdModes = []fwdMode{{"mode=userspace", false}, {"mode=xdp", true}}

// conf is the config line of the mode (empty in userspace mode).
func (m fwdMode) conf() string {
	if m.xdp {
		return "set forward xdp on\n"
	}
	return ""
}

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

// modeResult is what one mode put on the wire and counted.
type modeResult struct {
	wire   map[string][]string          // capture name -> decoded frames
	counts map[string]map[string]uint64 // node name -> counter deltas
}

// compareModes fails t unless every mode's result equals the first one's.
func compareModes(t *testing.T, results map[string]*modeResult) {
	t.Helper()
	base := results[fwdModes[0].name]
	for _, m := range fwdModes[1:] {
		r := results[m.name]
		if base == nil || r == nil {
			// A mode left out by -run, or one that failed (and said
			// why): nothing to compare.
			return
		}
		for name, want := range base.wire {
			if got := r.wire[name]; !slices.Equal(got, want) {
				t.Errorf("%s: %s: frames differ from %s:\n got  %q\n want %q", m.name, name, fwdModes[0].name, got, want)
			}
		}
		for name, want := range base.counts {
			if got := r.counts[name]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: %s: counters moved by %v, %s by %v", m.name, name, got, fwdModes[0].name, want)
			}
		}
	}
}

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
