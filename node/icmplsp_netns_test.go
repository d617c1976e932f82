package node_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/planetest"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
)

// TestTracerouteThroughLabelOnlyLSR runs the kernel's traceroute (Debian
// traceroute, -e for the RFC 4950 objects) from kernel host A through
// three nodes to kernel host B:
//
//	A --- L (LER: pushes 100 towards B's subnet, pops 400 to IP)
//	  --- R (LSR: swaps 100 to 200 and 300 to 400; no IP route towards A)
//	  --- E (LER: pops 200 to IP, pushes 300 towards A's subnet) --- B
//
// The probe that expires at R finds no IP route back to A: R must send its
// time exceeded down the LSP the probe was on (RFC 3032 §2.3.2), under
// label 200 to E, which routes it back to A over 300/400. The traceroute
// must show R's address at hop 2 with label 100 in the extension, where it
// showed `*`; an AF_PACKET tap on R's link to E sees the error leave
// labelled 200 with the received stack (label 100, TTL 1) in its RFC 4950
// object (tshark's decode), and R counts it as icmp_via_lsp with no
// icmp_failed. Both LSR planes (the XDP program passes the expiring label
// up to userspace). Checked by planting: with icmpViaLSP reporting false
// at once (the drop as before), hop 2 reads `*` and the tap sees nothing.
func TestTracerouteThroughLabelOnlyLSR(t *testing.T) {
	netns.SkipUnlessRoot(t)
	wiretest.Need(t)
	traceroute, err := exec.LookPath("traceroute")
	if err != nil {
		t.Skip("needs traceroute (Debian package traceroute; scripts/deps.sh installs it)")
	}
	nsA, nsL, nsR, nsE, nsB := netns.New(t, "h2tel"), netns.New(t, "h2tel"), netns.New(t, "h2tel"), netns.New(t, "h2tel"), netns.New(t, "h2tel")
	wiretest.DisableIPv6(t, nsA)
	wiretest.DisableIPv6(t, nsB)
	vA, vLA := netns.VethPair(t, nsA, nsL)
	vLR, vRL := netns.VethPair(t, nsL, nsR)
	vRE, vER := netns.VethPair(t, nsR, nsE)
	vEB, vB := netns.VethPair(t, nsE, nsB)
	// NAPI on the kernel hosts' ends, so that the XDP program may redirect
	// to them (both modes alike).
	wiretest.GROOn(t, nsA, vA)
	wiretest.GROOn(t, nsB, vB)
	nsA.MustExec("ip", "addr", "add", "172.16.30.2/24", "dev", vA)
	nsA.MustExec("ip", "route", "add", "default", "via", "172.16.30.1")
	nsB.MustExec("ip", "addr", "add", "172.16.33.2/24", "dev", vB)
	nsB.MustExec("ip", "route", "add", "default", "via", "172.16.33.1")
	confL := fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.30.1/24 dev %[1]s
addr add 172.16.31.1/24 dev %[2]s
sysctl -w net.ipv4.ip_forward=1
route add 172.16.33.0/24 encap mpls 100 via inet 172.16.31.2
-f mpls route add 400 dev lo
`, vLA, vLR)
	// R: label routes only; its connected subnets do not cover A or B.
	confR := fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.31.2/24 dev %[1]s
addr add 172.16.32.1/24 dev %[2]s
-f mpls route add 100 as to 200 via inet 172.16.32.2
-f mpls route add 300 as to 400 via inet 172.16.31.1
`, vRL, vRE)
	confE := fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.32.2/24 dev %[1]s
addr add 172.16.33.1/24 dev %[2]s
sysctl -w net.ipv4.ip_forward=1
route add 172.16.30.0/24 encap mpls 300 via inet 172.16.32.1
-f mpls route add 200 dev lo
`, vER, vEB)

	for _, m := range planetest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			startNode(t, nsL, "l.conf", confL+m.Conf())
			nR := startNode(t, nsR, "r.conf", confR+m.Conf())
			startNode(t, nsE, "e.conf", confE+m.Conf())
			// Both ways through the LSPs, every neighbour resolved.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nsA.Name(), "ping", "-c", "3", "-i", "0.2", "-W", "5", "172.16.33.2").CombinedOutput(); err != nil {
				t.Fatalf("ping A to B: %v\n%s", err, out)
			}
			before := planetest.Counts(nR.Report())
			// R's time exceeded leaving on its link to E: MPLS, label 200
			// alone, then IPv4 ICMP type 11 (E's own, under 300, comes
			// back the other way).
			tap := wiretest.NewTapBoth(t, nsR, vRE, wiretest.FirstN(1, func(f []byte) bool {
				return len(f) > 38 && f[12] == 0x88 && f[13] == 0x47 && int(f[14])<<12|int(f[15])<<4|int(f[16])>>4 == 200 &&
					f[16]&1 == 1 && f[18]>>4 == 4 && f[27] == 1 && f[38] == 11
			}))
			tctx, tcancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer tcancel()
			out, err := exec.CommandContext(tctx, "ip", "netns", "exec", nsA.Name(), traceroute, "-n", "-e", "-q", "1", "-N", "1", "-w", "3", "-m", "6", "172.16.33.2").CombinedOutput()
			if err != nil {
				t.Fatalf("traceroute: %v\n%s", err, out)
			}
			want := []string{
				"1 172.16.30.1",
				"2 172.16.31.2 <MPLS:L=100,E=0,S=1,T=1>",
				"3 172.16.32.2 <MPLS:L=200,E=0,S=1,T=1>",
				"4 172.16.33.2",
			}
			if got := traceHops(string(out)); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("traceroute A to B:\n got %q\nwant %q\n%s", got, want, out)
			}
			// tshark lists the outer IP header's addresses, then the
			// quoted probe's.
			rows := wiretest.Decode(t, tap.Wait(1), "mpls.label", "mpls.bottom", "ip.src", "ip.dst", "icmp.type", "icmp.code", "icmp.mpls.label", "icmp.mpls.s", "icmp.mpls.ttl", "ip.checksum.status")
			wantRow := "200|1|172.16.31.2,172.16.30.2|172.16.30.2,172.16.33.2|11|0|100|1|1|1,1"
			if len(rows) != 1 || strings.Join(rows[0], "|") != wantRow {
				t.Errorf("R's time exceeded towards E: got %v, want %s", rows, wantRow)
			}
			d := planetest.Delta(before, planetest.Counts(nR.Report()))
			if d["icmp_via_lsp"] != 1 || d["icmp_sent"] != 1 || d["drop icmp_failed"] != 0 {
				t.Errorf("R's counters moved by %v, want icmp_via_lsp 1, icmp_sent 1, no icmp_failed", d)
			}
		})
	}
}

// traceHops returns traceroute's hop lines as "HOP ADDR [EXTENSION]",
// without the round-trip times.
func traceHops(out string) []string {
	var hops []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] == "traceroute" {
			continue
		}
		hop := f[0] + " " + f[1]
		if len(f) > 2 && strings.HasPrefix(f[2], "<") {
			hop += " " + f[2]
		}
		hops = append(hops, hop)
	}
	return hops
}
