package mplsendpoint

import (
	"encoding/binary"
	"errors"

	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// rxScratch holds the per-frame state of the receive path, pooled.
type rxScratch struct {
	labels []mpls.Entry
	req    ForwardRequest
	ipReq  IPForwardRequest
}

func (e *Endpoint) getRX() *rxScratch {
	if s, ok := e.rxPool.Get().(*rxScratch); ok {
		return s
	}
	return &rxScratch{labels: make([]mpls.Entry, 0, e.maxLabels)}
}

func (e *Endpoint) putRX(s *rxScratch) {
	s.req = ForwardRequest{}
	s.ipReq = IPForwardRequest{}
	e.rxPool.Put(s)
}

// EndBatch is called by a lower link after each receive batch (see
// docs/CONTRACTS.md, "Lower links"); the endpoint passes it to a
// BatchForwarder, which writes the frames it held.
func (e *Endpoint) EndBatch() {
	if !e.batched.Load() {
		e.batched.Store(true)
	}
	e.groFlush()
	e.lgroFlush()
	if bf, ok := e.fwd.(BatchForwarder); ok {
		bf.EndBatch(e)
	} else if bf, ok := e.ipFwd.(BatchForwarder); ok {
		bf.EndBatch(e)
	}
}

// DeliverNetworkPacket implements stack.NetworkDispatcher for the lower
// link, which delivers whole Ethernet frames in pkt.Data(). ARP, IPv4 and
// IPv6 go up unchanged; MPLS frames are popped or forwarded per the ILM;
// anything else is dropped with a counter.
func (e *Endpoint) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	e.ctr.rxFrames.Add(1)
	hdr, ok := pkt.Data().PullUp(header.EthernetMinimumSize)
	if !ok {
		e.drop(DropTruncatedFrame, -1, nil)
		return
	}
	eth := header.Ethernet(hdr)
	dst := eth.DestinationAddress()
	switch {
	case dst == header.EthernetBroadcastAddress:
		pkt.PktType = tcpip.PacketBroadcast
	case header.IsMulticastEthernetAddress(dst):
		pkt.PktType = tcpip.PacketMulticast
	case dst == e.LinkAddress():
		pkt.PktType = tcpip.PacketHost
	default:
		e.drop(DropNotForUs, -1, nil)
		return
	}
	switch typ := eth.Type(); typ {
	case header.ARPProtocolNumber, header.IPv4ProtocolNumber, header.IPv6ProtocolNumber:
		if _, ok := pkt.LinkHeader().Consume(header.EthernetMinimumSize); !ok {
			e.drop(DropTruncatedFrame, -1, nil)
			return
		}
		e.deliver(typ, pkt)
	case EthertypeMPLSUnicast:
		if e.rejectMPLS {
			e.drop(DropMPLSInputDisabled, -1, nil)
			return
		}
		if pkt.PktType != tcpip.PacketHost {
			// Unicast MPLS to a broadcast or multicast address: an LSR
			// on a shared segment must not forward it (every LSR there
			// would), so it is dropped, as Linux's mpls_forward does.
			e.drop(DropNotForUs, -1, nil)
			return
		}
		e.deliverMPLS(pkt)
	default:
		e.drop(DropUnsupportedEthertype, -1, nil)
	}
}

