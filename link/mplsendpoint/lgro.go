package mplsendpoint

import (
	"sync"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/gso"
	"github.com/mplsnode/mplsnode/mpls"
)

// Coalescing of transit labelled TCP (labelled GRO). A lower link that
// hands over many segments of one flow per receive batch (a udp link's
// UDP GRO reads: the segments of one TCP GSO packet of the peer) delivers
// them one frame each; forwarding each on its own costs a decision and a
// write per segment. When the forwarder takes whole GSO packets
// (GSOForwarder), the consecutive frames of a batch with the same link
// header and label stack (the same bytes, so the same decision) whose
// payload continues one TCP flow are merged into one labelled TCP packet
// that stands for them, and the forwarder decides it once
// (ForwardRequest.GSOMSS) and sends it whole or cuts it where its egress
// needs. One it declines is cut back into the segments it was made of,
// each forwarded on its own.
//
// The rules are Linux's GRO rules, kept strict: IPv4 with a 20-byte header
// and DF and no fragmentation, or IPv6 with TCP as the next header; the
// same addresses, ports, TOS/traffic class and flow label, TTL/hop limit,
// ack, window and TCP options; ACK and at most PSH; contiguous sequence
// numbers; every segment but the last of the first one's size. A PSH or a
// shorter segment ends the packet. Only segments whose IPv4 header and TCP
// checksums verify (or that the lower link flagged validated) merge: the
// merged packet leaves with a checksum computed anew (by the peer's
// kernel, or per cut segment), which would make a corrupt segment valid.

// GSOForwarder is a Forwarder that takes a labelled TCP packet standing
// for several segments (ForwardRequest.GSOMSS not 0) whole.
type GSOForwarder interface {
	Forwarder
	// ForwardGSO decides the packet once, on its first segment, and
	// carries the decision out for every segment (sending the packet
	// whole, or cutting it into segments of at most GSOMSS payload
	// bytes), reporting true; false declines it, untouched: the endpoint
	// cuts it and forwards each segment. req and its slices are valid
	// only during the call; the packet is owned by the caller.
	ForwardGSO(in *Endpoint, req *ForwardRequest) bool
}

// lgroMaxSize caps a merged packet: its IP length field is 16 bits.
const lgroMaxSize = 0xffff

// lgroState is the endpoint's held labelled packet; mu guards it (a lower
// link with several queues delivers from several goroutines).
type lgroState struct {
	mu  sync.Mutex
	pkt *stack.PacketBuffer // nil: none held
	// req is the held packet's request (Packet, Labels and Frame
	// refreshed at the flush); frame the link header and label stack,
	// labels their entries.
	req    ForwardRequest
	frame  []byte
	labels []mpls.Entry
	v6     bool
	l3     int // IP header length
	tcpHL  int
	match  [header.IPv6MinimumSize + header.TCPMinimumSize]byte
	nMatch int
	opts   [header.TCPOptionsMaximumSize]byte
	hits   int    // the ILM hits of the held packet's walk
	mss    int    // payload bytes of the first segment
	size   int    // IP packet length so far
	next   uint32 // sequence number the next segment must have
	segs   int
	closed bool // a PSH or short segment ended it
	// out is the reusable output of a cut-back packet.
	out  []byte
	cuts [][]byte
}

// lgroSeg is a labelled frame's TCP segment as the merge reads it.
type lgroSeg struct {
	v6        bool
	l3, tcpHL int
	seq       uint32
	flags     header.TCPFlags
	payload   int
	ip, tcp   []byte // the IP header, the TCP header with options
}

