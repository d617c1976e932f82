package node

import (
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/stack"
)

// Administrative distances: when the config file (static) and BGP both
// have a route to a prefix, the lower distance wins, as in FRR and Cisco
// IOS; the other route shows again when the winner goes.
const (
	DistanceStatic = 1
	DistanceBGP    = 20
)

// bgpConfig converts the file's bgp lines for package bgp: each
// neighbour's session runs from the node's address on the neighbour's
// subnet, and the routes advertised to it carry the node's addresses on
// that link as next hops.
func bgpConfig(cfg *config.Config) (bgp.Config, error) {
	b := cfg.BGP
	bc := bgp.Config{
		AS: b.AS, RouterID: b.RouterID,
		LabelLow: mpls.Label(b.LabelLow), LabelHigh: mpls.Label(b.LabelHigh),
	}
	var errs config.ErrorList
	for _, n := range b.Neighbors {
		bn := bgp.Neighbor{Address: n.Address, RemoteAS: n.RemoteAS, NextHopSelf: n.NextHopSelf, HoldTime: n.HoldTime}
		for _, f := range n.Families {
			switch f {
			case config.IPv4LabeledUnicast:
				bn.Families = append(bn.Families, bgp.IPv4LabeledUnicast)
			case config.IPv6LabeledUnicast:
				bn.Families = append(bn.Families, bgp.IPv6LabeledUnicast)
			}
		}
		dev := ""
		for _, a := range cfg.Addrs {
			if a.Dev != config.LoopbackDev && a.Prefix.Masked().Contains(n.Address) {
				if a.Prefix.Addr() == n.Address {
					errs = append(errs, n.AddressPos.Errorf(n.Address.String(), "bgp neighbor %s is the node's own address (%s)", n.Address, a.Pos))
				}
				bn.Local, dev = a.Prefix.Addr(), a.Dev
				break
			}
		}
		if dev == "" {
			errs = append(errs, n.AddressPos.Errorf(n.Address.String(),
				"bgp neighbor %s is on none of the node's subnets; sessions run to directly connected neighbours (add an address on its link)", n.Address))
			continue
		}
		for _, a := range cfg.Addrs {
			if a.Dev != dev {
				continue
			}
			ip := a.Prefix.Addr()
			switch {
			case ip.Is4() && !bn.NextHop4.IsValid():
				bn.NextHop4 = ip
			case ip.Is6() && !ip.IsLinkLocalUnicast() && !bn.NextHop6.IsValid():
				bn.NextHop6 = ip
			}
		}
		if bn.NextHop4.IsValid() && !bn.NextHop6.IsValid() {
			// No IPv6 address on the link: IPv6 routes go as 6PE (RFC
			// 4798 §3), their next hop the IPv4-mapped address.
			bn.NextHop6 = netip.AddrFrom16(bn.NextHop4.As16())
		}
		bc.Neighbors = append(bc.Neighbors, bn)
	}
	for _, nw := range b.Networks {
		bn := bgp.Network{Prefix: nw.Prefix, Label: mpls.Label(nw.Label)}
		switch nw.Mode {
		case config.BGPLabelExplicitNull:
			bn.Mode = bgp.LabelExplicitNull
		case config.BGPLabelImplicitNull:
			bn.Mode = bgp.LabelImplicitNull
		case config.BGPLabelFixed:
			bn.Mode = bgp.LabelFixed
		default:
			bn.Mode = bgp.LabelFromRange
		}
		bc.Networks = append(bc.Networks, bn)
	}
	if len(errs) > 0 {
		return bc, errs
	}
	return bc, nil
}

// connected is one of the node's subnets.
type connected struct {
	prefix netip.Prefix // masked
	self   netip.Addr
	dev    string
}

