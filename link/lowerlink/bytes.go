package lowerlink

import (
	"iter"

	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Slices yields a packet's bytes, link header first, from byte skip on, in
// the slices gVisor holds them in (empty ones left out): what a lower link
// builds its iovecs from, or copies into a ring slot, without flattening
// the packet first.
func Slices(pkt *stack.PacketBuffer, skip int) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		vl, off := pkt.AsViewList()
		off += skip
		for v := vl.Front(); v != nil; v = v.Next() {
			b := v.AsSlice()
			if off >= len(b) {
				off -= len(b)
				continue
			}
			b, off = b[off:], 0
			if !yield(b) {
				return
			}
		}
	}
}

// CopyPacket copies a packet's bytes, link header first, into dst and
// returns how many it copied (all of them when dst holds pkt.Size()).
func CopyPacket(dst []byte, pkt *stack.PacketBuffer) int {
	n := 0
	for b := range Slices(pkt, 0) {
		n += copy(dst[n:], b)
	}
	return n
}
