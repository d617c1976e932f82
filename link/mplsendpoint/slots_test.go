package mplsendpoint_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

type ringSink = mplstest.RingSink

var _ lowerlink.TXRing = (*ringSink)(nil)

// ringEndpoint is labelledEndpoint over a ringSink.
func ringEndpoint(tb testing.TB, nl int) (*mplsendpoint.Endpoint, *ringSink) {
	r := mplstest.NewRingSink(1500, macA, 1518)
	return labelledEndpoint(tb, nl, r), r
}

// TestGSOSlotsMatchWholePacket checks that segmenting straight into
// transmit slots, one segment at a time, writes exactly the frames package
// gso produces for the whole packet at once (sequence numbers, IPv4 IDs
// wrapping, FIN/PSH last only, CWR first only, checksums), in one batch.
// Planted bug: the last segment not told it is last (FIN and PSH cleared
// there too): frame 43 of 44 differed.
//
// scattered: the payload in views of 1, 999, 7 and the rest bytes, as
// gVisor's send buffer chains them, so the segments' chunks are read across
// view boundaries. Planted bug: the view reader moving to the next view
// without resetting its offset: frame 0 differed.
func TestGSOSlotsMatchWholePacket(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, nl := range []int{1, 3} {
			for _, scattered := range []bool{false, true} {
				t.Run(fmt.Sprintf("v6=%v/labels=%d/scattered=%v", v6, nl, scattered), func(t *testing.T) {
					testGSOSlotsMatchWholePacket(t, v6, nl, scattered)
				})
			}
		}
	}
}

func testGSOSlotsMatchWholePacket(t *testing.T, v6 bool, nl int, scattered bool) {
	ep, r := ringEndpoint(t, nl)
	r.Record = true
	ip, dst, mss := wrappingGSOPacket(v6, nl)
	var pkt *stack.PacketBuffer
	if scattered {
		pkt = gsoPacketFromIP(ep, ip, mss, 1, 999, 7)
	} else {
		pkt = gsoPacketFromIP(ep, ip, mss)
	}
	addHeader(ep, pkt, dst)
	var l stack.PacketBufferList
	l.PushBack(pkt)
	if n, err := ep.WritePackets(l); n != 1 || err != nil {
		t.Fatalf("got WritePackets = %d, %v, want 1, nil", n, err)
	}
	l.DecRef()
	want := referenceSegments(t, ip, nl, mss)
	if len(r.Frames) != len(want) || r.Batches != 1 || r.Written() != 0 {
		t.Fatalf("got %d frames in %d batches (%d through WritePackets), want %d in 1 (0)", len(r.Frames), r.Batches, r.Written(), len(want))
	}
	checkSegments(t, r.Frames, want, nl)
	if st := ep.Stats(); st.TXFrames != uint64(len(want)) || st.GSOPackets != 1 {
		t.Errorf("got TXFrames %d, GSOPackets %d; want %d, 1", st.TXFrames, st.GSOPackets, len(want))
	}
}

// BenchmarkWriteGSOSlots is BenchmarkWriteGSO over a lower link with a
// transmit ring: segments go straight into its slot. allocs/seg must be 0.
func BenchmarkWriteGSOSlots(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		b.Run(fmt.Sprintf("v6=%v/labels=1", v6), func(b *testing.B) {
			ep, r := ringEndpoint(b, 1)
			benchWriteGSO(b, ep, v6, 1, func() uint64 { return r.Commits })
		})
	}
}

// gsoRing is a ringSink that also sends TCP GSO packets whole
// (mplsendpoint.GSOFramer, as link/afpacket with its GSO socket) and logs,
// in order, each slot committed ("slot"), each batch ended ("end") and each
// packet written whole ("whole").
type gsoRing struct {
	*ringSink
	events []string
	whole  []*stack.PacketBuffer // clones of what WritePackets took
}

// newGSORing returns a gsoRing over a 1500-byte ring whose clones of the
// packets written whole are released when t ends.
func newGSORing(t *testing.T) *gsoRing {
	g := &gsoRing{ringSink: mplstest.NewRingSink(1500, macA, 1518)}
	t.Cleanup(func() {
		for _, p := range g.whole {
			p.DecRef()
		}
	})
	return g
}

func (g *gsoRing) GSOFrames() bool { return true }

func (g *gsoRing) TXCommit(q, n int) {
	g.events = append(g.events, "slot")
	g.ringSink.TXCommit(q, n)
}