// deliver hands an IP/ARP packet (link header consumed) to the stack.
func (e *Endpoint) deliver(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	// The endpoint owns receive checksums (it advertises
	// CapabilityRXChecksumOffload, so the stack does not check them
	// again): frames the lower link flagged (the kernel validated them or
	// left them partial, veth's CHECKSUM_PARTIAL) are taken as they are,
	// their partial checksums finished when the packet may be forwarded
	// on; every other frame is verified here.
	if pkt.PktType == tcpip.PacketHost && e.echoIP(proto, pkt) {
		return // an MPLS echo request whose last label was popped upstream
	}
	if proto == header.IPv4ProtocolNumber || proto == header.IPv6ProtocolNumber {
		// Transit first: a router checks the IP header, not the transport
		// checksum (RFC 1812 §5.2.2, §5.3.1). An unflagged packet with a
		// well-formed header that the IP forwarder takes leaves with its
		// transport checksum as it came (the forwarder verifies it only
		// where it would rewrite it: GRO).
		if !pkt.RXChecksumValidated && e.ipFwd != nil && pkt.PktType == tcpip.PacketHost &&
			pkt.Data().Size() <= int(e.MTU()) && ipHeaderOK(proto, pkt) && e.offerIP(proto, pkt) {
			return
		}
		switch fragmentKind(proto, pkt) {
		case deepFragment:
			// gVisor checks no transport checksum after reassembly, and
			// this one would need the headers before the fragment header
			// to agree in every fragment.
			e.drop(DropUnverifiableChecksum, -1, nil)
			return
		case fragment:
			// A fragment's transport checksum is checked over its whole
			// datagram (fragsum.go), flagged or not: no lower link
			// validates one.
			if pkt.RXChecksumValidated && e.ipFwd != nil && pkt.PktType == tcpip.PacketHost && e.offerIP(proto, pkt) {
				return
			}
			e.deliverFragment(proto, pkt)
			return
		}
		ok := true
		switch {
		case !pkt.RXChecksumValidated:
			// Verified here: flagged so, for GRO (gro.go).
			v := checkRX(proto, pkt, false)
			if v == rxUnverifiable || v == rxFragment {
				e.drop(DropUnverifiableChecksum, -1, nil)
				return
			}
			ok = v == rxOK
			pkt.RXChecksumValidated = ok
		case e.forwarding:
			// A flagged TCP packet larger than MTU() (a veth peer's GSO
			// frame) goes on with its partial checksum: the forwarder
			// sends it whole for the peer to finish, or it is cut with
			// checksums computed per segment (package gso ignores the
			// partial one); finishing it first would be a wasted pass
			// over the data.
			if pkt.Data().Size() > int(e.MTU()) && e.deliverLarge(proto, pkt) {
				return
			}
			ok = finishRXChecksum(proto, pkt)
		}
		if !ok {
			e.drop(DropBadChecksum, -1, nil)
			return
		}
	}
	if e.forwarding && pkt.Data().Size() > int(e.MTU()) && e.deliverLarge(proto, pkt) {
		return
	}
	e.up(proto, pkt)
}

// up hands a checked IP packet (link header consumed) to the IP forwarder
// if it takes it (transit), else to the stack.
func (e *Endpoint) up(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	if e.ipFwd != nil && pkt.PktType == tcpip.PacketHost &&
		(proto == header.IPv4ProtocolNumber || proto == header.IPv6ProtocolNumber) {
		// The checksums were verified (or finished) by deliver.
		pkt.RXChecksumValidated = true
		if e.offerIP(proto, pkt) {
			return
		}
	}
	if e.forwarding && e.localAddr != nil && proto == header.IPv4ProtocolNumber {
		e.expireTTL1(pkt)
	}
	if e.groEligible(proto, pkt) {
		e.groEnqueue(proto, pkt)
		return
	}
	e.ctr.rxDelivered.Add(1)
	e.Endpoint.DeliverNetworkPacket(proto, pkt)
}

// offerIP offers the IP packet pkt (link header consumed) to the IP
// forwarder and reports whether it took it.
func (e *Endpoint) offerIP(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) bool {
	rx := e.getRX() // pooled: the request escapes through the interface call
	rx.ipReq = IPForwardRequest{Packet: pkt, Proto: proto, Batched: e.batched.Load()}
	took := e.ipFwd.ForwardIP(e, &rx.ipReq)
	e.putRX(rx)
	if took {
		e.ctr.rxForwarded.Add(1)
	}
	return took
}

