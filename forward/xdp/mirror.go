package xdp

import (
	"errors"
	"iter"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/link/neighbor"
	"github.com/mplsnode/mplsnode/mpls"
)

// MirrorConfig is what the FIB mirror's policy is fixed by for a node's
// life.
type MirrorConfig struct {
	// Forward says the node forwards IP; without it the program carries
	// no transit at all (default markers).
	Forward bool
	// PipeTTL is the TTL of pushed labels of a route that sets none (the
	// pipe model's); 0 leaves the decremented IP TTL (uniform).
	PipeTTL uint8
	// Connected are the connected subnets (Prefix and Device): on-link
	// routes, not in the FIB.
	Connected []verdict.Route
	// Links are the links the program runs on, by name.
	Links map[string]Link
}

// Host is a neighbour whose MAC the neighbour table knows.
type Host struct {
	Addr netip.Addr
	MAC  net.HardwareAddr
}

// MirrorInput is what one sync of the FIB mirror reads besides its
// config: the node's FIB, its neighbours and its own addresses.
type MirrorInput struct {
	// FIB is the FIB to mirror.
	FIB *mpls.FIB
	// MAC returns a next hop's MAC on a link, nil while unresolved (the
	// caller starts its resolution).
	MAC func(dev string, addr netip.Addr) net.HardwareAddr
	// Hosts returns the resolved neighbours of a link, of one family.
	Hosts func(dev string, v6 bool) []Host
	// Locals are the node's own addresses and its IPv4 subnets' network
	// and broadcast addresses (forward.LocalAddrs).
	Locals []netip.Addr
}

// Mirror keeps the program's FIB in step with a node's FIB, connected
// hosts and own addresses, and owns the policy of what it holds
// (Routes): which routes the program carries and which it passes up.
// A sync writes only what changed: it compares the FIB with the one it
// last mirrored (copy-on-write snapshots: unchanged routes are unchanged
// entries) and the connected hosts and own addresses with the last
// ones, and writes the entries of the prefixes that differ. It walks the
// whole FIB (SyncFIBSeq) for its first sync, after an error, when a next
// hop's MAC changed, when a family is not carried, and when the change
// is a large part of the table. A Mirror is not safe for concurrent use.
type Mirror struct {
	prog    *Program
	cfg     MirrorConfig
	special []Route
	// walk says the next sync walks the FIB (the first, or one after an
	// error).
	walk bool
	// The last sync's inputs and result: the FIB mirrored, the connected
	// markers, hosts and own addresses (the layer above the FIB), the MAC
	// of each carried route's next hop ("" unresolved), the program's FIB
	// state.
	fib   *mpls.FIB
	above []Route
	hops  map[neighbor.Key]string
	state FIBState
}

// NewMirror returns a mirror of cfg's policy into prog's FIB (nil prog:
// the policy alone, Routes and ILMEntries).
func NewMirror(prog *Program, cfg MirrorConfig) *Mirror {
	return &Mirror{prog: prog, cfg: cfg, special: SpecialRoutes(), walk: true}
}

// Mirrored returns the FIB the last successful sync mirrored (nil
// before one, or after an error).
func (m *Mirror) Mirrored() *mpls.FIB {
	if m.walk {
		return nil
	}
	return m.fib
}

// SyncResult is what a FIB sync did.
type SyncResult struct {
	// State is what the program's FIB holds after the sync.
	State FIBState
	// Walked says the sync walked the whole FIB; Changed that it had
	// anything to compare (a new FIB, host or address, or a retry due).
	Walked, Changed bool
}

// Sync brings the program's FIB up to date with in, writing only what
// changed (see Mirror). An error leaves the next sync to walk the FIB.
func (m *Mirror) Sync(in MirrorInput) (SyncResult, error) {
	above := m.aboveRoutes(in)
	// A family left out after its map refused an entry is tried again
	// when its time comes.
	retry := !m.state.Retry.IsZero() && !time.Now().Before(m.state.Retry)
	if !m.walk && !retry && m.hopsSame(in.MAC) {
		if in.FIB == m.fib && slices.EqualFunc(above, m.above, sameRoute) {
			return SyncResult{State: m.state}, nil
		}
		err := m.update(in, above)
		if err == nil {
			m.fib, m.above = in.FIB, above
			return SyncResult{State: m.state, Changed: true}, nil
		}
		if !errors.Is(err, errWalk) {
			m.walk = true
			return SyncResult{State: m.state, Changed: true}, err
		}
	}
	return m.syncAll(in, above)
}

// syncAll mirrors the whole FIB (SyncFIBSeq).
func (m *Mirror) syncAll(in MirrorInput, above []Route) (SyncResult, error) {
	m.hops = map[neighbor.Key]string{}
	st, err := m.prog.SyncFIBSeq(m.routes(in.FIB, m.recordMAC(in.MAC), above))
	m.state, m.fib, m.above, m.walk = st, in.FIB, above, err != nil
	return SyncResult{State: st, Walked: true, Changed: true}, err
}

