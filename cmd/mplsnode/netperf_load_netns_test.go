package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// TestNetperfRRUnderLoad is issue 15's TCP_RR under load in the seed
// topology: kernel netperf clients in ns0, the kernel forwarding in ns1,
// and two servers behind it side by side, `mplsnode netserver --config`
// (the userspace stack on an AF_PACKET link, ns2) and `mplsnode netserver
// --kernel` (ns3). Against each, 3 TCP_STREAM and 3 TCP_MAERTS run while
// one TCP_RR is measured.
//
// What it asserts is what the fix guarantees, not a rate (the machine may
// be loaded): the --config server's link loses nothing at its receive ring
// (lower_rx_overflow, lower_rx_truncated), because the stack advertises no
// more window than the ring absorbs (stack.TCPOptions.ReceiveBufferMax,
// bounded by afpacket.Endpoint.ReceiveCapacity over ReceiveWindowFlows).
// Both TCP_RR rates, their ratio and the RR connection's retransmissions
// are logged. With the bound planted away (8 MiB windows, as before) the
// three STREAM senders overran the ring in every run here (TCP_RR fell to
// 0.24-0.30 of the kernel's, lower_rx_truncated 178-310 in 8-10 s runs) and
// this test failed. With the bound, the ratio was still 0.22-0.38 in most
// runs: the server cut its MAERTS data into 1500-byte frames, some 45 per
// 64 KiB, each forwarded and received by the kernel on its own, and the
// RR's response shared the kernel's backlog with them (a capture on ns1
// put a median 2.0 ms, mean 3.4 ms, between a request leaving ns1 and its
// response arriving there; the client's side took a mean 0.17 ms). Since unlabelled GSO packets leave whole (link/mplsendpoint,
// writeSlots), it logged 0.50-2.02 in 16 runs, median 0.94.
func TestNetperfRRUnderLoad(t *testing.T) {
	netns.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("-short: six bulk flows for a few seconds")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	ns0, ns1 := netns.New(t, "r0"), netns.New(t, "r1")
	nsU, nsK := netns.New(t, "ru"), netns.New(t, "rk")
	v01, v10 := netns.VethPair(t, ns0, ns1)
	v1u, vu := netns.VethPair(t, ns1, nsU)
	v1k, vk := netns.VethPair(t, ns1, nsK)
	ns0.MustExec("ip", "addr", "add", "172.16.20.20/24", "dev", v01)
	ns0.MustExec("ip", "route", "add", "172.16.21.0/24", "via", "172.16.20.21")
	ns0.MustExec("ip", "route", "add", "172.16.22.0/24", "via", "172.16.20.21")
	ns1.MustExec("ip", "addr", "add", "172.16.20.21/24", "dev", v10)
	ns1.MustExec("ip", "addr", "add", "172.16.21.21/24", "dev", v1u)
	ns1.MustExec("ip", "addr", "add", "172.16.22.21/24", "dev", v1k)
	ns1.MustExec("sysctl", "-qw", "net.ipv4.ip_forward=1")
	nsK.MustExec("ip", "addr", "add", "172.16.22.22/24", "dev", vk)
	nsK.MustExec("ip", "route", "add", "172.16.20.0/24", "via", "172.16.22.21")
	conf := filepath.Join(dir, "ns2.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.21.22/24 dev %[1]s
route add 172.16.20.0/24 via 172.16.21.21
`, vu)), 0o644); err != nil {
		t.Fatal(err)
	}

	startServer := func(ns *netns.NS, args ...string) (*exec.Cmd, *lockedBuffer) {
		logs := new(lockedBuffer)
		cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name(), bin, "netserver", "-p", "12865", "-v"}, args...)...)
		cmd.Stderr = logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitFor(t, logs, "netserver listening")
		return cmd, logs
	}
	srvU, logsU := startServer(nsU, "--config", conf)
	_, logsK := startServer(nsK, "--kernel")

	// load runs the bulk flows and the TCP_RR against host and returns
	// the RR's transactions a second and its retransmissions.
	load := func(host string, logs *lockedBuffer) (rate float64, retrans string) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		netperf := func(args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns0.Name(), bin, "netperf", "--kernel", "-H", host, "-P", "0"}, args...)...)
		}
		var bulk []*exec.Cmd
		var outs []*lockedBuffer
		for _, test := range []string{"TCP_STREAM", "TCP_MAERTS", "TCP_STREAM", "TCP_MAERTS", "TCP_STREAM", "TCP_MAERTS"} {
			cmd := netperf("-t", test, "-l", "6")
			out := new(lockedBuffer)
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			bulk = append(bulk, cmd)
			outs = append(outs, out)
		}
		time.Sleep(time.Second) // the bulk flows reach their windows
		out, err := netperf("-t", "TCP_RR", "-l", "3", "--", "-k", "THROUGHPUT,LOCAL_TRANSPORT_RETRANS").CombinedOutput()
		for i, cmd := range bulk {
			if err := cmd.Wait(); err != nil {
				t.Errorf("bulk flow %d to %s: %v: %s\nserver: %s", i, host, err, outs[i].String(), logs.String())
			}
		}
		if err != nil {
			t.Fatalf("TCP_RR to %s: %v: %s\nserver: %s", host, err, out, logs.String())
		}
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, "THROUGHPUT="); ok {
				rate, _ = strconv.ParseFloat(v, 64)
			}
			if v, ok := strings.CutPrefix(l, "LOCAL_TRANSPORT_RETRANS="); ok {
				retrans = v
			}
		}
		if rate <= 0 {
			t.Fatalf("TCP_RR to %s: no transactions: %s", host, out)
		}
		return rate, retrans
	}
	rateU, retransU := load("172.16.21.22", logsU)
	rateK, retransK := load("172.16.22.22", logsK)
	t.Logf("TCP_RR under 3 TCP_STREAM + 3 TCP_MAERTS: --config %.0f/s (RR retransmissions %s), --kernel %.0f/s (%s), ratio %.2f",
		rateU, retransU, rateK, retransK, rateU/rateK)

	// The --config server prints its link and TCP counters when it stops.
	srvU.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- srvU.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("netserver --config did not stop on SIGINT:\n%s", logsU.String())
	}
	var linkLine string
	for _, l := range strings.Split(logsU.String(), "\n") {
		if strings.HasPrefix(l, "mplsnode "+vu+":") || strings.HasPrefix(l, "mplsnode TCP:") {
			t.Log(l)
		}
		if strings.HasPrefix(l, "mplsnode "+vu+":") {
			linkLine = l
		}
	}
	if linkLine == "" {
		t.Fatalf("no counters of %s in the server's summary:\n%s", vu, logsU.String())
	}
	for _, drop := range []string{"lower_rx_overflow", "lower_rx_truncated"} {
		if strings.Contains(linkLine, "drop "+drop) {
			t.Errorf("the receive ring lost frames under load (%s): the advertised windows exceed what it absorbs\n%s", drop, linkLine)
		}
	}
}
