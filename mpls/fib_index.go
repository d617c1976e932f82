package mpls

import (
	"errors"
	"math/bits"
	"slices"
	"unsafe"
)

// rangeIndex finds the range of an address among the FIB's disjoint
// address ranges (intervals: range i starts at starts[i], starts[0] is
// address 0) and returns the range's entry. It is a radix tree over the
// range starts that adapts to where they are, built so that a lookup
// touches few cache lines and the whole index is small (about 8 to 16
// bytes a range start; the starts themselves are not kept):
//
//   - a node covers the addresses [base, base+lim] and spreads them over
//     up to 2^maxNodeBits buckets of width 2^shift; below base the answer
//     is before, above base+lim it is after (the last range's entry);
//   - a bucket is a 32-bit slot: the answer itself when no range starts
//     inside the bucket (or one starts at its start); a leaf when a few
//     do (their starts, as 32-bit offsets in the bucket, and their
//     entries, side by side in one cache line); an aligned child when
//     many do (2^k buckets splitting this one, found in slots, no header
//     to read), whose buckets may be fat (a 3-start leaf in place, see
//     fatChild) or, for buckets of at most 128 addresses, a cache line
//     each (an 11-start leaf in place, see lineChild: a run of host
//     routes); or a node of its own when the starts crowd a small part
//     of the bucket (path compression: deep clusters, such as IPv6 host
//     routes in one /64, cost one extra node, not a level per few bits);
//   - each node and child takes the bucket width that costs the least
//     memory near the average fill (chooseBits), which often matches how
//     the prefixes are laid out (a run of /24s gets /24 buckets, all
//     answers in the slots).
//
// A lookup reads the root node (in cache: one per table), the root slot,
// any child slots, and the leaf: for a table of a million routes one to
// three cache lines (the route-scaling table: two, of which the root
// slot is nearly always in cache). Addresses are handled as offsets from
// the node's base (rel); IPv4 addresses use only the low 32 bits. A large index has
// its own mapping in huge pages (mapIndex), so that its random reads do
// not each miss the TLB.
type rangeIndex struct {
	nodes  []rangeNode // nodes[0] is the root; empty when one range covers all
	slots  []uint32
	leaves []uint32 // 64-byte aligned: no leaf crosses a cache line
	only   int32    // the answer when nodes is empty
	// root is the root node as lookup4 and lookup6 read it.
	root fastRoot
	// mapped is the memory of slots and leaves when it is not on the Go
	// heap (mapIndex): the FIB unmaps it when it is collected.
	mapped []byte
}

// fastRoot is the root node in the form the first step of lookup4 and
// lookup6 reads, with no slice of nodes to go through: the offset rel of
// a key (an IPv4 address, or the high 64 bits of an IPv6 one) from base
// finds its slot at slots[slot+rel>>shift] when it is below end. A key
// outside (always, when end is 0) takes lookup.
type fastRoot struct {
	base, end uint64
	shift     uint32
	slot      uint32
}

// setRoot fills r.root from the root node, for lookup4 (v6 false: every
// start of the index is below 2^32) or lookup6: when the root's buckets
// are at least 2^64 wide and its base's low 64 bits zero (prefixes of /64
// or shorter, as in a full table), an offset's high 64 bits alone find
// its slot.
func (r *rangeIndex) setRoot(v6 bool) {
	if len(r.nodes) == 0 {
		return
	}
	nd := &r.nodes[0]
	switch {
	case !v6 && nd.base.hi == 0 && nd.lim.hi == 0 && nd.shift < 64:
		r.root = fastRoot{base: nd.base.lo, end: nd.lim.lo + 1, shift: nd.shift, slot: nd.slot}
	case v6 && nd.base.lo == 0 && nd.shift >= 64:
		// Offsets of high word lim.hi may be past the limit: lookup.
		r.root = fastRoot{base: nd.base.hi, end: nd.lim.hi, shift: nd.shift - 64, slot: nd.slot}
	}
}

// heapIndex returns n zeroed words on the Go heap, 64-byte aligned (Go
// aligns a large array to 16 bytes at least).
func heapIndex(n int) []uint32 {
	buf := make([]uint32, n+15)
	pad := (64 - uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%64) % 64 / 4
	return buf[pad : pad+uintptr(n) : pad+uintptr(n)]
}

