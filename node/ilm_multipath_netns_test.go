package node_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/planetest"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// TestSeedILMMultipath gives the seed's LSR (ns1) a multipath label
// route, 110 popped towards 172.16.21.22 or (weight 3) 172.16.21.23, both
// ns2's kernel, and sends 16 UDP flows over label 110 from ns0's kernel
// end of its link, in both forwarding modes. Each arrives in ns2 popped
// (tshark: no label, IP TTL 63, checksums good), with the same frames and
// counters in both modes. In mode=xdp the XDP program forwards none of
// them itself: it passes every one up as ecmp and userspace's label
// switch pops them (its flow hash keeps each flow on one hop). Planted
// bug: the XDP mirror carrying a multipath label's first hop as a plain
// pop: the program pops the probes itself (popped_ip moves in its
// counters, ecmp does not).
func TestSeedILMMultipath(t *testing.T) {
	wiretest.Need(t)
	s := newSeedNets(t, "afpacket", "")
	wiretest.GROOn(t, s.ns2, s.v21)
	s.ns2.MustExec("ip", "addr", "add", "172.16.21.23/24", "dev", s.v21)
	const probePort, flows = 7778, 16
	udpSink(t, s.ns2, probePort)
	route := fmt.Sprintf("-f mpls route add 110 nexthop via inet 172.16.21.22 dev %[1]s nexthop via inet 172.16.21.23 dev %[1]s weight 3\n", s.v12)
	results := map[string]*planetest.Result{}
	for _, m := range planetest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			s.start(t, m.Conf()+route, node.Options{}, node.Options{})
			if m.XDP {
				planetest.WaitXDPEntries(t, s.n1.Report, 1)
			}
			lsrMAC, srcMAC := wiretest.MAC(t, s.ns1, s.v10), wiretest.MAC(t, s.ns0, s.v01)
			var frames [][]byte
			for i := range flows {
				frames = append(frames, mplstest.Frame{Dst: tcpip.LinkAddress(lsrMAC), Src: tcpip.LinkAddress(srcMAC), Labels: mplstest.Stack(64, 110),
					Payload: mplstest.IPv4UDP(netip.AddrPortFrom(netip.MustParseAddr("172.16.20.20"), uint16(5000+i)),
						netip.AddrPortFrom(netip.MustParseAddr("10.10.10.10"), probePort), true, []byte("multipath"))}.Bytes())
			}
			x := xdpCounts(s.n1)
			res := probe{ns: s.ns0, dev: s.v01, frames: frames,
				taps:     map[string]*wiretest.Tap{"popped": wiretest.NewTap(t, s.ns2, s.v21, wiretest.UDPTo(probePort))},
				tapCount: map[string]int{"popped": flows},
				nodes:    map[string]*node.Node{"ns1": s.n1},
				counts:   map[string]map[string]uint64{"ns1": {"popped_ip": flows}},
			}.run(t)
			results[m.Name] = res
			if m.XDP {
				if d := planetest.Delta(x, xdpCounts(s.n1)); d["popped_ip"] != 0 || d["passed ecmp"] != flows {
					t.Errorf("the XDP program's counters moved by %v, want passed ecmp %d and nothing popped by the program", d, flows)
				}
			}
			expectFields(t, "ns1-ns2", res.Frames["popped"], []string{"mpls.label", "ip.ttl", "ip.checksum.status", "udp.checksum.status"}, ",63,1,1")
		})
	}
	planetest.CompareModes(t, results)
}
