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

// deliverSplit segments a received TCP packet larger than the endpoint's
// MTU (an IP packet, link header consumed, checksums already checked) into
// packets of at most MTU() bytes and delivers them. MTU() leaves room for
// the deepest label stack, so the pieces fit any route they are forwarded
// on, labelled or not: a veth peer's GSO frame does not tell its segment
// size (no virtio-net header), and cutting at the link MTU made packets
// that a labelled route refuses. It reports false, delivering
// nothing, for a packet it does not split (not TCP, a fragment, a header it
// cannot parse): the caller delivers that one whole. A TCP packet that
// cannot be segmented (SYN or RST spanning segments) is dropped as
// gso_unsupported.
func (e *Endpoint) deliverSplit(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) bool {
	b, ok := pkt.Data().PullUp(pkt.Data().Size())
	if !ok {
		return false
	}
	p := gso.Packet{Buf: b}
	switch proto {
	case header.IPv4ProtocolNumber:
		ip := header.IPv4(b)
		if !ip.IsValid(len(b)) || ip.TransportProtocol() != header.TCPProtocolNumber || ip.More() || ip.FragmentOffset() != 0 {
			return false
		}
		p.Proto, p.L4Offset = gso.ProtoIPv4, int(ip.HeaderLength())
	case header.IPv6ProtocolNumber:
		if len(b) < header.IPv6MinimumSize || header.IPv6(b).NextHeader() != uint8(header.TCPProtocolNumber) {
			return false
		}
		p.Proto, p.L4Offset = gso.ProtoIPv6, header.IPv6MinimumSize
	default:
		return false
	}
	if len(b) < p.L4Offset+header.TCPMinimumSize {
		return false
	}
	p.MSS = int(e.MTU()) - p.L4Offset - int(header.TCP(b[p.L4Offset:]).DataOffset())
	if p.MSS <= 0 {
		return false
	}
	n, err := gso.SegmentedLen(p)
	if err != nil {
		e.drop(DropGSOUnsupported, -1, err)
		return true
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
		return true
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
	return true
}
