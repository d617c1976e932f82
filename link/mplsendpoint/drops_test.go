package mplsendpoint_test

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// recorder is a NetworkDispatcher that keeps what the endpoint delivers.
type recorder struct {
	mu     sync.Mutex
	protos []tcpip.NetworkProtocolNumber
	pkts   [][]byte
	got    chan struct{}
}

func newRecorder() *recorder { return &recorder{got: make(chan struct{}, 16)} }

func (r *recorder) DeliverNetworkPacket(p tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	r.mu.Lock()
	r.protos = append(r.protos, p)
	r.pkts = append(r.pkts, pkt.Data().AsRange().ToSlice())
	r.mu.Unlock()
	r.got <- struct{}{}
}

func (*recorder) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// wait waits, 10 s at most, for a delivery (what names it in the failure)
// and returns the packets delivered so far.
func (r *recorder) wait(t *testing.T, what string) [][]byte {
	t.Helper()
	select {
	case <-r.got:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s delivered", what)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pkts)
}

// fakeForwarder records Forward calls.
type fakeForwarder struct {
	top   int
	label mpls.Label
	n     int
}

func (f *fakeForwarder) Forward(_ *mplsendpoint.Endpoint, req *mplsendpoint.ForwardRequest) {
	f.n++
	f.top = req.Top
	f.label = req.Entry.Label
}

// failLower refuses every write.
type failLower struct{ *channel.Endpoint }

func (failLower) WritePackets(stack.PacketBufferList) (int, tcpip.Error) {
	return 0, &tcpip.ErrClosedForSend{}
}

func ethFrame(dst tcpip.LinkAddress, typ uint16, rest ...[]byte) []byte {
	b := make([]byte, 14)
	copy(b, dst)
	copy(b[6:], macB)
	b[12], b[13] = byte(typ>>8), byte(typ)
	for _, r := range rest {
		b = append(b, r...)
	}
	return b
}

func lse(entries ...mpls.Entry) []byte {
	b := make([]byte, 4*len(entries))
	for i, e := range entries {
		e.Encode(b[4*i:])
	}
	return b
}

// ipv4Packet returns a valid IPv4/UDP packet with payload n bytes long.
func ipv4Packet(df bool, n int) []byte {
	b := make([]byte, header.IPv4MinimumSize+header.UDPMinimumSize+n)
	ip := header.IPv4(b)
	f := header.IPv4Fields{
		TotalLength: uint16(len(b)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber), ID: 0x1234,
		SrcAddr: tcpip.AddrFrom4(addrA4.As4()), DstAddr: tcpip.AddrFrom4(addrB4.As4()),
	}
	if df {
		f.Flags = header.IPv4FlagDontFragment
	}
	ip.Encode(&f)
	ip.SetChecksum(^ip.CalculateChecksum())
	u := header.UDP(b[header.IPv4MinimumSize:])
	u.Encode(&header.UDPFields{SrcPort: 1000, DstPort: 2000, Length: uint16(header.UDPMinimumSize + n)})
	return b
}

// ipv4Fragment returns a fragment (offset off bytes, More set or not) of
// an IPv4/UDP datagram with ID id: 16 payload bytes.
func ipv4Fragment(id uint16, off int, more bool) []byte {
	b := ipv4Packet(false, 8)
	ip := header.IPv4(b)
	var flags uint8
	if more {
		flags = header.IPv4FlagMoreFragments
	}
	ip.SetFlagsFragmentOffset(flags, uint16(off))
	ip.SetID(id)
	ip.SetChecksum(0)
	ip.SetChecksum(^ip.CalculateChecksum())
	return b
}

func newTestEndpoint(t *testing.T, lower stack.LinkEndpoint, fwd mplsendpoint.Forwarder, mods ...func(*mplsendpoint.Options)) (*mplsendpoint.Endpoint, *recorder) {
	t.Helper()
	tables := routeTables(t, []mpls.Route{{Prefix: netip.MustParsePrefix("10.0.0.0/24"),
		NextHops: []mpls.NextHop{{Via: addrB4, Device: testDevice, Labels: []mpls.Label{100, 200}}}}})
	ilm, err := mpls.NewILM([]mpls.ILMEntry{
		{Label: 100, Action: mpls.ILMPopLocal},
		{Label: 300, Action: mpls.ILMSwap, OutLabels: []mpls.Label{301}, NextHop: addrB4},
	})
	if err != nil {
		t.Fatal(err)
	}
	tables.SetILM(ilm)
	opts := mplsendpoint.Options{Tables: tables, Forwarder: fwd, LinkAddress: macA}
	for _, m := range mods {
		m(&opts)
	}
	ep, err := mplsendpoint.New(lower, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	ep.Attach(rec)
	return ep, rec
}

func inject(ep *mplsendpoint.Endpoint, frame []byte, validated bool) {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	pkt.RXChecksumValidated = validated
	ep.DeliverNetworkPacket(0, pkt)
	pkt.DecRef()
}

// writeIP pushes an IP packet's link header (addHeader) and writes it
// with WritePackets as the NIC would.
func writeIP(ep *mplsendpoint.Endpoint, ip []byte, gso stack.GSO) {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: int(ep.MaxHeaderLength()),
		Payload:            buffer.MakeWithData(ip[header.IPv4MinimumSize+header.UDPMinimumSize:]),
	})
	// Transport first: headers are prepended, as the stack builds them.
	copy(pkt.TransportHeader().Push(header.UDPMinimumSize), ip[header.IPv4MinimumSize:])
	copy(pkt.NetworkHeader().Push(header.IPv4MinimumSize), ip)
	pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
	pkt.TransportProtocolNumber = header.UDPProtocolNumber
	pkt.EgressRoute.LocalLinkAddress = macA
	pkt.EgressRoute.RemoteLinkAddress = macB
	pkt.GSOOptions = gso
	addHeader(ep, pkt, netip.AddrFrom4(header.IPv4(ip).DestinationAddress().As4()))
	var l stack.PacketBufferList
	l.PushBack(pkt)
	ep.WritePackets(l)
	l.DecRef()
}

