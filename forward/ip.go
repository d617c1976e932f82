package forward

import (
	"net/netip"
	"slices"

	"github.com/mplsnode/mplsnode/internal/icmp"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// IP transit: unicast IP packets not addressed to the node, offered by the
// links (mplsendpoint.IPForwarder), are routed here, outside gVisor: route
// lookup (Router), TTL/hop limit (RFC 1812 §5.3.1: time exceeded through
// the one ICMP builder), labels pushed when the route has an encap (the
// LER role for transit traffic), the next hop's MAC from the stack's
// neighbour table, GRO towards it and batched writes as for labelled
// frames, IPv4 fragmentation or ICMP fragmentation needed / Packet Too Big
// when the packet does not fit.

// Route is one transit route as the forwarding plane needs it.
type Route struct {
	// Prefix is the destination.
	Prefix netip.Prefix
	// Device is the egress link's name.
	Device string
	// Via is the next hop; the invalid Addr means on-link (the next hop is
	// the destination itself).
	Via netip.Addr
	// Labels are pushed, outermost first (an LER push); empty means plain
	// IP.
	Labels []mpls.Label
	// MTU caps the IP MTU of the route; 0 means the link MTU less the
	// labels.
	MTU uint32
	// TTL, when not zero, is the TTL of pushed labels regardless of the
	// TTL model.
	TTL uint8
}

// Router looks up transit routes by longest prefix match. The lookup is on
// every forwarded packet: it must not allocate and must be safe for
// concurrent use. Table is the plain implementation; FIBRouter routes by
// the node's FIB, with ECMP (Switch.SetRouter).
type Router interface {
	// Lookup returns the route for dst, or false when none matches. ip is
	// the packet from its IP header on, as much as is contiguous: a route
	// with several next hops picks one by its flow (5-tuple).
	Lookup(dst netip.Addr, ip []byte) (Route, bool)
}

// Table is a Router over a fixed set of routes: one map per prefix length
// in use, searched from the longest.
type Table struct {
	v4, v6 []lengthTable // longest prefix first
}

type lengthTable struct {
	bits   int
	routes map[netip.Prefix]*Route
}

// NewTable returns a table of routes (copied). Prefixes are masked; of two
// routes with the same prefix the first wins.
func NewTable(routes []Route) *Table {
	t := &Table{}
	for i := range routes {
		r := routes[i]
		r.Prefix = r.Prefix.Masked()
		r.Labels = slices.Clone(r.Labels)
		tabs := &t.v4
		if r.Prefix.Addr().Is6() {
			tabs = &t.v6
		}
		j := slices.IndexFunc(*tabs, func(l lengthTable) bool { return l.bits == r.Prefix.Bits() })
		if j < 0 {
			*tabs = append(*tabs, lengthTable{bits: r.Prefix.Bits(), routes: map[netip.Prefix]*Route{}})
			j = len(*tabs) - 1
		}
		if _, dup := (*tabs)[j].routes[r.Prefix]; !dup {
			(*tabs)[j].routes[r.Prefix] = &r
		}
	}
	for _, tabs := range []*[]lengthTable{&t.v4, &t.v6} {
		slices.SortFunc(*tabs, func(a, b lengthTable) int { return b.bits - a.bits })
	}
	return t
}

// Lookup implements Router (a Table's routes have one next hop: ip is
// not used).
func (t *Table) Lookup(dst netip.Addr, _ []byte) (Route, bool) {
	dst = dst.Unmap()
	tabs := t.v4
	if dst.Is6() {
		tabs = t.v6
	}
	for _, l := range tabs {
		p, err := dst.Prefix(l.bits)
		if err != nil {
			continue
		}
		if r, ok := l.routes[p]; ok {
			return *r, true
		}
	}
	return Route{}, false
}

// SetRouter sets the routes transit IP packets follow (nil: none; IP
// packets are then left to the stack). It may be called at any time.
func (ls *Switch) SetRouter(r Router) {
	if r == nil {
		ls.router.Store(nil)
		return
	}
	ls.router.Store(&r)
}

var _ mplsendpoint.IPForwarder = (*Switch)(nil)

// ForwardIP implements mplsendpoint.IPForwarder: it takes a unicast IP
// packet for another host and forwards it per the Router, or leaves it to
// the stack (false) when it is for this node, is not unicast, or the
// switch has no router or no stack yet.
func (ls *Switch) ForwardIP(in *mplsendpoint.Endpoint, req *mplsendpoint.IPForwardRequest) bool {
	st := ls.st.Load()
	rp := ls.router.Load()
	if st == nil || rp == nil {
		return false
	}
	data := req.Packet.Data()
	size := data.Size()
	v6 := req.Proto == header.IPv6ProtocolNumber
	hb, ok := data.PullUp(min(size, header.IPv6MinimumSize))
	if !ok {
		return false
	}
	var (
		src, dst tcpip.Address
		ttl      uint8
		p        = mpls.PayloadIPv4
	)
	if v6 {
		if len(hb) < header.IPv6MinimumSize || hb[0]>>4 != 6 {
			return false
		}
		ip := header.IPv6(hb)
		src, dst, ttl, p = ip.SourceAddress(), ip.DestinationAddress(), ip.HopLimit(), mpls.PayloadIPv6
	} else {
		if len(hb) < header.IPv4MinimumSize || hb[0]>>4 != 4 {
			return false
		}
		ip := header.IPv4(hb)
		src, dst, ttl = ip.SourceAddress(), ip.DestinationAddress(), ip.TTL()
	}
	if !st.transit(dst) {
		return false
	}
	// A link-local source never leaves its link (RFC 4291 §2.5.6).
	if _, own := st.local[src]; own || !icmp.SourceNamesOneHost(addrOf(src)) || addrOf(src).IsLinkLocalUnicast() {
		ls.drop(DropMartianSource, 1, 0)
		return true
	}
	dstAddr := addrOf(dst)
	// The whole header, contiguous, for the TTL rewrite and the ICMP quote.
	hl := header.IPv6MinimumSize
	if !v6 {
		hl = int(header.IPv4(hb).HeaderLength())
	}
	b, ok := data.PullUp(min(size, max(hl, icmpQuote)))
	if !ok || hl < header.IPv4MinimumSize || len(b) < hl {
		ls.drop(DropUnknownPayload, 1, 0)
		return true
	}
	r, ok := (*rp).Lookup(dstAddr, b)
	if !ok {
		ls.drop(DropNoRoute, 1, 0)
		ls.icmpError(st, in, v6, b, nil, icmpNoRoute, 0, 0)
		return true
	}
	if ttl <= 1 {
		ls.drop(DropTTLExpired, 1, 0)
		ls.icmpError(st, in, v6, b, nil, icmpTimeExceeded, 0, 0)
		return true
	}
	via := r.Via
	if !via.IsValid() {
		via = dstAddr
	}
	nh := ls.nextHop(st, r.Device, via)
	if nh == nil {
		if _, ok := st.byName[r.Device]; ok {
			ls.drop(DropNoNeighbor, 1, 0) // too many next hops
		} else {
			ls.drop(DropNoEgressLink, 1, 0)
		}
		return true
	}
	ipMTU := int(nh.ep.LinkMTU()) - len(r.Labels)*mpls.EntryLen
	if r.MTU != 0 && int(r.MTU) < ipMTU {
		ipMTU = int(r.MTU)
	}
	if size > ipMTU && (v6 || header.IPv4(b).Flags()&header.IPv4FlagDontFragment != 0 || ipMTU < header.IPv4MinimumMTU) {
		// The error quotes the packet as received (RFC 1812 §4.3.2.3).
		ls.drop(DropMTUExceeded, 1, 0)
		if ipMTU > 0 {
			ls.icmpError(st, in, v6, b, nil, icmpTooBig, uint32(ipMTU), 0)
		}
		return true
	}
	// RFC 1812 §5.3.1: decrement, fixing the IPv4 header checksum
	// incrementally (a wrong checksum stays wrong).
	outTTL := ttl - 1
	_ = mpls.PopTTL(mpls.TTLUniform, outTTL, p, b[:hl])
	typ := req.Proto
	if len(r.Labels) > 0 {
		typ = mplsendpoint.EthertypeMPLSUnicast
	}
	lttl := r.TTL
	if lttl == 0 {
		lttl = mpls.PushTTL(ls.ttlModel, outTTL, 0)
	}
	eg := egress{nh: nh, typ: typ, hdrLen: header.EthernetMinimumSize + len(r.Labels)*mpls.EntryLen,
		swap: len(r.Labels) > 0, out: r.Labels, ttl: lttl, hash: req.Packet.Hash, batched: req.Batched,
		csumValid: req.Packet.RXChecksumValidated, ip: true}
	if size > ipMTU {
		ls.fragmentIP(st, req, &eg, ipMTU)
		return true
	}
	buf := data.ToBuffer()
	ls.countAction(&eg)
	ls.emit(st, &eg, buf, 0)
	return true
}

// icmpQuote is how much of a transit packet the ICMP errors quote at most
// (Packet Too Big: up to the IPv6 minimum MTU).
const icmpQuote = header.IPv6MinimumMTU

// fragmentIP sends a transit IPv4 packet without DF that is larger than
// ipMTU, the IP MTU of its route, as fragments (RFC 791 §3.2), each sent
// alike; a header whose checksum fails is dropped (bad_checksum), one that
// cannot be split too (mtu_exceeded).
func (ls *Switch) fragmentIP(st *attached, req *mplsendpoint.IPForwardRequest, eg *egress, ipMTU int) {
	data := req.Packet.Data()
	b, ok := data.PullUp(data.Size())
	if !ok {
		ls.drop(DropMTUExceeded, 1, 0)
		return
	}
	if !header.IPv4(b).IsChecksumValid() {
		ls.drop(DropBadChecksum, 1, 0)
		return
	}
	frags, ok := fragmentIPv4(b, ipMTU)
	if !ok {
		ls.drop(DropMTUExceeded, 1, 0)
		return
	}
	ls.countAction(eg)
	ls.ctr.fragmented.Add(1)
	for _, f := range frags {
		ls.emit(st, eg, buffer.MakeWithData(f), 0)
	}
}

// transit reports whether dst is a unicast address of another host: not
// one of the node's, not multicast, broadcast or unspecified, not the
// broadcast address of a subnet the node is on, not IPv6 link-local (which
// is never forwarded).
func (st *attached) transit(dst tcpip.Address) bool {
	if _, local := st.local[dst]; local {
		return false
	}
	a := addrOf(dst)
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLinkLocalUnicast() &&
		!a.IsLoopback() && dst != header.IPv4Broadcast
}

// addrOf converts a without allocating (tcpip.Address.AsSlice does).
func addrOf(a tcpip.Address) netip.Addr {
	switch a.Len() {
	case 4:
		return netip.AddrFrom4(a.As4())
	case 16:
		return netip.AddrFrom16(a.As16())
	}
	return netip.Addr{}
}
