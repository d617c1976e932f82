package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netem"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/node"
)

// The fault tests run the seed topology (seed_netns_test.go) with the LSR
// as an `mplsnode run` process and break something while a transfer runs
// from ns0's node through the LSR (label 100) to the kernel in ns2; every
// byte must arrive (SHA-256). Throughputs are logged, never asserted.

// faultSize is the transfer of each fault test.
const faultSize = 64 << 20

// impairment applies netem specs to both directions of the link between
// ns0 and the LSR: with tc's sch_netem where the kernel has it (a bridge in
// a middle namespace, a netem qdisc on each port), else with the userspace
// relay of internal/testkit/netem in the same place.
type impairment struct {
	t      *testing.T
	mid    *netns.NS
	ma, mb string // the middle namespace's ends: towards ns0, towards ns1
	tc     bool
	relay  *netem.Relay
	qdisc  bool // tc: a netem qdisc is installed on ma and mb
}

// link01 is a seedOptions.link01 that puts a middle namespace between ns0
// and ns1 and returns the impairment that acts there.
func (im *impairment) link01(t *testing.T, ns0, ns1 *netns.NS) (string, string) {
	im.t = t
	im.mid = netns.New(t, "fmid")
	v01, ma := netns.VethPair(t, ns0, im.mid)
	mb, v10 := netns.VethPair(t, im.mid, ns1)
	im.ma, im.mb = ma, mb
	// A netem qdisc needs sch_netem: CONFIG_NET_SCH_NETEM built in or as
	// a module the kernel can load.
	if _, err := im.mid.Exec("tc", "qdisc", "add", "dev", ma, "root", "netem", "delay", "0ms"); err == nil {
		im.tc = true
		im.mid.MustExec("tc", "qdisc", "del", "dev", ma, "root")
		netns.Bridge(t, im.mid, ma, mb)
	} else {
		t.Logf("tc netem unavailable here (%v); using the userspace relay internal/testkit/netem", strings.TrimSpace(err.Error()))
	}
	t.Cleanup(func() {
		if im.relay != nil {
			im.relay.Close()
		}
	})
	if !im.tc {
		im.set("")
	}
	return v01, v10
}

// set replaces the impairment of both directions with spec (tc-netem(8)
// words; "" is none).
func (im *impairment) set(spec string) {
	t := im.t
	t.Helper()
	p, err := netem.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	if im.tc {
		for _, dev := range []string{im.ma, im.mb} {
			if spec == "" {
				if im.qdisc {
					im.mid.MustExec("tc", "qdisc", "del", "dev", dev, "root")
				}
				continue
			}
			im.mid.MustExec(append([]string{"tc", "qdisc", "replace", "dev", dev, "root", "netem"}, strings.Fields(spec)...)...)
		}
		im.qdisc = spec != ""
		return
	}
	if im.relay != nil {
		im.relay.Close()
	}
	if im.relay, err = netem.Start(im.mid, im.ma, im.mb, p, uint64(time.Now().UnixNano())); err != nil {
		t.Fatal(err)
	}
}

// stats describes what the impairment did (the relay's counters, or tc's
// qdisc statistics).
func (im *impairment) stats() string {
	if !im.tc {
		return im.relay.Stats().String()
	}
	var b strings.Builder
	for _, dev := range []string{im.ma, im.mb} {
		out, _ := im.mid.Exec("tc", "-s", "qdisc", "show", "dev", dev)
		b.WriteString(strings.Join(strings.Fields(out), " ") + "; ")
	}
	return b.String()
}

// effect is what an impairment must have done during a transfer: each true
// field a relay counter (or, for retransmits, ns0's TCP counter) that must
// have moved; with the relay, each false counter must not have (so "none"
// checks that the relay itself impairs nothing).
type effect struct {
	lost, duplicated, reordered, delayed, retransmits bool
}

// check returns what contradicts e in the relay's counters st (nil for tc,
// whose qdisc counts no such thing) and ns0's retransmits.
func (e effect) check(st *netem.Stats, retransmits uint64) []string {
	var bad []string
	if e.retransmits && retransmits == 0 {
		bad = append(bad, "ns0 TCP retransmitted nothing")
	}
	if st == nil {
		return bad
	}
	for _, c := range []struct {
		name string
		want bool
		n    uint64
	}{
		{"lost", e.lost, st.Lost}, {"duplicated", e.duplicated, st.Duplicated},
		{"reordered", e.reordered, st.Reordered}, {"delayed", e.delayed, st.Delayed},
	} {
		if c.want != (c.n > 0) {
			bad = append(bad, fmt.Sprintf("relay %s %d, want %s", c.name, c.n, map[bool]string{true: "> 0", false: "0"}[c.want]))
		}
	}
	return bad
}

