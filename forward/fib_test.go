package forward_test

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/stack"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// tcp4 is an IPv4 header and TCP ports from src:sport to dst:dport (what
// the flow hash reads).
func tcp4(src, dst string, sport, dport uint16) []byte {
	b := make([]byte, 24)
	b[0], b[8], b[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(b[2:], 24)
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint16(b[20:], sport)
	binary.BigEndian.PutUint16(b[22:], dport)
	return b
}

func fibRouter(t *testing.T, routes []mpls.Route, pipeTTL uint8) (*forward.FIBRouter, *mpls.Tables) {
	t.Helper()
	tables := &mpls.Tables{}
	if err := tables.ReplaceRoutes(routes); err != nil {
		t.Fatal(err)
	}
	r := forward.NewFIBRouter(forward.FIBRouterOptions{
		Tables:    tables,
		Connected: []forward.Route{{Prefix: netip.MustParsePrefix("10.1.0.0/24"), Device: "a0"}},
		Seed:      7,
		PipeTTL:   pipeTTL,
	})
	return r, tables
}

// TestFIBRouterLongestMatch: the FIB and the connected subnets are one
// longest-prefix match, the FIB's route winning a tie (as for the stack's
// own traffic); a route written to the tables afterwards routes at once
// (the router reads the current snapshot). Planting "connected first"
// (return the connected route whenever one matches) routes 10.1.0.200
// on-link.
func TestFIBRouterLongestMatch(t *testing.T) {
	b0 := netip.MustParseAddr("10.2.0.1")
	r, tables := fibRouter(t, []mpls.Route{
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), NextHops: []mpls.NextHop{{Via: b0, Device: "b0"}}},
		{Prefix: netip.MustParsePrefix("10.1.0.128/25"), NextHops: []mpls.NextHop{{Via: b0, Device: "b0", Labels: []mpls.Label{100}}}},
	}, 0)
	for _, tc := range []struct {
		dst, dev string
		via      netip.Addr
	}{
		{"10.1.0.5", "a0", netip.Addr{}},  // connected /24 beats the FIB's /8
		{"10.1.0.200", "b0", b0},          // the FIB's /25 beats the /24
		{"10.200.0.1", "b0", b0},          // the FIB only
		{"::ffff:10.200.0.1", "b0", b0},   // IPv4-mapped, as IPv4
		{"192.0.2.1", "", netip.Addr{}},   // no route
		{"2001:db8::1", "", netip.Addr{}}, // no route
	} {
		got, ok := r.Lookup(netip.MustParseAddr(tc.dst), nil)
		if ok != (tc.dev != "") || got.Device != tc.dev || got.Via != tc.via {
			t.Errorf("Lookup(%s) = %+v %v; want dev %q via %v", tc.dst, got, ok, tc.dev, tc.via)
		}
	}
	if err := tables.UpdateRoutes([]mpls.Route{{Prefix: netip.MustParsePrefix("10.1.0.0/24"), NextHops: []mpls.NextHop{{Via: b0, Device: "b0"}}}}, nil); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Lookup(netip.MustParseAddr("10.1.0.5"), nil); !ok || got.Device != "b0" {
		t.Errorf("after a FIB route to the connected /24: Lookup(10.1.0.5) = %+v %v; want the FIB's (a tie goes to the FIB)", got, ok)
	}
}

// TestFIBRouterECMP: a route with two next hops, weights 1 and 3, gives
// each flow one hop whatever the packet (the same 5-tuple, another TTL or
// length), and spreads 4096 flows within 5 points of 25%/75%; pushed
// labels take the pipe TTL when the route sets none. The lookup allocates
// nothing. Planting "always the first hop" (no hash) fails the spread.
func TestFIBRouterECMP(t *testing.T) {
	h1, h2 := netip.MustParseAddr("10.2.0.1"), netip.MustParseAddr("10.3.0.1")
	r, _ := fibRouter(t, []mpls.Route{{
		Prefix: netip.MustParsePrefix("10.10.0.0/16"),
		NextHops: []mpls.NextHop{
			{Via: h1, Device: "b0", Weight: 1},
			{Via: h2, Device: "c0", Labels: []mpls.Label{200}, Weight: 3},
		},
	}}, 33)
	dst := netip.MustParseAddr("10.10.1.1")
	const flows = 4096
	counts := map[string]int{}
	for i := range flows {
		pkt := tcp4("192.0.2.1", "10.10.1.1", uint16(1024+i), 80)
		got, ok := r.Lookup(dst, pkt)
		if !ok {
			t.Fatalf("flow %d: no route", i)
		}
		counts[got.Device]++
		pkt[8], pkt[2] = 3, 99 // another TTL and length: the same flow
		again, _ := r.Lookup(dst, pkt)
		if again.Device != got.Device || again.Via != got.Via {
			t.Fatalf("flow %d moved from %s to %s", i, got.Device, again.Device)
		}
		if got.Device == "c0" && got.TTL != 33 {
			t.Fatalf("labelled hop: TTL %d, want the pipe TTL 33", got.TTL)
		}
		if got.Device == "b0" && got.TTL != 0 {
			t.Fatalf("plain hop: TTL %d, want 0", got.TTL)
		}
	}
	if share := float64(counts["b0"]) / flows; share < 0.20 || share > 0.30 {
		t.Errorf("weight 1 of 4 took %.1f%% of %d flows (%v); want 25%% +- 5", 100*share, flows, counts)
	}
	pkt := tcp4("192.0.2.1", "10.10.1.1", 1, 80)
	if n := testing.AllocsPerRun(100, func() { _, _ = r.Lookup(dst, pkt) }); n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
}

