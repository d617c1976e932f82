package stack

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
)

// fibNICName names the FIB's NIC in gVisor; ':' is not allowed in an
// interface name, so it cannot clash with a link.
const fibNICName = ":fib"

// addFIBNIC creates the NIC behind the default routes: an
// mplsendpoint.FIBEndpoint that routes by the FIB and writes on the links.
//
// gVisor takes a route out of one NIC for a packet whose source address
// belongs to another only when both have IP forwarding on (Route's
// isValidForOutgoing), and every packet the FIB NIC carries is such a
// packet: so forwarding is on for every NIC, whatever Config.Forwarding
// says. A node that does not forward is still a host: the FIB NIC drops
// what the stack would forward through it (FIBOptions.Forwarding), and its
// links' MPLS endpoints keep Options.Forwarding off; what remains is IP
// sent to its MAC address for another host on a connected subnet, which
// gVisor sends back out. With an IPForwarder, transit is the forwarding
// plane's: the FIB NIC drops what gVisor would forward all the same.
func (s *Stack) addFIBNIC(id tcpip.NICID, cfg Config) error {
	s.fib = mplsendpoint.NewFIB(mplsendpoint.FIBOptions{
		Tables: s.tables,
		Resolve: func(nic tcpip.NICID, addr tcpip.Address, proto tcpip.NetworkProtocolNumber, onResolve func(gstack.LinkResolutionResult)) tcpip.Error {
			return s.ns.GetLinkAddress(nic, addr, tcpip.Address{}, proto, onResolve)
		},
		Seed:       MultipathSeed(cfg.MultipathHashSeed),
		GSOMode:    cfg.GSO,
		Forwarding: cfg.gvisorForwards(),
	})
	links := make(map[string]*mplsendpoint.FIBLink, len(s.links))
	var first *mplsendpoint.Endpoint
	for _, l := range s.links {
		links[l.Name] = &mplsendpoint.FIBLink{Endpoint: l.endpoint, NIC: l.nic}
		if first == nil {
			first = l.endpoint
		}
	}
	s.fib.SetLinks(links, first)
	if terr := s.ns.CreateNICWithOptions(id, s.fib, gstack.NICOptions{Name: fibNICName}); terr != nil {
		return fmt.Errorf("create the FIB NIC: %s", terr)
	}
	s.fibNIC = id
	for _, p := range []tcpip.NetworkProtocolNumber{ipv4.ProtocolNumber, ipv6.ProtocolNumber} {
		for nic := tcpip.NICID(1); nic <= id; nic++ {
			if _, terr := s.ns.SetNICForwarding(nic, p, true); terr != nil {
				return fmt.Errorf("NIC %d forwarding: %s", nic, terr)
			}
		}
	}
	return nil
}

// SetRoutes replaces every route (IP and labelled) at once. Connections keep
// running; packets already queued leave by the old routes. On error the old
// routes stay.
func (s *Stack) SetRoutes(routes []Route) error {
	mr, err := toMPLSRoutes(routes)
	if err != nil {
		return err
	}
	return routeErr(s.tables.ReplaceRoutes(mr))
}

// UpdateRoutes removes the routes to the prefixes in del, then adds those
// in add (replacing routes to the same prefixes), in one change. It costs
// about the change's size (mpls.FIB.Update), so a route at a time is
// fine; a batch is one change for readers.
func (s *Stack) UpdateRoutes(add []Route, del []netip.Prefix) error {
	mr, err := toMPLSRoutes(add)
	if err != nil {
		return err
	}
	return routeErr(s.tables.UpdateRoutes(mr, del))
}

// AddRoute adds one route; a route to the same prefix is replaced.
func (s *Stack) AddRoute(r Route) error { return s.UpdateRoutes([]Route{r}, nil) }

// RemoveRoute removes the route to prefix; it reports whether there was one.
func (s *Stack) RemoveRoute(prefix netip.Prefix) bool {
	if e, ok := s.tables.FIB().Lookup(prefix.Addr()); !ok || e.Prefix != prefix {
		return false
	}
	return s.tables.UpdateRoutes(nil, []netip.Prefix{prefix}) == nil
}