func (g *gsoRing) TXEnd(q int) (int, tcpip.Error) {
	g.events = append(g.events, "end")
	return g.ringSink.TXEnd(q)
}

func (g *gsoRing) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	for _, p := range pkts.AsSlice() {
		g.events = append(g.events, "whole")
		g.whole = append(g.whole, p.Clone())
	}
	return pkts.Len(), nil
}

// TestGSOSlotsUnlabelledLeaveWhole writes, on a lower link with a transmit
// ring that also takes GSO frames (link/afpacket's default), a plain
// frame, an unlabelled TCP GSO packet, a labelled one and another
// unlabelled one in one WritePackets call. The unlabelled GSO packets must
// leave whole, their bytes those of the packet and their MSS the link's,
// each after the slots before it were sent (a batch end between), and the
// labelled one must be cut into the slots. Planted bugs it caught: the
// whole path removed (the unlabelled packets cut into 45 slots each, no
// "whole"); sendWhole not ending the open batch first (the plain frame's
// slot sent after the whole packet: no "end" before the first "whole").
func TestGSOSlotsUnlabelledLeaveWhole(t *testing.T) {
	g := newGSORing(t)
	ep := labelledEndpoint(t, 1, g)
	plainDst := netip.MustParseAddr("10.0.0.99") // no FIB route: unlabelled
	payload := patterned(benchGSOPayload, 13)
	packet := func(dst netip.Addr, n int, gso bool) ([]byte, *stack.PacketBuffer) {
		ip := mplstest.IPv4TCP(mplstest.TCP{Src: netip.AddrPortFrom(addrA4, 40000), Dst: netip.AddrPortFrom(dst, 80),
			Seq: 1000, Ack: 1, Window: 502, Flags: header.TCPFlagAck | header.TCPFlagPsh, Payload: payload[:n]})
		pkt := gsoPacketFromIP(ep, ip, 1460)
		if !gso {
			pkt.GSOOptions = stack.GSO{}
		}
		addHeader(ep, pkt, dst)
		return ip, pkt
	}
	var l stack.PacketBufferList
	_, p1 := packet(plainDst, 100, false)
	ip2, p2 := packet(plainDst, len(payload), true)
	_, p3 := packet(addrB4, len(payload), true)
	ip4, p4 := packet(plainDst, 20000, true)
	for _, p := range []*stack.PacketBuffer{p1, p2, p3, p4} {
		l.PushBack(p)
	}
	if n, err := ep.WritePackets(l); n != 4 || err != nil {
		t.Fatalf("WritePackets = %d, %v; want 4, nil", n, err)
	}
	l.DecRef()

	labelledSlots := (len(payload) + 1455) / 1456 // MSS 1500 - 4 - 20 - 20
	var want []string
	want = append(want, "slot", "end", "whole")
	for range labelledSlots {
		want = append(want, "slot")
	}
	want = append(want, "end", "whole")
	if fmt.Sprint(g.events) != fmt.Sprint(want) {
		t.Fatalf("events %v\nwant    %v", g.events, want)
	}
	for i, ip := range [][]byte{ip2, ip4} {
		p := g.whole[i]
		v := p.ToView()
		defer v.Release()
		frame := v.AsSlice()
		if len(frame) != header.EthernetMinimumSize+len(ip) || !bytes.Equal(frame[header.EthernetMinimumSize:header.EthernetMinimumSize+header.IPv4MinimumSize], ip[:header.IPv4MinimumSize]) ||
			!bytes.Equal(frame[header.EthernetMinimumSize+header.IPv4MinimumSize+header.TCPMinimumSize:], ip[header.IPv4MinimumSize+header.TCPMinimumSize:]) {
			t.Errorf("whole packet %d: %d bytes, want the %d-byte IP packet behind an Ethernet header", i, len(frame), len(ip))
		}
		if typ := header.Ethernet(frame).Type(); typ != header.IPv4ProtocolNumber {
			t.Errorf("whole packet %d: ethertype %#x, want IPv4 (no label)", i, typ)
		}
		if p.GSOOptions.MSS != 1460 || p.GSOOptions.Type != stack.GSOTCPv4 {
			t.Errorf("whole packet %d: GSO %+v, want TCPv4 with MSS 1460 (the link's)", i, p.GSOOptions)
		}
	}
}
