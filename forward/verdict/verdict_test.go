package verdict_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/mpls"
)

// node is the test's node: links "out" (MTU 1500) and "small" (MTU 100),
// and the addresses 172.16.20.21 and 172.16.20.0/24's network and
// broadcast addresses.
type node struct{}

func (node) LinkMTU(dev string) (uint32, bool) {
	switch dev {
	case "out":
		return 1500, true
	case "small":
		return 100, true
	}
	return 0, false
}

var locals = []netip.Addr{netip.MustParseAddr("172.16.20.21"), netip.MustParseAddr("172.16.20.0"), netip.MustParseAddr("172.16.20.255")}

func (node) IsLocal(a netip.Addr) bool { return slices.Contains(locals, a) }

// routes is a Router over fixed routes, longest prefix first.
type routes []verdict.Route

func (rs routes) Lookup(dst netip.Addr, _ []byte) (verdict.Route, bool) {
	for _, r := range rs {
		if r.Prefix.Contains(dst) {
			return r, true
		}
	}
	return verdict.Route{}, false
}

var (
	via  = netip.MustParseAddr("172.16.21.22")
	host = net.IP{172, 16, 20, 20}
	peer = net.IP{10, 10, 10, 10}
)

func tables(t *testing.T, model mpls.TTLModel) *verdict.Tables {
	t.Helper()
	ilm, err := mpls.NewILM([]mpls.ILMEntry{
		{Label: 100, Action: mpls.ILMPopForward, NextHop: via, Device: "out"},
		{Label: 200, Action: mpls.ILMSwap, OutLabels: []mpls.Label{300}, NextHop: via, Device: "out"},
		{Label: 201, Action: mpls.ILMSwap, OutLabels: []mpls.Label{300, 301}, NextHop: via, Device: "small"},
		{Label: 202, Action: mpls.ILMSwap, OutLabels: []mpls.Label{300}, NextHop: via, Device: "nowhere"},
		{Label: 110, Action: mpls.ILMPopLocal},
		{Label: 111, Action: mpls.ILMPopContinue},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &verdict.Tables{Model: model, ILM: ilm, Node: node{}, Router: routes{
		{Prefix: netip.MustParsePrefix("10.10.10.0/24"), Device: "out", Via: via, Labels: []mpls.Label{500}},
		{Prefix: netip.MustParsePrefix("10.20.0.0/16"), Device: "out", Via: via, MTU: 576},
		{Prefix: netip.MustParsePrefix("10.30.0.0/16"), Device: "small", Via: via},
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Device: "out", Via: via},
	}}
}

// udp4 is an IPv4/UDP packet (gopacket computes its lengths and
// checksums) of size bytes, DF set unless df is false.
func udp4(t *testing.T, src, dst net.IP, ttl uint8, size int, df bool) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: ttl, Protocol: layers.IPProtocolUDP, SrcIP: src, DstIP: dst}
	if df {
		ip.Flags = layers.IPv4DontFragment
	}
	u := &layers.UDP{SrcPort: 1000, DstPort: 9}
	_ = u.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		ip, u, gopacket.Payload(make([]byte, size-28))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func stack(p []byte, es ...mpls.Entry) []byte {
	b := make([]byte, 4*len(es), 4*len(es)+len(p))
	for i, e := range es {
		e.Encode(b[4*i:])
	}
	return append(b, p...)
}

func e(l mpls.Label, s bool, ttl uint8) mpls.Entry { return mpls.Entry{Label: l, S: s, TTL: ttl} }

func decide(t *testing.T, tb *verdict.Tables, pkt []byte) verdict.Verdict {
	t.Helper()
	var v verdict.Verdict
	tb.DecideLabelled(pkt, len(pkt), &v)
	return v
}

// checksumOK reports whether the IPv4 header h, checksum field included,
// sums to all ones (RFC 1071).
func checksumOK(h []byte) bool { return gopacket.FoldChecksum(gopacket.ComputeChecksum(h, 0)) == 0 }

