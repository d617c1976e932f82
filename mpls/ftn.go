package mpls

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// FTNEntry maps an IP prefix (a FEC) to the label stack pushed on packets to
// it (RFC 3031 FTN: FEC-to-NHLFE). It is the data of an iproute2 route
// `PREFIX encap mpls L1/L2 via NEXTHOP dev DEVICE mtu MTU ttl TTL`.
type FTNEntry struct {
	// Prefix is the destination prefix, IPv4 or IPv6, without host bits and
	// not IPv4-mapped (write 10.0.0.0/8, not ::ffff:10.0.0.0/104).
	Prefix netip.Prefix
	// Labels is the stack to push, outermost first (iproute2's 100/200: 100
	// on top). 1 to DefaultMaxDepth labels; never implicit null (3).
	Labels []Label
	// NextHop is the neighbour the labelled packet is sent to; the zero
	// value means on-link (point-to-point device). An IPv4-mapped address is
	// stored as plain IPv4.
	NextHop netip.Addr
	// Device names the egress link; "" lets the node choose.
	Device string
	// MTU is the IP MTU of the labelled route, as iproute2's `mtu`; 0 means
	// link MTU - label overhead. At least 68 (IPv4) or 1280 (IPv6).
	MTU uint32
	// TTL, when not 0, is the TTL of the pushed labels whatever the TTL
	// model (iproute2's `encap mpls ... ttl N`).
	TTL uint8
}

// LabelOverhead returns the bytes the entry's labels add to a packet.
func (e *FTNEntry) LabelOverhead() int { return EntryLen * len(e.Labels) }

// LabelTTL returns the TTL for the entry's pushed labels: e.TTL if set,
// otherwise PushTTL(model, ipTTL, pipeTTL).
func (e *FTNEntry) LabelTTL(model TTLModel, ipTTL, pipeTTL uint8) uint8 {
	if e.TTL != 0 {
		return e.TTL
	}
	return PushTTL(model, ipTTL, pipeTTL)
}

// Minimum IP MTUs an FTN entry may set.
const (
	minIPv4MTU = 68   // RFC 791: every IPv4 module must forward 68 bytes
	minIPv6MTU = 1280 // RFC 8200 §5: IPv6 minimum link MTU
)

// FTN is an immutable FEC-to-NHLFE table with longest-prefix match over
// IPv4 and IPv6. Build it with NewFTN; replace it wholesale (see Tables).
// The nil *FTN is an empty table. Lookups are safe for concurrent use.
type FTN struct {
	entries []FTNEntry
	v4, v6  intervals
}

// u128 is an address as a 128-bit unsigned integer; IPv4 uses lo only.
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func (a u128) next() u128 {
	if a.lo == ^uint64(0) {
		return u128{a.hi + 1, 0}
	}
	return u128{a.hi, a.lo + 1}
}

// intervals is the prefix set flattened into disjoint address ranges:
// range i is [starts[i], starts[i+1]) and its longest matching prefix is
// entries[idx[i]], or none when idx[i] < 0. Lookup is a binary search, so it
// costs O(log n) comparisons and allocates nothing.
type intervals struct {
	starts []u128
	idx    []int32
}

// lookup returns the index of the entry whose range holds a, or -1.
func (t *intervals) lookup(a u128) int32 {
	i, j := 0, len(t.starts)
	for i < j { // find the first start > a
		h := int(uint(i+j) >> 1)
		if a.less(t.starts[h]) {
			j = h
		} else {
			i = h + 1
		}
	}
	if i == 0 {
		return -1
	}
	return t.idx[i-1]
}

// span is one prefix as the range [first, last()] of addresses it
// covers: host is the number of host bits (32 or 128 less the prefix
// length). A million of them are sorted while a FIB builds, so it is
// kept small (24 bytes).
type span struct {
	first u128
	idx   int32
	host  uint8
}

