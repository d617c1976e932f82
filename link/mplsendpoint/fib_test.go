package mplsendpoint_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
)

// newTestFIB returns a FIB endpoint over ep (device "ep", NIC 1) with
// routes; resolve answers every neighbour query (nil: macB at once).
func newTestFIB(t *testing.T, ep *mplsendpoint.Endpoint, routes []mpls.Route, resolve func(stack.LinkResolutionResult) tcpip.Error) *mplsendpoint.FIBEndpoint {
	t.Helper()
	return newTestFIBLinks(t, map[string]*mplsendpoint.Endpoint{"ep": ep}, ep, routes, resolve)
}

func newTestFIBLinks(t *testing.T, eps map[string]*mplsendpoint.Endpoint, first *mplsendpoint.Endpoint, routes []mpls.Route, resolve func(stack.LinkResolutionResult) tcpip.Error) *mplsendpoint.FIBEndpoint {
	t.Helper()
	tables := &mpls.Tables{}
	if err := tables.ReplaceRoutes(routes); err != nil {
		t.Fatal(err)
	}
	fib := mplsendpoint.NewFIB(mplsendpoint.FIBOptions{
		Tables:     tables,
		Seed:       1,
		Forwarding: true,
		Resolve: func(_ tcpip.NICID, _ tcpip.Address, _ tcpip.NetworkProtocolNumber, onResolve func(stack.LinkResolutionResult)) tcpip.Error {
			if resolve != nil {
				return resolve(stack.LinkResolutionResult{})
			}
			onResolve(stack.LinkResolutionResult{LinkAddress: macB})
			return nil
		},
	})
	links := map[string]*mplsendpoint.FIBLink{}
	for name, ep := range eps {
		links[name] = &mplsendpoint.FIBLink{Endpoint: ep, NIC: 1}
	}
	fib.SetLinks(links, first)
	return fib
}

// writeFIB writes the IP packet ip (IPv4 or IPv6, UDP or TCP after a
// fixed header) to fib as the stack would.
func writeFIB(fib *mplsendpoint.FIBEndpoint, ip []byte) {
	nhLen, proto := header.IPv4MinimumSize, header.IPv4ProtocolNumber
	tproto := tcpip.TransportProtocolNumber(header.IPv4(ip).Protocol())
	if ip[0]>>4 == 6 {
		nhLen, proto = header.IPv6MinimumSize, header.IPv6ProtocolNumber
		tproto = tcpip.TransportProtocolNumber(header.IPv6(ip).NextHeader())
	}
	thLen := header.UDPMinimumSize
	if tproto == header.TCPProtocolNumber {
		thLen = header.TCPMinimumSize
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: int(fib.MaxHeaderLength()) + nhLen + thLen,
		Payload:            buffer.MakeWithData(ip[nhLen+thLen:]),
	})
	copy(pkt.TransportHeader().Push(thLen), ip[nhLen:])
	copy(pkt.NetworkHeader().Push(nhLen), ip)
	pkt.NetworkProtocolNumber = proto
	pkt.TransportProtocolNumber = tproto
	var l stack.PacketBufferList
	l.PushBack(pkt)
	fib.WritePackets(l)
	l.DecRef()
}

// ipv6TCP returns an IPv6 TCP SYN from src port sport to dst.
func ipv6TCP(dst netip.Addr, sport uint16) []byte {
	b := make([]byte, header.IPv6MinimumSize+header.TCPMinimumSize)
	header.IPv6(b).Encode(&header.IPv6Fields{
		PayloadLength: header.TCPMinimumSize, TransportProtocol: header.TCPProtocolNumber, HopLimit: 64,
		SrcAddr: tcpip.AddrFrom16(netip.MustParseAddr("2001:db8:ffff::1").As16()), DstAddr: tcpip.AddrFrom16(dst.As16()),
	})
	header.TCP(b[header.IPv6MinimumSize:]).Encode(&header.TCPFields{SrcPort: sport, DstPort: 80, DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagSyn, WindowSize: 1000})
	return b
}