func TestDropCounters(t *testing.T) {
	ok := mpls.Entry{Label: 100, S: true, TTL: 64}
	cases := []struct {
		name   string
		reason mplsendpoint.DropReason
		fail   bool // lower refuses writes
		run    func(ep *mplsendpoint.Endpoint)
		opts   func(*mplsendpoint.Options)
	}{
		{"no ILM entry", mplsendpoint.DropNoILMEntry, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, ethFrame(macA, 0x8847, lse(mpls.Entry{Label: 500, S: true, TTL: 64}), ipv4Packet(false, 8)), false)
		}, nil},
		{"TTL expired", mplsendpoint.DropTTLExpired, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, ethFrame(macA, 0x8847, lse(mpls.Entry{Label: 100, S: true, TTL: 0}), ipv4Packet(false, 8)), false)
		}, nil},
		{"truncated label stack", mplsendpoint.DropTruncatedLabelStack, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, ethFrame(macA, 0x8847, []byte{0, 0x64}), false)
		}, nil},
		{"no bottom of stack", mplsendpoint.DropNoBottomOfStack, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, ethFrame(macA, 0x8847, lse(mpls.Entry{Label: 100, TTL: 64})), false)
		}, nil},
		{"label stack too deep", mplsendpoint.DropLabelStackTooDeep, false, func(ep *mplsendpoint.Endpoint) {
			var es []mpls.Entry
			for range 17 {
				es = append(es, mpls.Entry{Label: 100, TTL: 64})
			}
			inject(ep, ethFrame(macA, 0x8847, lse(es...), ipv4Packet(false, 8)), false)
		}, nil},
		{"reserved label", mplsendpoint.DropReservedLabel, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, ethFrame(macA, 0x8847, lse(mpls.Entry{Label: mpls.LabelRouterAlert, S: true, TTL: 64}), ipv4Packet(false, 8)), false)
		}, nil},
		{"implicit null", mplsendpoint.DropImplicitNull, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, ethFrame(macA, 0x8847, lse(mpls.Entry{Label: 0, TTL: 64}, mpls.Entry{Label: mpls.LabelImplicitNull, S: true, TTL: 64}), ipv4Packet(false, 8)), false)
		}, nil},
		{"unknown payload", mplsendpoint.DropUnknownPayload, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, ethFrame(macA, 0x8847, lse(ok), make([]byte, 40)), false)
		}, nil},
		{"MTU exceeded", mplsendpoint.DropMTUExceeded, false, func(ep *mplsendpoint.Endpoint) {
			writeIP(ep, ipv4Packet(true, 1500-28-4), stack.GSO{}) // fits without labels, not with 2
		}, nil},
		{"GSO unsupported", mplsendpoint.DropGSOUnsupported, false, func(ep *mplsendpoint.Endpoint) {
			writeIP(ep, ipv4Packet(false, 100), stack.GSO{Type: stack.GSOTCPv4, NeedsCsum: true, MSS: 1000})
		}, nil},
		{"lower write error", mplsendpoint.DropLowerWriteError, true, func(ep *mplsendpoint.Endpoint) {
			writeIP(ep, ipv4Packet(false, 100), stack.GSO{})
		}, nil},
		{"multicast MPLS", mplsendpoint.DropUnsupportedEthertype, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, ethFrame(macA, 0x8848, lse(ok), ipv4Packet(false, 8)), false)
		}, nil},
		{"not for us", mplsendpoint.DropNotForUs, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, ethFrame(tcpip.LinkAddress("\x02\x00\x00\x00\x00\x99"), 0x0800, ipv4Packet(false, 8)), false)
		}, nil},
		{"truncated frame", mplsendpoint.DropTruncatedFrame, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, []byte{1, 2, 3}, false)
		}, nil},
		{"no forwarder", mplsendpoint.DropNoForwarder, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, ethFrame(macA, 0x8847, lse(mpls.Entry{Label: 300, S: true, TTL: 64}), ipv4Packet(false, 8)), false)
		}, nil},
		{"bad checksum", mplsendpoint.DropBadChecksum, false, func(ep *mplsendpoint.Endpoint) {
			ip := ipv4Packet(false, 8)
			ip[10] ^= 0xff // IPv4 header checksum; the frame is not flagged, so the endpoint verifies it
			inject(ep, ethFrame(macA, 0x0800, ip), false)
		}, nil},
		{"MPLS input disabled", mplsendpoint.DropMPLSInputDisabled, false, func(ep *mplsendpoint.Endpoint) {
			inject(ep, ethFrame(macA, 0x8847, lse(ok), ipv4Packet(false, 8)), false)
		}, func(o *mplsendpoint.Options) { o.RejectMPLS = true }},
		{"no route", mplsendpoint.DropNoRoute, false, func(ep *mplsendpoint.Endpoint) {
			fib := newTestFIB(t, ep, nil, nil) // empty FIB
			writeFIB(fib, ipv4Packet(false, 8))
		}, nil},
		{"forwarding disabled", mplsendpoint.DropForwardingDisabled, false, func(ep *mplsendpoint.Endpoint) {
			// A host's FIB NIC (Forwarding off) gets a packet whose source
			// is not the route's local address (the zero address here).
			fib := mplsendpoint.NewFIB(mplsendpoint.FIBOptions{Resolve: func(tcpip.NICID, tcpip.Address, tcpip.NetworkProtocolNumber, func(stack.LinkResolutionResult)) tcpip.Error {
				return nil
			}})
			fib.SetLinks(map[string]*mplsendpoint.FIBLink{"ep": {Endpoint: ep, NIC: 1}}, ep)
			writeFIB(fib, ipv4Packet(false, 8))
		}, nil},
		{"no neighbor", mplsendpoint.DropNoNeighbor, false, func(ep *mplsendpoint.Endpoint) {
			fib := newTestFIB(t, ep, []mpls.Route{{Prefix: netip.MustParsePrefix("10.0.0.0/24"),
				NextHops: []mpls.NextHop{{Via: netip.MustParseAddr("10.0.0.9"), Device: "ep"}}}},
				func(stack.LinkResolutionResult) tcpip.Error { return &tcpip.ErrHostUnreachable{} })
			writeFIB(fib, ipv4Packet(false, 8))
		}, nil},
		{"fragment overlap", mplsendpoint.DropFragmentOverlap, false, func(ep *mplsendpoint.Endpoint) {
			// The duplicate poisons the datagram: both are counted.
			inject(ep, ethFrame(macA, 0x0800, ipv4Fragment(1, 0, true)), false)
			inject(ep, ethFrame(macA, 0x0800, ipv4Fragment(1, 0, true)), false)
		}, nil},
		{"fragment timeout", mplsendpoint.DropFragmentTimeout, false, func(ep *mplsendpoint.Endpoint) {
			// One datagram more than the table holds evicts the oldest.
			for id := range 1025 {
				inject(ep, ethFrame(macA, 0x0800, ipv4Fragment(uint16(id), 0, true)), false)
			}
		}, nil},
		{"unverifiable checksum", mplsendpoint.DropUnverifiableChecksum, false, func(ep *mplsendpoint.Endpoint) {
			// IPv4 options on a fragment.
			ip := ipv4Fragment(1, 0, true)
			opt := append(append(append([]byte(nil), ip[:20]...), 1, 1, 1, 0), ip[20:]...) // NOP NOP NOP EOL
			h := header.IPv4(opt)
			h.SetHeaderLength(24)
			h.SetTotalLength(uint16(len(opt)))
			h.SetChecksum(0)
			h.SetChecksum(^h.CalculateChecksum())
			inject(ep, ethFrame(macA, 0x0800, opt), false)
		}, nil},
		{"endpoint closed", mplsendpoint.DropEndpointClosed, false, func(ep *mplsendpoint.Endpoint) {
			// A fragment held when the endpoint closes.
			inject(ep, ethFrame(macA, 0x0800, ipv4Fragment(1, 0, true)), false)
			ep.Close()
		}, nil},
	}
	// Reasons a case counts more than once.
	counts := map[mplsendpoint.DropReason]uint64{mplsendpoint.DropFragmentOverlap: 2}
	covered := map[mplsendpoint.DropReason]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var lower stack.LinkEndpoint = channel.New(8, 1500, macA)
			if tc.fail {
				lower = failLower{channel.New(8, 1500, macA)}
			}
			var mods []func(*mplsendpoint.Options)
			if tc.opts != nil {
				mods = append(mods, tc.opts)
			}
			ep, _ := newTestEndpoint(t, lower, nil, mods...)
			before := ep.Stats()
			tc.run(ep)
			after := ep.Stats()
			ep.Close() // releases held fragments (a second Close does nothing)
			for _, r := range mplsendpoint.DropReasons() {
				want := before.Drop(r)
				if r == tc.reason {
					want += max(counts[r], 1)
				}
				if got := after.Drop(r); got != want {
					t.Errorf("got %s = %d, want %d", r, got, want)
				}
			}
			if ch, ok := lower.(*channel.Endpoint); ok {
				ch.Drain()
			}
			time.Sleep(0) // the ICMP goroutine of the MTU case may still run; the recorder outlives it
		})
		covered[tc.reason] = true
	}
	for _, r := range mplsendpoint.DropReasons() {
		if !covered[r] {
			t.Errorf("drop reason %s has no test case", r)
		}
	}
}