// TestFaultNetem sends data through the LSR under each impairment of
// issue 7, applied to both directions of the link between ns0 and the
// LSR: loss, reordering, duplication, delay with jitter (64 MiB each, less
// for the slowest). Each arrives intact, and the impairment took effect:
// the relay counted the drops, duplicates, reorderings or delays its spec
// asks for and no others, and loss made ns0's TCP retransmit (with tc's
// netem, whose qdisc counts none of these, the retransmits and the qdisc
// in place). The throughput is logged.
//
// Checked by planting the bugs: a relay that ignores Params.Loss fails
// both loss cases (relay lost 0, and no retransmits); set starting the
// relay with Params{} (the spec dropped) fails every case but "none".
func TestFaultNetem(t *testing.T) {
	netns.SkipUnlessRoot(t)
	var im impairment
	s := newSeedProc(t, buildBinary(t), "fn", seedOptions{link01: im.link01})
	for _, c := range []struct {
		spec string
		size int64
		want effect
	}{
		{"", faultSize, effect{}}, // the relay's own cost
		{"loss 1%", faultSize, effect{lost: true, retransmits: true}},
		// The slow cases carry less so that all of them stay within about
		// two minutes: our TCP (gVisor's) measured about 3 Mbit/s under
		// these two, where 64 MiB would take three minutes each.
		{"loss 5%", 8 << 20, effect{lost: true, retransmits: true}},
		{"delay 5ms reorder 25% 50%", 16 << 20, effect{reordered: true, delayed: true}},
		{"duplicate 1%", faultSize, effect{duplicated: true}},
		{"delay 20ms 5ms", 8 << 20, effect{delayed: true}},
	} {
		name := c.spec
		if name == "" {
			name = "none"
		}
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			im.set(c.spec)
			tcp0 := s.n0.Report().TCP
			el := s.transfer(t, c.size, 90*time.Second, nil)
			tcp1 := s.n0.Report().TCP
			t.Logf("netem %q: %d MiB intact in %v: %.1f Mbit/s; ns0 TCP retransmits %d, timeouts %d; %s",
				name, c.size>>20, el.Round(time.Millisecond), mbits(c.size, el),
				tcp1.Retransmits-tcp0.Retransmits, tcp1.Timeouts-tcp0.Timeouts, im.stats())
			var st *netem.Stats
			if !im.tc {
				s := im.relay.Stats()
				st = &s
			} else if c.spec != "" && strings.Count(im.stats(), "qdisc netem") != 2 {
				t.Errorf("netem %q: tc shows no netem qdisc on both ports: %s", name, im.stats())
			}
			for _, bad := range c.want.check(st, tcp1.Retransmits-tcp0.Retransmits) {
				t.Errorf("netem %q did not take effect: %s (%s)", name, bad, im.stats())
			}
		})
	}
	im.set("")
}

// linkDrops is a report's drop counters of link name, non-zero ones only.
func linkDrops(r node.Report, name string) map[string]uint64 {
	m := map[string]uint64{}
	for _, l := range r.Links {
		if l.Name != name {
			continue
		}
		for k, v := range l.Drops {
			if v != 0 {
				m[k] = v
			}
		}
	}
	return m
}

