package xdp

import (
	"net"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

// TestXDPFIBUnresolvedNextHop: a route whose next hop's MAC the neighbour
// table does not know yet is mirrored without a MAC (the program passes
// its frames up: userspace resolves the neighbour and queues them), never
// with the MAC of another route's next hop, whichever order the routes
// come in: the mirror looks a MAC up once per run of routes sharing a
// next-hop group, and a run of a resolved neighbour must not leak into
// the next one. The oracle is the neighbour table given (mac): every
// carried route's MAC is its own next hop's, or none. Planted bug: the
// MAC looked up only while none is known (if lastMAC == nil): the routes
// via the unresolved 10.1.0.3 go out to 10.1.0.1's MAC.
func TestXDPFIBUnresolvedNextHop(t *testing.T) {
	a := netip.MustParseAddr
	resolved := map[netip.Addr]net.HardwareAddr{
		a("10.1.0.1"): {2, 0, 0, 0, 0, 1},
		a("10.1.0.2"): {2, 0, 0, 0, 0, 2},
	}
	via := []netip.Addr{a("10.1.0.1"), a("10.1.0.3"), a("10.1.0.3"), a("10.1.0.2"), a("10.1.0.4"), a("10.1.0.1"), a("10.1.0.4")}
	var routes []mpls.Route
	want := map[netip.Prefix]netip.Addr{}
	for i, v := range via {
		pfx := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 20, byte(i), 0}), 24)
		routes = append(routes, mpls.Route{Prefix: pfx, NextHops: []mpls.NextHop{{Via: v, Device: "e1", Labels: []mpls.Label{mpls.Label(100 + i)}}}})
		want[pfx] = v
	}
	fib, err := mpls.NewFIB(routes)
	if err != nil {
		t.Fatal(err)
	}
	x := NewMirror(nil, MirrorConfig{Forward: true, Links: map[string]Link{"e1": {Name: "e1", Index: 11}}})
	asked := map[netip.Addr]int{}
	mac := func(dev string, addr netip.Addr) net.HardwareAddr {
		asked[addr]++
		return resolved[addr]
	}
	seen := 0
	for r := range x.Routes(MirrorInput{FIB: fib, MAC: mac, Hosts: func(string, bool) []Host { return nil }}) {
		v, ok := want[r.Prefix]
		if !ok {
			continue // a marker
		}
		seen++
		if r.Kind != RouteForward {
			t.Errorf("%s via %s: kind %d, want forward (a carried route, resolved or not)", r.Prefix, v, r.Kind)
		}
		if got, w := r.NextHopMAC.String(), resolved[v].String(); got != w {
			t.Errorf("%s via %s: mirrored MAC %q, want %q (its own next hop's; none while unresolved)", r.Prefix, v, got, w)
		}
	}
	if seen != len(via) {
		t.Errorf("mirrored %d of the %d routes", seen, len(via))
	}
	for _, v := range []netip.Addr{a("10.1.0.3"), a("10.1.0.4")} {
		if asked[v] == 0 {
			t.Errorf("the unresolved next hop %s was never looked up (its resolution never starts)", v)
		}
	}
}
