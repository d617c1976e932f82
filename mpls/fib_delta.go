package mpls

import (
	"cmp"
	"encoding/binary"
	"maps"
	"math/bits"
	"net/netip"
	"slices"
	"sort"
	"weak"
)

// A FIB's delta is what Updates changed of its base since the base was
// built, held so that a change costs its own size:
//
//   - per family, a persistent path-compressed binary trie (trieNode) of
//     every prefix the delta touched: a route added or replaced (its new
//     entry), or a base route deleted (a gone node). An Update copies the
//     paths to the prefixes it changes and shares the rest with the FIB
//     it came from;
//   - per family, a filter of the /16s (an address's top 16 bits) that a
//     touched prefix overlaps: a lookup outside them takes the base's
//     answer as it is, one bit read more than a FIB without a delta;
//   - the base entries the delta hides (gone: deleted or replaced) and
//     the routes it adds, in Entry's order (added).
//
// Inside a touched /16 a lookup walks the trie along the address: the
// longest added route there, and the lengths of every touched prefix
// holding the address. The base's answer stands unless its prefix's
// length is among those (its prefix is the one of that length holding
// the address, so the delta touched it), in which case the lookup falls
// back to the base's next shorter covering prefix (FIB.parent) until one
// stands. The longer of the two wins (they are never of one length: a
// touched base prefix does not stand).

// Delta bounds: an Update whose change would bring the delta past
// max(minDelta, base routes / deltaShare) rebuilds instead, folding the
// delta into a new base. Tables folds a delta past
// max(minCompact, base routes / compactShare) off the writers' path
// (Tables.compact), so that a table does not keep a large delta (slower
// lookups where it touches) and the writers rarely pay for a fold.
const (
	minDelta     = 4096
	deltaShare   = 8
	minCompact   = 1024
	compactShare = 64
	// maxDeltaGroups bounds the groups that delta updates carry to later
	// ones (FIB.dgroups).
	maxDeltaGroups = 256
)

// fibDelta is what a FIB changed of its base (see above). It is
// immutable once its FIB is built.
type fibDelta struct {
	tries   [2]*trieNode // IPv4, IPv6
	filters [2]bucketFilter
	// gone holds the indexes of the base entries the delta deleted or
	// replaced, ascending.
	gone []int32
	// added holds the routes the delta added, in Entry's order (seq
	// ascending).
	added []*deltaEntry
	// seq numbers the next added route.
	seq uint64
}

// deltaEntry is a route a delta added; seq orders it among them.
type deltaEntry struct {
	FIBEntry
	seq uint64
}

// trieNode kinds.
const (
	nodeBranch = iota // a fork in the trie only: no prefix of the delta's
	nodeRoute         // the route to the prefix is e
	nodeGone          // the base's route to the prefix is deleted
)

// trieNode is a prefix in a delta's trie: key is its first address,
// left-aligned (an IPv4 address in the top 32 bits), bits its length;
// child[b] holds the longer prefixes whose bit number bits is b. A node
// is never changed once in a trie: an Update makes new ones.
type trieNode struct {
	key   u128
	bits  uint8
	kind  uint8
	base  int32 // the base entry of the prefix, -1 none (route and gone nodes)
	e     *deltaEntry
	child [2]*trieNode
}

// bucketFilter marks 2^16 buckets, an address's top 16 bits, in 16 pages
// of 4096 bits shared between FIBs until one is written (filterWriter).
type bucketFilter [16]*[64]uint64

// has reports whether bucket b is marked.
func (f *bucketFilter) has(b uint32) bool {
	p := f[b>>12&15]
	return p != nil && p[b>>6&63]&(1<<(b&63)) != 0
}

// filterWriter marks buckets of a filter copied from another FIB's,
// copying each shared page it writes once.
type filterWriter struct {
	f   *bucketFilter
	own [16]bool
}

// mark marks the buckets the prefix of left-aligned key and length n
// overlaps.
func (w *filterWriter) mark(key u128, n uint8) {
	first, count := uint32(key.hi>>48), uint32(1)
	if n < 16 {
		count = 1 << (16 - n)
	}
	for b := first; b < first+count; b++ {
		pg := b >> 12
		if !w.own[pg] {
			p := new([64]uint64)
			if w.f[pg] != nil {
				*p = *w.f[pg]
			}
			w.f[pg], w.own[pg] = p, true
		}
		w.f[pg][b>>6&63] |= 1 << (b & 63)
	}
}

