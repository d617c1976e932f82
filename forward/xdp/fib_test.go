package xdp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
)

// ipFrame builds Ethernet to dst carrying the IP packet ip.
func ipFrame(dst []byte, ip []byte) []byte {
	b := make([]byte, 14, 14+len(ip))
	copy(b, dst)
	copy(b[6:], peerMAC)
	typ := uint16(0x0800)
	if ip[0]>>4 == 6 {
		typ = 0x86dd
	}
	binary.BigEndian.PutUint16(b[12:], typ)
	return append(b, ip...)
}

// fibProgram loads the program with lo as its link and routes synced
// (with the special ranges and the local address 10.0.0.9).
func fibProgram(t *testing.T, routes ...Route) *Program {
	t.Helper()
	p := newTestProgram(t, mpls.TTLUniform, true)
	routes = append(routes, SpecialRoutes()...)
	routes = append(routes, Route{Prefix: netip.MustParsePrefix("10.0.0.9/32"), Kind: RouteLocal})
	if _, err := p.SyncFIB(routes); err != nil {
		t.Fatal(err)
	}
	return p
}

func fwdRoute(pfx string, labels ...mpls.Label) Route {
	return Route{Prefix: netip.MustParsePrefix(pfx), Kind: RouteForward, Labels: labels, Egress: loIndex, NextHopMAC: nhMAC}
}

// TestIPv4Transit: a plain IPv4 packet to a FIB prefix leaves with TTL - 1,
// a checksum that verifies (computed independently), the rest unchanged
// (RFC 1812 §5.3.1). Planted bug: no TTL decrement (fails here).
func TestIPv4Transit(t *testing.T) {
	p := fibProgram(t, fwdRoute("10.10.0.0/16"), Route{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Kind: RouteNotCarried})
	ip := ipv4(t, 64, 100)
	ret, out := run(t, p, ipFrame(ourMAC, ip))
	if ret != xdpRedirect || len(out) != 14+len(ip) {
		t.Fatalf("action %d len %d; counters %v", ret, len(out), mustCounters(t, p))
	}
	wantEthernet(t, out, 0x0800)
	got := out[14:]
	if got[8] != 63 || !ipv4ChecksumOK(got) {
		t.Fatalf("TTL %d checksum ok %v", got[8], ipv4ChecksumOK(got))
	}
	want := bytes.Clone(ip)
	want[8] = 63
	copy(want[10:12], got[10:12])
	if !bytes.Equal(got, want) {
		t.Fatal("packet changed beyond TTL and checksum")
	}
	if counter(t, p, IPForwarded) != 1 || counter(t, p, IPPushed) != 0 {
		t.Fatalf("counters %v", mustCounters(t, p))
	}
	t.Logf("verifier: %d instructions processed", p.VerifiedInstructions())
}

// TestIPv4TransitTrimsPadding: Ethernet padding after the IP packet is
// not forwarded (userspace sends the IP packet alone).
func TestIPv4TransitTrimsPadding(t *testing.T) {
	p := fibProgram(t, fwdRoute("10.10.0.0/16"))
	ip := ipv4(t, 64, 30)
	in := append(ipFrame(ourMAC, ip), make([]byte, 16)...)
	ret, out := run(t, p, in)
	if ret != xdpRedirect || len(out) != 14+len(ip) {
		t.Fatalf("action %d len %d, want redirect of %d", ret, len(out), 14+len(ip))
	}
}

// TestIPv6Transit: hop limit decremented, nothing else changed.
func TestIPv6Transit(t *testing.T) {
	p := fibProgram(t, fwdRoute("2001:db8::/64"))
	ip := ipv6(t, 9)
	ret, out := run(t, p, ipFrame(ourMAC, ip))
	if ret != xdpRedirect {
		t.Fatalf("action %d; counters %v", ret, mustCounters(t, p))
	}
	wantEthernet(t, out, 0x86dd)
	want := bytes.Clone(ip)
	want[7] = 8
	if !bytes.Equal(out[14:], want) {
		t.Fatalf("packet %x, want %x", out[14:], want)
	}
}

