package xdp

import (
	"testing"

	"github.com/mplsnode/mplsnode/forward/labelstats"
	"github.com/mplsnode/mplsnode/mpls"
)

// TestLabelStats: the frames the program carries count per incoming label,
// their bytes from the label stack on as received; the frames it passes
// up count nothing (the userspace plane counts them); a Sync that rewrites
// the ILM map keeps the counts.
func TestLabelStats(t *testing.T) {
	p := newTestProgram(t, mpls.TTLUniform, true, swapEntry(100, 200, 300), popEntry(101))
	swap := frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 64}}, ipv4(t, 64, 100))
	pop := frame(ourMAC, []mpls.Entry{{Label: 101, S: true, TTL: 64}}, ipv4(t, 64, 300))
	passed := [][]byte{
		frame(ourMAC, []mpls.Entry{{Label: 102, S: true, TTL: 64}}, ipv4(t, 64, 100)),  // no entry
		frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 1}}, ipv4(t, 64, 100)),   // TTL expires
		frame(peerMAC, []mpls.Entry{{Label: 101, S: true, TTL: 64}}, ipv4(t, 64, 100)), // not for us
	}
	runN := func(f []byte, n int, want uint32) {
		t.Helper()
		for range n {
			if ret, _ := run(t, p, f); ret != want {
				t.Fatalf("action %d, want %d; counters %v", ret, want, mustCounters(t, p))
			}
		}
	}
	runN(swap, 5, xdpRedirect)
	runN(pop, 3, xdpRedirect)
	for _, f := range passed {
		runN(f, 2, xdpPass)
	}
	want := labelstats.Snapshot{
		100: {Packets: 5, Bytes: 5 * uint64(len(swap)-14)},
		101: {Packets: 3, Bytes: 3 * uint64(len(pop)-14)},
	}
	check := func() {
		t.Helper()
		got, err := p.LabelStats()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("got counts for %d labels (%v), want %d (%v)", len(got), got, len(want), want)
		}
		for l, w := range want {
			if got[l] != w {
				t.Fatalf("label %d: got %+v, want %+v", l, got[l], w)
			}
		}
	}
	check()

	// The mirror rewrites the ILM map: 100 swaps elsewhere, 101 goes.
	if err := p.Sync([]Entry{swapEntry(100, 400)}); err != nil {
		t.Fatal(err)
	}
	check()
	runN(swap, 2, xdpRedirect)
	runN(pop, 1, xdpPass)
	c := want[100]
	c.Packets += 2
	c.Bytes += 2 * uint64(len(swap)-14)
	want[100] = c
	check()
}
