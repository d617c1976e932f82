package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/netns"
)

// Test6PEEndToEnd carries IPv6 over an IPv4-only LSP (6PE, RFC 4798): our
// host in ns0 reaches 2001:db8:2::1 (the kernel in ns2) by a route that
// pushes label 300 towards the IPv4 next hop 172.16.20.21 (our LSR in
// ns1, resolved with ARP); the LSR pops 300 and forwards the IPv6 packet
// to the kernel; the kernel's answers come back by the LSR's 6PE route
// with label 400, which the host pops to itself. 16 MiB arrive whole at
// the kernel, and tshark (not our code) sees label 300 over IPv6 between
// ns0 and ns1. Before, check refused the route (next hop of the other
// family).
func Test6PEEndToEnd(t *testing.T) {
	netns.SkipUnlessRoot(t)
	ns0, ns1, ns2 := netns.New(t, "6p0"), netns.New(t, "6p1"), netns.New(t, "6p2")
	v01, v10 := netns.VethPair(t, ns0, ns1)
	v12, v21 := netns.VethPair(t, ns1, ns2)
	ns2.MustExec("ip", "-6", "addr", "add", "2001:db8:21::22/64", "dev", v21, "nodad")
	ns2.MustExec("ip", "-6", "addr", "add", "2001:db8:2::1/128", "dev", "lo")
	ns2.MustExec("ip", "-6", "route", "add", "2001:db8:1::/64", "via", "2001:db8:21::21")
	n0 := startNode(t, ns0, "ns0.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.20.20/24 dev %[1]s
addr add 2001:db8:1::20/128 dev lo
route add 2001:db8:2::/48 encap mpls 300 via inet 172.16.20.21
-f mpls route add 400 dev lo
`, v01))
	startNode(t, ns1, "ns1.conf", fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.20.21/24 dev %[1]s
addr add 2001:db8:21::21/64 dev %[2]s
sysctl net.ipv6.conf.all.forwarding=1
-f mpls route add 300 via inet6 2001:db8:21::22 dev %[2]s
route add 2001:db8:1::20/128 encap mpls 400 via inet 172.16.20.20
`, v10, v12))
	capt := startCapture(t, ns1, v10, "mpls", 200)
	addr, sums := kernelSink(t, ns2, "[2001:db8:2::1]:0")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := n0.Stack().DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s over 6PE: %v", addr, err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	// Enough for the transfer to outlast tshark's start under load: it
	// needs only 200 frames, data and ACKs, but they must cross while it
	// listens.
	const size = 16 << 20
	want := send(t, c, size, nil)
	select {
	case r := <-sums:
		if r.err != nil || r.n != size || r.sum != want {
			t.Fatalf("kernel got %d bytes (err %v), SHA-256 match %v; want %d", r.n, r.err, r.sum == want, size)
		}
	case <-time.After(time.Minute):
		t.Fatal("the kernel did not receive the transfer")
	}
	rows := capt.fields("mpls.label", "mpls.bottom", "ipv6.dst", "ipv6.src")
	out, in := 0, 0
	for _, f := range rows {
		switch {
		case f[0] == "300" && f[1] == "1" && f[2] == "2001:db8:2::1":
			out++
		case f[0] == "400" && f[1] == "1" && f[3] == "2001:db8:2::1":
			in++
		default:
			t.Errorf("frame: label %s bottom %s IPv6 %s -> %s; want label 300 to 2001:db8:2::1 or 400 from it", f[0], f[1], f[3], f[2])
		}
	}
	if out == 0 || in == 0 {
		t.Errorf("tshark saw %d frames with label 300 over IPv6 and %d with 400; want both", out, in)
	}
}
