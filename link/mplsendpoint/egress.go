package mplsendpoint

import (
	"net/netip"

	"github.com/mplsnode/mplsnode/gso"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// txScratch holds the per-call buffers of the segmentation path; pooled so
// that steady state allocates nothing per segment.
type txScratch struct {
	src  []byte
	dst  []byte
	segs [][]byte
	out  stack.PacketBufferList
}

func (e *Endpoint) getTX() *txScratch {
	if s, ok := e.scratch.Get().(*txScratch); ok {
		return s
	}
	return &txScratch{}
}

func (e *Endpoint) putTX(s *txScratch) {
	s.segs = s.segs[:0]
	e.scratch.Put(s)
}

// AddHeader implements stack.LinkEndpoint. It looks the destination up in
// the FTN and pushes, in one LinkHeader().Push, the Ethernet header and, for
// a labelled route, the label stack (outermost first, S on the last) with
// ethertype 0x8847. The inner protocol stays in pkt.NetworkProtocolNumber
// and the network and transport headers keep their offsets, which
// WritePackets uses to segment and checksum.
func (e *Endpoint) AddHeader(pkt *stack.PacketBuffer) {
	var ent *mpls.FTNEntry
	var ttl, tos uint8
	if dst, ok := netDst(pkt); ok && !isNDP(pkt) {
		if ftn := e.tables.FTN(); ftn != nil {
			if en, found := ftn.Lookup(dst); found && len(en.Labels) > 0 {
				ent = en
				ttl, tos = ipTTLTOS(pkt)
			}
		}
	}
	n := 0
	if ent != nil {
		n = len(ent.Labels)
	}
	typ := pkt.NetworkProtocolNumber
	if ent != nil {
		typ = EthertypeMPLSUnicast
		if n > e.maxLabels {
			// The stack does not fit the header room. AddHeader cannot
			// fail, so it marks the packet with an MPLS ethertype and no
			// label; WritePackets drops such packets as
			// label_stack_too_deep.
			n = 0
			ent = nil
		}
	}
	b := pkt.LinkHeader().Push(header.EthernetMinimumSize + n*mpls.EntryLen)
	eth := header.Ethernet(b)
	eth.Encode(&header.EthernetFields{
		SrcAddr: pkt.EgressRoute.LocalLinkAddress,
		DstAddr: pkt.EgressRoute.RemoteLinkAddress,
		Type:    typ,
	})
	if ent == nil {
		return
	}
	e.ctr.ftnHits.Add(1)
	lttl := ent.LabelTTL(e.ttlModel, ttl, e.pipeTTL)
	var tc uint8
	if e.copyTC {
		tc = mpls.TCFromDSCP(tos)
	}
	off := header.EthernetMinimumSize
	for i, l := range ent.Labels {
		mpls.Entry{Label: l, TC: tc, S: i == n-1, TTL: lttl}.Encode(b[off:])
		off += mpls.EntryLen
	}
}

// netDst returns the destination address of pkt's IP header.
func netDst(pkt *stack.PacketBuffer) (netip.Addr, bool) {
	nh := pkt.NetworkHeader().Slice()
	switch pkt.NetworkProtocolNumber {
	case header.IPv4ProtocolNumber:
		if len(nh) < header.IPv4MinimumSize {
			return netip.Addr{}, false
		}
		return netip.AddrFrom4(header.IPv4(nh).DestinationAddress().As4()), true
	case header.IPv6ProtocolNumber:
		if len(nh) < header.IPv6MinimumSize {
			return netip.Addr{}, false
		}
		return netip.AddrFrom16(header.IPv6(nh).DestinationAddress().As16()), true
	}
	return netip.Addr{}, false
}

// isNDP reports whether pkt is an IPv6 neighbour discovery message (ICMPv6
// types 133 to 137, RFC 4861), which is link-local by nature and never
// labelled, even towards a labelled prefix.
func isNDP(pkt *stack.PacketBuffer) bool {
	if pkt.NetworkProtocolNumber != header.IPv6ProtocolNumber || pkt.TransportProtocolNumber != header.ICMPv6ProtocolNumber {
		return false
	}
	th := pkt.TransportHeader().Slice()
	if len(th) == 0 {
		return false
	}
	t := header.ICMPv6Type(th[0])
	return t >= header.ICMPv6RouterSolicit && t <= header.ICMPv6RedirectMsg
}

// ipTTLTOS returns the TTL (hop limit) and TOS (traffic class) of pkt's IP
// header; the caller checked its length in netDst.
func ipTTLTOS(pkt *stack.PacketBuffer) (ttl, tos uint8) {
	nh := pkt.NetworkHeader().Slice()
	if pkt.NetworkProtocolNumber == header.IPv4ProtocolNumber {
		h := header.IPv4(nh)
		tos, _ = h.TOS()
		return h.TTL(), tos
	}
	h := header.IPv6(nh)
	tos, _ = h.TOS()
	return h.HopLimit(), tos
}

// WritePackets implements stack.LinkEndpoint. Packets already carry their
// link header (AddHeader). TCP GSO packets (GSOEndpoint mode) are segmented
// after the label push; other packets go as they are, unless the frame
// exceeds the link MTU (mtu_exceeded, with an ICMP error to the sender).
// All resulting frames go to the lower link in one WritePackets call.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	s := e.getTX()
	defer e.putTX(s)
	linkMTU := int(e.lower.MTU())
	written := 0
	for _, pkt := range pkts.AsSlice() {
		e.ctr.txPackets.Add(1)
		if lh := pkt.LinkHeader().Slice(); len(lh) == header.EthernetMinimumSize && header.Ethernet(lh).Type() == EthertypeMPLSUnicast {
			e.drop(DropLabelStackTooDeep, -1, nil)
			continue
		}
		g := pkt.GSOOptions
		if g.NeedsCsum && (g.Type == stack.GSOTCPv4 || g.Type == stack.GSOTCPv6) {
			if err := e.writeGSO(s, pkt, linkMTU); err != nil {
				continue
			}
			written++
			continue
		}
		if l2 := pkt.Size() - header.EthernetMinimumSize; l2 > linkMTU {
			e.mtuExceeded(pkt, linkMTU)
			continue
		}
		s.out.PushBack(pkt.IncRef())
		written++
	}
	if s.out.Len() == 0 {
		return written, nil
	}
	nFrames := s.out.Len()
	n, err := e.lower.WritePackets(s.out)
	s.out.Reset()
	e.ctr.txFrames.Add(uint64(n))
	if err != nil {
		e.dropN(DropLowerWriteError, uint64(nFrames-n), -1, errString(err))
		if n == 0 {
			return 0, err
		}
	}
	return written, nil
}