// bgpTables adapts the node's tables to bgp.Tables: it keeps the static
// routes (from the file) and BGP's routes apart and writes their union to
// the FIB, static first (DistanceStatic < DistanceBGP). It is the one
// place that knows how BGP's routes reach the tables, so that it can be
// pointed at another forwarding API without touching package bgp.
//
// A BGP batch is written as a change (mpls.Tables.UpdateRoutes: the
// prefixes it touches), never as the whole set again, and never to
// gVisor's route table (a list, quadratic to fill): a batch costs about
// its own size (the FIB takes it into its delta). The forwarding plane routes
// transit by the same FIB (forward.FIBRouter), so it needs no telling.
type bgpTables struct {
	st     *stack.Stack
	tables *mpls.Tables
	conn   []connected

	mu        sync.Mutex
	static    []mpls.Route
	staticILM []mpls.ILMEntry
	// staticAt indexes static by prefix.
	staticAt map[netip.Prefix]int
	routes   map[netip.Prefix]mpls.Route  // BGP's
	ilm      map[mpls.Label]mpls.ILMEntry // BGP's
	// shadowed counts BGP routes hidden by a static route to their prefix.
	shadowed int
}

var _ bgp.Tables = (*bgpTables)(nil)

func newBGPTables(st *stack.Stack, cfg *config.Config, c *converted) *bgpTables {
	t := &bgpTables{st: st, tables: st.Tables(), routes: map[netip.Prefix]mpls.Route{}, ilm: map[mpls.Label]mpls.ILMEntry{}}
	for _, a := range cfg.Addrs {
		if a.Dev != config.LoopbackDev {
			t.conn = append(t.conn, connected{prefix: a.Prefix.Masked(), self: a.Prefix.Addr(), dev: a.Dev})
		}
	}
	t.setStaticLocked(c.routes(cfg), slices.Clone(c.ilm))
	return t
}

// effectiveLocked returns the route written to prefix p, for Resolve:
// the static one, else BGP's. The written set is not kept as a map of its
// own: with a full table it would be a third copy of every BGP route.
func (t *bgpTables) effectiveLocked(p netip.Prefix) (mpls.Route, bool) {
	if i, ok := t.staticAt[p]; ok {
		return t.static[i], true
	}
	if e, ok := t.routes[p]; ok {
		return e, true
	}
	return mpls.Route{}, false
}

// setStaticLocked sets the static routes and label routes, without
// writing them.
func (t *bgpTables) setStaticLocked(routes []mpls.Route, ilm []mpls.ILMEntry) {
	t.static, t.staticILM = routes, ilm
	t.staticAt = make(map[netip.Prefix]int, len(routes))
	for i, r := range routes {
		if _, dup := t.staticAt[r.Prefix]; !dup {
			t.staticAt[r.Prefix] = i
		}
	}
}

// setStatic replaces the static routes and label routes (a reload) and
// writes the union again. Its errors are the FIB's (*mpls.TableError,
// Index into routes) or the ILM's.
func (t *bgpTables) setStatic(routes []mpls.Route, ilm []mpls.ILMEntry) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	oldR, oldI := t.static, t.staticILM
	t.setStaticLocked(routes, slices.Clone(ilm))
	if err := t.writeAllLocked(); err != nil {
		t.setStaticLocked(oldR, oldI)
		_ = t.writeAllLocked() // the previous set, which the tables took
		return err
	}
	return nil
}

// Apply implements bgp.Tables. It records the batch in BGP's routes and
// labels, then writes what changed; if the tables refuse the result, the
// batch is undone: one bad entry must not poison every later batch.
func (t *bgpTables) Apply(ch bgp.Changes) error {
	if len(ch.AddRoutes)+len(ch.DelRoutes)+len(ch.AddILM)+len(ch.DelILM) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.recordLocked(ch)
	add, del := t.fibChangeLocked(old.routes)
	if len(add)+len(del) > 0 {
		if err := t.tables.UpdateRoutes(add, del); err != nil {
			t.restoreLocked(old) // the FIB did not change
			return err
		}
	}
	if len(old.ilm) > 0 {
		if err := t.writeILMLocked(); err != nil {
			t.restoreLocked(old)
			_ = t.writeAllLocked() // the previous set, which the tables took
			return err
		}
	}
	t.countShadowedLocked(old.routes)
	return nil
}

// bgpSaved is what a batch touched, as it was before the batch.
type bgpSaved struct {
	routes map[netip.Prefix]savedRoute
	ilm    map[mpls.Label]savedILM
}