// parseLSeg reads the IP packet ip (the frame after its label stack, the
// packet's data contiguous from there: ip is the whole rest) as a TCP
// segment that may merge, checking its checksums unless validated.
func parseLSeg(ip []byte, validated bool) (lgroSeg, bool) {
	var s lgroSeg
	if len(ip) < header.IPv4MinimumSize {
		return s, false
	}
	switch ip[0] >> 4 {
	case 4:
		h := header.IPv4(ip)
		if h.HeaderLength() != header.IPv4MinimumSize || h.Protocol() != uint8(header.TCPProtocolNumber) ||
			h.Flags()&header.IPv4FlagDontFragment == 0 || h.More() || h.FragmentOffset() != 0 ||
			int(h.TotalLength()) != len(ip) {
			return s, false
		}
		s.l3 = header.IPv4MinimumSize
	case 6:
		if len(ip) < header.IPv6MinimumSize {
			return s, false
		}
		h := header.IPv6(ip)
		if h.NextHeader() != uint8(header.TCPProtocolNumber) || int(h.PayloadLength())+header.IPv6MinimumSize != len(ip) {
			return s, false
		}
		s.v6, s.l3 = true, header.IPv6MinimumSize
	default:
		return s, false
	}
	if len(ip) < s.l3+header.TCPMinimumSize {
		return s, false
	}
	tcp := header.TCP(ip[s.l3:])
	s.tcpHL = int(tcp.DataOffset())
	s.flags = tcp.Flags()
	if s.tcpHL < header.TCPMinimumSize || s.l3+s.tcpHL > len(ip) ||
		s.flags&header.TCPFlagAck == 0 || s.flags&^(header.TCPFlagAck|header.TCPFlagPsh) != 0 {
		return s, false
	}
	s.payload = len(ip) - s.l3 - s.tcpHL
	if s.payload <= 0 {
		return s, false
	}
	s.ip, s.tcp = ip[:s.l3], ip[s.l3:s.l3+s.tcpHL]
	s.seq = tcp.SequenceNumber()
	if !validated && !lsegChecksumsValid(s.v6, ip, s.l3) {
		return s, false
	}
	return s, true
}

// lsegChecksumsValid reports whether the IPv4 header checksum (v4) and
// the TCP checksum of the IP packet ip (IP header l3 bytes) verify.
func lsegChecksumsValid(v6 bool, ip []byte, l3 int) bool {
	var src, dst tcpip.Address
	if v6 {
		h := header.IPv6(ip)
		src, dst = h.SourceAddress(), h.DestinationAddress()
	} else {
		h := header.IPv4(ip)
		if checksum.Checksum(ip[:l3], 0) != 0xffff {
			return false
		}
		src, dst = h.SourceAddress(), h.DestinationAddress()
	}
	pseudo := header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, dst, uint16(len(ip)-l3))
	return checksum.Checksum(ip[l3:], pseudo) == 0xffff
}

// matchBytes writes into dst the header bytes of s that every merged
// segment shares and returns their number: IPv4 TOS and TTL, protocol and
// addresses (or IPv6's first word, next header, hop limit and addresses),
// ports, ack and window.
func matchBytes(dst []byte, s *lgroSeg) int {
	n := 0
	if s.v6 {
		n += copy(dst[n:], s.ip[0:4])
		n += copy(dst[n:], s.ip[6:40])
	} else {
		dst[n], dst[n+1] = s.ip[1], s.ip[8]
		n += 2
		n += copy(dst[n:], s.ip[9:10])
		n += copy(dst[n:], s.ip[12:20])
	}
	n += copy(dst[n:], s.tcp[0:4])   // ports
	n += copy(dst[n:], s.tcp[8:12])  // ack
	n += copy(dst[n:], s.tcp[14:16]) // window
	return n
}

// lgroContinue is deliverMPLS's first step for a frame that may continue
// the held packet: one whose link header and label stack are the held
// packet's bytes, under the ILM the held packet was walked in, gets the
// same walk (so none is done again: its ILM hits are the held packet's)
// and is merged if its segment continues the flow. It reports whether it
// merged the frame; false leaves it to the full path.
func (e *Endpoint) lgroContinue(pkt *stack.PacketBuffer) bool {
	if e.gsoFwd == nil {
		return false
	}
	g := &e.lgro
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pkt == nil {
		return false
	}
	data := pkt.Data()
	b, ok := data.PullUp(data.Size())
	if !ok || len(b) <= len(g.frame) || string(b[:len(g.frame)]) != string(g.frame) || e.tables.ILM() != g.req.ILM {
		return false
	}
	s, ok := parseLSeg(b[len(g.frame):], pkt.RXChecksumValidated)
	if !ok {
		return false
	}
	req := ForwardRequest{Packet: pkt, ILM: g.req.ILM, Entry: g.req.Entry}
	if !g.merge(&req, b[:len(g.frame)], &s) {
		return false
	}
	e.ctr.ilmHits.Add(uint64(g.hits))
	e.ctr.rxForwarded.Add(1)
	return true
}