// last returns the prefix's last address.
func (s span) last() u128 {
	switch {
	case s.host == 0:
		return s.first
	case s.host >= 128:
		return u128{^uint64(0), ^uint64(0)}
	case s.host > 64:
		return u128{s.first.hi | ^uint64(0)>>(128-s.host), ^uint64(0)}
	}
	return u128{s.first.hi, s.first.lo | ^uint64(0)>>(64-s.host)}
}

func prefixSpan(p netip.Prefix, idx int) span {
	bits := p.Bits()
	if p.Addr().Is4() {
		a := addr32(p.Addr()).lo
		host := uint64(1)<<(32-bits) - 1
		return span{first: u128{0, a &^ host}, host: uint8(32 - bits), idx: int32(idx)}
	}
	a := addr128(p.Addr())
	var hostHi, hostLo uint64
	switch {
	case bits == 0:
		hostHi, hostLo = ^uint64(0), ^uint64(0)
	case bits <= 64:
		hostHi, hostLo = ^uint64(0)>>bits, ^uint64(0)
	default:
		hostLo = ^uint64(0) >> (bits - 64)
	}
	return span{first: u128{a.hi &^ hostHi, a.lo &^ hostLo}, host: uint8(128 - bits), idx: int32(idx)}
}

// addr128 returns the IPv6 address a as a number. It reads a's bytes
// through AsSlice, not As16: As16 writes its array as two 8-byte words
// and the copy of its result reads them back as one 16-byte word, which
// the core cannot forward from the two stores (a stall of about 10 ns, as
// long as a FIB lookup in cache). AsSlice does not allocate once inlined.
func addr128(a netip.Addr) u128 {
	b := a.AsSlice()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:16])}
}

func addr32(a netip.Addr) u128 {
	b := a.As4()
	return u128{0, uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])}
}

// buildIntervals flattens prefixes (a laminar family: any two are nested or
// disjoint) into intervals; max is the family's highest address. When two
// spans are the same prefix, it reports their indexes in dupA < dupB
// (else -1, -1) and the result is not usable.
func buildIntervals(spans []span, max u128) (t intervals, dupA, dupB int32) {
	slices.SortFunc(spans, func(a, b span) int {
		switch {
		case a.first.less(b.first):
			return -1
		case b.first.less(a.first):
			return 1
		}
		return int(b.host) - int(a.host) // same start: the wider prefix opens first
	})
	for i := 1; i < len(spans); i++ {
		if a, b := spans[i-1], spans[i]; a.first == b.first && a.host == b.host {
			return intervals{}, min(a.idx, b.idx), max32(a.idx, b.idx)
		}
	}
	t.starts = make([]u128, 0, 2*len(spans)+1)
	t.idx = make([]int32, 0, 2*len(spans)+1)
	emit := func(pos u128, v int32) {
		n := len(t.starts)
		if n > 0 && t.starts[n-1] == pos { // zero-width range: replace it
			t.idx[n-1] = v
			if n > 1 && t.idx[n-2] == v {
				t.starts, t.idx = t.starts[:n-1], t.idx[:n-1]
			}
			return
		}
		if n > 0 && t.idx[n-1] == v { // same match continues
			return
		}
		t.starts = append(t.starts, pos)
		t.idx = append(t.idx, v)
	}
	cur := func(open []span) int32 {
		if len(open) == 0 {
			return -1
		}
		return open[len(open)-1].idx
	}
	emit(u128{}, -1)
	var open []span // enclosing prefixes, innermost last
	for _, s := range spans {
		for len(open) > 0 && open[len(open)-1].last().less(s.first) {
			top := open[len(open)-1]
			open = open[:len(open)-1]
			emit(top.last().next(), cur(open)) // top.last() < s.first <= max
		}
		emit(s.first, s.idx)
		open = append(open, s)
	}
	for len(open) > 0 {
		top := open[len(open)-1]
		open = open[:len(open)-1]
		if top.last() != max {
			emit(top.last().next(), cur(open))
		}
	}
	return t, -1, -1
}

