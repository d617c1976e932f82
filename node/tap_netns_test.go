package node_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// TestSeedTAP is the seed topology on TAP links in Linux bridges (bench
// configuration 7): ns0's node on a TAP bridged with virt01, the LSR's two
// TAPs bridged with virt10 and virt12. 256 MiB from ns0 over label 100 to
// the kernel in ns2 arrive whole (SHA-256). The LSR's TAP towards ns2
// takes GSO frames (virtio-net header), so the LSR coalesces the popped
// segments of each receive batch (counter coalesced) and tshark in ns2
// sees them as frames longer than the MTU, IP TTL 63, no label. Planted
// bug: tap's GSOFrames reporting false (no coalescing: Coalesced stays 0
// and no frame in ns2 exceeds 1500 bytes, so the capture times out).
func TestSeedTAP(t *testing.T) {
	l := newLine(t, "t")
	l.seedKernel()
	br0, br10, br12 := netns.Bridge(t, l.ns0, l.v01), netns.Bridge(t, l.ns1, l.v10), netns.Bridge(t, l.ns1, l.v12)
	tap0, tap10, tap12 := netns.Name("tap"), netns.Name("tap"), netns.Name("tap")
	n0 := startNode(t, l.ns0, "ns0.conf", fmt.Sprintf(`link add %[1]s type tap bridge %[2]s
addr add 172.16.20.20/24 dev %[1]s
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 mtu lock 1496
route add 172.16.21.0/24 via 172.16.20.21 mtu lock 1496
`, tap0, br0))
	n1 := startNode(t, l.ns1, "ns1.conf", fmt.Sprintf(`link add %[1]s type tap bridge %[2]s
link add %[3]s type tap bridge %[4]s
addr add 172.16.20.21/24 dev %[1]s
addr add 172.16.21.21/24 dev %[3]s
sysctl -w net.ipv4.ip_forward=1
-f mpls route add 100 via inet 172.16.21.22 dev %[3]s
`, tap10, br10, tap12, br12))

	addr, result := kernelSink(t, l.ns2, "10.10.10.10:0")
	popped := startCapture(t, l.ns2, l.v21, "tcp and dst host 10.10.10.10 and greater 3000", 20)
	start := time.Now()
	c := dialFrom(t, n0, addr, 3*time.Minute, n1)
	sum := send(t, c, transferSize, nil)
	r := <-result
	if r.err != nil || r.n != transferSize || r.sum != sum {
		t.Fatalf("got %d bytes, sha256 %x, err %v; want %d bytes, sha256 %x", r.n, r.sum, r.err, transferSize, sum)
	}
	el := time.Since(start)
	sw := n1.Stats().Switch
	t.Logf("%d MiB in %v (%.0f Mbit/s); label switch %+v", transferSize>>20, el, float64(transferSize)*8/el.Seconds()/1e6, sw)
	if sw.Coalesced == 0 {
		t.Errorf("the LSR coalesced no segment towards its TAP: %+v", sw)
	}
	for i, row := range popped.fields("ip.ttl", "mpls.label", "ip.len") {
		if n, _ := strconv.Atoi(row[2]); row[0] != "63" || row[1] != "" || n <= 1500 {
			t.Errorf("frame %d on %s: got ip.ttl, mpls.label, ip.len %v; want 63, none, > 1500 (a GSO frame)", i, l.v21, row)
		}
	}
}