// lgroTake is deliverMPLS's hand-off of a frame to forward (req, built
// for Forward) through the held packet: it merges the frame into the held
// packet, or makes it the held packet after flushing the one before, and
// reports true; false (after flushing the held packet) leaves the frame
// to Forward. hdrLen is the link header and label stack's length, hits
// the ILM hits of its walk.
func (e *Endpoint) lgroTake(req *ForwardRequest, hdrLen, hits int) bool {
	// A swap leaves labelled, which no egress takes as a GSO frame: merged,
	// it would only be declined and cut back (a copy per segment).
	if e.gsoFwd == nil || !req.Batched || (req.Entry != nil && req.Entry.Action == mpls.ILMSwap) {
		return false
	}
	pkt := req.Packet
	data := pkt.Data()
	b, ok := data.PullUp(data.Size())
	if !ok {
		return false
	}
	g := &e.lgro
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := parseLSeg(b[hdrLen:], pkt.RXChecksumValidated)
	if ok && g.pkt != nil && g.merge(req, b[:hdrLen], &s) {
		e.ctr.rxForwarded.Add(1)
		return true
	}
	e.lgroFlushLocked()
	if !ok || s.flags&header.TCPFlagPsh != 0 {
		return false
	}
	g.start(req, b[:hdrLen], &s)
	g.hits = hits
	e.ctr.rxForwarded.Add(1)
	return true
}

// merge appends segment s of req's frame (link header and labels hdr) to
// the held packet if it continues it, and reports whether it did.
func (g *lgroState) merge(req *ForwardRequest, hdr []byte, s *lgroSeg) bool {
	if g.closed || s.v6 != g.v6 || s.tcpHL != g.tcpHL || s.seq != g.next || s.payload > g.mss ||
		g.lengthField()+s.payload > lgroMaxSize || req.ILM != g.req.ILM || req.Entry != g.req.Entry ||
		string(hdr) != string(g.frame) || string(s.tcp[header.TCPMinimumSize:]) != string(g.opts[:g.tcpHL-header.TCPMinimumSize]) {
		return false
	}
	var m [len(lgroState{}.match)]byte
	if n := matchBytes(m[:], s); n != g.nMatch || string(m[:n]) != string(g.match[:n]) {
		return false
	}
	buf := req.Packet.Data().ToBuffer()
	buf.TrimFront(int64(len(hdr) + g.l3 + g.tcpHL))
	g.pkt.Data().MergeBuffer(&buf)
	g.size += s.payload
	g.next += uint32(s.payload)
	g.segs++
	if s.flags&header.TCPFlagPsh != 0 || s.payload < g.mss {
		g.closed = true
		if s.flags&header.TCPFlagPsh != 0 {
			// The merged packet's flags are its last segment's.
			tcp := header.TCP(g.ipHeader(g.pkt)[g.l3:])
			tcp.SetFlags(uint8(tcp.Flags() | header.TCPFlagPsh))
		}
	}
	return true
}

// start makes req's frame (segment s behind hdr) the held packet.
func (g *lgroState) start(req *ForwardRequest, hdr []byte, s *lgroSeg) {
	g.pkt = req.Packet.IncRef()
	g.req = *req
	g.frame = append(g.frame[:0], hdr...)
	g.labels = append(g.labels[:0], req.Labels...)
	g.v6, g.l3, g.tcpHL = s.v6, s.l3, s.tcpHL
	g.nMatch = matchBytes(g.match[:], s)
	copy(g.opts[:], s.tcp[header.TCPMinimumSize:])
	g.mss, g.size = s.payload, s.l3+s.tcpHL+s.payload
	g.next = s.seq + uint32(s.payload)
	g.segs, g.closed = 1, false
}

