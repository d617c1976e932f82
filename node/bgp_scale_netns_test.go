package node_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// skipUnlessScale skips t, which would take minutes to what, unless
// MPLSNODE_BGP_SCALE is set and it runs as root.
func skipUnlessScale(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("MPLSNODE_BGP_SCALE") == "" {
		t.Skip("set MPLSNODE_BGP_SCALE=1 to " + what)
	}
	netns.SkipUnlessRoot(t)
}

// feederConf is the config of a BGP feeder node: its one link dev with
// self/24, AS as, labels 16..labelTop, one labeled-unicast neighbour peer
// of AS 65001, and n networks /24 from firstOctet.0.0.0 on.
func feederConf(dev, self, peer string, as, labelTop, n, firstOctet int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `link add %[1]s type afpacket
addr add %[2]s/24 dev %[1]s
bgp as %[4]d router-id %[2]s
bgp label-range 16 %[5]d
bgp neighbor %[3]s remote-as 65001 family ipv4-labeled-unicast
`, dev, self, peer, as, labelTop)
	for i := range n {
		fmt.Fprintf(&b, "bgp network %d.%d.%d.0/24\n", firstOctet+i>>16, i>>8&0xff, i&0xff)
	}
	return b.String()
}

// TestBGPScale installs 100,000 labelled routes learned from a BGP
// neighbour and reports how long that took and the process's RSS. The
// feeder is a second node originating 100,000 networks (gobgpd 3.10 cannot
// be fed that many labelled routes quickly: its CLI adds one route per
// process, `gobgp mrt inject` takes unicast only, and its v3 gRPC API is
// not the v4 one this module carries). It takes tens of seconds, so it
// runs only with MPLSNODE_BGP_SCALE=1.
func TestBGPScale(t *testing.T) {
	skipUnlessScale(t, "install 100,000 BGP routes")
	const routes = 100_000
	ns0, nsF := netns.New(t, "s0"), netns.New(t, "sf")
	v0, vF := netns.VethPair(t, ns0, nsF)
	feed := feederConf(vF, "172.16.30.21", "172.16.30.20", 65002, 200000, routes, 10)
	rss0 := rssKiB(t)
	n := startNode(t, ns0, "scale.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.30.20/24 dev %[1]s
bgp as 65001 router-id 172.16.30.20
bgp neighbor 172.16.30.21 remote-as 65002 family ipv4-labeled-unicast
`, v0))
	start := time.Now()
	startNode(t, nsF, "feed.conf", feed)
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
