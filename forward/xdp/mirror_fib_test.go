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
