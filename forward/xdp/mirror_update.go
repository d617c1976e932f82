package xdp

import (
	"net"
	"net/netip"
	"slices"

	"github.com/mplsnode/mplsnode/mpls"
)

// update writes what changed between the last sync's inputs and in
// (above is in's layer above the FIB) and nothing else, or returns
// errWalk, having written nothing, when a whole sync is due.
func (m *Mirror) update(in MirrorInput, above []Route) error {
	var changed []*mpls.FIBEntry
	var removed []netip.Prefix
	if m.cfg.Forward && in.FIB != m.fib {
		var ok bool
		if changed, removed, ok = diffFIB(m.fib, in.FIB, 1024+in.FIB.Len()/8); !ok {
			return errWalk
		}
	}
	c := m.changeSet(changed, removed, above)
	routes, del, err := c.resolve(m, in, m.recordMAC(in.MAC))
	if err != nil {
		return err
	}
	return m.prog.updateFIB(&m.state, routes, del)
}

// fibChange is the prefixes one update touches and what it knows of
// them.
type fibChange struct {
	touched map[netip.Prefix]bool           // every prefix whose entry may change
	fibNew  map[netip.Prefix]*mpls.FIBEntry // the new FIB's entry of a changed or added route
	gone    map[netip.Prefix]bool           // a prefix whose FIB route went (unless also in fibNew)
	above   map[netip.Prefix]int            // the new layer above the FIB, by prefix
	routes  []Route                         // that layer
}

// changeSet returns the prefixes the FIB's changes and the layer above
// it touch.
func (m *Mirror) changeSet(changed []*mpls.FIBEntry, removed []netip.Prefix, above []Route) *fibChange {
	c := &fibChange{touched: map[netip.Prefix]bool{}, fibNew: map[netip.Prefix]*mpls.FIBEntry{},
		gone: map[netip.Prefix]bool{}, above: make(map[netip.Prefix]int, len(above)), routes: above}
	for _, e := range changed {
		if !m.inSpecial(e.Prefix) {
			c.fibNew[e.Prefix] = e
			c.touched[e.Prefix] = true
		}
	}
	for _, p := range removed {
		if !m.inSpecial(p) {
			c.gone[p] = true
			c.touched[p] = true
		}
	}
	for i := range above {
		c.above[above[i].Prefix] = i
	}
	old := make(map[netip.Prefix]int, len(m.above))
	for i := range m.above {
		old[m.above[i].Prefix] = i
		if j, ok := c.above[m.above[i].Prefix]; !ok || !sameRoute(m.above[i], above[j]) {
			c.touched[m.above[i].Prefix] = true
		}
	}
	for i := range above {
		if _, ok := old[above[i].Prefix]; !ok {
			c.touched[above[i].Prefix] = true
		}
	}
	return c
}

// resolve returns what the program's FIB is to hold at each touched
// prefix (the layer above the FIB, else the FIB's route, else a range
// never forwarded) and the prefixes to delete; errWalk when the FIB's
// route to a prefix cannot be told without a walk.
func (c *fibChange) resolve(m *Mirror, in MirrorInput, mac func(dev string, addr netip.Addr) net.HardwareAddr) ([]Route, []netip.Prefix, error) {
	var routes []Route
	var del []netip.Prefix
	var run macRun
	for p := range c.touched {
		if i, ok := c.above[p]; ok {
			routes = append(routes, c.routes[i])
			continue
		}
		e, ok := c.fibNew[p]
		if !ok && !c.gone[p] && m.cfg.Forward && !m.inSpecial(p) {
			var sure bool
			if e, ok, sure = exactRoute(in.FIB, p); !sure {
				return nil, nil, errWalk
			}
		}
		if ok {
			routes = append(routes, m.fibRoute(e, mac, &run))
			continue
		}
		if i := slices.IndexFunc(m.special, func(s Route) bool { return s.Prefix == p }); i >= 0 {
			routes = append(routes, m.special[i])
			continue
		}
		del = append(del, p)
	}
	return routes, del, nil
}

// exactRoute returns fib's route to exactly p; sure is false when a
// longer route holds p's first address, which hides whether p is there.
func exactRoute(fib *mpls.FIB, p netip.Prefix) (e *mpls.FIBEntry, found, sure bool) {
	e, ok := fib.Lookup(p.Addr())
	switch {
	case !ok || e.Prefix.Bits() < p.Bits():
		return nil, false, true
	case e.Prefix == p:
		return e, true, true
	default:
		return nil, false, false
	}
}

// diffFIB returns the entries of cur that old lacks or holds otherwise
// (changed, cur's) and the prefixes of old's entries that cur does not
// hold at the same place (removed; a prefix in both lists moved or was
// replaced). Two FIBs of one base (Updates that did not rebuild) answer
// at the cost of their change (mpls.FIB.Changes); others are walked side
// by side: an Update keeps the surviving entries in order and appends
// the new ones, so a change of a few routes makes short lists (an entry
// inserted before others, as going back to an older table does, is
// found by looking one entry ahead). ok is false as soon as they exceed
// limit (the tables differ too much: a whole sync is cheaper).
func diffFIB(old, cur *mpls.FIB, limit int) (changed []*mpls.FIBEntry, removed []netip.Prefix, ok bool) {
	if changed, removed, ok := cur.Changes(old, limit); ok {
		return changed, removed, true
	}
	i, j := 0, 0
	for i < old.Len() && j < cur.Len() {
		o, n := old.Entry(i), cur.Entry(j)
		if o.Prefix != n.Prefix {
			if j+1 < cur.Len() && cur.Entry(j+1).Prefix == o.Prefix {
				changed = append(changed, n) // n inserted (or moved here)
				j++
			} else {
				removed = append(removed, o.Prefix) // o removed (or moved on)
				i++
			}
			if len(changed)+len(removed) > limit {
				return nil, nil, false
			}
			continue
		}
		if !sameEntry(o, n) {
			changed = append(changed, n)
			if len(changed) > limit {
				return nil, nil, false
			}
		}
		i++
		j++
	}
	if len(changed)+len(removed)+old.Len()-i+cur.Len()-j > limit {
		return nil, nil, false
	}
	for ; i < old.Len(); i++ {
		removed = append(removed, old.Entry(i).Prefix)
	}
	for ; j < cur.Len(); j++ {
		changed = append(changed, cur.Entry(j))
	}
	return changed, removed, true
}

// sameEntry reports whether two FIB entries of one prefix route alike:
// the same next hops (weights included), MTU and label TTL.
func sameEntry(a, b *mpls.FIBEntry) bool {
	if a.MTU != b.MTU || a.TTL != b.TTL {
		return false
	}
	if a.Group == b.Group {
		return true
	}
	return slices.EqualFunc(a.Group.Hops, b.Group.Hops, func(x, y mpls.NextHop) bool {
		return x.Via == y.Via && x.Device == y.Device && x.Weight == y.Weight && slices.Equal(x.Labels, y.Labels)
	})
}