// TestFaultLinkDown takes the LSR's interface towards ns0 down for 2 s in
// the middle of a 64 MiB transfer, while the sender keeps writing. While it
// is down, ns2 sends datagrams to ns0 through the LSR, whose writes to the
// down link must be counted (lower_write_error) rather than crash it (they
// did: gVisor's IP forwarding panicked on the link's ENETDOWN); ns0's TCP
// retransmits; once the link is back the LSR's AF_PACKET link carries
// frames again and the transfer completes intact.
func TestFaultLinkDown(t *testing.T) {
	netns.SkipUnlessRoot(t)
	s := newSeedProc(t, buildBinary(t), "fl", seedOptions{})
	before := s.lsr.mustReport()
	tcp0 := s.n0.Report().TCP
	el := s.transferWithFault(t, faultSize, 2*time.Minute, func() error {
		var errs []error
		if _, err := s.ns1.Exec("ip", "link", "set", s.v10, "down"); err != nil {
			errs = append(errs, err)
		}
		// Datagrams the LSR must forward out of the down link.
		errs = append(errs, sendUDP(s.ns2, "172.16.20.20:9", udpProbes))
		time.Sleep(2 * time.Second)
		if _, err := s.ns1.Exec("ip", "link", "set", s.v10, "up"); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	after := s.lsr.mustReport()
	tcp1 := s.n0.Report().TCP
	t.Logf("64 MiB with a 2 s link-down intact in %v (%.0f Mbit/s); ns0 TCP retransmits %d, timeouts %d; LSR %s drops before %v after %v",
		el.Round(time.Millisecond), mbits(faultSize, el), tcp1.Retransmits-tcp0.Retransmits, tcp1.Timeouts-tcp0.Timeouts,
		s.v10, linkDrops(before, s.v10), linkDrops(after, s.v10))
	if d := linkDrops(after, s.v10)["lower_write_error"] - linkDrops(before, s.v10)["lower_write_error"]; d < udpProbes {
		t.Errorf("LSR %s lower_write_error moved by %d during the link-down, want >= %d (the datagrams)", s.v10, d, udpProbes)
	}
	if tcp1.Retransmits == tcp0.Retransmits {
		t.Errorf("ns0 TCP retransmits did not move across a 2 s link-down")
	}
	// The link works in both directions after coming back.
	s.transfer(t, 1<<20, time.Minute, nil)
	checkNoPanic(t, s)
}

// transferWithFault is s.transfer of size bytes within limit, with fault
// run on its own goroutine once a quarter of them is sent, while the
// sender keeps writing; it fails t if fault returns an error, and returns
// how long the transfer took.
func (s *seedProc) transferWithFault(t *testing.T, size int64, limit time.Duration, fault func() error) time.Duration {
	t.Helper()
	var faulted chan error
	el := s.transfer(t, size, limit, func(sent int64) {
		if faulted != nil || sent < size/4 {
			return
		}
		faulted = make(chan error, 1)
		go func() { faulted <- fault() }()
	})
	if err := <-faulted; err != nil {
		t.Fatal(err)
	}
	return el
}

// udpProbes is how many datagrams TestFaultLinkDown sends through the down
// link.
const udpProbes = 5

// sendUDP sends n small datagrams to addr from a kernel socket in ns.
func sendUDP(ns *netns.NS, addr string, n int) error {
	var c net.Conn
	if err := ns.Run(func() (err error) { c, err = net.Dial("udp", addr); return err }); err != nil {
		return err
	}
	defer c.Close()
	for i := 0; i < n; i++ {
		if _, err := c.Write([]byte("probe")); err != nil {
			return fmt.Errorf("udp to %s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// checkNoPanic fails the test if the LSR process died or logged a panic.
func checkNoPanic(t *testing.T, s *seedProc) {
	t.Helper()
	if st := s.lsr.process().ProcessState; st != nil {
		t.Errorf("the LSR exited: %v", st)
	}
	if l := s.lsr.logs.String(); strings.Contains(l, "panic") || strings.Contains(l, "goroutine ") {
		t.Errorf("the LSR log shows a panic:\n%s", l)
	}
}

// TestFaultLSRRestart stops the LSR process (SIGTERM) in the middle of a
// 64 MiB transfer, while the sender keeps writing, and starts it again
// 1.5 s later: the TCP connection between ns0 and ns2 retransmits across
// the gap and completes intact through the new process. It runs with ns0's
// default TCP settings and with RACK off, whose recovery times differ (the
// log says; README "Reliability").
func TestFaultLSRRestart(t *testing.T) {
	bin := rootBinary(t)
	for _, c := range []struct{ name, conf0 string }{
		{"default", ""},
		{"rack_off", "set tcp rack off\n"},
	} {
		t.Run(c.name, func(t *testing.T) { lsrRestart(t, bin, c.conf0) })
	}
}

func lsrRestart(t *testing.T, bin, conf0 string) {
	s := newSeedProc(t, bin, "fr", seedOptions{conf0: conf0})
	tcp0 := s.n0.Report().TCP
	// With RACK (the default) recovery after the gap often takes tens of
	// seconds here, once over two minutes: hence the generous limit.
	el := s.transferWithFault(t, faultSize, 3*time.Minute, func() error {
		if err := s.lsr.stop(); err != nil {
			return fmt.Errorf("LSR exit after SIGTERM: %v (want 0)", err)
		}
		time.Sleep(1500 * time.Millisecond)
		return s.lsr.tryStart()
	})
	tcp1 := s.n0.Report().TCP
	r := s.lsr.mustReport()
	t.Logf("64 MiB with an LSR restart intact in %v (%.0f Mbit/s); ns0 TCP retransmits %d, timeouts %d; new LSR ILM hits %d",
		el.Round(time.Millisecond), mbits(faultSize, el), tcp1.Retransmits-tcp0.Retransmits, tcp1.Timeouts-tcp0.Timeouts, ilmHits(r))
	if ilmHits(r) == 0 {
		t.Errorf("the restarted LSR forwarded nothing (ILM hits 0): the rest of the transfer did not cross it")
	}
	if tcp1.Timeouts == tcp0.Timeouts && tcp1.Retransmits == tcp0.Retransmits {
		t.Errorf("ns0 TCP neither retransmitted nor timed out across a 1.5 s LSR outage")
	}
	if tcp1.EstablishedResets != tcp0.EstablishedResets {
		t.Errorf("ns0 TCP established resets %d -> %d: the connection was reset", tcp0.EstablishedResets, tcp1.EstablishedResets)
	}
	checkNoPanic(t, s)
}
