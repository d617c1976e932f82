package node

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Receive coalescing (GRO) in the label switch. When the egress link takes
// TCP GSO frames (link/afpacket's GSOFrames: a virtio-net header crosses
// the veth), the consecutive IPv4 TCP segments of one flow that a receive
// batch pops to IP are merged into one GSO packet: one frame instead of
// dozens, which the peer's kernel takes as one skb. Linux's GRO rules,
// kept strict: no IP options, DF set, ACK with at most PSH, identical TCP
// options, same ack and window, contiguous sequence numbers, every segment
// but the last of the first one's size; a PSH or a shorter segment ends
// the packet.

// groMaxSize caps a coalesced IPv4 packet (its total length field).
const groMaxSize = 0xffff

// groFlow is the coalescing state of one egress link: the held packet that
// later segments may join. Guarded by heldTx.mu.
type groFlow struct {
	pkt          *gstack.PacketBuffer // the last held packet; nil: none to join
	nh           *nextHop
	src, dst     [4]byte
	sport, dport uint16
	nextSeq, ack uint32
	win          uint16
	tcpHL        int
	opts         [header.TCPOptionsMaximumSize]byte
	mss          int  // payload bytes of the first segment
	size         int  // IP total length so far
	closed       bool // a PSH or short segment ended it
}

// tcpSeg is the parsed IPv4 TCP segment of a popped packet.
type tcpSeg struct {
	src, dst     [4]byte
	sport, dport uint16
	seq, ack     uint32
	win          uint16
	flags        header.TCPFlags
	tcpHL        int
	payload      int
	hdr          []byte // the IP and TCP headers (read only)
}

// parseSeg reads a popped IPv4 packet of size bytes as a TCP segment that
// may coalesce; pull returns its first n bytes contiguous.
func parseSeg(pull func(n int) ([]byte, bool), size int) (tcpSeg, bool) {
	var s tcpSeg
	b, ok := pull(header.IPv4MinimumSize + header.TCPMinimumSize)
	if !ok {
		return s, false
	}
	ip := header.IPv4(b)
	if ip.HeaderLength() != header.IPv4MinimumSize || ip.Protocol() != uint8(header.TCPProtocolNumber) ||
		ip.Flags()&header.IPv4FlagDontFragment == 0 || ip.More() || ip.FragmentOffset() != 0 ||
		int(ip.TotalLength()) != size {
		return s, false
	}
	tcp := header.TCP(b[header.IPv4MinimumSize:])
	s.tcpHL = int(tcp.DataOffset())
	s.flags = tcp.Flags()
	if s.tcpHL < header.TCPMinimumSize || s.flags&^(header.TCPFlagAck|header.TCPFlagPsh) != 0 || s.flags&header.TCPFlagAck == 0 {
		return s, false
	}
	s.payload = size - header.IPv4MinimumSize - s.tcpHL
	if s.payload <= 0 {
		return s, false
	}
	if s.hdr, ok = pull(header.IPv4MinimumSize + s.tcpHL); !ok {
		return s, false
	}
	ip = header.IPv4(s.hdr)
	tcp = header.TCP(s.hdr[header.IPv4MinimumSize:])
	copy(s.src[:], ip.SourceAddressSlice())
	copy(s.dst[:], ip.DestinationAddressSlice())
	s.sport, s.dport = tcp.SourcePort(), tcp.DestinationPort()
	s.seq, s.ack, s.win = tcp.SequenceNumber(), tcp.AckNumber(), tcp.WindowSize()
	return s, true
}

// coalesce merges payload, a popped IPv4 packet for eg.nh, into the packet
// held for the egress link if it continues that packet's flow, and reports
// whether it did (then it owns payload). Callers hold tx.mu.
func (f *groFlow) coalesce(nh *nextHop, payload *buffer.Buffer) bool {
	if f.pkt == nil || f.closed || f.nh != nh {
		return false
	}
	s, ok := parseSeg(func(n int) ([]byte, bool) {
		v, ok := payload.PullUp(0, n)
		return v.AsSlice(), ok
	}, int(payload.Size()))
	if !ok || s.src != f.src || s.dst != f.dst || s.sport != f.sport || s.dport != f.dport ||
		s.seq != f.nextSeq || s.ack != f.ack || s.win != f.win || s.tcpHL != f.tcpHL ||
		s.payload > f.mss || f.size+s.payload > groMaxSize ||
		string(s.hdr[header.IPv4MinimumSize+header.TCPMinimumSize:]) != string(f.opts[:f.tcpHL-header.TCPMinimumSize]) {
		return false
	}
	hb, ok := f.pkt.Data().PullUp(header.IPv4MinimumSize + f.tcpHL)
	if !ok {
		return false
	}
	ip := header.IPv4(hb)
	if tos, _ := ip.TOS(); tos != s.hdr[1] || ip.TTL() != s.hdr[8] {
		return false
	}
	payload.TrimFront(int64(header.IPv4MinimumSize + s.tcpHL))
	f.pkt.Data().MergeBuffer(payload)
	f.size += s.payload
	f.nextSeq += uint32(s.payload)
	if s.flags&header.TCPFlagPsh != 0 || s.payload < f.mss {
		f.closed = true
	}
	// The headers now describe the whole GSO packet: its length, the PSH of
	// its last segment, and a partial TCP checksum (the pseudo-header sum,
	// which the peer's kernel, told NEEDS_CSUM, completes or trusts).
	ip.SetTotalLength(uint16(f.size))
	ip.SetChecksum(0)
	ip.SetChecksum(^ip.CalculateChecksum())
	tcp := header.TCP(hb[header.IPv4MinimumSize:])
	tcp.SetFlags(uint8(tcp.Flags() | s.flags))
	tcpLen := uint16(f.size - header.IPv4MinimumSize)
	binary.BigEndian.PutUint16(hb[header.IPv4MinimumSize+16:],
		header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpip.AddrFrom4(f.src), tcpip.AddrFrom4(f.dst), tcpLen))
	f.pkt.GSOOptions = gstack.GSO{
		Type:       gstack.GSOTCPv4,
		NeedsCsum:  true,
		CsumOffset: 16, // the TCP checksum
		MSS:        uint16(f.mss),
		L3HdrLen:   header.IPv4MinimumSize,
		MaxSize:    groMaxSize,
	}
	return true
}

// start makes out, just held for nh, the packet later segments may join,
// if it is a TCP segment that may coalesce; else nothing may join.
func (f *groFlow) start(nh *nextHop, out *gstack.PacketBuffer) {
	f.pkt = nil
	if out.NetworkProtocolNumber != header.IPv4ProtocolNumber {
		return
	}
	d := out.Data()
	s, ok := parseSeg(d.PullUp, d.Size())
	if ok {
		*f = groFlow{pkt: out, nh: nh, src: s.src, dst: s.dst, sport: s.sport, dport: s.dport,
			nextSeq: s.seq + uint32(s.payload), ack: s.ack, win: s.win, tcpHL: s.tcpHL,
			mss: s.payload, size: header.IPv4MinimumSize + s.tcpHL + s.payload,
			closed: s.flags&header.TCPFlagPsh != 0}
		copy(f.opts[:], s.hdr[header.IPv4MinimumSize+header.TCPMinimumSize:])
	}
}
