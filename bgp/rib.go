package bgp

import (
	"net/netip"
	"slices"
	"time"

	"github.com/mplsnode/mplsnode/mpls"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// cand is one neighbour's path to a prefix.
type cand struct {
	labels []uint32
	nh     netip.Addr
	asPath []uint32
	family Family
	// origin is the ORIGIN attribute's value, kept on re-advertisement.
	origin uint8
}

// peerCand is the path neighbour peer sent: cand's fields with the
// neighbour's index beside them, not a cand in a struct, so that the
// index fills what would be cand's padding (a full table holds a million).
type peerCand struct {
	labels []uint32
	nh     netip.Addr
	asPath []uint32
	peer   int32
	family Family
	origin uint8
}

func newPeerCand(peer int, c cand) peerCand {
	return peerCand{labels: c.labels, nh: c.nh, asPath: c.asPath, peer: int32(peer), family: c.family, origin: c.origin}
}

// cand returns the path.
func (pc *peerCand) cand() cand {
	return cand{labels: pc.labels, nh: pc.nh, asPath: pc.asPath, family: pc.family, origin: pc.origin}
}

// candSet is a prefix's paths, one a neighbour. A slice, not a map: a
// prefix has one path or a few, and a full table has a million prefixes
// (a one-entry map costs several times the path it holds).
type candSet []peerCand

// get returns neighbour peer's path.
func (cs candSet) get(peer int) (cand, bool) {
	for i := range cs {
		if int(cs[i].peer) == peer {
			return cs[i].cand(), true
		}
	}
	return cand{}, false
}

// at returns neighbour peer's path, the zero cand if it sent none.
func (cs candSet) at(peer int) cand {
	c, _ := cs.get(peer)
	return c
}

// set sets neighbour peer's path.
func (cs *candSet) set(peer int, c cand) {
	for i := range *cs {
		if int((*cs)[i].peer) == peer {
			(*cs)[i] = newPeerCand(peer, c)
			return
		}
	}
	*cs = append(*cs, newPeerCand(peer, c))
}

// del removes neighbour peer's path and reports whether it had one.
func (cs *candSet) del(peer int) bool {
	for i := range *cs {
		if int((*cs)[i].peer) == peer {
			*cs = slices.Delete(*cs, i, i+1)
			if len(*cs) == 0 {
				*cs = nil // the array goes with the last path
			}
			return true
		}
	}
	return false
}

// dest is a prefix the speaker heard of.
type dest struct {
	cands candSet
	// best is the neighbour whose path is installed, -1 for none.
	best int
	// installed is the next hop of the route written to the tables (one
	// hop, shared with the tables' copy of the route), nil for none.
	installed []mpls.NextHop
	// local is the label bound for re-advertisement, 0 for none.
	local mpls.Label
	// why says why the best path is not installed (ReasonNone when it
	// is, or when there is none).
	why Reason
	// adv is the local path last handed to GoBGP for re-advertisement,
	// nil for none (and without next-hop-self neighbours).
	adv *advert
}

// advert is what a re-advertised path says: the local label, the
// neighbour it was learned from (whom split horizon keeps it from), and
// the received ORIGIN and AS path.
type advert struct {
	label  mpls.Label
	from   int
	origin uint8
	asPath []uint32
}

func (a *advert) same(b advert) bool {
	return a != nil && a.label == b.label && a.from == b.from && a.origin == b.origin && slices.Equal(a.asPath, b.asPath)
}

// event is a path or a neighbour state change, in GoBGP's order.
type event struct {
	peer     int
	down     bool // the session left Established
	state    string
	withdraw bool
	prefix   netip.Prefix
	cand     cand
}

// onPaths queues the paths GoBGP received (before policy: the node applies
// none on import).
func (s *Speaker) onPaths(paths []*apiutil.Path, _ time.Time) {
	evs := make([]event, 0, len(paths))
	for _, p := range paths {
		i, ok := s.alias[p.PeerAddress]
		if !ok {
			continue
		}
		ev, ok := pathEvent(i, p)
		if !ok {
			continue
		}
		evs = append(evs, ev)
	}
	s.enqueue(evs...)
}

func (s *Speaker) enqueue(evs ...event) {
	if len(evs) == 0 {
		return
	}
	s.qmu.Lock()
	s.queue = append(s.queue, evs...)
	s.qmu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// worker applies queued events in batches: all that arrived while the
// previous batch was being written go in one Apply.
func (s *Speaker) worker() {
	defer close(s.done)
	for range s.wake {
		s.qmu.Lock()
		evs := s.queue
		s.queue = nil
		s.qmu.Unlock()
		if evs == nil {
			continue
		}
		s.process(evs)
	}
}

// process updates the RIB with evs and writes the differences.
func (s *Speaker) process(evs []event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	dirty := map[netip.Prefix]bool{}
	for _, ev := range evs {
		if ev.state != "" || ev.down {
			ps := &s.peers[ev.peer]
			wasUp := ps.state == "established"
			if ev.state != "" && ps.state != ev.state {
				ps.state, ps.since = ev.state, time.Now()
				s.log.Info("bgp neighbor", "neighbor", s.cfg.Neighbors[ev.peer].Address.String(), "state", ev.state)
			}
			// The routes go when the session leaves Established, or when
			// the connection that carried them ends (the splice's event,
			// no state). A session on its way up (GoBGP's watch may say
			// so after the session's first routes) takes none.
			if ev.down && (wasUp || ev.state == "") {
				for p, d := range s.rib {
					if d.cands.del(ev.peer) {
						dirty[p] = true
					}
				}
				ps.received = [2]int{}
				ps.held = nil
			}
			continue
		}
		if !ev.withdraw {
			switch {
			case slices.Contains(ev.cand.asPath, s.cfg.AS):
				// Our own AS: a loop (RFC 4271 §9.1.2).
				ev.withdraw = true
				s.refuse(ev.prefix, ev.peer, ev.cand, ReasonASLoop)
			case len(ev.cand.labels) > 1:
				// A label stack needs the Multiple Labels capability
				// (RFC 8277 §2.1), which GoBGP cannot negotiate:
				// treat-as-withdraw (RFC 7606 §2).
				ev.withdraw = true
				s.refuse(ev.prefix, ev.peer, ev.cand, ReasonMultipleLabels)
			}
			s.peers[ev.peer].hold(ev.prefix, ev.withdraw)
		} else {
			s.peers[ev.peer].hold(ev.prefix, false)
		}
		d := s.rib[ev.prefix]
		if d == nil {
			if ev.withdraw {
				continue
			}
			d = &dest{best: -1}
			s.rib[ev.prefix] = d
		}
		_, had := d.cands.get(ev.peer)
		fi := ev.cand.family - 1
		if ev.withdraw {
			if had {
				d.cands.del(ev.peer)
				s.peers[ev.peer].received[fi]--
			}
		} else {
			if !had {
				s.peers[ev.peer].received[fi]++
			}
			d.cands.set(ev.peer, ev.cand)
		}
		dirty[ev.prefix] = true
	}
	var ch Changes
	var adds, dels []*apiutil.Path
	for p := range dirty {
		s.update(p, &ch, &adds, &dels)
	}
	s.apply(ch)
	if len(dels) > 0 {
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: dels}); err != nil {
			s.log.Warn("bgp: withdrawing re-advertised routes", "err", err)
		}
	}
	if len(adds) > 0 {
		if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: adds}); err != nil {
			s.log.Warn("bgp: re-advertising routes", "err", err)
		}
	}
}

