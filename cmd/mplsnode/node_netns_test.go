package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/internal/netns"
	"github.com/mplsnode/mplsnode/node"
)

// lockedBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls until s's text contains sub.
func waitFor(t *testing.T, s *lockedBuffer, sub string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.String(), sub) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", sub, s.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunSIGHUP runs the seed topology's LSR (ns1) as an `mplsnode run`
// process and reloads it with SIGHUP, once with a good file and once with a
// broken one, while 64 MiB cross it; SIGTERM then stops it with exit 0.
func TestRunSIGHUP(t *testing.T) {
	netns.SkipUnlessRoot(t)
	bin := filepath.Join(t.TempDir(), "mplsnode")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	ns0, ns1, ns2 := netns.New(t, "h0"), netns.New(t, "h1"), netns.New(t, "h2")
	v01, v10 := netns.VethPair(t, ns0, ns1)
	v12, v21 := netns.VethPair(t, ns1, ns2)
	ns2.MustExec("ip", "addr", "add", "172.16.21.22/24", "dev", v21)
	ns2.MustExec("ip", "addr", "add", "10.10.10.10/32", "dev", "lo")
	ns2.MustExec("ip", "route", "add", "172.16.20.0/24", "via", "172.16.21.21")

	conf1 := fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.20.21/24 dev %[1]s
addr add 172.16.21.21/24 dev %[2]s
-f mpls route add 100 via inet 172.16.21.22 dev %[2]s
`, v10, v12)
	file := filepath.Join(t.TempDir(), "ns1.conf")
	if err := os.WriteFile(file, []byte(conf1), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cmd := exec.Command("ip", "netns", "exec", ns1.Name(), bin, "run", "-c", file, "--log-format", "json")
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	waitFor(t, &logs, `"msg":"node started"`)

	cfg0, err := config.Parse("ns0.conf", strings.NewReader(fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.20.20/24 dev %[1]s
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 mtu lock 1496
`, v01)))
	if err != nil {
		t.Fatal(err)
	}
	var n0 *node.Node
	if err := ns0.Run(func() (err error) { n0, err = node.New(cfg0, node.Options{}); return err }); err != nil {
		t.Fatal(err)
	}
	defer n0.Close()

	var ln net.Listener
	if err := ns2.Run(func() (err error) { ln, err = net.Listen("tcp", "10.10.10.10:0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan [32]byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- [32]byte{}
			return
		}
		defer c.Close()
		h := sha256.New()
		io.Copy(h, c)
		got <- [32]byte(h.Sum(nil))
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := n0.Stack().DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v\n%s", err, logs.String())
	}
	const size = 64 << 20
	h := sha256.New()
	buf := make([]byte, 64<<10)
	for sent := 0; sent < size; sent += len(buf) {
		for i := range buf {
			buf[i] = byte(sent>>16 + i)
		}
		h.Write(buf)
		if _, err := c.Write(buf); err != nil {
			t.Fatalf("write at %d: %v\n%s", sent, err, logs.String())
		}
		switch sent {
		case size / 4: // a good reload: one more label route
			os.WriteFile(file, []byte(conf1+"-f mpls route add 300 via inet 172.16.21.22\n"), 0o644)
			cmd.Process.Signal(syscall.SIGHUP)
			waitFor(t, &logs, `"msg":"node reloaded"`)
		case size / 2: // a broken file: rejected, the old tables stay
			os.WriteFile(file, []byte(conf1+"-f mpls route add 3 via inet 172.16.21.22\n"), 0o644)
			cmd.Process.Signal(syscall.SIGHUP)
			waitFor(t, &logs, `"msg":"reload rejected; the old tables stay"`)
		}
	}
	c.Close()
	if sum := <-got; sum != [32]byte(h.Sum(nil)) {
		t.Fatalf("got sha256 %x, want %x", sum, h.Sum(nil))
	}
	if !strings.Contains(logs.String(), "ns1.conf:6:") {
		t.Errorf("the rejected reload does not name the bad line ns1.conf:6:\n%s", logs.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("mplsnode run after SIGTERM: %v (want exit 0)\n%s", err, logs.String())
	}
}
