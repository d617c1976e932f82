package xdp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/mplsnode/mplsnode/mpls"
)

// FIBCapacity is the most prefixes of one family the program's FIB (an LPM
// trie per family) holds by default (Load; LoadFIB sets another). A family whose routes do not fit is not carried
// at all (SyncFIB): mirroring only part of it could forward a packet by a
// shorter prefix than the one userspace would choose.
const FIBCapacity = 65536

// RouteKind says what the program does with packets matching a Route.
type RouteKind uint8

// Route kinds; they mirror bpf/lsr.c's FIB_* kinds. Every kind but
// RouteForward passes the packet up, counted under its reason: these
// markers keep a prefix the program does not carry from falling through
// to a shorter one that it does.
const (
	// RouteForward is carried: one next hop, its MAC and egress known.
	RouteForward RouteKind = 1
	// RouteLocal is one of the node's addresses or an IPv4 subnet's
	// broadcast address (/32 or /128): its packets are the stack's
	// (counted local), and packets from it are martian_source.
	RouteLocal RouteKind = 2
	// RouteNotTransit is a range never forwarded (multicast, loopback,
	// link-local, unspecified, limited broadcast): not_transit.
	RouteNotTransit RouteKind = 3
	// RouteECMP has several next hops: userspace picks one per flow
	// (mpls.FlowHash): ecmp.
	RouteECMP RouteKind = 4
	// RouteNotCarried is left to userspace for another reason (a
	// deeper label stack than MaxOutLabels, an egress without the
	// program, a family over FIBCapacity): fib_not_carried.
	RouteNotCarried RouteKind = 5
	// RouteOnLink is an on-link prefix (a connected subnet): its hosts
	// whose MAC is resolved are carried as RouteForward /32 or /128
	// entries, the rest is passed up (no_neighbor).
	RouteOnLink RouteKind = 6
)

// Route is one entry of the program's FIB.
type Route struct {
	// Prefix is the destination, IPv4 or IPv6 (masked; not IPv4-mapped).
	Prefix netip.Prefix
	// Kind says whether the program carries it (RouteForward) or why
	// not.
	Kind RouteKind
	// Labels are pushed on the packet, outermost first (an LER's push);
	// empty for plain IP. More than MaxOutLabels are not carried.
	Labels []mpls.Label
	// LabelTTL is the TTL of pushed labels; 0 uses the decremented IP
	// TTL (the uniform model). The caller applies the TTL model and the
	// route's `ttl`.
	LabelTTL uint8
	// MTU caps the IP packet size (the route's `mtu lock`); 0 means the
	// egress link MTU less the pushed labels. Larger packets are passed
	// up (fragmented or answered with ICMP in userspace).
	MTU uint32
	// Egress is the egress link's interface index; it must be attached.
	Egress int
	// NextHopMAC is the next hop's MAC address; nil while unresolved.
	NextHopMAC net.HardwareAddr
}

// SyncFIB makes the program's FIB hold exactly routes: new and changed
// entries are written first (each map element replaced whole), then
// prefixes no longer present are deleted, so that a packet sees, prefix by
// prefix, either the old entry or the new one. A family with more than
// the program's FIB capacity (FIBCapacity unless loaded with LoadFIB) is replaced by a default marker (RouteNotCarried)
// plus its RouteLocal and RouteNotTransit entries: all its transit is
// passed up rather than part of it forwarded wrongly. It returns the
// number of RouteForward entries written.
func (p *Program) SyncFIB(routes []Route) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.syncFIBLocked(routes, false)
}

// capFIB returns routes with each family over capacity replaced as
// SyncFIB says.
func capFIB(routes []Route, capacity int) []Route {
	var n4, n6 int
	for _, r := range routes {
		if r.Prefix.Addr().Is4() {
			n4++
		} else {
			n6++
		}
	}
	if n4 <= capacity && n6 <= capacity {
		return routes
	}
	var out []Route
	over := func(a netip.Addr) bool { return a.Is4() && n4 > capacity || a.Is6() && n6 > capacity }
	for _, r := range routes {
		if !over(r.Prefix.Addr()) || r.Kind == RouteLocal || r.Kind == RouteNotTransit {
			out = append(out, r)
		}
	}
	if n4 > capacity {
		out = append(out, Route{Prefix: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Kind: RouteNotCarried})
	}
	if n6 > capacity {
		out = append(out, Route{Prefix: netip.PrefixFrom(netip.IPv6Unspecified(), 0), Kind: RouteNotCarried})
	}
	return out
}

