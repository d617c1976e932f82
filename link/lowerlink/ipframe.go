package lowerlink

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// etherTypeVLAN is the ethertype of an 802.1Q tag.
const etherTypeVLAN = 0x8100

// IPFrame is the IP packet in an Ethernet frame, as far as a lower link's
// checksum checks look into it: what the transport checksum covers.
type IPFrame struct {
	// Net is the frame's ethertype (behind the 802.1Q tag, when
	// ParseIPFrame looked through one). The fields below are set only for
	// IPv4 and IPv6.
	Net tcpip.NetworkProtocolNumber
	// IPv4 is the IPv4 header; nil for IPv6.
	IPv4 header.IPv4
	// Fragment is set for an IPv4 fragment, which holds no whole transport
	// segment: the fields below are then unset.
	Fragment bool
	// Proto is the transport protocol: IPv4's protocol field, or IPv6's
	// first next header (an extension header is not looked through).
	Proto tcpip.TransportProtocolNumber
	// Src and Dst are the addresses the pseudo-header holds.
	Src, Dst tcpip.Address
	// Segment is the transport header and payload, as long as the IP
	// header says.
	Segment []byte
}

// ParseIPFrame finds the IP packet in frame, an Ethernet frame, looking
// through one 802.1Q tag when vlan is set. ok is false when the frame is
// too short for its Ethernet header or carries an IPv4 or IPv6 header
// that is not valid (the header's own IsValid); a frame of another
// ethertype is ok, with only Net set.
func ParseIPFrame(frame []byte, vlan bool) (f IPFrame, ok bool) {
	if len(frame) < header.EthernetMinimumSize {
		return f, false
	}
	et := binary.BigEndian.Uint16(frame[12:])
	p := frame[header.EthernetMinimumSize:]
	if vlan && et == etherTypeVLAN && len(p) >= 4 { // TCI, then the inner ethertype
		et = binary.BigEndian.Uint16(p[2:])
		p = p[4:]
	}
	f.Net = tcpip.NetworkProtocolNumber(et)
	switch f.Net {
	case header.IPv4ProtocolNumber:
		h := header.IPv4(p)
		if !h.IsValid(len(p)) {
			return f, false
		}
		f.IPv4 = h
		if h.More() || h.FragmentOffset() != 0 {
			f.Fragment = true
			return f, true
		}
		f.Proto = h.TransportProtocol()
		f.Src = tcpip.AddrFrom4Slice(h.SourceAddressSlice())
		f.Dst = tcpip.AddrFrom4Slice(h.DestinationAddressSlice())
		f.Segment = p[h.HeaderLength():h.TotalLength()]
	case header.IPv6ProtocolNumber:
		h := header.IPv6(p)
		if !h.IsValid(len(p)) {
			return f, false
		}
		f.Proto = tcpip.TransportProtocolNumber(h.NextHeader())
		f.Src = tcpip.AddrFrom16Slice(h.SourceAddressSlice())
		f.Dst = tcpip.AddrFrom16Slice(h.DestinationAddressSlice())
		f.Segment = p[header.IPv6MinimumSize : header.IPv6MinimumSize+int(h.PayloadLength())]
	}
	return f, true
}

// PseudoHeaderSum returns the sum of the pseudo-header for Segment (its
// length included), not complemented; ok is false when Segment is too
// long for the pseudo-header's length field.
func (f *IPFrame) PseudoHeaderSum() (sum uint16, ok bool) {
	if len(f.Segment) > 0xffff {
		return 0, false
	}
	return header.PseudoHeaderChecksum(f.Proto, f.Src, f.Dst, uint16(len(f.Segment))), true
}