// prefixKey returns p's family (0 IPv4, 1 IPv6), left-aligned first
// address and length; ok is false for a prefix no FIB holds (invalid,
// with host bits, IPv4-mapped).
func prefixKey(p netip.Prefix) (fam int, key u128, n uint8, ok bool) {
	if !p.IsValid() || p.Masked() != p || p.Addr().Is4In6() {
		return 0, u128{}, 0, false
	}
	if p.Addr().Is4() {
		return 0, u128{addr32(p.Addr()).lo << 32, 0}, uint8(p.Bits()), true
	}
	return 1, addr128(p.Addr()), uint8(p.Bits()), true
}

// bitAt returns bit i of a, 0 the most significant.
func bitAt(a u128, i uint8) int {
	if i < 64 {
		return int(a.hi >> (63 - i) & 1)
	}
	return int(a.lo >> (127 - i) & 1)
}

// commonBits returns how many leading bits a and b share, at most n.
func commonBits(a, b u128, n uint8) uint8 {
	x := u128{a.hi ^ b.hi, a.lo ^ b.lo}
	c := bits.LeadingZeros64(x.hi)
	if x.hi == 0 {
		c = 64 + bits.LeadingZeros64(x.lo)
	}
	return uint8(min(c, int(n)))
}

// topBits returns a with all but its first n bits cleared.
func topBits(a u128, n uint8) u128 {
	switch {
	case n == 0:
		return u128{}
	case n < 64:
		return u128{a.hi &^ (^uint64(0) >> n), 0}
	case n < 128:
		return u128{a.hi, a.lo &^ (^uint64(0) >> (n - 64))}
	}
	return a
}

// holds reports whether n's prefix holds the prefix (or address, n 128)
// of key and length l.
func (t *trieNode) holds(key u128, l uint8) bool {
	return t.bits <= l && commonBits(t.key, key, t.bits) == t.bits
}

// trieGet returns the node of exactly the prefix (key, l), nil if none.
func trieGet(t *trieNode, key u128, l uint8) *trieNode {
	for t != nil && t.holds(key, l) {
		if t.bits == l {
			return t
		}
		t = t.child[bitAt(key, t.bits)]
	}
	return nil
}

// trieSet returns t with the prefix (key, l) set to v's kind, base and
// entry (v's key, bits and children are ignored), copying the path to it.
func trieSet(t *trieNode, key u128, l uint8, v *trieNode) *trieNode {
	leaf := func() *trieNode {
		return &trieNode{key: key, bits: l, kind: v.kind, base: v.base, e: v.e}
	}
	if t == nil {
		return leaf()
	}
	c := commonBits(t.key, key, min(t.bits, l))
	switch {
	case c == t.bits && c == l:
		m := *t
		m.kind, m.base, m.e = v.kind, v.base, v.e
		return &m
	case c == t.bits:
		m := *t
		b := bitAt(key, t.bits)
		m.child[b] = trieSet(t.child[b], key, l, v)
		return &m
	case c == l:
		x := leaf()
		x.child[bitAt(t.key, l)] = t
		return x
	}
	br := &trieNode{key: topBits(key, c), bits: c, kind: nodeBranch, base: -1}
	br.child[bitAt(key, c)] = leaf()
	br.child[bitAt(t.key, c)] = t
	return br
}

// trieDelete returns t without the prefix (key, l), copying the path to
// it and dropping forks left with one branch.
func trieDelete(t *trieNode, key u128, l uint8) *trieNode {
	if t == nil || !t.holds(key, l) {
		return t
	}
	if t.bits == l {
		switch {
		case t.child[0] != nil && t.child[1] != nil:
			m := *t
			m.kind, m.base, m.e = nodeBranch, -1, nil
			return &m
		case t.child[0] != nil:
			return t.child[0]
		}
		return t.child[1]
	}
	b := bitAt(key, t.bits)
	c := trieDelete(t.child[b], key, l)
	switch {
	case c == t.child[b]:
		return t
	case c == nil && t.kind == nodeBranch:
		return t.child[1-b]
	}
	m := *t
	m.child[b] = c
	return &m
}

