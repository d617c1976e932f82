package lsrrate

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkGenerator measures the generator alone: frames sent per second
// into a veth whose peer's kernel discards them early (they are not for its
// MAC address). It is the ceiling of what Run can offer a forwarder on
// this machine, and shows that sending allocates nothing per frame.
func BenchmarkGenerator(b *testing.B) {
	skipUnlessRoot(b)
	for _, size := range []int{64, 1500} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			t := testTopology(b)
			g, err := openAFPacketGenerator(t.gen.path(), t.genDev)
			if err != nil {
				b.Fatal(err)
			}
			defer g.close()
			benchSend(b, g, size)
		})
	}
}

// BenchmarkBuildFrame measures building one frame (done genFlows times per
// frame size, before the clock of a measurement starts).
func BenchmarkBuildFrame(b *testing.B) {
	spec := testSpec(inLabel, 1500)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildFrame(spec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkXDPGenerator measures the XDP generator alone, on the calling
// thread: frames redirected per second into a veth whose peer (GRO on, so
// it takes them) discards them early (not for its MAC address).
func BenchmarkXDPGenerator(b *testing.B) {
	skipUnlessRoot(b)
	for _, size := range []int{64, 1500} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			t := testTopology(b)
			if out, err := t.lsr.exec("ethtool", "-K", t.lsrIn, "gro", "on"); err != nil {
				b.Fatalf("ethtool: %v: %s", err, out)
			}
			g, err := openXDPGenerator(t.gen.path(), t.genDev)
			if err != nil {
				b.Skipf("XDP generator: %v", err)
			}
			defer g.close()
			benchSend(b, g, size)
		})
	}
}

// benchSend measures g sending b.N frames of size bytes (send: exactly
// that many, what the kernel refuses sent again) to nobody's MAC address,
// so that the peer's kernel discards them early.
func benchSend(b *testing.B, g frameGenerator, size int) {
	spec := testSpec(inLabel, size)
	spec.dst = [6]byte{0x02, 0, 0, 0, 0, 0x99} // nobody's MAC
	if err := g.setFrames(spec); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	if err := g.send(uint64(b.N)); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "frames/s")
}