// recordMAC returns mac that also records each next hop's answer in
// m.hops (what hopsSame compares).
func (m *Mirror) recordMAC(mac func(dev string, addr netip.Addr) net.HardwareAddr) func(dev string, addr netip.Addr) net.HardwareAddr {
	return func(dev string, addr netip.Addr) net.HardwareAddr {
		a := mac(dev, addr)
		m.hops[neighbor.Key{Link: dev, Addr: addr}] = string(a)
		return a
	}
}

// hopsSame reports whether every next hop of the mirrored routes has the
// MAC it had when they were written.
func (m *Mirror) hopsSame(mac func(dev string, addr netip.Addr) net.HardwareAddr) bool {
	for k, a := range m.hops {
		if string(mac(k.Link, k.Addr)) != a {
			return false
		}
	}
	return true
}

// Routes returns the program's FIB for in (see Route): the ranges never
// forwarded, the node's FIB entries (single next hop: carried; several:
// ecmp, passed up), the connected subnets as on-link markers with a host
// entry for each resolved neighbour that the connected route is the
// longest match for, and the node's own addresses, which replace any
// entry of their prefix. With IP forwarding off, transit is not carried
// at all (default markers). The Route yielded is reused.
func (m *Mirror) Routes(in MirrorInput) iter.Seq[*Route] {
	return m.routes(in.FIB, in.MAC, m.aboveRoutes(in))
}

// routes is Routes with the layer above the FIB given.
func (m *Mirror) routes(fib *mpls.FIB, mac func(dev string, addr netip.Addr) net.HardwareAddr, above []Route) iter.Seq[*Route] {
	return func(yield func(*Route) bool) {
		for i := range m.special {
			if !yield(&m.special[i]) {
				return
			}
		}
		for r := range m.fibLayer(fib, mac) {
			if !yield(r) {
				return
			}
		}
		for i := range above {
			if !yield(&above[i]) {
				return
			}
		}
	}
}

// fibLayer yields the FIB's routes as the program holds them, or the
// default markers when the node does not forward IP. The Route yielded
// is reused.
func (m *Mirror) fibLayer(fib *mpls.FIB, mac func(dev string, addr netip.Addr) net.HardwareAddr) iter.Seq[*Route] {
	return func(yield func(*Route) bool) {
		var r Route
		if !m.cfg.Forward {
			for _, a := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
				r = Route{Prefix: netip.PrefixFrom(a, 0), Kind: RouteNotCarried}
				if !yield(&r) {
					return
				}
			}
			return
		}
		var run macRun
		for i := range fib.Len() {
			e := fib.Entry(i)
			if m.inSpecial(e.Prefix) {
				continue
			}
			r = m.fibRoute(e, mac, &run)
			if !yield(&r) {
				return
			}
		}
	}
}

