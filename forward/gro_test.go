package forward_test

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"

	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// gsoLink is a batchLink whose lower link takes TCP GSO frames, like
// link/afpacket with GSOFrames (unless plain), and keeps the packets
// written.
type gsoLink struct {
	*batchLink
	// mu guards pkts against the stack's own writes from its goroutines
	// (an ARP request from a timer) while the test releases them.
	mu    sync.Mutex
	pkts  []*gstack.PacketBuffer
	plain bool // the lower link takes no GSO frames
}

func (l *gsoLink) GSOFrames() bool { return !l.plain }

// WritePackets keeps a reference to each packet written, for its
// GSOOptions, and passes it on.
func (l *gsoLink) WritePackets(pkts gstack.PacketBufferList) (int, tcpip.Error) {
	l.mu.Lock()
	for _, p := range pkts.AsSlice() {
		p.IncRef()
		l.pkts = append(l.pkts, p)
	}
	l.mu.Unlock()
	return l.batchLink.WritePackets(pkts)
}

func (l *gsoLink) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.pkts {
		p.DecRef()
	}
	l.pkts = nil
}

// first fails t unless out0 took want packets (why says which, if
// anything) and returns the first of them and its bytes.
func (l *gsoLink) first(t *testing.T, n plane, want int, why string) (*gstack.PacketBuffer, []byte) {
	t.Helper()
	if len(l.pkts) != want {
		if why != "" {
			why = " (" + why + ")"
		}
		t.Fatalf("%d packets written, want %d%s; switch %+v", len(l.pkts), want, why, n.sw.Stats())
	}
	return l.pkts[0], frameBytes(l.pkts[0])
}

// warmUp sends frame alone in a first receive batch, which teaches the
// endpoint that in0 ends its batches, and drops what left on out0.
func warmUp(t testing.TB, in *batchLink, out *gsoLink, frame []byte) {
	t.Helper()
	inject(in.Endpoint, frame)
	in.endBatch(t)
	out.Drain()
	out.release()
}

// groLSR starts the node of conf with in0 on a link that ends its receive
// batches and out0 on one that takes GSO frames, next hop resolved to
// macNext on out0; it is closed when the test ends.
func groLSR(t testing.TB, spec lsrSpec, nextHop netip.Addr) (plane, *batchLink, *gsoLink) {
	t.Helper()
	return groLSRWith(t, spec, nextHop, groOpts{})
}

// groOpts varies groLSR's node.
type groOpts struct {
	mode   lgroMode // the endpoints' labelled GRO (withLGRO by default)
	outMTU uint32   // out0's MTU (1500 if 0)
	plain  bool     // out0 takes no GSO frames
	// unresolved: the next hop on out0 is left to resolve (the test adds
	// it with plane.neighbor when it wants).
	unresolved bool
}

// groLSRWith is groLSR with the options o.
func groLSRWith(t testing.TB, spec lsrSpec, nextHop netip.Addr, o groOpts) (plane, *batchLink, *gsoLink) {
	t.Helper()
	mtu := o.outMTU
	if mtu == 0 {
		mtu = 1500
	}
	in := &batchLink{Endpoint: channel.New(256, 1500, macIn)}
	out := &gsoLink{batchLink: &batchLink{Endpoint: channel.New(256, mtu, macOut)}, plain: o.plain}
	// Released after the stack is closed (cleanups run last first): a
	// frame the stack writes on its own (an ARP request from a timer)
	// may come until then.
	t.Cleanup(func() {
		out.release()
		in.Drain()
		out.Drain()
	})
	n := startPlaneMode(t, spec, in, out, o.mode)
	if !o.unresolved {
		n.neighbor(t, "out0", nextHop, macNext)
	}
	return n, in, out
}

// seg is a TCP segment 10.1.0.2:1000 -> 10.9.9.9:2000 (DF, ACK) with
// payload bytes from data at offset off, sequence number 1000+off.
func seg(data []byte, off, n int, flags header.TCPFlags) []byte {
	return mplstest.IPv4TCP(mplstest.TCP{
		Src: netip.MustParseAddrPort("10.1.0.2:1000"), Dst: netip.MustParseAddrPort("10.9.9.9:2000"),
		Seq: uint32(1000 + off), Ack: 77, Flags: header.TCPFlagAck | flags, DF: true,
		Options: []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, // NOP NOP timestamps
		Payload: data[off : off+n],
	})
}

