package mplsendpoint

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// fragInfo is what one fragment's headers say.
type fragInfo struct {
	key       fragKey
	src, dst  tcpip.Address
	first     uint32 // payload offset in the fragmentable part
	more      bool
	payOff    int // offset of the fragmentable payload in pkt's data
	payLen    int
	badHeader bool // the IP header does not verify
	unverif   bool // gVisor might treat this fragment on its own
	malformed bool // a length gVisor refuses
}

// fragmentKind tells whether the IP packet in pkt (link header consumed)
// is an IPv4 fragment or an IPv6 packet with a fragment header that is
// not atomic (RFC 6946), right after the fixed header or deeper.
func fragmentKind(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) int {
	switch proto {
	case header.IPv4ProtocolNumber:
		b, ok := pkt.Data().PullUp(header.IPv4MinimumSize)
		if ok && (b[6]&0x3f != 0 || b[7] != 0) { // MF or an offset
			return fragment
		}
	case header.IPv6ProtocolNumber:
		b, ok := pkt.Data().PullUp(header.IPv6MinimumSize)
		if !ok {
			return notFragment
		}
		switch next := b[6]; next {
		case nhFragment:
			f, ok := pkt.Data().PullUp(header.IPv6MinimumSize + header.IPv6FragmentHeaderSize)
			if ok && binary.BigEndian.Uint16(f[42:])&0xfff9 != 0 {
				return fragment
			}
		case nhHopByHop, nhRouting, nhDestOpts:
			end := header.IPv6MinimumSize + int(binary.BigEndian.Uint16(b[4:]))
			if _, _, v := ipv6Transport(pkt, next, end); v == rxFragment {
				return deepFragment
			}
		}
	}
	return notFragment
}

// parseFragment reads the fragment in pkt (fragmentKind fragment) into f. A
// malformed IP header sets f.malformed; a fragment the endpoint does not
// sum sets f.unverif. Ethernet padding is cut off.
func parseFragment(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer, f *fragInfo) {
	*f = fragInfo{}
	if !ipHeaderOK(proto, pkt) {
		f.badHeader = true
		return
	}
	size := pkt.Data().Size()
	if proto == header.IPv6ProtocolNumber && size < header.IPv6MinimumSize+header.IPv6FragmentHeaderSize {
		f.badHeader = true // the payload length cuts the fragment header
		return
	}
	if proto == header.IPv4ProtocolNumber {
		b, _ := pkt.Data().PullUp(header.IPv4MinimumSize)
		ip := header.IPv4(b)
		hl := int(ip.HeaderLength())
		f.src, f.dst = ip.SourceAddress(), ip.DestinationAddress()
		copy(f.key.src[:], b[12:16])
		copy(f.key.dst[:], b[16:20])
		f.key.id = uint32(ip.ID())
		f.key.proto = ip.Protocol()
		f.first = uint32(ip.FragmentOffset())
		f.more = ip.More()
		f.payOff, f.payLen = hl, size-hl
		// Options are processed per fragment by gVisor (and may get one
		// dropped alone); the kernel never sends them on fragments.
		f.unverif = hl != header.IPv4MinimumSize
		if f.payLen == 0 || int(f.first)+f.payLen > ipv4MaxPayload || (f.more && f.payLen%8 != 0) {
			f.malformed = true
		}
		return
	}
	b, _ := pkt.Data().PullUp(header.IPv6MinimumSize + header.IPv6FragmentHeaderSize)
	ip := header.IPv6(b)
	f.src, f.dst = ip.SourceAddress(), ip.DestinationAddress()
	f.key.v6 = true
	copy(f.key.src[:], b[8:24])
	copy(f.key.dst[:], b[24:40])
	fh := b[header.IPv6MinimumSize:]
	f.key.id = binary.BigEndian.Uint32(fh[4:])
	f.first = uint32(binary.BigEndian.Uint16(fh[2:]) &^ 7)
	f.more = fh[3]&1 != 0
	f.payOff = header.IPv6MinimumSize + header.IPv6FragmentHeaderSize
	f.payLen = size - f.payOff
	if f.payLen <= 0 || int(f.first)+f.payLen > 65535-header.IPv6FragmentHeaderSize || (f.more && f.payLen%8 != 0) {
		f.malformed = true
	}
}