func TestForwarderGetsTransitLabel(t *testing.T) {
	fwd := &fakeForwarder{}
	ep, rec := newTestEndpoint(t, channel.New(8, 1500, macA), fwd)
	// Explicit null on top (not bottom) is popped, then 300 is forwarded.
	inject(ep, ethFrame(macA, 0x8847, lse(mpls.Entry{Label: 0, TTL: 64}, mpls.Entry{Label: 300, S: true, TTL: 64}), ipv4Packet(false, 8)), false)
	if fwd.n != 1 || fwd.top != 1 || fwd.label != 300 {
		t.Errorf("got Forward calls %d top %d label %d, want 1, 1, 300", fwd.n, fwd.top, fwd.label)
	}
	if len(rec.pkts) != 0 {
		t.Errorf("got %d packets delivered up, want 0", len(rec.pkts))
	}
}

func TestPopLocalDelivers(t *testing.T) {
	ep, rec := newTestEndpoint(t, channel.New(8, 1500, macA), nil)
	ip := ipv4Packet(false, 8)
	// MPLS TTL 9 (uniform model) becomes the IPv4 TTL on pop.
	inject(ep, ethFrame(macA, 0x8847, lse(mpls.Entry{Label: 100, S: true, TTL: 9}), ip), false)
	if len(rec.pkts) != 1 || rec.protos[0] != header.IPv4ProtocolNumber {
		t.Fatalf("got %d packets (%v), want 1 IPv4", len(rec.pkts), rec.protos)
	}
	got := header.IPv4(rec.pkts[0])
	if got.TTL() != 9 || !got.IsChecksumValid() {
		t.Errorf("got TTL %d checksum valid %v, want 9, true", got.TTL(), got.IsChecksumValid())
	}
}

