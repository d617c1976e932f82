package forward_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/forward/labelstats"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
)

// TestLabelStatsPerLabel sends frames through an LSR and checks the counts
// per incoming label exactly: the frames forwarded count under the label
// that decided them (below an explicit null, the label it exposed), with
// their bytes from the label stack on as received; the frames dropped
// count nothing; a frame popped for the node counts at the ingress link
// under its bottom label.
func TestLabelStatsPerLabel(t *testing.T) {
	spec := lsrV4
	spec.ilm = append(append([]mpls.ILMEntry(nil), lsrV4.ilm...),
		mpls.ILMEntry{Label: 120, Action: mpls.ILMPopLocal})
	l := newLSR(t, spec, true)
	ip := ipv4UDP(t, 64, 100)
	swap := labelled([]uint32{100}, 64, ip)
	swapInner := labelled([]uint32{100, 500}, 64, ip)
	push := labelled([]uint32{101}, 64, ipv4UDP(t, 64, 700))
	pop := labelled([]uint32{102}, 64, ip)
	// An explicit null (TTL 64, S=0) over label 101: 101 decides.
	null := labelled(nil, 0, nil)
	null = binary.BigEndian.AppendUint32(null, 0<<12|64)
	null = binary.BigEndian.AppendUint32(null, 101<<12|1<<8|64)
	null = append(null, ip...)
	// For the node: UDP to in0's own address under label 120.
	local := labelled([]uint32{120}, 64, mplstest.UDP{Src: netip.MustParseAddrPort("10.1.0.2:1234"),
		Dst: netip.MustParseAddrPort("10.1.0.1:9"), TTL: 64, Payload: make([]byte, 40)}.IPv4())
	dropped := [][]byte{
		labelled([]uint32{999}, 64, ip), // no ILM entry
		labelled([]uint32{100}, 1, ip),  // TTL expires (the ICMP error goes back on in0)
		labelled([]uint32{3}, 64, ip),   // implicit null on the wire
	}
	send := func(f []byte, n int, forwarded bool) {
		t.Helper()
		for range n {
			inject(l.in, f)
			if forwarded && readFrame(t, l.out) == nil {
				t.Fatalf("frame not forwarded; stats %+v", l.sw.Stats())
			}
		}
	}
	send(swap, 5, true)
	send(swapInner, 2, true)
	send(push, 3, true)
	send(pop, 4, true)
	send(null, 1, true)
	send(local, 6, false)
	for _, f := range dropped {
		send(f, 2, false)
	}
	b := func(f []byte, n int) uint64 { return uint64(n * (len(f) - 14)) }
	want := map[mpls.Label]labelstats.Count{
		100: {Packets: 7, Bytes: b(swap, 5) + b(swapInner, 2)},
		101: {Packets: 4, Bytes: b(push, 3) + b(null, 1)},
		102: {Packets: 4, Bytes: b(pop, 4)},
	}
	got := l.sw.LabelStats().AddTo(nil)
	if len(got) != len(want) {
		t.Errorf("switch: got counts for %d labels %v, want %d %v", len(got), got, len(want), want)
	}
	for lbl, w := range want {
		if got[lbl] != w {
			t.Errorf("switch: got label %d = %+v, want %+v", lbl, got[lbl], w)
		}
	}
	in := l.st.Endpoint("in0").LabelStats().AddTo(nil)
	wantIn := labelstats.Count{Packets: 6, Bytes: b(local, 6)}
	if len(in) != 1 || in[120] != wantIn {
		t.Errorf("in0: got %v, want only label 120 = %+v", in, wantIn)
	}
}
