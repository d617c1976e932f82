package lspping

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Loopback127 is the IPv4 range of request destinations (RFC 8029 §4.3);
// LoopbackMapped the IPv6 one (::ffff:127.0.0.0/104).
var (
	Loopback127    = netip.MustParsePrefix("127.0.0.0/8")
	LoopbackMapped = netip.MustParsePrefix("::ffff:127.0.0.0/104")
)

// IsLoopbackDest reports whether a is a request destination: in 127/8
// or ::ffff:127.0.0.0/104 (the IPv6 form is checked before netip would
// unmap it).
func IsLoopbackDest(a netip.Addr) bool {
	if a.Is4In6() {
		return LoopbackMapped.Contains(a)
	}
	return Loopback127.Contains(a)
}

// IPv6 router alert value for MPLS OAM (RFC 7506); IPv4's is 0 (RFC
// 2113).
const routerAlert6MPLSOAM = 69

const (
	protoUDP     = 17
	protoHopOpts = 0
	udpLen       = 8
	ipv6Len      = 40
)

// Packet is an IP packet carrying UDP, as BuildIP writes and ParseIP
// reads it.
type Packet struct {
	// Src and Dst are the IP addresses (Dst in ::ffff:0:0/96 stays in
	// its IPv6 form).
	Src, Dst netip.Addr
	// SrcPort and DstPort are the UDP ports.
	SrcPort, DstPort uint16
	// TTL is the IPv4 TTL or IPv6 hop limit; TOS the IPv4 TOS or IPv6
	// traffic class.
	TTL, TOS uint8
	// RouterAlert says the packet carries the router alert option.
	RouterAlert bool
	// Payload is the UDP payload.
	Payload []byte
}

// BuildIP returns p as an IPv4 (Src and Dst IPv4) or IPv6 packet with a
// valid UDP checksum, the router alert option when p.RouterAlert (as RFC
// 8029 §4.3 asks of requests).
func BuildIP(p *Packet) []byte {
	if p.Src.Is4() && p.Dst.Is4() {
		return buildIPv4(p)
	}
	return buildIPv6(p)
}

func buildIPv4(p *Packet) []byte {
	hl := 20
	if p.RouterAlert {
		hl = 24
	}
	tot := hl + udpLen + len(p.Payload)
	b := make([]byte, tot)
	b[0] = 0x40 | byte(hl/4)
	b[1] = p.TOS
	binary.BigEndian.PutUint16(b[2:], uint16(tot))
	b[8] = p.TTL
	b[9] = protoUDP
	s, d := p.Src.As4(), p.Dst.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	if p.RouterAlert {
		copy(b[20:], []byte{0x94, 0x04, 0, 0})
	}
	binary.BigEndian.PutUint16(b[10:], ^checksum(b[:hl], 0))
	putUDP(b[hl:], p, pseudo(s[:], d[:], udpLen+len(p.Payload)))
	return b
}

func buildIPv6(p *Packet) []byte {
	ext := 0
	if p.RouterAlert {
		ext = 8
	}
	ul := udpLen + len(p.Payload)
	b := make([]byte, ipv6Len+ext+ul)
	binary.BigEndian.PutUint32(b, 6<<28|uint32(p.TOS)<<20)
	binary.BigEndian.PutUint16(b[4:], uint16(ext+ul))
	b[6] = protoUDP
	b[7] = p.TTL
	s, d := p.Src.As16(), p.Dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	if p.RouterAlert {
		b[6] = protoHopOpts
		// Next header UDP, length 0 (8 bytes), router alert (type 5, 2
		// bytes), PadN of 0 bytes.
		copy(b[ipv6Len:], []byte{protoUDP, 0, 5, 2, 0, routerAlert6MPLSOAM, 1, 0})
	}
	putUDP(b[ipv6Len+ext:], p, pseudo(s[:], d[:], ul))
	return b
}

// putUDP writes the UDP header and payload into b with its checksum,
// sum being the pseudo-header's.
func putUDP(b []byte, p *Packet, sum uint32) {
	binary.BigEndian.PutUint16(b, p.SrcPort)
	binary.BigEndian.PutUint16(b[2:], p.DstPort)
	binary.BigEndian.PutUint16(b[4:], uint16(udpLen+len(p.Payload)))
	copy(b[udpLen:], p.Payload)
	c := ^checksum(b[:udpLen+len(p.Payload)], sum)
	if c == 0 {
		c = 0xffff // RFC 768: 0 means none
	}
	binary.BigEndian.PutUint16(b[6:], c)
}

// pseudo is the sum of the UDP pseudo-header.
func pseudo(src, dst []byte, n int) uint32 {
	var s uint32
	for i := 0; i+1 < len(src); i += 2 {
		s += uint32(binary.BigEndian.Uint16(src[i:])) + uint32(binary.BigEndian.Uint16(dst[i:]))
	}
	return s + protoUDP + uint32(n)
}

// checksum is the Internet checksum's folded sum of b added to initial.
func checksum(b []byte, initial uint32) uint16 {
	s := initial
	for len(b) >= 2 {
		s += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// Errors of ParseIP.
var (
	ErrNotUDP      = errors.New("lspping: not an IP packet carrying UDP")
	ErrTruncatedIP = errors.New("lspping: IP or UDP header cut short")
	ErrChecksum    = errors.New("lspping: bad IP header or UDP checksum")
)

// ParseIP reads an IPv4 or IPv6 packet carrying UDP (behind an IPv6
// hop-by-hop header at most), checking its lengths and checksums. The
// payload aliases ip.
func ParseIP(ip []byte) (*Packet, error) {
	if len(ip) < 1 {
		return nil, ErrTruncatedIP
	}
	var p Packet
	var l4 []byte
	var sum uint32
	var err error
	switch ip[0] >> 4 {
	case 4:
		l4, sum, err = parseIPv4(ip, &p)
	case 6:
		l4, sum, err = parseIPv6(ip, &p)
	default:
		return nil, ErrNotUDP
	}
	if err != nil {
		return nil, err
	}
	if err := parseUDP(l4, sum, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// parseIPv4 checks an IPv4 header (length, checksum, options, UDP and
// not a fragment), fills p's IP fields and returns the UDP datagram with
// the sum of its pseudo-header.
func parseIPv4(ip []byte, p *Packet) ([]byte, uint32, error) {
	if len(ip) < 20 {
		return nil, 0, ErrTruncatedIP
	}
	hl := int(ip[0]&0xf) * 4
	tot := int(binary.BigEndian.Uint16(ip[2:]))
	if hl < 20 || tot < hl || tot > len(ip) {
		return nil, 0, ErrTruncatedIP
	}
	if checksum(ip[:hl], 0) != 0xffff {
		return nil, 0, ErrChecksum
	}
	if ip[9] != protoUDP || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
		return nil, 0, ErrNotUDP // another protocol, or a fragment
	}
	ra, err := ipv4RouterAlert(ip[:hl])
	if err != nil {
		return nil, 0, err
	}
	p.RouterAlert = ra
	p.TOS, p.TTL = ip[1], ip[8]
	p.Src = netip.AddrFrom4([4]byte(ip[12:16]))
	p.Dst = netip.AddrFrom4([4]byte(ip[16:20]))
	l4 := ip[hl:tot]
	return l4, pseudo(ip[12:16], ip[16:20], len(l4)), nil
}

// ipv4RouterAlert walks the options of the IPv4 header h (its whole
// header length), reporting whether one is a router alert; an option
// that runs past the header is an error.
func ipv4RouterAlert(h []byte) (bool, error) {
	hl := len(h)
	ra := false
	for o := 20; o < hl; {
		t := h[o]
		if t == 0 {
			break
		}
		if t == 1 {
			o++
			continue
		}
		if o+1 >= hl || h[o+1] < 2 || o+int(h[o+1]) > hl {
			return false, ErrTruncatedIP
		}
		if t == 0x94 {
			ra = true
		}
		o += int(h[o+1])
	}
	return ra, nil
}

// parseIPv6 checks an IPv6 header and at most one hop-by-hop header
// before UDP, fills p's IP fields and returns the UDP datagram with the
// sum of its pseudo-header.
func parseIPv6(ip []byte, p *Packet) ([]byte, uint32, error) {
	if len(ip) < ipv6Len {
		return nil, 0, ErrTruncatedIP
	}
	pl := int(binary.BigEndian.Uint16(ip[4:]))
	if ipv6Len+pl > len(ip) {
		return nil, 0, ErrTruncatedIP
	}
	next, o := ip[6], ipv6Len
	end := ipv6Len + pl
	if next == protoHopOpts {
		if o+8 > end {
			return nil, 0, ErrTruncatedIP
		}
		n := 8 + int(ip[o+1])*8
		if o+n > end {
			return nil, 0, ErrTruncatedIP
		}
		ra, err := ipv6RouterAlert(ip[o : o+n])
		if err != nil {
			return nil, 0, err
		}
		p.RouterAlert = ra
		next, o = ip[o], o+n
	}
	if next != protoUDP {
		return nil, 0, ErrNotUDP
	}
	p.TOS = uint8(binary.BigEndian.Uint16(ip[0:]) >> 4)
	p.TTL = ip[7]
	p.Src = netip.AddrFrom16([16]byte(ip[8:24]))
	p.Dst = netip.AddrFrom16([16]byte(ip[24:40]))
	l4 := ip[o:end]
	return l4, pseudo(ip[8:24], ip[24:40], len(l4)), nil
}

// ipv6RouterAlert walks the options of the hop-by-hop header h (all of
// it), reporting whether one is a router alert; an option that runs past
// the header is an error.
func ipv6RouterAlert(h []byte) (bool, error) {
	n := len(h)
	ra := false
	for i := 2; i < n; {
		if h[i] == 0 {
			i++
			continue
		}
		if i+1 >= n || i+2+int(h[i+1]) > n {
			return false, ErrTruncatedIP
		}
		if h[i] == 5 {
			ra = true
		}
		i += 2 + int(h[i+1])
	}
	return ra, nil
}

// parseUDP checks the UDP header of l4 (its length, and its checksum
// against sum, the pseudo-header's, where one is sent or the packet is
// IPv6) and fills p's ports and payload.
func parseUDP(l4 []byte, sum uint32, p *Packet) error {
	if len(l4) < udpLen {
		return ErrTruncatedIP
	}
	ul := int(binary.BigEndian.Uint16(l4[4:]))
	if ul < udpLen || ul > len(l4) {
		return ErrTruncatedIP
	}
	l4 = l4[:ul]
	if c := binary.BigEndian.Uint16(l4[6:]); c != 0 || p.Dst.Is6() {
		if checksum(l4, sum) != 0xffff {
			return ErrChecksum
		}
	}
	p.SrcPort = binary.BigEndian.Uint16(l4)
	p.DstPort = binary.BigEndian.Uint16(l4[2:])
	p.Payload = l4[udpLen:]
	return nil
}

// IsRequest reports whether ip, the start of an IP packet (at least its
// headers), looks like an MPLS echo request: a 127/8 (::ffff:127/104)
// destination and UDP destination port 3503. It checks no checksum and
// allocates nothing: the planes ask it of frames they would otherwise
// drop or deliver, and hand those it accepts to the responder.
func IsRequest(ip []byte) bool {
	if len(ip) < 1 {
		return false
	}
	switch ip[0] >> 4 {
	case 4:
		if len(ip) < 20 || ip[16] != 127 || ip[9] != protoUDP {
			return false
		}
		hl := int(ip[0]&0xf) * 4
		return hl >= 20 && len(ip) >= hl+4 && binary.BigEndian.Uint16(ip[hl+2:]) == Port
	case 6:
		if len(ip) < ipv6Len {
			return false
		}
		d := netip.AddrFrom16([16]byte(ip[24:40]))
		if !LoopbackMapped.Contains(d) {
			return false
		}
		next, o := ip[6], ipv6Len
		if next == protoHopOpts {
			if len(ip) < o+2 {
				return false
			}
			next, o = ip[o], o+8+int(ip[o+1])*8
		}
		return next == protoUDP && len(ip) >= o+4 && binary.BigEndian.Uint16(ip[o+2:]) == Port
	}
	return false
}
