package node_test

// Helpers of the forwarding-plane tests that run twice, with the label
// switch in userspace and with its XDP program (issue 14: the same bytes
// on the wire and the same counters in both modes).
//
// The topology of such a test is built once; the nodes are started in
// each mode's subtest (their t.Cleanup closes them, and the XDP program
// is detached, at the subtest's end), so both modes see the same
// interfaces and MAC addresses and their frames can be compared byte for
// byte. Probes are frames built with mplstest and sent from a kernel's
// end of a veth (wiretest.Inject), so that both modes get the same input
// bytes; taps where no XDP program runs keep what leaves, and tshark
// decodes it, with checksums verified and an MD5 of each whole frame
// (wiretest.Wire). The modes and their comparison are internal/testkit/planetest's,
// shared with cmd/mplsnode's tests of nodes run as processes.

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/planetest"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/node"
)

// quiesce waits until the nodes' plane counters have stood still for 300
// ms (the last segments of a transfer before, a FIN, an ACK, cross as
// transit too) and returns them; it gives up waiting after 10 s.
func quiesce(t *testing.T, nodes map[string]*node.Node) map[string]map[string]uint64 {
	t.Helper()
	read := func() map[string]map[string]uint64 {
		m := map[string]map[string]uint64{}
		for name, n := range nodes {
			m[name] = planetest.Counts(n.Report())
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
	taps     map[string]*wiretest.Tap
	tapCount map[string]int
	// nodes and the exact moves of their plane counters (planeCounts).
	nodes  map[string]*node.Node
	counts map[string]map[string]uint64
}

// run sends the probe's frames and returns what the taps saw and the
// counters moved, failing t where they differ from what p wants.
func (p probe) run(t *testing.T) *planetest.Result {
	t.Helper()
	before := quiesce(t, p.nodes)
	wiretest.Inject(t, p.ns, p.dev, p.frames)
	res := planetest.NewResult()
	for name, tp := range p.taps {
		res.Frames[name] = tp.Wait(p.tapCount[name])
		res.Wire[name] = wiretest.Wire(t, res.Frames[name])
	}
	for name, n := range p.nodes {
		res.Counts[name] = planetest.Settle(t, n.Report, before[name], p.counts[name])
		if got, want := res.Counts[name], p.counts[name]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: counters moved by %v, want %v", name, got, want)
		}
	}
	return res
}

// expectFields fails t unless every frame decodes (tshark) to want in the
// given fields, each row joined by commas.
func expectFields(t *testing.T, what string, frames [][]byte, fields []string, want ...string) {
	t.Helper()
	for i, row := range wiretest.Decode(t, frames, fields...) {
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
	m := map[string]uint64{"swapped": x.Swapped, "popped_ip": x.PoppedIP, "popped_labelled": x.PoppedLabelled,
		"ip_forwarded": x.IPForwarded, "pushed": x.Pushed}
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
