package forward_test

import (
	"bytes"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/forward/labelstats"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// lgroMode says whether the endpoints merge labelled TCP segments for the
// switch (labelled GRO, link/mplsendpoint/lgro.go) or hand it every frame.
type lgroMode int

const (
	withLGRO   lgroMode = iota // the switch is the endpoints' GSOForwarder
	perSegment                 // the switch hidden behind Forward and EndBatch
)

var lgroModes = []lgroMode{withLGRO, perSegment}

func (m lgroMode) String() string {
	if m == perSegment {
		return "per segment"
	}
	return "labelled GRO"
}

// segmentSwitch is a switch that is no GSOForwarder: the endpoints give
// it each frame on its own.
type segmentSwitch struct{ sw *forward.Switch }

func (s segmentSwitch) Forward(in *mplsendpoint.Endpoint, req *mplsendpoint.ForwardRequest) {
	s.sw.Forward(in, req)
}

func (s segmentSwitch) EndBatch(in *mplsendpoint.Endpoint) { s.sw.EndBatch(in) }

// gsoCall is one merged packet offered to ForwardGSO: its GSOMSS, its
// size (link header on) and whether the switch took it.
type gsoCall struct {
	mss, size int
	took      bool
}

// recordingSwitch is a switch that records the merged packets offered to
// its ForwardGSO.
type recordingSwitch struct {
	*forward.Switch
	mu    sync.Mutex
	calls []gsoCall
}

func (r *recordingSwitch) ForwardGSO(in *mplsendpoint.Endpoint, req *mplsendpoint.ForwardRequest) bool {
	size := req.Packet.Data().Size()
	took := r.Switch.ForwardGSO(in, req)
	r.mu.Lock()
	r.calls = append(r.calls, gsoCall{mss: req.GSOMSS, size: size, took: took})
	r.mu.Unlock()
	return took
}

// wantGSOCalls fails t unless the merged packets offered to the switch
// since the last call were want (none when the endpoints do not merge).
func wantGSOCalls(t testing.TB, p plane, mode lgroMode, want ...gsoCall) {
	t.Helper()
	p.rec.mu.Lock()
	got := p.rec.calls
	p.rec.calls = nil
	p.rec.mu.Unlock()
	if mode == perSegment {
		want = nil
	}
	if !slices.Equal(got, want) {
		t.Errorf("ForwardGSO offered %+v, want %+v", got, want)
	}
}

// lgroSegs is a receive batch of count full segments of mss payload bytes
// of one TCP flow (seg's), under label with TTL ttl, and their payload.
func lgroSegs(label uint32, ttl uint8, mss, count int) (frames [][]byte, data []byte) {
	data = patterned(mss*count, 5)
	for i := range count {
		frames = append(frames, labelled([]uint32{label}, ttl, seg(data, i*mss, mss, 0)))
	}
	return frames, data
}

// TestLabelledGROPopsWhole: a receive batch of one flow's segments popped
// to IP (label 102) towards a link that takes GSO frames is merged by the
// endpoint and taken by the switch whole: one GSO packet leaves, MSS the
// segments' size, standing for all of them, the TTL decremented once (as
// on each segment), the IPv4 header valid, the TCP checksum the partial
// one. Every counter counts each segment as the per-segment path does
// (checked against it): forwarded, popped, coalesced, the label's packets
// and bytes from the stack on. Planted (by hand, each failed this test):
// popped, label packets, label bytes, forwarded or coalesced counted once
// per merged packet; the decline when the egress link takes no GSO frames
// removed (TestLabelledGRODeclines).
func TestLabelledGROPopsWhole(t *testing.T) {
	const mss, count = 1400, 8
	frames, data := lgroSegs(102, 64, mss, count)
	warm := labelled([]uint32{102}, 64, seg(make([]byte, 100), 0, 100, 0))
	var outs [][]byte
	var stats []forward.Stats
	for _, mode := range lgroModes {
		t.Run(mode.String(), func(t *testing.T) {
			n, in, out := groLSRWith(t, lsrV4, hop2, groOpts{mode: mode})
			warmUp(t, in, out, warm)
			for _, f := range frames {
				inject(in.Endpoint, f)
			}
			in.endBatch(t)
			wantGSOCalls(t, n, mode, gsoCall{mss: mss, size: len(frames[0]) + (count-1)*mss, took: true})
			g, frame := out.first(t, n, 1, "the segments as one GSO packet")
			ip := header.IPv4(frame[header.EthernetMinimumSize:])
			tcp := header.TCP(ip.Payload())
			if g.GSOOptions.Type != gstack.GSOTCPv4 || g.GSOOptions.MSS != mss || !g.GSOOptions.NeedsCsum ||
				g.GSOOptions.CsumOffset != header.TCPChecksumOffset || g.GSOOptions.L3HdrLen != header.IPv4MinimumSize {
				t.Errorf("GSO options %+v, want TCPv4, MSS %d, partial checksum at 16, L3 20", g.GSOOptions, mss)
			}
			if segs := (len(tcp.Payload()) + mss - 1) / mss; segs != count || !bytes.Equal(tcp.Payload(), data) {
				t.Errorf("%d payload bytes (%d segments), equal %v; want the %d segments' %d in order", len(tcp.Payload()), segs,
					bytes.Equal(tcp.Payload(), data), count, len(data))
			}
			if ip.TTL() != 63 || !ip.IsChecksumValid() || int(ip.TotalLength()) != len(frame)-header.EthernetMinimumSize ||
				header.Ethernet(frame).Type() != header.IPv4ProtocolNumber {
				t.Errorf("IP TTL %d (want 63), checksum valid %v, total length %d for %d bytes, ethertype %#x", ip.TTL(),
					ip.IsChecksumValid(), ip.TotalLength(), len(frame)-header.EthernetMinimumSize, header.Ethernet(frame).Type())
			}
			if want := header.PseudoHeaderChecksum(header.TCPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(),
				uint16(len(ip.Payload()))); tcp.Checksum() != want || tcp.SequenceNumber() != 1000 {
				t.Errorf("TCP checksum %#x seq %d, want the pseudo-header sum %#x, 1000", tcp.Checksum(), tcp.SequenceNumber(), want)
			}
			st := n.sw.Stats()
			if st.Forwarded != 1+count || st.PoppedIP != 1+count || st.Coalesced != count-1 || st.Swapped != 0 || st.Queued != 0 {
				t.Errorf("forwarded %d popped %d coalesced %d swapped %d queued %d; want %d, %d, %d, 0, 0",
					st.Forwarded, st.PoppedIP, st.Coalesced, st.Swapped, st.Queued, 1+count, 1+count, count-1)
			}
			wantBytes := uint64(len(warm) - header.EthernetMinimumSize + count*(len(frames[0])-header.EthernetMinimumSize))
			if got, want := n.sw.LabelStats().Load(102), (labelstats.Count{Packets: 1 + count, Bytes: wantBytes}); got != want {
				t.Errorf("label 102 counted %+v, want %+v", got, want)
			}
			outs = append(outs, slices.Clone(frame))
			stats = append(stats, st)
		})
	}
	if len(outs) == 2 && (!bytes.Equal(outs[0], outs[1]) || stats[0] != stats[1]) {
		t.Errorf("labelled GRO and per segment differ: frames equal %v; counters %+v and %+v", bytes.Equal(outs[0], outs[1]), stats[0], stats[1])
	}
}

// TestLabelledGRODeclines: merged packets the switch must not send whole
// are declined and cut back by the endpoint, each segment forwarded or
// dropped and counted on its own as without labelled GRO: a swap (the
// frame leaves labelled, and no link takes labelled GSO frames), a pop
// towards a link that takes no GSO frames, a label TTL of 1 (each segment
// expires with its ICMP time exceeded), and segments that do not fit the
// egress link once popped (each refused with its ICMP fragmentation
// needed); a swap is not even merged (nothing is offered). Planted (by
// hand, each failed this test): the swap merged and offered, the egress
// GSO check removed, a drop verdict taken and counted once, the decision
// made on a one-byte first segment.
func TestLabelledGRODeclines(t *testing.T) {
	const mss, count = 1400, 6
	for _, tc := range []struct {
		name  string
		label uint32
		ttl   uint8
		o     groOpts
		// what each segment becomes: out labelled (the swap's label) or
		// popped; or none leave and each is counted as drop.
		swapped bool
		drop    forward.Drop
		none    bool
	}{
		{name: "swap", label: 100, ttl: 64, swapped: true},
		{name: "pop towards a link without GSO frames", label: 102, ttl: 64, o: groOpts{plain: true}},
		{name: "label TTL 1", label: 102, ttl: 1, drop: forward.DropTTLExpired, none: true},
		{name: "segments larger than the egress MTU", label: 102, ttl: 64, o: groOpts{outMTU: 1400}, drop: forward.DropMTUExceeded, none: true},
	} {
		frames, data := lgroSegs(tc.label, tc.ttl, mss, count)
		for _, mode := range lgroModes {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				o := tc.o
				o.mode = mode
				n, in, out := groLSRWith(t, lsrV4, hop2, o)
				n.neighbor(t, "in0", netip.MustParseAddr("10.1.0.2"), macPrev) // the ICMP errors' way back
				warmUp(t, in, out, labelled([]uint32{tc.label}, 64, seg(make([]byte, 100), 0, 100, 0)))
				base := n.sw.Stats()
				in.Drain()
				for _, f := range frames {
					inject(in.Endpoint, f)
				}
				in.endBatch(t)
				if tc.swapped {
					// The endpoint does not merge what an ILM swap
					// keeps labelled: nothing is offered.
					wantGSOCalls(t, n, mode)
				} else {
					wantGSOCalls(t, n, mode, gsoCall{mss: mss, size: len(frames[0]) + (count-1)*mss, took: false})
				}
				st := n.sw.Stats()
				if tc.none {
					if len(out.pkts) != 0 || st.Drop(tc.drop) != count || st.Forwarded != base.Forwarded ||
						st.ICMPSent-base.ICMPSent != count || in.NumQueued() != count {
						t.Errorf("%d packets out, %s %d, forwarded %d, ICMP sent %d, %d frames back on in0; want 0, %d, %d, %d, %d",
							len(out.pkts), tc.drop, st.Drop(tc.drop), st.Forwarded, st.ICMPSent-base.ICMPSent, in.NumQueued(),
							count, base.Forwarded, count, count)
					}
					return
				}
				if len(out.pkts) != count {
					t.Fatalf("%d packets out, want the %d segments; switch %+v", len(out.pkts), count, st)
				}
				stackLen := 0
				if tc.swapped {
					stackLen = mpls.EntryLen
				}
				for i, p := range out.pkts {
					frame := frameBytes(p)
					if want := len(frames[i]) - mpls.EntryLen + stackLen; p.GSOOptions.Type != gstack.GSONone || len(frame) != want {
						t.Fatalf("segment %d: GSO %+v, %d bytes; want a plain frame of %d", i, p.GSOOptions, len(frame), want)
					}
					ip := header.IPv4(frame[header.EthernetMinimumSize+stackLen:])
					tcp := header.TCP(ip.Payload())
					if !bytes.Equal(tcp.Payload(), data[i*mss:(i+1)*mss]) || tcp.SequenceNumber() != uint32(1000+i*mss) ||
						!ip.IsChecksumValid() || !tcpChecksumValid(ip) {
						t.Errorf("segment %d: seq %d, payload equal %v, IP checksum valid %v, TCP checksum valid %v", i,
							tcp.SequenceNumber(), bytes.Equal(tcp.Payload(), data[i*mss:(i+1)*mss]), ip.IsChecksumValid(), tcpChecksumValid(ip))
					}
					if tc.swapped {
						e := mpls.DecodeEntry(frame[header.EthernetMinimumSize:])
						if e.Label != 200 || e.TTL != 63 || !e.S || ip.TTL() != 64 {
							t.Errorf("segment %d: label %+v, IP TTL %d; want 200 TTL 63 S, IP TTL 64", i, e, ip.TTL())
						}
					} else if ip.TTL() != 63 {
						t.Errorf("segment %d: IP TTL %d, want 63", i, ip.TTL())
					}
				}
				swapped, popped := uint64(0), uint64(1+count)
				if tc.swapped {
					swapped, popped = 1+count, 0
				}
				if st.Forwarded != 1+count || st.Swapped != swapped || st.PoppedIP != popped || st.Coalesced != 0 {
					t.Errorf("forwarded %d swapped %d popped %d coalesced %d; want %d, %d, %d, 0",
						st.Forwarded, st.Swapped, st.PoppedIP, st.Coalesced, 1+count, swapped, popped)
				}
				if got := n.sw.LabelStats().Load(mpls.Label(tc.label)); got.Packets != 1+count {
					t.Errorf("label %d counted %+v, want %d packets", tc.label, got, 1+count)
				}
			})
		}
	}
}