// firstFragment reads the transport protocol, its offset in the
// fragmentable part and (IPv4 UDP) the zero checksum from the first
// fragment's payload p (next: the fragment header's next header, or the
// IPv4 protocol). It reports false if the upper-layer header is not whole
// in p, or the chain holds a header gVisor would refuse after a fragment
// header.
func firstFragment(v6 bool, next uint8, p []byte, ent *fragEntry) bool {
	off := 0
	if v6 {
		for i := 0; ; i++ {
			if i == fragMaxExtHeaders {
				return false
			}
			switch next {
			case nhRouting, nhDestOpts:
				if len(p)-off < 8 {
					return false
				}
				n := (int(p[off+1]) + 1) * 8
				if len(p)-off < n {
					return false
				}
				if next == nhRouting && p[off+3] != 0 {
					// Segments left: gVisor drops the datagram (no
					// routing type is supported); nothing to verify.
					ent.tp = 0
					ent.l4Start = uint32(off)
					return true
				}
				next = p[off]
				off += n
				continue
			case nhHopByHop, nhFragment:
				return false
			}
			break
		}
	}
	ent.tp = tcpip.TransportProtocolNumber(next)
	ent.l4Start = uint32(off)
	need := 0
	switch ent.tp {
	case header.TCPProtocolNumber:
		need = header.TCPMinimumSize
	case header.UDPProtocolNumber:
		need = header.UDPMinimumSize
	case header.ICMPv4ProtocolNumber:
		if v6 {
			ent.tp = 0 // not checked by gVisor's IPv6
		} else {
			need = header.ICMPv4MinimumSize
		}
	case header.ICMPv6ProtocolNumber:
		if v6 {
			need = header.ICMPv6MinimumSize
		} else {
			ent.tp = 0
		}
	default:
		ent.tp = 0 // not verified, as for unfragmented packets
	}
	if len(p)-off < need {
		return false
	}
	ent.udpNoSum = !v6 && ent.tp == header.UDPProtocolNumber && p[off+udpChecksumOffset] == 0 && p[off+udpChecksumOffset+1] == 0
	return true
}

// firstPiece reads the transport header of the first fragment (its
// payload p) into ent and returns the payload past it, which the checksum
// sums; ok is false when the header cannot be verified.
func firstPiece(pkt *stack.PacketBuffer, f *fragInfo, p []byte, ent *fragEntry) ([]byte, bool) {
	var next uint8
	if f.key.v6 {
		b, _ := pkt.Data().PullUp(header.IPv6MinimumSize + 1)
		next = b[header.IPv6MinimumSize]
	} else {
		next = f.key.proto
	}
	if !firstFragment(f.key.v6, next, p, ent) {
		return nil, false
	}
	ent.haveFirst = true
	return p[ent.l4Start:], true
}

// verifyFragmentSum reports whether the whole datagram's transport
// checksum verifies.
func verifyFragmentSum(ent *fragEntry, src, dst tcpip.Address) bool {
	l4len := ent.total - int64(ent.l4Start)
	switch ent.tp {
	case header.TCPProtocolNumber, header.UDPProtocolNumber, header.ICMPv6ProtocolNumber:
		if ent.udpNoSum {
			return true // IPv4 UDP without a checksum (RFC 768)
		}
		if l4len > 0xffff {
			return false
		}
		pseudo := header.PseudoHeaderChecksum(ent.tp, src, dst, uint16(l4len))
		return checksum.Combine(pseudo, ent.sum) == 0xffff
	case header.ICMPv4ProtocolNumber:
		return ent.sum == 0xffff
	}
	return true
}
