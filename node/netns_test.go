package node_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/internal/testkit/hashedstream"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/planetest"
	"github.com/mplsnode/mplsnode/internal/testkit/proc"
	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// startNode parses conf and starts a node on a thread inside ns, so that
// its AF_PACKET sockets bind in ns.
func startNode(t *testing.T, ns *netns.NS, name, conf string) *node.Node {
	t.Helper()
	return startNodeWith(t, ns, name, conf, node.Options{})
}

// startNodeWith is startNode with options.
func startNodeWith(t *testing.T, ns *netns.NS, name, conf string, opts node.Options) *node.Node {
	t.Helper()
	cfg, err := config.Parse(name, strings.NewReader(conf))
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, conf)
	}
	var n *node.Node
	if err := ns.Run(func() (err error) {
		n, err = node.New(cfg, opts)
		return err
	}); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// transferTimeout bounds every transfer of these tests: the accept and all
// reads of kernelSink, all writes of send. A transfer that stalls fails
// when it expires, with the bytes it saw, instead of hanging until go
// test's -timeout (whose panic skips t.Cleanup and so used to leave the
// test's namespaces behind).
const transferTimeout = 3 * time.Minute

// kernelSink listens on addr with a kernel socket inside ns and returns the
// listener's address and a channel that yields the SHA-256 and length of
// the first connection's bytes; it always yields within transferTimeout
// (with a timeout error and the bytes read so far if the transfer stalls).
type sinkResult struct {
	sum [32]byte
	n   int64
	err error
}

func kernelSink(t *testing.T, ns *netns.NS, addr string) (string, <-chan sinkResult) {
	t.Helper()
	var ln net.Listener
	if err := ns.Run(func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	deadline := time.Now().Add(transferTimeout)
	ln.(*net.TCPListener).SetDeadline(deadline)
	return ln.Addr().String(), sumAccepted(ln, deadline)
}

// sumAccepted accepts ln's first connection and yields the SHA-256 and
// length of the bytes it carries until EOF, reading until deadline.
func sumAccepted(ln net.Listener, deadline time.Time) <-chan sinkResult {
	ch := make(chan sinkResult, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- sinkResult{err: err}
			return
		}
		defer c.Close()
		c.SetReadDeadline(deadline)
		h := sha256.New()
		n, err := io.Copy(h, c)
		var r sinkResult
		copy(r.sum[:], h.Sum(nil))
		r.n, r.err = n, err
		ch <- r
	}()
	return ch
}

// capture runs tshark in ns on dev with a capture filter, writing count
// frames to a file; fields returns the fields of the captured frames.
type capture struct {
	t    *testing.T
	cmd  *exec.Cmd
	file string
	out  tshark.Stderr
}

func startCapture(t *testing.T, ns *netns.NS, dev, filter string, count int) *capture {
	t.Helper()
	return startTshark(t, ns, dev, "-c", fmt.Sprint(count), "-f", filter)
}

// startTshark starts tshark in ns capturing on dev with more arguments
// args into a file of t's, killed when t ends if it has not exited, and
// waits until it captures.
func startTshark(t *testing.T, ns *netns.NS, dev string, args ...string) *capture {
	t.Helper()
	tshark.Need(t)
	c := &capture{t: t, file: filepath.Join(t.TempDir(), dev+".pcap")}
	argv := append([]string{"netns", "exec", ns.Name(), "tshark", "-i", dev}, args...)
	c.cmd = exec.Command("ip", append(argv, "-w", c.file)...)
	c.cmd.Stderr = &c.out
	proc.Start(t, c.cmd)
	// Not "Capturing on": tshark prints it before dumpcap opens the socket.
	deadline := time.Now().Add(30 * time.Second)
	for !tshark.Ready(c.out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("tshark did not start: %s", c.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// fields waits for the capture to end and returns the given fields of each
// frame, one []string per frame.
func (c *capture) fields(fields ...string) [][]string {
	c.t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			c.t.Fatalf("tshark: %v: %s", err, c.out.String())
		}
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-done
		c.t.Fatalf("tshark captured too few frames: %s", c.out.String())
	}
	return tshark.Fields(c.t, c.file, fields...)
}

// dialFrom dials addr over TCP from n's stack, giving up after within;
// a failure names n's stats and those of the others on the path.
func dialFrom(t *testing.T, n *node.Node, addr string, within time.Duration, others ...*node.Node) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	c, err := n.Stack().DialContext(ctx, "tcp", addr)
	if err != nil {
		stats := []node.Stats{n.Stats()}
		for _, o := range others {
			stats = append(stats, o.Stats())
		}
		t.Fatalf("dial %s: %v; stats of the nodes on the path %+v", addr, err, stats)
	}
	return c
}

