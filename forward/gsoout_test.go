package forward_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/stack"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// lsrGSO is lsrIP with a route whose MTU is below the segments'
// (10.7.0.0/16, MTU 1000) and an IPv6 transit route (2001:db8:9::/48).
var lsrGSO = func() lsrSpec {
	s := lsrIP
	s.addrs = append(append([]stack.Address(nil), s.addrs...),
		stack.Address{Link: "in0", Prefix: netip.MustParsePrefix("2001:db8:1::1/64")},
		stack.Address{Link: "out0", Prefix: netip.MustParsePrefix("2001:db8:2::1/64")})
	s.routes = append(append([]forward.Route(nil), s.routes...),
		forward.Route{Prefix: netip.MustParsePrefix("10.7.0.0/16"), Device: "out0", Via: hop2, MTU: 1000},
		forward.Route{Prefix: netip.MustParsePrefix("2001:db8:9::/48"), Device: "out0", Via: hop6})
	return s
}()

var hop6 = netip.MustParseAddr("2001:db8:2::2")

// gsoPayload is the TCP payload of the GSO packets: 20000 bytes, none
// repeating within a segment.
var gsoPayload = func() []byte {
	b := patterned(20000, 7)
	return b
}()

// gsoPacket is a TCP packet (ACK|PSH, DF, timestamps) from the previous
// hop's side to dst carrying gsoPayload in one IP packet, as a veth peer's
// GSO frame: with partial, the TCP checksum field holds the pseudo-header
// sum (the kernel's CHECKSUM_PARTIAL), else the full checksum.
func gsoPacket(dst string, ttl uint8, partial bool) []byte {
	d := netip.MustParseAddr(dst)
	src := netip.MustParseAddr("10.1.0.2")
	tc := mplstest.TCP{Src: netip.AddrPortFrom(src, 40000), Dst: netip.AddrPortFrom(d, 5001), Seq: 1000, Ack: 1,
		Flags: header.TCPFlagAck | header.TCPFlagPsh, DF: true, TTL: ttl,
		Options: []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, Payload: gsoPayload}
	var ip []byte
	l3 := header.IPv4MinimumSize
	if d.Is6() {
		tc.Src = netip.MustParseAddrPort("[2001:db8:1::2]:40000")
		ip, l3 = mplstest.IPv6TCP(tc), header.IPv6MinimumSize
	} else {
		ip = mplstest.IPv4TCP(tc)
	}
	if partial {
		s, t := header.IPv4(ip).SourceAddress(), header.IPv4(ip).DestinationAddress()
		if d.Is6() {
			s, t = header.IPv6(ip).SourceAddress(), header.IPv6(ip).DestinationAddress()
		}
		binary.BigEndian.PutUint16(ip[l3+16:], header.PseudoHeaderChecksum(header.TCPProtocolNumber, s, t, uint16(len(ip)-l3)))
	}
	return ip
}

// injectIP delivers the IP packet ip to in0 in one Ethernet frame; with
// flagged, as a lower link does for a frame whose checksum the kernel
// validated or left partial (PACKET_AUXDATA).
func injectIP(ep *channel.Endpoint, ip []byte, flagged bool) {
	typ := uint16(0x0800)
	if ip[0]>>4 == 6 {
		typ = 0x86dd
	}
	f := make([]byte, 14, 14+len(ip))
	copy(f, macIn)
	copy(f[6:], macPrev)
	binary.BigEndian.PutUint16(f[12:], typ)
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{Payload: buffer.MakeWithData(append(f, ip...))})
	pkt.RXChecksumValidated = flagged
	ep.InjectInbound(0, pkt)
	pkt.DecRef()
}

// segmentsOf is how many segments the ingress link in0 cuts a TCP packet
// of gsoPayload into: its MTU() (room left for the deepest label stack)
// less the IP and TCP headers.
func segmentsOf(t *testing.T, p plane, l3 int) int {
	t.Helper()
	ep := p.st.Endpoint("in0")
	if ep == nil {
		t.Fatal("no link in0")
	}
	mss := int(ep.MTU()) - l3 - 32
	return (len(gsoPayload) + mss - 1) / mss
}