// TestLERPush: one and two labels pushed on IPv4 (label TTL from the
// decremented IP TTL, uniform model; S on the last only; 0x8847), and
// a route's own label TTL (pipe) used as given; IPv6 under a label (6PE).
func TestLERPush(t *testing.T) {
	pipe := fwdRoute("10.10.20.0/24", 300, 400)
	pipe.LabelTTL = 255
	p := fibProgram(t, fwdRoute("10.10.0.0/16", 200), pipe, fwdRoute("2001:db8::/64", 600))
	ip := ipv4(t, 64, 100)
	ip2 := bytes.Clone(ip)
	ip2[18], ip2[19] = 20, 11 // 10.10.20.11: the two-label route
	ip2[10], ip2[11] = 0, 0
	binary.BigEndian.PutUint16(ip2[10:], ^checksum.Checksum(ip2[:20], 0))
	for _, c := range []struct {
		ip     []byte
		labels []mpls.Entry
	}{
		{ipv4(t, 64, 100), []mpls.Entry{{Label: 200, S: true, TTL: 63}}},
		{ip2, []mpls.Entry{{Label: 300, TTL: 255}, {Label: 400, S: true, TTL: 255}}},
		{ipv6(t, 9), []mpls.Entry{{Label: 600, S: true, TTL: 8}}},
	} {
		ret, out := run(t, p, ipFrame(ourMAC, c.ip))
		n := 4 * len(c.labels)
		if ret != xdpRedirect || len(out) != 14+n+len(c.ip) {
			t.Fatalf("action %d len %d; counters %v", ret, len(out), mustCounters(t, p))
		}
		wantEthernet(t, out, 0x8847)
		for i, want := range c.labels {
			if got := mpls.DecodeEntry(out[14+4*i:]); got != want {
				t.Fatalf("label %d: %+v, want %+v", i, got, want)
			}
		}
		inner := out[14+n:]
		if inner[0]>>4 == 4 && (inner[8] != c.ip[8]-1 || !ipv4ChecksumOK(inner)) {
			t.Fatalf("inner TTL %d checksum ok %v", inner[8], ipv4ChecksumOK(inner))
		}
	}
	if counter(t, p, IPPushed) != 3 || counter(t, p, IPForwarded) != 3 {
		t.Fatalf("counters %v", mustCounters(t, p))
	}
}

// TestIPPassedUp: every IP packet the program does not carry leaves it
// unchanged (XDP_PASS) under its reason.
func TestIPPassedUp(t *testing.T) {
	unresolved := fwdRoute("10.30.0.0/16")
	unresolved.NextHopMAC = nil
	small := fwdRoute("10.40.0.0/16")
	small.MTU = 99
	p := fibProgram(t, fwdRoute("10.10.0.0/16"), fwdRoute("10.10.10.0/24", 1, 2, 3, 4, 5),
		Route{Prefix: netip.MustParsePrefix("10.20.0.0/16"), Kind: RouteECMP}, unresolved, small,
		Route{Prefix: netip.MustParsePrefix("10.50.0.0/16"), Kind: RouteOnLink})
	with := func(ttl uint8, dst, src [4]byte, size int) []byte {
		ip := ipv4(t, ttl, size)
		copy(ip[16:], dst[:])
		copy(ip[12:], src[:])
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:20], 0))
		return ipFrame(ourMAC, ip)
	}
	src := [4]byte{10, 0, 0, 1}
	cases := []struct {
		name  string
		frame []byte
		r     Reason
	}{
		{"ttl 1", with(1, [4]byte{10, 10, 1, 1}, src, 100), PassTTLExpired},
		{"local", with(64, [4]byte{10, 0, 0, 9}, src, 100), PassLocal},
		{"multicast", with(64, [4]byte{224, 0, 0, 5}, src, 100), PassNotTransit},
		{"martian own source", with(64, [4]byte{10, 10, 1, 1}, [4]byte{10, 0, 0, 9}, 100), PassMartianSource},
		{"martian loopback source", with(64, [4]byte{10, 10, 1, 1}, [4]byte{127, 0, 0, 1}, 100), PassMartianSource},
		{"no route", with(64, [4]byte{192, 168, 1, 1}, src, 100), PassNoRoute},
		{"ecmp", with(64, [4]byte{10, 20, 1, 1}, src, 100), PassECMP},
		{"five labels", with(64, [4]byte{10, 10, 10, 1}, src, 100), PassFIBNotCarried},
		{"unresolved", with(64, [4]byte{10, 30, 1, 1}, src, 100), PassNoNeighbor},
		{"on-link", with(64, [4]byte{10, 50, 1, 1}, src, 100), PassNoNeighbor},
		{"route mtu", with(64, [4]byte{10, 40, 1, 1}, src, 100), PassMTUExceeded},
		{"link mtu", with(64, [4]byte{10, 10, 1, 1}, src, testMTU+1), PassMTUExceeded},
		{"truncated", with(64, [4]byte{10, 10, 1, 1}, src, 100)[:60], PassMalformedIP},
		{"header cut short", with(64, [4]byte{10, 10, 1, 1}, src, 100)[:14+19], PassUnknownPayload},
		{"not to us", append(append([]byte{}, nhMAC...), with(64, [4]byte{10, 10, 1, 1}, src, 100)[6:]...), PassNotMPLS},
	}
	for _, c := range cases {
		before := counter(t, p, c.r)
		ret, out := run(t, p, c.frame)
		if ret != xdpPass || !bytes.Equal(out, c.frame) {
			t.Errorf("%s: action %d, frame changed %v; want pass unchanged", c.name, ret, !bytes.Equal(out, c.frame))
		}
		if counter(t, p, c.r) != before+1 {
			t.Errorf("%s: %s not counted; counters %v", c.name, c.r, mustCounters(t, p))
		}
	}
	// At exactly the MTU it is forwarded.
	if ret, _ := run(t, p, with(64, [4]byte{10, 10, 1, 1}, src, testMTU)); ret != xdpRedirect {
		t.Errorf("packet of exactly the MTU: action %d", ret)
	}
}