// apply writes ch. When the tables refuse the batch (they keep what they
// had), the routes are tried one by one and those refused are recorded as
// not installed, so that what the speaker believes installed is what is.
func (s *Speaker) apply(ch Changes) {
	err := s.tables.Apply(ch)
	if err == nil {
		return
	}
	s.applyErrs++
	s.log.Error("bgp: writing routes; trying them one by one", "err", err)
	rest := ch
	rest.AddRoutes = nil
	if err := s.tables.Apply(rest); err != nil {
		s.log.Error("bgp: writing label bindings and deletions", "err", err)
	}
	for _, e := range ch.AddRoutes {
		if err := s.tables.Apply(Changes{AddRoutes: []mpls.Route{e}}); err != nil {
			s.applyErrs++
			s.log.Warn("bgp: route refused by the tables", "prefix", e.Prefix.String(), "err", err)
			if d := s.rib[e.Prefix]; d != nil && d.installed != nil {
				if d.best >= 0 {
					s.peers[d.best].installed[familyOf(e.Prefix)-1]--
					s.refuse(e.Prefix, d.best, d.cands.at(d.best), ReasonTablesRefused)
				}
				d.installed = nil
				d.why = ReasonTablesRefused
			}
		}
	}
}

// bestOf picks the path to install: shortest AS path, then the neighbour
// configured first.
func bestOf(cands candSet) int {
	best, at := -1, -1
	for j, c := range cands {
		if best < 0 || len(c.asPath) < len(cands[at].asPath) ||
			len(c.asPath) == len(cands[at].asPath) && int(c.peer) < best {
			best, at = int(c.peer), j
		}
	}
	return best
}