// TestLabelSwitchCoalesces pops a receive batch of TCP segments of one flow
// (label 102) towards a link that takes GSO frames: they leave as one GSO
// packet whose payload is theirs in order, with the headers of the whole
// (length, PSH of the last, partial checksum) and the first segment's size
// as MSS. A segment after the PSH, though in sequence, is not merged.
// With labelled GRO the endpoint merges them and the switch takes the
// merged packet whole (one ForwardGSO call, taken); per segment the
// switch coalesces them itself: the same frames leave, counted alike.
func TestLabelSwitchCoalesces(t *testing.T) {
	for _, mode := range lgroModes {
		t.Run(mode.String(), func(t *testing.T) { testLabelSwitchCoalesces(t, mode) })
	}
}

func testLabelSwitchCoalesces(t *testing.T, mode lgroMode) {
	n, in, out := groLSRWith(t, lsrV4, netip.MustParseAddr("10.2.0.2"), groOpts{mode: mode})
	warmUp(t, in, out, labelled([]uint32{102}, 64, seg(make([]byte, 100), 0, 100, 0)))

	const mss, count = 1400, 20
	data := patterned(mss*count+300, 7)
	for i := range count {
		inject(in.Endpoint, labelled([]uint32{102}, 64, seg(data, i*mss, mss, 0)))
	}
	// The tail: shorter, with PSH: it joins and ends the packet.
	inject(in.Endpoint, labelled([]uint32{102}, 64, seg(data, count*mss, 300, header.TCPFlagPsh)))
	// Nothing joins after PSH, even in sequence.
	inject(in.Endpoint, labelled([]uint32{102}, 64, seg(append(data, make([]byte, 100)...), count*mss+300, 100, 0)))
	in.endBatch(t)
	// The 21 segments to the PSH, 14+4+20+32 bytes of headers, merged.
	wantGSOCalls(t, n, mode, gsoCall{mss: mss, size: 70 + count*mss + 300, took: true})

	g, frame := out.first(t, n, 2, "the coalesced one and the one after PSH")
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	tcp := header.TCP(ip.Payload())
	if g.GSOOptions.Type != gstack.GSOTCPv4 || g.GSOOptions.MSS != mss || !g.GSOOptions.NeedsCsum || g.GSOOptions.CsumOffset != 16 {
		t.Errorf("GSO options %+v, want TCPv4, MSS %d, partial checksum at 16", g.GSOOptions, mss)
	}
	if int(ip.TotalLength()) != len(frame)-header.EthernetMinimumSize || !ip.IsChecksumValid() {
		t.Errorf("IP total length %d for %d bytes, checksum valid %v", ip.TotalLength(), len(frame)-header.EthernetMinimumSize, ip.IsChecksumValid())
	}
	if got, want := tcp.Payload(), data[:count*mss+300]; !bytes.Equal(got, want) {
		t.Errorf("coalesced payload: %d bytes, equal %v; want the %d bytes of the segments in order", len(got), bytes.Equal(got, want), len(want))
	}
	if segs := (len(tcp.Payload()) + mss - 1) / mss; segs != count+1 {
		t.Errorf("the GSO packet stands for %d segments of %d, want %d", segs, mss, count+1)
	}
	if tcp.SequenceNumber() != 1000 || tcp.Flags() != header.TCPFlagAck|header.TCPFlagPsh || tcp.AckNumber() != 77 {
		t.Errorf("TCP seq %d flags %v ack %d; want 1000, ACK|PSH, 77", tcp.SequenceNumber(), tcp.Flags(), tcp.AckNumber())
	}
	want := header.PseudoHeaderChecksum(header.TCPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), uint16(len(ip.Payload())))
	if tcp.Checksum() != want {
		t.Errorf("TCP checksum %#x, want the pseudo-header sum %#x (partial)", tcp.Checksum(), want)
	}
	if p := out.pkts[1]; p.GSOOptions.Type != gstack.GSONone {
		t.Errorf("the segment after PSH left as GSO %+v; want a plain frame", p.GSOOptions)
	}
	st := n.sw.Stats()
	if st.Forwarded != 1+count+2 || st.Coalesced != count || st.PoppedIP != 1+count+2 {
		t.Errorf("forwarded %d coalesced %d popped %d; want %d, %d, %d", st.Forwarded, st.Coalesced, st.PoppedIP, 1+count+2, count, 1+count+2)
	}
}

// TestLabelSwitchCoalescesIPv6 is TestLabelSwitchCoalesces for IPv6 popped
// from label 104: one GSO TCPv6 packet with the segments' payload in order,
// taken whole by ForwardGSO with labelled GRO, coalesced by the switch per
// segment, counted alike.
func TestLabelSwitchCoalescesIPv6(t *testing.T) {
	for _, mode := range lgroModes {
		t.Run(mode.String(), func(t *testing.T) { testLabelSwitchCoalescesIPv6(t, mode) })
	}
}

