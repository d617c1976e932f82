package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// TestUDPExampleNonRoot runs examples/udp as any user may: `mplsnode
// netserver --config peer.conf` and `mplsnode netperf --config host.conf`,
// both as nobody with every capability set empty (setpriv, no new
// privileges), in a namespace of the test's own. TCP_STREAM runs over
// label 100, carried in UDP datagrams over the namespace's loopback, and
// must move data with the host's packets labelled.
func TestUDPExampleNonRoot(t *testing.T) {
	netns.SkipUnlessRoot(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	ns := netns.New(t, "mu7")
	bin := buildBinary(t)
	openToAll(t, filepath.Dir(bin), 0o755)
	dir := filepath.Dir(bin)
	for _, f := range []string{"host.conf", "peer.conf"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "udp", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wrap := []string{"ip", "netns", "exec", ns.Name(), setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
		"--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs"}
	srv := exec.Command(wrap[0], append(wrap[1:], bin, "netserver", "--config", filepath.Join(dir, "peer.conf"), "-p", "12865")...)
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			srv.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(srvOut.String(), "netserver listening") {
		if time.Now().After(deadline) {
			t.Fatalf("netserver did not start: %s", srvOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cli := exec.Command(wrap[0], append(wrap[1:], bin, "netperf", "--config", filepath.Join(dir, "host.conf"),
		"-H", "10.10.10.10", "-t", "TCP_STREAM", "-l", "2")...)
	var out bytes.Buffer
	cli.Stdout, cli.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cli.Wait() }()
	select {
	case err = <-done:
	case <-time.After(90 * time.Second):
		cli.Process.Kill()
		<-done
		t.Fatalf("netperf did not end in 90 s: %s", out.String())
	}
	if err != nil {
		t.Fatalf("netperf: %v\n%s\nserver: %s", err, out.String(), srvOut.String())
	}
	// The result line: send/recv sizes, time, then Mbit/s; and the
	// host's counters: every data packet pushed label 100 (FIB pushes).
	res := regexp.MustCompile(`(?m)^\s*\d+\s+\d+\s+\d+\s+[\d.]+\s+([\d.]+)\s*$`).FindStringSubmatch(out.String())
	ftn := regexp.MustCompile(`mu0: .* FIB pushes (\d+)`).FindStringSubmatch(out.String())
	if res == nil || ftn == nil {
		t.Fatalf("netperf output lacks the result or the counters:\n%s", out.String())
	}
	mbps, _ := strconv.ParseFloat(res[1], 64)
	hits, _ := strconv.Atoi(ftn[1])
	if mbps <= 0 || hits < 1000 {
		t.Errorf("%.1f Mbit/s with %d labelled packets; want data over the label", mbps, hits)
	}
	t.Logf("as nobody, no capabilities: %.0f Mbit/s, %d packets labelled", mbps, hits)
}
