package xdp

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// partialChecksum reports whether frame is an IPv4 or IPv6 TCP or UDP
// packet whose checksum field holds what Linux puts there for a packet with
// a partial checksum (CHECKSUM_PARTIAL): the folded pseudo-header sum,
// length included, not yet complemented, the rest left to the device.
//
// It is a diagnosis, never a verdict: a veth peer with TX checksum offload
// (the default) sends its own TCP and UDP frames in this form, and the
// XDP program passes them to the socket as they are, with nothing to say
// so (AF_XDP carries no checksum metadata; the kernel's XDP metadata
// kfuncs give a hash, a timestamp and a VLAN tag, no checksum state).
// Anyone can put this value in the field of a frame whose checksum is
// wrong, so the endpoint cannot take the form as a sign that the kernel
// vouches for the data: it delivers every frame unflagged, to be verified
// in full above, and counts those of this form (Stats.RXChecksumPartialForm)
// so that a peer that needs `ethtool -K PEER tx off` shows itself.
// IPv4 fragments, IPv6 extension headers and other protocols are not
// judged (false).
func partialChecksum(frame []byte) bool {
	if len(frame) < header.EthernetMinimumSize {
		return false
	}
	et := binary.BigEndian.Uint16(frame[12:])
	p := frame[header.EthernetMinimumSize:]
	var proto tcpip.TransportProtocolNumber
	var src, dst tcpip.Address
	var l4 []byte
	switch tcpip.NetworkProtocolNumber(et) {
	case header.IPv4ProtocolNumber:
		h := header.IPv4(p)
		if !h.IsValid(len(p)) || h.More() || h.FragmentOffset() != 0 {
			return false
		}
		proto = h.TransportProtocol()
		src = tcpip.AddrFrom4Slice(h.SourceAddressSlice())
		dst = tcpip.AddrFrom4Slice(h.DestinationAddressSlice())
		l4 = p[h.HeaderLength():h.TotalLength()]
	case header.IPv6ProtocolNumber:
		h := header.IPv6(p)
		if !h.IsValid(len(p)) {
			return false
		}
		proto = tcpip.TransportProtocolNumber(h.NextHeader())
		src = tcpip.AddrFrom16Slice(h.SourceAddressSlice())
		dst = tcpip.AddrFrom16Slice(h.DestinationAddressSlice())
		l4 = p[header.IPv6MinimumSize : header.IPv6MinimumSize+int(h.PayloadLength())]
	default:
		return false
	}
	var field uint16
	switch proto {
	case header.TCPProtocolNumber:
		if len(l4) < header.TCPMinimumSize {
			return false
		}
		field = binary.BigEndian.Uint16(l4[16:])
	case header.UDPProtocolNumber:
		if len(l4) < header.UDPMinimumSize {
			return false
		}
		field = binary.BigEndian.Uint16(l4[6:])
	default:
		return false
	}
	if len(l4) > 0xffff {
		return false
	}
	sum := header.PseudoHeaderChecksum(proto, src, dst, uint16(len(l4)))
	// Ones' complement: 0x0000 and 0xffff are the same sum.
	return field == sum || (field == 0 && sum == 0xffff) || (field == 0xffff && sum == 0)
}
