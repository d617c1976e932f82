package mpls

import (
	"iter"
	"net/netip"
	"slices"
	"sort"
)

// spanOrder returns the entry indexes of spans (sorted by buildIntervals:
// address order, a prefix before the longer ones it covers).
func spanOrder(spans []span) []int32 {
	out := make([]int32, len(spans))
	for i, s := range spans {
		out[i] = s.idx
	}
	return out
}

// Within yields the routes whose prefix lies inside p, p's own included
// (the routes a connected subnet holds, say): the base's in address
// order, then the delta's. It costs a binary search and the routes it
// yields, whatever the table's size. The entries belong to the FIB and
// must not be modified.
func (f *FIB) Within(p netip.Prefix) iter.Seq[*FIBEntry] {
	return func(yield func(*FIBEntry) bool) {
		fam, key, l, ok := prefixKey(p.Masked())
		if f == nil || !ok {
			return
		}
		m := topBits(u128{^uint64(0), ^uint64(0)}, l)
		last := u128{key.hi | ^m.hi, key.lo | ^m.lo} // p's last address
		at := func(k int) (u128, uint8) {
			_, a, n, _ := prefixKey(f.entries[k].Prefix)
			return a, n
		}
		s := f.sorted[fam]
		lo := sort.Search(len(s), func(k int) bool {
			a, n := at(int(s[k]))
			return key.less(a) || a == key && n >= l
		})
		var gone []int32
		if f.d != nil {
			gone = f.d.gone
		}
		for _, i := range s[lo:] {
			if a, _ := at(int(i)); last.less(a) {
				break
			}
			if _, hidden := slices.BinarySearch(gone, i); hidden {
				continue
			}
			if !yield(&f.entries[i]) {
				return
			}
		}
		if f.d == nil {
			return
		}
		for t := f.d.tries[fam]; t != nil; {
			if t.bits >= l {
				if commonBits(t.key, key, l) == l {
					trieEach(t, func(n *trieNode) bool { return n.kind != nodeRoute || yield(&n.e.FIBEntry) })
				}
				return
			}
			if !t.holds(key, l) {
				return
			}
			t = t.child[bitAt(key, t.bits)]
		}
	}
}