// update recomputes prefix p and records the table and RIB edits.
func (s *Speaker) update(p netip.Prefix, ch *Changes, adds, dels *[]*apiutil.Path) {
	d := s.rib[p]
	best := bestOf(d.cands)
	var want []mpls.NextHop
	var c cand
	why := ReasonNone
	if best >= 0 {
		c = d.cands.at(best)
		want, why = s.route(p, c)
	}
	if why != ReasonNone && why != d.why {
		s.refuse(p, best, c, why)
	}
	d.why = why
	if d.best >= 0 && d.installed != nil {
		s.peers[d.best].installed[familyOf(p)-1]--
	}
	if want == nil {
		if d.installed != nil {
			ch.DelRoutes = append(ch.DelRoutes, p)
		}
	} else if d.installed == nil || !sameHop(&d.installed[0], &want[0]) {
		ch.AddRoutes = append(ch.AddRoutes, mpls.Route{Prefix: p, NextHops: want})
	}
	d.installed = want
	d.best = best
	if want != nil {
		s.peers[best].installed[familyOf(p)-1]++
	}
	if s.nhs {
		s.readvertise(p, d, c, ch, adds, dels)
	}
	if len(d.cands) == 0 && d.local == 0 {
		delete(s.rib, p)
	}
}

// route is the next hop of the route to p for c (one hop), or nil and the
// reason it cannot be installed.
func (s *Speaker) route(p netip.Prefix, c cand) ([]mpls.NextHop, Reason) {
	if !c.nh.IsValid() {
		return nil, ReasonUnresolvedNextHop
	}
	// An IPv6 prefix over an IPv4 next hop (received as ::ffff:a.b.c.d)
	// is 6PE (RFC 4798): the IPv6 packets cross the IPv4 path under the
	// received label. The other way round needs the extended next hop
	// capability (RFC 8950), which the node does not negotiate.
	sixPE := c.nh.Is4() && p.Addr().Is6()
	if c.nh.Is6() && p.Addr().Is4() {
		return nil, ReasonNextHopFamily
	}
	res, ok := s.tables.Resolve(c.nh)
	if !ok {
		return nil, ReasonUnresolvedNextHop
	}
	if p.Contains(c.nh) && (res.Via != c.nh || len(res.Labels) > 0) {
		return nil, ReasonNextHopInOwnRoute // only a connected next hop may lie inside its own route
	}
	labels := slices.Clone(res.Labels)
	for i, l := range c.labels {
		bottom := i == len(c.labels)-1
		switch {
		case l == labelImplicitNull:
			continue // pop: nothing to push
		case l == uint32(mpls.LabelIPv4ExplicitNull) && bottom && p.Addr().Is4(),
			l == uint32(mpls.LabelIPv6ExplicitNull) && bottom && p.Addr().Is6():
		case !mpls.Label(l).Valid():
			return nil, ReasonInvalidLabel
		case mpls.Label(l).IsReserved():
			return nil, ReasonReservedLabel // a reserved label no one may push here (RFC 3032 §2.1)
		}
		labels = append(labels, mpls.Label(l))
	}
	switch {
	case sixPE && len(labels) == len(res.Labels):
		// Implicit null: the egress would get IPv6 over its IPv4 link.
		return nil, ReasonSixPEWithoutLabel
	case res.Via.Is4() != p.Addr().Is4() && len(labels) == 0:
		// Only a labelled route may cross families.
		if p.Addr().Is6() {
			return nil, ReasonSixPEWithoutLabel
		}
		return nil, ReasonNextHopFamily
	case len(labels) > mpls.DefaultMaxDepth:
		return nil, ReasonStackTooDeep
	}
	return []mpls.NextHop{{Via: res.Via, Device: res.Device, Labels: labels}}, ReasonNone
}