// TestLabelledDrops: each hostile frame crafted against a live node, and
// each reason, is dropped with its name.
func TestLabelledDrops(t *testing.T) {
	u := udp4(t, host, peer, 64, 60, true)
	deep := func(n int) []byte {
		var es []mpls.Entry
		for i := range n {
			es = append(es, e(200, i == n-1, 64))
		}
		return stack(u, es...)
	}
	badSum := append([]byte{}, u...)
	badSum[10], badSum[11] = 0x12, 0x34
	withLen := func(tot uint16) []byte {
		b := append([]byte{}, u...)
		binary.BigEndian.PutUint16(b[2:], tot)
		b[10], b[11] = 0, 0
		var s uint32
		for i := 0; i < 20; i += 2 {
			s += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		for s>>16 != 0 {
			s = s&0xffff + s>>16
		}
		binary.BigEndian.PutUint16(b[10:], ^uint16(s))
		return b
	}
	v6 := make([]byte, 25)
	v6[0] = 0x60
	binary.BigEndian.PutUint16(v6[4:], 500)
	for _, tc := range []struct {
		name string
		pkt  []byte
		want verdict.Reason
	}{
		{"D1 no bottom of stack", append(deep(12)[:44:44], 0, 0), verdict.TruncatedLabelStack},
		{"no bottom, whole entries", deep(12)[:44], verdict.NoBottomOfStack},
		{"D1 17 deep", deep(17), verdict.LabelStackTooDeep},
		{"D2 label 3 under a swap", stack(u, e(200, false, 64), e(3, true, 64)), verdict.ImplicitNull},
		{"D2 label 3 in the middle", stack(u, e(200, false, 64), e(3, false, 64), e(100, true, 64)), verdict.ImplicitNull},
		{"D3 bad IPv4 header checksum after a pop", stack(badSum, e(100, true, 64)), verdict.BadChecksum},
		{"D4 IPv4 total length 10", stack(withLen(10), e(100, true, 64)), verdict.MalformedIP},
		{"D4 IPv4 total length 19", stack(withLen(19), e(100, true, 64)), verdict.MalformedIP},
		{"D4 IPv4 total length 200 in 60", stack(withLen(200), e(100, true, 64)), verdict.MalformedIP},
		{"D4 IPv6 payload length 500 in 25", stack(v6, mpls.Entry{Label: 2, S: false, TTL: 64}, e(100, true, 64)), verdict.UnknownPayload},
		{"ttl 1", stack(u, e(100, true, 1)), verdict.TTLExpired},
		{"ttl 0 under an explicit null", stack(u, e(0, false, 0), e(100, true, 64)), verdict.TTLExpired},
		{"no entry", stack(u, e(999, true, 64)), verdict.NoILMEntry},
		{"router alert on top", stack(u, e(1, false, 64), e(100, true, 64)), verdict.ReservedLabel},
		{"GAL under a pop", stack(u, e(100, false, 64), e(13, true, 64)), verdict.ReservedLabel},
		{"ELI at the bottom under a pop", stack(u, e(100, false, 64), e(7, true, 64)), verdict.ReservedLabel},
		{"no such link", stack(u, e(202, true, 64)), verdict.NoEgressLink},
		{"not IP under a pop", stack([]byte{0x50, 0, 0, 0}, e(100, true, 64)), verdict.UnknownPayload},
		{"DF over the MTU after a push", stack(udp4(t, host, peer, 64, 96, true), e(201, true, 64)), verdict.MTUExceeded},
		{"truncated entry", []byte{0, 0x64, 0x40}, verdict.TruncatedLabelStack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := decide(t, tables(t, mpls.TTLUniform), tc.pkt)
			if v.Action != verdict.Drop || v.Reason != tc.want {
				t.Fatalf("%v %v, want drop %v", v.Action, v.Reason, tc.want)
			}
		})
	}
}

// TestLabelStackDepth: 16 entries are carried, 17 are not (the loop
// bound of the walk, RFC 3032's stack as the endpoint's default depth).
func TestLabelStackDepth(t *testing.T) {
	u := udp4(t, host, peer, 64, 60, true)
	var es []mpls.Entry
	for i := range 16 {
		es = append(es, e(200, i == 15, 64))
	}
	v := decide(t, tables(t, mpls.TTLUniform), stack(u, es...))
	if v.Action != verdict.Forward || v.NOut != 16 {
		t.Fatalf("16 entries: %v %v with %d out, want forward with 16", v.Action, v.Reason, v.NOut)
	}
}