// Routes returns a copy of the current routes (a one-hop route with Via,
// Link and Labels set, a multipath one with NextHops), in the order they
// were given.
func (s *Stack) Routes() []Route {
	fib := s.tables.FIB()
	out := make([]Route, fib.Len())
	for i := range out {
		e := fib.Entry(i)
		r := Route{Prefix: e.Prefix, MTU: e.MTU, TTL: e.TTL}
		if hops := e.Group.Hops; len(hops) == 1 {
			r.Via, r.Link, r.Labels = hops[0].Via, hops[0].Device, slices.Clone(hops[0].Labels)
		} else {
			r.NextHops = slices.Clone(hops)
		}
		out[i] = r
	}
	return out
}

// toMPLSRoutes converts routes to the FIB's form.
func toMPLSRoutes(routes []Route) ([]mpls.Route, error) {
	out := make([]mpls.Route, len(routes))
	// One backing array for the one-hop routes: a million routes make one
	// allocation, not a million.
	hops := make([]mpls.NextHop, len(routes))
	for i := range routes {
		r := &routes[i]
		m := mpls.Route{Prefix: r.Prefix, MTU: r.MTU, TTL: r.TTL}
		if len(r.NextHops) > 0 {
			if r.Via.IsValid() || r.Link != "" || len(r.Labels) > 0 {
				return nil, fmt.Errorf("route %s: give its next hops in NextHops or in Via, Link and Labels, not both", r.Prefix)
			}
			m.NextHops = slices.Clone(r.NextHops)
		} else {
			hops[i] = mpls.NextHop{Via: r.Via, Device: r.Link, Labels: r.Labels}
			m.NextHops = hops[i : i+1 : i+1]
		}
		out[i] = m
	}
	return out, nil
}

// routeErr rewrites an mpls table error as "route PREFIX: what".
func routeErr(err error) error {
	var te *mpls.TableError
	if errors.As(err, &te) {
		return fmt.Errorf("route %s: %w", te.Key, te.Err)
	}
	return err
}

// checkRoute is the FIB's route check (mpls.Tables.SetRouteCheck): every
// hop leaves by one of the stack's links (filling in Device from the
// connected subnet of Via when it is empty), and the route's MTU fits
// each hop's link with its labels.
func (s *Stack) checkRoute(r *mpls.Route) error {
	for i := range r.NextHops {
		h := &r.NextHops[i]
		l, err := s.egressLink(h.Device, h.Via)
		if err != nil {
			return err
		}
		h.Device = l.Name
		if r.MTU != 0 {
			linkMTU := l.endpoint.LinkMTU()
			ipMTU := linkMTU - uint32(len(h.Labels))*mpls.EntryLen
			if r.MTU > ipMTU {
				return fmt.Errorf("mtu %d does not fit link %s (MTU %d) with %d label(s); at most %d",
					r.MTU, l.Name, linkMTU, len(h.Labels), ipMTU)
			}
		}
	}
	return nil
}

// egressLink finds the link a next hop leaves by.
func (s *Stack) egressLink(dev string, via netip.Addr) (*link, error) {
	if dev != "" {
		l, ok := s.byName[dev]
		if !ok {
			return nil, fmt.Errorf("no link named %q", dev)
		}
		return l, nil
	}
	if !via.IsValid() {
		return nil, errors.New("needs a next hop (via) or a link")
	}
	for _, l := range s.links {
		for _, p := range l.addrs {
			if p.Contains(via) {
				return l, nil
			}
		}
	}
	return nil, fmt.Errorf("next hop %s is on none of the links' prefixes; name the link", via)
}

