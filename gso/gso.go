package gso

import (
	"encoding/binary"
	"math"
	"strconv"
)

// Proto is the inner network protocol of a Packet. The zero value is
// invalid, so a caller that forgot to record the protocol gets ErrBadProto
// instead of a guess.
type Proto uint8

// The protocols Segment handles.
const (
	ProtoIPv4 Proto = iota + 1 // IPv4 (RFC 791)
	ProtoIPv6                  // IPv6 (RFC 8200)
)

// String returns "IPv4", "IPv6" or "Proto(n)".
func (p Proto) String() string {
	switch p {
	case ProtoIPv4:
		return "IPv4"
	case ProtoIPv6:
		return "IPv6"
	}
	return "Proto(" + strconv.Itoa(int(p)) + ")"
}

// Packet is one large TCP packet to segment. See the package doc for the
// layout and for what is checked and rewritten.
type Packet struct {
	// Buf holds prefix + IP header (+ IPv6 extension headers) + TCP header
	// + payload. The payload runs to len(Buf). Segment never writes Buf.
	Buf []byte
	// PrefixLen is the number of opaque L2/L2.5 bytes (Ethernet + labels)
	// before the IP header; it may be 0. The prefix is copied verbatim in
	// front of every segment.
	PrefixLen int
	// Proto is the inner network protocol; it must match the IP version.
	Proto Proto
	// L4Offset is the offset of the TCP header in Buf; it must equal
	// PrefixLen plus the IP header length (plus the IPv6 extension headers).
	L4Offset int
	// MSS is the maximum TCP payload per segment, at least 1.
	MSS int
}

// Header sizes and field offsets, from RFC 791, RFC 8200 and RFC 9293.
const (
	ipv4MinHeaderLen = 20 // IHL = 5 words
	ipv6HeaderLen    = 40 // fixed header; extension headers follow
	tcpMinHeaderLen  = 20 // data offset = 5 words
	maxIPLen         = math.MaxUint16

	ipv4TotalLenOff = 2  // total length
	ipv4IDOff       = 4  // identification
	ipv4FragOff     = 6  // flags (3 bits) + fragment offset (13 bits)
	ipv4ProtoOff    = 9  // protocol
	ipv4CsumOff     = 10 // header checksum
	ipv4AddrsOff    = 12 // source then destination address, 8 bytes
	ipv4AddrsLen    = 8
	ipv4FragMask    = 0x3fff // MF flag + fragment offset; DF (0x4000) is fine

	ipv6PayloadLenOff = 4 // payload length
	ipv6NextHdrOff    = 6 // next header
	ipv6AddrsOff      = 8 // source then destination address, 32 bytes
	ipv6AddrsLen      = 32
	ipv6ExtUnit       = 8 // extension header lengths count 8-octet units

	tcpSeqOff   = 4  // sequence number
	tcpDoffOff  = 12 // data offset in the high nibble
	tcpFlagsOff = 13 // CWR ECE URG ACK PSH RST SYN FIN
	tcpCsumOff  = 16 // checksum

	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpURG = 0x20
	tcpCWR = 0x80

	protoTCP = 6 // IP protocol number of TCP (IANA)

	// IPv6 next-header values (IANA "Assigned Internet Protocol Numbers").
	ipv6HopByHop = 0
	ipv6Routing  = 43
	ipv6Fragment = 44
	ipv6DestOpts = 60
)

// layout is a validated packet's geometry.
type layout struct {
	ip      int // offset of the IP header (= PrefixLen)
	l4      int // offset of the TCP header (= L4Offset)
	tcpEnd  int // offset of the payload
	payload int // payload bytes
	n       int // number of segments
	total   int // SegmentedLen
}

// parse validates p and returns its geometry.
func parse(p Packet) (layout, error) { return parseLen(p, len(p.Buf)) }

