package main

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/lspweb"
	"github.com/mplsnode/mplsnode/link/udp"
	"github.com/mplsnode/mplsnode/stack"
)

// childEnv makes the test binary run main instead of the tests (the
// unprivileged child of TestFetchUnprivileged).
const childEnv = "UDPFETCH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Args = append([]string{"udpfetch"}, strings.Fields(os.Getenv("UDPFETCH_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// freePort returns a UDP port free on 127.0.0.1 now.
func freePort(t *testing.T) uint16 {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

// lsr starts the far end: a stack on a udp link at 127.0.0.1:port whose
// peer is 127.0.0.1:peer, popping label 100, with a web server on
// 10.10.10.10:80.
func lsr(t *testing.T, port, peer uint16) {
	t.Helper()
	lo := netip.MustParseAddr("127.0.0.1")
	srv, err := stack.New(lspweb.Config(stack.Link{Name: "mu1", Kind: stack.LinkUDP,
		UDP: udp.Options{Local: netip.AddrPortFrom(lo, port), Remote: netip.AddrPortFrom(lo, peer)}}))
	if err != nil {
		t.Fatal(err)
	}
	lspweb.Serve(t, srv)
}

// TestFetchUnprivileged runs udpfetch as user nobody with no capability at
// all (setpriv: every set empty, no new privileges) against a stack that
// pops label 100 behind a udp link on loopback: the page comes back over
// the label, through ordinary UDP sockets.
func TestFetchUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to user nobody (run as root)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	mine, peer := freePort(t), freePort(t)
	lsr(t, peer, mine)
	// The child is this test binary, copied where nobody may run it.
	dir, err := os.MkdirTemp("", "udpfetch")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "udpfetch")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	args := "-local 127.0.0.1:" + itoa(mine) + " -remote 127.0.0.1:" + itoa(peer) +
		" -addr 172.16.20.20/24 -via 172.16.20.21 -labels 100 -timeout 20s http://10.10.10.10/"
	// The child reports its own credentials first (/proc/self/status), so
	// the test sees what the kernel gave it.
	cmd := exec.Command(setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
		"--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs",
		"sh", "-c", `grep -E '^(Uid|CapEff|CapPrm|CapBnd|CapAmb):' /proc/self/status >&2; exec "$0"`, bin)
	cmd.Env = append(os.Environ(), childEnv+"=1", "UDPFETCH_ARGS="+args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("udpfetch did not end in 60 s: %s", stderr.String())
	}
	if err != nil {
		t.Fatalf("udpfetch: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if got := stdout.String(); got != lspweb.Page {
		t.Errorf("got page %q", got)
	}
	for _, want := range []string{"Uid:\t65534\t65534\t65534\t65534", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the child's status lacks %q:\n%s", want, stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), "udpfetch: 200 OK") {
		t.Errorf("stderr: %s", stderr.String())
	}
	t.Logf("child: %s", stderr.String())
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }
