package forward

import (
	"net/netip"
	"slices"

	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
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

// Route is one transit route as the forwarding plane needs it (the
// reference's: verdict.Route).
type Route = verdict.Route

// Router looks up transit routes by longest prefix match (verdict.Router).
// Table is the plain implementation; FIBRouter routes by the node's FIB,
// with ECMP (Switch.SetRouter).
type Router = verdict.Router

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

// ForwardIP implements mplsendpoint.IPForwarder: the packet is decided by
// the reference (verdict.Tables.DecideIP: RFC 1812's header checks, source
// and destination rules and TTL, the route and its MTU) and the verdict
// carried out; a packet for this node, or one that is not unicast, is left
// to the stack (false), as every packet is while the switch has no router
// or no stack yet.
func (ls *Switch) ForwardIP(in *mplsendpoint.Endpoint, req *mplsendpoint.IPForwardRequest) bool {
	st := ls.st.Load()
	if st == nil || ls.router.Load() == nil {
		return false
	}
	if req.GSOMSS > 0 {
		return ls.forwardGSO(st, req)
	}
	data := req.Packet.Data()
	size := data.Size()
	b, ok := data.PullUp(min(size, ipLookahead))
	if !ok {
		return false
	}
	t := ls.tables(st, nil, 0)
	var v verdict.Verdict
	t.DecideIP(req.Proto == header.IPv6ProtocolNumber, b, size, &v)
	if v.Action == verdict.Local {
		return false
	}
	ls.carryOut(st, in, req.Packet, 0, b, &v, req.Batched)
	return true
}

// ipLookahead is how much of a transit IP packet the decision reads: the
// largest IPv4 header and the ports after it (the flow hash of ECMP).
const ipLookahead = header.IPv4MaximumHeaderSize + 8
