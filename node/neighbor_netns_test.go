package node_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/nodekit"
	"github.com/mplsnode/mplsnode/internal/testkit/planetest"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// TestSeedNeighborMACChange is the seed's LSR (ns1) following a next hop
// that changes its MAC address, in both forwarding modes (defect D6).
//
// In each mode ns0's node sends a UDP datagram every 5 ms to 10.10.10.10
// under label 100, which ns1 pops towards ns2's kernel (172.16.21.22); a
// tap on ns2's end of the link records each datagram's destination MAC.
// Once they arrive at ns2's MAC (carried by the XDP program in mode=xdp),
// ns2's interface takes a new MAC address (ip link set dev ... address)
// and announces it with a gratuitous ARP: first a request (what arping -U
// sends), then, after a second change, a broadcast reply (arping -A),
// then a request again.
// Linux updates an existing neighbour entry from either at once; ns1 must
// too: the datagrams must reach the new MAC within 2 s of each
// announcement, and none may go to an old one after that. Last, with
// ns1's NUD timers cut short, ns2 changes its MAC once more and says
// nothing: ns1's NUD must find the old MAC gone and resolve the new one
// within 6 s, in mode=xdp too, whose frames never make the stack use the
// entry.
//
// What it guards: gVisor's ARP ignores a request for an address that is
// not its own (the GARP request) and takes an unsolicited reply with a
// new address only as a hint (the entry goes stale with the old address),
// so the userspace plane kept sending to the old MAC until NUD's probes
// failed (3 to 12.5 s), and the XDP mirror, which copied the table's MAC
// and never made the stack use the stale entry, kept it for good (the
// entry stayed stale: no probe ever went out, the silent change too).
func TestSeedNeighborMACChange(t *testing.T) {
	s := newSeedNets(t, "afpacket", "")
	wiretest.GROOn(t, s.ns2, s.v21)
	// ns2's kernel announces nothing itself: the test's GARPs are the only
	// ones.
	wiretest.WriteSysctl(t, s.ns2, "net/ipv4/conf/"+s.v21+"/arp_notify", "0")
	const port = 7796
	udpSink(t, s.ns2, port)
	rec := &macRecorder{}
	wiretest.NewTap(t, s.ns2, s.v21, rec.keep(wiretest.UDPTo(port)))
	ns2IP := netip.MustParseAddr("172.16.21.22")
	for mi, m := range planetest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			s.start(t, m.Conf(), node.Options{}, node.Options{})
			if m.XDP {
				planetest.WaitXDPEntries(t, s.n1.Report, 1)
			}
			stop := udpStream(t, s.n0, fmt.Sprintf("10.10.10.10:%d", port), 5*time.Millisecond)
			defer stop()
			cur := wiretest.MAC(t, s.ns2, s.v21)
			start := time.Now()
			if !rec.waitFor(start, cur, 20, 10*time.Second) {
				t.Fatalf("%d datagrams reached ns2's MAC %s in 10 s, want 20 (%s); ns1 %s", rec.count(start, cur), cur, rec.summary(start), neighborState(s.n1, s.v12))
			}
			if m.XDP {
				if x := xdpCounts(s.n1); x["popped_ip"] == 0 {
					t.Fatalf("the XDP program carried none of the datagrams: %v", nonZero(x))
				}
			}
			for step, c := range []struct {
				name  string
				op    header.ARPOp // 0: no announcement
				bound time.Duration
				// shortNUD: ns1's NUD timers are cut short before the
				// change (the entry the change makes reachable has them).
				shortNUD bool
			}{
				{"a gratuitous ARP request (arping -U)", header.ARPRequest, 2 * time.Second, false},
				{"a gratuitous ARP broadcast reply (arping -A)", header.ARPReply, 2 * time.Second, false},
				// Again, so that the entry it makes reachable has the
				// short timers (the one before has the default ones: NUD
				// cannot follow in time instead of the announcement).
				{"a gratuitous ARP request (arping -U)", header.ARPRequest, 2 * time.Second, true},
				// No announcement: NUD finds the old MAC gone, with its
				// timers short (reachable 0.25-0.75 s, probes after 0.3
				// s, three 0.2 s apart); the XDP mirror, with its 1 s
				// sync, must start it and follow what it finds.
				{"no announcement (NUD)", 0, 6 * time.Second, false},
			} {
				if c.shortNUD {
					shortNUD(t, s.n1, s.v12)
				}
				old := cur
				cur = net.HardwareAddr{0x02, 0xd6, 0, 0, byte(mi), byte(step + 1)}
				var t0 time.Time
				var x0 map[string]uint64
				if c.op == 0 {
					x0, t0 = xdpCounts(s.n1), time.Now()
					s.ns2.MustExec("ip", "link", "set", "dev", s.v21, "address", cur.String())
				} else {
					s.ns2.MustExec("ip", "link", "set", "dev", s.v21, "address", cur.String())
					// The datagrams on the wire before the announcement.
					time.Sleep(50 * time.Millisecond)
					x0, t0 = xdpCounts(s.n1), time.Now()
					wiretest.Inject(t, s.ns2, s.v21, [][]byte{garpFrame(cur, ns2IP, c.op)})
				}
				// Wait for the new MAC, longer than the bound, to report
				// how long it took when it is missed.
				followed := rec.waitFor(t0, cur, 1, 15*time.Second)
				first, _ := rec.first(t0, cur)
				took := first.Sub(t0)
				if !followed {
					took = time.Since(t0)
				}
				// Half a second more of traffic after the bound: none of it
				// may go to an old MAC.
				time.Sleep(time.Until(t0.Add(c.bound + 500*time.Millisecond)))
				lastOld, anyOld := rec.lastOther(t0, cur)
				oldWhen := "none after the change"
				if anyOld {
					oldWhen = lastOld.Sub(t0).Round(time.Millisecond).String() + " after the change"
				}
				x := planetest.Delta(x0, xdpCounts(s.n1))
				what := fmt.Sprintf("after ns2 took the MAC %s (was %s) with %s: %s; the last datagram to an old MAC: %s; ns1 %s; XDP counters moved by %v",
					cur, old, c.name, rec.summary(t0), oldWhen, neighborState(s.n1, s.v12), nonZero(x))
				switch {
				case !followed:
					t.Errorf("no datagram reached the new MAC in 15 s %s", what)
				case took > c.bound:
					t.Errorf("the first datagram to the new MAC came %v after the change, want at most %v, %s", took.Round(time.Millisecond), c.bound, what)
				case anyOld && lastOld.After(t0.Add(c.bound)):
					t.Errorf("datagrams still went to an old MAC %v after the change %s", c.bound, what)
				default:
					t.Logf("first datagram to the new MAC %v after the change %s", took.Round(time.Millisecond), what)
				}
				if m.XDP && followed && x["popped_ip"] == 0 {
					t.Errorf("the XDP program carried no datagram after the change %s", what)
				}
			}
		})
	}
}

