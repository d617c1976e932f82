package mpls

import "fmt"

// FIBIndexSize describes the size of f's lookup index, for tests and
// benchmarks.
func FIBIndexSize(f *FIB) string {
	sz := func(r *rangeIndex) string {
		return fmt.Sprintf("%d nodes, %d slots (%.1f MiB), leaves %.1f MiB",
			len(r.nodes), len(r.slots), float64(len(r.slots)*4)/(1<<20), float64(len(r.leaves)*4)/(1<<20))
	}
	return "IPv4: " + sz(&f.v4) + "; IPv6: " + sz(&f.v6)
}

// FIBIndexKinds counts the slots of f's index by kind (direct, leaf1,
// leaf3, leaf7, child, node), both families together.
func FIBIndexKinds(f *FIB) map[string]int {
	m := map[string]int{}
	for _, r := range []*rangeIndex{&f.v4, &f.v6} {
		for _, s := range r.slots {
			switch s & 3 {
			case slotDirect:
				m["direct"]++
			case slotLeaf:
				m["leaf"+fmt.Sprint(leafKeys[s>>2&3])]++
			case slotChild:
				m["child"]++
			case slotNode:
				m["node"]++
			}
		}
	}
	return m
}
