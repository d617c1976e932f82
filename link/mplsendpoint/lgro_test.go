package mplsendpoint_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
)

// gsoRecorder is a GSOForwarder that records the merged packets it is
// given (taking them when take is set) and the frames Forward gets.
type gsoRecorder struct {
	mplstest.Forwarder
	take   bool
	merged [][]byte
	mss    []int
}

func (f *gsoRecorder) ForwardGSO(_ *mplsendpoint.Endpoint, req *mplsendpoint.ForwardRequest) bool {
	f.merged = append(f.merged, req.Packet.Data().AsRange().ToSlice())
	f.mss = append(f.mss, req.GSOMSS)
	return f.take
}

var _ mplsendpoint.GSOForwarder = (*gsoRecorder)(nil)

const lgroLabel = 100

var (
	lgroMAC  = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x01")
	lgroPeer = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x02")
)

// lgroEndpoint returns an endpoint whose ILM pops label 100 and forwards
// it, with fwd as its forwarder, and its lower link. The link has ended a
// batch once, so the endpoint knows it ends them.
func lgroEndpoint(t testing.TB, fwd mplsendpoint.Forwarder) (*mplsendpoint.Endpoint, *mplstest.Sink) {
	t.Helper()
	tables := &mpls.Tables{}
	ilm, err := mpls.NewILM([]mpls.ILMEntry{{Label: lgroLabel, Action: mpls.ILMPopForward,
		NextHop: netip.MustParseAddr("172.16.21.22"), Device: "out"}})
	if err != nil {
		t.Fatal(err)
	}
	tables.SetILM(ilm)
	lower := mplstest.NewSink(1500, lgroMAC)
	ep, err := mplsendpoint.New(lower, mplsendpoint.Options{Tables: tables, Forwarder: fwd, LinkAddress: lgroMAC})
	if err != nil {
		t.Fatal(err)
	}
	ep.Attach(&recordingDispatcher{})
	ep.EndBatch()
	return ep, lower
}

// lgroSegment is segment i (payload bytes mss, the last one n bytes) of a
// flow under label 100, as a frame.
func lgroSegment(i, mss, n int, flags header.TCPFlags) []byte {
	payload := make([]byte, n)
	for j := range payload {
		payload[j] = byte(i*31 + j)
	}
	ip := mplstest.IPv4TCP(mplstest.TCP{
		Src: netip.MustParseAddrPort("172.16.20.20:40000"), Dst: netip.MustParseAddrPort("10.10.10.10:5001"),
		Seq: uint32(1000 + i*mss), Ack: 7, Flags: header.TCPFlagAck | flags, DF: true, ID: uint16(i),
		Options: []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, Payload: payload,
	})
	return mplstest.Frame{Dst: lgroMAC, Src: lgroPeer, Labels: mplstest.Stack(64, lgroLabel), Payload: ip}.Bytes()
}

func injectLGRO(lower *mplstest.Sink, frame []byte) {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	lower.InjectInbound(0, pkt)
	pkt.DecRef()
}

// tcpOf decodes the IPv4/TCP packet under one label in frame, checking
// the IPv4 header checksum, and returns its TCP layer.
func tcpOf(t *testing.T, frame []byte) *layers.TCP {
	t.Helper()
	ip := frame[header.EthernetMinimumSize+mpls.EntryLen:]
	if header.IPv4(ip).CalculateChecksum() != 0xffff {
		t.Fatal("IPv4 header checksum not valid")
	}
	if got := int(header.IPv4(ip).TotalLength()); got != len(ip) {
		t.Fatalf("IPv4 total length %d, the packet has %d bytes", got, len(ip))
	}
	g := gopacket.NewPacket(ip, layers.LayerTypeIPv4, gopacket.Default)
	tl, ok := g.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok {
		t.Fatalf("no TCP layer: %v", g.ErrorLayer())
	}
	tl.SetNetworkLayerForChecksum(g.NetworkLayer())
	return tl
}

// TestLabelledGROMerges: the segments of one flow that a batch delivers
// under one label reach a GSOForwarder as one labelled packet at the end
// of the batch: the first segment's link header, label and headers, the
// IP length of the whole, the segments' payloads in order, GSOMSS their
// size; the forwarder taking it, Forward sees none of them. Planted: a
// merge that leaves the next sequence number alone (every later segment
// refused) fails it.
func TestLabelledGROMerges(t *testing.T) {
	f := &gsoRecorder{take: true}
	ep, lower := lgroEndpoint(t, f)
	const mss, segs = 1400, 5
	var want []byte
	for i := range segs {
		n := mss
		if i == segs-1 {
			n = 300
		}
		fr := lgroSegment(i, mss, n, 0)
		want = append(want, fr[len(fr)-n:]...)
		injectLGRO(lower, fr)
	}
	if len(f.merged) != 0 {
		t.Fatal("a merged packet went before the batch ended")
	}
	ep.EndBatch()
	if len(f.merged) != 1 || f.Len() != 0 {
		t.Fatalf("%d merged packets, %d frames forwarded one by one; want 1, 0", len(f.merged), f.Len())
	}
	if f.mss[0] != mss {
		t.Errorf("GSOMSS %d, want %d", f.mss[0], mss)
	}
	m := f.merged[0]
	first := lgroSegment(0, mss, mss, 0)
	hl := header.EthernetMinimumSize + mpls.EntryLen + header.IPv4MinimumSize + 32
	if !bytes.Equal(m[:header.EthernetMinimumSize+mpls.EntryLen], first[:header.EthernetMinimumSize+mpls.EntryLen]) {
		t.Error("the merged packet's link header and label differ from the first segment's")
	}
	tl := tcpOf(t, m)
	if tl.Seq != 1000 || !bytes.Equal(m[hl:], want) {
		t.Errorf("seq %d, payload of %d bytes equal %v; want 1000, the %d bytes of the segments", tl.Seq, len(m[hl:]), bytes.Equal(m[hl:], want), len(want))
	}
	if st := ep.Stats(); st.RXForwarded != segs || st.ILMHits != segs {
		t.Errorf("RXForwarded %d, ILMHits %d; want %d each (merged segments count as walked)", st.RXForwarded, st.ILMHits, segs)
	}
}

