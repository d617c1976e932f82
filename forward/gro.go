package forward

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Receive coalescing (GRO) in the label switch. When the egress link takes
// TCP GSO frames (link/afpacket's GSOFrames: a virtio-net header crosses
// the veth), the consecutive TCP segments of one flow that a receive batch
// pops to IP are merged into one GSO packet: one frame instead of dozens,
// which the peer's kernel takes as one skb. Linux's GRO rules, kept strict:
// IPv4 without options and with DF, or IPv6 without extension headers;
// the same TOS/traffic class, flow label and TTL/hop limit; ACK with at
// most PSH; identical TCP options, ack and window; contiguous sequence
// numbers; every segment but the last of the first one's size. A PSH or a
// shorter segment ends the packet. Only segments whose IPv4 header and TCP
// checksums verify (or that the receive path flagged validated) coalesce:
// the merged packet's checksum is recomputed by the peer, so merging a
// corrupt segment would deliver corrupt data as valid.

// groMaxSize caps a coalesced packet: the IPv4 total length, or the IPv6
// payload length, is 16 bits.
const groMaxSize = 0xffff

// groFlow is the coalescing state of one egress link: the held packet that
// later segments may join. Guarded by heldTx.mu.
type groFlow struct {
	pkt          *gstack.PacketBuffer // the last held packet; nil: none to join
	nh           *nextHop
	v6           bool
	src, dst     [16]byte // IPv4 addresses in the first 4 bytes
	ipMatch      [4]byte  // IPv4: TOS, TTL; IPv6: version, class, flow label
	hopLimit     uint8    // IPv6
	sport, dport uint16
	nextSeq, ack uint32
	win          uint16
	tcpHL        int
	opts         [header.TCPOptionsMaximumSize]byte
	mss          int  // payload bytes of the first segment
	size         int  // IP packet length so far
	closed       bool // a PSH or short segment ended it
}

// tcpSeg is a popped IP packet parsed as a TCP segment.
type tcpSeg struct {
	v6           bool
	l3           int // IP header length: 20 or 40
	src, dst     [16]byte
	ipMatch      [4]byte
	hopLimit     uint8
	sport, dport uint16
	seq, ack     uint32
	win          uint16
	flags        header.TCPFlags
	tcpHL        int
	payload      int
	hdr          []byte // the IP and TCP headers (read only)
}

// parseSeg reads a popped IP packet (v6: IPv6) of size bytes as a TCP
// segment that may coalesce; pull returns its first n bytes contiguous.
func parseSeg(v6 bool, pull func(n int) ([]byte, bool), size int) (tcpSeg, bool) {
	s := tcpSeg{v6: v6, l3: header.IPv4MinimumSize}
	if v6 {
		s.l3 = header.IPv6MinimumSize
	}
	b, ok := pull(s.l3 + header.TCPMinimumSize)
	if !ok {
		return s, false
	}
	if v6 {
		ip := header.IPv6(b)
		if b[0]>>4 != 6 || ip.NextHeader() != uint8(header.TCPProtocolNumber) || int(ip.PayloadLength())+s.l3 != size {
			return s, false
		}
		copy(s.ipMatch[:], b[:4])
		s.hopLimit = ip.HopLimit()
	} else {
		ip := header.IPv4(b)
		if ip.HeaderLength() != header.IPv4MinimumSize || ip.Protocol() != uint8(header.TCPProtocolNumber) ||
			ip.Flags()&header.IPv4FlagDontFragment == 0 || ip.More() || ip.FragmentOffset() != 0 ||
			int(ip.TotalLength()) != size {
			return s, false
		}
		s.ipMatch = [4]byte{b[1], b[8]} // TOS, TTL
	}
	tcp := header.TCP(b[s.l3:])
	s.tcpHL = int(tcp.DataOffset())
	s.flags = tcp.Flags()
	if s.tcpHL < header.TCPMinimumSize || s.flags&^(header.TCPFlagAck|header.TCPFlagPsh) != 0 || s.flags&header.TCPFlagAck == 0 {
		return s, false
	}
	s.payload = size - s.l3 - s.tcpHL
	if s.payload <= 0 {
		return s, false
	}
	if s.hdr, ok = pull(s.l3 + s.tcpHL); !ok {
		return s, false
	}
	if v6 {
		copy(s.src[:], s.hdr[8:24])
		copy(s.dst[:], s.hdr[24:40])
	} else {
		copy(s.src[:], s.hdr[12:16])
		copy(s.dst[:], s.hdr[16:20])
	}
	tcp = header.TCP(s.hdr[s.l3:])
	s.sport, s.dport = tcp.SourcePort(), tcp.DestinationPort()
	s.seq, s.ack, s.win = tcp.SequenceNumber(), tcp.AckNumber(), tcp.WindowSize()
	return s, true
}

