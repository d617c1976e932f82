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

// IsGSOFrame reports whether pkt, a frame a link is about to write, may
// leave whole as one TCP GSO frame behind a virtio-net header (a TAP with
// IFF_VNET_HDR, a packet socket with PACKET_VNET_HDR) for the kernel to
// segment, rather than as a plain frame of at most the MTU. It is the one
// place this is written: link/afpacket and link/tap write the
// header ForPacket builds from it, and link/mplsendpoint's slot path
// (writeSlots) asks it before it hands a packet down whole, so the two
// sides agree: a packet handed down whole that the link then wrote behind
// a zero header would be a frame over the MTU with an unfinished checksum
// (the kernel refuses it: EMSGSIZE), and a header saying NEEDS_CSUM on a
// finished checksum corrupts it.
//
// It may, when all of these hold; they are the kernel's rules
// (virtio_net_hdr_to_skb and packet_snd in Linux) and what our headers
// need:
//
//   - pkt.GSOOptions.Type is GSOTCPv4 or GSOTCPv6 (the kernel's
//     VIRTIO_NET_HDR_GSO_TCPV4/TCPV6; no UDP GSO is sent), over a plain
//     14-byte Ethernet header whose EtherType is the type's (IPv4, IPv6):
//     the kernel cannot segment an MPLS frame from user space without
//     CONFIG_NET_MPLS_GSO, and a VLAN tag would move every offset.
//   - NeedsCsum, with CsumOffset 16 (the TCP checksum field): the header
//     says VIRTIO_NET_HDR_F_NEEDS_CSUM, so the TCP checksum field must
//     hold the pseudo-header sum the kernel finishes; a full checksum
//     there would be summed again and go out wrong, and the kernel refuses
//     any other csum_offset for TCP GSO (EINVAL).
//   - The header lengths fit: L3HdrLen at least the fixed IP header (20,
//     40; an IPv4 header's IHL equal to it, and IPv6 extension headers
//     counted in it), a TCP data offset of at least 20 bytes, and the
//     frame holding the Ethernet, IP and whole TCP header (the kernel
//     pulls them; hdr_len longer than the frame is EINVAL), hdr_len and
//     csum_start fitting their 16 bits.
//   - The size limits: an MSS that is not 0 (EINVAL); a TCP payload
//     longer than one MSS (a packet of one segment is not a GSO packet, to
//     the kernel either; it goes out plain, its checksum finished by
//     whoever cut or made it: segments an upper endpoint cut itself keep
//     the GSOOptions of the packet they came from); and an IP packet its
//     length field can describe (at most 65535 bytes of IPv4, 65535 of
//     IPv6 payload), which also keeps the MSS below 0xFFFF (GSO_BY_FRAGS,
//     EINVAL).
//
// The payload is counted from the real TCP header length, options
// included, read at its place in the frame: the headers may be in pkt's
// pushed headers (a packet of gVisor's TCP, whose Data is then the
// payload alone) or in its Data (a packet forward's GRO built, Data the
// whole IP packet); either way the frame is the same bytes.
func IsGSOFrame(pkt *stack.PacketBuffer) bool {
	_, ok := gsoLayout(pkt)
	return ok
}

// gsoLayout returns the length of pkt's TCP header, options included, and
// whether pkt may leave whole (IsGSOFrame).
func gsoLayout(pkt *stack.PacketBuffer) (tcpLen int, ok bool) {
	g := pkt.GSOOptions
	var ethType uint16
	var minL3, version int
	switch g.Type {
	case stack.GSOTCPv4:
		ethType, minL3, version = uint16(header.IPv4ProtocolNumber), header.IPv4MinimumSize, header.IPv4Version
	case stack.GSOTCPv6:
		ethType, minL3, version = uint16(header.IPv6ProtocolNumber), header.IPv6MinimumSize, header.IPv6Version
	default:
		return 0, false
	}
	if !g.NeedsCsum || g.CsumOffset != header.TCPChecksumOffset || g.MSS == 0 {
		return 0, false
	}
	lh := pkt.LinkHeader().Slice()
	if len(lh) != header.EthernetMinimumSize || binary.BigEndian.Uint16(lh[12:]) != ethType {
		return 0, false
	}
	l3 := int(g.L3HdrLen)
	size := pkt.Size() - header.EthernetMinimumSize // the IP packet
	if l3 < minL3 || size < l3+header.TCPMinimumSize {
		return 0, false
	}
	var ip0, tcp12 [1]byte
	if !readAt(pkt, header.EthernetMinimumSize, ip0[:]) || !readAt(pkt, header.EthernetMinimumSize+l3+12, tcp12[:]) {
		return 0, false
	}
	if int(ip0[0]>>4) != version || (version == header.IPv4Version && int(ip0[0]&0xf)*4 != l3) {
		return 0, false
	}
	tcpLen = int(tcp12[0]>>4) * 4
	if tcpLen < header.TCPMinimumSize || size-l3-tcpLen <= int(g.MSS) {
		return 0, false
	}
	if header.EthernetMinimumSize+l3+tcpLen > 0xFFFF || // hdr_len
		version == header.IPv4Version && size > 0xFFFF || version == header.IPv6Version && size-header.IPv6MinimumSize > 0xFFFF {
		return 0, false
	}
	return tcpLen, true
}

// readAt fills b with pkt's bytes from offset off of the frame (link
// header included), wherever they sit in its views; false when the frame
// is shorter.
func readAt(pkt *stack.PacketBuffer, off int, b []byte) bool {
	vl, start := pkt.AsViewList()
	off += start
	for v := vl.Front(); v != nil && len(b) > 0; v = v.Next() {
		s := v.AsSlice()
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n := copy(b, s[off:])
		b, off = b[n:], 0
	}
	return len(b) == 0
}

// ForPacket returns the header for pkt, a whole Ethernet frame: zero (a
// plain frame with its checksums done) unless IsGSOFrame(pkt), whose
// segment size, header length and partial TCP checksum it then describes.
func ForPacket(pkt *stack.PacketBuffer) Hdr {
	tcpLen, ok := gsoLayout(pkt)
	if !ok {
		return Hdr{}
	}
	g := pkt.GSOOptions
	typ := uint8(GSOTCPv4)
	if g.Type == stack.GSOTCPv6 {
		typ = GSOTCPv6
	}
	l3 := header.EthernetMinimumSize + int(g.L3HdrLen)
	return Hdr{
		Flags:      FlagNeedsCsum,
		GSOType:    typ,
		HdrLen:     uint16(l3 + tcpLen),
		GSOSize:    g.MSS,
		CsumStart:  uint16(l3),
		CsumOffset: uint16(g.CsumOffset),
	}
}