func testLabelSwitchCoalescesIPv6(t *testing.T, mode lgroMode) {
	n, in, out := groLSRWith(t, lsrV6, netip.MustParseAddr("2001:db8:2::2"), groOpts{mode: mode})
	seg6 := func(data []byte, off, size int) []byte {
		return mplstest.IPv6TCP(mplstest.TCP{
			Src: netip.MustParseAddrPort("[2001:db8:1::2]:1000"), Dst: netip.MustParseAddrPort("[2001:db8:9::9]:2000"),
			Seq: uint32(5000 + off), Ack: 9, Flags: header.TCPFlagAck, Payload: data[off : off+size]})
	}
	warmUp(t, in, out, labelled([]uint32{104}, 64, seg6(make([]byte, 10), 0, 10)))

	const mss, count = 1200, 10
	data := patterned(mss*count, 13)
	for i := range count {
		inject(in.Endpoint, labelled([]uint32{104}, 64, seg6(data, i*mss, mss)))
	}
	in.endBatch(t)
	// 14+4+40+20 bytes of headers.
	wantGSOCalls(t, n, mode, gsoCall{mss: mss, size: 78 + count*mss, took: true})
	g, frame := out.first(t, n, 1, "")
	ip := header.IPv6(frame[header.EthernetMinimumSize:])
	tcp := header.TCP(ip.Payload())
	if g.GSOOptions.Type != gstack.GSOTCPv6 || g.GSOOptions.MSS != mss || g.GSOOptions.L3HdrLen != header.IPv6MinimumSize {
		t.Errorf("GSO options %+v, want TCPv6, MSS %d, L3 40", g.GSOOptions, mss)
	}
	if int(ip.PayloadLength()) != len(frame)-header.EthernetMinimumSize-header.IPv6MinimumSize || ip.HopLimit() != 63 {
		t.Errorf("payload length %d for %d bytes, hop limit %d (want 63)", ip.PayloadLength(), len(frame)-54, ip.HopLimit())
	}
	if segs := (len(tcp.Payload()) + mss - 1) / mss; segs != count {
		t.Errorf("the GSO packet stands for %d segments of %d, want %d", segs, mss, count)
	}
	if !bytes.Equal(tcp.Payload(), data) || tcp.SequenceNumber() != 5000 {
		t.Errorf("coalesced payload equal %v (%d bytes), seq %d; want the %d bytes from 5000", bytes.Equal(tcp.Payload(), data), len(tcp.Payload()), tcp.SequenceNumber(), len(data))
	}
	want := header.PseudoHeaderChecksum(header.TCPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), ip.PayloadLength())
	if tcp.Checksum() != want {
		t.Errorf("TCP checksum %#x, want the pseudo-header sum %#x", tcp.Checksum(), want)
	}
	if st := n.sw.Stats(); st.Coalesced != count-1 || st.Forwarded != count+1 || st.PoppedIP != count+1 {
		t.Errorf("coalesced %d forwarded %d popped %d; want %d, %d, %d", st.Coalesced, st.Forwarded, st.PoppedIP, count-1, count+1, count+1)
	}
}