// send writes size pseudorandom bytes to c in 64 KiB writes, closes it and
// returns their SHA-256. mid, if not nil, runs once halfway.
func send(t *testing.T, c net.Conn, size int64, mid func()) [32]byte {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(transferTimeout))
	sum, err := hashedstream.Send(c, size, [32]byte{1, 2, 3}, func(sent int64) {
		if mid != nil && sent >= size/2 {
			mid()
			mid = nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// seed is the seed topology: ns0 (node, host) -- ns1 (node, LSR) -- ns2
// (the kernel, 10.10.10.10 on lo).
type seed struct {
	*line
	conf0, conf1 string
	n0, n1       *node.Node
}

func newSeed(t *testing.T) *seed {
	t.Helper()
	return newSeedWith(t, nil)
}

// newSeedWith is newSeed with options for the nodes in ns0 and ns1 that
// opts returns once the seed's namespaces and veths exist (nil: none).
func newSeedWith(t *testing.T, opts func(*seed) (opts0, opts1 node.Options)) *seed {
	t.Helper()
	return newSeedOf(t, "afpacket", "", opts)
}

// newSeedLinks is newSeedWith with words added to every link line of both
// nodes ("mode ring", "queues 2 mode mmsg").
func newSeedLinks(t *testing.T, linkWords string, opts func(*seed) (opts0, opts1 node.Options)) *seed {
	t.Helper()
	return newSeedOf(t, "afpacket", linkWords, opts)
}

// newSeedOf is newSeedWith with the nodes' links of linkType (afpacket or
// xdp), linkWords added to every link line.
func newSeedOf(t *testing.T, linkType, linkWords string, opts func(*seed) (opts0, opts1 node.Options)) *seed {
	t.Helper()
	s := newSeedNets(t, linkType, linkWords)
	var opts0, opts1 node.Options
	if opts != nil {
		opts0, opts1 = opts(s)
	}
	s.start(t, "", opts0, opts1)
	return s
}

// newSeedNets builds the seed's namespaces and links and ns2's kernel,
// and writes the nodes' configs, without starting the nodes (start).
func newSeedNets(t *testing.T, linkType, linkWords string) *seed {
	t.Helper()
	s := &seed{line: newLine(t, "s")}
	s.seedKernel()
	if linkType == "xdp" {
		// An AF_XDP link cannot tell a partial checksum from a wrong one:
		// its kernel peer must send full checksums (link/xdp's doc).
		s.ns2.MustExec("ethtool", "-K", s.v21, "tx", "off")
	}
	s.conf0 = fmt.Sprintf(`link add %[1]s type %[2]s
addr add 172.16.20.20/24 dev %[1]s
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 mtu lock 1496
route add 172.16.21.0/24 via 172.16.20.21 mtu lock 1496
`, s.v01, linkType)
	s.conf1 = fmt.Sprintf(`link add %[1]s type %[3]s
link add %[2]s type %[3]s
addr add 172.16.20.21/24 dev %[1]s
addr add 172.16.21.21/24 dev %[2]s
sysctl -w net.ipv4.ip_forward=1
-f mpls route add 100 via inet 172.16.21.22 dev %[2]s
`, s.v10, s.v12, linkType)
	if linkWords != "" {
		s.conf0 = strings.ReplaceAll(s.conf0, " type "+linkType+"\n", " type "+linkType+" "+linkWords+"\n")
		s.conf1 = strings.ReplaceAll(s.conf1, " type "+linkType+"\n", " type "+linkType+" "+linkWords+"\n")
	}
	return s
}

// start starts the seed's nodes on t (they close when t ends), ns1's with
// conf1 appended to its config, and checks that the kernel holds no
// address where they own the interface.
func (s *seed) start(t *testing.T, conf1 string, opts0, opts1 node.Options) {
	t.Helper()
	s.n0 = startNodeWith(t, s.ns0, "ns0.conf", s.conf0, opts0)
	s.n1 = startNodeWith(t, s.ns1, "ns1.conf", s.conf1+conf1, opts1)
	// ARCHITECTURE "Test hosts": the kernel holds no IPv4 address where
	// mplsnode owns the interface.
	for _, c := range []struct {
		ns  *netns.NS
		dev string
	}{{s.ns0, s.v01}, {s.ns1, s.v10}, {s.ns1, s.v12}} {
		if out := c.ns.MustExec("ip", "-4", "addr", "show", "dev", c.dev); strings.Contains(out, "inet ") {
			t.Fatalf("kernel holds an IPv4 address on %s: %s", c.dev, out)
		}
	}
}

// nonZero returns the non-zero counters of m.
func nonZero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// transferSize is the seed transfer: 256 MiB, as the issue asks.
const transferSize = 256 << 20

func TestSeedTopology(t *testing.T) {
	s := newSeedLinks(t, os.Getenv("SEEDLINK"), nil)
	addr, result := kernelSink(t, s.ns2, "10.10.10.10:0")
	labelled := startCapture(t, s.ns1, s.v10, "mpls", 20)
	popped := startCapture(t, s.ns2, s.v21, "tcp and dst host 10.10.10.10 and greater 1000", 20)

	start := time.Now()
	c := dialFrom(t, s.n0, addr, 3*time.Minute, s.n1)
	sum := send(t, c, transferSize, nil)
	r := <-result
	el := time.Since(start)
	if r.err != nil || r.n != transferSize || r.sum != sum {
		t.Fatalf("got %d bytes, sha256 %x, err %v; want %d bytes, sha256 %x", r.n, r.sum, r.err, transferSize, sum)
	}
	t.Logf("%d MiB in %v (%.0f Mbit/s); label switch %+v", transferSize>>20, el,
		float64(transferSize)*8/el.Seconds()/1e6, s.n1.Stats().Switch)
	for _, n := range []*node.Node{s.n0, s.n1} {
		for _, l := range n.Report().Links {
			t.Logf("%s: mode %s queues %d rx %d tx %d blocks %d ring full %d drops %v", l.Name, l.LinkMode, l.Queues,
				l.RXFrames, l.TXFrames, l.RXBlocks, l.TXRingFull, nonZero(l.Drops))
		}
	}
	// The LSR pops towards the kernel over AF_PACKET with GSOFrames: the
	// segments of each receive batch leave coalesced into GSO frames,
	// which the kernel took whole (the SHA-256 above).
	if sw := s.n1.Stats().Switch; sw.Coalesced == 0 {
		t.Errorf("the LSR coalesced no segment: %+v", sw)
	}
	// The plain return path (the kernel's ACKs to ns0) is transit IP: the
	// LSR's forwarding plane routed it, and gVisor's IP layer forwarded
	// nothing (checked by planting the old wiring, gVisor forwarding with
	// no IPForwarder: ip_forwarded stays 0 and the stack sends packets).
	if sw, ip := s.n1.Stats().Switch, s.n1.Report().IP; sw.IPForwarded == 0 || ip.PacketsSent != 0 {
		t.Errorf("return path: switch ip_forwarded %d, stack IP sent %d; want > 0 and 0", sw.IPForwarded, ip.PacketsSent)
	}

	for i, row := range labelled.fields("mpls.label", "mpls.bottom", "mpls.ttl") {
		// ns0 originates: uniform model, label TTL = IP TTL = 64.
		if want := []string{"100", "1", "64"}; strings.Join(row, ",") != strings.Join(want, ",") {
			t.Errorf("frame %d on %s: got label,S,TTL %v, want %v", i, s.v10, row, want)
		}
	}
	for i, row := range popped.fields("ip.ttl", "mpls.label") {
		// Popped by ns1 with the uniform model: MPLS TTL 64 - 1 = 63.
		if want := []string{"63", ""}; strings.Join(row, ",") != strings.Join(want, ",") {
			t.Errorf("frame %d on %s: got ip.ttl,mpls.label %v, want %v", i, s.v21, row, want)
		}
	}
}

func TestSeedReloadUnderTraffic(t *testing.T) {
	s := newSeed(t)
	addr, result := kernelSink(t, s.ns2, "10.10.10.10:0")
	c := dialFrom(t, s.n0, addr, 3*time.Minute)
	const size = 64 << 20
	mid := func() {
		// A good reload of both nodes: same paths, one more label route.
		cfg1, err := config.Parse("ns1.conf", strings.NewReader(s.conf1+"-f mpls route add 300 via inet 172.16.21.22\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.n1.Reload(cfg1); err != nil {
			t.Errorf("good reload of ns1: %v", err)
		}
		cfg0, _ := config.Parse("ns0.conf", strings.NewReader(s.conf0))
		if err := s.n0.Reload(cfg0); err != nil {
			t.Errorf("good reload of ns0: %v", err)
		}
		// Broken ones: an MTU that does not fit the label, a changed link.
		bad0, err := config.Parse("ns0.conf", strings.NewReader(strings.Replace(s.conf0, "mtu lock 1496\n", "mtu lock 1500\n", 1)))
		if err != nil {
			t.Fatal(err)
		}
		err = s.n0.Reload(bad0)
		if err == nil || !strings.HasPrefix(err.Error(), "ns0.conf:3:11: route 10.10.10.10/32: mtu 1500 does not fit") {
			t.Errorf("bad MTU reload: got %v, want ns0.conf:3:11: route 10.10.10.10/32: mtu 1500 does not fit...", err)
		}
		bad1, _ := config.Parse("ns1.conf", strings.NewReader(strings.Replace(s.conf1, "afpacket\n", "afpacket mtu 1400\n", 1)))
		if err := s.n1.Reload(bad1); err == nil || !strings.Contains(err.Error(), "ns1.conf:1:1: link "+s.v10+" changed: a restart is needed") {
			t.Errorf("link change reload: got %v, want a restart error at ns1.conf:1:1", err)
		}
	}
	sum := send(t, c, size, mid)
	r := <-result
	if r.err != nil || r.n != size || r.sum != sum {
		t.Fatalf("got %d bytes, sha256 %x, err %v; want %d bytes, sha256 %x", r.n, r.sum, r.err, size, sum)
	}
	routes := s.n0.Stack().Routes()
	if len(routes) != 2 || routes[0].MTU != 1496 {
		t.Errorf("after the rejected reload got routes %+v, want the old ones (mtu 1496)", routes)
	}
	if n := s.n1.Stack().Tables().ILM().Len(); n != 4 { // 100, 300 and the two explicit nulls
		t.Errorf("got %d ILM entries on ns1, want 4", n)
	}
}

// TestSeedTTLExpiry is the seed's LSR (ns1) popping label 100 to IP and
// answering expired labels, in both forwarding modes (issue 14: in
// mode=xdp the program pops, and passes TTL 1 up to userspace, which
// builds the ICMP).
//
// In each mode: ns0's node pushes TTL 1 on 10.10.10.10 (encap mpls 100 ttl
// 1) and dials: ns1 must answer time exceeded with label 100 in an RFC
// 4950 object (tshark's decode). Then probes from ns0's kernel end of its
// link: UDP under label 100 with TTL 64 (popped to ns2: IP TTL 63, good
// checksums) and with TTL 1 (ICMP time exceeded back to ns0), in three
// sizes. Both modes must put the same frames on ns1-ns2 and ns1-ns0
// (tshark decodes, MD5 of each frame) and move the same counters
// (popped_ip, ttl_expired, icmp_sent), the pops carried by the program
// and the expiries passed up by it in mode=xdp. Planted bugs: the
// program's pop leaving the IP TTL alone (bpf/lsr.c, make bpf: mode=xdp's
// popped frames differ); the program forwarding TTL 1 (its ttl <= 1 check
// made ttl < 1: no ICMP, the probe's counters and frames differ).
func TestSeedTTLExpiry(t *testing.T) {
	wiretest.Need(t)
	s := newSeedNets(t, "afpacket", "")
	wiretest.GROOn(t, s.ns2, s.v21)
	const probePort = 7777
	udpSink(t, s.ns2, probePort)
	results := map[string]*planetest.Result{}
	for _, m := range planetest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			s.start(t, m.Conf(), node.Options{}, node.Options{})
			seedTTLExpiryDial(t, s)

			// Probes from ns0's kernel end of its link into ns1.
			if m.XDP {
				planetest.WaitXDPEntries(t, s.n1.Report, 1)
			}
			lsrMAC, srcMAC := wiretest.MAC(t, s.ns1, s.v10), wiretest.MAC(t, s.ns0, s.v01)
			var frames [][]byte
			// Expiring datagrams under 128 bytes, quoted whole in the
			// ICMP: tshark 4.0 does not decode the RFC 4884 extension
			// after a truncated quote.
			sizes := map[uint8][]int{64: {0, 300, 1400}, 1: {0, 40, 90}}
			for _, ttl := range []uint8{64, 1} {
				for _, size := range sizes[ttl] {
					payload := make([]byte, size)
					for i := range payload {
						payload[i] = byte(i*3 + int(ttl))
					}
					frames = append(frames, mplstest.Frame{Dst: tcpip.LinkAddress(lsrMAC), Src: tcpip.LinkAddress(srcMAC), Labels: mplstest.Stack(ttl, 100),
						Payload: mplstest.IPv4UDP(netip.MustParseAddrPort("172.16.20.20:5000"), netip.AddrPortFrom(netip.MustParseAddr("10.10.10.10"), probePort), true, payload)}.Bytes())
				}
			}
			x := xdpCounts(s.n1)
			res := probe{ns: s.ns0, dev: s.v01, frames: frames,
				taps: map[string]*wiretest.Tap{"popped": wiretest.NewTap(t, s.ns2, s.v21, wiretest.UDPTo(probePort)),
					"icmp": wiretest.NewTap(t, s.ns0, s.v01, func(f []byte) bool { return len(f) > 23 && f[12] == 8 && f[13] == 0 && f[23] == 1 })},
				tapCount: map[string]int{"popped": 3, "icmp": 3},
				nodes:    map[string]*node.Node{"ns1": s.n1},
				counts:   map[string]map[string]uint64{"ns1": {"popped_ip": 3, "drop ttl_expired": 3, "icmp_sent": 3}},
			}.run(t)
			results[m.Name] = res
			// The ICMP errors' own IPv4 ID is the stack's (salted per
			// node start): compared without it.
			res.Wire["icmp"] = wiretest.Wire(t, wiretest.WithoutIPv4ID(res.Frames["icmp"]))
			if m.XDP {
				if d := planetest.Delta(x, xdpCounts(s.n1)); d["popped_ip"] != 3 || d["passed ttl_expired"] != 3 {
					t.Errorf("the XDP program's counters moved by %v, want popped_ip 3 and passed ttl_expired 3", d)
				}
			}
			expectFields(t, "ns1-ns2", res.Frames["popped"], []string{"mpls.label", "ip.ttl", "ip.checksum.status", "udp.checksum.status"}, ",63,1,1")
			// ip.src and ip.dst list the outer header, then the quoted
			// datagram's.
			expectFields(t, "ns1-ns0", res.Frames["icmp"], []string{"ip.src", "ip.dst", "icmp.type", "icmp.code", "icmp.mpls.label", "icmp.mpls.s", "icmp.mpls.ttl", "ip.checksum.status"},
				"172.16.20.21,172.16.20.20,172.16.20.20,10.10.10.10,11,0,100,1,1,1,1")
		})
	}
	planetest.CompareModes(t, results)
}

// seedTTLExpiryDial has ns0's node push TTL 1 and dial through ns1, which
// must answer ICMP time exceeded with an RFC 4950 label stack object.
func seedTTLExpiryDial(t *testing.T, s *seed) {
	t.Helper()
	cfg, err := config.Parse("ns0.conf", strings.NewReader(strings.Replace(s.conf0, "encap mpls 100 ", "encap mpls 100 ttl 1 ", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.n0.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	icmp := wiretest.NewTap(t, s.ns0, s.v01, wiretest.FirstN(1, func(f []byte) bool { return len(f) > 23 && f[12] == 8 && f[13] == 0 && f[23] == 1 }))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.n0.Stack().DialContext(ctx, "tcp", "10.10.10.10:9"); err == nil {
		t.Errorf("dial through an expiring LSP succeeded")
	}
	rows := wiretest.Decode(t, icmp.Wait(1), "ip.src", "ip.dst", "icmp.type", "icmp.code", "icmp.mpls.label", "icmp.mpls.s", "icmp.mpls.ttl")
	// ip.src and ip.dst list the outer header, then the quoted datagram's.
	want := "172.16.20.21,172.16.20.20|172.16.20.20,10.10.10.10|11|0|100|1|1"
	if len(rows) != 1 || strings.Join(rows[0], "|") != want {
		t.Errorf("got ICMP fields %v, want %s", rows, want)
	}
	if st := planetest.Counts(s.n1.Report()); st["drop ttl_expired"] == 0 || st["icmp_sent"] == 0 {
		t.Errorf("got counters %v, want ttl_expired and ICMP sent", st)
	}
	// The node's own traffic takes TTL 64 again (the probes do not need
	// it; the dial's SYNs are over).
	cfg, _ = config.Parse("ns0.conf", strings.NewReader(s.conf0))
	if err := s.n0.Reload(cfg); err != nil {
		t.Fatal(err)
	}
}

// TestSwapChain runs ns0 (host, pushes 100 / 101) -- A (LSR, swaps 100 to
// 200, 101 to 201) -- T (a Linux bridge: the wire between A and B, where
// tshark watches) -- B (LSR, pops to IP) -- ns3 (the kernel), over IPv4
// and IPv6, with the plain return path routed by B and A.
//
// It runs in both forwarding modes (issue 14): the LSRs' XDP program
// swaps at A and pops at B in mode=xdp. In each: 32 MiB over each IP
// family arrive whole, tshark on the wire sees the swapped label with TTL
// 63; then probes (UDP over labels 100 and 101, sent from ns0's kernel
// end of its link, three sizes each) are swapped and popped, with the
// same frames on the wire A-B and B-ns3 (tshark decodes, MD5 of each
// frame) and the same counter moves in both modes, all of them carried
// by the program in mode=xdp. Planted bug: the program's pop leaving the
// IP TTL alone (bpf/lsr.c, make bpf): mode=xdp's popped probes differ.
func TestSwapChain(t *testing.T) {
	netns.SkipUnlessRoot(t)
	wiretest.Need(t)
	ns0, nsA, nsT, nsB, ns3 := netns.New(t, "c0"), netns.New(t, "ca"), netns.New(t, "ct"), netns.New(t, "cb"), netns.New(t, "c3")
	// The bridge's ports stay silent (no IPv6 chatter for the nodes).
	wiretest.DisableIPv6(t, nsT)
	v0a, va0 := netns.VethPair(t, ns0, nsA)
	vab, vta := netns.VethPair(t, nsA, nsT)
	vtb, vba := netns.VethPair(t, nsT, nsB)
	netns.Bridge(t, nsT, vta, vtb)
	vb3, v3b := netns.VethPair(t, nsB, ns3)
	// NAPI on the kernel ends A and B redirect into (both modes alike).
	wiretest.GROOn(t, nsT, vta)
	wiretest.GROOn(t, ns3, v3b)
	for _, args := range [][]string{
		{"ip", "addr", "add", "172.16.21.22/24", "dev", v3b},
		{"ip", "addr", "add", "fd00:21::22/64", "dev", v3b, "nodad"},
		{"ip", "addr", "add", "10.10.10.10/32", "dev", "lo"},
		{"ip", "addr", "add", "fd00:10::10/128", "dev", "lo", "nodad"},
		{"ip", "route", "add", "172.16.20.0/24", "via", "172.16.21.21"},
		{"ip", "-6", "route", "add", "fd00:20::/64", "via", "fd00:21::21"},
	} {
		ns3.MustExec(args...)
	}
	const probePort = 7777
	udpSink(t, ns3, probePort)
	conf0 := fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.20.20/24 dev %[1]s
addr add fd00:20::20/64 dev %[1]s
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 mtu lock 1496
route add fd00:10::10/128 encap mpls 101 via inet6 fd00:20::21 mtu lock 1496
`, v0a)
	confA := fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.20.21/24 dev %[1]s
addr add fd00:20::21/64 dev %[1]s
addr add 172.16.22.1/24 dev %[2]s
addr add fd00:22::1/64 dev %[2]s
-f mpls route add 100 as to 200 via inet 172.16.22.2
-f mpls route add 101 as to 201 via inet6 fd00:22::2
`, va0, vab)
	confB := fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.22.2/24 dev %[1]s
addr add fd00:22::2/64 dev %[1]s
addr add 172.16.21.21/24 dev %[2]s
addr add fd00:21::21/64 dev %[2]s
route add 172.16.20.0/24 via 172.16.22.1
route add fd00:20::/64 via fd00:22::1
-f mpls route add 200 via inet 172.16.21.22
-f mpls route add 201 via inet6 fd00:21::22
`, vba, vb3)

	results := map[string]*planetest.Result{}
	for _, m := range planetest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			n0 := startNode(t, ns0, "ns0.conf", conf0)
			nA := startNode(t, nsA, "a.conf", confA+m.Conf())
			nB := startNode(t, nsB, "b.conf", confB+m.Conf())
			swapChainTransfers(t, n0, nA, nB, ns3, nsT, vta)
			// Labelled frames are only swapped at A; the plain return
			// path (the ACKs) is routed by the forwarding plane too, as
			// transit IP.
			if st := planetest.Counts(nA.Report()); st["swapped"] == 0 || st["popped_ip"]+st["popped_labelled"] != 0 || st["ip_forwarded"] == 0 {
				t.Errorf("A: got %v, want only swaps and transit IP", st)
			}
			if m.XDP {
				planetest.WaitXDPEntries(t, nA.Report, 2)
				planetest.WaitXDPEntries(t, nB.Report, 2)
			}

			// Probes, from ns0's kernel end of its link into A.
			aMAC, srcMAC := wiretest.MAC(t, nsA, va0), wiretest.MAC(t, ns0, v0a)
			var frames [][]byte
			for _, size := range []int{0, 200, 1400} {
				payload := make([]byte, size)
				for i := range payload {
					payload[i] = byte(i * 7)
				}
				frames = append(frames,
					mplstest.Frame{Dst: tcpip.LinkAddress(aMAC), Src: tcpip.LinkAddress(srcMAC), Labels: mplstest.Stack(64, 100),
						Payload: mplstest.IPv4UDP(netip.MustParseAddrPort("172.16.20.20:5000"), netip.AddrPortFrom(netip.MustParseAddr("10.10.10.10"), probePort), true, payload)}.Bytes(),
					mplstest.Frame{Dst: tcpip.LinkAddress(aMAC), Src: tcpip.LinkAddress(srcMAC), Labels: mplstest.Stack(64, 101),
						Payload: mplstest.IPv6UDP(netip.MustParseAddrPort("[fd00:20::20]:5000"), netip.AddrPortFrom(netip.MustParseAddr("fd00:10::10"), probePort), payload)}.Bytes())
			}
			n := uint64(len(frames))
			xA, xB := xdpCounts(nA), xdpCounts(nB)
			res := probe{ns: ns0, dev: v0a, frames: frames,
				taps:     map[string]*wiretest.Tap{"A-B": wiretest.NewTap(t, nsT, vta, wiretest.UDPTo(probePort)), "B-ns3": wiretest.NewTap(t, ns3, v3b, wiretest.UDPTo(probePort))},
				tapCount: map[string]int{"A-B": len(frames), "B-ns3": len(frames)},
				nodes:    map[string]*node.Node{"A": nA, "B": nB},
				counts:   map[string]map[string]uint64{"A": {"swapped": n}, "B": {"popped_ip": n}},
			}.run(t)
			results[m.Name] = res
			if m.XDP {
				if got := xdpCounts(nA)["swapped"] - xA["swapped"]; got != n {
					t.Errorf("A's XDP program swapped %d probes, want %d", got, n)
				}
				if got := xdpCounts(nB)["popped_ip"] - xB["popped_ip"]; got != n {
					t.Errorf("B's XDP program popped %d probes, want %d", got, n)
				}
			}
			// What tshark reads: label 200/201 with TTL 63 between A and
			// B; IP TTL / hop limit 62 and good checksums after B.
			expectFields(t, "A-B", res.Frames["A-B"], []string{"mpls.label", "mpls.exp", "mpls.bottom", "mpls.ttl"}, "200,0,1,63", "201,0,1,63")
			expectFields(t, "B-ns3", res.Frames["B-ns3"], []string{"mpls.label", "ip.ttl", "ip.checksum.status", "ipv6.hlim", "udp.checksum.status"},
				",62,1,,1", ",,,62,1")
		})
	}
	planetest.CompareModes(t, results)
}

// swapChainTransfers sends 32 MiB over IPv4 and over IPv6 from n0 through
// the chain to the kernel in ns3, tshark watching the A-B wire at dev in
// nsT.
func swapChainTransfers(t *testing.T, n0, nA, nB *node.Node, ns3, nsT *netns.NS, dev string) {
	for _, tc := range []struct {
		name, listen string
		label        string
	}{
		{"IPv4", "10.10.10.10:0", "200"},
		{"IPv6", "[fd00:10::10]:0", "201"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A failed or stalled transfer says how far the LSRs got.
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("A: %+v %+v; B: %+v %+v", nA.Stats().Switch, nA.Report().XDP, nB.Stats().Switch, nB.Report().XDP)
				}
			})
			addr, result := kernelSink(t, ns3, tc.listen)
			// The first 10 full-size labelled frames on the wire (an
			// AF_PACKET tap: tshark's own capture starts a moment after
			// it says so, when an XDP transfer may be over).
			swapped := wiretest.NewTap(t, nsT, dev, wiretest.FirstN(10, func(f []byte) bool { return len(f) > 1000 && f[12] == 0x88 && f[13] == 0x47 }))
			c := dialFrom(t, n0, addr, 2*time.Minute, nA, nB)
			// Enough to fill the window on this path and to outlast
			// tshark's start.
			const size = 32 << 20
			sum := send(t, c, size, nil)
			r := <-result
			if r.err != nil || r.n != size || r.sum != sum {
				t.Fatalf("got %d bytes, sha256 %x, err %v; want %d bytes, sha256 %x", r.n, r.sum, r.err, size, sum)
			}
			for i, row := range wiretest.Decode(t, swapped.Wait(10), "mpls.label", "mpls.bottom", "mpls.ttl") {
				// Pushed with TTL 64 by ns0, swapped by A: 63.
				if want := []string{tc.label, "1", "63"}; strings.Join(row, ",") != strings.Join(want, ",") {
					t.Errorf("frame %d on %s: got label,S,TTL %v, want %v", i, dev, row, want)
				}
			}
		})
	}
}
