package mplsendpoint_test

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/internal/testkit/leakcheck"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/nested"
	"gvisor.dev/gvisor/pkg/tcpip/link/pipe"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

const nicID = 1

// Addresses of the two sides of the in-process pair.
var (
	macA = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a")
	macB = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0b")

	addrA4 = netip.MustParseAddr("10.0.0.1")
	addrB4 = netip.MustParseAddr("10.0.0.2")
	addrA6 = netip.MustParseAddr("fd00::a")
	addrB6 = netip.MustParseAddr("fd00::b")
)

// pairConfig describes one in-process topology: stack A and stack B joined
// by a pipe, each through an mplsendpoint, each pushing labels towards the
// other and popping the labels the other pushes.
type pairConfig struct {
	labels  []mpls.Label // pushed both ways; empty = plain Ethernet
	gso     mplsendpoint.GSOMode
	mtu     uint32 // link MTU
	binding mpls.Payload
	noSACK  bool // disable TCP SACK on both stacks
}

type side struct {
	st  *stack.Stack
	ep  *mplsendpoint.Endpoint
	tap *wireTap
}

type pair struct{ a, b side }

// newPair builds the pair; the FIB on each side pushes cfg.labels towards
// the other side's addresses with the other side as next hop, and the
// gVisor routes to them lead to the side's FIB NIC (as package stack's).
func newPair(tb testing.TB, cfg pairConfig) *pair {
	tb.Helper()
	la, lb := pipe.New(macA, macB, cfg.mtu)
	p := &pair{}
	p.a = newSide(tb, la, cfg, addrA4, addrA6, addrB4, addrB6)
	p.b = newSide(tb, lb, cfg, addrB4, addrB6, addrA4, addrA6)
	return p
}

func newSide(tb testing.TB, lower stack.LinkEndpoint, cfg pairConfig, self4, self6, peer4, peer6 netip.Addr) side {
	tb.Helper()
	tap := newWireTap(lower)
	tables := &mpls.Tables{}
	if len(cfg.labels) > 0 {
		if err := tables.ReplaceRoutes(hostRoutes(cfg.labels, netip.Addr{}, peer4, peer6)); err != nil {
			tb.Fatal(err)
		}
		var ilm []mpls.ILMEntry
		for i, l := range cfg.labels {
			en := mpls.ILMEntry{Label: l, Action: mpls.ILMPopLocal}
			if i == len(cfg.labels)-1 {
				en.Payload = cfg.binding
			}
			ilm = append(ilm, en)
		}
		m, err := mpls.NewILM(ilm)
		if err != nil {
			tb.Fatal(err)
		}
		tables.SetILM(m)
	}
	ep, err := mplsendpoint.New(tap, mplsendpoint.Options{Tables: tables, GSOMode: cfg.gso})
	if err != nil {
		tb.Fatal(err)
	}
	st, connected := newHostStack(tb, ep, self4, self6, tcp.NewProtocol, udp.NewProtocol)
	if cfg.noSACK {
		opt := tcpip.TCPSACKEnabled(false)
		if err := st.SetTransportProtocolOption(tcp.ProtocolNumber, &opt); err != nil {
			tb.Fatal(err)
		}
	}
	// The labelled routes lead to the FIB NIC, which resolves the next
	// hop's MAC on the link and hands it the packet with its labels; plain
	// pairs reach the peer on the connected subnet. A labelled pair has no
	// connected route: gVisor prefers, for a bound socket, a route out of
	// the NIC holding its address over the FIB NIC's.
	if len(cfg.labels) > 0 {
		st.SetRouteTable(addFIBNIC(tb, st, ep, tables, cfg.gso, peer4, peer6))
	} else {
		st.SetRouteTable(connected)
	}
	return side{st: st, ep: ep, tap: tap}
}

// newHostStack returns a gVisor stack (IPv4, IPv6, ARP and transports),
// closed when tb ends, with ep as NIC nicID holding self4/24 and self6/64,
// and the routes to those two subnets through it.
func newHostStack(tb testing.TB, ep stack.LinkEndpoint, self4, self6 netip.Addr, transports ...stack.TransportProtocolFactory) (st *stack.Stack, connected []tcpip.Route) {
	tb.Helper()
	st = stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol, arp.NewProtocol},
		TransportProtocols: transports,
	})
	tb.Cleanup(func() {
		st.Close()
		st.Wait()
	})
	if err := st.CreateNIC(nicID, ep); err != nil {
		tb.Fatal(err)
	}
	for _, a := range []netip.Prefix{netip.PrefixFrom(self4, 24), netip.PrefixFrom(self6, 64)} {
		proto := ipv4.ProtocolNumber
		if a.Addr().Is6() {
			proto = ipv6.ProtocolNumber
		}
		if err := st.AddProtocolAddress(nicID, tcpip.ProtocolAddress{
			Protocol:          proto,
			AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFromSlice(a.Addr().AsSlice()), PrefixLen: a.Bits()},
		}, stack.AddressProperties{}); err != nil {
			tb.Fatal(err)
		}
		connected = append(connected, tcpip.Route{Destination: prefixSubnet(a.Masked()), NIC: nicID})
	}
	return st, connected
}

