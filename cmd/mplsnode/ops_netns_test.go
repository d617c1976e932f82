package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/netns"
)

// TestLinkMTULargerThanInterface gives a link `mtu 9000` on a veth of MTU
// 1500: check (run where the interface exists) and run both reject it at
// the mtu value with exit code 2, and run opens no link ("node started"
// never appears). Planted bug: without node.CheckInterfaces both accepted
// it (check said ok, run started forwarding with frames the veth drops).
func TestLinkMTULargerThanInterface(t *testing.T) {
	netns.SkipUnlessRoot(t)
	bin := buildBinary(t)
	a, b := netns.New(t, "mtua"), netns.New(t, "mtub")
	va, _ := netns.VethPair(t, a, b)
	conf := filepath.Join(t.TempDir(), "big.conf")
	text := fmt.Sprintf("link add %s type afpacket mtu 9000\naddr add 10.1.0.1/24 dev %s\n", va, va)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	col := len("link add "+va+" type afpacket mtu ") + 1
	want := fmt.Sprintf("%s:1:%d: link %s: mtu 9000 is larger than the interface's MTU 1500", conf, col, va)
	for _, args := range [][]string{
		{"check", "-c", conf},
		{"run", "-c", conf, "--control-socket", ""},
	} {
		// A run that accepts the file would run until killed: 20 s.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", a.Name(), bin}, args...)...)
		out, err := cmd.CombinedOutput()
		cancel()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), want) {
			t.Errorf("mplsnode %s: %v\n%s\nwant exit code 2 and %q", args[0], err, out, want)
		}
		if strings.Contains(string(out), "node started") {
			t.Errorf("mplsnode %s opened its links:\n%s", args[0], out)
		}
	}
	// The same file passes where the interface does not exist (check runs
	// anywhere), and an mtu within the interface's passes everywhere.
	if out, err := exec.Command(bin, "check", "-c", conf).CombinedOutput(); err != nil {
		t.Errorf("check outside the namespace: %v: %s", err, out)
	}
	if err := os.WriteFile(conf, []byte(strings.Replace(text, "9000", "1500", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Exec(bin, "check", "-c", conf); err != nil {
		t.Errorf("mtu 1500 on a 1500 veth: %v: %s", err, out)
	}
}

// TestSecondNodeRefuses starts a node (ns b, one veth to the kernel in ns
// a), then a second `mplsnode run` on the same config: once sharing the
// control socket, once sharing only the metrics address. The second must
// exit 1 within 20 s naming the first one's pid, log no "node started",
// and record nothing in its --pcap file (it captures every frame its links
// would send or receive: the kernel in ns a connects to the node meanwhile, so a
// second node that opened the link would record the ARP request and its
// answer). Planted bug (the listeners claimed after node.New, as before):
// the second opens the link, answers ARP next to the first, logs
// "in use" and keeps running, so the wait for its exit times out.
func TestSecondNodeRefuses(t *testing.T) {
	netns.SkipUnlessRoot(t)
	bin := buildBinary(t)
	a, b := netns.New(t, "dupa"), netns.New(t, "dupb")
	va, vb := netns.VethPair(t, a, b)
	a.MustExec("ip", "addr", "add", "172.16.20.20/24", "dev", va)
	conf := fmt.Sprintf("link add %s type afpacket\naddr add 172.16.20.21/24 dev %s\n", vb, vb)
	first := startLSR(t, bin, b, conf)
	const metricsAddr = "127.0.0.1:9477"
	// The first node's metrics: a second node started with the first's
	// arguments plus metrics is the same node for this test's purpose; a
	// plain listener in the first process's place would hide the pid, so
	// restart the first with metrics on.
	if err := first.stop(); err != nil {
		t.Fatalf("first node: %v", err)
	}
	first.extra = []string{"--metrics-addr", metricsAddr}
	first.start()
	if err := knock(a, "172.16.20.21:9"); err != nil {
		t.Fatalf("the first node does not answer: %v", err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"same control socket", []string{"--control-socket", first.sock},
			fmt.Sprintf("control socket %s is in use by pid %d", first.sock, first.pid())},
		{"same metrics address", []string{"--control-socket", filepath.Join(dir, "other.sock"), "--metrics-addr", metricsAddr},
			fmt.Sprintf("metrics address %s is in use by pid %d", metricsAddr, first.pid())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pcapFile := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".pcap")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			args := append([]string{"netns", "exec", b.Name(), bin, "run", "-c", first.conf, "--pcap", pcapFile}, tc.args...)
			cmd := exec.CommandContext(ctx, "ip", args...)
			var logs lockedBuffer
			cmd.Stderr = &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// Traffic for the node while the second one lives.
			var knockErr error
			for range 3 {
				if err := knock(a, "172.16.20.21:9"); err != nil {
					knockErr = err
				}
				time.Sleep(200 * time.Millisecond)
			}
			err := <-done
			if cmd.ProcessState.ExitCode() != exitFailure || !strings.Contains(logs.String(), tc.want) {
				t.Errorf("second node: %v (exit code %d)\n%s\nwant exit code 1 and %q", err, cmd.ProcessState.ExitCode(), logs.String(), tc.want)
			}
			if strings.Contains(logs.String(), "node started") {
				t.Errorf("the second node opened its links:\n%s", logs.String())
			}
			if fi, err := os.Stat(pcapFile); err == nil {
				t.Errorf("the second node created its capture (%d bytes): it opened the links", fi.Size())
			}
			if knockErr != nil {
				t.Errorf("the first node during the second's start: %v", knockErr)
			}
		})
	}
	// The first node is unharmed: its control socket answers.
	if _, err := first.report(); err != nil {
		t.Errorf("first node after the refusals: %v", err)
	}
}

// knock connects from the kernel in ns to addr, a closed port of a node:
// the node's stack answers the ARP request and then the SYN with a reset.
// It returns nil on that answer (connection refused).
func knock(ns *netns.NS, addr string) error {
	return ns.Run(func() error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
			return fmt.Errorf("%s accepted a connection; want a reset", addr)
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		return err
	})
}