func max32(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

// NewFTN validates entries and builds a table from a copy of them (later
// changes to entries or their Labels do not affect the table). Errors are
// *TableError wrapping what is wrong: an invalid prefix or one with host
// bits, an IPv4-mapped prefix, a duplicate prefix, no labels, more than
// DefaultMaxDepth labels (*TooDeepError), implicit null
// (*ReservedLabelError) or a label over 20 bits (*LabelRangeError) in
// Labels, an MTU under the IP minimum.
func NewFTN(entries []FTNEntry) (*FTN, error) {
	t := &FTN{entries: make([]FTNEntry, len(entries))}
	seen := make(map[netip.Prefix]int, len(entries))
	var v4, v6 []span
	for i, e := range entries {
		if err := checkFTNEntry(&e); err != nil {
			return nil, &TableError{Table: "FTN", Index: i, Key: e.Prefix.String(), Err: err}
		}
		if j, dup := seen[e.Prefix]; dup {
			return nil, &TableError{Table: "FTN", Index: i, Key: e.Prefix.String(), Err: fmt.Errorf("duplicate of entry %d", j)}
		}
		seen[e.Prefix] = i
		e.Labels = slices.Clone(e.Labels)
		e.NextHop = e.NextHop.Unmap()
		t.entries[i] = e
		if e.Prefix.Addr().Is4() {
			v4 = append(v4, prefixSpan(e.Prefix, i))
		} else {
			v6 = append(v6, prefixSpan(e.Prefix, i))
		}
	}
	t.v4, _, _ = buildIntervals(v4, u128{0, 1<<32 - 1})
	t.v6, _, _ = buildIntervals(v6, u128{^uint64(0), ^uint64(0)})
	return t, nil
}

func checkFTNEntry(e *FTNEntry) error {
	p := e.Prefix
	switch {
	case !p.IsValid():
		return errors.New("invalid prefix")
	case p.Masked() != p:
		return fmt.Errorf("prefix has host bits set: did you mean %s?", p.Masked())
	case p.Addr().Is4In6(): // masked, so Bits() >= 96: the ffff is inside
		return fmt.Errorf("IPv4-mapped prefix: write it as %s", netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96))
	case len(e.Labels) == 0:
		return errors.New("no labels: an FTN entry pushes at least one label")
	case len(e.Labels) > DefaultMaxDepth:
		return &TooDeepError{Offset: EntryLen * DefaultMaxDepth, Max: DefaultMaxDepth}
	}
	for j, l := range e.Labels {
		if err := checkPushLabel(l, EntryLen*j); err != nil {
			return err
		}
	}
	if e.MTU != 0 {
		minMTU := uint32(minIPv4MTU)
		if p.Addr().Is6() {
			minMTU = minIPv6MTU
		}
		if e.MTU < minMTU {
			return fmt.Errorf("MTU %d below the IP minimum %d", e.MTU, minMTU)
		}
	}
	return nil
}

// Lookup returns the entry with the longest prefix containing dst. An
// IPv4-mapped IPv6 dst is looked up as IPv4; a zone is ignored. The entry
// belongs to the table and must not be modified. Lookup allocates nothing
// and is safe for concurrent use.
func (t *FTN) Lookup(dst netip.Addr) (*FTNEntry, bool) {
	if t == nil {
		return nil, false
	}
	var i int32
	switch {
	case dst.Is4():
		i = t.v4.lookup(addr32(dst))
	case dst.Is4In6():
		i = t.v4.lookup(addr32(dst.Unmap()))
	case dst.Is6():
		i = t.v6.lookup(addr128(dst))
	default:
		return nil, false
	}
	if i < 0 {
		return nil, false
	}
	return &t.entries[i], true
}

// Len returns the number of entries.
func (t *FTN) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Entries returns the entries in the order given to NewFTN. The slice is a
// copy; the Labels slices are shared with the table and must not be
// modified.
func (t *FTN) Entries() []FTNEntry {
	if t == nil {
		return nil
	}
	return slices.Clone(t.entries)
}
