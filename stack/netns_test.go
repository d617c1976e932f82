package stack_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/stack"
)

// newStackIn builds a stack whose links are opened inside ns.
func newStackIn(t *testing.T, ns *netns.NS, cfg stack.Config) *stack.Stack {
	t.Helper()
	var s *stack.Stack
	if err := ns.Run(func() (err error) {
		s, err = stack.New(cfg)
		return err
	}); err != nil {
		t.Fatalf("stack.New in %s: %v", ns.Name(), err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// kernelListen opens a kernel TCP listener inside ns.
func kernelListen(t *testing.T, ns *netns.NS, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := ns.Run(func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("listen %s in %s: %v", addr, ns.Name(), err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// exchange sends n random bytes each way over c (the peer echoes a hash
// of what it got and sends its own stream) and checks both SHA-256 sums.
// peer is the other end of the connection.
func exchange(t *testing.T, c, peer net.Conn, n int64) {
	t.Helper()
	// Every read and write ends by this deadline: a stalled exchange fails
	// with the bytes each side saw instead of hanging.
	deadline := time.Now().Add(120 * time.Second)
	for _, conn := range []net.Conn{c, peer} {
		conn.SetDeadline(deadline)
	}
	var wg sync.WaitGroup
	check := func(name string, from, to net.Conn) {
		defer wg.Done()
		sent, got := sha256.New(), sha256.New()
		done := make(chan error, 1)
		var read int64
		go func() {
			var err error
			read, err = io.CopyN(got, to, n)
			done <- err
		}()
		if w, err := io.CopyN(io.MultiWriter(from, sent), rand.Reader, n); err != nil {
			t.Errorf("%s: write after %d of %d bytes: %v", name, w, n, err)
			return
		}
		if err := <-done; err != nil {
			t.Errorf("%s: read after %d of %d bytes: %v", name, read, n, err)
			return
		}
		if a, b := sent.Sum(nil), got.Sum(nil); string(a) != string(b) {
			t.Errorf("%s: received SHA-256 %x, sent %x", name, b, a)
		}
	}
	wg.Add(2)
	go check("ours->peer", c, peer)
	go check("peer->ours", peer, c)
	wg.Wait()
}

// acceptOne accepts one connection on ln in the background; the channel
// gets it, or nil when Accept fails.
func acceptOne(ln net.Listener) <-chan net.Conn {
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			c = nil
		}
		accepted <- c
	}()
	return accepted
}

// connect has ln accept while dial connects (timeout at most for both),
// and returns the dialled end and the accepted one, both closed when t
// ends; it fails t when the dial fails or nothing is accepted.
func connect(t *testing.T, ln net.Listener, timeout time.Duration, dial func(context.Context) (net.Conn, error)) (c, peer net.Conn) {
	t.Helper()
	accepted := acceptOne(ln)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	select {
	case peer = <-accepted:
	case <-ctx.Done():
		t.Fatalf("no connection accepted within %v", timeout)
	}
	if peer == nil {
		t.Fatal("Accept failed")
	}
	t.Cleanup(func() { peer.Close() })
	return c, peer
}

// TestAFPacketToKernel: our stack on a veth talks TCP to the Linux kernel
// in another namespace, 64 MiB each way at once.
func TestAFPacketToKernel(t *testing.T) {
	netns.SkipUnlessRoot(t)
	a, b := netns.New(t, "sa"), netns.New(t, "sb")
	va, vb := netns.VethPair(t, a, b)
	b.MustExec("ip", "addr", "add", "10.98.1.2/24", "dev", vb)
	ln := kernelListen(t, b, "10.98.1.2:5001")
	s := newStackIn(t, a, stack.Config{
		Links:     []stack.Link{{Name: va}},
		Addresses: []stack.Address{{Link: va, Prefix: netip.MustParsePrefix("10.98.1.1/24")}},
	})
	c, peer := connect(t, ln, 20*time.Second, func(ctx context.Context) (net.Conn, error) {
		c, err := s.DialContext(ctx, "tcp", "10.98.1.2:5001")
		if err != nil {
			return nil, fmt.Errorf("DialContext = %w; link stats %+v; IP %d received, %d invalid; TCP checksum errors %d", err, s.Stats().Links, s.Stats().Netstack.IP.PacketsReceived.Value(), s.Stats().Netstack.IP.MalformedPacketsReceived.Value(), s.Stats().Netstack.TCP.ChecksumErrors.Value())
		}
		return c, nil
	})
	// The receive window is bounded by the link's receive ring (2048
	// slots x 1500 bytes over stack.ReceiveWindowFlows, rounded down to a
	// power of two), also for a socket that asks for more: four flows at
	// full window fit the ring. Planted bug: the bound not applied, the
	// default receive buffer was 1 MiB and SetReadBuffer(8 MiB) got 8 MiB.
	tc := c.(*stack.TCPConn)
	if _, recv := tc.BufferSizes(); recv != 512<<10 {
		t.Errorf("receive buffer %d, want 524288 (the default ring over %d flows)", recv, stack.ReceiveWindowFlows)
	}
	tc.SetReadBuffer(8 << 20)
	if _, recv := tc.BufferSizes(); recv != 512<<10 {
		t.Errorf("SetReadBuffer(8 MiB): receive buffer %d, want the cap 524288", recv)
	}
	exchange(t, c, peer, 64<<20)
}

// TestTAPInBridge: the same over a TAP device in a Linux bridge with a veth.
func TestTAPInBridge(t *testing.T) {
	netns.SkipUnlessRoot(t)
	a, b := netns.New(t, "ta"), netns.New(t, "tb")
	va, vb := netns.VethPair(t, a, b)
	br := netns.Bridge(t, a, va)
	b.MustExec("ip", "addr", "add", "10.98.2.2/24", "dev", vb)
	ln := kernelListen(t, b, "10.98.2.2:5001")
	tapName := netns.Name("tp")
	s := newStackIn(t, a, stack.Config{
		Links:     []stack.Link{{Name: tapName, Kind: stack.LinkTAP, Bridge: br}},
		Addresses: []stack.Address{{Link: tapName, Prefix: netip.MustParsePrefix("10.98.2.1/24")}},
	})
	c, peer := connect(t, ln, 20*time.Second, func(ctx context.Context) (net.Conn, error) {
		return s.DialContext(ctx, "tcp", "10.98.2.2:5001")
	})
	exchange(t, c, peer, 16<<20)
}

// TestLabelledPathDecodedByTshark: stack A pushes label 100 towards
// 10.10.10.10, stack B (in another namespace, on AF_PACKET) pops it. The
// frames on B's veth are captured and decoded by tshark, our oracle.
func TestLabelledPathDecodedByTshark(t *testing.T) {
	netns.SkipUnlessRoot(t)
	tshark.Need(t)
	a, b := netns.New(t, "la"), netns.New(t, "lb")
	va, vb := netns.VethPair(t, a, b)
	sb := newStackIn(t, b, stack.Config{
		Links: []stack.Link{{Name: vb}},
		Addresses: []stack.Address{
			{Link: vb, Prefix: netip.MustParsePrefix("172.16.20.21/24")},
			{Link: vb, Prefix: netip.MustParsePrefix("10.10.10.10/32")},
		},
		ILM: []mpls.ILMEntry{{Label: 100, Action: mpls.ILMPopLocal}},
	})
	sa := newStackIn(t, a, stack.Config{
		Links:     []stack.Link{{Name: va}},
		Addresses: []stack.Address{{Link: va, Prefix: netip.MustParsePrefix("172.16.20.20/24")}},
		Routes: []stack.Route{{Prefix: netip.MustParsePrefix("10.10.10.10/32"),
			Via: netip.MustParseAddr("172.16.20.21"), Labels: []mpls.Label{100}}},
	})

	pcap := filepath.Join(t.TempDir(), "lsp.pcap")
	// tshark writes the capture as root into a temp dir it may not own.
	os.Chmod(filepath.Dir(pcap), 0o777)
	const frames = 300
	cap := exec.Command("ip", "netns", "exec", b.Name(), "tshark", "-q", "-i", vb, "-c", "300", "-w", pcap, "-f", "mpls")
	stderr, _ := cap.StderrPipe()
	if err := cap.Start(); err != nil {
		t.Fatalf("tshark: %v", err)
	}
	t.Cleanup(func() { cap.Process.Kill(); cap.Wait() })
	// Wait until the capture is live (tshark.Ready: not "Capturing on",
	// which tshark prints before dumpcap opens the socket) so no frame is
	// missed; a tshark not ready in 30 s is killed, which ends the read.
	buf := make([]byte, 4096)
	var seen strings.Builder
	startTimeout := time.AfterFunc(30*time.Second, func() { cap.Process.Kill() })
	for !tshark.Ready(seen.String()) {
		n, err := stderr.Read(buf)
		if err != nil {
			t.Fatalf("tshark did not start capturing within 30 s: %v: %s", err, seen.String())
		}
		seen.Write(buf[:n])
	}
	startTimeout.Stop()
	go io.Copy(io.Discard, stderr)

	ln, err := sb.ListenTCP(netip.MustParseAddrPort("10.10.10.10:5001"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const n = 8 << 20
	sum := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			sum <- nil
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute))
		h := sha256.New()
		io.Copy(h, c)
		sum <- h.Sum(nil)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := sa.DialContext(ctx, "tcp", "10.10.10.10:5001")
	if err != nil {
		t.Fatalf("DialContext over the LSP = %v", err)
	}
	h := sha256.New()
	c.SetDeadline(time.Now().Add(time.Minute))
	if w, err := io.CopyN(io.MultiWriter(c, h), rand.Reader, n); err != nil {
		t.Fatalf("write after %d of %d bytes over the LSP: %v", w, n, err)
	}
	c.Close()
	if got := <-sum; string(got) != string(h.Sum(nil)) {
		t.Fatalf("SHA-256 over the LSP: got %x, want %x", got, h.Sum(nil))
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cap.Wait() }()
	select {
	case <-waitErr:
	case <-time.After(20 * time.Second):
		t.Fatalf("tshark captured fewer than %d labelled frames", frames)
	}

	rows := tshark.Fields(t, pcap, "mpls.label", "mpls.bottom", "mpls.ttl",
		"ip.ttl", "ip.checksum.status", "tcp.checksum.status", "frame.len")
	if len(rows) < frames {
		t.Fatalf("tshark decoded %d frames, want at least %d", len(rows), frames)
	}
	for i, f := range rows {
		label, bottom, mttl, ipttl, ipck, tcpck, flen := f[0], f[1], f[2], f[3], f[4], f[5], f[6]
		if label != "100" || bottom != "1" {
			t.Errorf("frame %d: label %s bottom %s, want 100, 1", i+1, label, bottom)
		}
		// Uniform TTL model: the label carries the IP TTL.
		if mttl != ipttl {
			t.Errorf("frame %d: MPLS TTL %s, IP TTL %s; want equal (uniform model)", i+1, mttl, ipttl)
		}
		// Wireshark's checksum status: 1 = good.
		if ipck != "1" || tcpck != "1" {
			t.Errorf("frame %d: checksum status ip %s tcp %s, want 1 (good)", i+1, ipck, tcpck)
		}
		if n, _ := strconv.Atoi(flen); n > 1514 {
			t.Errorf("frame %d: %d bytes, over link MTU + 14", i+1, n)
		}
	}
}
