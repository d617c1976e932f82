package tap_test

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/dispatch"
	"github.com/mplsnode/mplsnode/internal/testkit/linktest"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/link/tap"
	"gvisor.dev/gvisor/pkg/buffer"
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

// BenchmarkFrames measures one frame (op) written by one TAP endpoint with
// WritePackets (64 a call) and read by another through a Linux bridge:
// the per-frame cost of the TAP path, kernel bridging included, and the
// allocations per frame of both directions (0 wanted). The writer waits
// for the reader to come within 256 frames, so the TAP's queue (1000)
// never overflows.
func BenchmarkFrames(b *testing.B) {
	for _, size := range []int{64, 1514} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			netns.SkipUnlessRoot(b)
			ns := netns.New(b, "tapf")
			var tx, rx *tap.Endpoint
			if err := ns.Run(func() (err error) {
				if tx, err = tap.New(tap.Options{Name: netns.Name("tap")}); err != nil {
					return err
				}
				b.Cleanup(tx.Close)
				rx, err = tap.New(tap.Options{Name: netns.Name("tap")})
				if err == nil {
					b.Cleanup(rx.Close)
				}
				return err
			}); err != nil {
				b.Fatalf("tap.New: %v", err)
			}
			netns.Bridge(b, ns, tx.Name(), rx.Name())
			var got dispatch.Counter
			rx.Attach(&got)
			frame := make([]byte, size)
			copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x88, 0xb5})
			pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
			defer pkt.DecRef()
			var list stack.PacketBufferList
			for range 64 {
				list.PushBack(pkt)
			}
			// The bridge learns nothing from broadcast frames and floods
			// them to rx; give it a moment to reach forwarding state.
			time.Sleep(100 * time.Millisecond)
			base := got.Frames.Load()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			sent := 0
			for sent < b.N {
				n, err := tx.WritePackets(list)
				if err != nil {
					b.Fatalf("WritePackets: %v after %d frames", err, sent)
				}
				sent += n
				deadline := time.Now().Add(10 * time.Second)
				for int(got.Frames.Load()-base)+256 < sent {
					if time.Now().After(deadline) {
						b.Fatalf("after 10 s the reader had %d of %d frames; rx stats %+v", got.Frames.Load()-base, sent, rx.Stats())
					}
					time.Sleep(20 * time.Microsecond)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(sent)/float64(b.N), "frames/op")
		})
	}
}
