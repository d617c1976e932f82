package node_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/mpls"
)

// TestBGPLocalLabelsStable: the local labels the node binds to routes it
// re-advertises (next-hop-self) stay the same across a restart of the
// neighbour they came from: gobgpd (Debian) sends 20 prefixes, is killed
// (the routes and their label bindings go), starts again and sends them
// in the other order; each prefix is bound to the label it had, and the
// ILM swaps that label to the received one again.
//
// Bug planted to check the test: freeing a label at once (labelPool
// release = put, last-in first-out reuse) gives the prefixes each
// other's labels after the restart.
func TestBGPLocalLabelsStable(t *testing.T) {
	netns.SkipUnlessRoot(t)
	ns0, nsG := netns.New(t, "bll0"), netns.New(t, "bllg")
	v0, vG := netns.VethPair(t, ns0, nsG)
	nsG.MustExec("ip", "addr", "add", "172.16.55.21/24", "dev", vG)
	conf := gobgpdPeerConf(65002, "172.16.55.21", "172.16.55.20", 65001)
	g := startGoBGPd(t, nsG, conf)
	n := startNode(t, ns0, "labels.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.55.20/24 dev %[1]s
bgp as 65001 router-id 172.16.55.20
bgp neighbor 172.16.55.21 remote-as 65002 family ipv4-labeled-unicast next-hop-self hold-time 9
bgp label-range 16000 16999
`, v0))
	sp := n.BGP()
	established := func() {
		waitUntil(t, 60*time.Second, "the session", func() bool { return sp.Neighbors()[0].State == "established" })
	}
	established()
	const count = 20
	prefix := func(i int) string { return fmt.Sprintf("10.60.%d.0/24", i) }
	feed := func(order []int) map[string]uint32 {
		for _, i := range order {
			g.cli("global", "rib", "-a", "ipv4-mpls", "add", prefix(i), fmt.Sprint(100+i), "nexthop", "172.16.55.21")
		}
		labels := map[string]uint32{}
		waitUntil(t, 20*time.Second, "the routes and their local labels", func() bool {
			clear(labels)
			for _, r := range sp.Routes() {
				if r.Installed && r.LocalLabel != 0 {
					labels[r.Prefix] = r.LocalLabel
				}
			}
			return len(labels) == count
		})
		return labels
	}
	var up, down []int
	for i := range count {
		up = append(up, i)
		down = append(down, count-1-i)
	}
	before := feed(up)
	g.kill()
	waitUntil(t, 30*time.Second, "the routes to go with gobgpd", func() bool {
		_, _, ok := ftnLabels(n, "10.60.0.1")
		return !ok && len(sp.Routes()) == 0
	})
	g = startGoBGPd(t, nsG, conf)
	established()
	after := feed(down)
	for i := range count {
		p := prefix(i)
		if before[p] != after[p] {
			t.Errorf("%s: local label %d before the restart, %d after", p, before[p], after[p])
		}
		e, ok := n.Stack().Tables().ILM().Lookup(mpls.Label(after[p]))
		if !ok || e.Action != mpls.ILMSwap || !slices.Equal(e.OutLabels, []mpls.Label{mpls.Label(100 + i)}) {
			t.Errorf("%s: ILM for %d is %+v (%v), want swap to %d", p, after[p], e, ok, 100+i)
		}
	}
}