// parseLen validates p as a packet of total bytes of which p.Buf holds at
// least the headers (Cutter: the headers only; the payload runs to total)
// and returns its geometry.
func parseLen(p Packet, total int) (layout, error) {
	buf := p.Buf
	if p.PrefixLen < 0 || p.PrefixLen > len(buf) {
		return layout{}, newError(ErrBadPrefix, "PrefixLen", p.PrefixLen, -1)
	}
	if p.MSS < 1 {
		return layout{}, newError(ErrBadMSS, "MSS", p.MSS, -1)
	}
	ip := p.PrefixLen
	var l4 int
	var err error
	switch p.Proto {
	case ProtoIPv4:
		l4, err = ipv4End(buf, ip)
	case ProtoIPv6:
		l4, err = ipv6End(buf, ip)
	default:
		err = newError(ErrBadProto, "Proto", int(p.Proto), -1)
	}
	if err != nil {
		return layout{}, err
	}
	if p.L4Offset != l4 {
		// Offset says where the IP headers really end.
		return layout{}, newError(ErrBadL4Offset, "L4Offset", p.L4Offset, l4)
	}
	doff, err := tcpHeaderLen(buf, l4)
	if err != nil {
		return layout{}, err
	}
	lo := layout{ip: ip, l4: l4, tcpEnd: l4 + doff, payload: total - l4 - doff}
	lo.n = lo.payload / p.MSS
	if lo.payload%p.MSS != 0 || lo.n == 0 {
		lo.n++
	}
	chunk := min(p.MSS, lo.payload)
	ipLen := lo.tcpEnd - ip + chunk // IPv4 total length of the largest segment
	if p.Proto == ProtoIPv6 {
		ipLen -= ipv6HeaderLen // IPv6 payload length
	}
	if ipLen > maxIPLen {
		return layout{}, newError(ErrTooLarge, "IP length", ipLen, ip)
	}
	if f := int(buf[l4+tcpFlagsOff]); lo.n > 1 && f&(tcpSYN|tcpRST|tcpURG) != 0 {
		return layout{}, newError(ErrFlags, "TCP flags", f, l4+tcpFlagsOff)
	}
	// n-1 extra header copies; guard the product against int overflow
	// (possible only with 32-bit int).
	if lo.n-1 > (math.MaxInt-total)/lo.tcpEnd {
		return layout{}, newError(ErrTooLarge, "segments", lo.n, -1)
	}
	lo.total = total + (lo.n-1)*lo.tcpEnd
	return lo, nil
}

// ipv4End checks the IPv4 header at buf[ip:] (version, IHL, no fragment,
// protocol TCP) and returns where it ends.
func ipv4End(buf []byte, ip int) (int, error) {
	if len(buf)-ip < ipv4MinHeaderLen {
		return 0, newError(ErrTruncated, "IPv4 header bytes", len(buf)-ip, ip)
	}
	if v := int(buf[ip] >> 4); v != 4 {
		return 0, newError(ErrVersionMismatch, "IP version", v, ip)
	}
	ihl := int(buf[ip]&0x0f) * 4
	if ihl < ipv4MinHeaderLen {
		return 0, newError(ErrBadHeaderLength, "IPv4 IHL", ihl/4, ip)
	}
	if ihl > len(buf)-ip {
		return 0, newError(ErrTruncated, "IPv4 IHL", ihl/4, ip)
	}
	if f := int(binary.BigEndian.Uint16(buf[ip+ipv4FragOff:])); f&ipv4FragMask != 0 {
		return 0, newError(ErrFragment, "IPv4 flags and fragment offset", f, ip+ipv4FragOff)
	}
	if pr := int(buf[ip+ipv4ProtoOff]); pr != protoTCP {
		return 0, newError(ErrNotTCP, "IPv4 protocol", pr, ip+ipv4ProtoOff)
	}
	return ip + ihl, nil
}

// ipv6End checks the IPv6 header at buf[ip:] and walks its extension
// headers (hop-by-hop, routing, destination options; no fragment) to TCP,
// returning where they end.
func ipv6End(buf []byte, ip int) (int, error) {
	if len(buf)-ip < ipv6HeaderLen {
		return 0, newError(ErrTruncated, "IPv6 header bytes", len(buf)-ip, ip)
	}
	if v := int(buf[ip] >> 4); v != 6 {
		return 0, newError(ErrVersionMismatch, "IP version", v, ip)
	}
	next, nextAt := buf[ip+ipv6NextHdrOff], ip+ipv6NextHdrOff
	off := ip + ipv6HeaderLen
	// Each extension header is at least 8 bytes and must lie in buf, so
	// the walk ends after at most len(buf)/8 steps.
	for next != protoTCP {
		switch next {
		case ipv6HopByHop, ipv6Routing, ipv6DestOpts:
			if len(buf)-off < ipv6ExtUnit {
				return 0, newError(ErrTruncated, "IPv6 extension header bytes", len(buf)-off, off)
			}
			hl := (int(buf[off+1]) + 1) * ipv6ExtUnit
			if hl > len(buf)-off {
				return 0, newError(ErrTruncated, "IPv6 extension header length", hl, off)
			}
			next, nextAt = buf[off], off
			off += hl
		case ipv6Fragment:
			return 0, newError(ErrFragment, "IPv6 next header", int(next), nextAt)
		case 50, 51, 135, 139, 140, 253, 254: // ESP, AH, mobility, HIP, shim6, experiments
			return 0, newError(ErrUnsupportedHeader, "IPv6 next header", int(next), nextAt)
		default:
			return 0, newError(ErrNotTCP, "IPv6 next header", int(next), nextAt)
		}
	}
	return off, nil
}