// TestForwardIPGSOWhole: a veth peer's GSO frame (a 20000-byte TCP
// payload in one IPv4 or IPv6 packet, checksum partial, validated by the
// kernel or verified by the endpoint)
// routed plainly towards a link that takes GSO frames leaves as that one
// packet: a GSO frame with the TTL or hop limit decremented once, a valid
// IPv4 header checksum, the pseudo-header sum in the TCP checksum field
// for the peer's kernel to finish, the MSS of the segments the ingress
// would cut, the payload unchanged; ip_forwarded counts those segments.
// Planted: the endpoint splitting every large packet first (the old
// receive path) makes many packets leave, not 1.
func TestForwardIPGSOWhole(t *testing.T) {
	for _, tc := range []struct {
		name             string
		dst              string
		partial, flagged bool
	}{
		{"IPv4/partial", "10.9.9.9", true, true},
		{"IPv4/validated", "10.9.9.9", false, true},
		{"IPv4/verified by the endpoint", "10.9.9.9", false, false},
		{"IPv6/partial", "2001:db8:9::9", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v6 := tc.dst[0] == '2'
			nh, l3, typ := hop2, header.IPv4MinimumSize, gstack.GSOTCPv4
			if v6 {
				nh, l3, typ = hop6, header.IPv6MinimumSize, gstack.GSOTCPv6
			}
			n, in, out := groLSR(t, lsrGSO, nh)
			injectIP(in.Endpoint, gsoPacket(tc.dst, 64, tc.partial), tc.flagged)
			g, frame := out.first(t, n, 1, "the GSO packet")
			ip := frame[header.EthernetMinimumSize:]
			segs := segmentsOf(t, n, l3)
			mss := (len(gsoPayload) + segs - 1) / segs
			if o := g.GSOOptions; o.Type != typ || !o.NeedsCsum || o.CsumOffset != 16 || o.L3HdrLen != uint16(l3) ||
				int(o.MSS) < mss || (len(gsoPayload)+int(o.MSS)-1)/int(o.MSS) != segs {
				t.Errorf("GSO options %+v, want type %v, partial checksum at 16, L3 %d, an MSS of %d segments", o, typ, l3, segs)
			}
			var src, dst tcpip.Address
			if v6 {
				h := header.IPv6(ip)
				src, dst = h.SourceAddress(), h.DestinationAddress()
				if h.HopLimit() != 63 || int(h.PayloadLength())+l3 != len(ip) {
					t.Errorf("hop limit %d, payload length %d for %d bytes; want 63 and the whole", h.HopLimit(), h.PayloadLength(), len(ip))
				}
			} else {
				h := header.IPv4(ip)
				src, dst = h.SourceAddress(), h.DestinationAddress()
				if h.TTL() != 63 || !h.IsChecksumValid() || int(h.TotalLength()) != len(ip) {
					t.Errorf("TTL %d, header checksum valid %v, total length %d for %d bytes; want 63, true, the whole",
						h.TTL(), h.IsChecksumValid(), h.TotalLength(), len(ip))
				}
			}
			tcp := header.TCP(ip[l3:])
			if want := header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, dst, uint16(len(ip)-l3)); tcp.Checksum() != want {
				t.Errorf("TCP checksum field %#04x, want the pseudo-header sum %#04x", tcp.Checksum(), want)
			}
			if !bytes.Equal(tcp.Payload(), gsoPayload) || tcp.SequenceNumber() != 1000 {
				t.Errorf("payload of %d bytes (equal %v), seq %d; want the %d bytes sent, 1000", len(tcp.Payload()),
					bytes.Equal(tcp.Payload(), gsoPayload), tcp.SequenceNumber(), len(gsoPayload))
			}
			if st := n.sw.Stats(); st.IPForwarded != uint64(segs) || st.Forwarded != 1 || st.Coalesced != 0 {
				t.Errorf("switch %+v; want ip_forwarded %d (the segments), forwarded 1 (the frame)", st, segs)
			}
		})
	}
}