// rangeNode is a node: the addresses [base, base+lim] spread over
// lim>>shift+1 buckets, slots[slot:]; below base the answer is before,
// above base+lim it is after.
type rangeNode struct {
	base, lim     u128
	shift         uint32
	slot          uint32
	before, after int32
}

// Slot encoding: the low two bits are the kind.
const (
	slotDirect = 0 // bits 2..31: the answer + 1 (0: no route)
	slotLeaf   = 1 // bits 2..3: leaf class; bits 4..31: offset in leaves / 4
	slotChild  = 2 // bits 2..5: k-1; bit 6: fatChild; bits 7..31: offset of the child in slots (with lineChild: bit 7 set)
	slotNode   = 3 // bits 2..31: index in nodes

	// fatChild marks an aligned child of fat buckets: 8 words each (32
	// bytes, aligned), a leaf of up to 3 starts in place (the layout of
	// a class 1 leaf) whose last word is fatInline, or, for a bucket of
	// more starts, whose last word is the bucket's slot. Where buckets
	// hold a few starts each (spaced host routes), this saves the read
	// of a leaf at about the same size.
	fatChild  = 1 << 6
	fatInline = ^uint32(0)
	fatWords  = 8

	// lineChild, with fatChild, marks an aligned child of line buckets:
	// 16 words each (a cache line), for buckets of at most 2^lineBits
	// addresses, such as a run of host routes a few addresses apart.
	// Words 0 to 2 hold up to lineKeys starts as bytes (offsets in the
	// bucket; the 12th byte and padding are lineKeyPad), words 3 to 14 the
	// answers before the first start and after each (padding repeats the
	// last), word 15 fatInline, or, for a bucket of more starts, the
	// bucket's slot. Half the memory of fat buckets for such runs, with
	// the same one read. A line child's offset is a multiple of 16, a fat
	// one's of 8: the offset's bit 0 (slot bit 7) is free for the mark.
	lineChild  = 1 << 7
	lineWords  = 16
	lineKeys   = 11
	lineBits   = 7
	lineKeyPad = 0x7f

	maxNodeBits  = 20        // buckets of a node at most 2^20
	maxChildBits = 16        // buckets of an aligned child at most 2^16
	leafCap      = 7         // range starts a leaf holds at most (class 2)
	perBucket    = 4         // range starts a bucket should hold on average
	maxSlots     = 1 << 25   // what slotChild can address
	maxNodes     = 1 << 29   // what slotNode can address, fatInline aside
	maxLeafUnits = 1 << 28   // what slotLeaf can address, in 4-word units
	maxEntries   = 1<<30 - 1 // entries a slotDirect answer (index + 1, 30 bits) can name
)

// A leaf of class c holds up to leafKeys[c] starts in 4<<c words: the
// starts (offsets in the bucket, shifted right by the bucket's drop bits,
// padded with 0xffffffff), then the answers for "before the first start"
// and after each start (padding repeats the last).
var leafKeys = [3]int{1, 3, 7}

// errIndexTooLarge is returned when a table outgrows the slot encoding
// (tens of millions of routes).
var errIndexTooLarge = errors.New("FIB too large for its index")

// lookup returns the entry index of the range holding a, or -1.
func (r *rangeIndex) lookup(a u128) int32 {
	if len(r.nodes) == 0 {
		return r.only
	}
	nd := &r.nodes[0]
	if a.less(nd.base) {
		return nd.before
	}
	rel := a.sub(nd.base)
	if nd.lim.less(rel) {
		return nd.after
	}
	s := uint(nd.shift)
	return r.walk(a, r.slots[nd.slot+uint32(rel.shrLo(s))], rel, s)
}