// savedRoute is BGP's route to a prefix before a batch; had is false when
// BGP had none.
type savedRoute struct {
	route mpls.Route
	had   bool
}

// savedILM is BGP's entry for a label before a batch; had is false when
// BGP had none.
type savedILM struct {
	entry mpls.ILMEntry
	had   bool
}

// recordLocked applies ch to BGP's routes and labels and returns what
// they held before.
func (t *bgpTables) recordLocked(ch bgp.Changes) bgpSaved {
	old := bgpSaved{
		routes: make(map[netip.Prefix]savedRoute, len(ch.DelRoutes)+len(ch.AddRoutes)),
		ilm:    make(map[mpls.Label]savedILM, len(ch.DelILM)+len(ch.AddILM)),
	}
	saveRoute := func(p netip.Prefix) {
		if _, ok := old.routes[p]; !ok {
			e, had := t.routes[p]
			old.routes[p] = savedRoute{e, had}
		}
	}
	saveLabel := func(l mpls.Label) {
		if _, ok := old.ilm[l]; !ok {
			e, had := t.ilm[l]
			old.ilm[l] = savedILM{e, had}
		}
	}
	for _, p := range ch.DelRoutes {
		saveRoute(p)
		delete(t.routes, p)
	}
	for _, l := range ch.DelILM {
		saveLabel(l)
		delete(t.ilm, l)
	}
	for _, e := range ch.AddRoutes {
		saveRoute(e.Prefix)
		t.routes[e.Prefix] = e
	}
	for _, e := range ch.AddILM {
		saveLabel(e.Label)
		t.ilm[e.Label] = e
	}
	return old
}

// restoreLocked puts back BGP's routes and labels as old saved them.
func (t *bgpTables) restoreLocked(old bgpSaved) {
	for p, e := range old.routes {
		if !e.had {
			delete(t.routes, p)
		} else {
			t.routes[p] = e.route
		}
	}
	for l, e := range old.ilm {
		if !e.had {
			delete(t.ilm, l)
		} else {
			t.ilm[l] = e.entry
		}
	}
}

// fibChangeLocked returns the FIB change for the prefixes a batch touched
// (oldRoutes, as recordLocked saved them): each one without a static route
// gets BGP's route, or loses its route when BGP has none left.
func (t *bgpTables) fibChangeLocked(oldRoutes map[netip.Prefix]savedRoute) (add []mpls.Route, del []netip.Prefix) {
	for p, was := range oldRoutes {
		if _, ok := t.staticAt[p]; ok {
			continue // shadowed before and after
		}
		if e, ok := t.routes[p]; ok {
			add = append(add, e)
		} else if was.had {
			del = append(del, p)
		}
	}
	return add, del
}

// countShadowedLocked keeps the count of BGP routes hidden by a static
// route in step with a written batch (oldRoutes, as recordLocked saved
// them).
func (t *bgpTables) countShadowedLocked(oldRoutes map[netip.Prefix]savedRoute) {
	if len(t.staticAt) == 0 {
		return
	}
	for p, was := range oldRoutes {
		if _, ok := t.staticAt[p]; ok {
			_, now := t.routes[p]
			switch {
			case !was.had && now:
				t.shadowed++
			case was.had && !now:
				t.shadowed--
			}
		}
	}
}

// writeAllLocked writes static ∪ BGP to the FIB at once, and the ILM.
func (t *bgpTables) writeAllLocked() error {
	all := slices.Clone(t.static)
	shadowed := 0
	for p, e := range t.routes {
		if _, ok := t.staticAt[p]; ok {
			shadowed++
			continue
		}
		all = append(all, e)
	}
	if err := t.tables.ReplaceRoutes(all); err != nil {
		return err
	}
	t.shadowed = shadowed
	return t.writeILMLocked()
}

// writeILMLocked writes the static label routes and BGP's.
func (t *bgpTables) writeILMLocked() error {
	ilm := slices.Clone(t.staticILM)
	for _, l := range slices.Sorted(maps.Keys(t.ilm)) {
		ilm = append(ilm, t.ilm[l])
	}
	return t.st.SetILM(ilm)
}

