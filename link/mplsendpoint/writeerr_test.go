package mplsendpoint_test

import (
	"testing"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// errnoLower refuses every write with the error link/afpacket returns for
// errno (tcpip.TranslateErrno).
type errnoLower struct {
	*channel.Endpoint
	errno unix.Errno
}

func (l errnoLower) WritePackets(stack.PacketBufferList) (int, tcpip.Error) {
	return 0, tcpip.TranslateErrno(l.errno)
}

// TestForwardToFailingLower is the regression test of an LSR crash: an IP
// packet forwarded out of a link whose interface is down (AF_PACKET send:
// ENETDOWN, which tcpip.TranslateErrno makes ErrInvalidEndpointState)
// panicked in gVisor's IPv4 forwarding ("unrecognized tcpip forwarding
// error"), which accepts only a few link errors. The endpoint must count
// the drop and hand gVisor an error it handles.
func TestForwardToFailingLower(t *testing.T) {
	for _, errno := range []unix.Errno{unix.ENETDOWN, unix.ENXIO, unix.ENODEV, unix.EIO, unix.ENOBUFS, unix.EMSGSIZE} {
		t.Run(unix.ErrnoName(errno), func(t *testing.T) {
			s := stack.New(stack.Options{
				NetworkProtocols: []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
			})
			defer s.Destroy()
			in := channel.New(4, 1500, "")
			tables := &mpls.Tables{}
			out, err := mplsendpoint.New(errnoLower{channel.New(4, 1500, macA), errno},
				mplsendpoint.Options{Tables: tables, LinkAddress: macA})
			if err != nil {
				t.Fatal(err)
			}
			for id, ep := range map[tcpip.NICID]stack.LinkEndpoint{1: in, 2: out} {
				if err := s.CreateNIC(id, ep); err != nil {
					t.Fatalf("CreateNIC %d: %v", id, err)
				}
				if err := s.SetForwardingDefaultAndAllNICs(ipv4.ProtocolNumber, true); err != nil {
					t.Fatal(err)
				}
			}
			// 10.0.0.2 (addrB4) is on NIC 2, with a static neighbour so the
			// packet reaches the lower link at once.
			s.AddProtocolAddress(1, tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber,
				AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4([4]byte{192, 168, 9, 1}), PrefixLen: 24}}, stack.AddressProperties{})
			s.AddProtocolAddress(2, tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber,
				AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4(addrA4.As4()), PrefixLen: 24}}, stack.AddressProperties{})
			s.SetRouteTable([]tcpip.Route{{Destination: hostSubnet(addrB4), NIC: 2}})
			if err := s.AddStaticNeighbor(2, ipv4.ProtocolNumber, tcpip.AddrFrom4(addrB4.As4()), macB); err != nil {
				t.Fatal(err)
			}

			ip := ipv4Packet(false, 8)
			header.IPv4(ip).SetSourceAddress(tcpip.AddrFrom4([4]byte{192, 168, 9, 2}))
			header.IPv4(ip).SetChecksum(0)
			header.IPv4(ip).SetChecksum(^header.IPv4(ip).CalculateChecksum())
			pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(ip)})
			in.InjectInbound(ipv4.ProtocolNumber, pkt) // panicked before the fix
			pkt.DecRef()

			st := out.Stats()
			if got := st.Drop(mplsendpoint.DropLowerWriteError); got != 1 {
				t.Errorf("lower_write_error = %d, want 1 (the forwarded packet)", got)
			}
		})
	}
}
