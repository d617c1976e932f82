package forward_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Tests for mutations that survived issue 18's mutation testing of the
// label switch; each comment names the mutation it kills (checked by
// planting it).

// TestLabelSwitchIncomingTTLModel kills the inversion of the uniform/pipe
// incoming-TTL condition in Forward (`ttlModel == TTLUniform` to `!=`). An
// explicit null with TTL 10 sits above label 100 (TTL 64): in the uniform
// model every label above the matched one counted the same hops, so the
// packet's TTL is the outermost one, 10, and the swapped label leaves with
// 9; in the pipe model the matched label's own TTL counts: 63.
func TestLabelSwitchIncomingTTLModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model mpls.TTLModel
		want  uint8
	}{{"uniform", mpls.TTLUniform, 9}, {"pipe", mpls.TTLPipe, 63}} {
		t.Run(tc.name, func(t *testing.T) {
			spec := lsrV4
			spec.ttl = tc.model
			l := newLSR(t, spec, true)
			f := labelled(nil, 0, nil)
			f = binary.BigEndian.AppendUint32(f, 0<<12|10)        // explicit null, S=0, TTL 10
			f = binary.BigEndian.AppendUint32(f, 100<<12|1<<8|64) // label 100, S=1, TTL 64
			f = append(f, ipv4UDP(t, 64, 10)...)
			inject(l.in, f)
			out := readFrame(t, l.out)
			if out == nil {
				t.Fatalf("nothing forwarded; stats %+v", l.sw.Stats())
			}
			e := mpls.DecodeEntry(out[14:])
			if e.Label != 200 || e.TTL != tc.want {
				t.Errorf("label %d TTL %d out, want 200 TTL %d", e.Label, e.TTL, tc.want)
			}
		})
	}
}

// TestLabelSwitchMTUBoundary kills the egress MTU check at `>=` instead of
// `>` in Forward: a frame whose labelled payload is exactly the egress
// link MTU (1500: one label and 1496 bytes of IP, swapped 1 for 1) leaves
// whole; one byte more is fragmented.
func TestLabelSwitchMTUBoundary(t *testing.T) {
	l := newLSR(t, lsrV4, true)
	inject(l.in, labelled([]uint32{100}, 64, ipv4UDP(t, 64, 1496-28)))
	f := readFrame(t, l.out)
	if st := l.sw.Stats(); f == nil || len(f) != 14+1500 || st.Fragmented != 0 || st.Forwarded != 1 {
		t.Fatalf("a frame of exactly the link MTU: %d bytes out, stats %+v; want 1514 bytes, forwarded whole", len(f), st)
	}
	inject(l.in, labelled([]uint32{100}, 64, ipv4UDP(t, 64, 1497-28)))
	if st := l.sw.Stats(); st.Fragmented != 1 {
		t.Errorf("one byte over the link MTU: fragmented %d, want 1", st.Fragmented)
	}
}

// TestGRORefuses sends pairs of popped TCP segments that must not coalesce,
// each pair in one receive batch towards a link that takes GSO frames: two
// packets must leave. It kills the removal of each of GRO's refusals: the
// ACK-equality check, the contiguous-sequence check and the segment-size
// <= MSS check, in the switch's coalescing (per
// segment) and in the endpoint's labelled GRO (which then offers the
// switch nothing merged); the control pair merges either way, taken whole
// by ForwardGSO with labelled GRO.
func TestGRORefuses(t *testing.T) {
	for _, mode := range lgroModes {
		t.Run(mode.String(), func(t *testing.T) { testGRORefuses(t, mode) })
	}
}

func testGRORefuses(t *testing.T, mode lgroMode) {
	data := patterned(4000, 3)
	mk := func(off, n int, ack uint32) []byte {
		return mplstest.IPv4TCP(mplstest.TCP{
			Src: netip.MustParseAddrPort("10.1.0.2:1000"), Dst: netip.MustParseAddrPort("10.9.9.9:2000"),
			Seq: uint32(1000 + off), Ack: ack, Flags: header.TCPFlagAck, DF: true,
			Options: []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2},
			Payload: data[off : off+n],
		})
	}
	for _, tc := range []struct {
		name          string
		first, second []byte
	}{
		{"another ack", mk(0, 1000, 77), mk(1000, 1000, 78)},
		{"a sequence gap", mk(0, 1000, 77), mk(1001, 1000, 77)},
		{"an overlap", mk(0, 1000, 77), mk(999, 1000, 77)},
		{"larger than the first (the MSS)", mk(0, 1000, 77), mk(1000, 1400, 77)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, in, out := groLSRWith(t, lsrV4, hop2, groOpts{mode: mode})
			inject(in.Endpoint, labelled([]uint32{102}, 64, seg(make([]byte, 10), 0, 10, 0)))
			in.endBatch(t)
			out.Drain()
			out.release()
			inject(in.Endpoint, labelled([]uint32{102}, 64, tc.first))
			inject(in.Endpoint, labelled([]uint32{102}, 64, tc.second))
			in.endBatch(t)
			wantGSOCalls(t, p, mode)
			if st := p.sw.Stats(); len(out.pkts) != 2 || st.Coalesced != 0 || st.Forwarded != 3 {
				t.Errorf("%d packets out, %d coalesced, %d forwarded; want 2, 0, 3", len(out.pkts), st.Coalesced, st.Forwarded)
			}
			for i, o := range out.pkts {
				if o.GSOOptions.Type != gstack.GSONone {
					t.Errorf("packet %d left as GSO %+v", i, o.GSOOptions)
				}
			}
		})
	}
	// The control: the same pair contiguous, same ack, same size, merges.
	p, in, out := groLSRWith(t, lsrV4, hop2, groOpts{mode: mode})
	inject(in.Endpoint, labelled([]uint32{102}, 64, seg(make([]byte, 10), 0, 10, 0)))
	in.endBatch(t)
	out.Drain()
	out.release()
	inject(in.Endpoint, labelled([]uint32{102}, 64, mk(0, 1000, 77)))
	inject(in.Endpoint, labelled([]uint32{102}, 64, mk(1000, 1000, 77)))
	in.endBatch(t)
	// 14+4+20+32 bytes of headers and the two payloads.
	wantGSOCalls(t, p, mode, gsoCall{mss: 1000, size: 70 + 2000, took: true})
	if st := p.sw.Stats(); len(out.pkts) != 1 || st.Coalesced != 1 || st.Forwarded != 3 {
		t.Errorf("the control pair: %d packets out, %d coalesced, %d forwarded; want 1, 1, 3", len(out.pkts), st.Coalesced, st.Forwarded)
	} else if g := out.pkts[0].GSOOptions; g.Type != gstack.GSOTCPv4 || g.MSS != 1000 {
		t.Errorf("the control pair left as GSO %+v, want TCPv4 MSS 1000", g)
	}
}