// ipHeaderOK reports whether pkt (link header consumed) starts with a
// well-formed IP header of proto that its data holds, as the reference
// decision checks it (verdict.CheckIPHeader: version, IHL, IPv4 header
// checksum, length fields). Data beyond the IP length (Ethernet padding)
// is cut off.
func ipHeaderOK(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) bool {
	size := pkt.Data().Size()
	b, ok := pkt.Data().PullUp(min(size, header.IPv4MaximumHeaderSize))
	if !ok || (proto != header.IPv4ProtocolNumber && proto != header.IPv6ProtocolNumber) {
		return false
	}
	tot, r := verdict.CheckIPHeader(proto == header.IPv6ProtocolNumber, b, size)
	if r != verdict.NoReason {
		return false
	}
	if size > tot {
		pkt.Data().CapLength(tot)
	}
	return true
}

// expireTTL1 sets the TTL of an IPv4 packet (header checked) to 0 if it is
// 1 and the packet is for another unicast destination: see
// Options.LocalAddress.
func (e *Endpoint) expireTTL1(pkt *stack.PacketBuffer) {
	b, ok := pkt.Data().PullUp(header.IPv4MinimumSize)
	if !ok || header.IPv4(b).TTL() != 1 {
		return
	}
	ip := header.IPv4(b)
	dst := ip.DestinationAddress()
	if header.IsV4MulticastAddress(dst) || dst == header.IPv4Broadcast || e.localAddr(header.IPv4ProtocolNumber, dst) {
		return
	}
	h, ok := pkt.Data().PullUp(int(ip.HeaderLength()))
	if !ok {
		return
	}
	ip = header.IPv4(h)
	ip.SetTTL(0)
	ip.SetChecksum(0)
	ip.SetChecksum(^ip.CalculateChecksum())
}

// deliverMPLS handles an 0x8847 frame: the label stack is parsed and
// walked through the ILM by the reference (verdict.Walk): a frame whose
// labels are all popped here is delivered to the stack, one with a label
// that swaps or pops and forwards goes to the forwarder, a malformed or
// unknown stack is dropped by name.
func (e *Endpoint) deliverMPLS(pkt *stack.PacketBuffer) {
	if e.lgroContinue(pkt) {
		return // the next segment of the held packet (lgro.go)
	}
	rx := e.getRX()
	defer e.putRX(rx)
	// One entry more than the maximum tells "too deep" from "no S bit".
	b, _ := pullUpTo(pkt, header.EthernetMinimumSize+(e.maxLabels+1)*mpls.EntryLen)
	ilm := e.tables.ILM()
	w := verdict.Walk(b[header.EthernetMinimumSize:], ilm, e.maxLabels, rx.labels[:0])
	rx.labels = w.Labels[:0]
	e.ctr.ilmHits.Add(uint64(w.Hits))
	if w.Reason != verdict.NoReason {
		if w.Reason == verdict.NoILMEntry || w.Reason == verdict.TTLExpired {
			// An MPLS echo request goes to the responder, which answers
			// for the label (RFC 8029 §4.4).
			where := lspping.NoLabelEntry
			if w.Reason == verdict.TTLExpired {
				where = lspping.TTLExpired
			}
			if l, n, ok := stackEnd(b[header.EthernetMinimumSize:], e.maxLabels, rx.labels[:0]); ok &&
				e.echoMPLS(where, pkt, l, header.EthernetMinimumSize+n) {
				return
			}
		}
		e.drop(walkDrops[w.Reason], int64(w.Label), nil)
		return
	}
	labels, i, hdrLen := w.Labels, w.Top, header.EthernetMinimumSize+w.StackEnd
	if w.Entry == nil && e.echoMPLS(lspping.AtEgress, pkt, labels, hdrLen) {
		return // an MPLS echo request at its egress: every label popped here
	}
	if w.Entry != nil || e.fwd != nil && e.ipFwd != nil && e.expiresInTransit(labels, i, w.Binding, b[hdrLen:]) {
		// A label that swaps or pops and forwards; or every label popped
		// here but the label TTL runs out on a packet the node would
		// forward as IP: the forwarder answers it as it answers a transit
		// label (time exceeded with the label stack, RFC 4950).
		if e.fwd == nil {
			e.drop(DropNoForwarder, int64(w.Label), nil)
			return
		}
		rx.req = ForwardRequest{Packet: pkt, Frame: b[:hdrLen], Labels: labels, Top: i, Entry: w.Entry,
			ILM: ilm, Batched: e.batched.Load()}
		if w.Entry != nil && e.lgroTake(&rx.req, hdrLen, w.Hits) {
			return // held, merged into the held packet (lgro.go)
		}
		e.ctr.rxForwarded.Add(1)
		e.fwd.Forward(e, &rx.req)
		return
	}
	e.popLocal(pkt, hdrLen, w.Binding, w.Label, labels[0].TTL)
}

