package forward_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// lsrIP is lsrV4 with transit routes: 10.9.0.0/16 plain via 10.2.0.2,
// 10.8.0.0/16 labelled 300/301 via 10.2.0.2 (the LER push).
var lsrIP = func() lsrSpec {
	s := lsrV4
	s.routes = []forward.Route{
		{Prefix: netip.MustParsePrefix("10.9.0.0/16"), Device: "out0", Via: hop2},
		{Prefix: netip.MustParsePrefix("10.8.0.0/16"), Device: "out0", Via: hop2, Labels: []mpls.Label{300, 301}},
	}
	return s
}()

// ipFrame is an Ethernet frame from the previous hop to in0 carrying the
// IPv4 packet ip.
func ipFrame(ip []byte) []byte {
	f := make([]byte, 14, 14+len(ip))
	copy(f, macIn)
	copy(f[6:], macPrev)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	return append(f, ip...)
}

// udpTo is an IPv4 UDP packet from 10.1.0.2 to dst with TTL ttl, size bytes
// of payload, DF if df, valid checksums (mplstest).
func udpTo(dst string, ttl uint8, size int, df bool) []byte {
	ip := mplstest.IPv4UDP(netip.MustParseAddrPort("10.1.0.2:1234"), netip.AddrPortFrom(netip.MustParseAddr(dst), 9), df, make([]byte, size))
	ip[8] = ttl
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^ipChecksum(ip[:20]))
	return ip
}

// TestForwardIP routes transit IPv4 through the forwarding plane: plain
// and with labels pushed (the LER role), TTL decremented with a valid
// header checksum (gopacket decodes the frame), the next hop's MAC; gVisor
// never sees the packets. A packet for the node goes to the stack.
// Checked by planting: without the TTL rewrite both subtests fail; with
// the node's own addresses taken for transit the local packet is routed.
func TestForwardIP(t *testing.T) {
	l := newLSR(t, lsrIP, true)
	for _, tc := range []struct {
		name   string
		dst    string
		labels []uint32
	}{
		{"plain", "10.9.9.9", nil},
		{"LER push", "10.8.1.1", []uint32{300, 301}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inject(l.in, ipFrame(udpTo(tc.dst, 64, 100, false)))
			f := readFrame(t, l.out)
			if f == nil {
				t.Fatalf("nothing forwarded; stats %+v", l.sw.Stats())
			}
			p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
			eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			if string(eth.DstMAC) != string(macNext) || string(eth.SrcMAC) != string(macOut) {
				t.Errorf("MACs %v -> %v, want %x -> %x", eth.SrcMAC, eth.DstMAC, macOut, macNext)
			}
			var got []uint32
			for _, ly := range p.Layers() {
				if m, ok := ly.(*layers.MPLS); ok {
					got = append(got, m.Label)
					if m.TTL != 63 || m.StackBottom != (len(got) == len(tc.labels)) {
						t.Errorf("label %d TTL %d S %v; want TTL 63, S on the last", m.Label, m.TTL, m.StackBottom)
					}
				}
			}
			if len(got) != len(tc.labels) || (len(got) > 0 && (got[0] != tc.labels[0] || got[1] != tc.labels[1])) {
				t.Errorf("labels %v, want %v", got, tc.labels)
			}
			ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			if !ok || ip.TTL != 63 || ipChecksum(ip.Contents) != 0xffff {
				t.Fatalf("IPv4 %v: want TTL 63 and a valid header checksum", p)
			}
			if udp, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); !ok || len(udp.Payload) != 100 {
				t.Errorf("UDP lost: %v", p)
			}
		})
	}
	st := l.sw.Stats()
	if st.IPForwarded != 2 || st.Pushed != 1 || st.Forwarded != 2 {
		t.Errorf("ip forwarded %d pushed %d forwarded %d; want 2, 1, 2", st.IPForwarded, st.Pushed, st.Forwarded)
	}
	if n := l.st.Netstack().Stats().IP.PacketsReceived.Value(); n != 0 {
		t.Errorf("gVisor received %d IP packets, want 0 (transit stays outside it)", n)
	}
	// For the node itself: the stack's (it answers nothing to UDP port 9
	// but counts the packet).
	inject(l.in, ipFrame(udpTo("10.1.0.1", 64, 10, false)))
	if n := l.st.Netstack().Stats().IP.PacketsReceived.Value(); n != 1 || l.sw.Stats().IPForwarded != 2 {
		t.Errorf("a packet for the node: gVisor received %d, switch forwarded %d; want 1, 2", n, l.sw.Stats().IPForwarded)
	}
}

