package node

import (
	"encoding/binary"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// ICMP extension sizes (RFC 4884, RFC 4950).
const (
	// icmpOrigLen is the length of the "original datagram" field when an
	// extension structure follows: RFC 4884 §5.1 requires at least 128
	// octets, zero-padded, so that older receivers find the extension at a
	// fixed offset.
	icmpOrigLen = 128
	// icmpExtHeaderLen is the extension header: version, reserved,
	// checksum (RFC 4884 §7).
	icmpExtHeaderLen = 4
	// icmpObjHeaderLen is an object header: length, class-num, c-type
	// (RFC 4884 §7.2).
	icmpObjHeaderLen = 4
	// icmpExtVersion is the extension structure version (RFC 4884 §7).
	icmpExtVersion = 2
	// mplsStackClass and mplsStackCType identify the "MPLS Label Stack"
	// object (RFC 4950 §7: class-num 1, c-type 1, incoming label stack).
	mplsStackClass = 1
	mplsStackCType = 1
	// icmpv4LengthOffset is where ICMPv4 time exceeded carries the
	// length of the original datagram field, in 32-bit words (RFC 4884
	// §4.1: the second octet of the unused word).
	icmpv4LengthOffset = 5
	// icmpv6LengthOffset is the same for ICMPv6, in 64-bit words (RFC 4884
	// §4.2: the first octet of the unused word).
	icmpv6LengthOffset = 4
	// icmpErrorTTL is the TTL of the time exceeded messages we originate,
	// Linux's default.
	icmpErrorTTL = 64
)

// TimeExceeded returns an ICMP time exceeded message (the ICMP header and
// body, without the IP header) for the IP packet orig (IPv4 when v6 is
// false), carrying labels, the label stack as received (4 bytes per entry,
// outermost first), in an RFC 4950 MPLS label stack object inside an RFC
// 4884 extension structure. The original datagram field holds orig's first
// 128 bytes, zero-padded to 128. For ICMPv6 the checksum covers the
// pseudo-header with src and dst (the addresses of the IP header the
// message will go in); ICMPv4 ignores them.
func TimeExceeded(v6 bool, orig, labels []byte, src, dst netip.Addr) []byte {
	obj := icmpObjHeaderLen + len(labels)
	total := header.ICMPv4MinimumSize + icmpOrigLen + icmpExtHeaderLen + obj
	b := make([]byte, total)
	copy(b[header.ICMPv4MinimumSize:header.ICMPv4MinimumSize+icmpOrigLen], orig)
	ext := b[header.ICMPv4MinimumSize+icmpOrigLen:]
	ext[0] = icmpExtVersion << 4
	o := ext[icmpExtHeaderLen:]
	binary.BigEndian.PutUint16(o[0:], uint16(obj))
	o[2] = mplsStackClass
	o[3] = mplsStackCType
	copy(o[icmpObjHeaderLen:], labels)
	binary.BigEndian.PutUint16(ext[2:], ^checksum.Checksum(ext, 0))
	if !v6 {
		b[0] = byte(header.ICMPv4TimeExceeded)
		b[1] = byte(header.ICMPv4TTLExceeded)
		b[icmpv4LengthOffset] = icmpOrigLen / 4
		binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, 0))
		return b
	}
	b[0] = byte(header.ICMPv6TimeExceeded)
	b[1] = byte(header.ICMPv6HopLimitExceeded)
	b[icmpv6LengthOffset] = icmpOrigLen / 8
	s, d := tcpip.AddrFrom16(src.As16()), tcpip.AddrFrom16(dst.As16())
	sum := header.PseudoHeaderChecksum(header.ICMPv6ProtocolNumber, s, d, uint16(len(b)))
	binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, sum))
	return b
}