// sameHop reports whether a and b, BGP routes' next hops, route alike.
func sameHop(a, b *mpls.NextHop) bool {
	return a.Via == b.Via && a.Device == b.Device && slices.Equal(a.Labels, b.Labels)
}

// readvertise keeps p's local label, its ILM swap and its local path in
// step with the installed route.
func (s *Speaker) readvertise(p netip.Prefix, d *dest, c cand, ch *Changes, adds, dels *[]*apiutil.Path) {
	if d.installed == nil {
		if d.local != 0 {
			ch.DelILM = append(ch.DelILM, d.local)
			s.pool.release(p, d.local) // held for p, should it come back
			d.local = 0
			if d.adv != nil {
				if lp, err := localPath(p, []uint32{0}, nil); err == nil {
					*dels = append(*dels, lp)
				}
			}
			d.adv = nil
		}
		return
	}
	if d.local == 0 {
		l, err := s.pool.getFor(p)
		if err != nil {
			s.log.Warn("bgp: no label left to re-advertise", "prefix", p.String(), "err", err)
			return
		}
		d.local = l
	}
	hop := &d.installed[0]
	e := mpls.ILMEntry{Label: d.local, NextHop: hop.Via, Device: hop.Device, Action: mpls.ILMPopForward}
	if len(hop.Labels) > 0 {
		e.Action = mpls.ILMSwap
		e.OutLabels = slices.Clone(hop.Labels)
	}
	ch.AddILM = append(ch.AddILM, e)
	a := advert{label: d.local, from: d.best, origin: c.origin, asPath: c.asPath}
	if d.adv.same(a) {
		return // GoBGP has it: a second AddPath would send it again
	}
	if lp, err := s.readvertisedPath(p, a); err == nil {
		*adds = append(*adds, lp)
		d.adv = &a
	}
}

// readvertisedPath is the local path that re-advertises a: the node's
// label, the received ORIGIN and AS path, and the split-horizon tags.
func (s *Speaker) readvertisedPath(p netip.Prefix, a advert) (*apiutil.Path, error) {
	lp, err := localPath(p, []uint32{uint32(a.label)}, a.asPath)
	if err != nil {
		return nil, err
	}
	for i, at := range lp.Attrs {
		if _, ok := at.(*gbgp.PathAttributeOrigin); ok {
			lp.Attrs[i] = gbgp.NewPathAttributeOrigin(a.origin)
		}
	}
	tags := []*gbgp.LargeCommunity{gbgp.NewLargeCommunity(s.cfg.AS, tagFromNeighbor, uint32(a.from+1))}
	if s.internal(a.from) {
		tags = append(tags, gbgp.NewLargeCommunity(s.cfg.AS, tagFromIBGP, 0))
	}
	lp.Attrs = append(lp.Attrs, gbgp.NewPathAttributeLargeCommunities(tags))
	return lp, nil
}
