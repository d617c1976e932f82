package node

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/mpls"
)

// TestBGPTablesDistance: a static route beats a BGP route to the same
// prefix (distance 1 < 20) and the BGP route shows again when the static
// one goes; BGP's own label entries sit beside the file's; next hops
// resolve through connected subnets, plain static routes and labelled
// routes (whose labels become transport labels). Planting "no shadowing"
// in Apply (BGP's route written over the static one) makes 10.99.0.0/16
// push BGP's 16001.
func TestBGPTablesDistance(t *testing.T) {
	n, cfg, tab := bgpTablesNode(t, `link add a0 type afpacket
addr add 10.1.0.1/24 dev a0
route add 10.99.0.0/16 encap mpls 777 via 10.1.0.2
route add 192.0.2.0/24 encap mpls 500 via 10.1.0.3
route add 198.51.100.0/24 via 10.1.0.4
-f mpls route add 100 dev lo
`, nil)
	p99 := netip.MustParsePrefix("10.99.0.0/16")
	p98 := netip.MustParsePrefix("10.98.0.0/16")
	if err := tab.Apply(bgp.Changes{
		AddRoutes: []mpls.Route{bgpRoute(p99, 16001), bgpRoute(p98, 16002)},
		AddILM:    []mpls.ILMEntry{{Label: 16000, Action: mpls.ILMPopLocal}},
	}); err != nil {
		t.Fatal(err)
	}
	if got := pushedLabels(n, "10.99.1.1"); !slices.Equal(got, []mpls.Label{777}) {
		t.Errorf("10.99.0.0/16 pushes %v; want the static route's [777]", got)
	}
	if got := pushedLabels(n, "10.98.1.1"); !slices.Equal(got, []mpls.Label{16002}) {
		t.Errorf("10.98.0.0/16 pushes %v; want BGP's [16002]", got)
	}
	for _, l := range []mpls.Label{100, 16000} {
		if _, ok := n.Stack().Tables().ILM().Lookup(l); !ok {
			t.Errorf("ILM lacks label %d", l)
		}
	}
	// Without the static route (a reload), BGP's shows.
	var rest []config.Route
	for _, r := range cfg.Routes {
		if r.Prefix != p99 {
			rest = append(rest, r)
		}
	}
	cfg2 := *cfg
	cfg2.Routes = rest
	c2, err := convert(&cfg2)
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.setStatic(c2.routes(&cfg2), c2.ilm); err != nil {
		t.Fatal(err)
	}
	if got := pushedLabels(n, "10.99.1.1"); !slices.Equal(got, []mpls.Label{16001}) {
		t.Errorf("after the static route went, 10.99.0.0/16 pushes %v; want BGP's [16001]", got)
	}
	// Resolution.
	for _, tc := range []struct {
		nh   string
		want bgp.Resolution
		ok   bool
	}{
		{"10.1.0.7", bgp.Resolution{Via: netip.MustParseAddr("10.1.0.7"), Device: "a0"}, true},
		{"192.0.2.9", bgp.Resolution{Via: netip.MustParseAddr("10.1.0.3"), Device: "a0", Labels: []mpls.Label{500}}, true},
		{"198.51.100.9", bgp.Resolution{Via: netip.MustParseAddr("10.1.0.4"), Device: "a0"}, true},
		{"10.1.0.1", bgp.Resolution{}, false}, // the node itself
		{"203.0.113.1", bgp.Resolution{}, false},
	} {
		got, ok := tab.Resolve(netip.MustParseAddr(tc.nh))
		if ok != tc.ok || got.Via != tc.want.Via || got.Device != tc.want.Device || !slices.Equal(got.Labels, tc.want.Labels) {
			t.Errorf("Resolve(%s) = %+v %v, want %+v %v", tc.nh, got, ok, tc.want, tc.ok)
		}
	}
}

// TestBGPTablesRefusedBatch: a batch the stack refuses (a route to a link
// that does not exist) leaves the tables as they were, and the next good
// batch is written. Planting "no rollback" in Apply keeps the bad route
// and fails the second batch too.
func TestBGPTablesRefusedBatch(t *testing.T) {
	n, _, tab := bgpTablesNode(t, "link add a0 type afpacket\naddr add 10.1.0.1/24 dev a0\n", nil)
	nh := netip.MustParseAddr("10.1.0.9")
	bad := bgp.Changes{AddRoutes: []mpls.Route{{Prefix: netip.MustParsePrefix("10.97.0.0/16"), NextHops: []mpls.NextHop{{Via: nh, Device: "nope0", Labels: []mpls.Label{16003}}}}}}
	if err := tab.Apply(bad); err == nil {
		t.Fatal("a route on a missing link was accepted")
	}
	good := bgp.Changes{AddRoutes: []mpls.Route{{Prefix: netip.MustParsePrefix("10.96.0.0/16"), NextHops: []mpls.NextHop{{Via: nh, Device: "a0", Labels: []mpls.Label{16004}}}}}}
	if err := tab.Apply(good); err != nil {
		t.Fatalf("the next batch: %v", err)
	}
	if got := n.Stack().Tables().FIB().Len(); got != 1 {
		t.Errorf("FIB holds %d routes, want 1", got)
	}
}