// ipv4TCP returns an IPv4 TCP SYN from src port sport to dst.
func ipv4TCP(dst netip.Addr, sport uint16) []byte {
	b := make([]byte, header.IPv4MinimumSize+header.TCPMinimumSize)
	ip := header.IPv4(b)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(b)), TTL: 64, Protocol: uint8(header.TCPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4(addrA4.As4()), DstAddr: tcpip.AddrFrom4(dst.As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	header.TCP(b[header.IPv4MinimumSize:]).Encode(&header.TCPFields{SrcPort: sport, DstPort: 80, DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagSyn, WindowSize: 1000})
	return b
}

// frameOf reads the frame ch holds, nil if none.
func frameOf(ch *channel.Endpoint) []byte {
	pkt := ch.Read()
	if pkt == nil {
		return nil
	}
	defer pkt.DecRef()
	v := pkt.ToView()
	defer v.Release()
	return slices.Clone(v.AsSlice())
}

// Test6PE: an IPv6 packet to a 6PE route (an IPv6 prefix over a labelled
// IPv4 next hop, RFC 4798) leaves with the next hop's MAC resolved over
// IPv4, label 300 (bottom of stack) and the IPv6 packet under it, as
// gopacket (not our code) decodes the frame. Planted bug: resolving the
// hop as IPv6 (the packet's family) fails the proto check below.
func Test6PE(t *testing.T) {
	ch := channel.New(8, 1500, macA)
	ep, _ := newTestEndpoint(t, ch, nil)
	via := netip.MustParseAddr("172.16.20.21")
	var askedProto tcpip.NetworkProtocolNumber
	tables := &mpls.Tables{}
	if err := tables.ReplaceRoutes([]mpls.Route{{Prefix: netip.MustParsePrefix("2001:db8::/48"),
		NextHops: []mpls.NextHop{{Via: via, Device: "ep", Labels: []mpls.Label{300}}}}}); err != nil {
		t.Fatal(err)
	}
	fib := mplsendpoint.NewFIB(mplsendpoint.FIBOptions{Tables: tables, Forwarding: true, Resolve: func(_ tcpip.NICID, addr tcpip.Address, proto tcpip.NetworkProtocolNumber, onResolve func(stack.LinkResolutionResult)) tcpip.Error {
		askedProto = proto
		if addr != tcpip.AddrFrom4(via.As4()) {
			t.Errorf("resolved %s, want the IPv4 next hop %s", addr, via)
		}
		onResolve(stack.LinkResolutionResult{LinkAddress: macB})
		return nil
	}})
	fib.SetLinks(map[string]*mplsendpoint.FIBLink{"ep": {Endpoint: ep, NIC: 1}}, ep)
	writeFIB(fib, ipv6TCP(netip.MustParseAddr("2001:db8::10"), 40000))
	if askedProto != header.IPv4ProtocolNumber {
		t.Errorf("next hop resolved with protocol %#x, want IPv4 (ARP)", askedProto)
	}
	frame := frameOf(ch)
	if frame == nil {
		t.Fatal("no frame written")
	}
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	m, _ := p.Layer(layers.LayerTypeMPLS).(*layers.MPLS)
	if eth == nil || m == nil {
		t.Fatalf("frame %x: no Ethernet/MPLS layers: %v", frame, p)
	}
	if eth.EthernetType != layers.EthernetTypeMPLSUnicast || eth.DstMAC.String() != "02:00:00:00:00:0b" {
		t.Errorf("Ethernet type %v to %v, want MPLS unicast to 02:00:00:00:00:0b", eth.EthernetType, eth.DstMAC)
	}
	if m.Label != 300 || !m.StackBottom {
		t.Errorf("label %d bottom %v, want 300 at the bottom", m.Label, m.StackBottom)
	}
	// gopacket guesses the payload of MPLS; check the IPv6 header after
	// the 4-byte label ourselves with gVisor's decoder.
	ip6 := header.IPv6(frame[header.EthernetMinimumSize+4:])
	if !ip6.IsValid(len(ip6)) || ip6.DestinationAddress() != tcpip.AddrFrom16(netip.MustParseAddr("2001:db8::10").As16()) {
		t.Errorf("payload under the label is not the IPv6 packet: %x", []byte(ip6))
	}
}

// TestFIBEndpointECMP: flows to a two-hop route spread over both links,
// and every packet of a flow takes the same link (planted bug: choosing
// Hops[0] always leaves link two unused and fails).
func TestFIBEndpointECMP(t *testing.T) {
	ch1, ch2 := channel.New(256, 1500, macA), channel.New(256, 1500, macA)
	ep1, _ := newTestEndpoint(t, ch1, nil)
	ep2, _ := newTestEndpoint(t, ch2, nil)
	dst := netip.MustParseAddr("10.10.10.10")
	fib := newTestFIBLinks(t, map[string]*mplsendpoint.Endpoint{"one": ep1, "two": ep2}, ep1,
		[]mpls.Route{{Prefix: netip.MustParsePrefix("10.10.10.0/24"), NextHops: []mpls.NextHop{
			{Via: netip.MustParseAddr("172.16.20.21"), Device: "one"},
			{Via: netip.MustParseAddr("172.16.30.21"), Device: "two", Labels: []mpls.Label{200}},
		}}}, nil)
	count := map[string]int{}
	for port := uint16(40000); port < 40064; port++ {
		var first string
		for range 3 { // the same flow three times
			writeFIB(fib, ipv4TCP(dst, port))
			var on string
			if f := frameOf(ch1); f != nil {
				on = "one"
			}
			if f := frameOf(ch2); f != nil {
				if on != "" {
					t.Fatalf("flow %d: a frame on both links", port)
				}
				if header.Ethernet(f).Type() != mplsendpoint.EthertypeMPLSUnicast {
					t.Errorf("flow %d on link two without its label", port)
				}
				on = "two"
			}
			if on == "" {
				t.Fatalf("flow %d: no frame", port)
			}
			if first == "" {
				first = on
				count[on]++
			} else if on != first {
				t.Fatalf("flow %d moved from link %s to link %s", port, first, on)
			}
		}
	}
	if count["one"] == 0 || count["two"] == 0 {
		t.Errorf("64 flows went %v; want both links used", count)
	}
	// With the fixed seed the spread is deterministic; weights 1:1 must
	// come within 10%: 29 to 35 of 64.
	if c := count["one"]; c < 29 || c > 35 {
		t.Errorf("link one carries %d of 64 flows, want 32 ± 10%%", c)
	}
}

// BenchmarkFIBEndpointWrite measures one IPv4 TCP packet routed by the FIB
// endpoint (1M-route-free: the lookup is BenchmarkFIB's) over a two-hop
// ECMP route, labels pushed, written to a channel endpoint and drained:
// the per-packet cost of locally originated traffic beyond the link. The
// one allocation an operation is writeFIB's own list (PushBack on a fresh
// PacketBufferList), not the endpoint's: a memory profile shows nothing
// else.
func BenchmarkFIBEndpointWrite(b *testing.B) {
	ch := channel.New(16, 1500, macA)
	ep, err := mplsendpoint.New(ch, mplsendpoint.Options{LinkAddress: macA})
	if err != nil {
		b.Fatal(err)
	}
	tables := &mpls.Tables{}
	if err := tables.ReplaceRoutes([]mpls.Route{{Prefix: netip.MustParsePrefix("10.10.10.0/24"), NextHops: []mpls.NextHop{
		{Via: netip.MustParseAddr("172.16.20.21"), Device: "ep", Labels: []mpls.Label{100}},
		{Via: netip.MustParseAddr("172.16.20.22"), Device: "ep", Labels: []mpls.Label{200}},
	}}}); err != nil {
		b.Fatal(err)
	}
	fib := mplsendpoint.NewFIB(mplsendpoint.FIBOptions{Tables: tables, Forwarding: true,
		Resolve: func(_ tcpip.NICID, _ tcpip.Address, _ tcpip.NetworkProtocolNumber, onResolve func(stack.LinkResolutionResult)) tcpip.Error {
			onResolve(stack.LinkResolutionResult{LinkAddress: macB})
			return nil
		}})
	fib.SetLinks(map[string]*mplsendpoint.FIBLink{"ep": {Endpoint: ep, NIC: 1}}, ep)
	ip := ipv4TCP(netip.MustParseAddr("10.10.10.10"), 40000)
	b.ReportAllocs()
	for b.Loop() {
		writeFIB(fib, ip)
		if pkt := ch.Read(); pkt != nil {
			pkt.DecRef()
		}
	}
}

// TestFIBEndpointQueuesWhileResolving: packets sent before the hop's MAC
// address is known wait, and leave with their labels once it is (planted
// bug: writing them without the labels they were routed with fails).
func TestFIBEndpointQueuesWhileResolving(t *testing.T) {
	ch := channel.New(8, 1500, macA)
	ep, _ := newTestEndpoint(t, ch, nil)
	tables := &mpls.Tables{}
	if err := tables.ReplaceRoutes([]mpls.Route{{Prefix: netip.MustParsePrefix("10.10.10.0/24"),
		NextHops: []mpls.NextHop{{Via: netip.MustParseAddr("172.16.20.21"), Device: "ep", Labels: []mpls.Label{777}}}}}); err != nil {
		t.Fatal(err)
	}
	var later func(stack.LinkResolutionResult)
	fib := mplsendpoint.NewFIB(mplsendpoint.FIBOptions{Tables: tables, Forwarding: true, Resolve: func(_ tcpip.NICID, _ tcpip.Address, _ tcpip.NetworkProtocolNumber, onResolve func(stack.LinkResolutionResult)) tcpip.Error {
		later = onResolve
		return &tcpip.ErrWouldBlock{}
	}})
	fib.SetLinks(map[string]*mplsendpoint.FIBLink{"ep": {Endpoint: ep, NIC: 1}}, ep)
	writeFIB(fib, ipv4TCP(netip.MustParseAddr("10.10.10.10"), 40000))
	writeFIB(fib, ipv4TCP(netip.MustParseAddr("10.10.10.11"), 40001))
	if f := frameOf(ch); f != nil {
		t.Fatalf("a frame left before the next hop was resolved: %x", f)
	}
	later(stack.LinkResolutionResult{LinkAddress: macB})
	for i := range 2 {
		f := frameOf(ch)
		if f == nil {
			t.Fatalf("frame %d did not leave after resolution", i)
		}
		if e := mpls.DecodeEntry(f[header.EthernetMinimumSize:]); header.Ethernet(f).Type() != mplsendpoint.EthertypeMPLSUnicast || e.Label != 777 || header.Ethernet(f).DestinationAddress() != macB {
			t.Errorf("frame %d: type %#x label %d to %s, want label 777 to %s", i, header.Ethernet(f).Type(), e.Label, header.Ethernet(f).DestinationAddress(), macB)
		}
	}
}
