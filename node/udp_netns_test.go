package node_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/node"
)

// udpSeed is the seed topology with ns0 -- ns1 as MPLS over UDP: our host
// in ns0 pushes label 100 on a udp link to our LSR in ns1, which pops it
// towards the kernel in ns2 over an afpacket link. The udp link's
// datagrams cross a veth between ns0's and ns1's kernels, which hold the
// underlay addresses u0 and u1.
type udpSeed struct {
	ns0, ns1, ns2 *netns.NS
	v0, v1        string // the underlay veth, in ns0 and ns1
	v12, v21      string
	u0, u1        netip.Addr
	n0, n1        *node.Node
}

// muVeth creates a veth pair named with this test's prefix, a in ns a and b
// in ns b, both up.
func muVeth(t *testing.T, a, b *netns.NS) (string, string) {
	t.Helper()
	na, nb := netns.Name("mua"), netns.Name("mub")
	if out, err := exec.Command("ip", "link", "add", na, "netns", a.Name(), "type", "veth", "peer", "name", nb, "netns", b.Name()).CombinedOutput(); err != nil {
		t.Fatalf("ip link add %s: %v: %s", na, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "-n", a.Name(), "link", "del", na).Run() })
	a.MustExec("ip", "link", "set", na, "up")
	b.MustExec("ip", "link", "set", nb, "up")
	return na, nb
}

func newUDPSeed(t *testing.T, v6 bool) *udpSeed {
	t.Helper()
	netns.SkipUnlessRoot(t)
	s := &udpSeed{ns0: netns.New(t, "mu0"), ns1: netns.New(t, "mu1"), ns2: netns.New(t, "mu2")}
	s.v0, s.v1 = muVeth(t, s.ns0, s.ns1)
	s.v12, s.v21 = muVeth(t, s.ns1, s.ns2)
	plen := "24"
	s.u0, s.u1 = netip.MustParseAddr("192.168.77.20"), netip.MustParseAddr("192.168.77.21")
	if v6 {
		plen = "64"
		s.u0, s.u1 = netip.MustParseAddr("2001:db8:77::20"), netip.MustParseAddr("2001:db8:77::21")
	}
	s.ns0.MustExec("ip", "addr", "add", s.u0.String()+"/"+plen, "dev", s.v0, "nodad")
	s.ns1.MustExec("ip", "addr", "add", s.u1.String()+"/"+plen, "dev", s.v1, "nodad")
	s.ns2.MustExec("ip", "addr", "add", "172.16.21.22/24", "dev", s.v21)
	s.ns2.MustExec("ip", "addr", "add", "10.10.10.10/32", "dev", "lo")
	s.ns2.MustExec("ip", "route", "add", "172.16.20.0/24", "via", "172.16.21.21")
	p0, p1 := netip.AddrPortFrom(s.u0, 6635), netip.AddrPortFrom(s.u1, 6635)
	conf0 := fmt.Sprintf(`link add mu0 type udp local %s remote %s
addr add 172.16.20.20/24 dev mu0
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21
route add 172.16.21.0/24 via 172.16.20.21
`, p0, p1)
	conf1 := fmt.Sprintf(`link add mu1 type udp local %s remote %s
link add %s type afpacket mtu %d
addr add 172.16.20.21/24 dev mu1
addr add 172.16.21.21/24 dev %[3]s
sysctl -w net.ipv4.ip_forward=1
-f mpls route add 100 via inet 172.16.21.22 dev %[3]s
`, p1, p0, s.v12, udpLinkMTU(v6))
	s.n0 = startNode(t, s.ns0, "ns0.conf", conf0)
	s.n1 = startNode(t, s.ns1, "ns1.conf", conf1)
	return s
}

// udpLinkMTU is a udp link's MTU at the default outer MTU of 1500: less
// the outer IP and UDP headers and 4 bytes for an explicit null. The
// LSR's afpacket link gets it too: the LSR splits the GSO frames the
// kernel sends it to its receiving link's MTU, and the pieces must fit
// the udp link they leave on.
func udpLinkMTU(v6 bool) int {
	if v6 {
		return 1500 - 40 - 8 - 4
	}
	return 1500 - 20 - 8 - 4
}

// lowerCounters returns the lower link's named counters of link name on n.
func lowerCounters(n *node.Node, name string) map[string]uint64 {
	for _, l := range n.Stack().Stats().Links {
		if l.Name == name {
			return l.Lower.Counters
		}
	}
	return nil
}

// udpDrops returns the named drops of link name on n.
func udpDrops(n *node.Node, name string) map[string]uint64 {
	for _, l := range n.Report().Links {
		if l.Name == name {
			return l.Drops
		}
	}
	return nil
}

