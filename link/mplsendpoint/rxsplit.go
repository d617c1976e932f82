package mplsendpoint

import (
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/gso"
)

// splitScratch is the reusable output of one receive-side split: the
// segments are written back to back into buf.
type splitScratch struct {
	buf  []byte
	segs [][]byte
}

// deliverLarge hands on a received TCP packet larger than the endpoint's
// MTU (an IP packet, link header consumed, checksums checked or left
// partial by the kernel) on a forwarding node. The IP forwarder is offered
// it whole first (IPForwardRequest.GSOMSS): a transit packet is routed
// once and cut only at an egress that cannot send it whole. One the
// forwarder does not take (for the node, or one it would drop or answer
// with an ICMP error) is split into packets of at most splitMTU() bytes,
// each delivered on its own (deliverSplit). It reports false, delivering
// nothing, for a packet it does not split (not TCP, a fragment, a header
// it cannot parse): the caller delivers that one whole.
func (e *Endpoint) deliverLarge(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) bool {
	p, ok := e.splitPacket(proto, pkt)
	if !ok {
		return false
	}
	if e.ipFwd != nil && pkt.PktType == tcpip.PacketHost {
		rx := e.getRX() // pooled: the request escapes through the interface call
		rx.ipReq = IPForwardRequest{Packet: pkt, Proto: proto, Batched: e.batched.Load(), GSOMSS: p.MSS}
		took := e.ipFwd.ForwardIP(e, &rx.ipReq)
		e.putRX(rx)
		if took {
			e.ctr.rxForwarded.Add(1)
			return true
		}
	}
	e.deliverSplit(proto, p, pkt)
	return true
}

// splitPacket reads pkt (an IP packet of proto, link header consumed) as
// a TCP packet that deliverSplit can cut into segments of at most
// splitMTU() bytes: not a fragment, no IPv6 extension headers. splitMTU()
// leaves room for the deepest label stack and fits every link of the
// node, so the pieces fit any route they are forwarded on, labelled or
// not: a veth peer's GSO frame does not tell its segment size (no
// virtio-net header), and a cut at this link's MTU alone makes packets
// that a labelled route or a smaller link refuses.
func (e *Endpoint) splitPacket(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) (gso.Packet, bool) {
	b, ok := pkt.Data().PullUp(pkt.Data().Size())
	if !ok {
		return gso.Packet{}, false
	}
	p := gso.Packet{Buf: b}
	switch proto {
	case header.IPv4ProtocolNumber:
		ip := header.IPv4(b)
		if !ip.IsValid(len(b)) || ip.TransportProtocol() != header.TCPProtocolNumber || ip.More() || ip.FragmentOffset() != 0 {
			return p, false
		}
		p.Proto, p.L4Offset = gso.ProtoIPv4, int(ip.HeaderLength())
	case header.IPv6ProtocolNumber:
		if len(b) < header.IPv6MinimumSize || header.IPv6(b).NextHeader() != uint8(header.TCPProtocolNumber) {
			return p, false
		}
		p.Proto, p.L4Offset = gso.ProtoIPv6, header.IPv6MinimumSize
	default:
		return p, false
	}
	if len(b) < p.L4Offset+header.TCPMinimumSize {
		return p, false
	}
	p.MSS = int(e.splitMTU()) - p.L4Offset - int(header.TCP(b[p.L4Offset:]).DataOffset())
	return p, p.MSS > 0
}

// deliverSplit segments p, the packet in pkt as splitPacket read it, into
// packets of at most splitMTU() bytes with their checksums computed (package
// gso ignores a partial one) and delivers each (up). A TCP packet that
// cannot be segmented (SYN or RST spanning segments) is dropped as
// gso_unsupported.
func (e *Endpoint) deliverSplit(proto tcpip.NetworkProtocolNumber, p gso.Packet, pkt *stack.PacketBuffer) {
	n, err := gso.SegmentedLen(p)
	if err != nil {
		e.drop(DropGSOUnsupported, -1, err)
		return
	}
	sc, _ := e.splitPool.Get().(*splitScratch)
	if sc == nil {
		sc = new(splitScratch)
	}
	defer e.splitPool.Put(sc)
	if cap(sc.buf) < n {
		sc.buf = make([]byte, n)
	}
	sc.segs, err = gso.Segment(p, sc.buf[:n], sc.segs[:0])
	if err != nil {
		e.drop(DropGSOUnsupported, -1, err)
		return
	}
	e.ctr.rxSplit.Add(1)
	for _, seg := range sc.segs {
		np := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(seg)})
		// gso.Segment wrote full checksums.
		np.RXChecksumValidated = true
		np.PktType = pkt.PktType
		e.up(proto, np)
		np.DecRef()
	}
}
