package mplsendpoint_test

import (
	"fmt"
	"testing"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
)

// BenchmarkTransfer measures a TCP transfer A -> B over the in-process pair:
// plain Ethernet vs 1 and 3 labels, in each GSO mode, link MTU 1500.
func BenchmarkTransfer(b *testing.B) {
	const chunk = 4 << 20
	for _, nl := range []int{0, 1, 3} {
		for _, g := range []mplsendpoint.GSOMode{mplsendpoint.GSOOff, mplsendpoint.GSOStack, mplsendpoint.GSOEndpoint} {
			b.Run(fmt.Sprintf("labels=%d/gso=%v", nl, g), func(b *testing.B) {
				p := newPair(b, pairConfig{labels: labelStack(nl), gso: g, mtu: 1500})
				b.SetBytes(chunk)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					sent, got := transfer(b, p, false, chunk)
					if sent != got {
						b.Fatal("SHA-256 mismatch")
					}
				}
			})
		}
	}
}