// lookupDelta is the lookup of left-aligned address a of family fam in a
// FIB with a delta, i the base's answer (see the delta's description).
func (f *FIB) lookupDelta(fam int, a u128, i int32) (*FIBEntry, bool) {
	var best *deltaEntry
	var touched [3]uint64 // lengths 0 to 128 of the touched prefixes holding a
	for t := f.d.tries[fam]; t != nil && t.holds(a, 128); {
		if t.kind != nodeBranch {
			touched[t.bits>>6] |= 1 << (t.bits & 63)
			if t.e != nil {
				best = t.e
			}
		}
		if t.bits == 128 {
			break
		}
		t = t.child[bitAt(a, t.bits)]
	}
	if touched == [3]uint64{} && i >= 0 { // no touched prefix holds a: the base's answer stands
		return &f.entries[i], true
	}
	for i >= 0 {
		l := f.entries[i].Prefix.Bits()
		if touched[l>>6]&(1<<(l&63)) == 0 {
			break
		}
		i = f.parent[i]
	}
	if best != nil && (i < 0 || best.Prefix.Bits() > f.entries[i].Prefix.Bits()) {
		return &best.FIBEntry, true
	}
	if i < 0 {
		return nil, false
	}
	return &f.entries[i], true
}

// baseIndex returns the index of the base's entry of exactly the prefix
// (key, l) of family fam, -1 if the base has none.
func (f *FIB) baseIndex(fam int, key u128, l uint8) int32 {
	var j int32
	if fam == 0 {
		j = f.v4.lookup4(uint32(key.hi >> 32))
	} else {
		j = f.v6.lookup6(key)
	}
	for j >= 0 && f.entries[j].Prefix.Bits() > int(l) {
		j = f.parent[j]
	}
	if j >= 0 && f.entries[j].Prefix.Bits() == int(l) {
		return j
	}
	return -1
}

// deltaFits reports whether a change of k prefixes goes into f's delta
// rather than a rebuild.
func (f *FIB) deltaFits(k int) bool {
	if f == nil || f.base == nil {
		return false
	}
	n := 0
	if f.d != nil {
		n = len(f.d.gone) + len(f.d.added)
	}
	return n+k <= max(minDelta, len(f.entries)/deltaShare)
}

// compactDue reports whether f's delta is past the bound Tables folds it
// at.
func (f *FIB) compactDue() bool {
	return f != nil && f.d != nil && len(f.d.gone)+len(f.d.added) >= max(minCompact, len(f.entries)/compactShare)
}

// compacted returns f's routes, in f's order, as a new base.
func (f *FIB) compacted() (*FIB, error) {
	nb, err := f.rebuild(nil, nil, nil)
	if err == nil && f.base != nil {
		nb.base.from.base, nb.base.from.d = weak.Make(f.base), f.d
	}
	return nb, err
}

// rebased returns cur's routes over nb, which holds old's routes as a
// base of its own (old.compacted()): old's routes less those deleted or
// replaced since old, then the routes added since old (those of cur's
// added numbered from old's next seq on), which is cur's order. It costs
// the changes since old; ok is false when cur did not come from old by
// Updates into one delta, or when the changes since old do not fit in
// nb's delta.
func rebased(nb, old, cur *FIB) (*FIB, bool) {
	if cur.base != old.base || old.d == nil || cur.d == nil {
		return nil, false
	}
	_, removed, ok := cur.Changes(old, int(^uint(0)>>1))
	if !ok {
		return nil, false
	}
	added := cur.d.added
	from := sort.Search(len(added), func(i int) bool { return added[i].seq >= old.d.seq })
	if !nb.deltaFits(len(added) - from + len(removed)) {
		return nil, false // the writers changed so much meanwhile that they fold it themselves
	}
	routes := make([]Route, 0, len(added)-from)
	for _, e := range added[from:] {
		routes = append(routes, e.Route())
	}
	f, err := nb.Update(routes, removed)
	return f, err == nil
}

// sumCounts sets maxLabels and minMTU from the counts.
func (f *FIB) sumCounts() {
	f.maxLabels = 0
	for l := len(f.labels) - 1; l > 0; l-- {
		if f.labels[l] > 0 {
			f.maxLabels = l
			break
		}
	}
	f.minMTU = 0
	for m, c := range f.mtus {
		if c > 0 && (f.minMTU == 0 || m < f.minMTU) {
			f.minMTU = m
		}
	}
}