// TestSyncFIBCap: a family over the FIB's capacity is carried by none of
// its routes (a /0 marker), so no packet takes a shorter prefix than
// userspace would (here 10.10.0.0/16 would otherwise carry 10.10.10.10,
// whose /24 did not fit), while the other family still is; SyncFIB's
// deletions leave the map exactly as asked. Planted bug: capFIB keeping
// the first routes up to the capacity: the frame is forwarded by the /16.
func TestSyncFIBCap(t *testing.T) {
	skipUnlessBPF(t)
	const capacity = 4
	p := newFIBTestProgram(t, capacity)
	routes := []Route{fwdRoute("10.10.0.0/16"), fwdRoute("2001:db8::/64")}
	for i := range capacity {
		routes = append(routes, fwdRoute(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 10, byte(10 + i), 0}), 24).String()))
	}
	st, err := p.SyncFIB(routes)
	if err != nil || st.Carried != 1 || st.Dropped4 != capacity+1 || st.Dropped6 != 0 {
		t.Fatalf("SyncFIB over capacity: %+v, %v; want 1 carried (the IPv6 route), %d IPv4 routes dropped", st, err, capacity+1)
	}
	if ret, _ := run(t, p, ipFrame(ourMAC, ipv4(t, 64, 100))); ret != xdpPass || counter(t, p, PassFIBNotCarried) != 1 {
		t.Fatalf("IPv4 over capacity: action %d; counters %v", ret, mustCounters(t, p))
	}
	if ret, _ := run(t, p, ipFrame(ourMAC, ipv6(t, 9))); ret != xdpRedirect {
		t.Fatalf("IPv6 under capacity: action %d; counters %v", ret, mustCounters(t, p))
	}
	if st, err := p.SyncFIB([]Route{fwdRoute("10.11.0.0/16")}); err != nil || st.Carried != 1 || st.Dropped4 != 0 {
		t.Fatalf("SyncFIB: %+v, %v", st, err)
	}
	if ret, _ := run(t, p, ipFrame(ourMAC, ipv4(t, 64, 100))); ret != xdpPass || counter(t, p, PassNoRoute) != 1 {
		t.Fatalf("deleted route: action %d; counters %v", ret, mustCounters(t, p))
	}
	if _, err := LoadFIB(mpls.TTLUniform, 0); err == nil {
		t.Error("LoadFIB with capacity 0: no error")
	}
}
