package gso_test

import (
	"fmt"
	"testing"

	"github.com/mplsnode/mplsnode/gso"
)

// BenchmarkSegment segments one 64 KiB TCP packet (45 x 1448 payload bytes,
// as gVisor's host GSO hands them over: MSS multiples with TCP timestamps)
// into MSS 1448 segments below Ethernet + 1 or 3 labels. Throughput counts
// payload bytes.
func BenchmarkSegment(b *testing.B) {
	const mss = 1448
	for _, v6 := range []bool{false, true} {
		for _, labels := range []int{1, 3} {
			name := fmt.Sprintf("IPv4/labels=%d", labels)
			if v6 {
				name = fmt.Sprintf("IPv6/labels=%d", labels)
			}
			b.Run(name, func(b *testing.B) {
				payload := payloadN(45 * mss)
				p := build(spec{v6: v6, prefix: prefixN(labels), tcpOpts: tsOpt, payload: payload,
					mss: mss, flags: fACK | fPSH, csum: 1})
				n, err := gso.SegmentedLen(p)
				if err != nil {
					b.Fatal(err)
				}
				dst := make([]byte, n)
				segs := make([][]byte, 0, gso.Count(p))
				b.SetBytes(int64(len(payload)))
				b.ReportAllocs()
				for b.Loop() {
					segs, err = gso.Segment(p, dst, segs[:0])
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSum measures the Internet checksum alone over one MSS of bytes.
func BenchmarkSum(b *testing.B) {
	buf := payloadN(1448)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var s uint16
	for b.Loop() {
		s += gso.Sum(buf)
	}
	_ = s
}
