package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
)

// TestLSPTraceMultipath traces an LSP whose LSR switches label 100 over
// two next hops (a multipath label route, one link to the egress each):
// the LSR's reply lists both downstreams; with Multipath the traceroute
// asks it which 127/8 destinations take which, follows both, and reaches
// the egress over each link.
// Checked by planting the bug (l07): a tracer that follows one hop only
// finds 1 path, not 2.
func TestLSPTraceMultipath(t *testing.T) {
	wiretest.Need(t)
	l := newLine(t, "lpm", 0, 1, 2)
	w12, w21 := netns.VethPair(t, l.ns1, l.ns2)
	n0 := startNode(t, l.ns0, "ns0.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.20.20/24 dev %[1]s
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 dev %[1]s
route add 172.16.21.0/24 via 172.16.20.21 dev %[1]s
`, l.v01))
	n1 := startNode(t, l.ns1, "ns1.conf", fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
link add %[3]s type afpacket
addr add 172.16.20.21/24 dev %[1]s
addr add 172.16.21.21/24 dev %[2]s
addr add 172.16.22.21/24 dev %[3]s
sysctl -w net.ipv4.ip_forward=1
-f mpls route add 100 nexthop as to 200 via inet 172.16.21.22 dev %[2]s nexthop as to 200 via inet 172.16.22.22 dev %[3]s
`, l.v10, l.v12, w12))
	n2 := startNode(t, l.ns2, "ns2.conf", fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.21.22/24 dev %[1]s
addr add 172.16.22.22/24 dev %[2]s
addr add 10.10.10.10/32 dev lo
route add 172.16.20.0/24 via 172.16.21.21 dev %[1]s
-f mpls route add 200 dev lo
`, l.v21, w21))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := lspOpts(ldpFEC(t, "10.10.10.10/32"))

	tr, err := n0.TraceLSP(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Paths) != 1 || len(tr.Paths[0].Hops) != 2 || !tr.Paths[0].Reached {
		(&lspSeed{n0: n0, n1: n1, n2: n2}).dump(t)
		t.Fatalf("traceroute: %q, want 2 hops to the egress", traceText(tr))
	}
	if got, want := hopText(tr.Paths[0].Hops[0]), "1 172.16.20.21 label-switched [172.16.21.22 [200]] [172.16.22.22 [200]]"; got != want {
		t.Errorf("hop 1: %q, want %q", got, want)
	}

	opts.Multipath = true
	rx := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, l := range n2.Report().Links {
			m[l.Name] = l.RXFrames
		}
		return m
	}
	before := rx()
	tr, err = n0.TraceLSP(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	after := rx()
	if len(tr.Paths) != 2 {
		t.Fatalf("multipath traceroute: %q, want 2 paths", traceText(tr))
	}
	total := 0
	for i, p := range tr.Paths {
		if !p.Reached || len(p.Hops) != 2 {
			t.Errorf("path %d: %q, want 2 hops to the egress", i+1, traceText(tr)[i])
		}
		for _, d := range p.Hops[0].Downstreams {
			if d.Destinations == 0 {
				t.Errorf("path %d: downstream %s takes none of the destinations asked about", i+1, d.Address)
			}
			if i == 0 {
				total += d.Destinations
			}
		}
	}
	if total != 32 {
		t.Errorf("the LSR's downstreams take %d of the 32 destinations asked about, want all", total)
	}
	for _, dev := range []string{l.v21, w21} {
		if after[dev] == before[dev] {
			t.Errorf("the egress received nothing on %s during the multipath traceroute: one branch was not followed", dev)
		}
	}
}
