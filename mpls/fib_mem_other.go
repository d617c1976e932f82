//go:build !linux

package mpls

// mapIndex returns n zeroed words for a FIB index, 64-byte aligned, on
// the Go heap.
func mapIndex(n int) (words []uint32, mapped []byte) { return heapIndex(n), nil }

func unmapIndex([2][]byte) {}
