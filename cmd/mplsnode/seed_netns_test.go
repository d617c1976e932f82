package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/internal/testkit/hashedstream"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/syncbuf"
	"github.com/mplsnode/mplsnode/node"
)

// This file holds the helpers of the root tests that run the seed topology
// with the binary: ns0 (an in-process node, host) -- ns1 (`mplsnode run`,
// the LSR, label 100 popped towards ns2) -- ns2 (the kernel, 10.10.10.10
// on lo, a socket sink).

// lockedBuffer is a buffer a process writes while the test reads it.
type lockedBuffer = syncbuf.Buffer

// waitFor polls until s's text contains sub.
func waitFor(t *testing.T, s *lockedBuffer, sub string) {
	t.Helper()
	waitForCount(t, s, sub, 1)
}

// waitForCount polls until s's text contains sub at least n times.
func waitForCount(t *testing.T, s *lockedBuffer, sub string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(s.String(), sub) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d %q in the log:\n%s", n, sub, s.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rootBinary skips t unless it runs as root, then builds the binary (for
// the tests that run it in namespaces).
func rootBinary(t *testing.T) string {
	t.Helper()
	netns.SkipUnlessRoot(t)
	return buildBinary(t)
}

// buildBinary builds the mplsnode binary into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mplsnode")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	return bin
}

// lsrProc is an `mplsnode run` process in a namespace; it can be stopped
// and started again on the same config file and control socket.
type lsrProc struct {
	t    *testing.T
	bin  string
	ns   *netns.NS
	conf string // config file
	sock string // control socket
	// extra holds more arguments for mplsnode run.
	extra []string
	// wrap runs before the binary inside the namespace (setpriv ... to
	// drop root).
	wrap []string
	logs lockedBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd // the current process
	runs int       // processes started so far
}

const startedMsg = `"msg":"node started"`

// startLSR writes conf to a file and starts `mplsnode run` on it in ns; it
// returns once the node logged that it started. The process is killed when
// the test ends if it still runs.
func startLSR(t *testing.T, bin string, ns *netns.NS, conf string, wrap ...string) *lsrProc {
	t.Helper()
	dir := t.TempDir()
	p := &lsrProc{t: t, bin: bin, ns: ns, conf: filepath.Join(dir, "ns1.conf"), sock: filepath.Join(dir, "ns1.sock"), wrap: wrap}
	if len(wrap) > 0 {
		// Another user runs the binary: it must reach the config and
		// create its control socket in dir.
		openToAll(t, dir, 0o777)
	}
	p.writeConf(conf)
	t.Cleanup(func() {
		if c := p.process(); c != nil && c.ProcessState == nil {
			c.Process.Kill()
			c.Wait()
		}
	})
	p.start()
	return p
}

