package udp

import (
	"encoding/binary"
)

// DefaultPort is the UDP destination port of MPLS-in-UDP (RFC 7510 §3).
const DefaultPort = 6635

// Default source port range (RFC 7510 §3: the ephemeral range
// 49152-65535 is RECOMMENDED).
const (
	DefaultSourcePortMin = 49152
	DefaultSourcePortMax = 65535
)

// labelEntryLen is the size of one label stack entry (RFC 3032 §2.1).
const labelEntryLen = 4

// Reserved labels the link looks at (RFC 3032 §2.1, RFC 6790 §3).
const (
	labelIPv4ExplicitNull = 0
	labelIPv6ExplicitNull = 2
	labelEntropyIndicator = 7
)

// Outer header overheads: IP (without options or extension headers) and UDP.
const (
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	udpHeaderLen  = 8
)

// explicitNull returns the label stack entry (RFC 3032 §2.1) that carries
// an unlabelled IP packet over the link: the explicit null of its family
// (label 0 for IPv4, 2 for IPv6; RFC 4182), TC 0, the bottom of the stack,
// with the packet's own TTL (the uniform model: the peer's pop gives the
// packet back unchanged).
func explicitNull(ipv6 bool, ttl uint8) [labelEntryLen]byte {
	label := uint32(labelIPv4ExplicitNull)
	if ipv6 {
		label = labelIPv6ExplicitNull
	}
	var b [labelEntryLen]byte
	binary.BigEndian.PutUint32(b[:], label<<12|1<<8|uint32(ttl))
	return b
}

// FlowHash returns the hash that picks the UDP source port of an MPLS
// packet b (label stack and payload; only its first bytes are needed): the
// entropy label when the stack holds one (the label after an entropy label
// indicator, RFC 6790 §4.3), else the inner IPv4 or IPv6 packet's
// addresses, protocol and, for TCP, UDP, SCTP and DCCP, ports (ports only
// of an IPv4 packet that is not a fragment other than the first, and of an
// IPv6 packet without extension headers; the IPv6 flow label too), else the
// labels. It never fails: whatever b holds gives some hash, and the
// packets of one flow give one.
func FlowHash(b []byte) uint32 {
	h := uint32(2166136261)
	i := 0
	bottom := false
	for i+labelEntryLen <= len(b) {
		e := binary.BigEndian.Uint32(b[i:])
		i += labelEntryLen
		label := e >> 12
		if label == labelEntropyIndicator && i+labelEntryLen <= len(b) {
			return mix(binary.BigEndian.Uint32(b[i:]) >> 12)
		}
		h = hashWord(h, label)
		if e&(1<<8) != 0 {
			bottom = true
			break
		}
	}
	if !bottom || i >= len(b) {
		return mix(h)
	}
	p := b[i:]
	switch p[0] >> 4 {
	case 4:
		if len(p) < ipv4HeaderLen {
			return mix(h)
		}
		ihl := int(p[0]&0x0f) * 4
		proto := p[9]
		h = hashBytes(h, p[12:20])
		h = hashWord(h, uint32(proto))
		fragOff := binary.BigEndian.Uint16(p[6:8]) & 0x1fff
		if fragOff == 0 && ihl >= ipv4HeaderLen && hasPorts(proto) && len(p) >= ihl+4 {
			h = hashBytes(h, p[ihl:ihl+4])
		}
	case 6:
		if len(p) < ipv6HeaderLen {
			return mix(h)
		}
		nh := p[6]
		h = hashWord(h, binary.BigEndian.Uint32(p[0:4])&0x000fffff)
		h = hashBytes(h, p[8:40])
		h = hashWord(h, uint32(nh))
		if hasPorts(nh) && len(p) >= ipv6HeaderLen+4 {
			h = hashBytes(h, p[40:44])
		}
	}
	return mix(h)
}

// hasPorts reports whether an IP protocol's header starts with source and
// destination ports.
func hasPorts(proto uint8) bool {
	switch proto {
	case 6, 17, 33, 132: // TCP, UDP, DCCP, SCTP
		return true
	}
	return false
}

// hashWord folds w into h (FNV-1a over its four bytes).
func hashWord(h, w uint32) uint32 {
	for range 4 {
		h ^= w & 0xff
		h *= 16777619
		w >>= 8
	}
	return h
}

// hashBytes folds b into h (FNV-1a).
func hashBytes(h uint32, b []byte) uint32 {
	for _, c := range b {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}

// mix is a finalizer (murmur3's fmix32): every input bit reaches every
// output bit, so the source port's low bits spread too.
func mix(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// CheckDatagram checks the payload of a received datagram (one segment of
// a coalesced read) against the link: at least one label stack entry, at
// most maxLen bytes (the link's MTU with the explicit-null room). It
// returns the drop reason, or DropNone.
func CheckDatagram(b []byte, maxLen int) DropReason {
	switch {
	case len(b) < labelEntryLen:
		return DropTruncated
	case len(b) > maxLen:
		return DropOversized
	}
	return DropNone
}