// deltaUpdate is one Update's change to a FIB with a delta.
type deltaUpdate struct {
	f, nf   *FIB
	d       *fibDelta
	filters [2]filterWriter
	gone    []int32  // base entries this change hides
	dropped []uint64 // seqs of the delta's routes this change removes
	added   []*deltaEntry
	mtusOwn bool // nf.mtus is nf's own copy
	groups  map[string]*Group
	key     []byte
}

// updateDelta is Update into f's delta (deltaFits); add has no
// duplicates.
func (f *FIB) updateDelta(add []Route, del []netip.Prefix) (*FIB, error) {
	for i := range add {
		if err := checkRoute(&add[i]); err != nil {
			return nil, &TableError{Table: "FIB", Index: i, Key: add[i].Prefix.String(), Err: err}
		}
	}
	nf := *f
	d := &fibDelta{}
	if f.d != nil {
		*d = *f.d
	}
	nf.d = d
	u := &deltaUpdate{f: f, nf: &nf, d: d}
	for i := range u.filters {
		u.filters[i].f = &d.filters[i]
	}
	for _, p := range del {
		u.set(p, nil)
	}
	for i := range add {
		u.set(add[i].Prefix, &add[i])
	}
	u.finish()
	return &nf, nil
}

// set makes the delta's route to p r's, or deletes it (r nil).
func (u *deltaUpdate) set(p netip.Prefix, r *Route) {
	fam, key, l, ok := prefixKey(p)
	if !ok {
		return // no FIB holds such a prefix: nothing to delete
	}
	root := &u.d.tries[fam]
	t := trieGet(*root, key, l)
	base := int32(-1)
	if t != nil && t.kind != nodeBranch {
		base = t.base
		if t.kind == nodeRoute {
			u.count(&t.e.FIBEntry, -1)
			u.dropped = append(u.dropped, t.e.seq)
		}
	} else if base = u.f.baseIndex(fam, key, l); base >= 0 {
		u.count(&u.f.entries[base], -1)
		u.gone = append(u.gone, base)
	}
	switch {
	case r != nil:
		e := &deltaEntry{FIBEntry: FIBEntry{Prefix: p, Group: u.group(r.NextHops), MTU: r.MTU, TTL: r.TTL}, seq: u.d.seq}
		u.d.seq++
		u.count(&e.FIBEntry, 1)
		u.added = append(u.added, e)
		*root = trieSet(*root, key, l, &trieNode{kind: nodeRoute, base: base, e: e})
	case base >= 0:
		if t != nil && t.kind == nodeGone {
			return // deleted already
		}
		*root = trieSet(*root, key, l, &trieNode{kind: nodeGone, base: base})
	case t != nil && t.kind == nodeRoute:
		*root = trieDelete(*root, key, l)
	default:
		return // no route to p
	}
	u.filters[fam].mark(key, l)
}

// count adds the route e to the new FIB's counts (by -1: takes it out).
func (u *deltaUpdate) count(e *FIBEntry, by int32) {
	nf := u.nf
	nf.n += int(by)
	nf.labels[e.Group.MaxLabels] += by
	if e.MTU == 0 {
		return
	}
	if !u.mtusOwn {
		nf.mtus, u.mtusOwn = maps.Clone(nf.mtus), true
		if nf.mtus == nil {
			nf.mtus = map[uint32]int32{}
		}
	}
	if nf.mtus[e.MTU] += by; nf.mtus[e.MTU] == 0 {
		delete(nf.mtus, e.MTU)
	}
}

// group returns the group for hops: one the FIB already holds (groups,
// dgroups) or this update made, else a new one.
func (u *deltaUpdate) group(hops []NextHop) *Group {
	u.key = groupKey(u.key[:0], hops)
	k := string(u.key)
	if g, ok := u.f.groups[k]; ok {
		return g
	}
	if g, ok := u.f.dgroups[k]; ok {
		return g
	}
	if g, ok := u.groups[k]; ok {
		return g
	}
	g := newGroup(hops)
	if u.groups == nil {
		u.groups = map[string]*Group{}
	}
	u.groups[k] = g
	return g
}