func hostSubnet(a netip.Addr) tcpip.Subnet { return prefixSubnet(netip.PrefixFrom(a, a.BitLen())) }

func prefixSubnet(p netip.Prefix) tcpip.Subnet {
	mask := make([]byte, p.Addr().BitLen()/8)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	s, err := tcpip.NewSubnet(tcpip.AddrFromSlice(p.Addr().AsSlice()), tcpip.MaskFromBytes(mask))
	if err != nil {
		panic(err)
	}
	return s
}

// wireTap sits between an mplsendpoint and its lower link and hands every
// written frame to an inspection function.
type wireTap struct {
	nested.Endpoint
	inspect atomic.Pointer[func([]byte)]
	mu      sync.Mutex
	buf     []byte
}

func newWireTap(lower stack.LinkEndpoint) *wireTap {
	t := &wireTap{}
	t.Endpoint.Init(lower, t)
	return t
}

// WritePackets implements stack.LinkEndpoint.
func (t *wireTap) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	if f := t.inspect.Load(); f != nil {
		t.mu.Lock()
		for _, pkt := range pkts.AsSlice() {
			t.buf = t.buf[:0]
			for _, v := range pkt.AsSlices() {
				t.buf = append(t.buf, v...)
			}
			(*f)(t.buf)
		}
		t.mu.Unlock()
	}
	return t.Endpoint.WritePackets(pkts)
}

func (t *wireTap) setInspect(f func([]byte)) { t.inspect.Store(&f) }

// frameChecker decodes frames with gopacket and records the first problem.
type frameChecker struct {
	mtu      int
	labels   []mpls.Label
	mu       sync.Mutex
	err      error
	frames   int
	labelled int
	tcp      int
	maxLen   int
	maxTCP   int // largest frame carrying TCP
}

func (c *frameChecker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

func (c *frameChecker) check(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frames++
	c.maxLen = max(c.maxLen, len(b))
	if len(b) > c.mtu+14 {
		c.fail("frame of %d bytes > link MTU %d + 14", len(b), c.mtu)
		return
	}
	pk := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	if el := pk.ErrorLayer(); el != nil {
		c.fail("gopacket: %v", el.Error())
		return
	}
	eth := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if eth.EthernetType == layers.EthernetTypeARP {
		return
	}
	if ip, ok := pk.NetworkLayer().(*layers.IPv6); ok && eth.EthernetType == layers.EthernetTypeIPv6 && ip.NextHeader == layers.IPProtocolICMPv6 && ip.HopLimit == 255 {
		return // NDP: never labelled
	}
	var got []*layers.MPLS
	for _, l := range pk.Layers() {
		if m, ok := l.(*layers.MPLS); ok {
			got = append(got, m)
		}
	}
	wantType := layers.EthernetTypeMPLSUnicast
	if len(c.labels) == 0 {
		wantType = eth.EthernetType // IPv4 or IPv6, checked by the decode
	}
	if eth.EthernetType != wantType {
		c.fail("ethertype %v, want %v", eth.EthernetType, wantType)
		return
	}
	if len(got) != len(c.labels) {
		c.fail("got %d labels, want %d", len(got), len(c.labels))
		return
	}
	if len(got) > 0 {
		c.labelled++
	}
	var ipTTL uint8
	var l4 []byte
	var pseudo uint32
	switch ip := pk.NetworkLayer().(type) {
	case *layers.IPv4:
		ipTTL = ip.TTL
		hdr := append([]byte(nil), ip.Contents...)
		hdr[10], hdr[11] = 0, 0
		if want := gopacket.FoldChecksum(gopacket.ComputeChecksum(hdr, 0)); want != ip.Checksum {
			c.fail("IPv4 checksum %#04x, want %#04x", ip.Checksum, want)
		}
		l4 = ip.Payload[:int(ip.Length)-len(ip.Contents)]
		pseudo = gopacket.ComputeChecksum(ip.SrcIP.To4(), 0) + gopacket.ComputeChecksum(ip.DstIP.To4(), 0) + uint32(ip.Protocol) + uint32(len(l4))
	case *layers.IPv6:
		ipTTL = ip.HopLimit
		l4 = ip.Payload
		pseudo = gopacket.ComputeChecksum(ip.SrcIP, 0) + gopacket.ComputeChecksum(ip.DstIP, 0) + uint32(ip.NextHeader) + uint32(len(l4))
	default:
		c.fail("no IP layer")
		return
	}
	for i, m := range got {
		if m.Label != uint32(c.labels[i]) || m.StackBottom != (i == len(got)-1) || m.TTL != ipTTL {
			c.fail("label %d = {%d S=%v TTL=%d}, want {%d S=%v TTL=%d}", i, m.Label, m.StackBottom, m.TTL, c.labels[i], i == len(got)-1, ipTTL)
		}
	}
	if pk.Layer(layers.LayerTypeTCP) != nil {
		c.tcp++
		c.maxTCP = max(c.maxTCP, len(b))
		if gopacket.FoldChecksum(pseudo+gopacket.ComputeChecksum(l4, 0)) != 0 {
			c.fail("TCP checksum does not verify (frame %d bytes)", len(b))
		}
	}
}