// TestForwardIPErrors: a TTL of 1 draws ICMP time exceeded (RFC 1812
// §5.3.1) from the ingress address, quoting the packet as received; no
// route is a named drop with ICMP network unreachable; a DF packet too big for the labelled route draws
// fragmentation needed with the route's IP MTU (1500 less two labels).
// Checked by planting `ttl < 1` for `ttl <= 1`: no time exceeded.
func TestForwardIPErrors(t *testing.T) {
	l := newLSR(t, lsrIP, true)
	orig := udpTo("10.9.9.9", 1, 20, false)
	inject(l.in, ipFrame(orig))
	p := l.icmpBack(t)
	ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	icmp, _ := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if ip == nil || icmp == nil || ip.SrcIP.String() != "10.1.0.1" || ip.DstIP.String() != "10.1.0.2" ||
		icmp.TypeCode != layers.CreateICMPv4TypeCode(11, 0) || ipChecksum(ip.Payload) != 0xffff {
		t.Fatalf("want ICMP time exceeded 10.1.0.1 -> 10.1.0.2 with a valid checksum: %v", p)
	}
	// The whole 48-byte packet fits in 576 bytes: quoted whole, as
	// received (RFC 1812 §4.3.2.3).
	if q := ip.Payload[8:]; len(q) != len(orig) || string(q) != string(orig) {
		t.Errorf("quoted %x, want the packet as received %x", q, orig)
	}

	inject(l.in, ipFrame(udpTo("192.0.2.1", 64, 20, false)))
	p = l.icmpBack(t)
	if icmp, _ := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); icmp == nil || icmp.TypeCode != layers.CreateICMPv4TypeCode(3, 0) {
		t.Errorf("want ICMP network unreachable for no route: %v", p)
	}
	inject(l.in, ipFrame(udpTo("10.8.1.1", 64, 1496-28, true)))
	p = l.icmpBack(t)
	icmp, _ = p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if icmp == nil || icmp.TypeCode != layers.CreateICMPv4TypeCode(3, 4) || icmp.Seq != 1492 {
		t.Errorf("want fragmentation needed, MTU 1492: %v", p)
	} else if q := icmp.Payload; len(q) < 20 || q[8] != 64 {
		t.Errorf("the quoted header %x; want the packet as received (TTL 64)", q)
	}
	st := l.sw.Stats()
	if st.Drop(forward.DropTTLExpired) != 1 || st.Drop(forward.DropNoRoute) != 1 || st.Drop(forward.DropMTUExceeded) != 1 ||
		st.ICMPSent != 3 || st.Forwarded != 0 {
		t.Errorf("stats %+v; want ttl_expired, no_route, mtu_exceeded 1 each, 3 ICMP sent, nothing forwarded", st)
	}
}

// BenchmarkForwardIP forwards transit IPv4 packets of 1400 bytes, plain and
// with two labels pushed, beside BenchmarkLabelSwitch's label pop: zero
// allocations per forwarded frame.
func BenchmarkForwardIP(b *testing.B) {
	for _, tc := range []struct{ name, dst string }{{"plain", "10.9.9.9"}, {"push", "10.8.1.1"}} {
		b.Run(tc.name, func(b *testing.B) {
			l := newLSR(b, lsrIP, true)
			frame := ipFrame(udpTo(tc.dst, 64, 1400, false))
			l.benchForward(b, frame)
		})
	}
}