// tcpHeaderLen checks the TCP header at buf[l4:] and returns its length,
// options included.
func tcpHeaderLen(buf []byte, l4 int) (int, error) {
	if len(buf)-l4 < tcpMinHeaderLen {
		return 0, newError(ErrTruncated, "TCP header bytes", len(buf)-l4, l4)
	}
	doff := int(buf[l4+tcpDoffOff]>>4) * 4
	if doff < tcpMinHeaderLen {
		return 0, newError(ErrBadHeaderLength, "TCP data offset", doff/4, l4+tcpDoffOff)
	}
	if doff > len(buf)-l4 {
		return 0, newError(ErrTruncated, "TCP data offset", doff/4, l4+tcpDoffOff)
	}
	return doff, nil
}

// SegmentedLen returns the number of bytes Segment needs in dst: every
// segment's prefix and headers plus the payload once. It returns an *Error
// if p cannot be segmented.
func SegmentedLen(p Packet) (int, error) {
	lo, err := parse(p)
	if err != nil {
		return 0, err
	}
	return lo.total, nil
}

// Count returns the number of segments Segment would produce for p (at
// least 1), or 0 if p cannot be segmented.
func Count(p Packet) int {
	lo, err := parse(p)
	if err != nil {
		return 0
	}
	return lo.n
}

// Segment validates p, writes its segments back to back into dst and
// appends one slice per segment to segs, returning the extended segs. Each
// slice's capacity ends at its own end, so appending to a segment cannot
// overwrite the next. len(dst) must be at least SegmentedLen(p) and dst must
// not overlap p.Buf. On error, segs is returned unchanged and dst may hold
// nothing useful. Segment allocates nothing when cap(segs) suffices.
func Segment(p Packet, dst []byte, segs [][]byte) ([][]byte, error) {
	lo, err := parse(p)
	if err != nil {
		return segs, err
	}
	if len(dst) < lo.total {
		return segs, newError(ErrShortDst, "len(dst)", len(dst), -1)
	}
	buf := p.Buf
	hdrLen := lo.tcpEnd
	payload := buf[hdrLen:]
	f := newFinisher(buf, lo, p.Proto)
	for i, off := 0, 0; i < lo.n; i++ {
		chunk := min(p.MSS, len(payload)-off)
		segLen := hdrLen + chunk
		seg := dst[:segLen:segLen]
		dst = dst[segLen:]
		copy(seg, buf[:hdrLen])
		copy(seg[hdrLen:], payload[off:off+chunk])
		f.finish(seg, i, off)
		segs = append(segs, seg)
		off += chunk
	}
	return segs, nil
}

// finisher rewrites a segment's copied headers; the fields that do not
// change from segment to segment are read once from the packet's headers.
type finisher struct {
	lo     layout
	v4     bool
	pseudo uint32 // the pseudo-header's addresses and protocol
	id     uint16 // the IPv4 identification of the first segment
	seq    uint32 // the sequence number of the first segment
	flags  byte   // the packet's TCP flags
}

func newFinisher(hdr []byte, lo layout, proto Proto) finisher {
	f := finisher{lo: lo, v4: proto == ProtoIPv4}
	ip, l4 := lo.ip, lo.l4
	if f.v4 {
		f.pseudo = sum(hdr[ip+ipv4AddrsOff : ip+ipv4AddrsOff+ipv4AddrsLen])
		f.id = binary.BigEndian.Uint16(hdr[ip+ipv4IDOff:])
	} else {
		f.pseudo = sum(hdr[ip+ipv6AddrsOff : ip+ipv6AddrsOff+ipv6AddrsLen])
	}
	f.pseudo += protoTCP
	f.seq = binary.BigEndian.Uint32(hdr[l4+tcpSeqOff:])
	f.flags = hdr[l4+tcpFlagsOff]
	return f
}

