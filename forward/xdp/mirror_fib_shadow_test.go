package xdp

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/mpls"
)

// TestXDPFIBShadowedOnlyByShorterCover checks the two length comparisons
// of the XDP FIB mirror (Mirror.Routes) with prefixes on both sides of them:
//
//   - a FIB route is left out only when a range never forwarded covers
//     it, that is the range is no longer than the route (224.1.0.0/16 in
//     224.0.0.0/4). A route that covers a range never forwarded is carried,
//     the range's marker staying the longer match inside it: the default
//     routes 0.0.0.0/0 and ::/0 (whose first addresses, 0.0.0.0 and ::,
//     are themselves such ranges, /32 and /128), and 224.0.0.0/3 around
//     multicast's 224.0.0.0/4;
//   - a connected neighbour's host entry is left out only for a FIB route
//     at least as long as the connected subnet; the default route, shorter,
//     does not shadow the hosts of 10.1.0.0/24.
//
// The expectations are the router's (forward.FIBRouter, longest match,
// RFC 1812 §5.2.4.3; RFC 1812 §5.3.7 and RFC 4291 for the ranges never
// forwarded), checked by a longest-prefix lookup of sample addresses over
// what the program would hold: every address gets the action userspace
// would take.
//
// Guards mutants w06 and w06b, checked by planting each. w06, inSpecial
// without `s.Prefix.Bits() <= p.Bits()` (a route left out whenever a range
// never forwarded holds its first address): the default routes and
// 224.0.0.0/3 are left out, "8.8.8.8: got no entry, want forward to 11
// via 02:00:00:00:00:01 labels [] of 0.0.0.0/0" (a gap: the program passes
// most of the Internet's transit up to userspace, which forwards it, so no
// transfer test noticed). w06b, the hosts rule without `e.Prefix.Bits() >=
// c.Prefix.Bits()` (any FIB route shadows a connected host): "10.1.0.1:
// got marker 6 of 10.1.0.0/24, want forward to 11 via 02:00:00:00:00:01
// labels [] of 10.1.0.1/32".
func TestXDPFIBShadowedOnlyByShorterCover(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	gw4, gw6 := a("10.1.0.1"), a("fe80::1")
	routes := []mpls.Route{
		{Prefix: p("0.0.0.0/0"), NextHops: []mpls.NextHop{{Via: gw4, Device: "e1"}}},
		{Prefix: p("::/0"), NextHops: []mpls.NextHop{{Via: gw6, Device: "e1"}}},
		{Prefix: p("224.0.0.0/3"), NextHops: []mpls.NextHop{{Via: gw4, Device: "e1", Labels: []mpls.Label{100}}}},
		{Prefix: p("224.1.0.0/16"), NextHops: []mpls.NextHop{{Via: gw4, Device: "e1"}}}, // inside multicast: left out
	}
	fib, err := mpls.NewFIB(routes)
	if err != nil {
		t.Fatal(err)
	}
	x := NewMirror(nil, MirrorConfig{Forward: true, Links: map[string]Link{"e1": {Name: "e1", Index: 11}},
		Connected: []forward.Route{{Prefix: p("10.1.0.0/24"), Device: "e1"}}})
	mac1 := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	mac2 := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	mac := func(dev string, addr netip.Addr) net.HardwareAddr {
		if addr == gw4 || addr == gw6 {
			return mac1
		}
		return nil
	}
	hosts := func(dev string, v6 bool) []Host {
		if dev != "e1" || v6 {
			return nil
		}
		return []Host{{gw4, mac1}, {a("10.1.0.77"), mac2}}
	}
	type entry struct {
		kind   RouteKind
		egress int
		mac    string
		labels string
	}
	table := map[netip.Prefix]entry{}
	for r := range x.Routes(MirrorInput{FIB: fib, MAC: mac, Hosts: hosts}) {
		table[r.Prefix] = entry{r.Kind, r.Egress, r.NextHopMAC.String(), fmt.Sprint(r.Labels)}
	}
	// lookup is the program's longest-prefix match over table.
	lookup := func(addr netip.Addr) (netip.Prefix, entry, bool) {
		var best netip.Prefix
		var e entry
		found := false
		for pfx, v := range table {
			if pfx.Contains(addr) && (!found || pfx.Bits() > best.Bits()) {
				best, e, found = pfx, v, true
			}
		}
		return best, e, found
	}
	show := func(pfx netip.Prefix, e entry) string {
		if e.kind == RouteForward {
			return fmt.Sprintf("forward to %d via %s labels %s of %s", e.egress, e.mac, e.labels, pfx)
		}
		return fmt.Sprintf("marker %d of %s", e.kind, pfx)
	}
	fwd := func(m net.HardwareAddr, labels string, pfx string) string {
		return show(p(pfx), entry{RouteForward, 11, m.String(), labels})
	}
	marker := func(k RouteKind, pfx string) string { return show(p(pfx), entry{kind: k}) }
	for _, c := range []struct {
		addr string
		want string
	}{
		{"8.8.8.8", fwd(mac1, "[]", "0.0.0.0/0")},             // the default route, carried
		{"0.0.0.0", marker(RouteNotTransit, "0.0.0.0/32")},    // unspecified: never forwarded
		{"2001:db8::1", fwd(mac1, "[]", "::/0")},              // the IPv6 default route
		{"::", marker(RouteNotTransit, "::/128")},             // unspecified
		{"240.0.0.1", fwd(mac1, "[100]", "224.0.0.0/3")},      // in the /3, outside multicast
		{"224.0.0.1", marker(RouteNotTransit, "224.0.0.0/4")}, // multicast inside the /3
		{"224.1.2.3", marker(RouteNotTransit, "224.0.0.0/4")}, // the /16 inside multicast left out
		{"255.255.255.255", marker(RouteNotTransit, "255.255.255.255/32")},
		{"10.1.0.1", fwd(mac1, "[]", "10.1.0.1/32")},     // a connected host, not shadowed by 0/0
		{"10.1.0.77", fwd(mac2, "[]", "10.1.0.77/32")},   // another
		{"10.1.0.9", marker(RouteOnLink, "10.1.0.0/24")}, // unresolved: on-link
	} {
		pfx, e, ok := lookup(a(c.addr))
		got := "no entry"
		if ok {
			got = show(pfx, e)
		}
		if got != c.want {
			t.Errorf("%s: got %s, want %s", c.addr, got, c.want)
		}
	}
	if _, ok := table[p("224.1.0.0/16")]; ok {
		t.Errorf("224.1.0.0/16, inside 224.0.0.0/4, mirrored: %v", table[p("224.1.0.0/16")])
	}
}