// TestPopTTLModels: the uniform model copies the label TTL to the IP
// header on pop; the pipe model decrements the IP TTL itself and expires
// it at 1 (inner TTL 0 and 1 never reach the next host), and on
// a pop to a label decrements the exposed label.
func TestPopTTLModels(t *testing.T) {
	for _, tc := range []struct {
		model          mpls.TTLModel
		labelTTL, inIP uint8
		want           verdict.Action
		outIP          uint8
	}{
		{mpls.TTLUniform, 64, 9, verdict.Forward, 63},
		{mpls.TTLUniform, 64, 0, verdict.Forward, 63},
		{mpls.TTLPipe, 64, 9, verdict.Forward, 8},
		{mpls.TTLPipe, 64, 1, verdict.Drop, 0},
		{mpls.TTLPipe, 64, 0, verdict.Drop, 0},
		{mpls.TTLPipe, 1, 64, verdict.Drop, 0},
	} {
		ip := udp4(t, host, peer, tc.inIP, 60, true)
		v := decide(t, tables(t, tc.model), stack(ip, e(100, true, tc.labelTTL)))
		if v.Action != tc.want {
			t.Errorf("%v label TTL %d IP TTL %d: %v %v, want %v", tc.model, tc.labelTTL, tc.inIP, v.Action, v.Reason, tc.want)
			continue
		}
		if v.Action == verdict.Drop {
			if v.Reason != verdict.TTLExpired || v.ICMP != verdict.TimeExceeded || v.StackEnd != 4 {
				t.Errorf("%v IP TTL %d: %v icmp %v labels %d, want ttl_expired with a time exceeded quoting 1 label", tc.model, tc.inIP, v.Reason, v.ICMP, v.StackEnd/4)
			}
			continue
		}
		out := v.Apply(append(make([]byte, 14), stack(ip, e(100, true, tc.labelTTL))...), [6]byte{}, [6]byte{}, nil)
		if got := out[14+8]; got != tc.outIP || !checksumOK(out[14:34]) || v.Type != 0x0800 {
			t.Errorf("%v IP TTL %d: left with TTL %d (checksum ok %v, type %#x), want %d", tc.model, tc.inIP, got, checksumOK(out[14:34]), v.Type, tc.outIP)
		}
	}
	// Pop to a label.
	for _, m := range []mpls.TTLModel{mpls.TTLUniform, mpls.TTLPipe} {
		v := decide(t, tables(t, m), stack(udp4(t, host, peer, 64, 60, true), e(100, false, 64), e(700, true, 9)))
		want := uint8(63)
		if m == mpls.TTLPipe {
			want = 8
		}
		if v.Action != verdict.Forward || v.NOut != 1 || v.Out[0] != (mpls.Entry{Label: 700, S: true, TTL: want}) {
			t.Errorf("%v pop to a label: %v %v %+v, want [700 TTL %d]", m, v.Action, v.Reason, v.Out[:v.NOut], want)
		}
	}
}

// TestSwapAndTrim: a swap keeps TC and the labels below with S on the
// last one only; a popped packet's padding is cut (its IP length rules:
// an IPv6 payload length of 0 leaves none of its trailing bytes).
func TestSwapAndTrim(t *testing.T) {
	tb := tables(t, mpls.TTLUniform)
	u := udp4(t, host, peer, 64, 60, true)
	v := decide(t, tb, stack(u, mpls.Entry{Label: 201, TC: 5, TTL: 30}, e(700, true, 20)))
	want := []mpls.Entry{{Label: 300, TC: 5, TTL: 29}, {Label: 301, TC: 5, TTL: 29}, {Label: 700, S: true, TTL: 20}}
	if v.Action != verdict.Forward || v.NOut != 3 || v.Device != "small" || v.Via != via {
		t.Fatalf("swap: %v %v %+v on %s via %s", v.Action, v.Reason, v.Out[:v.NOut], v.Device, v.Via)
	}
	for i, w := range want {
		if v.Out[i] != w {
			t.Fatalf("swap: out %+v, want %+v", v.Out[:v.NOut], want)
		}
	}
	padded := append(append([]byte{}, u...), 0, 0, 0, 0, 0, 0)
	v = decide(t, tb, stack(padded, e(100, true, 64)))
	if v.Action != verdict.Forward || v.PayloadEnd-v.PayloadOff != len(u) {
		t.Fatalf("padded: %v %v %d bytes out, want %d", v.Action, v.Reason, v.PayloadEnd-v.PayloadOff, len(u))
	}
	ip6 := make([]byte, 63)
	ip6[0], ip6[6], ip6[7] = 0x60, 59, 9
	v = decide(t, tb, stack(ip6, e(0, false, 64), e(2, false, 64), e(100, true, 64)))
	if v.Action != verdict.Drop || v.Reason != verdict.ReservedLabel {
		// An explicit null under another is popped; IPv6 explicit null
		// is not the bottom here, and 100 is: the payload is v6 by its
		// nibble. Either way nothing of the 23 bytes may leave.
		if v.Action == verdict.Forward && v.PayloadEnd-v.PayloadOff != 40 {
			t.Fatalf("IPv6 payload length 0: %d bytes out, want 40", v.PayloadEnd-v.PayloadOff)
		}
	}
}