// TestLabelledGRONewILM: a segment that arrives after the ILM changed is
// not merged into the packet walked under the old table: the held packet
// goes on, and the segment starts the next one. Planted: lgroContinue
// without the ILM check fails it.
func TestLabelledGRONewILM(t *testing.T) {
	f := &gsoRecorder{take: true}
	ep, lower := lgroEndpoint(t, f)
	const mss = 1000
	injectLGRO(lower, lgroSegment(0, mss, mss, 0))
	injectLGRO(lower, lgroSegment(1, mss, mss, 0))
	ilm, err := mpls.NewILM([]mpls.ILMEntry{{Label: lgroLabel, Action: mpls.ILMPopForward,
		NextHop: netip.MustParseAddr("172.16.21.23"), Device: "out"}})
	if err != nil {
		t.Fatal(err)
	}
	ep.Tables().SetILM(ilm)
	injectLGRO(lower, lgroSegment(2, mss, mss, 0))
	injectLGRO(lower, lgroSegment(3, mss, mss, 0))
	ep.EndBatch()
	if len(f.merged) != 2 {
		t.Fatalf("%d merged packets, want 2: segments 0-1 under the old ILM, 2-3 under the new", len(f.merged))
	}
}

// TestLabelledGRODeclinedCut: a merged packet the forwarder declines is
// cut back into its segments, each forwarded on its own with its sequence
// number, payload and valid checksums. Planted: the cut at the link MTU
// instead of GSOMSS fails it.
func TestLabelledGRODeclinedCut(t *testing.T) {
	f := &gsoRecorder{take: false}
	ep, lower := lgroEndpoint(t, f)
	const mss, segs = 1000, 4
	var frames [][]byte
	for i := range segs {
		fr := lgroSegment(i, mss, mss, 0)
		frames = append(frames, fr)
		injectLGRO(lower, fr)
	}
	ep.EndBatch()
	calls := f.Calls()
	if len(f.merged) != 1 || len(calls) != segs {
		t.Fatalf("%d merged, %d forwarded; want 1 merged, cut back into %d", len(f.merged), len(calls), segs)
	}
	for i, c := range calls {
		tl := tcpOf(t, c.Frame)
		if err, v := tl.VerifyChecksum(); err != nil || !v.Valid {
			t.Errorf("segment %d: TCP checksum not valid (%v, %v)", i, v, err)
		}
		if want := frames[i][len(frames[i])-mss:]; tl.Seq != uint32(1000+i*mss) || !bytes.Equal(tl.Payload, want) {
			t.Errorf("segment %d: seq %d, %d payload bytes; want %d and segment %d's", i, tl.Seq, len(tl.Payload), 1000+i*mss, i)
		}
		if len(c.Labels) != 1 || c.Labels[0].Label != lgroLabel || c.Entry.Label != lgroLabel {
			t.Errorf("segment %d: labels %v, entry %d; want label %d", i, c.Labels, c.Entry.Label, lgroLabel)
		}
	}
}

// TestLabelledGROCorruptAlone: a segment whose TCP checksum fails never
// joins a merged packet (the merged packet's checksum is computed anew,
// which would make it valid): it is forwarded as it came, and the
// segments before it leave merged. A PSH segment ends the merged packet.
// Planted: merging without the checksum check fails it.
func TestLabelledGROCorruptAlone(t *testing.T) {
	f := &gsoRecorder{take: true}
	ep, lower := lgroEndpoint(t, f)
	const mss = 1000
	injectLGRO(lower, lgroSegment(0, mss, mss, 0))
	injectLGRO(lower, lgroSegment(1, mss, mss, 0))
	bad := lgroSegment(2, mss, mss, 0)
	bad[len(bad)-1] ^= 0xff
	injectLGRO(lower, bad)
	injectLGRO(lower, lgroSegment(3, mss, mss, 0))
	injectLGRO(lower, lgroSegment(4, mss, mss, header.TCPFlagPsh))
	ep.EndBatch()
	calls := f.Calls()
	if len(f.merged) != 2 || len(calls) != 1 {
		t.Fatalf("%d merged, %d forwarded alone; want 2 (segments 0-1, 3-4), 1 (the corrupt one)", len(f.merged), len(calls))
	}
	if !bytes.Equal(calls[0].Frame, bad) {
		t.Error("the corrupt segment was not forwarded as it came")
	}
	if got := len(f.merged[1]) - (header.EthernetMinimumSize + mpls.EntryLen + header.IPv4MinimumSize + 32); got != 2*mss {
		t.Errorf("second merged packet holds %d payload bytes, want %d", got, 2*mss)
	}
	if !tcpOf(t, f.merged[1]).PSH {
		t.Error("the merged packet ending with PSH lost it")
	}
}

