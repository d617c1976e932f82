package mpls

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// Minimum IP MTUs a route may set.
const (
	minIPv4MTU = 68   // RFC 791: every IPv4 module must forward 68 bytes
	minIPv6MTU = 1280 // RFC 8200 §5: IPv6 minimum link MTU
)

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
// entries[idx[i]], or none when idx[i] < 0. The FIB's range index is built
// from it (fib_index.go).
type intervals struct {
	starts []u128
	idx    []int32
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
// disjoint) into intervals; max is the family's highest address. It sets
// parent[s.idx] of each span s to the entry of the next shorter prefix
// that covers it, -1 for none (what a lookup falls back to when a FIB's
// delta deletes s: fib_delta.go). When two spans are the same prefix, it
// reports their indexes in dupA < dupB (else -1, -1) and the result is
// not usable.
func buildIntervals(spans []span, max u128, parent []int32) (t intervals, dupA, dupB int32) {
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
		parent[s.idx] = cur(open)
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