// finish writes the change's lists and counts into the new FIB.
func (u *deltaUpdate) finish() {
	d, nf := u.d, u.nf
	if len(u.gone) > 0 {
		slices.Sort(u.gone)
		gone := make([]int32, 0, len(d.gone)+len(u.gone))
		old := d.gone
		for _, g := range u.gone {
			j, _ := slices.BinarySearch(old, g)
			gone = append(append(gone, old[:j]...), g)
			old = old[j:]
		}
		d.gone = append(gone, old...)
	}
	if len(u.dropped) > 0 || len(u.added) > 0 {
		slices.Sort(u.dropped)
		added := make([]*deltaEntry, 0, len(d.added)-len(u.dropped)+len(u.added))
		old := d.added
		for _, s := range u.dropped {
			j := sort.Search(len(old), func(j int) bool { return old[j].seq >= s })
			if j < len(old) && old[j].seq == s {
				added = append(added, old[:j]...)
				old = old[j+1:]
			}
		}
		added = append(added, old...)
		d.added = append(added, u.added...)
	}
	if len(u.groups) > 0 && len(nf.dgroups)+len(u.groups) <= maxDeltaGroups {
		dg := maps.Clone(nf.dgroups)
		if dg == nil {
			dg = map[string]*Group{}
		}
		maps.Copy(dg, u.groups)
		nf.dgroups = dg
	}
	nf.sumCounts()
}

// entry is FIB.Entry(i) for f with this delta: the i-th base entry not
// gone, else an added route.
func (d *fibDelta) entry(f *FIB, i int) *FIBEntry {
	nb := len(f.entries) - len(d.gone)
	if i >= nb {
		return &d.added[i-nb].FIBEntry
	}
	// gone[m]-m base entries stand before gone[m]: the i-th standing one
	// comes after the first k gone entries, those with gone[m]-m <= i.
	k := sort.Search(len(d.gone), func(m int) bool { return int(d.gone[m])-m > i })
	return &f.entries[i+k]
}

// Changes returns what differs between old and f: the routes of f that
// old lacks or holds otherwise (changed; a route replaced by the same
// next-hop group, MTU and TTL is not one) and the prefixes of old's
// routes that f does not hold (removed). When old and f share a base
// (f came from old, or both from one FIB, by Updates that did not fold
// the delta) it costs the paths to the prefixes that differ, and about
// as little when Tables built f's base from a FIB of old's (a
// compaction, while old is held); ok is false otherwise (a rebuild in
// between), or when more than limit prefixes differ (the caller then
// walks both tables).
func (f *FIB) Changes(old *FIB, limit int) (changed []*FIBEntry, removed []netip.Prefix, ok bool) {
	if f != nil && old != nil && f.base != old.base && f.base.from.base.Value() == old.base && old.base != nil {
		return f.changesAcross(old, limit)
	}
	if f == nil || old == nil || f.base != old.base {
		return nil, nil, false
	}
	if f.d == old.d {
		return nil, nil, true
	}
	var od, nd fibDelta
	if old.d != nil {
		od = *old.d
	}
	if f.d != nil {
		nd = *f.d
	}
	n := 0
	emit := func(x, y *trieNode) bool {
		ox, nx := f.effective(x, y), f.effective(y, x)
		switch {
		case nx != nil && (ox == nil || !sameEntry(ox, nx)):
			changed = append(changed, nx)
		case nx == nil && ox != nil:
			removed = append(removed, ox.Prefix)
		default:
			return true
		}
		n++
		return n <= limit
	}
	for fam := range od.tries {
		if !trieDiff(od.tries[fam], nd.tries[fam], emit) {
			return nil, nil, false
		}
	}
	return changed, removed, true
}

// changesAcross is Changes for f over a base compacted from a FIB X of
// old's base (fibBase.from): the prefixes that differ are among those
// where old and X differ and those f's delta holds.
func (f *FIB) changesAcross(old *FIB, limit int) (changed []*FIBEntry, removed []netip.Prefix, ok bool) {
	var od, xd fibDelta
	if old.d != nil {
		od = *old.d
	}
	if x := f.base.from.d; x != nil {
		xd = *x
	}
	seen := map[netip.Prefix]bool{}
	check := func(p netip.Prefix) bool {
		if seen[p] {
			return true
		}
		seen[p] = true
		ox, nx := old.exact(p), f.exact(p)
		switch {
		case nx != nil && (ox == nil || !sameEntry(ox, nx)):
			changed = append(changed, nx)
		case nx == nil && ox != nil:
			removed = append(removed, p)
		default:
			return true
		}
		return len(changed)+len(removed) <= limit
	}
	for fam := range od.tries {
		node := func(t *trieNode) bool { return check(keyPrefix(fam, t.key, t.bits)) }
		if !trieDiff(od.tries[fam], xd.tries[fam], func(x, y *trieNode) bool { return node(cmp.Or(x, y)) }) {
			return nil, nil, false
		}
		if f.d != nil && !trieEach(f.d.tries[fam], node) {
			return nil, nil, false
		}
	}
	return changed, removed, true
}

