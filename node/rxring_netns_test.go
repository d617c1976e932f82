package node_test

import (
	"fmt"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// TestRXRingFramesConfig starts a node whose links ask for receive rings
// of different sizes (`rx-ring-frames N`) and reads the slots each link's
// ring got from the node's report (links[].rx_ring_frames, the endpoint's
// ring as set up: N rounded up to 64 KiB blocks of 2 KiB slots), so the
// config word reaches the socket. link/afpacket's TestRXRingFramesHold
// checks that a ring of that many slots holds that many frames. Planted
// bug: node/convert.go not passing RXRingFrames to the stack gave 2048
// (the default) for the first two links.
func TestRXRingFramesConfig(t *testing.T) {
	netns.SkipUnlessRoot(t)
	ns, peer := netns.New(t, "rr0"), netns.New(t, "rr1")
	var devs [4]string
	for i := range devs {
		devs[i], _ = netns.VethPair(t, ns, peer)
	}
	conf := fmt.Sprintf(`link add %s type afpacket rx-ring-frames 100
link add %s type afpacket mode ring rx-ring-frames 16384
link add %s type afpacket
link add %s type afpacket mode mmsg
addr add 10.61.0.1/24 dev %[1]s
`, devs[0], devs[1], devs[2], devs[3])
	n := startNode(t, ns, "rxring.conf", conf)
	want := map[string]int{devs[0]: 128, devs[1]: 16384, devs[2]: 2048, devs[3]: 0}
	rep := n.Report()
	if len(rep.Links) != len(want) {
		t.Fatalf("report has %d links, want %d", len(rep.Links), len(want))
	}
	for _, l := range rep.Links {
		if l.RXRingFrames != want[l.Name] {
			t.Errorf("link %s (mode %s): rx_ring_frames %d, want %d", l.Name, l.LinkMode, l.RXRingFrames, want[l.Name])
		}
	}
}