// writeGSO handles one host-GSO TCP packet: a packet that fits in one
// segment only gets its partial checksum finished in place; a larger one is
// copied out, segmented with package gso, and its segments queued in s.out.
func (e *Endpoint) writeGSO(s *txScratch, pkt *stack.PacketBuffer, linkMTU int) error {
	prefixLen := len(pkt.LinkHeader().Slice())
	l3Len := len(pkt.NetworkHeader().Slice())
	th := pkt.TransportHeader().Slice()
	var proto gso.Proto
	switch pkt.NetworkProtocolNumber {
	case header.IPv4ProtocolNumber:
		proto = gso.ProtoIPv4
	case header.IPv6ProtocolNumber:
		proto = gso.ProtoIPv6
	default:
		e.drop(DropGSOUnsupported, -1, nil)
		return errGSO
	}
	if pkt.TransportProtocolNumber != header.TCPProtocolNumber || len(th) < header.TCPMinimumSize {
		e.drop(DropGSOUnsupported, -1, nil)
		return errGSO
	}
	// The MSS that fits the link: TCP chose g.MSS against our reported MTU,
	// but the FTN may have changed since; we segment, so we can always fit.
	mss := int(pkt.GSOOptions.MSS)
	if fit := linkMTU - (prefixLen - header.EthernetMinimumSize) - l3Len - len(th); fit < mss {
		mss = fit
	}
	if mss <= 0 {
		e.mtuExceeded(pkt, linkMTU)
		return errGSO
	}
	if pkt.Data().Size() <= mss {
		// One segment: finish the partial checksum (the field holds the
		// pseudo-header sum) in place.
		tcp := header.TCP(th)
		sum := checksum.Checksum(th, pkt.Data().Checksum())
		tcp.SetChecksum(^sum)
		s.out.PushBack(pkt.IncRef())
		return nil
	}
	size := pkt.Size()
	if cap(s.src) < size {
		s.src = make([]byte, size, size+size/4)
	}
	src := s.src[:0]
	for _, v := range pkt.AsSlices() {
		src = append(src, v...)
	}
	gp := gso.Packet{
		Buf:       src,
		PrefixLen: prefixLen,
		Proto:     proto,
		L4Offset:  prefixLen + l3Len,
		MSS:       mss,
	}
	need, err := gso.SegmentedLen(gp)
	if err != nil {
		e.drop(DropGSOUnsupported, -1, err)
		return err
	}
	if cap(s.dst) < need {
		s.dst = make([]byte, need, need+need/4)
	}
	segs, err := gso.Segment(gp, s.dst[:need], s.segs[:0])
	s.segs = segs
	if err != nil {
		e.drop(DropGSOUnsupported, -1, err)
		return err
	}
	e.ctr.gsoPackets.Add(1)
	typ := header.Ethernet(src).Type()
	for _, seg := range segs {
		sp := stack.NewPacketBuffer(stack.PacketBufferOptions{
			Payload: buffer.MakeWithData(seg),
		})
		sp.NetworkProtocolNumber = typ
		sp.EgressRoute = pkt.EgressRoute
		sp.PktType = tcpip.PacketOutgoing
		s.out.PushBack(sp)
	}
	return nil
}

// errGSO marks a GSO packet already counted as dropped.
var errGSO = errorString("mplsendpoint: GSO packet dropped")

type errorString string

func (s errorString) Error() string { return string(s) }

// errString adapts a tcpip.Error to error for logging.
func errString(err tcpip.Error) error { return errorString(err.String()) }
