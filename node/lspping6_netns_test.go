package node_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/lspping"
)

// TestLSPPingIPv6 pings and traces an IPv6 LSP (the LDP IPv6 prefix FEC,
// requests to ::ffff:127.0.0.1 with the hop-by-hop router alert, replies
// over IPv6) across three mplsnodes linked by IPv6 only.
func TestLSPPingIPv6(t *testing.T) {
	wiretest.Need(t)
	l := newLine(t, "lp6", 0, 1, 2) // the kernels stay quiet: the nodes own the links
	n0 := startNode(t, l.ns0, "ns0.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 2001:db8:20::20/64 dev %[1]s
route add 2001:db8::10/128 encap mpls 100 via inet6 2001:db8:20::21 dev %[1]s
route add 2001:db8:21::/64 via inet6 2001:db8:20::21 dev %[1]s
`, l.v01))
	n1 := startNode(t, l.ns1, "ns1.conf", fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 2001:db8:20::21/64 dev %[1]s
addr add 2001:db8:21::21/64 dev %[2]s
sysctl net.ipv6.conf.all.forwarding=1
-f mpls route add 100 as to 200 via inet6 2001:db8:21::22 dev %[2]s
`, l.v10, l.v12))
	n2 := startNode(t, l.ns2, "ns2.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 2001:db8:21::22/64 dev %[1]s
addr add 2001:db8::10/128 dev lo
route add 2001:db8:20::/64 via inet6 2001:db8:21::21 dev %[1]s
-f mpls route add 200 dev lo
`, l.v21))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := lspping.PrefixFEC("ldp", netip.MustParsePrefix("2001:db8::10/128"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != lspping.FECLDPIPv6 {
		t.Fatalf("PrefixFEC(ldp, IPv6) = %v, want the LDP IPv6 prefix FEC", f.Type)
	}
	res, err := n0.PingLSP(ctx, lspOpts(f))
	if err != nil {
		t.Fatal(err)
	}
	if res.Egress != 3 || res.Probes[0].Replier != "2001:db8:21::22" {
		(&lspSeed{n0: n0, n1: n1, n2: n2}).dump(t)
		t.Errorf("ping: %+v, want 3 egress replies from 2001:db8:21::22", res)
	}
	tr, err := n0.TraceLSP(ctx, lspOpts(f))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1 2001:db8:20::21 label-switched [2001:db8:21::22 [200]]; 2 2001:db8:21::22 egress"}
	if got := traceText(tr); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("traceroute:\n got %q\nwant %q", got, want)
	}
}
