package node_test

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// TestBGPScale installs 100,000 labelled routes learned from a BGP
// neighbour and reports how long that took and the process's RSS. The
// feeder is a second node originating 100,000 networks (gobgpd 3.10 cannot
// be fed that many labelled routes quickly: its CLI adds one route per
// process, `gobgp mrt inject` takes unicast only, and its v3 gRPC API is
// not the v4 one this module carries). It takes tens of seconds, so it
// runs only with MPLSNODE_BGP_SCALE=1.
func TestBGPScale(t *testing.T) {
	if os.Getenv("MPLSNODE_BGP_SCALE") == "" {
		t.Skip("set MPLSNODE_BGP_SCALE=1 to install 100,000 BGP routes")
	}
	netns.SkipUnlessRoot(t)
	const routes = 100_000
	ns0, nsF := netns.New(t, "s0"), netns.New(t, "sf")
	v0, vF := netns.VethPair(t, ns0, nsF)
	var feed strings.Builder
	fmt.Fprintf(&feed, `link add %[1]s type afpacket
addr add 172.16.30.21/24 dev %[1]s
bgp as 65002 router-id 172.16.30.21
bgp label-range 16 200000
bgp neighbor 172.16.30.20 remote-as 65001 family ipv4-labeled-unicast
`, vF)
	base := netip.MustParseAddr("10.0.0.0").As4()
	for i := range routes {
		a := base
		a[0], a[1], a[2] = byte(10+i>>16), byte(i>>8), byte(i)
		fmt.Fprintf(&feed, "bgp network %s/24\n", netip.AddrFrom4(a))
	}
	rss0 := rssKiB(t)
	n := startNode(t, ns0, "scale.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.30.20/24 dev %[1]s
bgp as 65001 router-id 172.16.30.20
bgp neighbor 172.16.30.21 remote-as 65002 family ipv4-labeled-unicast
`, v0))
	start := time.Now()
	startNode(t, nsF, "feed.conf", feed.String())
	var established time.Time
	waitUntil(t, 5*time.Minute, "100,000 routes installed", func() bool {
		s := n.BGP().Summary()
		if established.IsZero() && s.Neighbors[0].State == "established" {
			established = time.Now()
		}
		return s.Installed == routes
	})
	done := time.Now()
	if got := n.Stack().Tables().FIB().Len(); got != routes {
		t.Errorf("FIB holds %d routes, want %d", got, routes)
	}
	t.Logf("%d routes installed %v after the session came up (%v after the feeder started); process RSS %d MiB -> %d MiB (both nodes, the feeder's config included)",
		routes, done.Sub(established).Round(time.Millisecond), done.Sub(start).Round(time.Millisecond), rss0>>10, rssKiB(t)>>10)
}

// rssKiB returns the process's resident set size in KiB.
func rssKiB(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kib int
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kib)
			return kib
		}
	}
	return 0
}
