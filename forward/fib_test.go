package forward_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/mpls"
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