// maxResolveDepth bounds recursive next-hop resolution.
const maxResolveDepth = 8

// Resolve implements bgp.Tables.
func (t *bgpTables) Resolve(nh netip.Addr) (bgp.Resolution, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.resolveLocked(nh, 0)
}

func (t *bgpTables) resolveLocked(nh netip.Addr, depth int) (bgp.Resolution, bool) {
	if depth > maxResolveDepth || !nh.IsValid() {
		return bgp.Resolution{}, false
	}
	for _, c := range t.conn {
		if c.prefix.Contains(nh) {
			if c.self == nh {
				return bgp.Resolution{}, false
			}
			return bgp.Resolution{Via: nh, Device: c.dev}, true
		}
	}
	for bits := nh.BitLen(); bits >= 0; bits-- {
		p, _ := nh.Prefix(bits)
		route, ok := t.effectiveLocked(p)
		if !ok || len(route.NextHops) == 0 {
			continue
		}
		r := route.NextHops[0] // of a multipath route, the first hop
		if len(r.Labels) > 0 {
			via := r.Via
			if !via.IsValid() {
				via = nh
			}
			dev := r.Device
			if dev == "" {
				if res, ok := t.resolveLocked(via, depth+1); ok {
					dev = res.Device
				}
			}
			return bgp.Resolution{Via: via, Device: dev, Labels: slices.Clone(r.Labels)}, true
		}
		if !r.Via.IsValid() {
			return bgp.Resolution{Via: nh, Device: r.Device}, r.Device != ""
		}
		return t.resolveLocked(r.Via, depth+1)
	}
	return bgp.Resolution{}, false
}

// RouteEntry is one route as `mplsnode route show` prints it.
type RouteEntry struct {
	Prefix string   `json:"prefix"`
	Labels []uint32 `json:"labels,omitempty"`
	Via    string   `json:"via,omitempty"`
	Dev    string   `json:"dev,omitempty"`
	// TTL, when not zero, is the TTL of the pushed labels.
	TTL uint8 `json:"ttl,omitempty"`
	// MTU, when not zero, is the route's IP MTU.
	MTU uint32 `json:"mtu,omitempty"`
	// NextHops are a multipath route's hops (Labels, Via and Dev are
	// empty then).
	NextHops []RouteHop `json:"nexthops,omitempty"`
	Protocol string     `json:"protocol"`
	Distance int        `json:"distance"`
	// Scope is "link" for a connected route (the subnet of an address),
	// as ip route shows it; empty for the others.
	Scope string `json:"scope,omitempty"`
}

// RouteHop is one next hop of a multipath route in RouteEntry.
type RouteHop struct {
	Labels []uint32 `json:"labels,omitempty"`
	Via    string   `json:"via,omitempty"`
	Dev    string   `json:"dev,omitempty"`
	Weight int      `json:"weight"`
}

// Protocol and distance of a connected route, as ip route and routers
// show them.
const (
	protoConnected    = "kernel"
	distanceConnected = 0
)

// String returns r in iproute2's words, which the config parser takes
// after "route add ".
func (r RouteEntry) String() string {
	var b strings.Builder
	b.WriteString(r.Prefix)
	writeRouteHop(&b, r.Labels, r.TTL, r.Via, r.Dev)
	if r.MTU != 0 {
		fmt.Fprintf(&b, " mtu %d", r.MTU)
	}
	for _, h := range r.NextHops {
		b.WriteString(" nexthop")
		writeRouteHop(&b, h.Labels, r.TTL, h.Via, h.Dev)
		fmt.Fprintf(&b, " weight %d", h.Weight)
	}
	b.WriteString(" proto " + r.Protocol)
	if r.Scope != "" {
		b.WriteString(" scope " + r.Scope)
	}
	if r.Distance != 0 || r.Protocol != protoConnected {
		fmt.Fprintf(&b, " metric %d", r.Distance)
	}
	return b.String()
}