// TestFragmentOrTooBig: an IPv4 packet without DF that does not fit is
// fragmented; with DF, or IPv6, the sender is told the MTU left after the
// labels; a header whose checksum fails is never fragmented.
func TestFragmentOrTooBig(t *testing.T) {
	tb := tables(t, mpls.TTLUniform)
	v := decide(t, tb, stack(udp4(t, host, peer, 64, 96, false), e(201, true, 64)))
	if v.Action != verdict.Forward || v.FragmentMTU != 100-8 {
		t.Fatalf("no DF: %v %v fragment %d, want fragments of 92", v.Action, v.Reason, v.FragmentMTU)
	}
	v = decide(t, tb, stack(udp4(t, host, peer, 64, 96, true), e(201, true, 64)))
	if v.Reason != verdict.MTUExceeded || v.ICMP != verdict.TooBig || v.ICMPMTU != 92 || v.ICMPRefused {
		t.Fatalf("DF: %v icmp %v mtu %d refused %v, want mtu_exceeded and too big 92", v.Reason, v.ICMP, v.ICMPMTU, v.ICMPRefused)
	}
	bad := udp4(t, host, peer, 64, 96, false)
	bad[10] ^= 0xff
	v = decide(t, tb, stack(bad, e(201, true, 64)))
	if v.Reason != verdict.BadChecksum {
		t.Fatalf("bad header: %v, want bad_checksum", v.Reason)
	}
}

// TestICMPSources: no ICMP error goes to a source that names no single
// host, is link-local (one could never be delivered), is a connected
// subnet's network or broadcast address, or is the
// node's own; an ICMP error draws none.
func TestICMPSources(t *testing.T) {
	tb := tables(t, mpls.TTLUniform)
	for _, tc := range []struct {
		src     string
		refused bool
	}{
		{"172.16.20.20", false}, {"10.1.2.3", false},
		{"169.254.1.1", true}, {"172.16.20.0", true}, {"172.16.20.255", true}, {"172.16.20.21", true},
		{"0.0.0.0", true}, {"127.0.0.1", true}, {"224.0.0.1", true}, {"255.255.255.255", true}, {"240.0.0.1", true},
	} {
		v := decide(t, tb, stack(udp4(t, net.ParseIP(tc.src).To4(), peer, 64, 60, true), e(100, true, 1)))
		if v.Reason != verdict.TTLExpired || v.ICMP != verdict.TimeExceeded || v.ICMPRefused != tc.refused {
			t.Errorf("source %s: %v icmp %v refused %v, want ttl_expired, time exceeded, refused %v", tc.src, v.Reason, v.ICMP, v.ICMPRefused, tc.refused)
		}
	}
	// An ICMP error (time exceeded) gets none.
	icmpErr := udp4(t, host, peer, 64, 60, true)
	icmpErr[9] = 1
	icmpErr[20] = 11
	v := decide(t, tb, stack(icmpErr, e(100, true, 1)))
	if v.ICMP != verdict.NoICMP || !v.ICMPSilent {
		t.Errorf("ICMP error: icmp %v silent %v, want none", v.ICMP, v.ICMPSilent)
	}
}

