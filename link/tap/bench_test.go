package tap_test

import (
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/internal/linktest"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/link/tap"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// BenchmarkTAPTCP measures a gVisor TCP stream to the kernel through the TAP,
// a bridge and a veth: with offloads under link/mplsendpoint (GSO frames
// both ways), and without offloads under gVisor's ethernet endpoint.
func BenchmarkTAPTCP(b *testing.B) {
	for _, mode := range []string{"offloads", "plain"} {
		for _, dir := range []string{"tx", "rx"} {
			b.Run(mode+"/"+dir, func(b *testing.B) {
				tp := newTapTopo(b, tap.Options{NoOffloads: mode == "plain"})
				var ep stack.LinkEndpoint = tp.ep
				raw := mode == "offloads"
				if raw {
					m, err := mplsendpoint.New(tp.ep, mplsendpoint.Options{})
					if err != nil {
						b.Fatal(err)
					}
					ep = m
				}
				s := linktest.NewStack(b, ep, gvisorAddr, raw)
				ln := linktest.ListenIn(b, tp.b, kernelAddr.Addr().String()+":5002")
				linktest.BenchStream(b, s, ln, netip.AddrPortFrom(kernelAddr.Addr(), 5002), dir)
			})
		}
	}
}
