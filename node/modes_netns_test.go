package node_test

// Helpers of the forwarding-plane tests that run twice, with the label
// switch in userspace and with its XDP program (issue 14: the same bytes
// on the wire and the same counters in both modes).
//
// The topology of such a test is built once; the nodes are started in
// each mode's subtest (their t.Cleanup closes them, and the XDP program
// is detached, at the subtest's end), so both modes see the same
// interfaces and MAC addresses and their frames can be compared byte for
// byte. Captures sit where no XDP program runs (a kernel's end of a veth,
// a bridge port, a host node's link): a program on an interface runs
// before the capture taps and its redirects bypass them.
//
// Probes are frames built here (mplstest) and sent from a kernel's end of
// a veth with an AF_PACKET socket, so that both modes get the same input
// bytes; tshark decodes what leaves, with checksums verified and an MD5
// of each whole frame.

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/netns"
	"github.com/mplsnode/mplsnode/internal/tshark"
	"github.com/mplsnode/mplsnode/link/pcap"
	"github.com/mplsnode/mplsnode/node"
	"golang.org/x/sys/unix"
)

// fwdMode is one way the forwarding plane runs.
type fwdMode struct {
	name string
	xdp  bool
}

// fwdModes are the two modes every forwarding-plane e2e test runs in.
var fwdModes = []fwdMode{{"mode=userspace", false}, {"mode=xdp", true}}

// conf is the config line of the mode (empty in userspace mode).
func (m fwdMode) conf() string {
	if m.xdp {
		return "set forward xdp on\n"
	}
	return ""
}

// groOn turns GRO on at kernel ends of veths: a veth takes frames an XDP
// program redirects into it only while its peer runs NAPI
// (docs/CONFIG.md, set forward xdp). Set in both modes, so that both see
// the same links.
func groOn(t *testing.T, ns *netns.NS, devs ...string) {
	t.Helper()
	for _, d := range devs {
		ns.MustExec("ethtool", "-K", d, "gro", "on")
	}
}

// macOf returns dev's MAC address in ns.
func macOf(t *testing.T, ns *netns.NS, dev string) net.HardwareAddr {
	t.Helper()
	mac, err := net.ParseMAC(strings.TrimSpace(ns.MustExec("cat", "/sys/class/net/"+dev+"/address")))
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// injectFrames sends frames, whole Ethernet frames, out of dev in ns through an
// AF_PACKET socket, in order.
func injectFrames(t *testing.T, ns *netns.NS, dev string, frames [][]byte) {
	t.Helper()
	if err := ns.Run(func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6}
		for i, f := range frames {
			copy(sa.Addr[:], f[:6])
			if err := unix.Sendto(fd, f, 0, sa); err != nil {
				return fmt.Errorf("frame %d: %w", i, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("inject on %s: %v", dev, err)
	}
}

// wireFields are the decoded fields compared between modes: addresses,
// labels, TTLs, checksums (value and verdict), ICMP, and the MD5 of the
// whole frame.
var wireFields = []string{"frame.len", "eth.src", "eth.dst", "mpls.label", "mpls.exp", "mpls.bottom", "mpls.ttl",
	"ip.src", "ip.dst", "ip.ttl", "ip.checksum", "ip.checksum.status", "ipv6.src", "ipv6.dst", "ipv6.hlim",
	"udp.srcport", "udp.checksum.status", "icmp.type", "icmp.code", "icmp.mpls.label", "frame.md5_hash"}

// tap records the frames an interface receives, through an AF_PACKET
// socket opened (and so capturing) before tap returns, unlike tshark,
// which says it captures a moment before it does; tshark then decodes
// what the tap kept (decode).
type tap struct {
	t   *testing.T
	dev string
	// sent: keep what dev sends too.
	sent   bool
	mu     sync.Mutex
	cond   *sync.Cond
	frames [][]byte
}

// newTap starts recording what dev in ns receives (not what it sends);
// keep says which frames to keep. It stops when the test ends.
func newTap(t *testing.T, ns *netns.NS, dev string, keep func([]byte) bool) *tap {
	t.Helper()
	return startTap(t, &tap{t: t, dev: dev}, ns, keep)
}

// newTapBoth is newTap for what dev sends and receives.
func newTapBoth(t *testing.T, ns *netns.NS, dev string, keep func([]byte) bool) *tap {
	t.Helper()
	return startTap(t, &tap{t: t, dev: dev, sent: true}, ns, keep)
}

func startTap(t *testing.T, tp *tap, ns *netns.NS, keep func([]byte) bool) *tap {
	t.Helper()
	dev := tp.dev
	tp.cond = sync.NewCond(&tp.mu)
	var fd int
	if err := ns.Run(func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_ALL))
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20); err != nil {
			unix.Close(fd)
			return err
		}
		// A blocked recvfrom outlives close: wake up to see the stop.
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			unix.Close(fd)
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		return nil
	}); err != nil {
		t.Fatalf("tap on %s: %v", dev, err)
	}
	done, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				if err == unix.EINTR || err == unix.EAGAIN {
					continue
				}
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype == unix.PACKET_OUTGOING && !tp.sent || !keep(buf[:n]) {
				continue
			}
			tp.mu.Lock()
			tp.frames = append(tp.frames, append([]byte(nil), buf[:n]...))
			tp.cond.Broadcast()
			tp.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		unix.Close(fd)
	})
	return tp
}

// firstN keeps the first n frames keep keeps (for a tap: one goroutine
// calls it).
func firstN(n int, keep func([]byte) bool) func([]byte) bool {
	return func(f []byte) bool {
		if n == 0 || !keep(f) {
			return false
		}
		n--
		return true
	}
}

// htons is the network byte order of a 16-bit protocol number.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// wait returns the first n frames kept, failing t if fewer came within 20
// s.
func (tp *tap) wait(n int) [][]byte {
	tp.t.Helper()
	timer := time.AfterFunc(20*time.Second, func() { tp.mu.Lock(); tp.cond.Broadcast(); tp.mu.Unlock() })
	defer timer.Stop()
	deadline := time.Now().Add(20 * time.Second)
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for len(tp.frames) < n {
		if time.Now().After(deadline) {
			tp.t.Fatalf("%s received %d frames in 20 s, want %d", tp.dev, len(tp.frames), n)
		}
		tp.cond.Wait()
	}
	return tp.frames[:n]
}

// count is the number of frames kept so far.
func (tp *tap) count() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.frames)
}

// decode returns tshark's decode of frames, fields per frame.
func decode(t *testing.T, frames [][]byte, fields ...string) [][]string {
	t.Helper()
	return tshark.Fields(t, tshark.WritePcap(t, pcap.LinkTypeEthernet, frames), fields...)
}

// wire returns frames decoded to wireFields, one line each, sorted (the
// modes may interleave two paths differently; order within a flow is the
// ECMP test's subject).
func wire(t *testing.T, frames [][]byte) []string {
	t.Helper()
	rows := decode(t, frames, wireFields...)
	lines := make([]string, len(rows))
	for i, r := range rows {
		lines[i] = strings.Join(r, " ")
	}
	slices.Sort(lines)
	return lines
}

// udpTo keeps IPv4 and IPv6 UDP datagrams to port (plain or under labels,
// whose payload is taken as IP), as a BPF "udp dst port" would.
func udpTo(port uint16) func([]byte) bool {
	return func(f []byte) bool {
		if len(f) < 14 {
			return false
		}
		typ, p := uint16(f[12])<<8|uint16(f[13]), f[14:]
		if typ == 0x8847 {
			for len(p) >= 4 {
				bottom := p[2]&1 == 1
				p = p[4:]
				if bottom {
					break
				}
			}
			if len(p) == 0 {
				return false
			}
			typ = map[byte]uint16{4: 0x0800, 6: 0x86dd}[p[0]>>4]
		}
		switch {
		case typ == 0x0800 && len(p) >= 24 && p[9] == 17:
			ihl := int(p[0]&15) * 4
			return len(p) >= ihl+4 && uint16(p[ihl+2])<<8|uint16(p[ihl+3]) == port
		case typ == 0x86dd && len(p) >= 44 && p[6] == 17:
			return uint16(p[42])<<8|uint16(p[43]) == port
		}
		return false
	}
}

// planeCounts returns the forwarding plane's counters of n, the userspace
// switch's and the XDP program's summed: in XDP mode what the program
// carried shows in its counters, what it passed up in the switch's. Only
// counters that the same input must move the same way in both modes are
// kept (not queued or coalesced, which depend on timing).
func planeCounts(r node.Report) map[string]uint64 {
	sw := r.LabelSwitch
	m := map[string]uint64{
		"swapped": sw.Swapped, "popped_ip": sw.PoppedIP, "popped_labelled": sw.PoppedLabelled,
		"icmp_sent": sw.ICMPSent, "fragmented": sw.Fragmented, "ip_forwarded": sw.IPForwarded, "pushed": sw.Pushed,
	}
	for k, v := range sw.Drops {
		if v != 0 {
			m["drop "+k] = v
		}
	}
	if x := r.XDP; x != nil {
		m["swapped"] += x.Swapped
		m["popped_ip"] += x.PoppedIP
		m["popped_labelled"] += x.PoppedLabelled
	}
	for k, v := range m {
		if v == 0 {
			delete(m, k)
		}
	}
	return m
}

// countsDelta returns after - before for every counter of after.
func countsDelta(before, after map[string]uint64) map[string]uint64 {
	d := map[string]uint64{}
	for k, v := range after {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// settle polls n's plane counters until they have moved from before by at
// least want's values (or 10 s passed), waits a moment for stragglers and
// returns the delta.
func settle(t *testing.T, n *node.Node, before, want map[string]uint64) map[string]uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := countsDelta(before, planeCounts(n.Report()))
		done := true
		for k, v := range want {
			done = done && d[k] >= v
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	return countsDelta(before, planeCounts(n.Report()))
}

// quiesce waits until the nodes' plane counters have stood still for 300
// ms (the last segments of a transfer before, a FIN, an ACK, cross as
// transit too) and returns them; it gives up waiting after 10 s.
func quiesce(t *testing.T, nodes map[string]*node.Node) map[string]map[string]uint64 {
	t.Helper()
	read := func() map[string]map[string]uint64 {
		m := map[string]map[string]uint64{}
		for name, n := range nodes {
			m[name] = planeCounts(n.Report())
		}
		return m
	}
	last, still := read(), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		now := read()
		if fmt.Sprint(now) != fmt.Sprint(last) {
			last, still = now, time.Now()
		} else if time.Since(still) >= 300*time.Millisecond {
			break
		}
	}
	return last
}

// modeResult is what one mode put on the wire and counted for the probes.
type modeResult struct {
	frames map[string][][]byte          // capture name -> frames
	wire   map[string][]string          // capture name -> decoded frames
	counts map[string]map[string]uint64 // node name -> counter deltas
}

// compareModes fails t unless every mode's result equals the first one's.
func compareModes(t *testing.T, results map[string]*modeResult) {
	t.Helper()
	base := results[fwdModes[0].name]
	for _, m := range fwdModes[1:] {
		r := results[m.name]
		if base == nil || r == nil {
			// A mode left out by -run, or one that failed (and said
			// why): nothing to compare.
			return
		}
		for name, want := range base.wire {
			if got := r.wire[name]; !slices.Equal(got, want) {
				t.Errorf("%s: %s: frames differ from %s:\n got  %q\n want %q", m.name, name, fwdModes[0].name, got, want)
			}
		}
		for name, want := range base.counts {
			if got := r.counts[name]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: %s: counters moved by %v, %s by %v", m.name, name, got, fwdModes[0].name, want)
			}
		}
	}
}

// probe is frames sent into a topology and what they must do there.
type probe struct {
	// ns and dev are where the frames are sent from (a kernel's end of a
	// veth, or a host node's link: the frames go to its peer).
	ns  *netns.NS
	dev string
	// frames are whole Ethernet frames.
	frames [][]byte
	// taps, started before the frames are sent, and the number of frames
	// each must see.
	taps     map[string]*tap
	tapCount map[string]int
	// nodes and the exact moves of their plane counters (planeCounts).
	nodes  map[string]*node.Node
	counts map[string]map[string]uint64
}

// run sends the probe's frames and returns what the taps saw and the
// counters moved, failing t where they differ from what p wants.
func (p probe) run(t *testing.T) *modeResult {
	t.Helper()
	before := quiesce(t, p.nodes)
	injectFrames(t, p.ns, p.dev, p.frames)
	res := newModeResult()
	for name, tp := range p.taps {
		res.frames[name] = tp.wait(p.tapCount[name])
		res.wire[name] = wire(t, res.frames[name])
	}
	for name, n := range p.nodes {
		res.counts[name] = settle(t, n, before[name], p.counts[name])
		if got, want := res.counts[name], p.counts[name]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: counters moved by %v, want %v", name, got, want)
		}
	}
	return res
}

// add adds r's captures and counters to res, under prefix.
func (res *modeResult) add(prefix string, r *modeResult) {
	for k, v := range r.frames {
		res.frames[prefix+k] = v
	}
	for k, v := range r.wire {
		res.wire[prefix+k] = v
	}
	for k, v := range r.counts {
		res.counts[prefix+k] = v
	}
}

// newModeResult returns an empty result.
func newModeResult() *modeResult {
	return &modeResult{frames: map[string][][]byte{}, wire: map[string][]string{}, counts: map[string]map[string]uint64{}}
}

// expectFields fails t unless every frame decodes (tshark) to want in the
// given fields, each row joined by commas.
func expectFields(t *testing.T, what string, frames [][]byte, fields []string, want ...string) {
	t.Helper()
	for i, row := range decode(t, frames, fields...) {
		if got := strings.Join(row, ","); !slices.Contains(want, got) {
			t.Errorf("%s frame %d: %s = %s, want one of %q", what, i, strings.Join(fields, ","), got, want)
		}
	}
}

// xdpCounts returns n's XDP program counters: carried (swapped,
// popped_ip, popped_labelled) and passed up by reason; nil without XDP.
func xdpCounts(n *node.Node) map[string]uint64 {
	x := n.Report().XDP
	if x == nil {
		return nil
	}
	m := map[string]uint64{"swapped": x.Swapped, "popped_ip": x.PoppedIP, "popped_labelled": x.PoppedLabelled}
	for k, v := range x.Passed {
		m["passed "+k] = v
	}
	return m
}

// udpSink listens on UDP port in ns (both families), so that probes to
// it draw no ICMP port unreachable back through the nodes, and drains
// what arrives until the test ends.
func udpSink(t *testing.T, ns *netns.NS, port int) {
	t.Helper()
	var pc net.PacketConn
	if err := ns.Run(func() (err error) {
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
}
