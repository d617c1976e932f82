package forward

import (
	"net/netip"

	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/mpls"
)

// FIBRouter is the Router over the node's FIB (mpls.Tables.FIB), the one
// the stack's own traffic leaves by (mplsendpoint.FIBEndpoint): each
// lookup reads the current snapshot, so transit and local traffic follow
// the same routes at every instant, and a route written through the
// tables (config load, reload, BGP) routes transit at once, with no
// second table to rebuild. A route with several next hops (ECMP) gives
// each flow one hop, chosen by the packet's 5-tuple (mpls.FlowHash,
// mpls.Group.Select): the frames of a flow never reorder.
//
// The FIB does not hold the connected subnets (gVisor routes them for the
// stack): they are on-link routes here; a FIB route at least as long as a
// connected subnet wins over it, as it does for the stack.
type FIBRouter struct {
	tables    *mpls.Tables
	connected *Table
	seed      uint32
	pipeTTL   uint8
}

// FIBRouterOptions configures a FIBRouter.
type FIBRouterOptions struct {
	// Tables holds the FIB; required.
	Tables *mpls.Tables
	// Connected are the on-link routes of the connected subnets (Prefix
	// and Device).
	Connected []Route
	// Seed varies the flow hash per node (against hash polarisation).
	Seed uint32
	// PipeTTL, when not 0, is the TTL of labels pushed by a route that sets
	// none (the configured pipe-model TTL); 0 leaves it to the Switch's TTL
	// model.
	PipeTTL uint8
}

// NewFIBRouter returns a Router over opts.Tables' FIB.
func NewFIBRouter(opts FIBRouterOptions) *FIBRouter {
	return &FIBRouter{tables: opts.Tables, connected: NewTable(opts.Connected), seed: opts.Seed, pipeTTL: opts.PipeTTL}
}

// Lookup implements Router: the longest match of the FIB and the
// connected subnets (the FIB's on a tie), the FIB route's next hop chosen
// by the flow hash of ip.
func (r *FIBRouter) Lookup(dst netip.Addr, ip []byte) (Route, bool) {
	dst = dst.Unmap()
	conn, connOK := r.connected.Lookup(dst, nil)
	e, ok := r.tables.FIB().Lookup(dst)
	if !ok || connOK && !verdict.FIBWins(e.Prefix, conn.Prefix) {
		return conn, connOK
	}
	h := &e.Group.Hops[0]
	if len(e.Group.Hops) > 1 {
		h = e.Group.Select(mpls.FlowHash(r.seed, ip))
	}
	out := Route{Prefix: e.Prefix, Device: h.Device, Via: h.Via, Labels: h.Labels, MTU: e.MTU, TTL: e.TTL}
	if out.TTL == 0 && len(h.Labels) > 0 {
		out.TTL = r.pipeTTL
	}
	return out, true
}
