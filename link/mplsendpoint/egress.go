package mplsendpoint

import (
	"net/netip"

	"github.com/mplsnode/mplsnode/gso"
	"github.com/mplsnode/mplsnode/internal/virtionet"
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
	hdr []byte // a copy of the GSO packet's headers (gso.Cutter)
	out stack.PacketBufferList
	// batch is the open transmit batch on a TXRing lower link.
	batch slotBatch
}

func (e *Endpoint) getTX() *txScratch {
	if s, ok := e.scratch.Get().(*txScratch); ok {
		return s
	}
	return &txScratch{}
}

func (e *Endpoint) putTX(s *txScratch) {
	e.scratch.Put(s)
}

// AddHeader implements stack.LinkEndpoint: it pushes the Ethernet header
// of a packet the stack routed to this link itself (a connected subnet),
// which is never labelled: labelled routes leave through the FIBEndpoint,
// which pushes their labels (pushHeader).
func (e *Endpoint) AddHeader(pkt *stack.PacketBuffer) {
	e.pushHeader(pkt, nil, 0)
}

// pushHeader pushes, in one LinkHeader().Push, the Ethernet header (from
// pkt.EgressRoute's link addresses) and labels, if any, with the TTL
// fixedTTL when not 0, else per the TTL model.
func (e *Endpoint) pushHeader(pkt *stack.PacketBuffer, labels []mpls.Label, fixedTTL uint8) {
	n := len(labels)
	typ := pkt.NetworkProtocolNumber
	if n > 0 {
		typ = EthertypeMPLSUnicast
		if n > e.maxLabels {
			// The stack does not fit the header room. AddHeader cannot
			// fail, so it marks the packet with an MPLS ethertype and no
			// label; WritePackets drops such packets as
			// label_stack_too_deep.
			n = 0
			labels = nil
		}
	}
	b := pkt.LinkHeader().Push(header.EthernetMinimumSize + n*mpls.EntryLen)
	eth := header.Ethernet(b)
	eth.Encode(&header.EthernetFields{
		SrcAddr: pkt.EgressRoute.LocalLinkAddress,
		DstAddr: pkt.EgressRoute.RemoteLinkAddress,
		Type:    typ,
	})
	if n == 0 {
		return
	}
	e.ctr.fibPushes.Add(1)
	ttl, tos := ipTTLTOS(pkt)
	lttl := fixedTTL
	if lttl == 0 {
		lttl = mpls.PushTTL(e.ttlModel, ttl, e.pipeTTL)
	}
	var tc uint8
	if e.copyTC {
		tc = mpls.TCFromDSCP(tos)
	}
	// Every label was checked when its table was built (NewFIB:
	// no implicit null, 20 bits), so EncodeLabels cannot fail here.
	_, _ = mpls.EncodeLabels(b[header.EthernetMinimumSize:], labels, tc, lttl)
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

// ipTTLTOS returns the TTL (hop limit) and TOS (traffic class) of pkt's IP
// header (0, 0 if it has none).
func ipTTLTOS(pkt *stack.PacketBuffer) (ttl, tos uint8) {
	nh := pkt.NetworkHeader().Slice()
	if pkt.NetworkProtocolNumber == header.IPv4ProtocolNumber {
		if len(nh) < header.IPv4MinimumSize {
			return 0, 0
		}
		h := header.IPv4(nh)
		tos, _ = h.TOS()
		return h.TTL(), tos
	}
	if pkt.NetworkProtocolNumber != header.IPv6ProtocolNumber || len(nh) < header.IPv6MinimumSize {
		return 0, 0
	}
	h := header.IPv6(nh)
	tos, _ = h.TOS()
	return h.HopLimit(), tos
}

// WritePackets implements stack.LinkEndpoint. Packets already carry their
// link header (AddHeader). TCP GSO packets (GSOEndpoint mode) are segmented
// after the label push; other packets go as they are, unless the frame
// exceeds the link MTU (mtu_exceeded, with an ICMP error to the sender).
// All resulting frames go to the lower link in one WritePackets call, or,
// on a lower link with a transmit ring (TXRing), straight into its slots.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	s := e.getTX()
	defer e.putTX(s)
	if e.ring != nil {
		if n, err, ok := e.writeSlots(e.ring, pkts.AsSlice(), s); ok {
			return n, err
		}
	}
	linkMTU := int(e.lower.MTU())
	written := 0
	for _, pkt := range pkts.AsSlice() {
		e.ctr.txPackets.Add(1)
		if lh := pkt.LinkHeader().Slice(); len(lh) == header.EthernetMinimumSize && header.Ethernet(lh).Type() == EthertypeMPLSUnicast {
			e.drop(DropLabelStackTooDeep, -1, nil)
			continue
		}
		if hostGSO(pkt) {
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
			return 0, upperError(err)
		}
	}
	return written, nil
}