// TestForwardIPByFIB routes transit through the Switch with the FIBRouter
// over the stack's own tables: a multipath route written with
// stack.SetRoutes (two next hops on out0, one pushing label 500) carries
// 64 UDP flows, two packets each; both packets of a flow leave to the same
// neighbour with the same labels, and both hops carry flows. Then the
// route is replaced in the tables and the next packet follows the new
// route at once (no second table to rebuild). Planting "always the first
// hop" in FIBRouter.Lookup leaves hop 10.2.0.3 without flows.
func TestForwardIPByFIB(t *testing.T) {
	l := newLSR(t, lsrV4, true)
	macNext3 := tcpip.LinkAddress("\x02\x00\x00\x00\x02\x03")
	hop3 := netip.MustParseAddr("10.2.0.3")
	l.neighbor(t, "out0", hop3, macNext3)
	l.sw.SetRouter(forward.NewFIBRouter(forward.FIBRouterOptions{
		Tables: l.st.Tables(),
		Connected: []forward.Route{
			{Prefix: netip.MustParsePrefix("10.1.0.0/24"), Device: "in0"},
			{Prefix: netip.MustParsePrefix("10.2.0.0/24"), Device: "out0"},
		},
		Seed: 1,
	}))
	p7 := netip.MustParsePrefix("10.7.0.0/16")
	if err := l.st.SetRoutes([]stack.Route{{Prefix: p7, NextHops: []mpls.NextHop{
		{Via: hop2, Device: "out0"},
		{Via: hop3, Device: "out0", Labels: []mpls.Label{500}},
	}}}); err != nil {
		t.Fatal(err)
	}
	// hopOf returns the neighbour MAC and labels of the next frame out.
	hopOf := func(port uint16) (string, []uint32) {
		t.Helper()
		ip := mplstest.IPv4UDP(netip.AddrPortFrom(netip.MustParseAddr("10.1.0.2"), port), netip.MustParseAddrPort("10.7.1.1:9"), false, make([]byte, 20))
		inject(l.in, ipFrame(ip))
		f := readFrame(t, l.out)
		if f == nil {
			t.Fatalf("flow %d: nothing forwarded; stats %+v", port, l.sw.Stats())
		}
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		var labels []uint32
		for _, ly := range p.Layers() {
			if m, ok := ly.(*layers.MPLS); ok {
				labels = append(labels, m.Label)
			}
		}
		return string(p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet).DstMAC), labels
	}
	perHop := map[string]int{}
	for port := uint16(2000); port < 2064; port++ {
		mac, labels := hopOf(port)
		mac2, labels2 := hopOf(port)
		if mac != mac2 || !slices.Equal(labels, labels2) {
			t.Fatalf("flow %d: first packet to %x %v, second to %x %v", port, mac, labels, mac2, labels2)
		}
		if wantLabels := mac == string(macNext3); wantLabels != slices.Equal(labels, []uint32{500}) {
			t.Fatalf("flow %d: to %x with labels %v; hop 10.2.0.3 pushes 500, 10.2.0.2 none", port, mac, labels)
		}
		perHop[mac]++
	}
	if len(perHop) != 2 {
		t.Errorf("64 flows over two equal hops all went to one (flows by MAC): %x", perHop)
	}
	if err := l.st.SetRoutes([]stack.Route{{Prefix: p7, Via: hop2, Labels: []mpls.Label{600}}}); err != nil {
		t.Fatal(err)
	}
	if mac, labels := hopOf(3000); mac != string(macNext) || !slices.Equal(labels, []uint32{600}) {
		t.Errorf("after the route changed: to %x with %v; want 10.2.0.2 with [600]", mac, labels)
	}
}

// BenchmarkFIBRouterLookup: a transit lookup in a FIB of 100,000 /24s
// with a two-hop route among them (ECMP: the flow hash is taken).
func BenchmarkFIBRouterLookup(b *testing.B) {
	h1, h2 := netip.MustParseAddr("10.2.0.1"), netip.MustParseAddr("10.3.0.1")
	routes := make([]mpls.Route, 100_000)
	for i := range routes {
		a := [4]byte{byte(20 + i>>16), byte(i >> 8), byte(i), 0}
		routes[i] = mpls.Route{Prefix: netip.PrefixFrom(netip.AddrFrom4(a), 24), NextHops: []mpls.NextHop{{Via: h1, Device: "b0"}}}
	}
	routes[0].NextHops = append(routes[0].NextHops, mpls.NextHop{Via: h2, Device: "c0", Labels: []mpls.Label{200}})
	tables := &mpls.Tables{}
	if err := tables.ReplaceRoutes(routes); err != nil {
		b.Fatal(err)
	}
	r := forward.NewFIBRouter(forward.FIBRouterOptions{Tables: tables, Seed: 7})
	for _, bc := range []struct{ name, dst string }{{"one hop", "20.1.2.3"}, {"ECMP", "20.0.0.9"}} {
		dst := netip.MustParseAddr(bc.dst)
		pkt := tcp4("192.0.2.1", bc.dst, 1234, 80)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := r.Lookup(dst, pkt); !ok {
					b.Fatal("no route")
				}
			}
		})
	}
}
