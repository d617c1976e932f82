package node_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/planetest"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// TestXDPIPTransit: the kernels in ns0 and ns2 talk plain IP through ns1,
// a node forwarding IP per its FIB and connected subnets, with GRO on both
// kernels' veth ends so that ns1's XDP program may redirect into them (as
// bench row 9k). In each forwarding mode 16 MiB cross from ns0's kernel to
// ns2's twice (SHA-256 checked): with the kernels' TX checksum offload on,
// whose segments the program must pass up (checksum_partial), then off,
// when its ip_forwarded must count the data segments (the kernel carried
// them, not userspace). Then
// UDP probes from ns0's kernel end cross ns1: plain (TTL 63, checksum
// good), under one label (route encap mpls 700) and two (500/600; label
// TTL 63, uniform model). Both modes must put the same
// bytes on ns2's wire (tshark decodes, MD5) and move the same counters.
// Planted bugs: no TTL decrement on the program's IP path (bpf/lsr.c,
// make bpf): mode=xdp's frames differ (ip.ttl 64); the program pushing the
// label stack without the S bit on the last label: tshark's decode of
// mode=xdp differs; the plane never syncing the FIB after start (its
// poll and its one-second sync off): the new route is not taken in 5 s;
// the program forwarding frames of the partial form
// (partial_form returning 0): ns2 drops them, the first transfer stalls.
func TestXDPIPTransit(t *testing.T) {
	wiretest.Need(t)
	l := newLine(t, "xi", 0, 1, 2)
	l.ns0.MustExec("ip", "addr", "add", "172.16.20.20/24", "dev", l.v01)
	l.ns0.MustExec("ip", "route", "add", "172.16.21.0/24", "via", "172.16.20.21")
	l.ns0.MustExec("ip", "route", "add", "10.96.0.0/12", "via", "172.16.20.21")
	l.ns2.MustExec("ip", "addr", "add", "172.16.21.22/24", "dev", l.v21)
	l.ns2.MustExec("ip", "route", "add", "172.16.20.0/24", "via", "172.16.21.21")
	for _, c := range []struct {
		ns  *netns.NS
		dev string
	}{{l.ns0, l.v01}, {l.ns2, l.v21}} {
		c.ns.MustExec("ethtool", "-K", c.dev, "gro", "on")
	}
	conf1 := fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.20.21/24 dev %[1]s
addr add 172.16.21.21/24 dev %[2]s
sysctl -w net.ipv4.ip_forward=1
route add 10.99.0.0/16 encap mpls 500/600 via inet 172.16.21.22 dev %[2]s
route add 10.98.0.0/16 encap mpls 700 via inet 172.16.21.22 dev %[2]s
`, l.v10, l.v12)
	const probePort = 7778
	udpSink(t, l.ns2, probePort)
	results := map[string]*planetest.Result{}
	for _, m := range planetest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			n1 := startNode(t, l.ns1, "ns1.conf", conf1+m.Conf())
			// First with TX checksum offload on the kernels' veth ends
			// (the default): their TCP segments carry Linux's partial
			// form, which the program must pass up (a redirect would lose
			// the kernel's note that the sum is unfinished, and ns2 would
			// count them as TcpInCsumErrors: the transfer stalls).
			const size = 16 << 20
			txOffload := func(on string) {
				l.ns0.MustExec("ethtool", "-K", l.v01, "tx", on)
				l.ns2.MustExec("ethtool", "-K", l.v21, "tx", on)
			}
			state := func() string {
				return fmt.Sprintf("ns1 XDP %+v switch %+v", n1.Report().XDP, n1.Report().LabelSwitch)
			}
			txOffload("on")
			x := xdpCounts(n1)
			kernelTransfer(t, l.ns0, l.ns2, size, state)
			if d := planetest.Delta(x, xdpCounts(n1)); m.XDP && d["passed checksum_partial"] < size/1500 {
				t.Errorf("TX offload on: the XDP program's counters moved by %v, want passed checksum_partial >= %d", d, size/1500)
			}
			// Then with full checksums: the program carries the transfer.
			txOffload("off")
			x = xdpCounts(n1)
			kernelTransfer(t, l.ns0, l.ns2, size, state)
			if d := planetest.Delta(x, xdpCounts(n1)); m.XDP && d["ip_forwarded"] < size/1500 {
				t.Errorf("TX offload off: the XDP program's counters moved by %v, want ip_forwarded >= %d", d, size/1500)
			}
			lsrMAC := tcpip.LinkAddress(wiretest.MAC(t, l.ns1, l.v10))
			peerMAC := tcpip.LinkAddress(wiretest.MAC(t, l.ns0, l.v01))
			var frames [][]byte
			for _, dst := range []string{"172.16.21.22", "10.98.1.1", "10.99.1.1"} {
				payload := make([]byte, 200)
				for i := range payload {
					payload[i] = byte(i * 7)
				}
				frames = append(frames, mplstest.Frame{Dst: lsrMAC, Src: peerMAC,
					Payload: mplstest.IPv4UDP(netip.MustParseAddrPort("172.16.20.20:5000"), netip.AddrPortFrom(netip.MustParseAddr(dst), probePort), true, payload)}.Bytes())
			}
			x = xdpCounts(n1)
			res := probe{ns: l.ns0, dev: l.v01, frames: frames,
				taps: map[string]*wiretest.Tap{"ns2": wiretest.NewTap(t, l.ns2, l.v21, wiretest.UDPTo(probePort))}, tapCount: map[string]int{"ns2": len(frames)},
				nodes: map[string]*node.Node{"ns1": n1}, counts: map[string]map[string]uint64{"ns1": {"ip_forwarded": 3, "pushed": 2}},
			}.run(t)
			results[m.Name] = res
			if d := planetest.Delta(x, xdpCounts(n1)); m.XDP && (d["ip_forwarded"] != 3 || d["pushed"] != 2) {
				t.Errorf("probes: the XDP program's counters moved by %v, want ip_forwarded 3, pushed 2", d)
			}
			expectFields(t, "ns1-ns2", res.Frames["ns2"], []string{"mpls.label", "mpls.bottom", "mpls.ttl", "ip.ttl", "ip.checksum.status", "udp.checksum.status"},
				",,,63,1,1", "700,1,63,63,1,1", "500,600,0,1,63,63,63,1,1")

			// A route written to the tables directly, as BGP writes it
			// (the node is not told: the FIB's notification wakes the plane),
			// and one deleted through the control API: the first probe
			// leaves with label 800, the second draws no_route.
			fibBefore := 0
			if x := n1.Report().XDP; x != nil {
				fibBefore = x.FIBEntries
			}
			if err := n1.Stack().Tables().UpdateRoutes([]mpls.Route{{Prefix: netip.MustParsePrefix("10.97.0.0/16"),
				NextHops: []mpls.NextHop{{Via: netip.MustParseAddr("172.16.21.22"), Device: l.v12, Labels: []mpls.Label{800}}}}}, nil); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(5 * time.Second); m.XDP && n1.Report().XDP.FIBEntries <= fibBefore; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the XDP program did not take the new route in 5 s: %+v", n1.Report().XDP)
				}
			}
			if _, err := n1.DelRoute("10.98.0.0/16"); err != nil {
				t.Fatal(err)
			}
			frames = nil
			for _, dst := range []string{"10.97.1.1", "10.98.1.1"} {
				frames = append(frames, mplstest.Frame{Dst: lsrMAC, Src: peerMAC,
					Payload: mplstest.IPv4UDP(netip.MustParseAddrPort("172.16.20.20:5000"), netip.AddrPortFrom(netip.MustParseAddr(dst), probePort), true, make([]byte, 100))}.Bytes())
			}
			x = xdpCounts(n1)
			res2 := probe{ns: l.ns0, dev: l.v01, frames: frames,
				taps: map[string]*wiretest.Tap{"ns2": wiretest.NewTap(t, l.ns2, l.v21, wiretest.UDPTo(probePort))}, tapCount: map[string]int{"ns2": 1},
				nodes:  map[string]*node.Node{"ns1": n1},
				counts: map[string]map[string]uint64{"ns1": {"ip_forwarded": 1, "pushed": 1, "drop no_route": 1, "icmp_sent": 1}},
			}.run(t)
			res.Add("changed ", res2)
			if d := planetest.Delta(x, xdpCounts(n1)); m.XDP && (d["pushed"] != 1 || d["passed no_route"] != 1) {
				t.Errorf("changed routes: the XDP program's counters moved by %v, want pushed 1, passed no_route 1", d)
			}
			expectFields(t, "ns1-ns2 after the change", res2.Frames["ns2"], []string{"mpls.label", "mpls.bottom", "mpls.ttl", "ip.ttl"}, "800,1,63,63")
		})
	}
	planetest.CompareModes(t, results)
}

// kernelTransfer sends size bytes over TCP from the kernel in from to the
// kernel in to (172.16.21.22), SHA-256 checked, within transferTimeout.
func kernelTransfer(t *testing.T, from, to *netns.NS, size int64, state func() string) {
	t.Helper()
	addr, result := kernelSink(t, to, "172.16.21.22:0")
	c := kernelDial(t, from, addr, 10*time.Second)
	defer c.Close()
	sum := send(t, c, size, nil)
	c.Close()
	r := <-result
	if r.err != nil || r.n != size || r.sum != sum {
		t.Fatalf("got %d bytes, sha256 %x, err %v; want %d bytes, sha256 %x; %s", r.n, r.sum, r.err, size, sum, state())
	}
}
