package afpacket

import (
	"encoding/binary"

	"github.com/mplsnode/mplsnode/link/lowerlink"
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
	ip, ok := lowerlink.ParseIPFrame(frame, true)
	v4, l4 := ip.IPv4 != nil, ip.Segment
	switch {
	case !ok:
		return false
	case v4 && !ip.IPv4.IsChecksumValid():
		return false
	case ip.Fragment:
		return true
	case v4 && ip.Proto == header.ICMPv4ProtocolNumber:
		return checksum.Checksum(l4, 0) == 0xffff
	case v4 && ip.Proto == header.UDPProtocolNumber &&
		len(l4) >= header.UDPMinimumSize && binary.BigEndian.Uint16(l4[6:]) == 0:
		return true // IPv4 UDP without a checksum
	case ip.Proto == header.TCPProtocolNumber, ip.Proto == header.UDPProtocolNumber,
		!v4 && ip.Proto == header.ICMPv6ProtocolNumber:
		sum, ok := ip.PseudoHeaderSum()
		return ok && checksum.Checksum(l4, sum) == 0xffff
	}
	return true // not IP (Proto unset), or a protocol it does not check
}
