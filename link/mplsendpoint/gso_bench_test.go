package mplsendpoint_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/mplsnode/mplsnode/gso"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// benchGSOPayload is the TCP payload of one host-GSO packet: close to the
// 64 KiB gVisor hands over (GSOMaxSize), and under the IPv4 total length
// limit with headers.
const benchGSOPayload = 64000

// gsoPacket returns a host-GSO TCP packet (as gVisor's TCP hands it to the
// link: transport and network headers pushed, partial checksum, GSO
// options) towards dst with link header room, not yet through AddHeader.
func gsoPacket(tb testing.TB, ep *mplsendpoint.Endpoint, dst netip.Addr, payload, mss int) *stack.PacketBuffer {
	tb.Helper()
	src := addrA4
	if dst.Is6() {
		src = addrA6
	}
	t := mplstest.TCP{
		Src: netip.AddrPortFrom(src, 40000), Dst: netip.AddrPortFrom(dst, 80),
		Seq: 1, Ack: 1, Flags: header.TCPFlagAck | header.TCPFlagPsh, Window: 502, DF: true,
		Payload: make([]byte, payload),
	}
	if dst.Is6() {
		return gsoPacketFromIP(ep, mplstest.IPv6TCP(t), mss)
	}
	return gsoPacketFromIP(ep, mplstest.IPv4TCP(t), mss)
}

// patterned returns n bytes of a pattern (byte i is i*step) that shows
// where a byte was taken from.
func patterned(n, step int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * step)
	}
	return b
}

// gsoPacketFromIP is gsoPacket for a given IP packet (20-byte IPv4 or
// 40-byte IPv6 header, TCP header without options). With sizes, the
// payload is in several views, as gVisor's send buffer chains them: views
// of the given sizes, then one of the rest.
func gsoPacketFromIP(ep *mplsendpoint.Endpoint, ip []byte, mss int, sizes ...int) *stack.PacketBuffer {
	l3, typ, proto := header.IPv4MinimumSize, stack.GSOTCPv4, header.IPv4ProtocolNumber
	if ip[0]>>4 == 6 {
		l3, typ, proto = header.IPv6MinimumSize, stack.GSOTCPv6, header.IPv6ProtocolNumber
	}
	rest := ip[l3+header.TCPMinimumSize:]
	var payload buffer.Buffer
	for _, n := range sizes {
		payload.Append(buffer.NewViewWithData(rest[:n]))
		rest = rest[n:]
	}
	payload.Append(buffer.NewViewWithData(rest))
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: int(ep.MaxHeaderLength()) + l3 + header.TCPMinimumSize,
		Payload:            payload,
	})
	copy(pkt.TransportHeader().Push(header.TCPMinimumSize), ip[l3:])
	copy(pkt.NetworkHeader().Push(l3), ip)
	pkt.NetworkProtocolNumber = proto
	pkt.TransportProtocolNumber = header.TCPProtocolNumber
	pkt.EgressRoute.LocalLinkAddress = macA
	pkt.EgressRoute.RemoteLinkAddress = macB
	pkt.GSOOptions = stack.GSO{Type: typ, NeedsCsum: true, CsumOffset: 16, MSS: uint16(mss), L3HdrLen: uint16(l3)}
	return pkt
}

// labelledEndpoint returns an endpoint over lower whose FIB pushes nl
// labels towards addrB4 and addrB6.
func labelledEndpoint(tb testing.TB, nl int, lower stack.LinkEndpoint) *mplsendpoint.Endpoint {
	tb.Helper()
	tables := routeTables(tb, hostRoutes(labelStack(nl), netip.Addr{}, addrB4, addrB6))
	ep, err := mplsendpoint.New(lower, mplsendpoint.Options{Tables: tables})
	if err != nil {
		tb.Fatal(err)
	}
	return ep
}

// benchEndpoint is labelledEndpoint over a discarding Sink (link MTU 1500).
func benchEndpoint(tb testing.TB, nl int) (*mplsendpoint.Endpoint, *mplstest.Sink) {
	sink := mplstest.NewSink(1500, macA)
	return labelledEndpoint(tb, nl, sink), sink
}

// BenchmarkWriteGSO measures WritePackets on one host-GSO TCP packet of
// benchGSOPayload bytes (IPv4 and IPv6, 1 and 3 labels, link MTU 1500)
// over a lower link that takes the frames and releases them. The same
// packet (link header pushed once by AddHeader) is written every
// iteration, so the allocations reported are the endpoint's own. allocs/seg
// divides the mallocs of the loop by the segments written.
func BenchmarkWriteGSO(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		for _, nl := range []int{1, 3} {
			b.Run(fmt.Sprintf("v6=%v/labels=%d", v6, nl), func(b *testing.B) {
				ep, sink := benchEndpoint(b, nl)
				benchWriteGSO(b, ep, v6, nl, sink.Written)
			})
		}
	}
}