// TestMTUExceededSendsICMP checks the ICMP "fragmentation needed" the
// endpoint hands the stack for an IPv4 DF packet that does not fit after the
// push: MTU = link MTU - label bytes.
func TestMTUExceededSendsICMP(t *testing.T) {
	ch := channel.New(8, 1500, macA)
	ep, rec := newTestEndpoint(t, ch, nil)
	writeIP(ep, ipv4Packet(true, 1500-28), stack.GSO{})
	if n := ch.Drain(); n != 0 {
		t.Errorf("got %d frames on the wire, want 0", n)
	}
	delivered := rec.wait(t, "ICMP")
	pk := gopacket.NewPacket(delivered[0], layers.LayerTypeIPv4, gopacket.Default)
	icmp, _ := pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if icmp == nil {
		t.Fatalf("no ICMPv4 in %x", delivered[0])
	}
	if icmp.TypeCode != layers.CreateICMPv4TypeCode(3, 4) {
		t.Errorf("got ICMP %v, want 3/4", icmp.TypeCode)
	}
	if got, want := icmp.Seq, uint16(1500-8); got != want { // gopacket puts the next-hop MTU in Seq
		t.Errorf("got next-hop MTU %d, want %d", got, want)
	}
	ip := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ip.DstIP.Equal(addrA4.AsSlice()) {
		t.Errorf("got ICMP to %v, want %v", ip.DstIP, addrA4)
	}
}

