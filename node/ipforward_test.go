package node_test

import (
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/nodekit"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// TestOneLinkHostDoesNotForward: a host with one link and
// net.ipv4.ip_forward=0 (the default) must not route an IPv4 packet
// addressed to another host back out (the forwarding plane once took
// every transit packet whatever the sysctl said); with ip_forward=1 it
// routes it. Planted bug: the node handing its forwarding plane to the
// stack unconditionally makes the first case forward.
func TestOneLinkHostDoesNotForward(t *testing.T) {
	for _, c := range []struct {
		sysctl  string
		forward bool
	}{{"", false}, {"sysctl -w net.ipv4.ip_forward=1\n", true}} {
		t.Run("forward="+map[bool]string{false: "off", true: "on"}[c.forward], func(t *testing.T) {
			ours := tcpip.LinkAddress("\x02\x00\x00\x00\x00\x01")
			peer := tcpip.LinkAddress("\x02\x00\x00\x00\x00\x02")
			link := channel.New(16, 1500, ours)
			n := nodekit.ChannelNode(t, "host.conf", "link add v0 type afpacket\naddr add 10.0.0.1/24 dev v0\n"+c.sysctl, nil, map[string]*channel.Endpoint{"v0": link})
			// The destination 10.0.0.3 is on the link: a forwarding node
			// sends it there (its MAC known statically, so no ARP).
			nodekit.StaticNeighbor(t, n, "v0", [4]byte{10, 0, 0, 3}, tcpip.LinkAddress("\x02\x00\x00\x00\x00\x03"))
			frame := make([]byte, header.EthernetMinimumSize+header.IPv4MinimumSize+8)
			header.Ethernet(frame).Encode(&header.EthernetFields{SrcAddr: peer, DstAddr: ours, Type: header.IPv4ProtocolNumber})
			ip := header.IPv4(frame[header.EthernetMinimumSize:])
			ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(frame) - header.EthernetMinimumSize), TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
				SrcAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 2}), DstAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 3})})
			ip.SetChecksum(^ip.CalculateChecksum())
			pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
			link.InjectInbound(header.EthernetProtocolAll, pkt)
			pkt.DecRef()
			deadline := time.Now().Add(2 * time.Second)
			var r node.Report
			for time.Now().Before(deadline) {
				r = n.Report()
				if r.LabelSwitch.IPForwarded > 0 || r.IP.Drops["forwarding_disabled"]+r.IP.Drops["invalid_destination"] > 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got := r.LabelSwitch.IPForwarded > 0; got != c.forward {
				t.Fatalf("forwarded %d packets, want forwarding %v; IP drops %v", r.LabelSwitch.IPForwarded, c.forward, r.IP.Drops)
			}
		})
	}
}
