package afpacket

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// checksumOK verifies, in software, the checksums that gVisor skips when the
// NIC claims stack.CapabilityRXChecksumOffload: the IPv4 header checksum and
// the TCP, UDP, ICMPv4 or ICMPv6 checksum of an unfragmented IPv4 packet or
// of an IPv6 packet whose first next header is one of those. It returns false
// only for a frame that is certainly bad; frames it cannot judge (other
// ethertypes such as ARP or MPLS, IP fragments, IPv6 extension headers) pass.
// One 802.1Q tag is looked through.
func checksumOK(frame []byte) bool {
	if len(frame) < header.EthernetMinimumSize {
		return false
	}
	et := binary.BigEndian.Uint16(frame[12:])
	p := frame[header.EthernetMinimumSize:]
	if et == 0x8100 && len(p) >= 4 { // 802.1Q: TCI, then the inner ethertype
		et = binary.BigEndian.Uint16(p[2:])
		p = p[4:]
	}
	switch tcpip.NetworkProtocolNumber(et) {
	case header.IPv4ProtocolNumber:
		h := header.IPv4(p)
		if !h.IsValid(len(p)) || !h.IsChecksumValid() {
			return false
		}
		if h.More() || h.FragmentOffset() != 0 {
			return true
		}
		l4 := p[h.HeaderLength():h.TotalLength()]
		proto := h.TransportProtocol()
		switch proto {
		case header.ICMPv4ProtocolNumber:
			return checksum.Checksum(l4, 0) == 0xffff
		case header.UDPProtocolNumber:
			if len(l4) >= header.UDPMinimumSize && binary.BigEndian.Uint16(l4[6:]) == 0 {
				return true // IPv4 UDP without a checksum
			}
		case header.TCPProtocolNumber:
		default:
			return true
		}
		src := tcpip.AddrFrom4Slice(h.SourceAddressSlice())
		dst := tcpip.AddrFrom4Slice(h.DestinationAddressSlice())
		return l4Valid(proto, src, dst, l4)
	case header.IPv6ProtocolNumber:
		h := header.IPv6(p)
		if !h.IsValid(len(p)) {
			return false
		}
		proto := tcpip.TransportProtocolNumber(h.NextHeader())
		switch proto {
		case header.TCPProtocolNumber, header.UDPProtocolNumber, header.ICMPv6ProtocolNumber:
		default:
			return true
		}
		l4 := p[header.IPv6MinimumSize : header.IPv6MinimumSize+int(h.PayloadLength())]
		src := tcpip.AddrFrom16Slice(h.SourceAddressSlice())
		dst := tcpip.AddrFrom16Slice(h.DestinationAddressSlice())
		return l4Valid(proto, src, dst, l4)
	}
	return true
}

// l4Valid checks a checksum that covers the pseudo-header and l4.
func l4Valid(proto tcpip.TransportProtocolNumber, src, dst tcpip.Address, l4 []byte) bool {
	if len(l4) > 0xffff {
		return false
	}
	sum := header.PseudoHeaderChecksum(proto, src, dst, uint16(len(l4)))
	return checksum.Checksum(l4, sum) == 0xffff
}
