package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/proc"
	"github.com/mplsnode/mplsnode/mplstest"
)

// manyRoutes returns n route lines towards ns2 (172.16.21.22): IPv4 /24
// and /32, IPv6 /48 and /64 (over the IPv4 next hop with a label: 6PE),
// a quarter labelled; none covers the seed's traffic (10.10.10.10,
// 172.16.20.0/24).
func manyRoutes(n int) string {
	var b strings.Builder
	b.Grow(n * 60)
	for i := range n {
		p := mplstest.ScalePrefix(i)
		switch {
		case p.Addr().Is6():
			fmt.Fprintf(&b, "route add %s encap mpls %d via inet 172.16.21.22\n", p, 16+i%5000)
		case i%4 == 0:
			fmt.Fprintf(&b, "route add %s encap mpls %d via 172.16.21.22\n", p, 16+i%5000)
		default:
			fmt.Fprintf(&b, "route add %s via 172.16.21.22\n", p)
		}
	}
	return b.String()
}

// TestRunManyRoutes loads 200,000 routes into the seed's LSR (an `mplsnode
// run` process) with SIGHUP while 800 MiB (4 KiB a route) cross it on one connection: the
// flow finishes whole and no node drops a packet (the FIB is swapped in
// one atomic step; gVisor's route table, which does not hold the FIB,
// does not change). Then a restart with the same file is stopped by
// SIGTERM while it loads: the process exits 0 at once, saying so, without
// having started (before, a loading node ignored SIGTERM until it had
// loaded). Planted bug: running the load on the main goroutine again makes
// the second half fail (the log shows "node started").
//
// MPLSNODE_MANY_ROUTES=1000000 runs it at the million routes (CI
// uses 200,000 for time); the transfer grows with the count so that the
// reload ends while the flow still runs (the log line says when each
// ended).
func TestRunManyRoutes(t *testing.T) {
	netns.SkipUnlessRoot(t)
	routes := 200_000
	if v := os.Getenv("MPLSNODE_MANY_ROUTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MPLSNODE_MANY_ROUTES=%q: want a positive count", v)
		}
		routes = n
	}
	s := newSeedProc(t, buildBinary(t), "m", seedOptions{})
	// 4 KiB a route (800 MiB at 200,000, 4 GiB at a million): the load
	// takes about as long per route, so the swap lands mid-flow.
	size := max(int64(64<<20), int64(routes)*4<<10)
	big := s.conf1 + manyRoutes(routes)
	reloaded := false
	took := s.transfer(t, size, 10*time.Minute, func(sent int64) {
		if !reloaded && sent >= size/4 {
			s.lsr.writeConf(big)
			s.lsr.signal(syscall.SIGHUP)
			reloaded = true
		}
	})
	ended := time.Now()
	waitFor(t, &s.lsr.logs, `"msg":"node reloaded"`)
	for _, line := range strings.Split(s.lsr.logs.String(), "\n") {
		if strings.Contains(line, `"msg":"node reloaded"`) {
			t.Logf("%d MiB in %v, ended %s; %s", size>>20, took.Round(time.Millisecond), ended.UTC().Format("15:04:05.000"), line)
		}
	}
	if want := fmt.Sprintf(`"routes":%d`, routes); !strings.Contains(s.lsr.logs.String(), want) {
		t.Errorf("the reload does not say it loaded %d routes:\n%s", routes, s.lsr.logs.String())
	}
	checkNoDrops(t, "LSR", s.lsr.mustReport())
	checkNoDrops(t, "ns0", s.n0.Report())
	// The flow crossing the LSR after the reload too.
	s.transfer(t, 1<<20, time.Minute, nil)

	// SIGTERM while loading.
	if err := s.lsr.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	cmd := exec.Command("ip", "netns", "exec", s.ns1.Name(), s.lsr.bin, "run", "-c", s.lsr.conf,
		"--control-socket", s.lsr.sock, "--log-format", "json")
	var logs lockedBuffer
	cmd.Stderr = &logs
	proc.Start(t, cmd)
	waitFor(t, &logs, `"msg":"loading config"`)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("mplsnode run stopped while loading: %v, want exit 0\n%s", err, logs.String())
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("mplsnode run did not exit within a minute of SIGTERM while loading:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), startedMsg) || !strings.Contains(logs.String(), `"msg":"stopped while loading the config"`) {
		t.Errorf("want the node stopped while loading, not started:\n%s", logs.String())
	}
}
