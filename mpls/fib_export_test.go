package mpls

import (
	"fmt"
	"unsafe"
)

// FIBIndexSize describes the size of f's lookup index, for tests and
// benchmarks.
func FIBIndexSize(f *FIB) string {
	sz := func(r *rangeIndex) string {
		return fmt.Sprintf("%d nodes, %d slots (%.1f MiB), leaves %.1f MiB",
			len(r.nodes), len(r.slots), float64(len(r.slots)*4)/(1<<20), float64(len(r.leaves)*4)/(1<<20))
	}
	return "IPv4: " + sz(&f.v4) + "; IPv6: " + sz(&f.v6)
}

// FIBIndexBytes returns the bytes of f's lookup index (slots, leaves and
// nodes of both families).
func FIBIndexBytes(f *FIB) int {
	n := 0
	for _, r := range []*rangeIndex{&f.v4, &f.v6} {
		n += 4*(len(r.slots)+len(r.leaves)) + int(unsafe.Sizeof(rangeNode{}))*len(r.nodes)
	}
	return n
}

// FIBIndexKinds counts the buckets of f's index by kind (direct, leaf1,
// leaf3, leaf7, child, fat and line: aligned children, inline: fat or
// line buckets holding their starts, node), both families together.
func FIBIndexKinds(f *FIB) map[string]int {
	m := map[string]int{}
	for _, r := range []*rangeIndex{&f.v4, &f.v6} {
		var node func(i uint32)
		var visit func(s uint32)
		node = func(i uint32) {
			nd := &r.nodes[i]
			m["node"]++
			for b := range uint32(nd.lim.shrLo(uint(nd.shift))) + 1 {
				visit(r.slots[nd.slot+b])
			}
		}
		visit = func(s uint32) {
			switch s & 3 {
			case slotDirect:
				m["direct"]++
			case slotLeaf:
				m["leaf"+fmt.Sprint(leafKeys[s>>2&3])]++
			case slotChild:
				k := s>>2&15 + 1
				if s&fatChild == 0 {
					m["child"]++
					for b := range uint32(1) << k {
						visit(r.slots[s>>7+b])
					}
					return
				}
				w := uint32(fatWords)
				if s&lineChild != 0 {
					w = lineWords
					m["line"]++
				} else {
					m["fat"]++
				}
				for b := range uint32(1) << k {
					if v := r.slots[s>>7&^1+w*b+w-1]; v == fatInline {
						m["inline"]++
					} else {
						visit(v)
					}
				}
			case slotNode:
				node(s >> 2)
			}
		}
		if len(r.nodes) > 0 {
			node(0)
		}
	}
	return m
}

// FIBIndexMapped reports whether f's index lives in its own mapping
// (mapIndex) rather than on the Go heap.
func FIBIndexMapped(f *FIB) bool { return f.v4.mapped != nil || f.v6.mapped != nil }
