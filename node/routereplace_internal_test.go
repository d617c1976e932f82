package node

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/mpls"
)

// TestReplaceRouteWithBGP: with BGP's tables in place, route replace of a
// static route that shadows BGP's puts the new one in its place (one
// static route, the shadow counted once), and its del brings BGP's back;
// replace of a prefix only BGP has adds a static route that shadows it.
// Planted bugs caught: updateStatic appending without removing the
// replaced route (two static routes for the prefix), and counting the
// shadow again on replace (shadowed 2).
func TestReplaceRouteWithBGP(t *testing.T) {
	n, _, tab := bgpTablesNode(t, "link add a0 type afpacket\naddr add 10.1.0.1/24 dev a0\n", nil)
	n.bgpTab = tab
	p98 := netip.MustParsePrefix("10.98.0.0/16")
	if err := n.bgpTab.Apply(bgp.Changes{AddRoutes: []mpls.Route{bgpRoute(p98, 16002)}}); err != nil {
		t.Fatal(err)
	}
	labelsTo := func() []mpls.Label { return pushedLabels(n, "10.98.1.1") }
	statics := func() int {
		n.bgpTab.mu.Lock()
		defer n.bgpTab.mu.Unlock()
		return len(slices.DeleteFunc(slices.Clone(n.bgpTab.static), func(r mpls.Route) bool { return r.Prefix != p98 }))
	}
	for i, tc := range []struct {
		line   string
		change string
		labels []mpls.Label
	}{
		{"route replace 10.98.0.0/16 encap mpls 555 via 10.1.0.2", "added", []mpls.Label{555}},
		{"route replace 10.98.0.0/16 encap mpls 556 via 10.1.0.2", "replaced", []mpls.Label{556}},
		{"route replace 10.98.0.0/16 encap mpls 557 via 10.1.0.3", "replaced", []mpls.Label{557}},
	} {
		ch, err := n.ReplaceRoute(tc.line)
		if err != nil || ch.Change != tc.change {
			t.Fatalf("step %d %q: %+v %v, want %s", i, tc.line, ch, err, tc.change)
		}
		if got := labelsTo(); !slices.Equal(got, tc.labels) {
			t.Errorf("step %d: 10.98.0.0/16 pushes %v, want %v", i, got, tc.labels)
		}
		if got := statics(); got != 1 {
			t.Errorf("step %d: %d static routes to 10.98.0.0/16, want 1", i, got)
		}
		if n.bgpTab.shadowed != 1 {
			t.Errorf("step %d: shadowed %d, want 1", i, n.bgpTab.shadowed)
		}
	}
	if _, err := n.DelRoute("10.98.0.0/16"); err != nil {
		t.Fatal(err)
	}
	if got := labelsTo(); !slices.Equal(got, []mpls.Label{16002}) || statics() != 0 || n.bgpTab.shadowed != 0 {
		t.Errorf("after del: pushes %v, %d static routes, shadowed %d; want BGP's [16002], 0, 0", got, statics(), n.bgpTab.shadowed)
	}
	if _, err := n.ReplaceRoute("route replace 10.98.0.0/16 via 10.1.0.9 dev a9"); err == nil || !strings.Contains(err.Error(), "control:1:") {
		t.Errorf("replace to an unknown device: %v, want a positioned error", err)
	}
}