// sameEntry reports whether a and b route alike by Changes' rule: the
// same group, MTU and label TTL.
func sameEntry(a, b *FIBEntry) bool { return a.Group == b.Group && a.MTU == b.MTU && a.TTL == b.TTL }

// exact returns f's route to exactly p, nil if none.
func (f *FIB) exact(p netip.Prefix) *FIBEntry {
	fam, key, l, ok := prefixKey(p)
	if !ok {
		return nil
	}
	if f.d != nil {
		if t := trieGet(f.d.tries[fam], key, l); t != nil && t.kind != nodeBranch {
			if t.kind == nodeRoute {
				return &t.e.FIBEntry
			}
			return nil
		}
	}
	if i := f.baseIndex(fam, key, l); i >= 0 {
		return &f.entries[i]
	}
	return nil
}

// keyPrefix is the prefix of family fam, left-aligned first address
// key and length l (prefixKey's inverse).
func keyPrefix(fam int, key u128, l uint8) netip.Prefix {
	if fam == 0 {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(key.hi >> 56), byte(key.hi >> 48), byte(key.hi >> 40), byte(key.hi >> 32)}), int(l))
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], key.hi)
	binary.BigEndian.PutUint64(b[8:], key.lo)
	return netip.PrefixFrom(netip.AddrFrom16(b), int(l))
}

// effective returns the route to the prefix of x (a node of one delta's
// trie, nil when that trie lacks the prefix) in the FIB of that delta,
// over f's base; y is the other trie's node of the prefix.
func (f *FIB) effective(x, y *trieNode) *FIBEntry {
	switch {
	case x != nil && x.kind == nodeRoute:
		return &x.e.FIBEntry
	case x != nil && x.kind == nodeGone:
		return nil
	case y != nil && y.kind != nodeBranch && y.base >= 0:
		return &f.entries[y.base]
	}
	return nil
}

// valued returns t, or nil when t is a fork only.
func valued(t *trieNode) *trieNode {
	if t == nil || t.kind == nodeBranch {
		return nil
	}
	return t
}

// trieDiff calls emit(xn, yn) for each prefix that x or y holds (a route
// or gone node) and the two do not share the node of, xn and yn its
// nodes (nil in a trie without it), skipping the subtrees the tries
// share; it stops, returning false, when emit does.
func trieDiff(x, y *trieNode, emit func(x, y *trieNode) bool) bool {
	switch {
	case x == y:
		return true
	case x == nil:
		return trieEach(y, func(t *trieNode) bool { return emit(nil, t) })
	case y == nil:
		return trieEach(x, func(t *trieNode) bool { return emit(t, nil) })
	case x.bits == y.bits && x.key == y.key:
		if (valued(x) != nil || valued(y) != nil) && !emit(valued(x), valued(y)) {
			return false
		}
		return trieDiff(x.child[0], y.child[0], emit) && trieDiff(x.child[1], y.child[1], emit)
	case x.bits < y.bits && x.holds(y.key, y.bits):
		if valued(x) != nil && !emit(x, nil) {
			return false
		}
		b := bitAt(y.key, x.bits)
		return trieDiff(x.child[b], y, emit) && trieEach(x.child[1-b], func(t *trieNode) bool { return emit(t, nil) })
	case y.bits < x.bits && y.holds(x.key, x.bits):
		if valued(y) != nil && !emit(nil, y) {
			return false
		}
		b := bitAt(x.key, y.bits)
		return trieDiff(x, y.child[b], emit) && trieEach(y.child[1-b], func(t *trieNode) bool { return emit(nil, t) })
	}
	return trieEach(x, func(t *trieNode) bool { return emit(t, nil) }) &&
		trieEach(y, func(t *trieNode) bool { return emit(nil, t) })
}

// trieEach calls fn for each route or gone node of t, stopping (false)
// when fn does.
func trieEach(t *trieNode, fn func(*trieNode) bool) bool {
	if t == nil {
		return true
	}
	if t.kind != nodeBranch && !fn(t) {
		return false
	}
	return trieEach(t.child[0], fn) && trieEach(t.child[1], fn)
}