// TestPopHeaderMismatch: a payload the label says is IPv4 (explicit null
// 0) or IPv6 (explicit null 2, or an ILM binding) but whose header says
// otherwise is dropped as unknown_payload, not delivered to the stack
// (which would discard it uncounted) nor counted as a bad checksum. Found
// by node/hostile_netns_test.go's scapy frames.
func TestPopHeaderMismatch(t *testing.T) {
	v4 := ipv4Packet(false, 40) // 68 bytes: longer than an IPv6 header
	v6 := mplstest.IPv6TCP(mplstest.TCP{Src: netip.AddrPortFrom(addrB6, 40000), Dst: netip.AddrPortFrom(addrA6, 80),
		Seq: 1, Flags: header.TCPFlagAck, Payload: []byte("x")})
	withByte0 := func(b []byte, v byte) []byte {
		c := append([]byte(nil), b...)
		c[0] = v
		return c
	}
	null4 := mpls.Entry{Label: mpls.LabelIPv4ExplicitNull, S: true, TTL: 64}
	null6 := mpls.Entry{Label: mpls.LabelIPv6ExplicitNull, S: true, TTL: 64}
	bound6 := mpls.Entry{Label: 600, S: true, TTL: 64}
	for _, tc := range []struct {
		name    string
		label   mpls.Entry
		payload []byte
		deliver bool
	}{
		{"null 0 over IPv4", null4, v4, true},
		{"null 2 over IPv6", null6, v6, true},
		{"label bound to IPv6 over IPv6", bound6, v6, true},
		{"null 0 over IPv6", null4, v6, false},
		{"null 0 over version 5", null4, withByte0(v4, 0x55), false},
		{"null 0 over version 0", null4, withByte0(v4, 0x05), false},
		{"null 0 over IHL 3", null4, withByte0(v4, 0x43), false},
		{"null 0 over IHL 15 beyond the packet", null4, withByte0(v4, 0x4f)[:28], false},
		{"null 0 over 10 bytes", null4, v4[:10], false},
		{"null 2 over IPv4", null6, v4, false},
		{"null 2 over 30 bytes", null6, v6[:30], false},
		{"label bound to IPv6 over IPv4", bound6, v4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ilm, err := mpls.NewILM([]mpls.ILMEntry{{Label: 600, Action: mpls.ILMPopLocal, Payload: mpls.PayloadIPv6}})
			if err != nil {
				t.Fatal(err)
			}
			tables := &mpls.Tables{}
			tables.SetILM(ilm)
			ep, err := mplsendpoint.New(channel.New(8, 1500, macA), mplsendpoint.Options{Tables: tables, LinkAddress: macA})
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			ep.Attach(rec)
			inject(ep, ethFrame(macA, 0x8847, lse(tc.label), tc.payload), false)
			st := ep.Stats()
			var drops uint64
			for _, r := range mplsendpoint.DropReasons() {
				drops += st.Drop(r)
			}
			if tc.deliver {
				if len(rec.pkts) != 1 || drops != 0 {
					t.Errorf("got %d delivered, drops %v; want 1 delivered, no drop", len(rec.pkts), st.Drops)
				}
				return
			}
			if len(rec.pkts) != 0 || st.Drop(mplsendpoint.DropUnknownPayload) != 1 || drops != 1 {
				t.Errorf("got %d delivered, drops %v; want none delivered and one unknown_payload", len(rec.pkts), st.Drops)
			}
		})
	}
}

