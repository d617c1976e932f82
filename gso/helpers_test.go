package gso_test

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/mplsnode/mplsnode/gso"
)

// refSum is a deliberately naive RFC 1071 sum, one big-endian 16-bit word at
// a time, over the concatenation of chunks (each chunk but the last must
// have even length). It is the test oracle for the package's unrolled
// checksum.
func refSum(chunks ...[]byte) uint16 {
	var all []byte
	for _, c := range chunks {
		all = append(all, c...)
	}
	if len(all)%2 == 1 {
		all = append(all, 0)
	}
	var s uint32
	for i := 0; i < len(all); i += 2 {
		s += uint32(all[i])<<8 | uint32(all[i+1])
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// refVerifies reports whether the data (checksum field included) sums to
// all ones, the RFC 1071 receiver check.
func refVerifies(chunks ...[]byte) bool { return refSum(chunks...) == 0xffff }

// ext is one IPv6 extension header: its type and its body after the two
// bytes of next header and length; len(body)+2 must be a multiple of 8.
type ext struct {
	typ  byte
	body []byte
}

// spec describes a test packet; build lays it out.
type spec struct {
	v6      bool
	prefix  []byte
	ipOpts  []byte // IPv4 options, multiple of 4 bytes
	exts    []ext  // IPv6 extension headers, in order
	tcpOpts []byte // TCP options, multiple of 4 bytes
	payload []byte
	flags   byte
	seq     uint32
	id      uint16
	mss     int
	// csum selects the incoming TCP checksum field: 0 zero, 1 the
	// pseudo-header partial sum (gVisor host GSO), 2 garbage.
	csum int
}

var (
	src4 = []byte{192, 0, 2, 1}
	dst4 = []byte{198, 51, 100, 2}
	src6 = []byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	dst6 = []byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}
)

// TCP flag bits (RFC 9293, RFC 3168).
const (
	fFIN = 0x01
	fSYN = 0x02
	fRST = 0x04
	fPSH = 0x08
	fACK = 0x10
	fURG = 0x20
	fECE = 0x40
	fCWR = 0x80
)

// tsOpt is NOP, NOP, Timestamps (kind 8, length 10): the options Linux and
// gVisor put on every data segment.
var tsOpt = []byte{1, 1, 8, 10, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}

// prefixN returns an Ethernet header with ethertype 0x8847 followed by
// labels MPLS label stack entries (the last with bottom of stack set), or
// n raw bytes when labels < 0.
func prefixN(labels int) []byte {
	p := []byte{
		0x02, 0, 0, 0, 0, 0x02, // destination MAC
		0x02, 0, 0, 0, 0, 0x01, // source MAC
		0x88, 0x47, // MPLS unicast
	}
	for i := 0; i < labels; i++ {
		label := uint32(100 + i)
		e := label<<12 | 64 // TC 0, TTL 64
		if i == labels-1 {
			e |= 1 << 8 // bottom of stack
		}
		p = binary.BigEndian.AppendUint32(p, e)
	}
	return p
}

func payloadN(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// build lays out s as a gso.Packet.
func build(s spec) gso.Packet {
	var b []byte
	b = append(b, s.prefix...)
	ip := len(b)
	tcpLen := 20 + len(s.tcpOpts) + len(s.payload)
	if !s.v6 {
		ihl := 20 + len(s.ipOpts)
		b = append(b, 0x40|byte(ihl/4), 0)
		b = binary.BigEndian.AppendUint16(b, uint16(ihl+tcpLen))
		b = binary.BigEndian.AppendUint16(b, s.id)
		b = append(b, 0x40, 0, 64, 6, 0, 0) // DF, TTL 64, TCP, checksum
		b = append(b, src4...)
		b = append(b, dst4...)
		b = append(b, s.ipOpts...)
		binary.BigEndian.PutUint16(b[ip+10:], ^refSum(b[ip:]))
	} else {
		extLen := 0
		for _, e := range s.exts {
			extLen += 2 + len(e.body)
		}
		next := byte(6)
		if len(s.exts) > 0 {
			next = s.exts[0].typ
		}
		b = append(b, 0x60, 0, 0, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(extLen+tcpLen))
		b = append(b, next, 64)
		b = append(b, src6...)
		b = append(b, dst6...)
		for i, e := range s.exts {
			n := byte(6)
			if i+1 < len(s.exts) {
				n = s.exts[i+1].typ
			}
			b = append(b, n, byte((2+len(e.body))/8-1))
			b = append(b, e.body...)
		}
	}
	l4 := len(b)
	b = append(b, 0x30, 0x39, 0x00, 0x50) // ports 12345 -> 80
	b = binary.BigEndian.AppendUint32(b, s.seq)
	b = binary.BigEndian.AppendUint32(b, 0x01020304) // ack
	b = append(b, byte((20+len(s.tcpOpts))/4)<<4, s.flags)
	b = append(b, 0xff, 0xff, 0, 0, 0, 0) // window, checksum, urgent pointer
	b = append(b, s.tcpOpts...)
	b = append(b, s.payload...)
	pseudo := pseudoHeader(b[ip:l4], !s.v6, tcpLen)
	switch s.csum {
	case 1:
		binary.BigEndian.PutUint16(b[l4+16:], refSum(pseudo))
	case 2:
		binary.BigEndian.PutUint16(b[l4+16:], 0xbeef)
	}
	proto := gso.ProtoIPv4
	if s.v6 {
		proto = gso.ProtoIPv6
	}
	mss := s.mss
	if mss == 0 {
		mss = 1448
	}
	return gso.Packet{Buf: b, PrefixLen: len(s.prefix), Proto: proto, L4Offset: l4, MSS: mss}
}

// pseudoHeader returns the TCP pseudo-header for the IP header(s) iph.
func pseudoHeader(iph []byte, v4 bool, tcpLen int) []byte {
	var p []byte
	if v4 {
		p = append(p, iph[12:20]...)
		p = append(p, 0, 6)
		p = binary.BigEndian.AppendUint16(p, uint16(tcpLen))
	} else {
		p = append(p, iph[8:40]...)
		p = binary.BigEndian.AppendUint32(p, uint32(tcpLen))
		p = append(p, 0, 0, 0, 6)
	}
	return p
}

// checkSegments checks every invariant of Segment's output against the
// input, independently of the package: prefix copied, IP and TCP headers
// equal to the input but for the rewritten fields, lengths, IDs, sequence
// numbers, flags, both checksums (with refSum), chunk sizes, and that the
// chunks concatenate to the input payload.
func checkSegments(p gso.Packet, segs [][]byte) error {
	in := p.Buf
	ip, l4 := p.PrefixLen, p.L4Offset
	v4 := p.Proto == gso.ProtoIPv4
	doff := int(in[l4+12]>>4) * 4
	hdr := l4 + doff
	payload := in[hdr:]
	want := len(payload) / p.MSS // not (len+MSS-1)/MSS: MSS may be near MaxInt
	if len(payload)%p.MSS != 0 || want == 0 {
		want++
	}
	if len(segs) != want {
		return fmt.Errorf("got %d segments, want %d", len(segs), want)
	}
	inSeq := binary.BigEndian.Uint32(in[l4+4:])
	inID := binary.BigEndian.Uint16(in[ip+4:])
	inFlags := in[l4+13]
	off := 0
	for i, seg := range segs {
		last := i == len(segs)-1
		if len(seg) < hdr {
			return fmt.Errorf("segment %d: got len %d, want >= %d", i, len(seg), hdr)
		}
		chunk := len(seg) - hdr
		if chunk > p.MSS || (!last && chunk != p.MSS) {
			return fmt.Errorf("segment %d: got payload %d bytes, want %d (MSS), last=%v", i, chunk, p.MSS, last)
		}
		if !bytes.Equal(seg[:ip], in[:ip]) {
			return fmt.Errorf("segment %d: prefix differs", i)
		}
		// IP header: equal to the input but for the rewritten fields.
		gotIP, wantIP := bytes.Clone(seg[ip:l4]), bytes.Clone(in[ip:l4])
		if v4 {
			if got, want := int(binary.BigEndian.Uint16(gotIP[2:])), len(seg)-ip; got != want {
				return fmt.Errorf("segment %d: got IPv4 total length %d, want %d", i, got, want)
			}
			if got, want := binary.BigEndian.Uint16(gotIP[4:]), inID+uint16(i); got != want {
				return fmt.Errorf("segment %d: got IPv4 ID %#04x, want %#04x", i, got, want)
			}
			if !refVerifies(gotIP) {
				return fmt.Errorf("segment %d: IPv4 header checksum %#04x does not verify", i, binary.BigEndian.Uint16(gotIP[10:]))
			}
			for _, j := range []int{2, 3, 4, 5, 10, 11} {
				gotIP[j], wantIP[j] = 0, 0
			}
		} else {
			if got, want := int(binary.BigEndian.Uint16(gotIP[4:])), len(seg)-ip-40; got != want {
				return fmt.Errorf("segment %d: got IPv6 payload length %d, want %d", i, got, want)
			}
			gotIP[4], gotIP[5], wantIP[4], wantIP[5] = 0, 0, 0, 0
		}
		if !bytes.Equal(gotIP, wantIP) {
			return fmt.Errorf("segment %d: IP header differs beyond the rewritten fields:\n got %x\nwant %x", i, gotIP, wantIP)
		}
		// TCP header.
		tcp := seg[l4:hdr]
		if got, want := binary.BigEndian.Uint32(tcp[4:]), inSeq+uint32(off); got != want {
			return fmt.Errorf("segment %d: got seq %d, want %d", i, got, want)
		}
		wantFlags := inFlags
		if i > 0 {
			wantFlags &^= fCWR
		}
		if !last {
			wantFlags &^= fFIN | fPSH
		}
		if got := tcp[13]; got != wantFlags {
			return fmt.Errorf("segment %d: got flags %#02x, want %#02x", i, got, wantFlags)
		}
		if !refVerifies(pseudoHeader(seg[ip:l4], v4, len(seg)-l4), seg[l4:]) {
			return fmt.Errorf("segment %d: TCP checksum %#04x does not verify", i, binary.BigEndian.Uint16(tcp[16:]))
		}
		gotTCP, wantTCP := bytes.Clone(tcp), bytes.Clone(in[l4:hdr])
		for _, j := range []int{4, 5, 6, 7, 13, 16, 17} {
			gotTCP[j], wantTCP[j] = 0, 0
		}
		if !bytes.Equal(gotTCP, wantTCP) {
			return fmt.Errorf("segment %d: TCP header differs beyond the rewritten fields:\n got %x\nwant %x", i, gotTCP, wantTCP)
		}
		if !bytes.Equal(seg[hdr:], payload[off:off+chunk]) {
			return fmt.Errorf("segment %d: payload differs from input bytes [%d, %d)", i, off, off+chunk)
		}
		off += chunk
	}
	if off != len(payload) {
		return fmt.Errorf("got %d payload bytes in all, want %d", off, len(payload))
	}
	return nil
}

// segment runs SegmentedLen and Segment and checks they agree.
func segment(p gso.Packet) ([][]byte, error) {
	n, err := gso.SegmentedLen(p)
	if err != nil {
		return nil, err
	}
	dst := make([]byte, n)
	segs, err := gso.Segment(p, dst, nil)
	if err != nil {
		return nil, fmt.Errorf("SegmentedLen accepted the packet, Segment said %w", err)
	}
	total := 0
	for _, s := range segs {
		total += len(s)
	}
	if total != n {
		return nil, fmt.Errorf("got %d bytes of segments, SegmentedLen said %d", total, n)
	}
	if c := gso.Count(p); c != len(segs) {
		return nil, fmt.Errorf("got %d segments, Count said %d", len(segs), c)
	}
	return segs, nil
}
