// Package icmp builds the ICMP error messages the node originates, in one
// place for the link endpoint (which answers its own stack when a labelled
// route is too narrow) and the forwarding plane (which answers transit
// senders): time exceeded, fragmentation needed and Packet Too Big, with
// the received label stack as an RFC 4950 extension when there is one, and
// the RFC 1812 §4.3.2.7 / RFC 4443 §2.4 rules for what gets no error.
package icmp

import (
	"encoding/binary"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// ICMP extension sizes (RFC 4884, RFC 4950).
const (
	// OrigLen is the length of the "original datagram" field when an
	// extension structure follows: RFC 4884 §5.1 requires at least 128
	// octets, zero-padded, so that older receivers find the extension at a
	// fixed offset.
	OrigLen = 128
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
	// ErrorTTL is the TTL (hop limit) of the ICMP errors we originate,
	// Linux's default.
	ErrorTTL = 64
	// icmpv4MaxLen bounds an ICMPv4 error without extensions, its IP
	// header included: it quotes as much of the offending datagram as
	// fits in 576 bytes (RFC 1812 §4.3.2.3; RFC 792's IP header and 64
	// bits is the least).
	icmpv4MaxLen = 576
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
	if labels == nil {
		if v6 {
			return plain(true, byte(header.ICMPv6TimeExceeded), byte(header.ICMPv6HopLimitExceeded), orig, 0, src, dst)
		}
		return plain(false, byte(header.ICMPv4TimeExceeded), byte(header.ICMPv4TTLExceeded), orig, 0, src, dst)
	}
	if !v6 {
		b := withLabelStack(orig, labels)
		b[0] = byte(header.ICMPv4TimeExceeded)
		b[1] = byte(header.ICMPv4TTLExceeded)
		b[icmpv4LengthOffset] = OrigLen / 4
		binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, 0))
		return b
	}
	b := withLabelStack(orig, labels)
	b[0] = byte(header.ICMPv6TimeExceeded)
	b[1] = byte(header.ICMPv6HopLimitExceeded)
	b[icmpv6LengthOffset] = OrigLen / 8
	icmpv6Checksum(b, src, dst)
	return b
}

// FragmentationNeeded returns the ICMP message (header and body, without
// the IP header) that tells orig's sender its packet is too big for the
// path and what fits: mtu, the IP MTU of the labelled path (link MTU less
// the label overhead, RFC 3032 §3.2). For IPv4 it is a destination
// unreachable, fragmentation needed and DF set (RFC 1191), with labels as
// an RFC 4950 extension like TimeExceeded; with labels nil, the plain RFC
// 792 form quoting as much as fits in 576 bytes. For IPv6 it is a Packet Too Big
// (RFC 4443 §3.2) carrying as much of orig as fits in the IPv6 minimum
// MTU; RFC 4884 defines no extension for it, so it has no label stack.
func FragmentationNeeded(v6 bool, orig, labels []byte, mtu uint32, src, dst netip.Addr) []byte {
	if !v6 && labels == nil {
		return plain(false, byte(header.ICMPv4DstUnreachable), byte(header.ICMPv4FragmentationNeeded), orig, min(mtu, 0xffff), src, dst)
	}
	if !v6 {
		b := withLabelStack(orig, labels)
		b[0] = byte(header.ICMPv4DstUnreachable)
		b[1] = byte(header.ICMPv4FragmentationNeeded)
		b[icmpv4LengthOffset] = OrigLen / 4
		binary.BigEndian.PutUint16(b[6:], uint16(min(mtu, 0xffff)))
		binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, 0))
		return b
	}
	n := min(len(orig), header.IPv6MinimumMTU-header.IPv6MinimumSize-header.ICMPv6MinimumSize)
	b := make([]byte, header.ICMPv6MinimumSize+n)
	b[0] = byte(header.ICMPv6PacketTooBig)
	binary.BigEndian.PutUint32(b[4:], mtu)
	copy(b[header.ICMPv6MinimumSize:], orig[:n])
	icmpv6Checksum(b, src, dst)
	return b
}

// plain returns an ICMP error without extensions: type, code, the 32-bit
// word after the checksum (the MTU for fragmentation needed / Packet Too
// Big), and the quote: for ICMPv4 as much of orig as fits in 576 bytes
// with the error's own IP header (20 bytes: no options; RFC 1812 §4.3.2.3),
// for ICMPv6 as much as fits in the IPv6 minimum MTU (RFC 4443 §2.4 (c)).
func plain(v6 bool, typ, code byte, orig []byte, word uint32, src, dst netip.Addr) []byte {
	var n int
	if v6 {
		n = min(len(orig), header.IPv6MinimumMTU-header.IPv6MinimumSize-header.ICMPv6MinimumSize)
	} else {
		n = min(len(orig), icmpv4MaxLen-header.IPv4MinimumSize-header.ICMPv4MinimumSize)
	}
	b := make([]byte, header.ICMPv4MinimumSize+n)
	b[0], b[1] = typ, code
	binary.BigEndian.PutUint32(b[4:], word)
	copy(b[header.ICMPv4MinimumSize:], orig[:n])
	if v6 {
		icmpv6Checksum(b, src, dst)
	} else {
		binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, 0))
	}
	return b
}