// walkDrops maps the stack walk's drop reasons to the endpoint's.
var walkDrops = [...]DropReason{
	verdict.TruncatedLabelStack: DropTruncatedLabelStack,
	verdict.NoBottomOfStack:     DropNoBottomOfStack,
	verdict.LabelStackTooDeep:   DropLabelStackTooDeep,
	verdict.ImplicitNull:        DropImplicitNull,
	verdict.ReservedLabel:       DropReservedLabel,
	verdict.NoILMEntry:          DropNoILMEntry,
	verdict.TTLExpired:          DropTTLExpired,
}

// expiresInTransit reports whether a frame whose labels are all popped
// here (labels[bottom] the last, binding its payload) carries a packet for
// another host with a label TTL that runs out at this hop: the outermost
// label's in the uniform model, the bottom one's in the pipe model.
func (e *Endpoint) expiresInTransit(labels []mpls.Entry, bottom int, binding mpls.Payload, ip []byte) bool {
	ttl := labels[0].TTL
	if e.ttlModel != mpls.TTLUniform {
		ttl = labels[bottom].TTL
	}
	if ttl > 1 || e.localAddr == nil {
		return false
	}
	p, err := mpls.InferPayload(binding, labels[bottom].Label, ip)
	switch {
	case err != nil:
		return false
	case p == mpls.PayloadIPv6:
		dst := header.IPv6(ip).DestinationAddress()
		return !header.IsV6MulticastAddress(dst) && !header.IsV6LinkLocalUnicastAddress(dst) && !e.localAddr(header.IPv6ProtocolNumber, dst)
	}
	dst := header.IPv4(ip).DestinationAddress()
	return !header.IsV4MulticastAddress(dst) && dst != header.IPv4Broadcast && !e.localAddr(header.IPv4ProtocolNumber, dst)
}

// popLocal removes the link header and label stack (hdrLen bytes), infers
// the payload, applies the TTL model and delivers the IP packet.
func (e *Endpoint) popLocal(pkt *stack.PacketBuffer, hdrLen int, binding mpls.Payload, bottom mpls.Label, ttl uint8) {
	size := pkt.Data().Size() - header.EthernetMinimumSize // from the label stack on
	if _, ok := pkt.LinkHeader().Consume(hdrLen); !ok {
		e.drop(DropTruncatedLabelStack, int64(bottom), nil)
		return
	}
	// Enough for any IPv4 header (60 bytes with options) and the IPv6 one.
	const ipHeaderPeek = header.IPv4MaximumHeaderSize
	ip, _ := pullUpTo(pkt, ipHeaderPeek)
	// InferPayload checks the whole header of the type it names (the
	// version nibble, an IHL of at least 5 words, all present).
	p, err := mpls.InferPayload(binding, bottom, ip)
	if err != nil {
		e.drop(DropUnknownPayload, int64(bottom), err)
		return
	}
	if err := mpls.PopTTL(e.ttlModel, ttl, p, ip); err != nil {
		if errors.Is(err, mpls.ErrTTLExpired) {
			e.drop(DropTTLExpired, int64(bottom), err)
		} else {
			e.drop(DropUnknownPayload, int64(bottom), err)
		}
		return
	}
	proto := header.IPv4ProtocolNumber
	if p == mpls.PayloadIPv6 {
		proto = header.IPv6ProtocolNumber
	}
	e.ctr.labels.Add(bottom, 1, uint64(size))
	e.deliver(proto, pkt)
}

