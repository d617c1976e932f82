//go:build linux

package udp

import (
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// answerARP answers an ARP request (arp: the ARP packet) for any address
// with the peer's link address: on a point-to-point link every neighbour
// is the peer. Gratuitous ARP (sender and target the same) and replies
// get no answer.
func (e *Endpoint) answerARP(arp []byte) {
	if len(arp) < header.ARPSize {
		e.drop(DropUnsupported, 1)
		return
	}
	req := header.ARP(arp)
	if !req.IsValid() || req.Op() != header.ARPRequest || string(req.ProtocolAddressSender()) == string(req.ProtocolAddressTarget()) {
		return
	}
	var reply [header.ARPSize]byte
	rep := header.ARP(reply[:])
	rep.SetIPv4OverEthernet()
	rep.SetOp(header.ARPReply)
	copy(rep.HardwareAddressSender(), e.peerAddr)
	copy(rep.ProtocolAddressSender(), req.ProtocolAddressTarget())
	copy(rep.HardwareAddressTarget(), req.HardwareAddressSender())
	copy(rep.ProtocolAddressTarget(), req.ProtocolAddressSender())
	e.queueAnswer(newFrame(e.LinkAddress(), e.peerAddr, header.ARPProtocolNumber, reply[:]))
}

// answerNS answers an NDP neighbour solicitation (ip: its IPv6 packet)
// with a solicited neighbour advertisement (RFC 4861 §7.2.4) carrying the
// peer's link address. A solicitation from the unspecified address
// (duplicate address detection) gets none: the address is ours alone.
func (e *Endpoint) answerNS(ip []byte) {
	h := header.IPv6(ip)
	icmp := ip[header.IPv6MinimumSize:]
	if len(icmp) < header.ICMPv6NeighborSolicitMinimumSize {
		e.drop(DropUnsupported, 1)
		return
	}
	src := h.SourceAddress()
	if src.Unspecified() {
		return
	}
	target := header.NDPNeighborSolicit(header.ICMPv6(icmp).MessageBody()).TargetAddress()
	const optLen = 8 // target link-layer address option for Ethernet
	var pkt [header.IPv6MinimumSize + header.ICMPv6NeighborAdvertMinimumSize + optLen]byte
	out := header.IPv6(pkt[:])
	out.Encode(&header.IPv6Fields{
		PayloadLength:     header.ICMPv6NeighborAdvertMinimumSize + optLen,
		TransportProtocol: header.ICMPv6ProtocolNumber,
		HopLimit:          header.NDPHopLimit,
		SrcAddr:           target,
		DstAddr:           src,
	})
	na := header.ICMPv6(pkt[header.IPv6MinimumSize:])
	na.SetType(header.ICMPv6NeighborAdvert)
	adv := header.NDPNeighborAdvert(na.MessageBody())
	adv.SetSolicitedFlag(true)
	adv.SetOverrideFlag(true)
	adv.SetTargetAddress(target)
	opt := na[header.ICMPv6NeighborAdvertMinimumSize:]
	opt[0], opt[1] = 2, 1 // target link-layer address, 8 bytes
	copy(opt[2:], e.peerAddr)
	na.SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: na, Src: target, Dst: src}))
	e.queueAnswer(newFrame(e.LinkAddress(), e.peerAddr, header.IPv6ProtocolNumber, pkt[:]))
}

// queueAnswer hands an answer to the neighbour goroutine, which delivers
// it outside the stack's WritePackets call.
func (e *Endpoint) queueAnswer(pkt *stack.PacketBuffer) {
	select {
	case e.nd <- pkt:
		e.ctr.neighborAnswers.Add(1)
	default:
		pkt.DecRef()
		e.drop(DropNeighborQueueFull, 1)
	}
}

// ndLoop delivers neighbour answers until Close.
func (e *Endpoint) ndLoop() {
	for {
		select {
		case <-e.closed:
			for {
				select {
				case pkt := <-e.nd:
					pkt.DecRef()
				default:
					return
				}
			}
		case pkt := <-e.nd:
			if d := e.Dispatcher(); d != nil {
				d.DeliverNetworkPacket(0, pkt)
			}
			pkt.DecRef()
		}
	}
}