// inSpecial reports whether a range never forwarded covers p: the FIB's
// routes inside one are left out (its marker stays).
func (m *Mirror) inSpecial(p netip.Prefix) bool {
	for _, s := range m.special {
		if s.Prefix.Bits() <= p.Bits() && s.Prefix.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// macRun is the MAC of the last next-hop group looked up: routes share
// groups (a million routes over a few neighbours), consecutive ones
// often the same, and their MAC is looked up once a run.
type macRun struct {
	group *mpls.Group
	mac   net.HardwareAddr
}

// fibRoute returns FIB entry e as the program holds it: carried with one
// next hop on an attached link, else a marker of why not.
func (m *Mirror) fibRoute(e *mpls.FIBEntry, mac func(dev string, addr netip.Addr) net.HardwareAddr, run *macRun) Route {
	r := Route{Prefix: e.Prefix, Kind: RouteForward, MTU: e.MTU}
	h := &e.Group.Hops[0]
	l, attached := m.cfg.Links[h.Device]
	switch {
	case len(e.Group.Hops) > 1:
		r.Kind = RouteECMP
	case !attached || len(h.Labels) > MaxOutLabels:
		r.Kind = RouteNotCarried
	case !h.Via.IsValid() && len(h.Labels) == 0:
		r.Kind = RouteOnLink
	case !h.Via.IsValid():
		r.Kind = RouteNotCarried
	default:
		r.Egress = l.Index
		r.Labels = h.Labels
		if e.Group != run.group {
			run.group, run.mac = e.Group, mac(h.Device, h.Via)
		}
		r.NextHopMAC = run.mac
		if len(h.Labels) > 0 {
			r.LabelTTL = e.TTL
			if r.LabelTTL == 0 {
				r.LabelTTL = m.cfg.PipeTTL
			}
		}
	}
	return r
}

// aboveRoutes returns the routes that replace the FIB's of the same
// prefix: the connected subnets' markers and resolved hosts the FIB does
// not beat, then the node's own addresses; one route a prefix (the later
// wins), in that order.
func (m *Mirror) aboveRoutes(in MirrorInput) []Route {
	var out []Route
	if m.cfg.Forward {
		for _, c := range m.cfg.Connected {
			out = m.appendConnected(out, in, c)
		}
	}
	for _, a := range in.Locals {
		out = append(out, Route{Prefix: netip.PrefixFrom(a, a.BitLen()), Kind: RouteLocal})
	}
	return dedupRoutes(out)
}

// appendConnected appends connected subnet c's on-link marker (unless
// the FIB holds the same prefix: a tie, which the FIB wins) and a host
// route for each of its resolved neighbours that no FIB route beats.
func (m *Mirror) appendConnected(out []Route, in MirrorInput, c verdict.Route) []Route {
	fib := in.FIB
	if e, ok := fib.Lookup(c.Prefix.Addr()); !ok || e.Prefix != c.Prefix || !verdict.FIBWins(e.Prefix, c.Prefix) {
		out = append(out, Route{Prefix: c.Prefix, Kind: RouteOnLink})
	}
	l, attached := m.cfg.Links[c.Device]
	if !attached || in.Hosts == nil {
		return out
	}
	for _, h := range in.Hosts(c.Device, c.Prefix.Addr().Is6()) {
		if !c.Prefix.Contains(h.Addr) {
			continue
		}
		if e, ok := fib.Lookup(h.Addr); ok && verdict.FIBWins(e.Prefix, c.Prefix) {
			continue
		}
		out = append(out, Route{Prefix: netip.PrefixFrom(h.Addr, h.Addr.BitLen()), Kind: RouteForward,
			Egress: l.Index, NextHopMAC: h.MAC})
	}
	return out
}

// dedupRoutes keeps the last route of each prefix, sorted by prefix (a
// neighbour table answers in a map's order; sorted, two syncs' routes
// compare).
func dedupRoutes(rs []Route) []Route {
	at := make(map[netip.Prefix]int, len(rs))
	out := rs[:0]
	for _, r := range rs {
		if i, dup := at[r.Prefix]; dup {
			out[i] = r
			continue
		}
		at[r.Prefix] = len(out)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Route) int { return a.Prefix.Compare(b.Prefix) })
	return out
}

// sameRoute reports whether a and b are the same program FIB entry.
func sameRoute(a, b Route) bool {
	return a.Prefix == b.Prefix && a.Kind == b.Kind && slices.Equal(a.Labels, b.Labels) && a.LabelTTL == b.LabelTTL &&
		a.MTU == b.MTU && a.Egress == b.Egress && string(a.NextHopMAC) == string(b.NextHopMAC)
}

// ILMEntries returns the ILM entries the program carries, with the
// number whose next hop mac resolved: swaps and pops-and-forwards on an
// attached link, and multipath entries as ecmp (the program passes their
// frames up: the flow hash that keeps a flow on one hop is userspace's,
// so no hop of theirs is mirrored as if it were the only one).
func (m *Mirror) ILMEntries(ilm []mpls.ILMEntry, mac func(dev string, addr netip.Addr) net.HardwareAddr) (entries []Entry, resolved int) {
	for _, e := range ilm {
		if e.Action == mpls.ILMMultipath {
			entries = append(entries, Entry{Label: e.Label, Action: e.Action})
			continue
		}
		l, ok := m.cfg.Links[e.Device]
		if !ok || (e.Action != mpls.ILMSwap && e.Action != mpls.ILMPopForward) {
			continue
		}
		fe := Entry{Label: e.Label, Action: e.Action, OutLabels: e.OutLabels, Payload: e.Payload, Egress: l.Index}
		if a := mac(e.Device, e.NextHop); a != nil {
			fe.NextHopMAC = a
			resolved++
		}
		entries = append(entries, fe)
	}
	return entries, resolved
}

// NextHops returns the next hops of fib's routes the program would carry
// (one hop, a neighbour on an attached link), once each: what to resolve
// before a first sync, so that their routes are not written twice.
func (m *Mirror) NextHops(fib *mpls.FIB) []neighbor.Key {
	if !m.cfg.Forward {
		return nil
	}
	seen := map[neighbor.Key]bool{}
	var out []neighbor.Key
	var last *mpls.Group
	for i := range fib.Len() {
		e := fib.Entry(i)
		if e.Group == last || len(e.Group.Hops) > 1 {
			continue
		}
		last = e.Group
		h := &e.Group.Hops[0]
		k := neighbor.Key{Link: h.Device, Addr: h.Via}
		if _, ok := m.cfg.Links[h.Device]; ok && h.Via.IsValid() && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