// TestForwardIPGSOSegmented: a GSO frame whose egress cannot take it whole
// is cut there: towards a labelled route (the LER push; this kernel has no
// mpls_gso, so no labelled GSO frame leaves) and towards a link without
// GSO frames. Each segment fits the link, carries the labels with TTL 63
// over an IP TTL of 63, and has checksums gopacket verifies (the partial
// one received computed per segment); the payloads join to the one sent,
// and ip_forwarded (and pushed) count the segments. Planted: sending it
// whole whatever the egress fails both (one oversized frame).
func TestForwardIPGSOSegmented(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dst    string
		gso    bool
		labels []uint32
	}{
		{"labelled", "10.8.1.1", true, []uint32{300, 301}},
		{"no GSO link", "10.9.9.9", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				p      plane
				in     *channel.Endpoint
				frames [][]byte
			)
			if tc.gso {
				n, bin, out := groLSR(t, lsrGSO, hop2)
				p, in = n, bin.Endpoint
				// The route in the FIB too: the links' MTU() leaves room for
				// its labels, as a node's does for its deepest route.
				if err := p.st.AddRoute(stack.Route{Prefix: netip.MustParsePrefix("10.8.0.0/16"), Via: hop2, Link: "out0",
					Labels: []mpls.Label{300, 301}}); err != nil {
					t.Fatal(err)
				}
				injectIP(in, gsoPacket(tc.dst, 64, true), true)
				for range out.pkts {
					frames = append(frames, readFrame(t, out.Endpoint))
				}
			} else {
				l := newLSR(t, lsrGSO, true)
				p, in = l.plane, l.in
				injectIP(in, gsoPacket(tc.dst, 64, true), true)
				for f := readFrame(t, l.out); f != nil; f = mplstest.ReadFrame(l.out, 100*time.Millisecond) {
					frames = append(frames, f)
				}
			}
			segs := segmentsOf(t, p, header.IPv4MinimumSize)
			if len(frames) != segs {
				t.Fatalf("%d frames written, want %d segments; switch %+v", len(frames), segs, p.sw.Stats())
			}
			var joined []byte
			for i, f := range frames {
				if len(f)-header.EthernetMinimumSize > 1500 {
					t.Errorf("frame %d: %d bytes after Ethernet, over the MTU", i, len(f)-header.EthernetMinimumSize)
				}
				g := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
				var got []uint32
				for _, ly := range g.Layers() {
					if m, ok := ly.(*layers.MPLS); ok {
						got = append(got, m.Label)
						if m.TTL != 63 {
							t.Errorf("frame %d: label %d TTL %d, want 63", i, m.Label, m.TTL)
						}
					}
				}
				if len(got) != len(tc.labels) || (len(got) > 0 && got[0] != tc.labels[0]) {
					t.Errorf("frame %d: labels %v, want %v", i, got, tc.labels)
				}
				ip4, _ := g.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
				tl, _ := g.Layer(layers.LayerTypeTCP).(*layers.TCP)
				if ip4 == nil || tl == nil {
					t.Fatalf("frame %d: no IPv4/TCP: %v", i, g.ErrorLayer())
				}
				if ip4.TTL != 63 || header.IPv4(ip4.Contents).CalculateChecksum() != 0xffff {
					t.Errorf("frame %d: TTL %d, header checksum valid %v; want 63, true", i, ip4.TTL, header.IPv4(ip4.Contents).CalculateChecksum() == 0xffff)
				}
				if err := tl.SetNetworkLayerForChecksum(ip4); err != nil {
					t.Fatal(err)
				}
				if err, v := tl.VerifyChecksum(); err != nil || !v.Valid {
					t.Errorf("frame %d: TCP checksum not valid (%v, %v)", i, v, err)
				}
				if want := uint32(1000 + len(joined)); tl.Seq != want {
					t.Errorf("frame %d: seq %d, want %d", i, tl.Seq, want)
				}
				joined = append(joined, tl.Payload...)
			}
			if !bytes.Equal(joined, gsoPayload) {
				t.Errorf("joined payload of %d bytes differs from the %d sent", len(joined), len(gsoPayload))
			}
			st := p.sw.Stats()
			if st.IPForwarded != uint64(segs) || (len(tc.labels) > 0) != (st.Pushed == uint64(segs)) {
				t.Errorf("switch %+v; want ip_forwarded %d, pushed %d only when labelled", st, segs, segs)
			}
		})
	}
}