// TestLabelledGROPlainForwarder: with a forwarder that takes no merged
// packets, every frame is forwarded at once, as it came.
func TestLabelledGROPlainForwarder(t *testing.T) {
	var f mplstest.Forwarder
	_, lower := lgroEndpoint(t, &f)
	for i := range 3 {
		injectLGRO(lower, lgroSegment(i, 1000, 1000, 0))
		if f.Len() != i+1 {
			t.Fatalf("after frame %d, %d forwarded; want %d", i, f.Len(), i+1)
		}
	}
}

// TestLabelledGROClose: Close releases a held packet, counted as
// endpoint_closed, and hands nothing on.
func TestLabelledGROClose(t *testing.T) {
	f := &gsoRecorder{take: true}
	ep, lower := lgroEndpoint(t, f)
	injectLGRO(lower, lgroSegment(0, 1000, 1000, 0))
	ep.Close()
	if st := ep.Stats(); st.Drops[mplsendpoint.DropEndpointClosed] != 1 || len(f.merged) != 0 || f.Len() != 0 {
		t.Fatalf("endpoint_closed %d, %d merged, %d forwarded; want 1, 0, 0", st.Drops[mplsendpoint.DropEndpointClosed], len(f.merged), f.Len())
	}
}

// takeAll is a GSOForwarder that takes every merged packet and records
// nothing.
type takeAll struct{ mplstest.Forwarder }

func (*takeAll) ForwardGSO(*mplsendpoint.Endpoint, *mplsendpoint.ForwardRequest) bool { return true }

// BenchmarkLabelledGRO merges a batch of 16 segments under one label and
// hands the merged packet on: the receive path of an LSR behind a udp
// link's UDP GRO reads (allocations per batch reported).
func BenchmarkLabelledGRO(b *testing.B) {
	ep, lower := lgroEndpoint(b, &takeAll{})
	const segs, mss = 16, 1400
	frames := make([][]byte, segs)
	for i := range frames {
		frames[i] = lgroSegment(i, mss, mss, 0)
	}
	b.ReportAllocs()
	b.SetBytes(segs * mss)
	for b.Loop() {
		for _, fr := range frames {
			injectLGRO(lower, fr)
		}
		ep.EndBatch()
	}
}

// TestLabelledGROMergesIPv6: the same merge for IPv6 under the label: one
// packet with the IPv6 payload length of the whole and the segments'
// payloads in order; a segment with another hop limit starts a new one.
// Planted: leaving the payload length alone fails it.
func TestLabelledGROMergesIPv6(t *testing.T) {
	f := &gsoRecorder{take: true}
	ep, lower := lgroEndpoint(t, f)
	const mss = 1200
	seg := func(i int, hop uint8) []byte {
		payload := bytes.Repeat([]byte{byte(i)}, mss)
		ip := mplstest.IPv6TCP(mplstest.TCP{
			Src: netip.MustParseAddrPort("[fd00:20::20]:40000"), Dst: netip.MustParseAddrPort("[fd00:10::10]:5001"),
			Seq: uint32(1000 + i*mss), Ack: 7, Flags: header.TCPFlagAck, TTL: hop, Payload: payload,
		})
		return mplstest.Frame{Dst: lgroMAC, Src: lgroPeer, Labels: mplstest.Stack(64, lgroLabel), Payload: ip}.Bytes()
	}
	var want []byte
	for i := range 3 {
		injectLGRO(lower, seg(i, 64))
		want = append(want, bytes.Repeat([]byte{byte(i)}, mss)...)
	}
	injectLGRO(lower, seg(3, 63))
	ep.EndBatch()
	if len(f.merged) != 1 || f.Len() != 1 {
		t.Fatalf("%d merged, %d forwarded alone; want 1 (segments 0-2), 1 (another hop limit)", len(f.merged), f.Len())
	}
	ip := f.merged[0][header.EthernetMinimumSize+mpls.EntryLen:]
	if got := int(header.IPv6(ip).PayloadLength()); got != len(ip)-header.IPv6MinimumSize {
		t.Errorf("IPv6 payload length %d, the packet has %d bytes after its header", got, len(ip)-header.IPv6MinimumSize)
	}
	if got := ip[header.IPv6MinimumSize+header.TCPMinimumSize:]; !bytes.Equal(got, want) {
		t.Errorf("payload of %d bytes, want the %d of the three segments", len(got), len(want))
	}
}