// TestPlainIPHeaderMismatch: an unlabelled frame whose IP version nibble is
// not its ethertype's is dropped as bad_checksum (the reason for malformed
// IP headers) instead of reaching the stack, which would discard it
// without a counter of ours. Found by node/hostile_netns_test.go.
func TestPlainIPHeaderMismatch(t *testing.T) {
	v4 := ipv4Packet(false, 40)
	v6 := mplstest.IPv6TCP(mplstest.TCP{Src: netip.AddrPortFrom(addrB6, 40000), Dst: netip.AddrPortFrom(addrA6, 80),
		Seq: 1, Flags: header.TCPFlagAck, Payload: []byte("x")})
	v5 := append([]byte(nil), v4...)
	v5[0] = 0x55
	v5h := header.IPv4(v5)
	v5h.SetChecksum(0)
	v5h.SetChecksum(^v5h.CalculateChecksum()) // a valid checksum: only the version is wrong
	for _, tc := range []struct {
		name      string
		typ       uint16
		ip        []byte
		validated bool
		deliver   bool
	}{
		{"IPv4", 0x0800, v4, false, true},
		{"IPv6", 0x86dd, v6, false, true},
		{"version 5 as IPv4", 0x0800, v5, false, false},
		{"version 5 as IPv4, flagged by the kernel", 0x0800, v5, true, false},
		{"IPv6 as IPv4", 0x0800, v6, false, false},
		{"IPv4 as IPv6", 0x86dd, v4, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Forwarding: flagged frames are checked too (to finish partial
			// checksums), as on an LSR.
			ep, err := mplsendpoint.New(channel.New(8, 1500, macA), mplsendpoint.Options{Tables: &mpls.Tables{}, LinkAddress: macA, Forwarding: true})
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			ep.Attach(rec)
			inject(ep, ethFrame(macA, tc.typ, tc.ip), tc.validated)
			st := ep.Stats()
			if tc.deliver {
				if len(rec.pkts) != 1 || st.Drop(mplsendpoint.DropBadChecksum) != 0 {
					t.Errorf("got %d delivered, drops %v; want 1 delivered, no drop", len(rec.pkts), st.Drops)
				}
				return
			}
			if len(rec.pkts) != 0 || st.Drop(mplsendpoint.DropBadChecksum) != 1 {
				t.Errorf("got %d delivered, drops %v; want none delivered and one bad_checksum", len(rec.pkts), st.Drops)
			}
		})
	}
}