// TestSeedUDP runs the seed topology over MPLS-in-UDP, IPv4 and IPv6
// underlay: 256 MiB each way with checksums checked (ns0's stack to the
// kernel in ns2 over label 100, and back unlabelled under an explicit
// null); tshark, told that port 6635 is MPLS, decodes the datagrams as
// MPLS in UDP with valid outer and inner IP and TCP; the source port
// varies by flow and stays fixed within one; datagrams from an
// unconfigured source, truncated and oversized ones are dropped and
// counted.
func TestSeedUDP(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		name := "ipv4"
		if v6 {
			name = "ipv6"
		}
		t.Run(name, func(t *testing.T) {
			s := newUDPSeed(t, v6)
			t.Run("to kernel", func(t *testing.T) { udpToKernel(t, s) })
			t.Run("from kernel", func(t *testing.T) { udpFromKernel(t, s) })
			t.Run("tshark", func(t *testing.T) { udpTshark(t, s) })
			t.Run("filter", func(t *testing.T) { udpFilter(t, s) })
			for _, n := range []*node.Node{s.n0, s.n1} {
				for _, l := range n.Report().Links {
					t.Logf("%s: rx %d tx %d gso packets %d drops %v", l.Name, l.RXFrames, l.TXFrames, l.GSOPackets, nonZero(l.Drops))
				}
			}
		})
	}
}

func udpToKernel(t *testing.T, s *udpSeed) {
	addr, result := kernelSink(t, s.ns2, "10.10.10.10:0")
	start := time.Now()
	c := dialFrom(t, s.n0, addr, time.Minute, s.n1)
	sum := send(t, c, transferSize, nil)
	r := <-result
	el := time.Since(start)
	if r.err != nil || r.n != transferSize || r.sum != sum {
		t.Fatalf("got %d bytes, sha256 %x, err %v; want %d bytes, sha256 %x", r.n, r.sum, r.err, transferSize, sum)
	}
	t.Logf("%d MiB in %v (%.0f Mbit/s)", transferSize>>20, el, float64(transferSize)*8/el.Seconds()/1e6)
	if sw := s.n1.Stats().Switch; sw.PoppedIP == 0 {
		t.Errorf("the LSR popped nothing: %+v", sw)
	}
	// The segments of ns0's GSO packets left as UDP GSO sends, and the
	// LSR read them coalesced (UDP GRO).
	if c := lowerCounters(s.n0, "mu0"); c["udp_tx_gso_sends"] == 0 {
		t.Errorf("ns0 sent no UDP GSO datagrams: %v", c)
	}
	if c := lowerCounters(s.n1, "mu1"); c["udp_rx_gro_reads"] == 0 {
		t.Errorf("ns1 read no coalesced datagrams: %v", c)
	}
	t.Logf("ns0 %v ns1 %v", lowerCounters(s.n0, "mu0"), lowerCounters(s.n1, "mu1"))
}

