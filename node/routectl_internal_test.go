package node

import (
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/mpls"
)

// TestRouteChangesWithBGP: with BGP's tables in place, a route added at
// run time shadows BGP's route to its prefix, BGP's comes back when it is
// deleted, BGP's later withdrawal does not take the static route away,
// and label routes added or deleted at run time leave BGP's label entries
// alone. Planting "updateStatic deletes the prefix on del" (BGP's route
// not written back) fails the "after del" check; planting "setStaticILM
// writes only the static entries" loses label 16000.
func TestRouteChangesWithBGP(t *testing.T) {
	var logs lockedLog
	n, _, tab := bgpTablesNode(t, `link add a0 type afpacket
addr add 10.1.0.1/24 dev a0
-f mpls route add 100 dev lo
`, slog.New(slog.NewTextHandler(&logs, nil)))
	n.bgpTab = tab
	p98 := netip.MustParsePrefix("10.98.0.0/16")
	if err := n.bgpTab.Apply(bgp.Changes{
		AddRoutes: []mpls.Route{bgpRoute(p98, 16002)},
		AddILM:    []mpls.ILMEntry{{Label: 16000, Action: mpls.ILMPopLocal}},
	}); err != nil {
		t.Fatal(err)
	}
	protocolOf := func(p string) string {
		for _, r := range n.Routes() {
			if r.Prefix == p {
				return r.Protocol
			}
		}
		return ""
	}

	if _, err := n.AddRoute("route add 10.98.0.0/16 encap mpls 555 via 10.1.0.2"); err != nil {
		t.Fatal(err)
	}
	if got := pushedLabels(n, "10.98.1.1"); !slices.Equal(got, []mpls.Label{555}) {
		t.Errorf("after add, 10.98.0.0/16 pushes %v; want the static route's [555]", got)
	}
	if got := protocolOf("10.98.0.0/16"); got != "static" {
		t.Errorf("after add, route show says %q, want static", got)
	}
	if r, ok := n.bgpTab.Resolve(netip.MustParseAddr("10.98.0.1")); !ok || !slices.Equal(r.Labels, []mpls.Label{555}) {
		t.Errorf("after add, Resolve(10.98.0.1) = %+v %v, want through the static route [555]", r, ok)
	}
	if _, err := n.DelRoute("10.98.0.0/16"); err != nil {
		t.Fatal(err)
	}
	if got := pushedLabels(n, "10.98.1.1"); !slices.Equal(got, []mpls.Label{16002}) {
		t.Errorf("after del, 10.98.0.0/16 pushes %v; want BGP's [16002]", got)
	}
	if got := protocolOf("10.98.0.0/16"); got != "bgp" {
		t.Errorf("after del, route show says %q, want bgp", got)
	}
	if _, err := n.DelRoute("10.98.0.0/16"); err == nil {
		t.Error("del of a prefix with only BGP's route succeeded; want an error")
	}

	// A static route BGP then withdraws its own from stays.
	if _, err := n.AddRoute("route add 10.98.0.0/16 via 10.1.0.2"); err != nil {
		t.Fatal(err)
	}
	if err := n.bgpTab.Apply(bgp.Changes{DelRoutes: []netip.Prefix{p98}}); err != nil {
		t.Fatal(err)
	}
	if e, ok := n.Stack().Tables().FIB().Lookup(netip.MustParseAddr("10.98.1.1")); !ok || e.Group.Hops[0].Via != netip.MustParseAddr("10.1.0.2") {
		t.Errorf("after BGP's withdrawal, 10.98.1.1 routes by %+v %v; want the static route via 10.1.0.2", e, ok)
	}
	if n.bgpTab.shadowed != 0 {
		t.Errorf("shadowed = %d after BGP's withdrawal, want 0", n.bgpTab.shadowed)
	}
	if _, err := n.DelRoute("10.98.0.0/16"); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Stack().Tables().FIB().Lookup(netip.MustParseAddr("10.98.1.1")); ok {
		t.Error("after del with no BGP route, 10.98.1.1 still routes")
	}

	// default names the static default route of either family.
	for _, tc := range []struct{ add, p string }{
		{"route add default via 10.1.0.2", "0.0.0.0/0"},
	} {
		if _, err := n.AddRoute(tc.add); err != nil {
			t.Fatal(err)
		}
		ch, err := n.DelRoute("default")
		if err != nil || !strings.HasPrefix(ch.Route, "route add "+tc.p+" ") {
			t.Errorf("del default after %q: %+v %v", tc.add, ch, err)
		}
	}
	if !strings.Contains(logs.String(), `msg="route removed" route="route add 0.0.0.0/0 via inet 10.1.0.2 dev a0" by=control`) {
		t.Errorf("the log lacks the removal of the default route:\n%s", logs.String())
	}

	// Label routes.
	ilmHas := func(l mpls.Label) bool { _, ok := n.Stack().Tables().ILM().Lookup(l); return ok }
	if _, err := n.AddLabelRoute("mpls route add 101 as 201 via inet 10.1.0.2"); err != nil {
		t.Fatal(err)
	}
	for _, l := range []mpls.Label{100, 101, 16000} {
		if !ilmHas(l) {
			t.Errorf("after mpls route add, the ILM lacks %d", l)
		}
	}
	if _, err := n.DelLabelRoute("101"); err != nil {
		t.Fatal(err)
	}
	if ilmHas(101) || !ilmHas(100) || !ilmHas(16000) {
		t.Errorf("after mpls route del 101: has 100 %v, 101 %v, 16000 %v; want true false true", ilmHas(100), ilmHas(101), ilmHas(16000))
	}
}

// lockedLog is a log sink safe to read while the node writes to it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