// TestForwardIPGSOAsSegments: a GSO frame the plane would not just forward
// meets the rules as its segments do, one by one, with the counters of
// each: over a route MTU below the segments with DF (fragmentation
// needed, mtu_exceeded per segment), with TTL 1 (time exceeded,
// ttl_expired per segment). One whose IPv4 header checksum fails is
// dropped once as bad_checksum, never cut into segments with headers made
// valid. Planted: the decision's copy of the header given a checksum
// computed anew (not updated) makes the corrupt packet leave.
func TestForwardIPGSOAsSegments(t *testing.T) {
	corrupt := gsoPacket("10.9.9.9", 64, true)
	corrupt[10] ^= 0x5a
	for _, tc := range []struct {
		name    string
		ip      []byte
		drop    forward.Drop
		perSeg  bool
		icmpAll bool
	}{
		{"too big", gsoPacket("10.7.1.1", 64, true), forward.DropMTUExceeded, true, true},
		{"TTL 1", gsoPacket("10.9.9.9", 1, true), forward.DropTTLExpired, true, true},
		{"bad header checksum", corrupt, forward.DropBadChecksum, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLSR(t, lsrGSO, true)
			injectIP(l.in, tc.ip, true)
			var icmp, other int
			for f := readFrame(t, l.in); f != nil; f = mplstest.ReadFrame(l.in, 100*time.Millisecond) {
				if g := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default); g.Layer(layers.LayerTypeICMPv4) != nil {
					icmp++
				} else {
					other++
				}
			}
			if f := mplstest.ReadFrame(l.out, 100*time.Millisecond); f != nil {
				t.Errorf("a frame left towards the next hop: %x", f[:min(len(f), 60)])
			}
			want := uint64(1)
			if tc.perSeg {
				want = uint64(segmentsOf(t, l.plane, header.IPv4MinimumSize))
			}
			st := l.sw.Stats()
			if got := st.Drop(tc.drop); got != want || st.IPForwarded != 0 {
				t.Errorf("%v drops %d, ip_forwarded %d; want %d, 0 (switch %+v)", tc.drop, got, st.IPForwarded, want, st)
			}
			if tc.icmpAll && (icmp == 0 || uint64(icmp) != st.ICMPSent) || !tc.icmpAll && icmp != 0 || other != 0 {
				t.Errorf("%d ICMP errors and %d other frames back, ICMPSent %d; want ICMP per segment sent: %v", icmp, other, st.ICMPSent, tc.icmpAll)
			}
		})
	}
}

// BenchmarkForwardIPGSO forwards a veth peer's GSO frame (a 64000-byte
// TCP payload in one IPv4 packet, checksum partial) per operation through
// a receive batch: routed plainly towards a link that takes GSO frames
// (whole), and with labels pushed (cut into segments at the egress).
func BenchmarkForwardIPGSO(b *testing.B) {
	for _, bc := range []struct {
		name string
		dst  string
	}{
		{"whole", "10.9.9.9"},
		{"labelled", "10.8.1.1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n, in, out := groLSR(b, lsrGSO, hop2)
			if err := n.st.AddRoute(stack.Route{Prefix: netip.MustParsePrefix("10.8.0.0/16"), Via: hop2, Link: "out0",
				Labels: []mpls.Label{300, 301}}); err != nil {
				b.Fatal(err)
			}
			ip := gsoPacketN(bc.dst, 64000)
			// The first batch teaches the endpoint that in0 ends its batches.
			injectIP(in.Endpoint, ip, true)
			in.endBatch(b)
			out.release()
			out.Drain()
			b.SetBytes(int64(len(ip)))
			b.ReportAllocs()
			for b.Loop() {
				injectIP(in.Endpoint, ip, true)
				in.endBatch(b)
				out.release()
				out.Drain()
			}
			if st := n.sw.Stats(); st.IPForwarded == 0 || st.Forwarded == 0 {
				b.Fatalf("nothing forwarded: %+v", st)
			}
		})
	}
}

// gsoPacketN is gsoPacket (IPv4, TTL 64, checksum partial) with a TCP
// payload of n bytes.
func gsoPacketN(dst string, n int) []byte {
	d := netip.MustParseAddr(dst)
	ip := mplstest.IPv4TCP(mplstest.TCP{Src: netip.MustParseAddrPort("10.1.0.2:40000"), Dst: netip.AddrPortFrom(d, 5001),
		Seq: 1000, Ack: 1, Flags: header.TCPFlagAck, DF: true, Payload: make([]byte, n)})
	h := header.IPv4(ip)
	binary.BigEndian.PutUint16(ip[header.IPv4MinimumSize+16:],
		header.PseudoHeaderChecksum(header.TCPProtocolNumber, h.SourceAddress(), h.DestinationAddress(), uint16(len(ip)-header.IPv4MinimumSize)))
	return ip
}
