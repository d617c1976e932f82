package tap_test

import (
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/internal/linktest"
)

// BenchmarkTAPTCP measures a gVisor TCP stream to the kernel through the TAP,
// a bridge and a veth.
func BenchmarkTAPTCP(b *testing.B) {
	for _, dir := range []string{"tx", "rx"} {
		b.Run(dir, func(b *testing.B) {
			tp := newTapTopo(b)
			s := linktest.NewStack(b, tp.ep, gvisorAddr, false)
			ln := linktest.ListenIn(b, tp.b, kernelAddr.Addr().String()+":5002")
			linktest.BenchStream(b, s, ln, netip.AddrPortFrom(kernelAddr.Addr(), 5002), dir)
		})
	}
}