// TestForwardIPv6 routes transit IPv6: the hop limit decremented, the next
// hop's MAC; hop limit 1 draws ICMPv6 time exceeded (RFC 4443 §3.3) with a
// valid checksum from the ingress address; a link-local destination is
// never forwarded (it goes to the stack). Checked by planting: without the
// link-local test it is routed (no_route).
func TestForwardIPv6(t *testing.T) {
	spec := lsrV6
	spec.routes = []forward.Route{{Prefix: netip.MustParsePrefix("2001:db8:9::/48"), Device: "out0", Via: netip.MustParseAddr("2001:db8:2::2")}}
	l := newLSR(t, spec, false)
	src := netip.MustParseAddr("2001:db8:1::2")
	l.neighbor(t, "in0", src, macPrev)
	l.neighbor(t, "out0", netip.MustParseAddr("2001:db8:2::2"), macNext)
	pkt := func(dst string, hop uint8) []byte {
		ip := &layers.IPv6{Version: 6, HopLimit: hop, NextHeader: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: netip.MustParseAddr(dst).AsSlice()}
		udp := &layers.UDP{SrcPort: 1234, DstPort: 9}
		udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: []byte(macPrev), DstMAC: []byte(macIn), EthernetType: layers.EthernetTypeIPv6},
			ip, udp, gopacket.Payload(make([]byte, 50))); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	inject(l.in, pkt("2001:db8:9::9", 64))
	f := readFrame(t, l.out)
	if f == nil {
		t.Fatalf("nothing forwarded; stats %+v", l.sw.Stats())
	}
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	if ip, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); !ok || ip.HopLimit != 63 || string(f[:6]) != string(macNext) {
		t.Errorf("want IPv6 with hop limit 63 to %x: %v", macNext, p)
	}
	inject(l.in, pkt("2001:db8:9::9", 1))
	p = l.icmpBack(t)
	ip, _ := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	icmp, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	if ip == nil || !ok || icmp.TypeCode != layers.CreateICMPv6TypeCode(3, 0) || ip.SrcIP.String() != "2001:db8:1::1" || ip.DstIP.String() != src.String() {
		t.Fatalf("want ICMPv6 time exceeded 2001:db8:1::1 -> %s: %v", src, p)
	}
	sum := header.PseudoHeaderChecksum(header.ICMPv6ProtocolNumber, tcpip.AddrFromSlice(ip.SrcIP), tcpip.AddrFromSlice(ip.DstIP), uint16(len(ip.Payload)))
	if checksum.Checksum(ip.Payload, sum) != 0xffff {
		t.Error("ICMPv6 checksum does not verify")
	}
	inject(l.in, pkt("fe80::1", 64))
	if st := l.sw.Stats(); st.IPForwarded != 1 || st.Drop(forward.DropTTLExpired) != 1 || st.ICMPSent != 1 || st.Drop(forward.DropNoRoute) != 0 {
		t.Errorf("stats %+v; want 1 forwarded, 1 ttl_expired, 1 ICMP (the link-local one left to the stack)", st)
	}
}

// TestForwardIPMartianSource: transit packets from sources no one may use,
// or from the node's own address, are dropped as martian_source (RFC 1812
// §5.3.7), never forwarded. Checked by planting: without the check all
// five are routed.
func TestForwardIPMartianSource(t *testing.T) {
	l := newLSR(t, lsrIP, true)
	srcs := []string{"0.0.0.0", "127.0.0.1", "224.0.0.5", "255.255.255.255", "10.1.0.1"}
	for _, src := range srcs {
		ip := mplstest.IPv4UDP(netip.AddrPortFrom(netip.MustParseAddr(src), 1), netip.MustParseAddrPort("10.9.9.9:9"), false, make([]byte, 10))
		inject(l.in, ipFrame(ip))
	}
	if st := l.sw.Stats(); st.Drop(forward.DropMartianSource) != uint64(len(srcs)) || st.IPForwarded != 0 {
		t.Errorf("martian_source %d, forwarded %d; want %d, 0", st.Drop(forward.DropMartianSource), st.IPForwarded, len(srcs))
	}
}