func writeRouteHop(b *strings.Builder, labels []uint32, ttl uint8, via, dev string) {
	if len(labels) > 0 {
		b.WriteString(" encap mpls ")
		for i, l := range labels {
			if i > 0 {
				b.WriteByte('/')
			}
			fmt.Fprint(b, l)
		}
		if ttl != 0 {
			fmt.Fprintf(b, " ttl %d", ttl)
		}
	}
	if via != "" {
		b.WriteString(" via " + via)
	}
	if dev != "" {
		b.WriteString(" dev " + dev)
	}
}

// Routes returns the node's IP routes, connected (each address's subnet,
// but host addresses), static and BGP, sorted by prefix and distance;
// empty, not nil, when there are none.
func (n *Node) Routes() []RouteEntry {
	out := []RouteEntry{}
	n.mu.Lock()
	for _, a := range n.cfg.Addrs {
		if a.Prefix.IsSingleIP() {
			continue
		}
		out = append(out, RouteEntry{Prefix: a.Prefix.Masked().String(), Dev: a.Dev,
			Protocol: protoConnected, Distance: distanceConnected, Scope: "link"})
	}
	n.mu.Unlock()
	var bgpRoutes map[netip.Prefix]mpls.Route
	if n.bgpTab != nil {
		n.bgpTab.mu.Lock()
		bgpRoutes = maps.Clone(n.bgpTab.routes)
		n.bgpTab.mu.Unlock()
	}
	for _, r := range n.stack.Routes() {
		e := RouteEntry{Prefix: r.Prefix.String(), Dev: r.Link, Protocol: "static", Distance: DistanceStatic}
		if b, ok := bgpRoutes[r.Prefix]; ok && b.NextHops[0].Device == r.Link && b.NextHops[0].Via == r.Via && slices.Equal(b.NextHops[0].Labels, r.Labels) {
			e.Protocol, e.Distance = "bgp", DistanceBGP
		}
		if r.Via.IsValid() {
			e.Via = r.Via.String()
		}
		for _, l := range r.Labels {
			e.Labels = append(e.Labels, uint32(l))
		}
		e.TTL, e.MTU = r.TTL, r.MTU
		for _, h := range r.NextHops {
			rh := RouteHop{Dev: h.Device, Weight: max(1, int(h.Weight))}
			if h.Via.IsValid() {
				rh.Via = h.Via.String()
			}
			for _, l := range h.Labels {
				rh.Labels = append(rh.Labels, uint32(l))
			}
			e.NextHops = append(e.NextHops, rh)
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b RouteEntry) int {
		pa, pb := netip.MustParsePrefix(a.Prefix), netip.MustParsePrefix(b.Prefix)
		if c := pa.Addr().Compare(pb.Addr()); c != 0 {
			return c
		}
		if c := pa.Bits() - pb.Bits(); c != 0 {
			return c
		}
		return a.Distance - b.Distance
	})
	return out
}

// BGP returns the node's BGP speaker, or nil when the config has no bgp
// lines.
func (n *Node) BGP() *bgp.Speaker { return n.bgp }