// options returns the segment's TCP option bytes.
func (s *tcpSeg) options() []byte { return s.hdr[s.l3+header.TCPMinimumSize:] }

// l3 is the flow's IP header length.
func (f *groFlow) l3() int {
	if f.v6 {
		return header.IPv6MinimumSize
	}
	return header.IPv4MinimumSize
}

// lengthField is the value of the packet's IP length field so far: the
// IPv4 total length, or the IPv6 payload length (header not counted).
func (f *groFlow) lengthField() int {
	if f.v6 {
		return f.size - header.IPv6MinimumSize
	}
	return f.size
}

// addrs returns the flow's addresses as tcpip addresses.
func (f *groFlow) addrs() (tcpip.Address, tcpip.Address) {
	if f.v6 {
		return tcpip.AddrFrom16(f.src), tcpip.AddrFrom16(f.dst)
	}
	return tcpip.AddrFrom4([4]byte(f.src[:4])), tcpip.AddrFrom4([4]byte(f.dst[:4]))
}

// coalesce merges payload, a popped IP packet (v6: IPv6) for nh, into the
// held packet if it continues that packet's flow, and reports whether it
// did (then it owns payload). Callers hold heldTx.mu.
func (f *groFlow) coalesce(nh *nextHop, v6 bool, payload *buffer.Buffer) bool {
	if f.pkt == nil || f.closed || f.nh != nh || f.v6 != v6 {
		return false
	}
	s, ok := parseSeg(v6, func(n int) ([]byte, bool) {
		v, ok := payload.PullUp(0, n)
		return v.AsSlice(), ok
	}, int(payload.Size()))
	if !ok || s.src != f.src || s.dst != f.dst || s.sport != f.sport || s.dport != f.dport ||
		s.ipMatch != f.ipMatch || s.hopLimit != f.hopLimit ||
		s.seq != f.nextSeq || s.ack != f.ack || s.win != f.win || s.tcpHL != f.tcpHL ||
		s.payload > f.mss || f.lengthField()+s.payload > groMaxSize ||
		string(s.options()) != string(f.opts[:f.tcpHL-header.TCPMinimumSize]) {
		return false
	}
	l3 := f.l3()
	hb, ok := f.pkt.Data().PullUp(l3 + f.tcpHL)
	if !ok {
		return false
	}
	payload.TrimFront(int64(l3 + s.tcpHL))
	f.pkt.Data().MergeBuffer(payload)
	f.size += s.payload
	f.nextSeq += uint32(s.payload)
	if s.flags&header.TCPFlagPsh != 0 || s.payload < f.mss {
		f.closed = true
	}
	// The headers now describe the whole GSO packet: its length, the PSH of
	// its last segment, and a partial TCP checksum (the pseudo-header sum,
	// which the peer's kernel, told NEEDS_CSUM, completes or trusts).
	typ := gstack.GSOTCPv4
	if v6 {
		typ = gstack.GSOTCPv6
		header.IPv6(hb).SetPayloadLength(uint16(f.lengthField()))
	} else {
		ip := header.IPv4(hb)
		ip.SetTotalLength(uint16(f.lengthField()))
		ip.SetChecksum(0)
		ip.SetChecksum(^ip.CalculateChecksum())
	}
	tcp := header.TCP(hb[l3:])
	tcp.SetFlags(uint8(tcp.Flags() | s.flags))
	src, dst := f.addrs()
	binary.BigEndian.PutUint16(hb[l3+16:], header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, dst, uint16(f.size-l3)))
	f.pkt.GSOOptions = gstack.GSO{
		Type:       typ,
		NeedsCsum:  true,
		CsumOffset: 16, // the TCP checksum
		MSS:        uint16(f.mss),
		L3HdrLen:   uint16(l3),
		MaxSize:    groMaxSize,
	}
	return true
}