// lengthField is the held packet's IP length field so far.
func (g *lgroState) lengthField() int {
	if g.v6 {
		return g.size - header.IPv6MinimumSize
	}
	return g.size
}

// ipHeader returns the IP and TCP headers of pkt, the held packet (in
// its first view, which holds its first segment whole).
func (g *lgroState) ipHeader(pkt *stack.PacketBuffer) []byte {
	b, _ := pkt.Data().PullUp(len(g.frame) + g.l3 + g.tcpHL)
	return b[len(g.frame):]
}

// lgroFlush hands the held packet, if any, to the forwarder: at the end
// of each receive batch, and before a frame that does not continue it.
func (e *Endpoint) lgroFlush() {
	if e.gsoFwd == nil {
		return
	}
	e.lgro.mu.Lock()
	e.lgroFlushLocked()
	e.lgro.mu.Unlock()
}

// lgroFlushLocked is lgroFlush with e.lgro.mu held.
func (e *Endpoint) lgroFlushLocked() {
	g := &e.lgro
	pkt := g.pkt
	if pkt == nil {
		return
	}
	g.pkt = nil
	defer pkt.DecRef()
	rx := e.getRX() // pooled: the request escapes through the interface call
	defer e.putRX(rx)
	req := &rx.req
	*req = g.req
	req.Packet, req.Labels = pkt, g.labels
	hb, _ := pkt.Data().PullUp(len(g.frame))
	req.Frame = hb
	if g.segs == 1 {
		e.fwd.Forward(e, req)
		return
	}
	ip := g.ipHeader(pkt)
	if g.v6 {
		header.IPv6(ip).SetPayloadLength(uint16(g.lengthField()))
	} else {
		h := header.IPv4(ip)
		h.SetTotalLength(uint16(g.size))
		h.SetChecksum(0)
		h.SetChecksum(^h.CalculateChecksum())
	}
	req.GSOMSS = g.mss
	if e.gsoFwd.ForwardGSO(e, req) {
		return
	}
	e.lgroCut(req)
}

// lgroCut cuts the merged packet of req back into segments of at most
// req.GSOMSS payload bytes (package gso: headers as the first segment's,
// sequence numbers, lengths and checksums per segment) and forwards each.
func (e *Endpoint) lgroCut(req *ForwardRequest) {
	g := &e.lgro
	data := req.Packet.Data()
	b, ok := data.PullUp(data.Size())
	if !ok {
		e.drop(DropGSOUnsupported, -1, nil)
		return
	}
	proto := gso.ProtoIPv4
	if g.v6 {
		proto = gso.ProtoIPv6
	}
	p := gso.Packet{Buf: b, PrefixLen: len(g.frame), Proto: proto, L4Offset: len(g.frame) + g.l3, MSS: req.GSOMSS}
	n, err := gso.SegmentedLen(p)
	if err != nil {
		e.drop(DropGSOUnsupported, -1, err)
		return
	}
	if cap(g.out) < n {
		g.out = make([]byte, n)
	}
	g.cuts, err = gso.Segment(p, g.out[:n], g.cuts[:0])
	if err != nil {
		e.drop(DropGSOUnsupported, -1, err)
		return
	}
	for _, seg := range g.cuts {
		sp := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(seg)})
		sp.RXChecksumValidated = true // gso.Segment wrote full checksums
		sp.PktType = req.Packet.PktType
		sp.Hash = req.Packet.Hash
		rx := e.getRX()
		rx.req = *req
		rx.req.Packet, rx.req.GSOMSS = sp, 0
		rx.req.Frame = seg[:len(g.frame)]
		e.fwd.Forward(e, &rx.req)
		e.putRX(rx)
		sp.DecRef()
	}
}

// lgroClose releases the held packet (endpoint_closed).
func (e *Endpoint) lgroClose() {
	e.lgro.mu.Lock()
	defer e.lgro.mu.Unlock()
	if e.lgro.pkt != nil {
		e.lgro.pkt.DecRef()
		e.lgro.pkt = nil
		e.drop(DropEndpointClosed, -1, nil)
	}
}
