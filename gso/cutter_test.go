package gso_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/mplsnode/mplsnode/gso"
)

// cutAll segments p with a Cutter, copying the payload chunk by chunk
// from a separate buffer as a caller with scattered payload would, and
// returns the segments.
func cutAll(p gso.Packet) ([][]byte, error) {
	hdrLen := p.L4Offset + int(p.Buf[p.L4Offset+12]>>4)*4
	payload := p.Buf[hdrLen:]
	c, err := gso.NewCutter(bytes.Clone(p.Buf[:hdrLen]), p.PrefixLen, p.Proto, p.L4Offset, len(payload), p.MSS)
	if err != nil {
		return nil, err
	}
	var segs [][]byte
	for i := range c.Segments() {
		seg := make([]byte, c.SegmentLen(i))
		n := copy(seg, c.Header())
		off, l := c.PayloadRange(i)
		copy(seg[n:], payload[off:off+l])
		c.Finish(i, seg)
		segs = append(segs, seg)
	}
	return segs, nil
}

// checkCutter reports how Cutter's segments of p differ from Segment's.
func checkCutter(p gso.Packet) error {
	want, err := segment(p)
	if err != nil {
		return err
	}
	got, err := cutAll(p)
	if err != nil {
		return fmt.Errorf("Segment accepted the packet, NewCutter said %w", err)
	}
	if len(got) != len(want) {
		return fmt.Errorf("Cutter made %d segments, Segment %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			return fmt.Errorf("segment %d differs from Segment's", i)
		}
	}
	return nil
}

// TestCutterMatchesSegment: segment by segment with the payload copied in
// by the caller, the Cutter writes exactly Segment's bytes (every seed
// packet: IPv4 and IPv6, labels, options, extension headers, flags, one
// and many segments), and it refuses what Segment refuses, with the same
// reason. Checked by planting bugs in Finish's use of the chunk offset
// (the sequence number of segment 0 for every segment) and of the segment
// index (the IPv4 ID): both fail here.
func TestCutterMatchesSegment(t *testing.T) {
	for name, p := range seedPackets() {
		t.Run(name, func(t *testing.T) {
			if err := checkCutter(p); err != nil {
				t.Fatal(err)
			}
		})
	}
	hdrOnly := build(spec{prefix: prefixN(1), payload: payloadN(3000), flags: fACK | fSYN})
	p := hdrOnly
	p.MSS = 1000
	_, want := gso.SegmentedLen(p)
	_, got := cutAll(p)
	if want == nil || !errors.Is(got, errors.Unwrap(want)) {
		t.Fatalf("SYN over 3 segments: NewCutter said %v, Segment %v", got, want)
	}
	hdrLen := p.L4Offset + 20
	if _, err := gso.NewCutter(p.Buf[:hdrLen+1], p.PrefixLen, p.Proto, p.L4Offset, 10, 1000); !errors.Is(err, gso.ErrBadHeaderLength) {
		t.Fatalf("headers with a payload byte: %v, want ErrBadHeaderLength", err)
	}
}

// TestCutterZeroAllocs: a Cutter allocates nothing.
func TestCutterZeroAllocs(t *testing.T) {
	p := build(spec{prefix: prefixN(1), tcpOpts: tsOpt, payload: payloadN(45 * 1448), mss: 1448, flags: fACK | fPSH})
	hdrLen := p.L4Offset + int(p.Buf[p.L4Offset+12]>>4)*4
	seg := make([]byte, hdrLen+1448)
	allocs := testing.AllocsPerRun(100, func() {
		c, err := gso.NewCutter(p.Buf[:hdrLen], p.PrefixLen, p.Proto, p.L4Offset, len(p.Buf)-hdrLen, p.MSS)
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.Segments() {
			s := seg[:c.SegmentLen(i)]
			copy(s, c.Header())
			c.Finish(i, s)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per packet, want 0", allocs)
	}
}