// benchWriteGSO writes one host-GSO TCP packet of benchGSOPayload bytes
// towards addrB4 (addrB6 with v6), pushed under nl labels, again and
// again through ep, checking that framesSent (what ep's lower link took)
// grows by a packet's segments each time.
func benchWriteGSO(b *testing.B, ep *mplsendpoint.Endpoint, v6 bool, nl int, framesSent func() uint64) {
	dst, l3 := addrB4, header.IPv4MinimumSize
	if v6 {
		dst, l3 = addrB6, header.IPv6MinimumSize
	}
	mss := 1500 - 4*nl - l3 - header.TCPMinimumSize
	pkt := gsoPacket(b, ep, dst, benchGSOPayload, mss)
	addHeader(ep, pkt, dst)
	var l stack.PacketBufferList
	l.PushBack(pkt)
	defer l.DecRef()
	segs := (benchGSOPayload + mss - 1) / mss
	ep.WritePackets(l) // warm the pools
	before := framesSent()
	b.SetBytes(benchGSOPayload)
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for range b.N {
		if n, err := ep.WritePackets(l); n != 1 || err != nil {
			b.Fatalf("got WritePackets = %d, %v, want 1, nil", n, err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	if got, want := framesSent()-before, uint64(b.N*segs); got != want {
		b.Fatalf("got %d frames, want %d", got, want)
	}
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N*segs), "allocs/seg")
	b.ReportMetric(float64(segs), "segs/op")
}

// TestGSOGroupsMatchWholePacket checks that the endpoint, which segments a
// large GSO packet in groups that fit a 64 KiB buffer chunk, writes exactly
// the frames package gso produces for the whole packet at once: sequence
// numbers, IPv4 IDs (wrapping at 16 bits across a group boundary), FIN/PSH
// on the last segment only, CWR on the first only, checksums.
func TestGSOGroupsMatchWholePacket(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, nl := range []int{1, 3} {
			t.Run(fmt.Sprintf("v6=%v/labels=%d", v6, nl), func(t *testing.T) {
				ep, sink := benchEndpoint(t, nl)
				sink.Record = true
				ip, dst, mss := wrappingGSOPacket(v6, nl)
				pkt := gsoPacketFromIP(ep, ip, mss)
				addHeader(ep, pkt, dst)
				var l stack.PacketBufferList
				l.PushBack(pkt)
				ep.WritePackets(l)
				l.DecRef()
				want := referenceSegments(t, ip, nl, mss)
				frameLen := header.EthernetMinimumSize + 4*nl + len(ip) - benchGSOPayload + mss
				if len(want) <= buffer.MaxChunkSize/frameLen {
					t.Fatalf("got %d segments, want more than one chunk's worth", len(want))
				}
				checkSegments(t, sink.Frames(), want, nl)
			})
		}
	}
}

// wrappingGSOPacket returns the IP packet the segmenting tests write
// towards dst (addrB4, addrB6 with v6): benchGSOPayload bytes of patterned
// payload, the sequence number and IPv4 ID about to wrap, FIN, PSH and CWR
// set; and mss, what fills a 1500-byte link under nl labels.
func wrappingGSOPacket(v6 bool, nl int) (ip []byte, dst netip.Addr, mss int) {
	payload := patterned(benchGSOPayload, 7)
	src, dst, l3 := addrA4, addrB4, header.IPv4MinimumSize
	if v6 {
		src, dst, l3 = addrA6, addrB6, header.IPv6MinimumSize
	}
	tc := mplstest.TCP{
		Src: netip.AddrPortFrom(src, 40000), Dst: netip.AddrPortFrom(dst, 80),
		Seq: 0xfffff000, Ack: 1, Window: 502, DF: true, ID: 0xfff0, // seq and ID wrap
		Flags:   header.TCPFlagAck | header.TCPFlagPsh | header.TCPFlagFin | header.TCPFlagCwr,
		Payload: payload,
	}
	if v6 {
		ip = mplstest.IPv6TCP(tc)
	} else {
		ip = mplstest.IPv4TCP(tc)
	}
	return ip, dst, 1500 - 4*nl - l3 - header.TCPMinimumSize
}

// checkSegments fails t unless got, the frames an endpoint wrote under nl
// labels, are want (referenceSegments) byte for byte.
func checkSegments(t *testing.T, got, want [][]byte, nl int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d", len(got), len(want))
	}
	headers := header.EthernetMinimumSize + 4*nl + header.IPv6MinimumSize + header.TCPMinimumSize
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			n := min(headers, len(got[i]), len(want[i]))
			t.Fatalf("frame %d of %d differs from gso.Segment's:\ngot  %x\nwant %x", i, len(got), got[i][:n], want[i][:n])
		}
	}
}

// referenceSegments is what gso.Segment makes of ip (IPv4 or IPv6 TCP)
// under nl labels in a frame from macA to macB, cut at mss: the frames an
// endpoint's own segmenting must match byte for byte.
func referenceSegments(t testing.TB, ip []byte, nl, mss int) [][]byte {
	t.Helper()
	frame := mplstest.Frame{Dst: macB, Src: macA, Labels: mplstest.Stack(64, labelStack(nl)...), Payload: ip}.Bytes()
	prefix := header.EthernetMinimumSize + 4*nl
	proto, l3 := gso.ProtoIPv4, header.IPv4MinimumSize
	if ip[0]>>4 == 6 {
		proto, l3 = gso.ProtoIPv6, header.IPv6MinimumSize
	}
	gp := gso.Packet{Buf: frame, PrefixLen: prefix, Proto: proto, L4Offset: prefix + l3, MSS: mss}
	need, err := gso.SegmentedLen(gp)
	if err != nil {
		t.Fatal(err)
	}
	want, err := gso.Segment(gp, make([]byte, need), nil)
	if err != nil {
		t.Fatal(err)
	}
	return want
}
