package lsrrate

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Frame size limits, Ethernet frames without the FCS.
const (
	// MinFrameSize is the shortest Ethernet frame (64 bytes on the wire
	// less the 4-byte FCS).
	MinFrameSize = 60
	// MaxFrameSize is the longest frame a 1500-byte link MTU carries: the
	// 14-byte Ethernet header plus 1500 bytes of payload.
	MaxFrameSize = 1514
)

// Header sizes of the generated frames.
const (
	ethLen   = 14
	labelLen = 4
	ipv4Len  = 20
	udpLen   = 8
	// genTTL is the TTL of the generated label and IPv4 header: 64, as
	// Linux sends by default.
	genTTL = 64
)

// frameSpec describes one generated frame. Label 0 means a plain
// IPv4/UDP frame (ethertype 0x0800); otherwise one label entry with S=1
// and TTL 64 sits between the Ethernet and IPv4 headers (ethertype 0x8847).
type frameSpec struct {
	dst, src         [6]byte
	label            uint32
	srcIP, dstIP     netip.Addr
	srcPort, dstPort uint16
	// size is the whole frame without FCS, MinFrameSize..MaxFrameSize.
	size int
}

// buildFrame returns the frame spec describes: Ethernet, the optional
// label, IPv4 (DF set, TTL 64, valid header checksum) and UDP with a valid
// checksum, padded with a byte pattern to spec.size.
func buildFrame(spec frameSpec) ([]byte, error) {
	if spec.size < MinFrameSize || spec.size > MaxFrameSize {
		return nil, fmt.Errorf("frame size %d: want %d..%d (Ethernet without FCS)", spec.size, MinFrameSize, MaxFrameSize)
	}
	if spec.label > 0xFFFFF {
		return nil, fmt.Errorf("label %d: want 0..1048575 (20 bits)", spec.label)
	}
	if !spec.srcIP.Is4() || !spec.dstIP.Is4() {
		return nil, fmt.Errorf("addresses %v -> %v: want IPv4", spec.srcIP, spec.dstIP)
	}
	b := make([]byte, spec.size)
	copy(b[0:6], spec.dst[:])
	copy(b[6:12], spec.src[:])
	off := ethLen
	if spec.label != 0 {
		binary.BigEndian.PutUint16(b[12:], 0x8847)
		// Label (20 bits) | TC 0 (3 bits) | S=1 (1 bit) | TTL (8 bits).
		binary.BigEndian.PutUint32(b[off:], spec.label<<12|1<<8|genTTL)
		off += labelLen
	} else {
		binary.BigEndian.PutUint16(b[12:], 0x0800)
	}
	ipLen := spec.size - off
	ip := b[off : off+ipLen]
	ip[0] = 0x45 // version 4, 5 words of header
	binary.BigEndian.PutUint16(ip[2:], uint16(ipLen))
	binary.BigEndian.PutUint16(ip[4:], 1)      // identification
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF, no fragment offset
	ip[8] = genTTL
	ip[9] = 17 // UDP
	src, dst := spec.srcIP.As4(), spec.dstIP.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum(0, ip[:ipv4Len])))

	udp := ip[ipv4Len:]
	binary.BigEndian.PutUint16(udp[0:], spec.srcPort)
	binary.BigEndian.PutUint16(udp[2:], spec.dstPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	for i := udpLen; i < len(udp); i++ {
		udp[i] = byte(i)
	}
	// Pseudo-header: addresses, protocol, UDP length.
	s := sum(0, ip[12:20]) + 17 + uint32(len(udp))
	c := ^fold(sum(s, udp))
	if c == 0 {
		c = 0xFFFF // RFC 768: a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return b, nil
}

// sum adds b as big-endian 16-bit words to s (one's complement, unfolded).
func sum(s uint32, b []byte) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

// fold folds the carries of s into 16 bits.
func fold(s uint32) uint16 {
	for s > 0xFFFF {
		s = s>>16 + s&0xFFFF
	}
	return uint16(s)
}