// syncRouteTable is the FIB's publish hook: it gives gVisor the small
// route table the stack's own traffic needs (see the package doc,
// "Routes"): each link's connected subnets on that link, the FIB's routes
// that lie inside a connected subnet (towards the FIB NIC, so that they
// win over the subnet), and default routes to the FIB NIC. The table is
// set again only when it changes.
func (s *Stack) syncRouteTable(fib *mpls.FIB) {
	var table []tcpip.Route
	var connected []netip.Prefix
	for _, l := range s.links {
		for _, p := range l.addrs {
			connected = append(connected, p.Masked())
		}
	}
	// The FIB's routes inside a connected subnet, each once (subnets may
	// nest), in prefix order: found by a range search each (Within), not
	// a walk of a full table on every change.
	var inside []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for _, c := range connected {
		for e := range fib.Within(c) {
			if !seen[e.Prefix] {
				seen[e.Prefix] = true
				inside = append(inside, e.Prefix)
			}
		}
	}
	slices.SortFunc(inside, netip.Prefix.Compare)
	for _, p := range inside {
		table = append(table, tcpip.Route{Destination: subnetOf(p), NIC: s.fibNIC})
	}
	// Connected subnets after the FIB's routes of equal length: gVisor
	// takes the first match, and an explicit route wins.
	for _, l := range s.links {
		for _, p := range l.addrs {
			table = append(table, tcpip.Route{Destination: subnetOf(p.Masked()), NIC: l.nic})
		}
	}
	table = append(table, s.loopbackRoutes()...)
	if s.fibNIC != 0 {
		table = append(table,
			tcpip.Route{Destination: subnetOf(netip.PrefixFrom(netip.IPv4Unspecified(), 0)), NIC: s.fibNIC},
			tcpip.Route{Destination: subnetOf(netip.PrefixFrom(netip.IPv6Unspecified(), 0)), NIC: s.fibNIC})
	}
	sortRoutes(table)
	if slices.EqualFunc(table, s.gvisorRoutes, func(a, b tcpip.Route) bool { return a.Equal(b) }) {
		return
	}
	s.gvisorRoutes = table
	s.ns.SetRouteTable(table)
}

// GVisorRouteCount returns the number of routes in gVisor's route table:
// the connected subnets, the FIB routes inside them and two defaults,
// whatever the size of the FIB.
func (s *Stack) GVisorRouteCount() int { return len(s.ns.GetRouteTable()) }

// sortRoutes orders the table longest prefix first: gVisor takes the first
// matching row.
func sortRoutes(t []tcpip.Route) {
	slices.SortStableFunc(t, func(a, b tcpip.Route) int {
		return b.Destination.Prefix() - a.Destination.Prefix()
	})
}

// sourceFor returns the source address Linux would pick for dst: the
// primary address, of dst's family, of the link the FIB's route to dst
// leaves by (any link's, for a 6PE route over a link without one). It
// returns the invalid Addr when dst is on a connected subnet or has no
// route, leaving the choice to gVisor.
func (s *Stack) sourceFor(dst netip.Addr) netip.Addr {
	dst = dst.Unmap()
	if dst.IsLoopback() {
		return netip.Addr{} // the loopback NIC's own address
	}
	e, ok := s.tables.FIB().Lookup(dst)
	if !ok {
		return netip.Addr{}
	}
	for _, l := range s.links {
		for _, p := range l.addrs {
			if p.Contains(dst) && p.Bits() > e.Prefix.Bits() {
				return netip.Addr{}
			}
		}
	}
	pick := func(l *link) netip.Addr {
		for _, p := range l.addrs {
			if p.Addr().Is4() == dst.Is4() {
				return p.Addr()
			}
		}
		return netip.Addr{}
	}
	if l, ok := s.byName[e.Group.Hops[0].Device]; ok {
		if a := pick(l); a.IsValid() {
			return a
		}
	}
	for _, l := range s.links {
		if a := pick(l); a.IsValid() {
			return a
		}
	}
	for _, a := range s.loAddrs {
		if a.Is4() == dst.Is4() {
			return a
		}
	}
	return netip.Addr{}
}

// MultipathSeed returns seed, or a random non-zero seed when it is 0
// (Config.MultipathHashSeed): the flow hash seed of multipath routes.
func MultipathSeed(seed uint32) uint32 {
	for seed == 0 {
		seed = uint32(new(maphash.Hash).Sum64())
	}
	return seed
}