// hostGSO reports whether pkt is a host-GSO TCP packet (gVisor's TCP with
// GSO on: a partial checksum, IPv4 or IPv6): one that leaves whole
// (leavesWhole) or is ours to segment after the push, or, of one segment,
// to finish.
func hostGSO(pkt *stack.PacketBuffer) bool {
	g := pkt.GSOOptions
	return g.NeedsCsum && (g.Type == stack.GSOTCPv4 || g.Type == stack.GSOTCPv6)
}

// leavesWhole reports whether a lower link that sends GSO frames takes pkt,
// cut at mss, as one frame, by the rule the links write their virtio-net
// header by (virtionet.IsGSOFrame: an unlabelled Ethernet frame, longer than
// one segment, headers the kernel accepts); it then leaves pkt's MSS at
// mss, else as it was.
func leavesWhole(pkt *stack.PacketBuffer, mss int) bool {
	old := pkt.GSOOptions.MSS
	pkt.GSOOptions.MSS = uint16(mss)
	if virtionet.IsGSOFrame(pkt) {
		return true
	}
	pkt.GSOOptions.MSS = old
	return false
}

// upperError is the error WritePackets returns to gVisor for a failed
// lower write, already counted as lower_write_error. gVisor's IPv4 and
// IPv6 forwarding (handleForwardingError at our pin) panics on any link
// error but ErrMessageTooLong, ErrNoBufferSpace and ErrClosedForSend; a
// lower link passes on what the kernel said (link/afpacket: ENETDOWN on a
// down interface becomes ErrInvalidEndpointState), so anything else is
// reported as ErrNoBufferSpace: this frame could not go now, as with a full
// device queue. TCP ignores the error either way and retransmits.
func upperError(err tcpip.Error) tcpip.Error {
	switch err.(type) {
	case *tcpip.ErrMessageTooLong, *tcpip.ErrNoBufferSpace, *tcpip.ErrClosedForSend:
		return err
	}
	return &tcpip.ErrNoBufferSpace{}
}

// gsoShape checks that pkt is a TCP GSO packet over IPv4 or IPv6 and
// returns its protocol and the MSS that fits linkMTU: TCP chose its MSS
// against the MTU we reported, but the FIB may have changed since; we
// segment, so we can always fit. An MSS of 0 or less means not even the
// headers fit (the caller answers with mtuExceeded). A packet that is not
// TCP GSO is counted (gso_unsupported) and errGSO returned.
func (e *Endpoint) gsoShape(pkt *stack.PacketBuffer, linkMTU int) (gso.Proto, int, error) {
	var proto gso.Proto
	switch pkt.NetworkProtocolNumber {
	case header.IPv4ProtocolNumber:
		proto = gso.ProtoIPv4
	case header.IPv6ProtocolNumber:
		proto = gso.ProtoIPv6
	default:
		e.drop(DropGSOUnsupported, -1, nil)
		return 0, 0, errGSO
	}
	th := pkt.TransportHeader().Slice()
	if pkt.TransportProtocolNumber != header.TCPProtocolNumber || len(th) < header.TCPMinimumSize {
		e.drop(DropGSOUnsupported, -1, nil)
		return 0, 0, errGSO
	}
	prefixLen, l3Len := len(pkt.LinkHeader().Slice()), len(pkt.NetworkHeader().Slice())
	mss := int(pkt.GSOOptions.MSS)
	if fit := linkMTU - (prefixLen - header.EthernetMinimumSize) - l3Len - len(th); fit < mss {
		mss = fit
	}
	return proto, mss, nil
}