// macRecorder records when each frame a tap saw arrived and its
// destination MAC.
type macRecorder struct {
	mu     sync.Mutex
	frames []macFrame
}

type macFrame struct {
	at  time.Time
	dst string
}

// keep returns a tap's keep function that records the frames want keeps
// (and keeps none in the tap).
func (r *macRecorder) keep(want func([]byte) bool) func([]byte) bool {
	return func(f []byte) bool {
		if want(f) {
			r.mu.Lock()
			r.frames = append(r.frames, macFrame{at: time.Now(), dst: net.HardwareAddr(f[:6]).String()})
			r.mu.Unlock()
		}
		return false
	}
}

// count returns the number of frames to mac since since.
func (r *macRecorder) count(since time.Time, mac net.HardwareAddr) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, f := range r.frames {
		if !f.at.Before(since) && f.dst == mac.String() {
			n++
		}
	}
	return n
}

// first returns the first frame to mac since since.
func (r *macRecorder) first(since time.Time, mac net.HardwareAddr) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.frames {
		if !f.at.Before(since) && f.dst == mac.String() {
			return f.at, true
		}
	}
	return since, false
}

// lastOther returns the last frame since since to a MAC other than mac.
func (r *macRecorder) lastOther(since time.Time, mac net.HardwareAddr) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.frames) - 1; i >= 0 && !r.frames[i].at.Before(since); i-- {
		if r.frames[i].dst != mac.String() {
			return r.frames[i].at, true
		}
	}
	return since, false
}