func udpFromKernel(t *testing.T, s *udpSeed) {
	ln, err := s.n0.Stack().ListenTCP(netip.MustParseAddrPort("172.16.20.20:5001"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := sumAccepted(ln, time.Now().Add(transferTimeout))
	c := kernelDial(t, s.ns2, "172.16.20.20:5001", 30*time.Second)
	start := time.Now()
	sum := send(t, c, transferSize, nil)
	var r sinkResult
	select {
	case r = <-ch:
	case <-time.After(transferTimeout):
		t.Fatal("the transfer did not end in time")
	}
	el := time.Since(start)
	if r.err != nil || r.n != transferSize || r.sum != sum {
		t.Fatalf("got %d bytes, sha256 %x, err %v; want %d bytes, sha256 %x", r.n, r.sum, r.err, transferSize, sum)
	}
	t.Logf("%d MiB in %v (%.0f Mbit/s)", transferSize>>20, el, float64(transferSize)*8/el.Seconds()/1e6)
}

// udpTshark captures the udp link's datagrams on ns1's end of the underlay
// while eight short flows run, with ns0's veth computing its checksums and
// segmenting itself (tx off), so that the capture holds the datagrams as a
// wire carries them.
func udpTshark(t *testing.T, s *udpSeed) {
	s.ns0.MustExec("ethtool", "-K", s.v0, "tx", "off")
	t.Cleanup(func() { _, _ = s.ns0.Exec("ethtool", "-K", s.v0, "tx", "on") })
	const flows, size, frames = 8, 96 << 10, 400
	c := startCapture(t, s.ns1, s.v1, "udp dst port 6635 and greater 1000", frames)
	for i := range flows {
		addr, result := kernelSink(t, s.ns2, "10.10.10.10:0")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		conn, err := s.n0.Stack().DialContext(ctx, "tcp", addr)
		cancel()
		if err != nil {
			t.Fatalf("flow %d: dial %s: %v", i, addr, err)
		}
		sum := send(t, conn, size, nil)
		if r := <-result; r.err != nil || r.n != size || r.sum != sum {
			t.Fatalf("flow %d: got %d bytes, err %v", i, r.n, r.err)
		}
	}
	c.fields("frame.number") // waits for the capture to end
	file := c.file
	fields := []string{"udp.srcport", "udp.dstport", "mpls.label", "mpls.bottom", "mpls.ttl", "ip.dst", "tcp.srcport",
		"ip.checksum.status", "udp.checksum.status", "tcp.checksum.status", "_ws.malformed", "_ws.expert.severity"}
	rows := decodeAs(t, file, fields)
	if len(rows) < frames {
		t.Fatalf("tshark decoded %d frames, want %d", len(rows), frames)
	}
	portOf := map[string]string{} // inner TCP source port: outer UDP source port
	ports := map[string]bool{}
	for i, r := range rows {
		f := map[string]string{}
		for j, name := range fields {
			f[name] = r[j]
		}
		ok := f["udp.dstport"] == "6635" && f["mpls.label"] == "100" && f["mpls.bottom"] == "1" && f["mpls.ttl"] == "64" &&
			f["tcp.checksum.status"] == "1" && f["udp.checksum.status"] == "1" && f["_ws.malformed"] == ""
		// ip.dst: the outer's (IPv4 underlay only) and the inner 10.10.10.10.
		ok = ok && strings.HasSuffix(f["ip.dst"], "10.10.10.10") && !strings.Contains(f["ip.checksum.status"], "0")
		if !ok {
			t.Errorf("frame %d: %v", i, f)
			continue
		}
		sp, ip := f["udp.srcport"], f["tcp.srcport"]
		if p, seen := portOf[ip]; seen && p != sp {
			t.Errorf("frame %d: flow from TCP port %s left from UDP port %s, earlier from %s", i, ip, sp, p)
		}
		portOf[ip] = sp
		ports[sp] = true
	}
	if len(portOf) < 4 || len(ports) < 2 {
		t.Errorf("%d flows left from %d UDP source ports (%v); want the flows spread", len(portOf), len(ports), portOf)
	}
	t.Logf("%d frames, %d flows from UDP source ports %v", len(rows), len(portOf), portOf)
}

// decodeAs decodes file with tshark, UDP port 6635 as MPLS (RFC 7510),
// checksums verified, and returns the fields of each frame.
func decodeAs(t *testing.T, file string, fields []string) [][]string {
	t.Helper()
	args := []string{"-r", file, "-d", "udp.port==6635,mpls", "-T", "fields", "-E", "occurrence=a",
		"-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("tshark", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		row := strings.Split(line, "\t")
		for len(row) < len(fields) {
			row = append(row, "")
		}
		rows = append(rows, row)
	}
	return rows
}

// udpFilter sends datagrams to ns0's udp link from ns1's kernel: a valid
// labelled packet from an address that is not the link's remote, and, from
// the remote's address (another port), a truncated and an oversized one.
// Each is dropped and counted under its name; none reaches the stack.
func udpFilter(t *testing.T, s *udpSeed) {
	plen := "/24"
	stranger := netip.MustParseAddr("192.168.77.99")
	if s.u0.Is6() {
		plen = "/64"
		stranger = netip.MustParseAddr("2001:db8:77::99")
	}
	s.ns1.MustExec("ip", "addr", "add", stranger.String()+plen, "dev", s.v1, "nodad")
	dst := netip.AddrPortFrom(s.u0, 6635)
	// A packet the link would take from its peer: label 100 over an
	// IPv4/UDP packet to 172.16.20.20.
	inner := mplstest.IPv4UDP(netip.MustParseAddrPort("172.16.21.22:9"), netip.MustParseAddrPort("172.16.20.20:9"), false, []byte("stranger"))
	labelled := append([]byte{0x00, 0x06, 0x41, 0x40}, inner...) // label 100, S, TTL 64
	sendFrom := func(from netip.Addr, payload []byte) {
		t.Helper()
		if err := s.ns1.Run(func() error {
			c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)), net.UDPAddrFromAddrPort(dst))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write(payload)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	before := udpDrops(s.n0, "mu0")
	delivered := s.n0.Stats().Links["mu0"].RXDelivered
	sendFrom(stranger, labelled)
	sendFrom(s.u1, []byte{0x00, 0x06})
	sendFrom(s.u1, append(labelled, make([]byte, 1600)...))
	want := map[string]uint64{"udp_rx_unknown_peer": 1, "udp_rx_truncated": 1, "udp_rx_oversized": 1}
	deadline := time.Now().Add(10 * time.Second)
	for {
		after := udpDrops(s.n0, "mu0")
		done := true
		for k, n := range want {
			if after[k]-before[k] != n {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drops before %v after %v; want one more of each of %v", nonZero(before), nonZero(after), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := s.n0.Stats().Links["mu0"].RXDelivered; got != delivered {
		t.Errorf("the stack got %d packets during the test, want none", got-delivered)
	}
}

// TestUDPSwapMixed: an LSR swaps between a udp link and an afpacket link,
// both ways. ns0 (host, udp link) pushes 100; ns1 swaps it to 200 onto its
// afpacket link towards ns2, a node that pops 200 to its own 10.10.10.10
// and serves; ns2 answers over label 300, which ns1 swaps to 301 onto the
// udp link and ns0 pops. 32 MiB each way with checksums checked.
func TestUDPSwapMixed(t *testing.T) {
	netns.SkipUnlessRoot(t)
	ns0, ns1, ns2 := netns.New(t, "mu3"), netns.New(t, "mu4"), netns.New(t, "mu5")
	v0, v1 := muVeth(t, ns0, ns1)
	v12, v21 := muVeth(t, ns1, ns2)
	ns0.MustExec("ip", "addr", "add", "192.168.78.20/24", "dev", v0)
	ns1.MustExec("ip", "addr", "add", "192.168.78.21/24", "dev", v1)
	n0 := startNode(t, ns0, "ns0.conf", `link add mu0 type udp local 192.168.78.20 remote 192.168.78.21
addr add 172.16.20.20/24 dev mu0
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21
route add 172.16.21.0/24 via 172.16.20.21
-f mpls route add 301 dev lo
`)
	n1 := startNode(t, ns1, "ns1.conf", fmt.Sprintf(`link add mu1 type udp local 192.168.78.21 remote 192.168.78.20
link add %[1]s type afpacket mtu 1468
addr add 172.16.20.21/24 dev mu1
addr add 172.16.21.21/24 dev %[1]s
sysctl -w net.ipv4.ip_forward=1
-f mpls route add 100 as to 200 via inet 172.16.21.22 dev %[1]s
-f mpls route add 300 as to 301 via inet 172.16.20.20 dev mu1
`, v12))
	n2 := startNode(t, ns2, "ns2.conf", fmt.Sprintf(`link add %[1]s type afpacket mtu 1468
addr add 172.16.21.22/24 dev %[1]s
addr add 10.10.10.10/32 dev lo
-f mpls route add 200 dev lo
route add 172.16.20.20/32 encap mpls 300 via inet 172.16.21.21
`, v21))
	const size = 32 << 20
	for _, dir := range []struct {
		name     string
		from, to *node.Node
		dst      string
	}{{"to ns2", n0, n2, "10.10.10.10:5001"}, {"to ns0", n2, n0, "172.16.20.20:5002"}} {
		t.Run(dir.name, func(t *testing.T) {
			ln, err := dir.to.Stack().ListenTCP(netip.MustParseAddrPort(dir.dst))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			ch := sumAccepted(ln, time.Now().Add(time.Minute))
			c := dialFrom(t, dir.from, dir.dst, 30*time.Second)
			sum := send(t, c, size, nil)
			select {
			case r := <-ch:
				if r.err != nil || r.n != size || r.sum != sum {
					t.Fatalf("got %d bytes, err %v, sums equal %v", r.n, r.err, r.sum == sum)
				}
			case <-time.After(time.Minute):
				t.Fatal("the transfer did not end in a minute")
			}
		})
	}
	if sw := n1.Stats().Switch; sw.Swapped == 0 {
		t.Errorf("ns1 swapped nothing: %+v", sw)
	}
	// ns0 popped 301, the label ns1 swapped onto the udp link.
	if st := n0.Stats().Links["mu0"]; st.ILMHits == 0 {
		t.Errorf("ns0 received no labelled packet on mu0: %+v", st)
	}
	for _, n := range []*node.Node{n0, n1, n2} {
		for _, l := range n.Report().Links {
			if d := nonZero(l.Drops); len(d) != 0 {
				t.Logf("%s drops %v", l.Name, d)
			}
		}
	}
}