// cutterFor copies pkt's headers into s.hdr and returns the gso.Cutter
// that segments pkt at mss, having validated the whole packet once
// (headers, and SYN/RST/URG that must not be split); an invalid packet is
// counted (gso_unsupported). The returned reader stands at the payload.
func (e *Endpoint) cutterFor(s *txScratch, pkt *stack.PacketBuffer, proto gso.Proto, mss int) (gso.Cutter, viewReader, error) {
	lh, nh, th := pkt.LinkHeader().Slice(), pkt.NetworkHeader().Slice(), pkt.TransportHeader().Slice()
	hdr := append(append(append(s.hdr[:0], lh...), nh...), th...)
	s.hdr = hdr
	c, err := gso.NewCutter(hdr, len(lh), proto, len(lh)+len(nh), pkt.Data().Size(), mss)
	if err != nil {
		e.drop(DropGSOUnsupported, -1, err)
		return gso.Cutter{}, viewReader{}, err
	}
	// The payload follows the headers in the packet's views.
	vl, off := pkt.AsViewList()
	r := viewReader{v: vl.Front(), off: off}
	r.skip(len(hdr))
	return c, r, nil
}

// writeGSO handles one host-GSO TCP packet: a packet that fits in one
// segment only gets its partial checksum finished in place; a larger one
// without labels goes whole to a lower link that takes GSO frames
// (LowerGSOFrames); any other is segmented (gso.Cutter) and its segments
// queued in s.out.
//
// Copies: each segment's headers and payload chunk are copied once, from
// the packet's views, into pooled buffer chunks that become the segments'
// PacketBuffers (buffer.MakeWithView on a shared chunk): no gathering, no
// per-segment allocation. A chunk holds at most buffer.MaxChunkSize (64
// KiB) bytes, a little less than the segments of a 64 KiB packet with
// their headers, so the segments fill as many chunks as they need, each
// holding whole segments.
func (e *Endpoint) writeGSO(s *txScratch, pkt *stack.PacketBuffer, linkMTU int) error {
	th := pkt.TransportHeader().Slice()
	proto, mss, err := e.gsoShape(pkt, linkMTU)
	if err != nil {
		return err
	}
	if mss <= 0 {
		e.mtuExceeded(pkt, linkMTU)
		return errGSO
	}
	if e.LowerGSOFrames() && leavesWhole(pkt, mss) {
		// The kernel segments it at the MSS that fits the link.
		s.out.PushBack(pkt.IncRef())
		e.ctr.gsoFrames.Add(1)
		return nil
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
	c, r, err := e.cutterFor(s, pkt, proto, mss)
	if err != nil {
		return err
	}
	hdr := c.Header()
	typ := header.Ethernet(hdr).Type()
	nSegs := c.Segments()
	for first := 0; first < nSegs; {
		// The segments from first on that fit one chunk (at least one).
		last, size := first+1, c.SegmentLen(first)
		for last < nSegs && size+c.SegmentLen(last) <= buffer.MaxChunkSize {
			size += c.SegmentLen(last)
			last++
		}
		v := buffer.NewViewSize(size)
		b := v.AsSlice()
		off := 0
		for i := first; i < last; i++ {
			n := c.SegmentLen(i)
			seg := b[off : off+n]
			copy(seg, hdr)
			r.read(seg[len(hdr):])
			c.Finish(i, seg)
			sv := v.Clone()
			sv.TrimFront(off)
			sv.CapLength(n)
			off += n
			sp := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithView(sv)})
			sp.NetworkProtocolNumber = typ
			sp.EgressRoute = pkt.EgressRoute
			sp.PktType = tcpip.PacketOutgoing
			s.out.PushBack(sp)
		}
		v.Release()
		first = last
	}
	e.ctr.gsoPackets.Add(1)
	return nil
}

// errGSO marks a GSO packet already counted as dropped.
var errGSO = errorString("mplsendpoint: GSO packet dropped")

type errorString string

func (s errorString) Error() string { return string(s) }

// errString adapts a tcpip.Error to error for logging.
func errString(err tcpip.Error) error { return errorString(err.String()) }
