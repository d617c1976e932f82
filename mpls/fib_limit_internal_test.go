package mpls

import "testing"

// TestDirectSlotLimit checks that every entry index build accepts
// (maxEntries of them) round-trips through a direct slot: with maxEntries
// one larger, the last index would wrap to "no route" (checked: it fails
// so).
func TestDirectSlotLimit(t *testing.T) {
	for _, idx := range []int32{-1, 0, 1, maxEntries - 1} {
		s := direct(idx)
		if s&3 != slotDirect {
			t.Fatalf("direct(%d) = %#x: kind %d, want slotDirect", idx, s, s&3)
		}
		if got := int32(s>>2) - 1; got != idx {
			t.Errorf("direct(%d) decodes to %d", idx, got)
		}
	}
}
