package xdp

import (
	"errors"
	"net/netip"
)

// errWalk says a change cannot be applied alone: the FIB is to be synced
// whole (SyncFIBSeq), which also handles what made the change refuse (a
// family not carried, the capacity reached, a refused entry).
var errWalk = errors.New("XDP FIB: a whole sync is needed")

// updateFIB changes the program's FIB by routes (each written, a later
// one of the same prefix replacing an earlier) and del (the prefixes to
// delete; none of them in routes), in the order SyncFIB keeps: writes
// longest prefix first, then deletes shortest first. st is the state the
// last sync returned; it is brought up to date (Written and Deleted: this
// change's). It returns errWalk, having changed nothing, when a family is
// not carried or a retry is pending, when nothing was synced whole yet, or
// when the change would take a family over its capacity; a map that
// refuses an entry returns its error wrapped with errWalk (the entries
// not written are marked unknown, as in a whole sync).
func (p *Program) updateFIB(st *FIBState, routes []Route, del []netip.Prefix) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fibGen == 0 || st.Dropped4 != 0 || st.Dropped6 != 0 || !p.fibFailed[0].IsZero() || !p.fibFailed[1].IsZero() {
		return errWalk
	}
	if !p.fitsFIB(st, routes, del) {
		return errWalk
	}
	writes, deletes := new(fibPlan), new(fibPlan)
	var touched []uint32
	for i := range routes {
		r := &routes[i]
		if !r.Prefix.IsValid() {
			continue
		}
		k := keyOf(r.Prefix.Masked())
		if j, had := p.fibIndex[k]; had {
			tallySlot(st, &p.fibSlots[j], -1)
		}
		j, dirty := p.set(k, p.fibValue(r))
		touched = append(touched, j)
		if dirty {
			writes[k.family()][k.bits] = append(writes[k.family()][k.bits], j)
		}
	}
	for _, pfx := range del {
		k := keyOf(pfx.Masked())
		j, had := p.fibIndex[k]
		if !had {
			continue
		}
		tallySlot(st, &p.fibSlots[j], -1)
		touched = append(touched, j)
		deletes[k.family()][k.bits] = append(deletes[k.family()][k.bits], j)
	}
	var failed int
	var err error
	st.Written, st.Deleted, failed, err = p.applyFIB(writes, deletes, [2]bool{})
	for _, j := range touched {
		tallySlot(st, &p.fibSlots[j], 1) // a deleted slot is free (gen 0): nothing
	}
	if failed >= 0 {
		return errors.Join(errWalk, err)
	}
	return err
}

// fitsFIB reports whether the families keep within the capacity after
// the change (routes written, del deleted).
func (p *Program) fitsFIB(st *FIBState, routes []Route, del []netip.Prefix) bool {
	n := [2]int{st.Entries4, st.Entries6}
	for i := range routes {
		if pfx := routes[i].Prefix; pfx.IsValid() {
			if _, had := p.fibIndex[keyOf(pfx.Masked())]; !had {
				n[family(pfx.Addr())]++
			}
		}
	}
	for _, pfx := range del {
		if _, had := p.fibIndex[keyOf(pfx.Masked())]; had {
			n[family(pfx.Addr())]--
		}
	}
	return n[0] <= p.fibCap && n[1] <= p.fibCap
}

// set records that the program's FIB is to hold v at k as of the last
// whole sync's generation, and returns k's slot and whether v is to be
// written (new, changed, or its last write failed).
func (p *Program) set(k fibKey, v lsrFibValue) (uint32, bool) {
	i, had := p.fibIndex[k]
	if !had {
		p.want(p.fibGen, k, v)
		return p.fibIndex[k], true
	}
	s := &p.fibSlots[i]
	s.dirty = s.v != v || s.unknown
	s.v, s.gen = v, p.fibGen
	return i, s.dirty
}