// NoRoute returns the ICMP error (header and body, without the IP header)
// that tells orig's sender there is no route to its destination: ICMPv4
// destination unreachable, network unreachable (RFC 1812 §5.2.7.1), or
// ICMPv6 destination unreachable, no route (RFC 4443 §3.1), quoting orig
// as the plain forms do. src and dst are the addresses of the IP header it
// will go in (the ICMPv6 checksum covers them).
func NoRoute(v6 bool, orig []byte, src, dst netip.Addr) []byte {
	if v6 {
		return plain(true, byte(header.ICMPv6DstUnreachable), byte(header.ICMPv6NetworkUnreachable), orig, 0, src, dst)
	}
	return plain(false, byte(header.ICMPv4DstUnreachable), byte(header.ICMPv4NetUnreachable), orig, 0, src, dst)
}

// withLabelStack returns an ICMP message of the RFC 4884 multipart shape
// with its type, code and checksum still zero: an 8-byte header, orig's
// first 128 bytes zero-padded to 128, and an extension structure holding
// labels as an RFC 4950 MPLS label stack object.
func withLabelStack(orig, labels []byte) []byte {
	obj := icmpObjHeaderLen + len(labels)
	total := header.ICMPv4MinimumSize + OrigLen + icmpExtHeaderLen + obj
	b := make([]byte, total)
	copy(b[header.ICMPv4MinimumSize:header.ICMPv4MinimumSize+OrigLen], orig)
	ext := b[header.ICMPv4MinimumSize+OrigLen:]
	ext[0] = icmpExtVersion << 4
	o := ext[icmpExtHeaderLen:]
	binary.BigEndian.PutUint16(o[0:], uint16(obj))
	o[2] = mplsStackClass
	o[3] = mplsStackCType
	copy(o[icmpObjHeaderLen:], labels)
	binary.BigEndian.PutUint16(ext[2:], ^checksum.Checksum(ext, 0))
	return b
}

// icmpv6Checksum sets the checksum of the ICMPv6 message b sent from src to
// dst.
func icmpv6Checksum(b []byte, src, dst netip.Addr) {
	s, d := tcpip.AddrFrom16(src.As16()), tcpip.AddrFrom16(dst.As16())
	sum := header.PseudoHeaderChecksum(header.ICMPv6ProtocolNumber, s, d, uint16(len(b)))
	binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, sum))
}

// IsError reports whether the IP packet ip is an ICMP error message
// or a non-first fragment: RFC 1812 §4.3.2.7 and RFC 4443 §2.4 forbid
// answering either with an ICMP error. A packet too short for its fixed
// header counts as one (nothing is sent for it).
func IsError(v6 bool, ip []byte) bool {
	if !v6 {
		if len(ip) < header.IPv4MinimumSize {
			return true
		}
		h := header.IPv4(ip)
		if h.FragmentOffset() != 0 {
			return true
		}
		if h.Protocol() != uint8(header.ICMPv4ProtocolNumber) || len(ip) <= int(h.HeaderLength()) {
			return false
		}
		switch header.ICMPv4Type(ip[h.HeaderLength()]) {
		case header.ICMPv4DstUnreachable, header.ICMPv4SrcQuench, header.ICMPv4Redirect,
			header.ICMPv4TimeExceeded, header.ICMPv4ParamProblem:
			return true
		}
		return false
	}
	if len(ip) < header.IPv6MinimumSize {
		return true
	}
	h := header.IPv6(ip)
	if h.NextHeader() != uint8(header.ICMPv6ProtocolNumber) || len(ip) <= header.IPv6MinimumSize {
		return false
	}
	return ip[header.IPv6MinimumSize] < 128 // error messages are types 0-127
}

// SourceNamesOneHost reports whether src, the source of a packet that
// would draw an ICMP error, names one host that may be sent one: not
// unspecified, loopback or multicast; for IPv4 not in 0/8 ("this
// network"), not class E (240/4) nor the limited broadcast (RFC 1812
// §4.3.2.7, RFC 4443 §2.4 (e)). The caller also refuses its own addresses
// and its subnets' broadcast addresses, which only it knows.
func SourceNamesOneHost(src netip.Addr) bool {
	if !src.IsValid() || src.IsUnspecified() || src.IsLoopback() || src.IsMulticast() {
		return false
	}
	if src.Is4() || src.Is4In6() {
		b := src.Unmap().As4()
		return b[0] != 0 && b[0] < 240
	}
	return true
}
