package bgp

import (
	"slices"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// The node reads the labelled routes of its neighbours' UPDATEs itself,
// in the splice (takeUpdate; copyFromNeighbor says when), rather than
// from GoBGP: GoBGP would keep
// each received path in its Adj-RIB-In (parsed, with its attributes) and
// run it through its import path, only for the node's import policy to
// reject it; the node holds its own RIB anyway. One copy of each route
// is kept that way, the speaker's, and GoBGP's receive work is skipped.
// GoBGP still runs the session (OPEN, KEEPALIVE, NOTIFICATION, the hold
// timer) and reads every UPDATE the node does not take: one that does
// not parse or validate as GoBGP would have it (its error handling
// applies: a NOTIFICATION, treat-as-withdraw), one with IPv4 unicast
// NLRI or AS4_PATH attributes, End-of-RIB markers. Its Adj-RIB-In watch
// (onPaths) stays for those.

// takeUpdate reads the routes of an UPDATE body neighbour peer sent on an
// established session that negotiated the families negotiated, and
// queues them (tookUpdate); otherwise it queues nothing and says why
// GoBGP is to read the UPDATE.
func (s *Speaker) takeUpdate(peer int, body []byte, negotiated map[afiSafi]bool) take {
	evs, t := updateEvents(peer, body, !s.internal(peer), negotiated)
	if t == tookUpdate {
		s.enqueue(evs...)
	}
	return t
}

// sessionEnded queues the end of a connection of neighbour peer that
// carried routes the node took: they go with it. GoBGP's own state change
// would take them too, but its watch may report it after the next
// session's first routes.
func (s *Speaker) sessionEnded(peer int) {
	s.enqueue(event{peer: peer, down: true})
}

// updateEvents returns the events of an UPDATE body (after the header)
// from neighbour peer: one per labelled prefix it advertises or
// withdraws (tookUpdate), or none and why the node leaves the UPDATE to
// GoBGP (see above); ebgp says the neighbour is external, for validation.
func updateEvents(peer int, body []byte, ebgp bool, negotiated map[afiSafi]bool) ([]event, take) {
	msg, err := gbgp.ParseBGPBody(&gbgp.BGPHeader{Len: uint16(bgpHeaderLen + len(body)), Type: gbgp.BGP_MSG_UPDATE}, body)
	if err != nil {
		return nil, leftToGoBGP
	}
	u, isUpdate := msg.Body.(*gbgp.BGPUpdate)
	if !isUpdate || len(u.WithdrawnRoutes)+len(u.NLRI) > 0 {
		return nil, leftToGoBGP
	}
	if eor, _ := u.IsEndOfRib(); eor {
		return nil, noRoutes
	}
	rfs := make(map[gbgp.Family]gbgp.BGPAddPathMode, len(negotiated))
	for f := range negotiated {
		rfs[gbgp.NewFamily(f.afi, f.safi)] = gbgp.BGP_ADD_PATH_NONE
	}
	if valid, err := gbgp.ValidateUpdateMsg(u, rfs, ebgp, false, false); !valid || err != nil {
		return nil, leftToGoBGP
	}
	var reach, unreach []gbgp.PathNLRI
	for _, a := range u.PathAttributes {
		switch a := a.(type) {
		case *gbgp.PathAttributeMpReachNLRI:
			reach = a.Value
		case *gbgp.PathAttributeMpUnreachNLRI:
			unreach = a.Value
		case *gbgp.PathAttributeAs4Path, *gbgp.PathAttributeAs4Aggregator:
			return nil, leftToGoBGP // GoBGP merges these into the AS path
		}
	}
	if len(reach)+len(unreach) == 0 {
		return nil, noRoutes
	}
	attrs := pathAttrs(u.PathAttributes)
	evs := make([]event, 0, len(reach)+len(unreach))
	// Advertisements first, as GoBGP orders them.
	for _, l := range []struct {
		nlri     []gbgp.PathNLRI
		withdraw bool
	}{{reach, false}, {unreach, true}} {
		for _, pn := range l.nlri {
			n, labelled := pn.NLRI.(*gbgp.LabeledIPAddrPrefix)
			if !labelled {
				return nil, leftToGoBGP
			}
			evs = append(evs, nlriEvent(peer, n, l.withdraw, attrs))
		}
	}
	return evs, tookUpdate
}

// pathEvent reads what the node needs from a path GoBGP received.
func pathEvent(peer int, p *apiutil.Path) (event, bool) {
	n, ok := p.Nlri.(*gbgp.LabeledIPAddrPrefix)
	if !ok {
		return event{}, false
	}
	return nlriEvent(peer, n, p.Withdrawal, pathAttrs(p.Attrs)), true
}

// pathAttrs reads a path's next hop, AS path and ORIGIN from its
// attributes.
func pathAttrs(attrs []gbgp.PathAttributeInterface) (c cand) {
	for _, a := range attrs {
		switch a := a.(type) {
		case *gbgp.PathAttributeMpReachNLRI:
			c.nh = a.Nexthop.Unmap()
		case *gbgp.PathAttributeNextHop:
			if !c.nh.IsValid() {
				c.nh = a.Value.Unmap()
			}
		case *gbgp.PathAttributeAsPath:
			for _, seg := range a.Value {
				c.asPath = append(c.asPath, seg.GetAS()...)
			}
		case *gbgp.PathAttributeOrigin:
			c.origin = a.Value
		}
	}
	return c
}

// nlriEvent is the event of labelled prefix n from neighbour peer, with
// the path's attributes attrs (read by pathAttrs; its AS path is shared,
// read-only, by the prefixes of one UPDATE).
func nlriEvent(peer int, n *gbgp.LabeledIPAddrPrefix, withdraw bool, attrs cand) event {
	pfx := n.Prefix
	ev := event{peer: peer, prefix: pfx.Masked(), withdraw: withdraw, cand: attrs}
	ev.cand.labels = slices.Clone(n.Labels.Labels)
	ev.cand.family = familyOf(pfx)
	return ev
}