// lookup4 is lookup for an IPv4 index: the common steps (the root slot,
// an aligned child, a fat or line bucket's inline leaf) in 64-bit
// arithmetic, the rest through walk. A cold lookup waits for its loads
// from memory, and a core meanwhile runs ahead into the next lookups of a
// burst as far as its reorder window reaches: the fewer instructions a
// lookup takes, the more of their misses overlap (written without
// branches on what the loads return, it measured slower: more
// instructions).
func (r *rangeIndex) lookup4(a uint32) int32 {
	rt := &r.root
	rel := uint64(a) - rt.base // wraps when a is below base
	if rel >= rt.end {
		return r.lookup(u128{0, uint64(a)})
	}
	s := uint(rt.shift) & 63
	slot := r.slots[rt.slot+uint32(rel>>s)]
	if slot&3 == slotChild {
		k := uint(slot>>2&15) + 1
		s = (s - k) & 63 // a child's bits never exceed its bucket's
		b := uint32(rel>>s) & (1<<k - 1)
		if slot&fatChild == 0 {
			slot = r.slots[slot>>7+b]
		} else if slot&lineChild != 0 {
			f := r.slots[slot>>7&^1+lineWords*b:]
			f = f[:lineWords:lineWords]
			if slot = f[15]; slot == fatInline {
				return int32(f[3+lineRank(f, uint32(rel)&(1<<s-1))])
			}
		} else {
			f := r.slots[slot>>7+fatWords*b:]
			f = f[:fatWords:fatWords]
			if slot = f[7]; slot == fatInline {
				x := uint32(rel) & (1<<s - 1) // s <= 31: the whole offset
				return int32(f[3+b2u(f[0] <= x)+b2u(f[1] <= x)+b2u(f[2] <= x)])
			}
		}
	}
	if slot&3 == slotDirect {
		return int32(slot>>2) - 1
	}
	return r.walk(u128{0, uint64(a)}, slot, u128{0, rel}, s)
}

// lookup6 is lookup for an IPv6 index: the root slot and a plain aligned
// child of it found from the address's high 64 bits (see setRoot and
// lookup4), the rest through walk.
func (r *rangeIndex) lookup6(a u128) int32 {
	rt := &r.root
	rel := a.hi - rt.base // wraps when a is below base
	if rel >= rt.end {
		return r.lookup(a)
	}
	s := uint(rt.shift) & 63
	slot := r.slots[rt.slot+uint32(rel>>s)]
	if slot&(3|fatChild) == slotChild {
		if k := uint(slot>>2&15) + 1; k <= s {
			s -= k
			slot = r.slots[slot>>7+uint32(rel>>s)&(1<<k-1)]
		}
	}
	if slot&3 == slotDirect {
		return int32(slot>>2) - 1
	}
	return r.walk(a, slot, u128{rel, a.lo}, s+64)
}

// walk returns the answer for a of slot, a bucket of width 2^s, where a
// is at rel from the base of the bucket's node.
func (r *rangeIndex) walk(a u128, slot uint32, rel u128, s uint) int32 {
	for {
		for slot&3 == slotChild {
			k := uint(slot>>2&15) + 1
			s -= k
			b := uint32(rel.shrLo(s)) & (1<<k - 1)
			if slot&fatChild == 0 {
				slot = r.slots[slot>>7+b]
				continue
			}
			if slot&lineChild != 0 {
				f := r.slots[slot>>7&^1+lineWords*b:]
				f = f[:lineWords:lineWords]
				if slot = f[15]; slot == fatInline {
					return int32(f[3+lineRank(f, uint32(rel.lo)&(1<<s-1))])
				}
				continue
			}
			f := r.slots[slot>>7+fatWords*b:]
			f = f[:fatWords:fatWords]
			if slot = f[7]; slot == fatInline {
				x := bucketBits(rel, s)
				return int32(f[3+b2u(f[0] <= x)+b2u(f[1] <= x)+b2u(f[2] <= x)])
			}
		}
		switch slot & 3 {
		case slotDirect:
			return int32(slot>>2) - 1
		case slotLeaf:
			return r.leaf(slot, rel, s)
		}
		nd := &r.nodes[slot>>2]
		if a.less(nd.base) {
			return nd.before
		}
		rel = a.sub(nd.base)
		if nd.lim.less(rel) {
			return nd.after
		}
		s = uint(nd.shift)
		slot = r.slots[nd.slot+uint32(rel.shrLo(s))]
	}
}

