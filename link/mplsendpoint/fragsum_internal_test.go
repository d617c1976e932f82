package mplsendpoint

import (
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

type countUp struct{ n int }

func (c *countUp) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) { c.n++ }
func (*countUp) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer)      {}

// testFragment returns an Ethernet frame holding an IPv4 fragment of
// datagram id: 8 payload bytes at offset off, More set or not.
func testFragment(mac tcpip.LinkAddress, id uint16, off uint16, more bool) []byte {
	b := make([]byte, header.EthernetMinimumSize+header.IPv4MinimumSize+8)
	header.Ethernet(b).Encode(&header.EthernetFields{DstAddr: mac, Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(b[header.EthernetMinimumSize:])
	var flags uint8
	if more {
		flags = header.IPv4FlagMoreFragments
	}
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber), ID: id,
		Flags: flags, FragmentOffset: off, SrcAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 2}), DstAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 1})})
	ip.SetChecksum(^ip.CalculateChecksum())
	return b
}

// TestFragmentTimeout: a datagram whose fragments span more than the
// reassembly timeout is not completed from the stale piece: the held
// fragment is dropped (fragment_timeout) when the next one arrives after
// the deadline, and the later fragments start a new datagram. Planted bug
// (both the deadline check at lookup and the incremental expiry removed
// from deliverFragment; either alone catches it): the stale and the new
// fragment completed one datagram, 2 delivered.
func TestFragmentTimeout(t *testing.T) {
	const mac = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a")
	e, err := New(channel.New(8, 1500, mac), Options{})
	if err != nil {
		t.Fatal(err)
	}
	up := &countUp{}
	e.Attach(up)
	defer e.Close()
	inject := func(f []byte) {
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(f)})
		e.DeliverNetworkPacket(0, pkt)
		pkt.DecRef()
	}
	inject(testFragment(mac, 9, 0, true))
	if st := e.Stats(); st.RXFragmentsHeld != 1 {
		t.Fatalf("%d fragments held, want 1", st.RXFragmentsHeld)
	}
	e.frag.mu.Lock()
	e.frag.epoch = e.frag.epoch.Add(-fragTimeout4 - time.Second) // 31 s later
	e.frag.mu.Unlock()
	inject(testFragment(mac, 9, 8, false))
	st := e.Stats()
	if got := st.Drop(DropFragmentTimeout); got != 1 {
		t.Errorf("fragment_timeout = %d, want 1", got)
	}
	if st.RXFragmentsHeld != 1 || up.n != 0 {
		t.Errorf("%d fragments held, %d delivered: want the last one held alone, none delivered", st.RXFragmentsHeld, up.n)
	}
}