// TestLabelSwitchGROKeepsBadChecksums is issue 12's laundering case:
// contiguous full-size ACK segments of one flow, popped towards a link that
// takes GSO frames, whose TCP checksum (or IPv4 header checksum) is wrong.
// Coalesced, they would leave as one GSO packet with a fresh partial
// checksum that the receiving kernel completes, delivering corrupt data as
// valid. They must not be coalesced, and each must leave with its wrong
// checksum as it came. A bad segment between good ones breaks the packet:
// neither the one before nor the one after joins across it. Checked by
// planting: with emit's groOK forced true, the TCP and IP cases leave as
// one GSO packet and this test fails.
func TestLabelSwitchGROKeepsBadChecksums(t *testing.T) {
	const mss, count = 1400, 6
	data := patterned(mss*count, 13)
	badTCP := func(b []byte) { b[header.IPv4MinimumSize+16] ^= 0x5a }
	badIP := func(b []byte) { b[10] ^= 0x5a }
	for _, tc := range []struct {
		name    string
		corrupt func(i int, b []byte)
		want    int // packets written
	}{
		{"wrong TCP checksum", func(_ int, b []byte) { badTCP(b) }, count},
		// A router discards an IPv4 header whose checksum fails (RFC 1812
		// §5.2.2): none leave, each counted bad_checksum.
		{"wrong IPv4 header checksum", func(_ int, b []byte) { badIP(b) }, 0},
		{"one wrong TCP checksum in the middle", func(i int, b []byte) {
			if i == 2 {
				badTCP(b)
			}
		}, 3}, // [0 1] [2] [3 4 5]
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, in, out := groLSR(t, lsrV4, netip.MustParseAddr("10.2.0.2"))
			warmUp(t, in, out, labelled([]uint32{102}, 64, seg(make([]byte, 100), 0, 100, 0)))

			sent := make([][]byte, count)
			for i := range count {
				b := seg(data, i*mss, mss, 0)
				tc.corrupt(i, b)
				sent[i] = b
				inject(in.Endpoint, labelled([]uint32{102}, 64, b))
			}
			in.endBatch(t)
			if len(out.pkts) != tc.want {
				t.Fatalf("%d packets written, want %d; switch %+v", len(out.pkts), tc.want, n.sw.Stats())
			}
			if tc.want == 0 {
				if st := n.sw.Stats(); st.Drop(forward.DropBadChecksum) != count {
					t.Fatalf("bad_checksum %d, want %d", st.Drop(forward.DropBadChecksum), count)
				}
				return
			}
			if tc.want != count {
				return
			}
			for i, p := range out.pkts {
				frame := frameBytes(p)
				ip := header.IPv4(frame[header.EthernetMinimumSize:])
				if p.GSOOptions.Type != gstack.GSONone {
					t.Errorf("segment %d left as GSO %+v", i, p.GSOOptions)
				}
				// The pop decrements the TTL (uniform) and updates the
				// header checksum incrementally: a wrong one stays wrong
				// by the same amount; the TCP checksum is untouched.
				if got, want := header.TCP(ip.Payload()).Checksum(), header.TCP(sent[i][header.IPv4MinimumSize:]).Checksum(); got != want {
					t.Errorf("segment %d TCP checksum %#x, want %#x as sent", i, got, want)
				}
				if !bytes.Equal(ip.Payload()[header.TCPMinimumSize+12:], data[i*mss:(i+1)*mss]) {
					t.Errorf("segment %d payload changed", i)
				}
			}
			if st := n.sw.Stats(); st.Coalesced != 0 {
				t.Errorf("coalesced %d, want 0", st.Coalesced)
			}
		})
	}
}

// TestLabelSwitchGROClosesAndRefuses: a first segment with PSH ends its
// packet (nothing joins it, though in sequence), and IPv4 segments
// without DF never coalesce (a GSO packet's segments would all carry the
// first one's identification: the receiver could not reassemble their
// fragments). Each case guards a planted bug that no other test caught
// (mutants v05, v06): start's PSH check dropped, parseSeg's DF check dropped.
func TestLabelSwitchGROClosesAndRefuses(t *testing.T) {
	const mss, count = 1400, 4
	data := patterned(mss*count, 11)
	for _, tc := range []struct {
		name string
		seg  func(i int) []byte
		want int // packets written
	}{
		{"PSH on the first segment", func(i int) []byte {
			flags := header.TCPFlags(0)
			if i == 0 {
				flags = header.TCPFlagPsh
			}
			return seg(data, i*mss, mss, flags)
		}, 2}, // [0] [1 2 3]
		{"DF clear", func(i int) []byte {
			return mplstest.IPv4TCP(mplstest.TCP{
				Src: netip.MustParseAddrPort("10.1.0.2:1000"), Dst: netip.MustParseAddrPort("10.9.9.9:2000"),
				Seq: uint32(1000 + i*mss), Ack: 77, Flags: header.TCPFlagAck,
				Options: []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, Payload: data[i*mss : (i+1)*mss],
			})
		}, count},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, in, out := groLSR(t, lsrV4, netip.MustParseAddr("10.2.0.2"))
			warmUp(t, in, out, labelled([]uint32{102}, 64, seg(make([]byte, 100), 0, 100, 0)))
			for i := range count {
				inject(in.Endpoint, labelled([]uint32{102}, 64, tc.seg(i)))
			}
			in.endBatch(t)
			if len(out.pkts) != tc.want {
				t.Fatalf("%d packets written, want %d; switch %+v", len(out.pkts), tc.want, n.sw.Stats())
			}
			if tc.want == 2 && out.pkts[0].GSOOptions.Type != gstack.GSONone {
				t.Fatalf("the PSH segment left as GSO %+v: later segments joined it", out.pkts[0].GSOOptions)
			}
		})
	}
}