// TestForwardingExpiresTTL1: with Forwarding and LocalAddress, an IPv4
// packet with TTL 1 for another host goes up with TTL 0 (and a valid
// header checksum), so that gVisor drops it with time exceeded rather than
// forwarding it with TTL 0 (google/gvisor#13521); TTL 1 for a local
// address, multicast or broadcast, and TTL 2, go up unchanged. Found by
// node/hostile_netns_test.go's unlabelled TTL-1 flood, which reached the
// kernel behind the LSR with no counter moving.
func TestForwardingExpiresTTL1(t *testing.T) {
	local := tcpip.AddrFrom4(addrB4.As4()) // ipv4Packet's destination
	withTTLDst := func(ttl uint8, dst tcpip.Address) []byte {
		b := ipv4Packet(false, 8)
		ip := header.IPv4(b)
		ip.SetTTL(ttl)
		ip.SetDestinationAddress(dst)
		ip.SetChecksum(0)
		ip.SetChecksum(^ip.CalculateChecksum())
		// The UDP checksum is 0 (none), so the new destination needs no fix.
		return b
	}
	other := tcpip.AddrFrom4([4]byte{192, 0, 2, 9})
	for _, tc := range []struct {
		name    string
		ip      []byte
		wantTTL uint8
	}{
		{"TTL 1 to another host", withTTLDst(1, other), 0},
		{"TTL 2 to another host", withTTLDst(2, other), 2},
		{"TTL 1 to a local address", withTTLDst(1, local), 1},
		{"TTL 1 to multicast", withTTLDst(1, tcpip.AddrFrom4([4]byte{224, 0, 0, 9})), 1},
		{"TTL 1 to broadcast", withTTLDst(1, header.IPv4Broadcast), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, err := mplsendpoint.New(channel.New(8, 1500, macA), mplsendpoint.Options{
				Tables: &mpls.Tables{}, LinkAddress: macA, Forwarding: true,
				LocalAddress: func(_ tcpip.NetworkProtocolNumber, a tcpip.Address) bool { return a == local },
			})
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			ep.Attach(rec)
			inject(ep, ethFrame(macA, 0x0800, tc.ip), false)
			if len(rec.pkts) != 1 {
				t.Fatalf("got %d packets delivered, want 1 (drops %v)", len(rec.pkts), ep.Stats().Drops)
			}
			got := header.IPv4(rec.pkts[0])
			if got.TTL() != tc.wantTTL || !got.IsChecksumValid() {
				t.Errorf("got TTL %d, header checksum valid %v; want %d, true", got.TTL(), got.IsChecksumValid(), tc.wantTTL)
			}
		})
	}
}

// TestMPLSToBroadcastDropped: a unicast MPLS frame with a transit label
// sent to the broadcast or a multicast MAC address is dropped as
// not_for_us, not forwarded (Linux's mpls_forward drops non-host frames
// too); to our own address it is forwarded. Found by
// node/hostile_netns_test.go, where the seed LSR forwarded them.
func TestMPLSToBroadcastDropped(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dst     tcpip.LinkAddress
		forward bool
	}{
		{"to us", macA, true},
		{"broadcast", header.EthernetBroadcastAddress, false},
		{"multicast", tcpip.LinkAddress("\x01\x00\x5e\x00\x00\x09"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fwd := &fakeForwarder{}
			ep, _ := newTestEndpoint(t, channel.New(8, 1500, macA), fwd)
			inject(ep, ethFrame(tc.dst, 0x8847, lse(mpls.Entry{Label: 300, S: true, TTL: 64}), ipv4Packet(false, 8)), false)
			st := ep.Stats()
			notForUs := st.Drop(mplsendpoint.DropNotForUs)
			if tc.forward && (fwd.n != 1 || notForUs != 0) {
				t.Errorf("got %d Forward calls, not_for_us %d; want 1, 0", fwd.n, notForUs)
			}
			if !tc.forward && (fwd.n != 0 || notForUs != 1) {
				t.Errorf("got %d Forward calls, not_for_us %d; want 0, 1", fwd.n, notForUs)
			}
		})
	}
}
