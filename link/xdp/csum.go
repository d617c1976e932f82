package xdp

import (
	"encoding/binary"

	"github.com/mplsnode/mplsnode/link/lowerlink"
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
	ip, ok := lowerlink.ParseIPFrame(frame, false)
	if !ok || ip.Fragment {
		return false
	}
	l4 := ip.Segment
	var field uint16
	switch ip.Proto { // unset (0) for a frame that is not IP
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
	sum, ok := ip.PseudoHeaderSum()
	// Ones' complement: 0x0000 and 0xffff are the same sum.
	return ok && (field == sum || (field == 0 && sum == 0xffff) || (field == 0xffff && sum == 0))
}
