package mplsendpoint

import (
	"net/netip"

	"github.com/mplsnode/mplsnode/internal/icmp"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// ICMP error sizes.
const (
	// icmpv6MaxLen bounds an ICMPv6 error to the IPv6 minimum MTU (RFC 4443
	// §2.4 (c)).
	icmpv6MaxLen = header.IPv6MinimumMTU
)

// mtuExceeded drops pkt (too big for the link after the label push), counts
// mtu_exceeded, and hands the stack the ICMP error a router would send (RFC
// 3032 §3): IPv4 "fragmentation needed" or ICMPv6 "packet too big" with
// MTU = link MTU - this packet's label bytes, so that the sender's PMTU
// logic (TCP MSS, UDP socket error) adapts.
func (e *Endpoint) mtuExceeded(pkt *stack.PacketBuffer, linkMTU int) {
	labelBytes := len(pkt.LinkHeader().Slice()) - header.EthernetMinimumSize
	label := int64(-1)
	if labelBytes >= mpls.EntryLen {
		label = int64(mpls.DecodeEntry(pkt.LinkHeader().Slice()[header.EthernetMinimumSize:]).Label)
	}
	e.drop(DropMTUExceeded, label, nil)
	mtu := linkMTU - labelBytes
	if mtu < 0 {
		mtu = 0
	}
	proto, b := BuildPacketTooBig(pkt.NetworkProtocolNumber, packetBytesFrom(pkt), uint32(mtu))
	if b == nil {
		return
	}
	// Deliver on another goroutine: the writer may hold locks (the TCP
	// endpoint's) that the ICMP handling path takes.
	go func() {
		p := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(b)})
		defer p.DecRef()
		p.PktType = tcpip.PacketHost
		e.Endpoint.DeliverNetworkPacket(proto, p)
	}()
}

// packetBytesFrom returns a copy of pkt from its network header on, at most
// icmpv6MaxLen bytes (more than any error quotes).
func packetBytesFrom(pkt *stack.PacketBuffer) []byte {
	out := append([]byte(nil), pkt.NetworkHeader().Slice()...)
	out = append(out, pkt.TransportHeader().Slice()...)
	if room := icmpv6MaxLen - len(out); room > 0 {
		out = append(out, pkt.Data().AsRange().Capped(room).ToSlice()...)
	}
	return out[:min(len(out), icmpv6MaxLen)]
}

// BuildPacketTooBig returns the ICMP error, as a whole IP packet, that tells
// the source of the IP packet orig that it must fit in mtu bytes:
// ICMPv4 type 3 code 4 (RFC 792, RFC 1191) for IPv4, ICMPv6 type 2 (RFC 4443
// §3.2) for IPv6, built by internal/icmp (the node's one ICMP builder). The
// error appears to come from orig's destination, as the endpoint answers on
// behalf of the path. It returns nil for anything else (including an IPv4
// fragment other than the first, which never gets an error).
func BuildPacketTooBig(proto tcpip.NetworkProtocolNumber, orig []byte, mtu uint32) (tcpip.NetworkProtocolNumber, []byte) {
	switch proto {
	case header.IPv4ProtocolNumber:
		if len(orig) < header.IPv4MinimumSize {
			return 0, nil
		}
		ip := header.IPv4(orig)
		hl := int(ip.HeaderLength())
		if hl < header.IPv4MinimumSize || hl > len(orig) || ip.FragmentOffset() != 0 {
			return 0, nil
		}
		src, dst := ip.DestinationAddress(), ip.SourceAddress()
		// The error goes to the node's own stack, which reads the header
		// and the 8 bytes after it (RFC 792): quoting more is no use.
		orig = orig[:min(len(orig), hl+8)]
		msg := icmp.FragmentationNeeded(false, orig, nil, mtu, netip.AddrFrom4(src.As4()), netip.AddrFrom4(dst.As4()))
		total := header.IPv4MinimumSize + len(msg)
		b := make([]byte, total)
		out := header.IPv4(b)
		out.Encode(&header.IPv4Fields{
			TotalLength: uint16(total),
			TTL:         icmp.ErrorTTL,
			Protocol:    uint8(header.ICMPv4ProtocolNumber),
			SrcAddr:     src,
			DstAddr:     dst,
		})
		out.SetChecksum(^out.CalculateChecksum())
		copy(b[header.IPv4MinimumSize:], msg)
		return header.IPv4ProtocolNumber, b
	case header.IPv6ProtocolNumber:
		if len(orig) < header.IPv6MinimumSize {
			return 0, nil
		}
		ip := header.IPv6(orig)
		src, dst := ip.DestinationAddress(), ip.SourceAddress()
		msg := icmp.FragmentationNeeded(true, orig, nil, mtu, netip.AddrFrom16(src.As16()), netip.AddrFrom16(dst.As16()))
		b := make([]byte, header.IPv6MinimumSize+len(msg))
		header.IPv6(b).Encode(&header.IPv6Fields{
			PayloadLength:     uint16(len(msg)),
			TransportProtocol: header.ICMPv6ProtocolNumber,
			HopLimit:          icmp.ErrorTTL,
			SrcAddr:           src,
			DstAddr:           dst,
		})
		copy(b[header.IPv6MinimumSize:], msg)
		return header.IPv6ProtocolNumber, b
	}
	return 0, nil
}