// TestIPTransit: RFC 1812's rules on the plain IP path: the route's MTU
// when below the link's (a surviving planted bug ignored it), TTL,
// martian sources, destinations that are the stack's, no route, the push.
func TestIPTransit(t *testing.T) {
	tb := tables(t, mpls.TTLUniform)
	ip := func(src, dst string, ttl uint8, size int) []byte {
		return udp4(t, net.ParseIP(src).To4(), net.ParseIP(dst).To4(), ttl, size, true)
	}
	for _, tc := range []struct {
		name   string
		pkt    []byte
		action verdict.Action
		reason verdict.Reason
		icmp   verdict.ICMPKind
		mtu    uint32
	}{
		{"plain", ip("172.16.20.20", "10.1.1.1", 64, 100), verdict.Forward, 0, 0, 0},
		{"route MTU below the link's", ip("172.16.20.20", "10.20.1.1", 64, 600), verdict.Drop, verdict.MTUExceeded, verdict.TooBig, 576},
		{"at the route MTU", ip("172.16.20.20", "10.20.1.1", 64, 576), verdict.Forward, 0, 0, 0},
		{"link MTU", ip("172.16.20.20", "10.30.1.1", 64, 101), verdict.Drop, verdict.MTUExceeded, verdict.TooBig, 100},
		{"link MTU less the push", ip("172.16.20.20", "10.10.10.10", 64, 1500), verdict.Drop, verdict.MTUExceeded, verdict.TooBig, 1496},
		{"ttl 1", ip("172.16.20.20", "10.1.1.1", 1, 100), verdict.Drop, verdict.TTLExpired, verdict.TimeExceeded, 0},
		{"no route", ip("172.16.20.20", "192.0.2.1", 64, 100), verdict.Drop, verdict.NoRoute, verdict.Unreachable, 0},
		{"link-local source", ip("169.254.1.1", "10.1.1.1", 64, 100), verdict.Drop, verdict.MartianSource, 0, 0},
		{"own source", ip("172.16.20.21", "10.1.1.1", 64, 100), verdict.Drop, verdict.MartianSource, 0, 0},
		{"class E source", ip("240.0.0.1", "10.1.1.1", 64, 100), verdict.Drop, verdict.MartianSource, 0, 0},
		{"for the node", ip("172.16.20.20", "172.16.20.21", 64, 100), verdict.Local, 0, 0, 0},
		{"multicast", ip("172.16.20.20", "224.0.0.5", 64, 100), verdict.Local, 0, 0, 0},
		{"subnet broadcast", ip("172.16.20.20", "172.16.20.255", 64, 100), verdict.Local, 0, 0, 0},
	} {
		var v verdict.Verdict
		tb.DecideIP(false, tc.pkt, len(tc.pkt), &v)
		if v.Action != tc.action || v.Reason != tc.reason || v.ICMP != tc.icmp || v.ICMPMTU != tc.mtu {
			t.Errorf("%s: %v %v icmp %v %d, want %v %v icmp %v %d", tc.name, v.Action, v.Reason, v.ICMP, v.ICMPMTU, tc.action, tc.reason, tc.icmp, tc.mtu)
		}
	}
	// D3 on the plain path: a wrong header checksum is dropped.
	bad := ip("172.16.20.20", "10.1.1.1", 64, 100)
	bad[10] ^= 1
	var v verdict.Verdict
	tb.DecideIP(false, bad, len(bad), &v)
	if v.Reason != verdict.BadChecksum {
		t.Errorf("bad checksum: %v %v", v.Action, v.Reason)
	}
	// The push: labels under the route's TTL rule, the IP TTL decremented.
	p := ip("172.16.20.20", "10.10.10.10", 64, 100)
	tb.DecideIP(false, p, len(p), &v)
	if v.Did != verdict.Pushed || v.NOut != 1 || v.Out[0] != (mpls.Entry{Label: 500, S: true, TTL: 63}) || v.IPTTL != 63 {
		t.Errorf("push: did %v %+v IP TTL %d", v.Did, v.Out[:v.NOut], v.IPTTL)
	}
}

// TestReasonNames: every reason has a counter name of its own.
func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range verdict.Reasons() {
		n := r.String()
		if n == "unknown" || n == "none" || seen[n] || strings.ToLower(n) != n {
			t.Errorf("reason %d named %q", r, n)
		}
		seen[n] = true
	}
}

