package forward_test

import (
	"encoding/binary"
	"log/slog"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/internal/testkit/leakcheck"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/stack"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// lsrSpec is an in-process LSR: the addresses of its links in0 and out0
// and its label routes.
type lsrSpec struct {
	addrs  []stack.Address
	ilm    []mpls.ILMEntry
	ttl    mpls.TTLModel
	routes []forward.Route // transit IP routes beyond the connected subnets
}

var (
	hop2 = netip.MustParseAddr("10.2.0.2")
	// lsrV4: in0 (10.1.0.1) receives, out0 (10.2.0.1) sends to the next
	// hop 10.2.0.2: 100 is swapped for 200, 101 for 300/301, 102 popped.
	lsrV4 = lsrSpec{
		addrs: []stack.Address{{Link: "in0", Prefix: netip.MustParsePrefix("10.1.0.1/24")}, {Link: "out0", Prefix: netip.MustParsePrefix("10.2.0.1/24")}},
		ilm: []mpls.ILMEntry{
			{Label: 100, Action: mpls.ILMSwap, OutLabels: []mpls.Label{200}, NextHop: hop2, Device: "out0"},
			{Label: 101, Action: mpls.ILMSwap, OutLabels: []mpls.Label{300, 301}, NextHop: hop2, Device: "out0"},
			{Label: 102, Action: mpls.ILMPopForward, NextHop: hop2, Device: "out0"},
		},
	}
	// lsrV6: label 103 is swapped for 300/301 towards 2001:db8:2::2, 104
	// popped towards it.
	lsrV6 = lsrSpec{
		addrs: []stack.Address{{Link: "in0", Prefix: netip.MustParsePrefix("2001:db8:1::1/64")}, {Link: "out0", Prefix: netip.MustParsePrefix("2001:db8:2::1/64")}},
		ilm: []mpls.ILMEntry{
			{Label: 103, Action: mpls.ILMSwap, OutLabels: []mpls.Label{300, 301}, NextHop: netip.MustParseAddr("2001:db8:2::2"), Device: "out0"},
			{Label: 104, Action: mpls.ILMPopForward, NextHop: netip.MustParseAddr("2001:db8:2::2"), Device: "out0"},
		},
	}
)

var (
	macIn   = tcpip.LinkAddress("\x02\x00\x00\x00\x01\x01")
	macOut  = tcpip.LinkAddress("\x02\x00\x00\x00\x02\x01")
	macPrev = tcpip.LinkAddress("\x02\x00\x00\x00\x01\x02") // 10.1.0.2
	macNext = tcpip.LinkAddress("\x02\x00\x00\x00\x02\x02") // 10.2.0.2
)

// plane is a running switch on a stack whose links in0 and out0 are the
// given lower endpoints.
type plane struct {
	sw *forward.Switch
	st *stack.Stack
	// rec is the links' Forwarder: sw, recording the merged packets the
	// endpoints offer it (lgro_test.go).
	rec *recordingSwitch
}

// startPlane builds the stack of spec on in and out, with a switch as its
// links' Forwarder, attached; both are closed when the test ends.
func startPlane(t testing.TB, spec lsrSpec, in, out gstack.LinkEndpoint) plane {
	t.Helper()
	return startPlaneMode(t, spec, in, out, withLGRO)
}

// startPlaneMode is startPlane with the endpoints' labelled GRO on
// (withLGRO: the switch is a GSOForwarder) or off (perSegment: every
// labelled frame reaches Forward on its own).
func startPlaneMode(t testing.TB, spec lsrSpec, in, out gstack.LinkEndpoint, mode lgroMode) plane {
	t.Helper()
	lg := slog.New(slog.DiscardHandler)
	sw := forward.New(spec.ttl, lg)
	rec := &recordingSwitch{Switch: sw}
	var fwd mplsendpoint.Forwarder = rec
	if mode == perSegment {
		fwd = segmentSwitch{sw}
	}
	st, err := stack.New(stack.Config{
		Links: []stack.Link{
			{Name: "in0", Kind: stack.LinkEndpoint, Endpoint: in},
			{Name: "out0", Kind: stack.LinkEndpoint, Endpoint: out},
		},
		Addresses:   spec.addrs,
		ILM:         spec.ilm,
		Forwarder:   fwd,
		IPForwarder: sw,
		TTLModel:    spec.ttl,
		Forwarding:  true,
		Logger:      lg,
	})
	if err != nil {
		t.Fatal(err)
	}
	sw.Attach(st.Netstack())
	routes := append([]forward.Route(nil), spec.routes...)
	for _, a := range spec.addrs {
		routes = append(routes, forward.Route{Prefix: a.Prefix.Masked(), Device: a.Link})
	}
	sw.SetRouter(forward.NewTable(routes))
	t.Cleanup(func() {
		st.Close()
		sw.Flush()
	})
	return plane{sw: sw, st: st, rec: rec}
}

// neighbor adds a static neighbour on the named link.
func (p plane) neighbor(t testing.TB, link string, addr netip.Addr, mac tcpip.LinkAddress) {
	t.Helper()
	proto := header.IPv4ProtocolNumber
	if addr.Is6() {
		proto = header.IPv6ProtocolNumber
	}
	ns := p.st.Netstack()
	for id, info := range ns.NICInfo() {
		if info.Name == link {
			if terr := ns.AddStaticNeighbor(id, proto, tcpip.AddrFromSlice(addr.AsSlice()), mac); terr != nil {
				t.Fatalf("static neighbour %s on %s: %v", addr, link, terr)
			}
			return
		}
	}
	t.Fatalf("no link %s", link)
}

type lsr struct {
	plane
	in, out *channel.Endpoint
}

// newLSR starts an LSR of spec on channel endpoints; static neighbours make
// the next hop 10.2.0.2 (and the previous hop 10.1.0.2, for ICMP) resolved
// when resolve is set.
func newLSR(t testing.TB, spec lsrSpec, resolve bool) *lsr {
	t.Helper()
	l := &lsr{in: channel.New(256, 1500, macIn), out: channel.New(256, 1500, macOut)}
	l.plane = startPlane(t, spec, l.in, l.out)
	t.Cleanup(func() {
		l.in.Drain()
		l.out.Drain()
	})
	if resolve {
		l.neighbor(t, "in0", netip.MustParseAddr("10.1.0.2"), macPrev)
		l.neighbor(t, "out0", hop2, macNext)
	}
	return l
}

// ipv4UDP returns an IPv4 UDP packet 10.1.0.2:1234 -> 10.9.9.9:5678 with
// the given TTL and a zero payload of size bytes, checksums valid
// (mplstest.UDP: the same bytes gopacket serializes).
func ipv4UDP(t testing.TB, ttl uint8, size int) []byte {
	t.Helper()
	return mplstest.UDP{Src: netip.MustParseAddrPort("10.1.0.2:1234"), Dst: netip.MustParseAddrPort("10.9.9.9:5678"),
		TTL: ttl, Payload: make([]byte, size)}.IPv4()
}

// labelled returns an MPLS (0x8847) Ethernet frame to in0 carrying the
// labels (outermost first, S on the last, TTL ttl) over payload.
func labelled(labels []uint32, ttl uint8, payload []byte) []byte {
	ls := make([]mpls.Label, len(labels))
	for i, l := range labels {
		ls[i] = mpls.Label(l)
	}
	return mplstest.Frame{Dst: macIn, Src: macPrev, EtherType: mplstest.EthertypeMPLS, Labels: mplstest.Stack(ttl, ls...), Payload: payload}.Bytes()
}

func inject(ep *channel.Endpoint, frame []byte) {
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	ep.InjectInbound(0, pkt)
	pkt.DecRef()
}

// readFrame returns the next frame written to ep, or nil after 2 s.
// benchForward injects frame on in0 b.N times, failing b unless each time
// one frame leaves on out0.
func (l *lsr) benchForward(b *testing.B, frame []byte) {
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	for range b.N {
		inject(l.in, frame)
		if pkt := l.out.Read(); pkt != nil {
			pkt.DecRef()
		} else {
			b.Fatalf("frame not forwarded: %+v", l.sw.Stats())
		}
	}
}

// icmpBack reads the ICMP error l sent back on in0, failing t when none
// came or a frame left on out0, and decodes it.
func (l *lsr) icmpBack(t *testing.T) gopacket.Packet {
	t.Helper()
	f := readFrame(t, l.in)
	if f == nil {
		t.Fatalf("no ICMP on in0; stats %+v", l.sw.Stats())
	}
	if n := l.out.NumQueued(); n != 0 {
		t.Errorf("got %d frames on out0, want 0", n)
	}
	return gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
}

func readFrame(t testing.TB, ep *channel.Endpoint) []byte {
	t.Helper()
	return mplstest.ReadFrame(ep, 2*time.Second)
}

type wantLabel struct {
	label uint32
	s     bool
	ttl   uint8
}

func TestLabelSwitch(t *testing.T) {
	l := newLSR(t, lsrV4, true)
	ip := ipv4UDP(t, 64, 100)
	tests := []struct {
		name    string
		in      []uint32
		ttl     uint8
		want    []wantLabel // nil: popped to IP
		wantTTL uint8       // IP TTL after a pop
	}{
		{"swap", []uint32{100}, 64, []wantLabel{{200, true, 63}}, 0},
		{"swap keeps inner label", []uint32{100, 500}, 10, []wantLabel{{200, false, 9}, {500, true, 10}}, 0},
		{"swap and push", []uint32{101}, 255, []wantLabel{{300, false, 254}, {301, true, 254}}, 0},
		{"pop to IP, uniform TTL", []uint32{102}, 30, nil, 29},
		{"pop to inner label", []uint32{102, 600}, 30, []wantLabel{{600, true, 29}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inject(l.in, labelled(tc.in, tc.ttl, ip))
			f := readFrame(t, l.out)
			if f == nil {
				t.Fatalf("no frame on out0; stats %+v", l.sw.Stats())
			}
			p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
			eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			if got, want := string(eth.DstMAC), string(macNext); got != want {
				t.Errorf("got dst MAC %x, want %x", got, want)
			}
			if got, want := string(eth.SrcMAC), string(macOut); got != want {
				t.Errorf("got src MAC %x, want %x", got, want)
			}
			var got []wantLabel
			for _, ly := range p.Layers() {
				if m, ok := ly.(*layers.MPLS); ok {
					got = append(got, wantLabel{m.Label, m.StackBottom, m.TTL})
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got labels %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("got label %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			ipl, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			if !ok {
				t.Fatalf("no IPv4 under the labels: %v", p)
			}
			if tc.want == nil {
				if eth.EthernetType != layers.EthernetTypeIPv4 {
					t.Errorf("got ethertype %v, want IPv4", eth.EthernetType)
				}
				if ipl.TTL != tc.wantTTL {
					t.Errorf("got IP TTL %d, want %d", ipl.TTL, tc.wantTTL)
				}
				// gopacket recomputes the checksum on a copy: compare.
				hdr := append([]byte(nil), ipl.Contents...)
				binary.BigEndian.PutUint16(hdr[10:], 0)
				if got, want := ipl.Checksum, ^ipChecksum(hdr); got != want {
					t.Errorf("got IP header checksum %#04x, want %#04x", got, want)
				}
			} else if ipl.TTL != 64 {
				t.Errorf("got IP TTL %d under labels, want 64 (untouched)", ipl.TTL)
			}
			if udp, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); !ok || len(udp.Payload) != 100 {
				t.Errorf("UDP payload lost: %v", p)
			}
		})
	}
	st := l.sw.Stats()
	if st.Forwarded != uint64(len(tests)) || st.Swapped != 3 || st.PoppedIP != 1 || st.PoppedLabelled != 1 {
		t.Errorf("got stats %+v, want 5 forwarded (3 swapped, 1 popped to IP, 1 popped labelled)", st)
	}
}

// ipChecksum is the RFC 1071 sum, written here as an oracle independent of
// the product's.
func ipChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func TestLabelSwitchTTLExpiry(t *testing.T) {
	l := newLSR(t, lsrV4, true)
	orig := ipv4UDP(t, 1, 20)
	inject(l.in, labelled([]uint32{100, 500}, 1, orig))
	p := l.icmpBack(t)
	ipl, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ok {
		t.Fatalf("not IPv4: %v", p)
	}
	if got, want := ipl.SrcIP.String(), "10.1.0.1"; got != want {
		t.Errorf("got ICMP source %s, want %s (the ingress link's address)", got, want)
	}
	if got, want := ipl.DstIP.String(), "10.1.0.2"; got != want {
		t.Errorf("got ICMP destination %s, want %s", got, want)
	}
	icmp, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if !ok {
		t.Fatalf("not ICMPv4: %v", p)
	}
	if icmp.TypeCode != layers.CreateICMPv4TypeCode(11, 0) {
		t.Errorf("got type/code %v, want time exceeded", icmp.TypeCode)
	}
	msg := ipl.Payload
	if ipChecksum(msg) != 0xffff {
		t.Errorf("ICMP checksum does not verify")
	}
	// RFC 4884: length 32 words; original datagram, zero-padded to 128.
	if msg[5] != 32 {
		t.Errorf("got length %d words, want 32", msg[5])
	}
	if got := msg[8 : 8+len(orig)]; string(got) != string(orig) {
		t.Errorf("original datagram not quoted")
	}
	ext := msg[8+128:]
	if len(ext) != 4+4+8 {
		t.Fatalf("got extension of %d bytes, want 16", len(ext))
	}
	if ext[0]>>4 != 2 || ipChecksum(ext) != 0xffff {
		t.Errorf("got extension header %x, want version 2 and a valid checksum", ext[:4])
	}
	obj := ext[4:]
	if binary.BigEndian.Uint16(obj) != 12 || obj[2] != 1 || obj[3] != 1 {
		t.Errorf("got object header %x, want length 12 class 1 c-type 1", obj[:4])
	}
	if got, want := binary.BigEndian.Uint32(obj[4:]), uint32(100<<12|1); got != want {
		t.Errorf("got first label entry %#x, want %#x", got, want)
	}
	if got, want := binary.BigEndian.Uint32(obj[8:]), uint32(500<<12|1<<8|1); got != want {
		t.Errorf("got second label entry %#x, want %#x", got, want)
	}
	st := l.sw.Stats()
	if st.Drop(forward.DropTTLExpired) != 1 || st.ICMPSent != 1 {
		t.Errorf("got ttl_expired %d, icmp sent %d; want 1, 1", st.Drop(forward.DropTTLExpired), st.ICMPSent)
	}
}

// The ICMP error rate limit the node promises (README, stack's doc): 100
// errors a second with bursts of 10, node-wide. Written here from the
// spec, not read from the stack's constants, so that a changed constant
// fails this test.
const (
	specICMPRate  = 100
	specICMPBurst = 10
)

// TestLabelSwitchICMPRateLimit expires 50 labelled packets as fast as it
// can: the switch sends at least the burst and at most the burst plus what
// the rate refills while it runs, and counts the rest as
// icmp_rate_limited (issue 18: the expectation came from stack.ICMPBurst).
func TestLabelSwitchICMPRateLimit(t *testing.T) {
	l := newLSR(t, lsrV4, true)
	orig := ipv4UDP(t, 1, 20)
	const n = 50
	start := time.Now()
	for range n {
		inject(l.in, labelled([]uint32{100}, 1, orig))
	}
	elapsed := time.Since(start)
	st := l.sw.Stats()
	limited := st.Drop(forward.DropICMPRateLimited)
	most := uint64(specICMPBurst + math.Ceil(elapsed.Seconds()*specICMPRate))
	if st.ICMPSent+limited != n || st.ICMPSent < specICMPBurst || st.ICMPSent > most {
		t.Errorf("got %d sent, %d rate-limited in %v; want them to sum to %d with %d to %d sent (burst %d, %d/s)",
			st.ICMPSent, limited, elapsed, n, specICMPBurst, most, specICMPBurst, specICMPRate)
	}
}

// TestLabelSwitchResolves sends to an unresolved next hop: the frame waits
// for ARP, is sent once the reply comes, and the queue is bounded.
func TestLabelSwitchResolves(t *testing.T) {
	l := newLSR(t, lsrV4, false)
	ip := ipv4UDP(t, 64, 10)
	const n = 70 // more than the 64 the queue holds
	for range n {
		inject(l.in, labelled([]uint32{100}, 64, ip))
	}
	req := readFrame(t, l.out)
	p := gopacket.NewPacket(req, layers.LayerTypeEthernet, gopacket.Default)
	arp, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
	if !ok || netip.AddrFrom4([4]byte(arp.DstProtAddress)) != netip.MustParseAddr("10.2.0.2") {
		t.Fatalf("got %v, want an ARP request for 10.2.0.2", p)
	}
	st := l.sw.Stats()
	if st.Drop(forward.DropQueueFull) != n-64 || st.Queued != 64 {
		t.Errorf("got queue_full %d, queued %d; want %d, 64", st.Drop(forward.DropQueueFull), st.Queued, n-64)
	}
	// Answer the request.
	reply := gopacket.NewSerializeBuffer()
	gopacket.SerializeLayers(reply, gopacket.SerializeOptions{},
		&layers.Ethernet{SrcMAC: []byte(macNext), DstMAC: []byte(macOut), EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPReply, SourceHwAddress: []byte(macNext), SourceProtAddress: []byte{10, 2, 0, 2},
			DstHwAddress: []byte(macOut), DstProtAddress: []byte{10, 2, 0, 1}})
	inject(l.out, reply.Bytes())
	for i := range 64 {
		f := readFrame(t, l.out)
		if f == nil {
			t.Fatalf("got %d queued frames after the ARP reply, want 64", i)
		}
		if got := tcpip.LinkAddress(f[:6]); got != macNext {
			t.Fatalf("frame %d: got dst MAC %x, want %x", i, got, macNext)
		}
	}
	if st := l.sw.Stats(); st.Forwarded != 64 {
		t.Errorf("got forwarded %d, want 64", st.Forwarded)
	}
}

// BenchmarkLabelSwitch measures one swap through the node, from the ingress
// channel endpoint to the egress one, in steady state.
func BenchmarkLabelSwitch(b *testing.B) {
	for _, tc := range []struct {
		name   string
		labels []uint32
		spec   *lsrSpec
	}{
		{"swap", []uint32{100}, &lsrV4},
		{"swap_push", []uint32{101}, &lsrV4},
		{"pop_ip", []uint32{102}, &lsrV4},
		{"multipath_swap", []uint32{110}, &lsrECMP},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l := newLSR(b, *tc.spec, true)
			l.neighbor(b, "out0", hop3, macHop3)
			frame := labelled(tc.labels, 64, ipv4UDP(b, 64, 1400))
			// One view the benchmark re-injects: the frame bytes are
			// copied into a pooled chunk per frame, as a lower link does.
			l.benchForward(b, frame)
		})
	}
}
