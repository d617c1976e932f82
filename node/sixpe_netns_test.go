package node_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/planetest"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// Test6PEEndToEnd carries IPv6 over an IPv4-only LSP (6PE, RFC 4798): our
// host in ns0 reaches 2001:db8:2::1 (the kernel in ns2) by a route that
// pushes label 300 towards the IPv4 next hop 172.16.20.21 (our LSR in
// ns1, resolved with ARP); the LSR pops 300 and forwards the IPv6 packet
// to the kernel; the kernel's answers come back by the LSR's 6PE route
// with label 400, which the host pops to itself. 16 MiB arrive whole at
// the kernel, and tshark (not our code) sees label 300 over IPv6 leave
// ns0 and 400 come back. Before, check refused the route (next hop of the
// other family).
//
// It runs in both forwarding modes (issue 14): in mode=xdp the LSR's
// program pops 300 to IPv6 and passes the IPv6 packets it must label up
// (egress_down: ns0's end of the veth runs no NAPI). In each mode probes cross both ways, UDP over label 300 from
// ns0's kernel end of its link (popped: hop limit 63) and UDP from ns2's
// kernel end (pushed with 400, label TTL 63); both modes must give the
// same frames at ns2 and at ns0 (tshark decodes, MD5) and the same
// counters. Planted bug: the program's pop leaving the hop limit alone
// (bpf/lsr.c, make bpf): mode=xdp's popped probes differ.
func Test6PEEndToEnd(t *testing.T) {
	wiretest.Need(t)
	l := newLine(t, "6p", 0, 1) // the nodes own ns0's and ns1's links
	l.ns2.MustExec("ip", "-6", "addr", "add", "2001:db8:21::22/64", "dev", l.v21, "nodad")
	l.ns2.MustExec("ip", "-6", "addr", "add", "2001:db8:2::1/128", "dev", "lo")
	l.ns2.MustExec("ip", "-6", "route", "add", "2001:db8:1::/64", "via", "2001:db8:21::21")
	wiretest.GROOn(t, l.ns2, l.v21)
	const probePort = 7777
	udpSink(t, l.ns2, probePort)
	conf0 := fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.20.20/24 dev %[1]s
addr add 2001:db8:1::20/128 dev lo
route add 2001:db8:2::/48 encap mpls 300 via inet 172.16.20.21
-f mpls route add 400 dev lo
`, l.v01)
	conf1 := fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.20.21/24 dev %[1]s
addr add 2001:db8:21::21/64 dev %[2]s
sysctl net.ipv6.conf.all.forwarding=1
-f mpls route add 300 via inet6 2001:db8:21::22 dev %[2]s
route add 2001:db8:1::20/128 encap mpls 400 via inet 172.16.20.20
`, l.v10, l.v12)

	results := map[string]*planetest.Result{}
	for _, m := range planetest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			n0 := startNode(t, l.ns0, "ns0.conf", conf0)
			n1 := startNode(t, l.ns1, "ns1.conf", conf1+m.Conf())
			start := time.Now()
			sixPETransfer(t, n0, l.ns0, l.ns2, l.v01)
			t.Logf("16 MiB over 6PE in %v; ns1 %+v", time.Since(start).Round(time.Millisecond), n1.Report().XDP)
			if m.XDP {
				planetest.WaitXDPEntries(t, n1.Report, 1)
			}
			// n0 takes the probes that come back.
			pc, err := n0.Stack().ListenUDP(netip.MustParseAddrPort(fmt.Sprintf("[2001:db8:1::20]:%d", probePort)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pc.Close() })

			payloads := [][]byte{nil, make([]byte, 300), make([]byte, 1400)}
			for i, p := range payloads {
				for j := range p {
					p[j] = byte(i + j*5)
				}
			}
			host, peer := netip.MustParseAddr("2001:db8:1::20"), netip.MustParseAddr("2001:db8:2::1")
			var out, back [][]byte
			lsrIn, lsrOut := tcpip.LinkAddress(wiretest.MAC(t, l.ns1, l.v10)), tcpip.LinkAddress(wiretest.MAC(t, l.ns1, l.v12))
			hostMAC, peerMAC := tcpip.LinkAddress(wiretest.MAC(t, l.ns0, l.v01)), tcpip.LinkAddress(wiretest.MAC(t, l.ns2, l.v21))
			for _, p := range payloads {
				out = append(out, mplstest.Frame{Dst: lsrIn, Src: hostMAC, Labels: mplstest.Stack(64, 300),
					Payload: mplstest.IPv6UDP(netip.AddrPortFrom(host, 5000), netip.AddrPortFrom(peer, probePort), p)}.Bytes())
				back = append(back, mplstest.Frame{Dst: lsrOut, Src: peerMAC,
					Payload: mplstest.IPv6UDP(netip.AddrPortFrom(peer, 5000), netip.AddrPortFrom(host, probePort), p)}.Bytes())
			}
			res := planetest.NewResult()
			x := xdpCounts(n1)
			res.Add("out ", probe{ns: l.ns0, dev: l.v01, frames: out,
				taps: map[string]*wiretest.Tap{"ns2": wiretest.NewTap(t, l.ns2, l.v21, wiretest.UDPTo(probePort))}, tapCount: map[string]int{"ns2": len(out)},
				nodes: map[string]*node.Node{"ns1": n1}, counts: map[string]map[string]uint64{"ns1": {"popped_ip": uint64(len(out))}},
			}.run(t))
			res.Add("back ", probe{ns: l.ns2, dev: l.v21, frames: back,
				taps: map[string]*wiretest.Tap{"ns0": wiretest.NewTap(t, l.ns0, l.v01, wiretest.UDPTo(probePort))}, tapCount: map[string]int{"ns0": len(back)},
				nodes:  map[string]*node.Node{"ns1": n1},
				counts: map[string]map[string]uint64{"ns1": {"pushed": uint64(len(back)), "ip_forwarded": uint64(len(back))}},
			}.run(t))
			results[m.Name] = res
			if m.XDP {
				if d := planetest.Delta(x, xdpCounts(n1)); d["popped_ip"] != uint64(len(out)) || d["passed egress_down"] < uint64(len(back)) {
					t.Errorf("the XDP program's counters moved by %v, want popped_ip %d and passed egress_down %d", d, len(out), len(back))
				}
			}
			expectFields(t, "ns1-ns2", res.Frames["out ns2"], []string{"mpls.label", "ipv6.hlim", "udp.checksum.status"}, ",63,1")
			expectFields(t, "ns1-ns0", res.Frames["back ns0"], []string{"mpls.label", "mpls.bottom", "mpls.ttl", "ipv6.hlim", "udp.checksum.status"}, "400,1,63,63,1")
		})
	}
	planetest.CompareModes(t, results)
}

// sixPETransfer sends 16 MiB from n0 over 6PE to the kernel in ns2; a tap
// on ns0's link v01 sees label 300 over IPv6 leave and 400 come back.
func sixPETransfer(t *testing.T, n0 *node.Node, ns0, ns2 *netns.NS, v01 string) {
	t.Helper()
	capt := wiretest.NewTapBoth(t, ns0, v01, wiretest.FirstN(200, func(f []byte) bool { return len(f) > 14 && f[12] == 0x88 && f[13] == 0x47 }))
	addr, sums := kernelSink(t, ns2, "[2001:db8:2::1]:0")
	c := dialFrom(t, n0, addr, 20*time.Second)
	c.SetDeadline(time.Now().Add(time.Minute))
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
	rows := wiretest.Decode(t, capt.Wait(200), "mpls.label", "mpls.bottom", "ipv6.dst", "ipv6.src")
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