// start makes out, just held for nh, the packet later segments may join,
// if it is a TCP segment that may coalesce; else nothing may join.
func (f *groFlow) start(nh *nextHop, out *gstack.PacketBuffer) {
	f.pkt = nil
	v6 := out.NetworkProtocolNumber == header.IPv6ProtocolNumber
	if !v6 && out.NetworkProtocolNumber != header.IPv4ProtocolNumber {
		return
	}
	d := out.Data()
	s, ok := parseSeg(v6, d.PullUp, d.Size())
	if !ok {
		return
	}
	*f = groFlow{pkt: out, nh: nh, v6: v6, src: s.src, dst: s.dst, ipMatch: s.ipMatch, hopLimit: s.hopLimit,
		sport: s.sport, dport: s.dport, nextSeq: s.seq + uint32(s.payload), ack: s.ack, win: s.win,
		tcpHL: s.tcpHL, mss: s.payload, size: s.l3 + s.tcpHL + s.payload,
		closed: s.flags&header.TCPFlagPsh != 0}
	copy(f.opts[:], s.options())
}

// checksumsValid reports whether the IP packet ip (typ: IPv4 or IPv6)
// carries a TCP segment whose checksums verify: the IPv4 header checksum
// and the TCP checksum over the pseudo-header and the whole segment.
// Anything else (not TCP, malformed, a failed sum) is false. The IP header
// is read into a copy, not pulled up: a pull-up of a view whose chunk is
// shared (the ingress packet still holds it) copies the whole chunk.
func checksumsValid(typ tcpip.NetworkProtocolNumber, ip *buffer.Buffer) bool {
	size := int(ip.Size())
	var (
		hl, l4   int
		src, dst tcpip.Address
		hdr      [header.IPv4MaximumHeaderSize]byte
	)
	switch typ {
	case header.IPv4ProtocolNumber:
		if n, _ := ip.ReadAt(hdr[:header.IPv4MinimumSize], 0); n != header.IPv4MinimumSize {
			return false
		}
		h := header.IPv4(hdr[:])
		hl = int(h.HeaderLength())
		if hl < header.IPv4MinimumSize || int(h.TotalLength()) != size || hl > size ||
			h.Protocol() != uint8(header.TCPProtocolNumber) {
			return false
		}
		if n, _ := ip.ReadAt(hdr[header.IPv4MinimumSize:hl], header.IPv4MinimumSize); n != hl-header.IPv4MinimumSize ||
			checksum.Checksum(hdr[:hl], 0) != 0xffff {
			return false
		}
		src, dst, l4 = h.SourceAddress(), h.DestinationAddress(), size-hl
	case header.IPv6ProtocolNumber:
		if n, _ := ip.ReadAt(hdr[:header.IPv6MinimumSize], 0); n != header.IPv6MinimumSize {
			return false
		}
		h := header.IPv6(hdr[:header.IPv6MinimumSize])
		hl = header.IPv6MinimumSize
		if h.NextHeader() != uint8(header.TCPProtocolNumber) || int(h.PayloadLength())+hl != size {
			return false
		}
		src, dst, l4 = h.SourceAddress(), h.DestinationAddress(), size-hl
	default:
		return false
	}
	if l4 < header.TCPMinimumSize {
		return false
	}
	pseudo := header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, dst, uint16(l4))
	return checksum.Combine(pseudo, ip.Checksum(hl)) == 0xffff
}