// leaf returns the answer of the leaf in slot for rel in a bucket of
// width 2^s.
func (r *rangeIndex) leaf(slot uint32, rel u128, s uint) int32 {
	x := bucketBits(rel, s)
	o := slot >> 4 << 2
	switch slot >> 2 & 3 {
	case 0:
		l := r.leaves[o : o+3 : o+3]
		return int32(l[1+b2u(l[0] <= x)])
	case 1:
		l := r.leaves[o : o+7 : o+7]
		n := b2u(l[0] <= x) + b2u(l[1] <= x) + b2u(l[2] <= x)
		return int32(l[3+n])
	}
	l := r.leaves[o : o+15 : o+15]
	n := b2u(l[0] <= x) + b2u(l[1] <= x) + b2u(l[2] <= x) + b2u(l[3] <= x) +
		b2u(l[4] <= x) + b2u(l[5] <= x) + b2u(l[6] <= x)
	return int32(l[7+n])
}

// bucketBits returns rel's offset in its bucket of width 2^s as a leaf
// stores its starts: the top 32 bits of the offset when it is wider.
func bucketBits(rel u128, s uint) uint32 {
	d := uint(0)
	if s > 32 {
		d = s - 32
	}
	return uint32(rel.shrLo(d)) & (^uint32(0) >> (32 - (s - d)))
}

// lineRank returns how many of the starts of line bucket f are at or
// before x (x < 2^lineBits): the bytes of words 0 to 2 compared at once,
// each as x+128-start, whose top bit stays set when start <= x (no lane
// borrows from the next: a start is below 128).
func lineRank(f []uint32, x uint32) uint32 {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	x8 := uint64(x)*ones | tops
	n := bits.OnesCount64((x8 - (uint64(f[0]) | uint64(f[1])<<32)) & tops)
	return uint32(n + bits.OnesCount32((uint32(x8)-f[2])&0x00808080))
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// shrLo returns the low 64 bits of a>>s.
func (a u128) shrLo(s uint) uint64 {
	if s >= 64 {
		return a.hi >> (s - 64)
	}
	return a.lo>>s | a.hi<<(64-s) // a.hi<<64 is 0 in Go
}

// shl returns a<<s.
func (a u128) shl(s uint) u128 {
	if s >= 64 {
		return u128{a.lo << (s - 64), 0}
	}
	return u128{a.hi<<s | a.lo>>(64-s), a.lo << s}
}

func (a u128) add(b u128) u128 {
	lo, carry := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, carry)
	return u128{hi, lo}
}

// lowZero reports whether the low s bits of a are zero.
func (a u128) lowZero(s uint) bool {
	switch {
	case s == 0:
		return true
	case s >= 128:
		return a == u128{}
	case s >= 64:
		return a.lo == 0 && a.hi<<(128-s) == 0
	}
	return a.lo<<(64-s) == 0
}

// indexBuilder builds a rangeIndex over the intervals' starts.
type indexBuilder struct {
	r      rangeIndex
	starts []u128
	idx    []int32
	cur    [2]uint32 // per leaf class 0, 1: 4-word units left in its current block, next unit
	next   [2]uint32
	err    error
}

// newRangeIndex builds the index of one family's intervals (v6: IPv6).
func newRangeIndex(iv intervals, v6 bool) (rangeIndex, error) {
	if len(iv.starts) <= 1 {
		only := int32(-1)
		if len(iv.idx) == 1 {
			only = iv.idx[0]
		}
		return rangeIndex{only: only}, nil
	}
	b := &indexBuilder{starts: iv.starts, idx: iv.idx}
	// starts[0] is address 0 (the range below every prefix): the root
	// starts at starts[1], so that its buckets cover where prefixes are.
	b.node(1, len(iv.starts))
	if b.err != nil {
		return rangeIndex{}, b.err
	}
	// Copy the slots and the leaves into one 64-byte aligned array
	// (mapIndex), the leaves from a line boundary, so that no leaf crosses
	// a cache line.
	ns := (len(b.r.slots) + 15) &^ 15
	mem, mapped := mapIndex(ns + len(b.r.leaves))
	b.r.slots = mem[:copy(mem, b.r.slots):len(b.r.slots)]
	b.r.leaves = mem[ns : ns+copy(mem[ns:], b.r.leaves) : ns+len(b.r.leaves)]
	b.r.nodes = slices.Clip(b.r.nodes)
	b.r.mapped = mapped
	b.r.setRoot(v6)
	return b.r, nil
}

func (b *indexBuilder) start(i int) u128 { return b.starts[i] }

