package virtionet

import (
	"bytes"
	"encoding/binary"
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// gsoPacket builds an Ethernet/IPv4/TCP packet with payload bytes of data
// and the given GSO options, as the stack hands it to a link.
func gsoPacket(payload int, g stack.GSO, ethType uint16) *stack.PacketBuffer {
	tcp := make([]byte, 32+payload) // a TCP header with 12 bytes of options
	tcp[12] = 8 << 4
	ip := make([]byte, header.IPv4MinimumSize)
	ip[0] = 0x45 // version 4, IHL 5
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: 14,
		Payload: buffer.MakeWithData(append(ip, tcp...))})
	eth := pkt.LinkHeader().Push(14)
	binary.BigEndian.PutUint16(eth[12:], ethType)
	pkt.GSOOptions = g
	return pkt
}

// TestForPacket checks the header for a TCP GSO packet against the layout
// of struct virtio_net_hdr (linux/virtio_net.h, host byte order), and that
// anything else gets a zero header. Planted bug: HdrLen without the TCP
// options (20 instead of 32) fails the golden bytes.
func TestForPacket(t *testing.T) {
	g := stack.GSO{Type: stack.GSOTCPv4, NeedsCsum: true, CsumOffset: 16, MSS: 1000, L3HdrLen: header.IPv4MinimumSize}
	pkt := gsoPacket(3000, g, 0x0800)
	defer pkt.DecRef()
	var got [HdrLen]byte
	ForPacket(pkt).Encode(got[:])
	want := []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.NativeEndian.PutUint16(want[2:], 14+20+32) // hdr_len
	binary.NativeEndian.PutUint16(want[4:], 1000)     // gso_size
	binary.NativeEndian.PutUint16(want[6:], 14+20)    // csum_start
	binary.NativeEndian.PutUint16(want[8:], 16)       // csum_offset
	if !bytes.Equal(got[:], want) {
		t.Errorf("header % x, want % x", got, want)
	}
	if h := Decode(got[:]); h != ForPacket(pkt) {
		t.Errorf("Decode(Encode(h)) = %+v, want %+v", h, ForPacket(pkt))
	}
	for _, c := range []struct {
		name string
		pkt  *stack.PacketBuffer
	}{
		{"one segment", gsoPacket(1000, g, 0x0800)},
		{"MPLS", gsoPacket(3000, g, 0x8847)},
		{"no GSO", gsoPacket(3000, stack.GSO{}, 0x0800)},
		{"full checksum", gsoPacket(3000, stack.GSO{Type: stack.GSOTCPv4, MSS: 1000, L3HdrLen: 20}, 0x0800)},
	} {
		if h := ForPacket(c.pkt); h != (Hdr{}) {
			t.Errorf("%s: header %+v, want zero (a plain frame)", c.name, h)
		}
		c.pkt.DecRef()
	}
}
