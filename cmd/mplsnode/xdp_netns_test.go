package main

import (
	"slices"
	"testing"
	"time"
)

// TestSeedXDP runs the seed topology with the LSR's label switch as an XDP
// program (set forward xdp on): with NAPI on the kernel's end of the
// egress veth (GRO on, as `ethtool -K PEER gro on`), label 100 is popped
// inside the kernel and the data arrives intact; with GRO off there, the
// node sees that the egress link cannot take redirects and every frame
// takes the userspace label switch, still intact. Guards: the program's
// pop (a wrong TTL or ethertype loses the transfer), the egress health
// check (with it forced on, the GRO-off run loses every frame).
func TestSeedXDP(t *testing.T) {
	bin := buildBinary(t)
	const size = 32 << 20
	for _, c := range []struct {
		name   string
		gro    string
		kernel bool // frames popped in the kernel
	}{{"peer_gro_on", "on", true}, {"peer_gro_off", "off", false}} {
		t.Run(c.name, func(t *testing.T) {
			s := newSeedProc(t, bin, "xd", seedOptions{conf1: "set forward xdp on\n", beforeLSR: func(s *seedProc) {
				s.ns2.MustExec("ethtool", "-K", s.v21, "gro", c.gro)
			}})
			waitFor(t, &s.lsr.logs, "XDP label switch on")
			d := s.transfer(t, size, 2*time.Minute, nil)
			r := s.lsr.mustReport()
			if r.XDP == nil {
				t.Fatalf("no XDP section in the LSR's report; log:\n%s", s.lsr.logs.String())
			}
			x := r.XDP
			t.Logf("ns0 TCP retransmits %d timeouts %d", s.n0.Report().TCP.Retransmits, s.n0.Report().TCP.Timeouts)
			t.Logf("%d MiB in %v (%.0f Mbit/s); XDP popped_ip %d, passed %v, egress ok %v; userspace popped_ip %d",
				size>>20, d.Round(time.Millisecond), mbits(size, d), x.PoppedIP, x.Passed, x.EgressOK, r.LabelSwitch.PoppedIP)
			// A 32 MiB transfer is over 20,000 labelled segments of at
			// most 1496 bytes.
			const minSegments = size / 1500
			if c.kernel {
				if x.PoppedIP < minSegments {
					t.Errorf("XDP popped %d frames, want at least %d (the transfer's segments)", x.PoppedIP, minSegments)
				}
				if !slices.Contains(x.EgressOK, s.v12) {
					t.Errorf("egress links taking redirects %v, want %s among them", x.EgressOK, s.v12)
				}
				return
			}
			if x.PoppedIP != 0 || x.Passed["egress_down"] < minSegments || r.LabelSwitch.PoppedIP < minSegments {
				t.Errorf("peer GRO off: XDP popped %d (want 0), passed egress_down %d and userspace popped %d (want >= %d)",
					x.PoppedIP, x.Passed["egress_down"], r.LabelSwitch.PoppedIP, minSegments)
			}
		})
	}
}