// bitsFor returns k such that 2^k buckets hold about perBucket of m
// starts each.
func bitsFor(m int) uint {
	return uint(bits.Len(uint(m / perBucket)))
}

// chooseBits returns the number of bits k (kmax at most) that splits
// starts [i0, i1), all in [base, base+2^width), into buckets of width
// 2^(width-k) at the least memory: the slots, plus the leaves the buckets
// need (none for a bucket whose only start is its own start), plus an
// estimate for buckets that need a child. Near bitsFor(m), this often
// finds a width that matches how the prefixes are laid out (a /24 a
// bucket), halving the index.
//
// For an aligned child (child), it also weighs fat buckets (fatChild), at
// four fifths of their memory, for the leaf read they save. It returns
// the chosen width's cost, to weigh against line buckets (chooseLine).
func (b *indexBuilder) chooseBits(i0, i1 int, base u128, width, kmax uint, child bool) (best uint, fat bool, bestCost int) {
	k0 := min(max(bitsFor(i1-i0), 1), kmax)
	best, bestCost = k0, -1
	for k := max(k0, 2) - 1; k <= min(k0+2, kmax); k++ {
		shift := width - k
		thin, thick, cur, n, first := 0, 0, ^uint64(0), 0, false
		flush := func() {
			switch {
			case n == 0 || n == 1 && first:
			case n <= 1:
				thin += 16
			case n <= 3:
				thin += 32
			case n <= leafCap:
				thin += 64
				thick += 64
			default:
				thin += 64 + 12*n
				thick += 64 + 12*n
			}
		}
		for i := i0; i < i1; i++ {
			rel := b.start(i).sub(base)
			bk := rel.shrLo(shift)
			if bk != cur {
				flush()
				cur, n, first = bk, 0, rel.lowZero(shift)
			}
			n++
		}
		flush()
		nb := int(cur + 1) // a node's buckets end at the last start's
		if child {
			nb = 1 << k
		}
		thin += 4 * nb
		thick += 4 * fatWords * nb
		if bestCost < 0 || thin < bestCost {
			best, fat, bestCost = k, false, thin
		}
		if c := thick * 4 / 5; child && c < bestCost {
			best, fat, bestCost = k, true, c
		}
	}
	return best, fat, bestCost
}

// chooseLine returns the number of bits k that splits starts [i0, i1),
// all in [base, base+2^width), into line buckets (lineChild) at the least
// memory, and that memory weighed as chooseBits weighs fat buckets; ok is
// false when no bucket width fits a line (at most 2^lineBits addresses
// and 2^maxChildBits buckets).
func (b *indexBuilder) chooseLine(i0, i1 int, base u128, width uint) (best uint, cost int, ok bool) {
	k0 := uint(bits.Len(uint((i1 - i0) / (lineKeys + 1)))) // 6 to 12 starts a bucket on average
	for k := max(k0, 2) - 1; k <= k0+1; k++ {
		if k > maxChildBits || k > width || width-k > lineBits {
			continue
		}
		shift := width - k
		c, cur, n := 4*lineWords<<k, ^uint64(0), 0
		flush := func() {
			if n > lineKeys {
				c += 64 + 12*n // the bucket's own leaf or child, as chooseBits counts it
			}
		}
		for i := i0; i < i1; i++ {
			bk := b.start(i).sub(base).shrLo(shift)
			if bk != cur {
				flush()
				cur, n = bk, 0
			}
			n++
		}
		flush()
		if c = c * 4 / 5; !ok || c < cost {
			best, cost, ok = k, c, true
		}
	}
	return best, cost, ok
}

// node adds a node over starts [i0, i1) and returns its index.
func (b *indexBuilder) node(i0, i1 int) uint32 {
	base := b.start(i0)
	lim := b.start(i1 - 1).sub(base)
	span := uint(lim.bitLen())
	k := uint(1)
	if span > 1 {
		k, _, _ = b.chooseBits(i0, i1, base, span, min(maxNodeBits, span), false)
	}
	var shift uint
	if span > k {
		shift = span - k
	}
	nb := int(lim.shrLo(shift)) + 1
	id := uint32(len(b.r.nodes))
	slot := len(b.r.slots)
	if slot+nb > maxSlots || id >= maxNodes {
		b.err = errIndexTooLarge
		return id
	}
	b.r.nodes = append(b.r.nodes, rangeNode{base: base, lim: lim, shift: uint32(shift), slot: uint32(slot),
		before: b.idx[i0-1], after: b.idx[i1-1]})
	b.r.slots = append(b.r.slots, make([]uint32, nb)...)
	b.fill(slot, nb, base, shift, i0, i1)
	return id
}