// waitFor waits up to d for n frames to mac since since.
func (r *macRecorder) waitFor(since time.Time, mac net.HardwareAddr, n int, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(5 * time.Millisecond) {
		if r.count(since, mac) >= n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// summary counts the frames since since by destination MAC.
func (r *macRecorder) summary(since time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts, order := map[string]int{}, []string{}
	for _, f := range r.frames {
		if f.at.Before(since) {
			continue
		}
		if counts[f.dst] == 0 {
			order = append(order, f.dst)
		}
		counts[f.dst]++
	}
	var parts []string
	for _, mac := range order {
		parts = append(parts, fmt.Sprintf("%d datagrams to %s", counts[mac], mac))
	}
	if len(parts) == 0 {
		return "no datagram arrived"
	}
	return strings.Join(parts, ", ")
}

// udpStream sends a datagram from n's stack to addr every interval until
// stop is called (or 2 minutes pass).
func udpStream(t *testing.T, n *node.Node, addr string, interval time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c, err := n.Stack().DialContext(ctx, "udp", addr)
	if err != nil {
		cancel()
		t.Fatalf("dial %s: %v", addr, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		payload := make([]byte, 64)
		for i := uint32(0); ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			binary.BigEndian.PutUint32(payload, i)
			c.SetWriteDeadline(time.Now().Add(time.Second))
			c.Write(payload) // a datagram dropped while resolving is counted by the tap's absence
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			c.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// garpFrame returns a gratuitous ARP from mac for ip: a broadcast request
// (target hardware address all ones, as arping -U sends) or reply (the
// target hardware address the sender's, as arping -A sends), padded to the
// Ethernet minimum.
func garpFrame(mac net.HardwareAddr, ip netip.Addr, op header.ARPOp) []byte {
	f := make([]byte, 60)
	copy(f[0:6], header.EthernetBroadcastAddress)
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:14], uint16(header.ARPProtocolNumber))
	a := header.ARP(f[14:])
	a.SetIPv4OverEthernet()
	a.SetOp(op)
	copy(a.HardwareAddressSender(), mac)
	copy(a.ProtocolAddressSender(), ip.AsSlice())
	if op == header.ARPRequest {
		copy(a.HardwareAddressTarget(), header.EthernetBroadcastAddress)
	} else {
		copy(a.HardwareAddressTarget(), mac)
	}
	copy(a.ProtocolAddressTarget(), ip.AsSlice())
	return f
}

// shortNUD cuts n's IPv4 NUD timers on link dev short: reachable for
// 0.25 to 0.75 s, the first probe 0.3 s after a stale entry is used,
// three probes 0.2 s apart.
func shortNUD(t *testing.T, n *node.Node, dev string) {
	t.Helper()
	ns, id := n.Stack().Netstack(), nodekit.NICID(t, n, dev)
	c, err := ns.NUDConfigurations(id, header.IPv4ProtocolNumber)
	if err != nil {
		t.Fatalf("NUD configuration of %s: %s", dev, err)
	}
	c.BaseReachableTime, c.DelayFirstProbeTime, c.RetransmitTimer = 500*time.Millisecond, 300*time.Millisecond, 200*time.Millisecond
	c.MinRandomFactor, c.MaxRandomFactor = 0.5, 1.5
	if err := ns.SetNUDConfigurations(id, header.IPv4ProtocolNumber, c); err != nil {
		t.Fatalf("NUD configuration of %s: %s", dev, err)
	}
}

// neighborState returns n's IPv4 neighbour table on link dev.
func neighborState(n *node.Node, dev string) string {
	ns := n.Stack().Netstack()
	for id, info := range ns.NICInfo() {
		if info.Name != dev {
			continue
		}
		nbrs, err := ns.Neighbors(id, header.IPv4ProtocolNumber)
		if err != nil {
			return "neighbours on " + dev + ": " + err.String()
		}
		var parts []string
		for _, e := range nbrs {
			parts = append(parts, fmt.Sprintf("%s %s %s", e.Addr, e.LinkAddr, e.State))
		}
		return "neighbours on " + dev + ": [" + strings.Join(parts, "; ") + "]"
	}
	return "no link " + dev
}
