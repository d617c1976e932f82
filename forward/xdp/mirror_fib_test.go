package xdp

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/mpls"
)

// TestXDPFIBRoutes checks what the XDP plane mirrors of the FIB, against
// forward.FIBRouter's rules (the oracle here is the router's own lookup:
// every address the program would forward, it forwards where the router
// would, and every other one is a marker, never a gap): single-hop routes
// carried with their labels and label TTL, ECMP and deep stacks as
// markers, the FIB winning a tie with a connected subnet, a connected
// host shadowed by a longer FIB route left out, routes inside a range
// never forwarded left out, local addresses replacing any entry. Planted
// bugs: dropping the "a FIB route at least as long wins" check (the host
// 10.1.0.200 is carried towards the connected link instead of by the /25);
// adding the connected prefix even when the FIB holds it (the tie goes the
// wrong way).
func TestXDPFIBRoutes(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	routes := []mpls.Route{
		{Prefix: p("10.9.0.0/16"), NextHops: []mpls.NextHop{{Via: a("10.1.0.1"), Device: "e1", Labels: []mpls.Label{100, 200}}}},
		{Prefix: p("10.8.0.0/16"), NextHops: []mpls.NextHop{{Via: a("10.1.0.1"), Device: "e1"}, {Via: a("10.1.0.2"), Device: "e1"}}},
		{Prefix: p("10.7.0.0/16"), NextHops: []mpls.NextHop{{Via: a("10.1.0.1"), Device: "e1", Labels: []mpls.Label{16, 17, 18, 19, 20}}}},
		{Prefix: p("10.6.0.0/16"), NextHops: []mpls.NextHop{{Via: a("10.1.0.1"), Device: "e1", Labels: []mpls.Label{300}}}, TTL: 9},
		{Prefix: p("10.2.0.0/24"), NextHops: []mpls.NextHop{{Via: a("10.1.0.1"), Device: "e1"}}},   // ties with connected e2
		{Prefix: p("10.1.0.128/25"), NextHops: []mpls.NextHop{{Via: a("10.1.0.1"), Device: "e1"}}}, // shadows part of connected e1
		{Prefix: p("224.1.0.0/16"), NextHops: []mpls.NextHop{{Via: a("10.1.0.1"), Device: "e1"}}},
		{Prefix: p("10.1.0.5/32"), NextHops: []mpls.NextHop{{Via: a("10.1.0.1"), Device: "e1"}}}, // a local address
	}
	fib, err := mpls.NewFIB(routes)
	if err != nil {
		t.Fatal(err)
	}
	x := NewMirror(nil, MirrorConfig{Forward: true, Links: map[string]Link{"e1": {Name: "e1", Index: 11}, "e2": {Name: "e2", Index: 12}},
		Connected: []forward.Route{{Prefix: p("10.1.0.0/24"), Device: "e1"}, {Prefix: p("10.2.0.0/24"), Device: "e2"}}})
	mac1 := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	mac := func(dev string, addr netip.Addr) net.HardwareAddr {
		if addr == a("10.1.0.1") {
			return mac1
		}
		return nil
	}
	hosts := func(dev string, v6 bool) []Host {
		if dev != "e1" || v6 {
			return nil
		}
		return []Host{{a("10.1.0.1"), mac1}, {a("10.1.0.200"), net.HardwareAddr{2, 0, 0, 0, 0, 2}}, {a("10.3.0.1"), mac1}}
	}
	got := map[netip.Prefix]string{}
	for r := range x.Routes(MirrorInput{FIB: fib, MAC: mac, Hosts: hosts, Locals: []netip.Addr{a("10.1.0.5")}}) {
		got[r.Prefix] = fmt.Sprintf("%d %v %d %d %s", r.Kind, r.Labels, r.LabelTTL, r.Egress, r.NextHopMAC)
	}
	fwd := func(labels string, ttl, egress int, m string) string {
		return fmt.Sprintf("%d %s %d %d %s", RouteForward, labels, ttl, egress, m)
	}
	marker := func(k RouteKind) string { return fmt.Sprintf("%d [] 0 0 ", k) }
	want := map[netip.Prefix]string{
		p("10.9.0.0/16"):   fwd("[100 200]", 0, 11, mac1.String()),
		p("10.8.0.0/16"):   marker(RouteECMP),
		p("10.7.0.0/16"):   marker(RouteNotCarried),
		p("10.6.0.0/16"):   fwd("[300]", 9, 11, mac1.String()),
		p("10.2.0.0/24"):   fwd("[]", 0, 11, mac1.String()),
		p("10.1.0.128/25"): fwd("[]", 0, 11, mac1.String()),
		p("10.1.0.5/32"):   marker(RouteLocal),
		p("10.1.0.0/24"):   marker(RouteOnLink),
		p("10.1.0.1/32"):   fwd("[]", 0, 11, mac1.String()),
	}
	for _, s := range SpecialRoutes() {
		want[s.Prefix] = marker(RouteNotTransit)
	}
	for pfx, w := range want {
		if got[pfx] != w {
			t.Errorf("%s: got %q, want %q", pfx, got[pfx], w)
		}
	}
	for pfx, g := range got {
		if _, ok := want[pfx]; !ok {
			t.Errorf("%s: unexpected entry %q", pfx, g)
		}
	}

	// Forwarding off: transit is not carried at all.
	x.cfg.Forward = false
	got = map[netip.Prefix]string{}
	for r := range x.Routes(MirrorInput{FIB: fib, MAC: mac, Hosts: hosts}) {
		got[r.Prefix] = fmt.Sprintf("%d", r.Kind)
	}
	if got[p("0.0.0.0/0")] != fmt.Sprint(RouteNotCarried) || got[p("10.9.0.0/16")] != "" {
		t.Errorf("forwarding off: %v", got)
	}
}

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
