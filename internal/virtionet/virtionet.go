// Package virtionet reads and writes the virtio-net header (struct
// virtio_net_hdr, linux/virtio_net.h) that a TAP with IFF_VNET_HDR and a
// packet socket with PACKET_VNET_HDR put before each frame: how the kernel
// is to segment a GSO frame and where a partial checksum is to be finished.
// The header is in host byte order there (the legacy, pre-virtio-1.0
// layout, which is what the kernel uses for both).
package virtionet

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// HdrLen is sizeof(struct virtio_net_hdr).
const HdrLen = 10

// Flags and GSO types of the header.
const (
	FlagNeedsCsum = 1    // VIRTIO_NET_HDR_F_NEEDS_CSUM: checksum partial, finish it at CsumStart+CsumOffset
	FlagDataValid = 2    // VIRTIO_NET_HDR_F_DATA_VALID: checksum verified by the sender's side
	GSONone       = 0    // VIRTIO_NET_HDR_GSO_NONE
	GSOTCPv4      = 1    // VIRTIO_NET_HDR_GSO_TCPV4
	GSOUDP        = 3    // VIRTIO_NET_HDR_GSO_UDP
	GSOTCPv6      = 4    // VIRTIO_NET_HDR_GSO_TCPV6
	GSOUDPL4      = 5    // VIRTIO_NET_HDR_GSO_UDP_L4
	GSOECN        = 0x80 // VIRTIO_NET_HDR_GSO_ECN, or'ed into the type
)

// Hdr is a decoded virtio-net header.
type Hdr struct {
	Flags      uint8
	GSOType    uint8
	HdrLen     uint16 // Ethernet + IP + TCP header bytes of a GSO frame
	GSOSize    uint16 // the MSS of a GSO frame
	CsumStart  uint16 // offset of the checksummed part from the frame start
	CsumOffset uint16 // offset of the checksum field from CsumStart
}

// Decode reads a header from b, which must hold HdrLen bytes.
func Decode(b []byte) Hdr {
	_ = b[HdrLen-1]
	return Hdr{
		Flags:      b[0],
		GSOType:    b[1],
		HdrLen:     binary.NativeEndian.Uint16(b[2:]),
		GSOSize:    binary.NativeEndian.Uint16(b[4:]),
		CsumStart:  binary.NativeEndian.Uint16(b[6:]),
		CsumOffset: binary.NativeEndian.Uint16(b[8:]),
	}
}

// Encode writes h into b, which must hold HdrLen bytes.
func (h Hdr) Encode(b []byte) {
	_ = b[HdrLen-1]
	b[0] = h.Flags
	b[1] = h.GSOType
	binary.NativeEndian.PutUint16(b[2:], h.HdrLen)
	binary.NativeEndian.PutUint16(b[4:], h.GSOSize)
	binary.NativeEndian.PutUint16(b[6:], h.CsumStart)
	binary.NativeEndian.PutUint16(b[8:], h.CsumOffset)
}

// IsGSOFrame reports whether pkt is a TCP GSO frame the kernel can take
// behind a virtio-net header: GSOOptions say TCP with a partial checksum,
// the link header is a plain Ethernet header over IPv4 or IPv6 (the kernel
// cannot segment MPLS), and the data is longer than one segment. (Segments
// an upper endpoint cut itself keep the GSOOptions of the packet they came
// from; they go out as plain frames.)
func IsGSOFrame(pkt *stack.PacketBuffer) bool {
	g := pkt.GSOOptions
	if (g.Type != stack.GSOTCPv4 && g.Type != stack.GSOTCPv6) || g.MSS == 0 || !g.NeedsCsum {
		return false
	}
	lh := pkt.LinkHeader().Slice()
	if len(lh) != header.EthernetMinimumSize {
		return false
	}
	switch binary.BigEndian.Uint16(lh[12:]) {
	case uint16(header.IPv4ProtocolNumber), uint16(header.IPv6ProtocolNumber):
	default:
		return false
	}
	return pkt.Data().Size() > int(g.L3HdrLen)+tcpHeaderLen(pkt)+int(g.MSS)
}

// tcpHeaderLen returns the length of pkt's TCP header, options included
// (the minimum when the data offset cannot be read).
func tcpHeaderLen(pkt *stack.PacketBuffer) int {
	l3 := int(pkt.GSOOptions.L3HdrLen)
	if b, ok := pkt.Data().PullUp(l3 + header.TCPMinimumSize); ok {
		if n := int(header.TCP(b[l3:]).DataOffset()); n >= header.TCPMinimumSize {
			return n
		}
	}
	return header.TCPMinimumSize
}

// ForPacket returns the header for pkt, a whole Ethernet frame: zero (a
// plain frame with its checksums done) unless IsGSOFrame(pkt), whose
// segment size, header length and partial TCP checksum it then describes.
func ForPacket(pkt *stack.PacketBuffer) Hdr {
	if !IsGSOFrame(pkt) {
		return Hdr{}
	}
	g := pkt.GSOOptions
	typ := uint8(GSOTCPv4)
	if g.Type == stack.GSOTCPv6 {
		typ = GSOTCPv6
	}
	l3 := header.EthernetMinimumSize + int(g.L3HdrLen)
	tcpLen := tcpHeaderLen(pkt)
	return Hdr{
		Flags:      FlagNeedsCsum,
		GSOType:    typ,
		HdrLen:     uint16(l3 + tcpLen),
		GSOSize:    g.MSS,
		CsumStart:  uint16(l3),
		CsumOffset: uint16(g.CsumOffset),
	}
}