// finish turns seg, the packet's headers followed by the payload chunk
// that starts off bytes into the payload, into segment i: IP length, IPv4
// ID and header checksum, sequence number, flags and TCP checksum.
func (f *finisher) finish(seg []byte, i, off int) {
	ip, l4, hdrLen := f.lo.ip, f.lo.l4, f.lo.tcpEnd
	segLen := len(seg)
	if f.v4 {
		iph := seg[ip:l4]
		binary.BigEndian.PutUint16(iph[ipv4TotalLenOff:], uint16(segLen-ip))
		binary.BigEndian.PutUint16(iph[ipv4IDOff:], f.id+uint16(i)) // wraps, as IDs do
		iph[ipv4CsumOff], iph[ipv4CsumOff+1] = 0, 0
		binary.BigEndian.PutUint16(iph[ipv4CsumOff:], ^fold(sum(iph)))
	} else {
		binary.BigEndian.PutUint16(seg[ip+ipv6PayloadLenOff:], uint16(segLen-ip-ipv6HeaderLen))
	}
	tcp := seg[l4:hdrLen]
	binary.BigEndian.PutUint32(tcp[tcpSeqOff:], f.seq+uint32(off)) // wraps mod 2^32 (RFC 9293)
	fl := f.flags
	if i > 0 {
		fl &^= tcpCWR
	}
	if i < f.lo.n-1 {
		fl &^= tcpFIN | tcpPSH
	}
	tcp[tcpFlagsOff] = fl
	tcp[tcpCsumOff], tcp[tcpCsumOff+1] = 0, 0
	tcpLen := uint32(segLen - l4) // < 2^16, checked by parse
	c := f.pseudo + tcpLen + sum(tcp) + sum(seg[hdrLen:])
	binary.BigEndian.PutUint16(tcp[tcpCsumOff:], ^fold(c))
}

// Cutter segments a packet whose payload is not in one buffer (a packet
// buffer's chained views, say) straight into the caller's buffers, one
// segment at a time, with one copy of the payload: the caller copies the
// headers (Header) and the segment's payload chunk into a buffer of
// SegmentLen(i) bytes, then Finish writes the lengths, IPv4 ID, sequence
// number, flags and checksums, exactly as Segment writes segment i. A
// Cutter holds no buffer of its own and allocates nothing.
type Cutter struct {
	hdr []byte
	mss int
	f   finisher
}

// NewCutter validates a packet given as its headers (hdr: the prefix, IP
// header and TCP header with options, exactly; read, never written, and
// kept until the Cutter is done) and its payload length, as Segment would
// validate the whole packet, and returns its Cutter. The errors are
// Segment's; hdr longer than the headers is ErrBadHeaderLength.
func NewCutter(hdr []byte, prefixLen int, proto Proto, l4Offset, payloadLen, mss int) (Cutter, error) {
	if payloadLen < 0 {
		return Cutter{}, newError(ErrTooLarge, "payload length", payloadLen, -1)
	}
	p := Packet{Buf: hdr, PrefixLen: prefixLen, Proto: proto, L4Offset: l4Offset, MSS: mss}
	lo, err := parseLen(p, len(hdr)+payloadLen)
	if err != nil {
		return Cutter{}, err
	}
	if lo.tcpEnd != len(hdr) {
		return Cutter{}, newError(ErrBadHeaderLength, "header bytes beyond the TCP header", len(hdr)-lo.tcpEnd, lo.tcpEnd)
	}
	return Cutter{hdr: hdr, mss: mss, f: newFinisher(hdr, lo, proto)}, nil
}

// Segments returns the number of segments (at least 1).
func (c *Cutter) Segments() int { return c.f.lo.n }

// Header returns the packet's headers, to copy in front of each segment.
func (c *Cutter) Header() []byte { return c.hdr }

// PayloadRange returns where segment i's payload chunk lies in the
// packet's payload: from off, n bytes.
func (c *Cutter) PayloadRange(i int) (off, n int) {
	off = i * c.mss
	return off, min(c.mss, c.f.lo.payload-off)
}

// SegmentLen returns the length of segment i: the headers and its chunk.
func (c *Cutter) SegmentLen(i int) int {
	_, n := c.PayloadRange(i)
	return len(c.hdr) + n
}

// Finish makes seg (SegmentLen(i) bytes: Header, then payload chunk i)
// segment i of the packet. It panics if len(seg) is not SegmentLen(i).
func (c *Cutter) Finish(i int, seg []byte) {
	if len(seg) != c.SegmentLen(i) {
		panic("gso: Cutter.Finish: segment length " + strconv.Itoa(len(seg)) + ", want " + strconv.Itoa(c.SegmentLen(i)))
	}
	off, _ := c.PayloadRange(i)
	c.f.finish(seg, i, off)
}