// FuzzDecide runs arbitrary bytes through the reference as a labelled
// frame and as IPv4 and IPv6 transit, in both TTL models, and checks what
// any verdict must be: no panic; a frame forwarded leaves with a label
// stack whose S bit is on its last entry only, no label 3, no more than
// MaxOut entries, within the egress MTU unless fragmented, its payload
// inside what was received; an IPv4 header it rewrites keeps the validity
// of its checksum; a drop names a reason.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{0, 0x64, 0x41, 0x40, 0x45, 0, 0, 20, 0, 0, 0x40, 0, 64, 17, 0, 0, 172, 16, 20, 20, 10, 10, 10, 10}, uint8(0))
	f.Add([]byte{0, 0xc8, 0x01, 0x40, 0, 0x03, 0x01, 0x40, 0x45}, uint8(1))
	f.Add([]byte{0, 0x6e, 0x01, 0x40, 0, 0, 0x21, 0x40, 0x45}, uint8(2))
	f.Fuzz(func(t *testing.T, pkt []byte, mode uint8) {
		model := mpls.TTLUniform
		if mode&1 != 0 {
			model = mpls.TTLPipe
		}
		tb := tables(t, model)
		var v verdict.Verdict
		switch mode >> 1 % 3 {
		case 0:
			tb.DecideLabelled(pkt, len(pkt), &v)
		case 1:
			if len(pkt) < 1 {
				return
			}
			tb.DecideIP(false, pkt, len(pkt), &v)
		default:
			if len(pkt) < 1 {
				return
			}
			tb.DecideIP(true, pkt, len(pkt), &v)
		}
		switch v.Action {
		case verdict.Drop:
			if v.Reason == verdict.NoReason {
				t.Fatalf("dropped without a reason")
			}
			return
		case verdict.Local:
			return
		}
		if v.NOut > verdict.MaxOut || v.PayloadOff < 0 || v.PayloadEnd > len(pkt) || v.PayloadOff > v.PayloadEnd {
			t.Fatalf("out %d labels, payload [%d, %d) of %d", v.NOut, v.PayloadOff, v.PayloadEnd, len(pkt))
		}
		for i := 0; i < v.NOut; i++ {
			if v.Out[i].S != (i == v.NOut-1) || v.Out[i].Label == mpls.LabelImplicitNull {
				t.Fatalf("label stack out %+v", v.Out[:v.NOut])
			}
		}
		mtu, ok := tb.Node.LinkMTU(v.Device)
		if !ok {
			t.Fatalf("forwarded to %q, no such link", v.Device)
		}
		if v.FragmentMTU == 0 && v.NOut*4+v.PayloadEnd-v.PayloadOff > int(mtu) {
			t.Fatalf("%d bytes over a %d-byte MTU", v.NOut*4+v.PayloadEnd-v.PayloadOff, mtu)
		}
		if v.FragmentMTU != 0 {
			return
		}
		frame := append(make([]byte, 14), pkt...)
		out := v.Apply(frame, [6]byte{}, [6]byte{}, nil)
		if v.TTLOff >= 0 && !v.IPv6 {
			in := pkt[v.TTLOff:]
			hl := int(in[0]&0xf) * 4
			at := 14 + v.NOut*4 + v.TTLOff - v.PayloadOff
			if checksumOK(in[:hl]) != checksumOK(out[at:at+hl]) {
				t.Fatalf("IPv4 header checksum validity changed: %x -> %x", in[:hl], out[at:at+hl])
			}
		}
	})
}

// BenchmarkDecide is the reference's cost per frame: a swap, a pop to IP
// and IP transit with a push, 0 allocations each.
func BenchmarkDecide(b *testing.B) {
	t := &testing.T{}
	tb := tables(t, mpls.TTLUniform)
	u := udp4(t, host, peer, 64, 1400, true)
	for _, bc := range []struct {
		name string
		pkt  []byte
		ip   bool
	}{
		{"swap", stack(u, e(200, true, 64)), false},
		{"pop_ip", stack(u, e(100, true, 64)), false},
		{"ip_push", udp4(t, host, net.IP{10, 10, 10, 5}, 64, 1400, true), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var v verdict.Verdict
			for b.Loop() {
				if bc.ip {
					tb.DecideIP(false, bc.pkt, len(bc.pkt), &v)
				} else {
					tb.DecideLabelled(bc.pkt, len(bc.pkt), &v)
				}
			}
			if v.Action != verdict.Forward {
				b.Fatalf("%v %v", v.Action, v.Reason)
			}
		})
	}
}
