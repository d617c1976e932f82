package forward

import (
	"encoding/binary"

	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Labelled GRO packets. The endpoint merges the consecutive labelled TCP
// segments of one flow in a receive batch, under the same link header and
// label stack, into one packet (mplsendpoint.GSOForwarder). The switch
// decides it once, on a copy of its headers with its first segment's
// length: the same decision each segment would get (they share every byte
// the decision reads but the length, and none is longer than the first,
// so the egress MTU is checked against the largest). It takes the packet
// only when the verdict pops it to IP towards a next hop on a link that
// takes GSO frames: it leaves whole, as the switch's own coalescing
// (gro.go) would have sent the segments, and every counter counts each
// segment as that path counts it. Anything else (a swap or a pop that
// leaves labelled, a link without GSO frames, a drop, an ICMP error, an
// MPLS echo, a missing next hop) is declined untouched: the endpoint cuts
// the packet and forwards each segment, which then meets the rules and
// counters a segment meets.

var _ mplsendpoint.GSOForwarder = (*Switch)(nil)

// lgroHdrMax bounds the headers of a merged labelled packet the decision
// reads: Ethernet, a deep label stack, the IP and TCP headers.
const lgroHdrMax = header.EthernetMinimumSize + 16*mpls.EntryLen + header.IPv6MinimumSize + 60

// ForwardGSO implements mplsendpoint.GSOForwarder (see above).
func (ls *Switch) ForwardGSO(_ *mplsendpoint.Endpoint, req *mplsendpoint.ForwardRequest) bool {
	st := ls.st.Load()
	if st == nil || req.Entry == nil || req.GSOMSS <= 0 {
		return false
	}
	const eth = header.EthernetMinimumSize
	data := req.Packet.Data()
	hl := len(req.Frame)
	b, ok := data.PullUp(min(data.Size(), hl+header.IPv6MinimumSize+60))
	if !ok || len(b) < hl+header.IPv4MinimumSize {
		return false
	}
	v6 := b[hl]>>4 == 6
	l3 := header.IPv4MinimumSize
	if v6 {
		l3 = header.IPv6MinimumSize
	}
	if len(b) < hl+l3+header.TCPMinimumSize {
		return false
	}
	tcpHL := int(header.TCP(b[hl+l3:]).DataOffset())
	all := hl + l3 + tcpHL
	payload := data.Size() - all
	if len(b) < all || all > lgroHdrMax || payload <= req.GSOMSS {
		return false
	}
	first := all + req.GSOMSS
	var hdr [lgroHdrMax]byte
	n := copy(hdr[:], b[:all])
	setIPLength(v6, hdr[hl:n], first-hl)
	t := ls.tables(st, req.ILM, len(req.Labels))
	var v verdict.Verdict
	w := verdict.Walked{Label: req.Labels[req.Top].Label, Labels: req.Labels, StackEnd: hl - eth, Top: req.Top, Entry: req.Entry}
	t.DecideWalked(hdr[eth:n], first-eth, &w, &v)
	if v.Action != verdict.Forward || v.FragmentMTU != 0 || v.NOut != 0 || v.PayloadOff != hl-eth {
		return false
	}
	// Without a next hop each segment is a drop: declined, so that each
	// is counted. Found here, egressFor finds it too.
	if nh := ls.nextHop(st, v.Device, v.Via); nh == nil || !nh.Value.tx.gro {
		return false
	}
	eg, ok := ls.egressFor(st, req.Packet, &v, req.Batched)
	if !ok {
		return true // counted once: the next hop went in between
	}
	if v.TTLOff >= 0 {
		v.RewriteTTL(b[eth+v.TTLOff:])
	}
	segs := (payload + req.GSOMSS - 1) / req.GSOMSS
	ls.countN(v.Did, uint64(segs))
	// Each segment counts under its label with its own length from the
	// label stack on: the stack and headers once per segment.
	perSeg := hl - eth + l3 + tcpHL
	ls.ctr.labels.Add(v.Label, uint64(segs), uint64((segs-1)*perSeg+data.Size()-eth))
	ls.ctr.coalesced.Add(uint64(segs - 1))
	ip := b[hl:all]
	var src, dst tcpip.Address
	typ := gstack.GSOTCPv4
	if v6 {
		typ = gstack.GSOTCPv6
		src, dst = header.IPv6(ip).SourceAddress(), header.IPv6(ip).DestinationAddress()
	} else {
		src, dst = header.IPv4(ip).SourceAddress(), header.IPv4(ip).DestinationAddress()
	}
	// The partial checksum for the peer's kernel to finish: every segment's
	// verified when the endpoint merged it.
	binary.BigEndian.PutUint16(ip[l3+header.TCPChecksumOffset:],
		header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, dst, uint16(data.Size()-hl-l3)))
	buf := data.ToBuffer()
	buf.TrimFront(int64(hl))
	out := ls.linkFrame(&eg, buf)
	out.GSOOptions = gstack.GSO{Type: typ, NeedsCsum: true, CsumOffset: header.TCPChecksumOffset,
		MSS: uint16(req.GSOMSS), L3HdrLen: uint16(l3), MaxSize: groMaxSize}
	ls.transmitSegs(eg.nh, out, v.Label, eg.batched, false, segs)
	return true
}