func (p *Program) syncFIBLocked(routes []Route, force bool) (int, error) {
	routes = capFIB(routes, p.fibCap)
	want := make(map[netip.Prefix]lsrFibValue, len(routes))
	carried := 0
	for i := range routes {
		r := &routes[i]
		if !r.Prefix.IsValid() {
			continue
		}
		v := p.fibValue(r)
		want[r.Prefix.Masked()] = v
	}
	for _, v := range want {
		if v.Kind == uint8(RouteForward) && v.Flags&flagResolved != 0 {
			carried++
		}
	}
	var errs []error
	for pfx, v := range want {
		if prev, had := p.fib[pfx]; had && prev == v && !force {
			continue
		}
		if err := p.fibMap(pfx).Put(fibKey(pfx), v); err != nil {
			errs = append(errs, fmt.Errorf("XDP FIB %s: %w", pfx, err))
			delete(want, pfx) // not in the map: retried next sync
		}
	}
	for pfx := range p.fib {
		if _, keep := want[pfx]; !keep {
			if err := p.fibMap(pfx).Delete(fibKey(pfx)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, fmt.Errorf("XDP FIB %s: delete: %w", pfx, err))
				want[pfx] = p.fib[pfx]
			}
		}
	}
	p.fib = want
	p.routes = slices.Clone(routes)
	return carried, errors.Join(errs...)
}

func (p *Program) fibMap(pfx netip.Prefix) *ebpf.Map {
	if pfx.Addr().Is4() {
		return p.objs.Fib4
	}
	return p.objs.Fib6
}

// fibKey returns the LPM trie key of pfx (lsrFib4Key or lsrFib6Key).
func fibKey(pfx netip.Prefix) any {
	if pfx.Addr().Is4() {
		return lsrFib4Key{Prefixlen: uint32(pfx.Bits()), Addr: pfx.Addr().As4()}
	}
	return lsrFib6Key{Prefixlen: uint32(pfx.Bits()), Addr: pfx.Addr().As16()}
}

// fibValue returns r as the program's map value; a route the program
// cannot carry becomes a RouteNotCarried marker.
func (p *Program) fibValue(r *Route) lsrFibValue {
	v := lsrFibValue{Kind: uint8(r.Kind)}
	if r.Kind != RouteForward {
		return v
	}
	a, ok := p.links[r.Egress]
	if !ok || len(r.Labels) > MaxOutLabels {
		return lsrFibValue{Kind: uint8(RouteNotCarried)}
	}
	v.N_out = uint8(len(r.Labels))
	for i, l := range r.Labels {
		v.Out[i] = uint32(l)
	}
	v.LabelTtl = r.LabelTTL
	v.Ifindex = uint32(r.Egress)
	mtu := a.MTU - uint32(len(r.Labels))*mpls.EntryLen
	if a.MTU < uint32(len(r.Labels))*mpls.EntryLen {
		mtu = 0
	}
	if r.MTU != 0 && r.MTU < mtu {
		mtu = r.MTU
	}
	v.Mtu = mtu
	copy(v.Src[:], a.MAC)
	if len(r.NextHopMAC) == 6 {
		copy(v.Dst[:], r.NextHopMAC)
		v.Flags |= flagResolved
	}
	if a.egressOK {
		v.Flags |= flagEgressOK
	}
	return v
}

// SpecialRoutes are the markers of the address ranges never forwarded
// (RFC 1812 §5.3.7, RFC 4291): multicast, loopback, link-local,
// unspecified, IPv4 limited broadcast. The caller adds them to SyncFIB's
// routes, with its FIB routes inside them left out.
func SpecialRoutes() []Route {
	var out []Route
	for _, s := range []string{"224.0.0.0/4", "127.0.0.0/8", "169.254.0.0/16", "0.0.0.0/32", "255.255.255.255/32",
		"ff00::/8", "fe80::/10", "::1/128", "::/128"} {
		out = append(out, Route{Prefix: netip.MustParsePrefix(s), Kind: RouteNotTransit})
	}
	return out
}
