package forward

import (
	"encoding/binary"
	"sync"

	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/gso"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Transit GSO packets. A TCP packet larger than its ingress link's MTU (a
// veth peer's GSO frame) reaches ForwardIP whole, standing for segments of
// at most IPForwardRequest.GSOMSS payload bytes. Its route is decided
// once, on its first segment as the ingress would cut it (the same
// headers, that segment's length, so the egress MTU is checked against
// the segments), and it is cut only where its egress needs it: it leaves
// as one GSO frame on an unlabelled route whose link takes GSO frames
// (the pseudo-header sum in the TCP checksum field, the peer's kernel
// finishing it, as for GRO), and is segmented here (package gso: full
// checksums per segment, TTL or hop limit as decremented once on the
// header it copies) for a labelled route or a link without GSO frames.
// One whose IP header does not verify is dropped whole. A packet whose
// verdict is anything else (the node's own, another drop, an ICMP error,
// IPv4 fragmentation) or that cannot be segmented is declined, unchanged:
// the endpoint cuts it and offers each segment on its own, so each meets
// the rules and counters a segment meets.

// gsoScratch is the reusable state of one transit GSO packet: the copy
// of its headers the decision reads (pooled: it would escape to the heap
// through the decision's interfaces) and the output of its segmentation.
type gsoScratch struct {
	hdr  [ipLookahead]byte
	buf  []byte
	segs [][]byte
}

var gsoPool = sync.Pool{New: func() any { return new(gsoScratch) }}

// forwardGSO decides and carries out the transit GSO packet of req (see
// above) and reports whether it took it.
func (ls *Switch) forwardGSO(st *attached, req *mplsendpoint.IPForwardRequest) bool {
	pkt := req.Packet
	data := pkt.Data()
	v6 := req.Proto == header.IPv6ProtocolNumber
	b, ok := data.PullUp(data.Size())
	if !ok {
		return false
	}
	p, lo, ok := gsoLayout(v6, b, req.GSOMSS)
	if !ok {
		return false
	}
	// The decision reads the first segment: a copy of the headers with
	// its length. The IPv4 header checksum is updated incrementally, so a
	// header that did not verify still does not.
	sc := gsoPool.Get().(*gsoScratch)
	defer gsoPool.Put(sc)
	n := copy(sc.hdr[:], b)
	setIPLength(v6, sc.hdr[:n], lo.first)
	var v verdict.Verdict
	t := ls.tables(st, nil, 0)
	t.DecideIP(v6, sc.hdr[:n], lo.first, &v)
	switch {
	case v.Action == verdict.Drop && (v.Reason == verdict.BadChecksum || v.Reason == verdict.MalformedIP):
		// Cut at ingress, each segment would get a header computed anew:
		// a corrupt one would be made valid.
		ls.drop(dropFor(v.Reason), 1, v.Label)
		return true
	case v.Action != verdict.Forward || v.FragmentMTU != 0 || v.PayloadOff != 0:
		return false
	}
	eg, ok := ls.egressFor(st, pkt, &v, req.Batched)
	if !ok {
		return true
	}
	if v.TTLOff >= 0 {
		v.RewriteTTL(b[v.TTLOff:])
	}
	ls.countN(v.Did, uint64(lo.segs))
	if eg.nLabels == 0 && eg.nh.Value.tx.gro {
		ls.emitWhole(&eg, p, data.ToBuffer(), v.Label)
		return true
	}
	if cap(sc.buf) < lo.bytes {
		sc.buf = make([]byte, lo.bytes)
	}
	segs, err := gso.Segment(p, sc.buf[:lo.bytes], sc.segs[:0])
	sc.segs = segs
	if err != nil { // gsoLayout sized it: unreachable
		ls.drop(DropMalformedIP, 1, v.Label)
		return true
	}
	eg.csumValid = true // gso.Segment wrote full checksums
	for _, seg := range segs {
		ls.emit(&eg, buffer.MakeWithData(seg), v.Label)
	}
	return true
}

// gsoShape is how a transit GSO packet segments.
type gsoShape struct {
	first int // bytes of the first segment
	segs  int // segments
	bytes int // bytes of all segments
}

// gsoLayout reads the IP packet b (v6: IPv6) as a TCP GSO packet of
// segments with at most mss payload bytes, as the endpoint checked it
// (no fragment, no IPv6 extension header): the packet for gso.Segment and
// its segments' shape. A packet gso cannot segment (a SYN or RST spanning
// segments, lengths that disagree) is not one.
func gsoLayout(v6 bool, b []byte, mss int) (p gso.Packet, lo gsoShape, ok bool) {
	p = gso.Packet{Buf: b, Proto: gso.ProtoIPv4, MSS: mss}
	var tot int
	if v6 {
		if len(b) < header.IPv6MinimumSize {
			return p, lo, false
		}
		p.Proto, p.L4Offset = gso.ProtoIPv6, header.IPv6MinimumSize
		tot = header.IPv6MinimumSize + int(header.IPv6(b).PayloadLength())
	} else {
		if len(b) < header.IPv4MinimumSize {
			return p, lo, false
		}
		p.L4Offset, tot = int(header.IPv4(b).HeaderLength()), int(header.IPv4(b).TotalLength())
	}
	if tot != len(b) || mss <= 0 || len(b) < p.L4Offset+header.TCPMinimumSize {
		return p, lo, false
	}
	hl := p.L4Offset + int(header.TCP(b[p.L4Offset:]).DataOffset())
	if hl >= len(b) {
		return p, lo, false
	}
	n, err := gso.SegmentedLen(p)
	if err != nil {
		return p, lo, false
	}
	payload := len(b) - hl
	return p, gsoShape{first: hl + min(mss, payload), segs: (payload + mss - 1) / mss, bytes: n}, true
}

// setIPLength sets the length fields of the IP header ip (v6: IPv6) to
// those of a packet of size bytes, the IPv4 header checksum updated
// incrementally (RFC 1624).
func setIPLength(v6 bool, ip []byte, size int) {
	if v6 {
		header.IPv6(ip).SetPayloadLength(uint16(size - header.IPv6MinimumSize))
		return
	}
	h := header.IPv4(ip)
	old := h.TotalLength()
	h.SetTotalLength(uint16(size))
	sum := checksum.Combine(checksum.Combine(^h.Checksum(), ^old), uint16(size))
	h.SetChecksum(^sum)
}

// emitWhole sends the GSO packet p (its TTL rewritten), whose bytes
// payload holds without a copy, to eg's next hop as one GSO frame: the
// TCP checksum field holds the pseudo-header sum for the peer's kernel to
// finish (NeedsCsum), as a coalesced packet's does. It takes ownership of
// payload.
func (ls *Switch) emitWhole(eg *egress, p gso.Packet, payload buffer.Buffer, label mpls.Label) {
	b, l3 := p.Buf, p.L4Offset
	var src, dst tcpip.Address
	typ := gstack.GSOTCPv4
	if p.Proto == gso.ProtoIPv6 {
		typ = gstack.GSOTCPv6
		src, dst = header.IPv6(b).SourceAddress(), header.IPv6(b).DestinationAddress()
	} else {
		src, dst = header.IPv4(b).SourceAddress(), header.IPv4(b).DestinationAddress()
	}
	binary.BigEndian.PutUint16(b[l3+header.TCPChecksumOffset:],
		header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, dst, uint16(len(b)-l3)))
	out := ls.linkFrame(eg, payload)
	out.GSOOptions = gstack.GSO{
		Type:       typ,
		NeedsCsum:  true,
		CsumOffset: header.TCPChecksumOffset,
		MSS:        uint16(p.MSS),
		L3HdrLen:   uint16(l3),
		MaxSize:    groMaxSize,
	}
	ls.transmit(eg.nh, out, label, eg.batched, false)
}

// linkFrame returns a packet of payload behind eg's Ethernet header and
// labels (the destination MAC is filled in by transmit). It takes
// ownership of payload.
func (ls *Switch) linkFrame(eg *egress, payload buffer.Buffer) *gstack.PacketBuffer {
	out := gstack.NewPacketBuffer(gstack.PacketBufferOptions{ReserveHeaderBytes: eg.hdrLen, Payload: payload})
	out.NetworkProtocolNumber = eg.typ
	out.Hash = eg.hash
	h := out.LinkHeader().Push(eg.hdrLen)
	header.Ethernet(h).Encode(&header.EthernetFields{SrcAddr: eg.nh.Value.ep.LinkAddress(), Type: eg.typ})
	off := header.EthernetMinimumSize
	for _, e := range eg.labels[:eg.nLabels] {
		e.Encode(h[off:])
		off += mpls.EntryLen
	}
	return out
}