// fill sets the nb slots from slots[slot] of buckets of width 2^shift
// from start, over starts [i0, i1) (all inside them).
func (b *indexBuilder) fill(slot, nb int, start u128, shift uint, i0, i1 int) {
	i := i0
	for bk := range nb {
		bstart := start.add(u128{0, uint64(bk)}.shl(shift))
		j := b.bucketEnd(i, i1, bstart, shift, bk == nb-1)
		v := b.bucket(i, j, bstart, shift)
		if b.err != nil {
			return
		}
		b.r.slots[slot+bk] = v
		i = j
	}
}

// bucketEnd returns the end of the starts, from i (the first at or after
// bstart) up to i1, inside the bucket [bstart, bstart+2^s); the last
// bucket of a node or child holds them all. Offsets are taken modulo
// 2^128: a node's buckets above its last start may run past the top of
// the address space (bstart+2^s wraps), the offsets of the starts do not.
func (b *indexBuilder) bucketEnd(i, i1 int, bstart u128, s uint, last bool) int {
	if last {
		return i1
	}
	width := u128{0, 1}.shl(s)
	for i < i1 && b.start(i).sub(bstart).less(width) {
		i++
	}
	return i
}

// bucket returns the slot of the bucket [start, start+2^s) holding starts
// [i0, i1).
func (b *indexBuilder) bucket(i0, i1 int, start u128, s uint) uint32 {
	m := i1 - i0
	switch {
	case m == 0:
		return direct(b.idx[i0-1])
	case m == 1 && b.start(i0) == start:
		return direct(b.idx[i0])
	}
	d := uint(0)
	if s > 32 {
		d = s - 32
	}
	if m <= leafCap {
		ok := true
		for i := i0; i < i1; i++ {
			ok = ok && b.start(i).sub(start).lowZero(d)
		}
		if ok {
			return b.leaf(i0, i1, start, d)
		}
	}
	spread := uint(b.start(i1 - 1).sub(b.start(i0)).bitLen())
	if spread+8 < s || s < 2 {
		// The starts crowd a small part of the bucket: a node of their
		// own, over just them.
		return b.node(i0, i1)<<2 | slotNode
	}
	k, fat, cost := b.chooseBits(i0, i1, start, s, min(maxChildBits, s), true)
	if kl, lc, ok := b.chooseLine(i0, i1, start, s); ok && lc < cost {
		return b.lineChild(i0, i1, start, s, kl)
	}
	if fat {
		return b.fatChild(i0, i1, start, s, k)
	}
	slot := len(b.r.slots)
	if slot+1<<k > maxSlots {
		b.err = errIndexTooLarge
		return 0
	}
	b.r.slots = append(b.r.slots, make([]uint32, 1<<k)...)
	b.fill(slot, 1<<k, start, s-k, i0, i1)
	return uint32(slot)<<7 | uint32(k-1)<<2 | slotChild
}

// fatChild adds an aligned child of 2^k fat buckets (fatChild) over the
// bucket [start, start+2^s) holding starts [i0, i1), and returns its
// slot.
func (b *indexBuilder) fatChild(i0, i1 int, start u128, s, k uint) uint32 {
	// Align the child to 32 bytes (slots start on a cache line).
	slot := (len(b.r.slots) + fatWords - 1) &^ (fatWords - 1)
	if slot+fatWords<<k > maxSlots {
		b.err = errIndexTooLarge
		return 0
	}
	b.r.slots = append(b.r.slots, make([]uint32, slot+fatWords<<k-len(b.r.slots))...)
	s -= k
	i := i0
	for bk := range 1 << k {
		bstart := start.add(u128{0, uint64(bk)}.shl(s))
		j := b.bucketEnd(i, i1, bstart, s, bk == 1<<k-1)
		d := uint(0)
		if s > 32 {
			d = s - 32
		}
		inline := j-i <= 3
		for x := i; x < j && inline; x++ {
			inline = b.start(x).sub(bstart).lowZero(d)
		}
		o := slot + fatWords*bk
		if inline {
			f := b.r.slots[o : o+fatWords]
			for x := range 3 {
				f[x] = ^uint32(0)
				f[4+x] = uint32(b.idx[i-1+min(x+1, j-i)])
				if i+x < j {
					f[x] = uint32(b.start(i + x).sub(bstart).shrLo(d))
				}
			}
			f[3] = uint32(b.idx[i-1])
			f[7] = fatInline
		} else {
			v := b.bucket(i, j, bstart, s)
			if b.err != nil {
				return 0
			}
			b.r.slots[o+7] = v
		}
		i = j
	}
	return uint32(slot)<<7 | uint32(k-1)<<2 | fatChild | slotChild
}