// tcpChecksumValid reports whether the TCP checksum of the IPv4 packet ip
// verifies.
func tcpChecksumValid(ip header.IPv4) bool {
	seg := ip.Payload()
	pseudo := header.PseudoHeaderChecksum(header.TCPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), uint16(len(seg)))
	return checksum.Checksum(seg, pseudo) == 0xffff
}

// TestLabelledGROQueued: a batch popped towards a next hop whose MAC is
// not known yet waits for it; taken whole, the merged packet waits as one
// frame and counts as its segments queued, then forwarded once the next
// hop resolves, as the segments do per segment. Planted (by hand, each
// failed this test): transmitSegs counting one queued frame, write
// counting one forwarded frame.
func TestLabelledGROQueued(t *testing.T) {
	const mss, count = 1400, 5
	frames, _ := lgroSegs(102, 64, mss, count)
	for _, mode := range lgroModes {
		t.Run(mode.String(), func(t *testing.T) {
			n, in, out := groLSRWith(t, lsrV4, hop2, groOpts{mode: mode, unresolved: true})
			// The warm-up frame has no ILM entry: it teaches in0's batches
			// without asking for the next hop.
			warmUp(t, in, out, labelled([]uint32{999}, 64, seg(make([]byte, 100), 0, 100, 0)))
			for _, f := range frames {
				inject(in.Endpoint, f)
			}
			in.endBatch(t)
			wantGSOCalls(t, n, mode, gsoCall{mss: mss, size: len(frames[0]) + (count-1)*mss, took: true})
			if st := n.sw.Stats(); st.Queued != count || st.Forwarded != 0 {
				t.Fatalf("queued %d forwarded %d before the next hop resolved; want %d, 0", st.Queued, st.Forwarded, count)
			}
			// The next hop answers the ARP request.
			if req := readFrame(t, out.Endpoint); len(req) < 14 || header.Ethernet(req).Type() != header.ARPProtocolNumber {
				t.Fatalf("got %x, want the ARP request for the next hop", req)
			}
			reply := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(reply, gopacket.SerializeOptions{},
				&layers.Ethernet{SrcMAC: []byte(macNext), DstMAC: []byte(macOut), EthernetType: layers.EthernetTypeARP},
				&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
					Operation: layers.ARPReply, SourceHwAddress: []byte(macNext), SourceProtAddress: []byte{10, 2, 0, 2},
					DstHwAddress: []byte(macOut), DstProtAddress: []byte{10, 2, 0, 1}}); err != nil {
				t.Fatal(err)
			}
			inject(out.Endpoint, reply.Bytes())
			deadline := time.Now().Add(5 * time.Second)
			for n.sw.Stats().Forwarded < count && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			st := n.sw.Stats()
			var gso, plain int
			for _, p := range out.pkts {
				switch {
				case p.NetworkProtocolNumber != header.IPv4ProtocolNumber:
				case p.GSOOptions.Type == gstack.GSOTCPv4 && p.GSOOptions.MSS == mss:
					gso++
				default:
					plain++
				}
			}
			wantGSO, wantPlain := 1, 0 // the merged packet whole
			if mode == perSegment {
				wantGSO, wantPlain = 0, count
			}
			if st.Forwarded != count || st.Queued != count || st.PoppedIP != count || gso != wantGSO || plain != wantPlain {
				t.Errorf("forwarded %d queued %d popped %d, %d GSO and %d plain IP frames out; want %d, %d, %d, %d, %d",
					st.Forwarded, st.Queued, st.PoppedIP, gso, plain, count, count, count, wantGSO, wantPlain)
			}
		})
	}
}
