package verdict

import (
	"encoding/binary"
	"net/netip"

	"github.com/mplsnode/mplsnode/internal/icmp"
	"github.com/mplsnode/mplsnode/mpls"
)

// CheckIPHeader checks the header of the IP packet pkt (v6: IPv6; its
// first bytes, size in all) as a router does before it forwards it (RFC
// 1812 §5.2.2): the version, a whole header (an IPv4 IHL of at least 5
// words, all present), the IPv4 header checksum, length fields within the
// packet. It returns the packet's length without padding, or the reason
// to drop it: unknown_payload, bad_checksum or malformed_ip.
func CheckIPHeader(v6 bool, pkt []byte, size int) (int, Reason) {
	null := mpls.LabelIPv4ExplicitNull
	if v6 {
		null = mpls.LabelIPv6ExplicitNull
	}
	if _, err := mpls.InferPayload(mpls.PayloadNone, null, pkt); err != nil {
		return 0, UnknownPayload
	}
	return ipLength(v6, pkt, size)
}

// ipLength checks the length fields of the IP packet ip (a whole fixed
// header, checked by InferPayload; have bytes of it in the frame) and
// returns its length: an IPv4 header checksum that verifies, a total
// length from its header to the bytes present; an IPv6 payload length
// within them (0, a jumbogram's, counts as none: the fixed header alone).
func ipLength(v6 bool, ip []byte, have int) (int, Reason) {
	if v6 {
		tot := 40 + int(binary.BigEndian.Uint16(ip[4:]))
		if tot > have {
			return 0, MalformedIP
		}
		return tot, NoReason
	}
	hl := int(ip[0]&0xf) * 4
	if !ipv4ChecksumOK(ip[:hl]) {
		return 0, BadChecksum
	}
	tot := int(binary.BigEndian.Uint16(ip[2:]))
	if tot < hl || tot > have {
		return 0, MalformedIP
	}
	return tot, NoReason
}

// ipv4ChecksumOK reports whether the IPv4 header h verifies (RFC 1071).
func ipv4ChecksumOK(h []byte) bool {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return s == 0xffff
}

func ipTTL(v6 bool, ip []byte) uint8 {
	if v6 {
		return ip[7]
	}
	return ip[8]
}

// DecideIP decides an IP packet (v6: IPv6) addressed to the ingress link's
// MAC: pkt is the packet from its IP header on, at least its whole header
// and as much more as is contiguous (the route lookup hashes the flow);
// size is its length with any Ethernet padding. v is overwritten. DecideIP
// allocates nothing.
func (t *Tables) DecideIP(v6 bool, pkt []byte, size int, v *Verdict) {
	*v = Verdict{TTLOff: -1, Payload: mpls.PayloadIPv4}
	if v6 {
		v.Payload = mpls.PayloadIPv6
	}
	tot, r := CheckIPHeader(v6, pkt, size)
	if r != NoReason {
		v.drop(r, 0)
		return
	}
	src, dst := ipAddrs(v6, pkt)
	if t.Router == nil || !t.transitDst(dst) {
		v.Action = Local
		v.PayloadEnd = tot
		return
	}
	if t.Node.IsLocal(src) || !icmp.SourceNamesOneHost(src) || src.IsLinkLocalUnicast() {
		v.drop(MartianSource, 0)
		return
	}
	rt, ok := t.Router.Lookup(dst, pkt)
	if !ok {
		v.drop(NoRoute, 0)
		v.icmp(Unreachable, 0, t, pkt)
		return
	}
	ttl := ipTTL(v6, pkt)
	if ttl <= 1 {
		v.drop(TTLExpired, 0)
		v.icmp(TimeExceeded, 0, t, pkt)
		return
	}
	via := rt.Via
	if !via.IsValid() {
		via = dst
	}
	mtu, ok := t.Node.LinkMTU(rt.Device)
	if !ok {
		v.drop(NoEgressLink, 0)
		return
	}
	if len(rt.Labels) > MaxOut {
		v.drop(LabelStackTooDeep, 0)
		return
	}
	v.Device, v.Via = rt.Device, via
	v.PayloadEnd = tot
	t.setOut(v6, ttl-1, &rt, v)
	ipMTU := int(mtu) - v.NOut*mpls.EntryLen
	if rt.MTU != 0 && int(rt.MTU) < ipMTU {
		ipMTU = int(rt.MTU)
	}
	v.Action = Forward
	if tot > ipMTU {
		t.tooBig(pkt, size, ipMTU, v)
		if v.Reason != NoReason {
			v.Action = Drop
		}
	}
}

// ipAddrs returns the source and destination of an IP header.
func ipAddrs(v6 bool, ip []byte) (src, dst netip.Addr) {
	if v6 {
		return netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
	}
	return netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
}

// setOut sets what a forwarded IP packet leaves with: its TTL or hop limit
// outTTL, its EtherType, and rt's label stack pushed (each entry's TTL the
// route's, else the TTL model's from outTTL).
func (t *Tables) setOut(v6 bool, outTTL uint8, rt *Route, v *Verdict) {
	v.TTLOff, v.IPTTL, v.IPv6 = 0, outTTL, v6
	v.Type = 0x0800
	if v6 {
		v.Type = 0x86dd
	}
	v.Did = IPForwarded
	if len(rt.Labels) == 0 {
		return
	}
	v.Did = Pushed
	v.Type = 0x8847
	lttl := rt.TTL
	if lttl == 0 {
		lttl = mpls.PushTTL(t.Model, outTTL, 0)
	}
	for i, l := range rt.Labels {
		v.Out[i] = mpls.Entry{Label: l, TTL: lttl, S: i == len(rt.Labels)-1}
	}
	v.NOut = len(rt.Labels)
}

// transitDst reports whether dst is a unicast address of another host:
// not one of the node's, not multicast, broadcast, loopback or
// unspecified, not IPv6 link-local (which is never forwarded).
func (t *Tables) transitDst(dst netip.Addr) bool {
	return dst.IsValid() && !dst.IsUnspecified() && !dst.IsMulticast() && !dst.IsLinkLocalUnicast() &&
		!dst.IsLoopback() && dst != netip.AddrFrom4([4]byte{255, 255, 255, 255}) && !t.Node.IsLocal(dst)
}