// bgpText is the canonical text of the bgp lines but the networks (which
// a reload changes), to compare two configs.
func bgpText(b *config.BGP) string {
	c := &config.Config{BGP: b}
	var out strings.Builder
	for _, line := range strings.Split(c.Format(), "\n") {
		if strings.HasPrefix(line, "bgp ") && !strings.HasPrefix(line, "bgp network ") {
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}

// maxLoggedChanges bounds the lines a reload logs one by one; past it,
// only the counts.
const maxLoggedChanges = 20

// logChanges logs what a reload changes in the routes (the FIB before and
// after: the node keeps no copy of the file's routes), the file's label
// routes and bgp networks: each added, removed and changed line (or the
// counts).
func logChanges(log *slog.Logger, oldFIB, curFIB *mpls.FIB, old, cur *config.Config) {
	type keyed struct{ key, line string }
	diff := func(what string, a, b []keyed) {
		before := make(map[string]string, len(a))
		for _, k := range a {
			before[k.key] = k.line
		}
		var added, removed, changed []string
		seen := make(map[string]bool, len(b))
		for _, k := range b {
			seen[k.key] = true
			switch was, ok := before[k.key]; {
			case !ok:
				added = append(added, k.line)
			case was != k.line:
				changed = append(changed, was+" -> "+k.line)
			}
		}
		for _, k := range a {
			if !seen[k.key] {
				removed = append(removed, k.line)
			}
		}
		switch n := len(added) + len(removed) + len(changed); {
		case n == 0:
		case n > maxLoggedChanges:
			log.Info("reload: "+what, "added", len(added), "removed", len(removed), "changed", len(changed))
		default:
			log.Info("reload: "+what, "added", added, "removed", removed, "changed", changed)
		}
	}
	// Routes: the FIBs are compared entry by entry, and lines formatted
	// only when they will be logged (a FIB holds up to millions).
	routes := func() {
		before := make(map[netip.Prefix]*mpls.FIBEntry, oldFIB.Len())
		for i := range oldFIB.Len() {
			e := oldFIB.Entry(i)
			before[e.Prefix] = e
		}
		var added, removed []*mpls.FIBEntry
		var changed [][2]*mpls.FIBEntry
		for i := range curFIB.Len() {
			e := curFIB.Entry(i)
			was, ok := before[e.Prefix]
			delete(before, e.Prefix)
			switch {
			case !ok:
				added = append(added, e)
			case !sameEntry(was, e):
				changed = append(changed, [2]*mpls.FIBEntry{was, e})
			}
		}
		for _, e := range before {
			removed = append(removed, e)
		}
		switch n := len(added) + len(removed) + len(changed); {
		case n == 0:
		case n > maxLoggedChanges:
			log.Info("reload: routes", "added", len(added), "removed", len(removed), "changed", len(changed))
		default:
			lines := func(es []*mpls.FIBEntry) (out []string) {
				for _, e := range es {
					out = append(out, fibLine(e))
				}
				return out
			}
			var ch []string
			for _, c := range changed {
				ch = append(ch, fibLine(c[0])+" -> "+fibLine(c[1]))
			}
			slices.Sort(ch)
			removedLines := lines(removed)
			slices.Sort(removedLines)
			log.Info("reload: routes", "added", lines(added), "removed", removedLines, "changed", ch)
		}
	}
	labels := func(c *config.Config) (out []keyed) {
		for _, r := range c.LabelRoutes {
			out = append(out, keyed{fmt.Sprint(r.Label), r.String()})
		}
		return out
	}
	networks := func(c *config.Config) (out []keyed) {
		if c.BGP != nil {
			for _, nw := range c.BGP.Networks {
				out = append(out, keyed{nw.Prefix.String(), nw.String()})
			}
		}
		return out
	}
	routes()
	diff("label routes", labels(old), labels(cur))
	diff("bgp networks", networks(old), networks(cur))
}

// sameEntry reports whether two FIB entries route alike.
func sameEntry(a, b *mpls.FIBEntry) bool {
	return a.Prefix == b.Prefix && a.MTU == b.MTU && a.TTL == b.TTL &&
		slices.EqualFunc(a.Group.Hops, b.Group.Hops, func(x, y mpls.NextHop) bool {
			return x.Via == y.Via && x.Device == y.Device && x.Weight == y.Weight && slices.Equal(x.Labels, y.Labels)
		})
}

// fibLine returns a FIB entry as a config line.
func fibLine(e *mpls.FIBEntry) string {
	labels := func(ls []mpls.Label) []uint32 {
		if ls == nil {
			return nil
		}
		out := make([]uint32, len(ls))
		for i, l := range ls {
			out[i] = uint32(l)
		}
		return out
	}
	r := config.Route{Prefix: e.Prefix, MTU: e.MTU}
	if hops := e.Group.Hops; len(hops) == 1 {
		r.Via, r.Dev, r.Labels, r.TTL = hops[0].Via, hops[0].Device, labels(hops[0].Labels), e.TTL
	} else {
		for _, h := range hops {
			r.NextHops = append(r.NextHops, config.NextHop{Hop: config.Hop{Via: h.Via, Dev: h.Device, Weight: h.Weight}, Labels: labels(h.Labels), TTL: e.TTL})
		}
	}
	return r.String()
}
