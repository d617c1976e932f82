package node_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/planetest"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// TestLERReturnPath makes the seed's LSR (ns1) an LER on the return path:
// IP packets from the kernel in ns2 to ns0 are forwarded by ns1's stack and
// leave with label 200, which ns0 pops to itself. The kernel sends full-size
// (1500-byte) packets in GSO frames whose segment size the veth does not
// tell, so ns1 must cut them to fit the labelled route (1496): 8 MiB arrive
// whole at ns0. Before, ns1 cut at the link MTU and the packets were too
// big for the labelled route: a trickle of retransmits.
//
// It runs in both forwarding modes (issue 14): in mode=xdp the program on
// ns1's links finds their FIB route but passes them up (egress_down: ns0's
// end of the veth, a node's AF_PACKET link, runs no NAPI, so the kernel
// would drop a redirect) and the userspace path labels them
// (TestXDPIPTransit has the program push labels itself). In each mode UDP probes from ns2's kernel end of its link
// (three sizes) leave ns1 with label 200 and TTL 63 (the IP TTL less one,
// uniform model), and both modes must give the same frames at ns0 (tshark
// decodes, MD5) and the same counters (pushed, ip_forwarded). Planted
// bug: the forwarding plane pushing the received TTL instead of the
// decremented one (forward/ip.go): label TTL 64, in both modes (TestECMP
// fails too: TTL 63 after the pop).
func TestLERReturnPath(t *testing.T) {
	wiretest.Need(t)
	l := newLine(t, "r", 0, 1)
	l.ns2.MustExec("ip", "addr", "add", "172.16.21.22/24", "dev", l.v21)
	l.ns2.MustExec("ip", "route", "add", "172.16.20.0/24", "via", "172.16.21.21")
	conf0 := fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.20.20/24 dev %[1]s
route add 172.16.21.0/24 via 172.16.20.21
-f mpls route add 200 dev lo
`, l.v01)
	conf1 := fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.20.21/24 dev %[1]s
addr add 172.16.21.21/24 dev %[2]s
sysctl -w net.ipv4.ip_forward=1
route add 172.16.20.20/32 encap mpls 200 via inet 172.16.20.20 dev %[1]s
`, l.v10, l.v12)
	const probePort = 7777
	results := map[string]*planetest.Result{}
	for _, m := range planetest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			n0 := startNode(t, l.ns0, "ns0.conf", conf0)
			n1 := startNode(t, l.ns1, "ns1.conf", conf1+m.Conf())
			lerTransfer(t, n0, n1, l.ns2)

			pc, err := n0.Stack().ListenUDP(netip.MustParseAddrPort(fmt.Sprintf("172.16.20.20:%d", probePort)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pc.Close() })
			var frames [][]byte
			lerMAC, peerMAC := tcpip.LinkAddress(wiretest.MAC(t, l.ns1, l.v12)), tcpip.LinkAddress(wiretest.MAC(t, l.ns2, l.v21))
			for _, size := range []int{0, 300, 1400} {
				payload := make([]byte, size)
				for i := range payload {
					payload[i] = byte(i * 11)
				}
				frames = append(frames, mplstest.Frame{Dst: lerMAC, Src: peerMAC,
					Payload: mplstest.IPv4UDP(netip.MustParseAddrPort("172.16.21.22:5000"), netip.AddrPortFrom(netip.MustParseAddr("172.16.20.20"), probePort), true, payload)}.Bytes())
			}
			n := uint64(len(frames))
			x := xdpCounts(n1)
			res := probe{ns: l.ns2, dev: l.v21, frames: frames,
				taps: map[string]*wiretest.Tap{"ns0": wiretest.NewTap(t, l.ns0, l.v01, wiretest.UDPTo(probePort))}, tapCount: map[string]int{"ns0": len(frames)},
				nodes: map[string]*node.Node{"ns1": n1}, counts: map[string]map[string]uint64{"ns1": {"pushed": n, "ip_forwarded": n}},
			}.run(t)
			results[m.Name] = res
			if d := planetest.Delta(x, xdpCounts(n1)); m.XDP && d["passed egress_down"] < n {
				t.Errorf("the XDP program's counters moved by %v, want passed egress_down %d", d, n)
			}
			expectFields(t, "ns1-ns0", res.Frames["ns0"], []string{"mpls.label", "mpls.bottom", "mpls.ttl", "ip.ttl", "ip.checksum.status", "udp.checksum.status"}, "200,1,63,63,1,1")
		})
	}
	planetest.CompareModes(t, results)
}

// lerTransfer sends 8 MiB from the kernel in ns2 to n0 through n1, the
// LER, which must cut the kernel's GSO frames to its labelled route's MTU
// and push label 200 on them in its forwarding plane.
func lerTransfer(t *testing.T, n0, n1 *node.Node, ns2 *netns.NS) {
	t.Helper()
	sums := stackSink(t, n0, "172.16.20.20:5001", 1)
	c := kernelDial(t, ns2, "172.16.20.20:5001", 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.SetDeadline(time.Now().Add(time.Minute))
	const size = 8 << 20
	want := send(t, c, size, nil)
	select {
	case got := <-sums:
		if got != want {
			t.Error("SHA-256 differs")
		}
	case <-ctx.Done():
		t.Fatalf("the transfer did not finish; ns1 IP %+v", n1.Report().IP)
	}
	// ns1 cut the kernel's GSO frames to its labelled MTU as it received
	// them, so nothing was too big to forward, and its forwarding plane
	// pushed label 200 on them (the LER role for transit traffic; gVisor's
	// IP forwarding never saw them).
	sw := n1.Stats().Switch
	if sw.Drop(forward.DropMTUExceeded) != 0 || sw.Fragmented != 0 || sw.Pushed < size/1500 {
		t.Errorf("ns1: switch %+v; want nothing too big and at least %d pushed", sw, size/1500)
	}
	if ip := n1.Report().IP; ip.Drops["forward_packet_too_big"] != 0 || ip.PacketsSent != 0 {
		t.Errorf("ns1: IP %+v; want gVisor to forward nothing", ip)
	}
}

// kernelDial dials addr over TCP from ns's kernel, giving up after
// within.
func kernelDial(t *testing.T, ns *netns.NS, addr string, within time.Duration) net.Conn {
	t.Helper()
	var c net.Conn
	if err := ns.Run(func() (err error) {
		c, err = net.DialTimeout("tcp", addr, within)
		return err
	}); err != nil {
		t.Fatalf("kernel dial %s in %s: %v", addr, ns.Name(), err)
	}
	return c
}

// stackSink listens on addr in n's stack until t ends and sends on the
// returned channel (room deep) the SHA-256 of each connection's bytes,
// read within a minute.
func stackSink(t *testing.T, n *node.Node, addr string, room int) <-chan [32]byte {
	t.Helper()
	ln, err := n.Stack().Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	sums := make(chan [32]byte, room)
	go acceptSums(ln, sums)
	return sums
}

// acceptSums accepts connections on ln until it closes and sends the
// SHA-256 of each connection's bytes.
func acceptSums(ln net.Listener, sums chan<- [32]byte) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(time.Minute))
			h := sha256.New()
			io.Copy(h, c)
			var s [32]byte
			copy(s[:], h.Sum(nil))
			sums <- s
		}()
	}
}