// TestForwardIPFragments sends a transit IPv4 packet without DF that does
// not fit the labelled route (1628 bytes, IP MTU 1492 under two labels):
// it leaves as labelled fragments that fit the link, TTL decremented, each
// with a valid header checksum, the data in order.
func TestForwardIPFragments(t *testing.T) {
	l := newLSR(t, lsrIP, true)
	orig := udpTo("10.8.1.1", 64, 1600, false)
	inject(l.in, ipFrame(orig))
	var data []byte
	for i := 0; i < 2; i++ {
		f := readFrame(t, l.out)
		if f == nil {
			t.Fatalf("fragment %d missing; stats %+v", i, l.sw.Stats())
		}
		if len(f) > 14+1500 {
			t.Errorf("fragment %d: %d bytes > link MTU", i, len(f))
		}
		ip := f[14+8:] // two labels
		if ip[8] != 63 || ipChecksum(ip[:20]) != 0xffff {
			t.Errorf("fragment %d: TTL %d, header checksum valid %v; want 63, true", i, ip[8], ipChecksum(ip[:20]) == 0xffff)
		}
		data = append(data, ip[20:binary.BigEndian.Uint16(ip[2:])]...)
	}
	if string(data) != string(orig[20:]) {
		t.Errorf("the fragments' data (%d bytes) differ from the packet's (%d)", len(data), len(orig)-20)
	}
	if st := l.sw.Stats(); st.Fragmented != 1 || st.Pushed != 1 || st.Forwarded != 2 {
		t.Errorf("stats %+v; want 1 fragmented, 1 pushed, 2 frames forwarded", st)
	}
}

// TestExplicitNullTTLExpires: a packet for another host under an explicit
// null whose label TTL runs out here is not forwarded as IP: the sender
// gets a time exceeded with the label stack as received (RFC 4950), in
// both TTL models (planted: without the endpoint's hand-over, uniform
// answers without the extension and pipe forwards it with the IP TTL it
// came with). A packet for the node under the same label still reaches
// the stack.
func TestExplicitNullTTLExpires(t *testing.T) {
	for _, model := range []mpls.TTLModel{mpls.TTLUniform, mpls.TTLPipe} {
		t.Run(model.String(), func(t *testing.T) {
			spec := lsrIP
			spec.ttl = model
			l := newLSR(t, spec, true)
			orig := udpTo("10.9.9.9", 64, 20, false)
			inject(l.in, labelled([]uint32{0}, 1, orig))
			p := l.icmpBack(t)
			icmp, _ := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
			if icmp == nil || icmp.TypeCode != layers.CreateICMPv4TypeCode(11, 0) {
				t.Fatalf("want ICMP time exceeded: %v", p)
			}
			// RFC 4884: the 128-byte original datagram field, then the
			// extension with one MPLS label stack object: label 0, S, TTL 1.
			body := icmp.Payload
			if len(body) < 128+4+4+4 || icmp.Contents[5] != 128/4 {
				t.Fatalf("no RFC 4884 extension: length word %d, %d bytes", icmp.Contents[5], len(body))
			}
			if got := mpls.DecodeEntry(body[128+8:]); got != (mpls.Entry{Label: 0, S: true, TTL: 1}) {
				t.Fatalf("label stack object %+v, want label 0 S TTL 1", got)
			}
			if n := l.out.NumQueued(); n != 0 {
				t.Fatalf("%d frames forwarded, want 0", n)
			}
			if st := l.sw.Stats(); st.Drop(forward.DropTTLExpired) != 1 {
				t.Fatalf("ttl_expired %d, want 1", st.Drop(forward.DropTTLExpired))
			}
		})
	}
}