// Transport checksum field offsets.
const (
	tcpChecksumOffset = 16 // RFC 9293 §3.1
	udpChecksumOffset = 6  // RFC 768
)

// finishRXChecksum makes the transport checksum of an IP packet (link
// header consumed) whose lower link reported it validated or partial
// acceptable to the stack: a valid checksum is left alone; otherwise the
// field is taken to hold the pseudo-header sum (CHECKSUM_PARTIAL) and the
// full checksum is written, as the kernel's skb_checksum_help does, behind
// any IPv6 extension headers. Other protocols are left alone; fragments
// never get here (deliverFragment checks them whole). It returns false for
// a malformed packet.
func finishRXChecksum(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) bool {
	return checkRXChecksum(proto, pkt, true)
}

// l4Sum returns the ones' complement sum of the l4len bytes after the IP
// header (hl bytes) of pkt's data. (gVisor's PacketData.ChecksumAtOffset
// counts its offset from the start of the whole buffer, link header
// included, so it cannot be used once the link header is consumed.)
func l4Sum(pkt *stack.PacketBuffer, hl, l4len int) uint16 {
	b, ok := pkt.Data().PullUp(hl + l4len)
	if !ok {
		return 0
	}
	return checksum.Checksum(b[hl:hl+l4len], 0)
}

// rxVerdict is checkRX's answer.
type rxVerdict uint8

const (
	rxOK           rxVerdict = iota // valid, or not checked by the stack either
	rxBad                           // a checksum or header that does not verify
	rxUnverifiable                  // cannot be verified (DropUnverifiableChecksum)
	rxFragment                      // a fragment: verified whole (fragsum.go)
)

// checkRXChecksum is checkRX as a bool: fragments and unverifiable
// packets pass.
func checkRXChecksum(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer, finish bool) bool {
	return checkRX(proto, pkt, finish) != rxBad
}

// ipv6Transport walks the IPv6 extension header chain of the packet in
// pkt (fixed header checked, l4len payload bytes): hop-by-hop options
// (first only), routing and destination options, (b[1]+1)*8 bytes each,
// and atomic fragment headers (RFC 6946), at most fragMaxExtHeaders. It
// returns the transport protocol and its offset. A routing header with
// segments left makes gVisor drop the packet (it supports no routing
// type; RFC 8200 §4.4), so its verdict is rxOK with protocol 0: nothing
// reaches a transport. A fragment header that is not atomic, after other
// headers, is rxFragment; too many headers, or hop-by-hop options after
// another header, rxUnverifiable; a header beyond the packet rxBad.
func ipv6Transport(pkt *stack.PacketBuffer, next uint8, end int) (tcpip.TransportProtocolNumber, int, rxVerdict) {
	off := header.IPv6MinimumSize
	for i := 0; ; i++ {
		switch next {
		case nhHopByHop, nhRouting,
			nhDestOpts, nhFragment:
		default:
			return tcpip.TransportProtocolNumber(next), off, rxOK
		}
		if i == fragMaxExtHeaders {
			return 0, 0, rxUnverifiable
		}
		if next == nhHopByHop && i != 0 {
			return 0, 0, rxUnverifiable // hop-by-hop must come first (RFC 8200 §4.1)
		}
		if end-off < 8 {
			return 0, 0, rxBad
		}
		b, ok := pkt.Data().PullUp(off + 8)
		if !ok {
			return 0, 0, rxBad
		}
		h := b[off:]
		n := (int(h[1]) + 1) * 8
		switch next {
		case nhFragment:
			if binary.BigEndian.Uint16(h[2:])&0xfff9 != 0 {
				return 0, 0, rxFragment
			}
			n = header.IPv6FragmentHeaderSize
		case nhRouting:
			if h[3] != 0 {
				return 0, 0, rxOK
			}
		}
		if end-off < n {
			return 0, 0, rxBad
		}
		next = h[0]
		off += n
	}
}