// writeConf replaces the config file's text (for SIGHUP).
func (p *lsrProc) writeConf(text string) {
	p.t.Helper()
	if err := os.WriteFile(p.conf, []byte(text), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// start starts the process (again) and waits for "node started".
func (p *lsrProc) start() {
	p.t.Helper()
	if err := p.tryStart(); err != nil {
		p.t.Fatal(err)
	}
}

// tryStart is start for other goroutines than the test's: it returns
// the error instead of failing the test.
func (p *lsrProc) tryStart() error {
	args := append([]string{"netns", "exec", p.ns.Name()}, p.wrap...)
	args = append(args, p.bin, "run", "-c", p.conf, "--control-socket", p.sock, "--log-format", "json")
	cmd := exec.Command("ip", append(args, p.extra...)...)
	cmd.Stderr = &p.logs
	if err := cmd.Start(); err != nil {
		return err
	}
	p.mu.Lock()
	p.cmd = cmd
	p.runs++
	runs := p.runs
	p.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(p.logs.String(), startedMsg) < runs {
		if time.Now().After(deadline) {
			return fmt.Errorf("mplsnode run did not start within 20s:\n%s", p.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// process returns the current process.
func (p *lsrProc) process() *exec.Cmd {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd
}

// signal sends sig to the process (ip netns exec execs the binary, so the
// pid is mplsnode's).
func (p *lsrProc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.process().Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// stop sends SIGTERM and returns the process's exit error (nil: exit 0).
// Any goroutine may call it.
func (p *lsrProc) stop() error {
	c := p.process()
	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		c.Process.Kill()
		<-done
		return fmt.Errorf("mplsnode run did not exit within 20s of SIGTERM")
	}
}

// pid is the current process's id.
func (p *lsrProc) pid() int { return p.process().Process.Pid }

// report reads the node's counters with `mplsnode stats --json` over the
// control socket.
func (p *lsrProc) report() (node.Report, error) {
	var r node.Report
	out, err := exec.Command(p.bin, "stats", "--socket", p.sock, "--json").Output()
	if err != nil {
		return r, fmt.Errorf("mplsnode stats: %w", err)
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("mplsnode stats --json: %w: %s", err, out)
	}
	return r, nil
}

// mustReport is report that fails the test on error.
func (p *lsrProc) mustReport() node.Report {
	p.t.Helper()
	r, err := p.report()
	if err != nil {
		p.t.Fatal(err)
	}
	return r
}

// seedProc is the seed topology with the LSR as a process.
type seedProc struct {
	ns0, ns1, ns2      *netns.NS
	v01, v10, v12, v21 string
	conf1              string // the LSR's config text
	lsr                *lsrProc
	n0                 *node.Node
	log0               lockedBuffer // ns0's node log
	sink               *sink
}

// seedOptions changes the seed topology.
type seedOptions struct {
	// link01 joins ns0 and ns1 and returns the interface names in ns0 and
	// in ns1; nil means one veth pair.
	link01 func(t *testing.T, ns0, ns1 *netns.NS) (string, string)
	// conf0 is appended to ns0's config (settings, say).
	conf0 string
	// conf1 is appended to the LSR's config.
	conf1 string
	// beforeLSR runs after the namespaces and links exist, before the LSR
	// starts (to set the kernel's side of a link, say).
	beforeLSR func(s *seedProc)
	// wrap runs before the LSR's binary (see lsrProc.wrap).
	wrap []string
}

// lsrConf is the seed LSR's config: label 100 popped towards ns2, IP
// forwarded back.
func lsrConf(v10, v12 string) string {
	return fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.20.21/24 dev %[1]s
addr add 172.16.21.21/24 dev %[2]s
-f mpls route add 100 via inet 172.16.21.22 dev %[2]s
`, v10, v12)
}

// newSeedProc builds the seed topology: namespaces named after prefix, the
// LSR as an `mplsnode run` process of bin, ns0's node in this process and
// a kernel sink on 10.10.10.10 in ns2.
func newSeedProc(t *testing.T, bin, prefix string, o seedOptions) *seedProc {
	t.Helper()
	s := &seedProc{ns0: netns.New(t, prefix+"0"), ns1: netns.New(t, prefix+"1"), ns2: netns.New(t, prefix+"2")}
	// IPv6 off in the kernels before any interface exists: their
	// link-local chatter (DAD, router and multicast listener messages)
	// would otherwise reach the nodes, which count it as dropped
	// (ip invalid_destination), and tests here check that nothing drops.
	for _, ns := range []*netns.NS{s.ns0, s.ns1, s.ns2} {
		writeSysctl(t, ns, "net/ipv6/conf/default/disable_ipv6", "1")
		writeSysctl(t, ns, "net/ipv6/conf/all/disable_ipv6", "1")
	}
	if o.link01 == nil {
		o.link01 = func(t *testing.T, a, b *netns.NS) (string, string) { return netns.VethPair(t, a, b) }
	}
	s.v01, s.v10 = o.link01(t, s.ns0, s.ns1)
	s.v12, s.v21 = netns.VethPair(t, s.ns1, s.ns2)
	s.ns2.MustExec("ip", "addr", "add", "172.16.21.22/24", "dev", s.v21)
	s.ns2.MustExec("ip", "addr", "add", "10.10.10.10/32", "dev", "lo")
	s.ns2.MustExec("ip", "route", "add", "172.16.20.0/24", "via", "172.16.21.21")

	s.conf1 = lsrConf(s.v10, s.v12) + o.conf1
	if o.beforeLSR != nil {
		o.beforeLSR(s)
	}
	s.lsr = startLSR(t, bin, s.ns1, s.conf1, o.wrap...)

	cfg0, err := config.Parse("ns0.conf", strings.NewReader(fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.20.20/24 dev %[1]s
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 mtu lock 1496
`, s.v01)+o.conf0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ns0.Run(func() (err error) {
		s.n0, err = node.New(cfg0, node.Options{Logger: slog.New(slog.NewTextHandler(&s.log0, nil))})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.n0.Close() })
	s.sink = newSink(t, s.ns2, "10.10.10.10:0")
	return s
}

// writeSysctl writes value to /proc/sys/<key> in ns.
func writeSysctl(t *testing.T, ns *netns.NS, key, value string) {
	t.Helper()
	if err := ns.Run(func() error { return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644) }); err != nil {
		t.Fatalf("sysctl %s=%s in %s: %v", key, value, ns.Name(), err)
	}
}

// dial opens a TCP connection from ns0's node to the sink through the LSP.
func (s *seedProc) dial(timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.n0.Stack().DialContext(ctx, "tcp", s.sink.addr)
}

// transfer sends size bytes from ns0 to the sink on a new connection;
// at(sent) is called after each 64 KiB write, from this goroutine. It fails
// the test unless the sink got every byte with the same SHA-256 within
// limit, and returns the time from dial to the sink's end of stream.
func (s *seedProc) transfer(t *testing.T, size int64, limit time.Duration, at func(sent int64)) time.Duration {
	t.Helper()
	start := time.Now()
	c, err := s.dial(limit)
	if err != nil {
		t.Fatalf("dial %s: %v\nLSR log:\n%s", s.sink.addr, err, s.lsr.logs.String())
	}
	// A stalled transfer ends in a write error instead of a hung test.
	watchdog := time.AfterFunc(limit, func() { c.Close() })
	defer watchdog.Stop()
	sum, err := sendData(c, size, uint64(start.UnixNano()), at)
	if err != nil {
		t.Fatalf("send: %v (limit %v); the sink read %d bytes\nns0 %+v\nLSR log:\n%s", err, limit, s.sink.received(c.LocalAddr().String()), s.n0.Report().TCP, s.lsr.logs.String())
	}
	if err := s.sink.check(c.LocalAddr().String(), size, sum, limit); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// mbits is size bytes in d as Mbit/s.
func mbits(size int64, d time.Duration) float64 { return float64(size) * 8 / d.Seconds() / 1e6 }

// sendData writes size pseudorandom bytes (from seed) to c in 64 KiB
// writes, calls at after each, closes c and returns the bytes' SHA-256.
func sendData(c net.Conn, size int64, seed uint64, at func(sent int64)) ([32]byte, error) {
	return hashedstream.Send(c, size, [32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24),
		byte(seed >> 32), byte(seed >> 40), byte(seed >> 48), byte(seed >> 56)}, at)
}

// sinkResult is what the sink read on one connection.
type sinkResult struct {
	sum [32]byte
	n   int64
	err error
}

// sink is a kernel TCP listener that reads each connection to its end and
// keeps the SHA-256 and length, keyed by the peer's address.
type sink struct {
	addr    string
	mu      sync.Mutex
	cond    *sync.Cond
	results map[string]sinkResult
	// reading counts the bytes read so far on each open connection, so
	// that a stalled transfer fails saying how far it got.
	reading map[string]*atomic.Int64
}

func newSink(t *testing.T, ns *netns.NS, addr string) *sink {
	t.Helper()
	var ln net.Listener
	if err := ns.Run(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	s := &sink{addr: ln.Addr().String(), results: map[string]sinkResult{}, reading: map[string]*atomic.Int64{}}
	s.cond = sync.NewCond(&s.mu)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				from := c.RemoteAddr().String()
				var read atomic.Int64
				s.mu.Lock()
				s.reading[from] = &read
				s.mu.Unlock()
				h := sha256.New()
				n, err := io.Copy(h, readCounter{c, &read})
				var r sinkResult
				copy(r.sum[:], h.Sum(nil))
				r.n, r.err = n, err
				s.mu.Lock()
				delete(s.reading, from)
				s.results[from] = r
				s.cond.Broadcast()
				s.mu.Unlock()
			}()
		}
	}()
	return s
}

// check waits up to timeout for the end of the connection from `from` and
// compares what the sink read with size and sum.
func (s *sink) check(from string, size int64, sum [32]byte, timeout time.Duration) error {
	r := s.result(from, timeout)
	if r.err != nil || r.n != size || r.sum != sum {
		return fmt.Errorf("sink got %d bytes, sha256 %x, err %v; want %d bytes, sha256 %x", r.n, r.sum, r.err, size, sum)
	}
	return nil
}

// readCounter counts the bytes read through it.
type readCounter struct {
	r io.Reader
	n *atomic.Int64
}

// Read implements io.Reader.
func (c readCounter) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// received returns the bytes read so far on the open connection from
// `from` (0 if none is open).
func (s *sink) received(from string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if read, ok := s.reading[from]; ok {
		return read.Load()
	}
	return 0
}

// result waits up to timeout for the end of the connection from `from`.
func (s *sink) result(from string, timeout time.Duration) sinkResult {
	timer := time.AfterFunc(timeout, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer timer.Stop()
	deadline := time.Now().Add(timeout)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if r, ok := s.results[from]; ok {
			delete(s.results, from)
			return r
		}
		if time.Now().After(deadline) {
			r := sinkResult{err: fmt.Errorf("no end of stream from %s within %v (connection never accepted)", from, timeout)}
			if read, ok := s.reading[from]; ok {
				r.n = read.Load()
				r.err = fmt.Errorf("no end of stream from %s within %v", from, timeout)
			}
			return r
		}
		s.cond.Wait()
	}
}