// lineChild adds an aligned child of 2^k line buckets (lineChild) over
// the bucket [start, start+2^s) holding starts [i0, i1), and returns its
// slot.
func (b *indexBuilder) lineChild(i0, i1 int, start u128, s, k uint) uint32 {
	// Align the child to a cache line (slots start on one).
	slot := (len(b.r.slots) + lineWords - 1) &^ (lineWords - 1)
	if slot+lineWords<<k > maxSlots {
		b.err = errIndexTooLarge
		return 0
	}
	b.r.slots = append(b.r.slots, make([]uint32, slot+lineWords<<k-len(b.r.slots))...)
	s -= k
	i := i0
	for bk := range 1 << k {
		bstart := start.add(u128{0, uint64(bk)}.shl(s))
		j := b.bucketEnd(i, i1, bstart, s, bk == 1<<k-1)
		o := slot + lineWords*bk
		if j-i > lineKeys {
			v := b.bucket(i, j, bstart, s)
			if b.err != nil {
				return 0
			}
			b.r.slots[o+15] = v
			i = j
			continue
		}
		f := b.r.slots[o : o+lineWords]
		var keys [12]byte
		for x := range keys {
			keys[x] = lineKeyPad
			if i+x < j {
				keys[x] = byte(b.start(i + x).sub(bstart).lo)
			}
		}
		for w := range 3 {
			f[w] = uint32(keys[4*w]) | uint32(keys[4*w+1])<<8 | uint32(keys[4*w+2])<<16 | uint32(keys[4*w+3])<<24
		}
		f[3] = uint32(b.idx[i-1])
		for x := range lineKeys {
			f[4+x] = uint32(b.idx[i-1+min(x+1, j-i)])
		}
		f[15] = fatInline
		i = j
	}
	return uint32(slot)<<7 | lineChild | uint32(k-1)<<2 | fatChild | slotChild
}

func direct(idx int32) uint32 { return uint32(idx+1)<<2 | slotDirect }

// leaf writes a leaf for starts [i0, i1) of the bucket from start (drop:
// the low bits all its offsets have zero) and returns its slot.
func (b *indexBuilder) leaf(i0, i1 int, start u128, drop uint) uint32 {
	m := i1 - i0
	c := 0
	for leafKeys[c] < m {
		c++
	}
	n := leafKeys[c]
	var unit uint32 // offset in 4-word units
	if c == 2 {
		unit = uint32(len(b.r.leaves) / 4)
		b.r.leaves = append(b.r.leaves, make([]uint32, 16)...)
	} else {
		if b.cur[c] == 0 { // a fresh 64-byte block for this class
			b.next[c] = uint32(len(b.r.leaves) / 4)
			b.cur[c] = 4
			b.r.leaves = append(b.r.leaves, make([]uint32, 16)...)
		}
		unit = b.next[c]
		b.next[c] += 1 << c
		b.cur[c] -= 1 << c
	}
	if int(unit) >= maxLeafUnits {
		b.err = errIndexTooLarge
		return 0
	}
	l := b.r.leaves[unit*4:]
	for j := range n {
		if j < m {
			l[j] = uint32(b.start(i0 + j).sub(start).shrLo(drop))
		} else {
			l[j] = ^uint32(0)
		}
	}
	l[n] = uint32(b.idx[i0-1])
	for j := range n {
		l[n+1+j] = uint32(b.idx[i0+min(j, m-1)])
	}
	return unit<<4 | uint32(c)<<2 | slotLeaf
}