// checkRX verifies the packet's checksums; with finish, a transport
// checksum that does not verify is taken to be partial and completed. A
// malformed IP header (a version nibble other than the ethertype's, an
// IHL below 5, a length beyond the frame) fails too: the stack would drop
// it without a counter of ours.
func checkRX(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer, finish bool) rxVerdict {
	var (
		hl, l4len int
		tp        tcpip.TransportProtocolNumber
		src, dst  tcpip.Address
	)
	switch proto {
	case header.IPv4ProtocolNumber:
		b, ok := pkt.Data().PullUp(header.IPv4MinimumSize)
		if !ok {
			return rxBad
		}
		ip := header.IPv4(b)
		hl = int(ip.HeaderLength())
		tot := int(ip.TotalLength())
		if ip[0]>>4 != header.IPv4Version || hl < header.IPv4MinimumSize || tot < hl || tot > pkt.Data().Size() {
			return rxBad
		}
		if h, ok := pkt.Data().PullUp(hl); !ok || checksum.Checksum(h, 0) != 0xffff {
			return rxBad // the kernel always completes the IPv4 header checksum
		}
		if ip.More() || ip.FragmentOffset() != 0 {
			return rxOK
		}
		l4len, tp, src, dst = tot-hl, ip.TransportProtocol(), ip.SourceAddress(), ip.DestinationAddress()
	case header.IPv6ProtocolNumber:
		b, ok := pkt.Data().PullUp(header.IPv6MinimumSize)
		if !ok {
			return rxBad
		}
		ip := header.IPv6(b)
		hl = header.IPv6MinimumSize
		l4len = int(ip.PayloadLength())
		if b[0]>>4 != header.IPv6Version || hl+l4len > pkt.Data().Size() {
			return rxBad
		}
		src, dst = ip.SourceAddress(), ip.DestinationAddress()
		var v rxVerdict
		tp, hl, v = ipv6Transport(pkt, ip.NextHeader(), header.IPv6MinimumSize+l4len)
		if v != rxOK || tp == 0 {
			return v
		}
		l4len -= hl - header.IPv6MinimumSize
	default:
		return rxOK
	}
	var off int
	switch tp {
	case header.TCPProtocolNumber:
		off = tcpChecksumOffset
	case header.UDPProtocolNumber:
		off = udpChecksumOffset
		if proto == header.IPv4ProtocolNumber && l4len >= off+2 {
			if b, ok := pkt.Data().PullUp(hl + off + 2); ok && b[hl+off] == 0 && b[hl+off+1] == 0 {
				return rxOK // IPv4 UDP without a checksum (RFC 768)
			}
		}
	case header.ICMPv4ProtocolNumber:
		if finish {
			return rxOK // never offloaded by the kernel
		}
		return rxResult(l4len >= header.ICMPv4MinimumSize && l4Sum(pkt, hl, l4len) == 0xffff)
	case header.ICMPv6ProtocolNumber:
		if finish {
			return rxOK
		}
		pseudo := header.PseudoHeaderChecksum(tp, src, dst, uint16(l4len))
		return rxResult(l4len >= header.ICMPv6MinimumSize && checksum.Combine(pseudo, l4Sum(pkt, hl, l4len)) == 0xffff)
	default:
		return rxOK
	}
	if l4len < off+2 {
		return rxBad
	}
	// Drop Ethernet padding so the sum covers the datagram only.
	if pkt.Data().Size() > hl+l4len {
		pkt.Data().CapLength(hl + l4len)
	}
	pseudo := header.PseudoHeaderChecksum(tp, src, dst, uint16(l4len))
	sum := l4Sum(pkt, hl, l4len)
	if checksum.Combine(pseudo, sum) == 0xffff {
		return rxOK
	}
	if !finish {
		return rxBad
	}
	f, ok := pkt.Data().PullUp(hl + off + 2)
	if !ok {
		return rxBad
	}
	final := ^sum
	if tp == header.UDPProtocolNumber && final == 0 {
		final = 0xffff // RFC 768: zero is transmitted as all ones
	}
	binary.BigEndian.PutUint16(f[hl+off:], final)
	return rxOK
}

func rxResult(ok bool) rxVerdict {
	if ok {
		return rxOK
	}
	return rxBad
}
