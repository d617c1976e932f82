package mplsendpoint_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
)

// nextPort gives each transfer its own port (no TIME_WAIT clash).
var nextPort atomic.Uint32

// transferTimeout bounds one transfer: dial, every write and read, and the
// receiver's end. A transfer that stalls (a bug that drops traffic: a wrong
// S bit, an MTU off by one) fails when it expires, naming how far it got,
// instead of blocking until the package timeout. Checked by planting the
// bugs with this set to 5 s: a wrong S bit (no label bottom) fails "dial
// 10.0.0.2: context deadline exceeded" with B's drop counter, a link that
// loses every full-size frame fails "write: ... i/o timeout; sent 1048576 of
// 4194304 bytes, received 0".
const transferTimeout = 2 * time.Minute

// A transfer also fails early, naming what it saw, when it stops moving:
// no byte sent or received for stallTimeout, or for stallAfterDrop once
// either endpoint has counted a drop since the transfer began (every
// caller expects none). A stack the endpoint cannot push (label depth
// checked with >= for >: every frame of the labels=16 cases dropped as
// label_stack_too_deep) then fails each case in about 2 s with "dial
// 10.0.0.2: context canceled: no progress for 2s after drops [A
// label_stack_too_deep=2]; sent 0 of 4194304 bytes, received 0; ...",
// instead of waiting transferTimeout per case, past the package's timeout
// with no message at all (mutant w05 plants that bug).
const (
	stallTimeout   = 20 * time.Second
	stallAfterDrop = 2 * time.Second
)

// dropTotal is the sum of an endpoint's drop counters.
func dropTotal(s mplsendpoint.Stats) uint64 {
	var n uint64
	for _, r := range mplsendpoint.DropReasons() {
		n += s.Drop(r)
	}
	return n
}

// transfer sends n deterministic bytes from A to B over TCP and returns the
// SHA-256 of what was sent and of what arrived. Every step has a deadline
// (transferTimeout); on failure the test stops with the bytes sent and
// received and both endpoints' counters.
func transfer(tb testing.TB, p *pair, v6 bool, n int64) (sent, got [32]byte) {
	tb.Helper()
	dst, proto := addrB4, ipv4.ProtocolNumber
	if v6 {
		dst, proto = addrB6, ipv6.ProtocolNumber
	}
	full := tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFromSlice(dst.AsSlice()), Port: uint16(5000 + nextPort.Add(1))}
	ln, err := gonet.ListenTCP(p.b.st, full, proto)
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	tctx, tcancel := context.WithTimeout(context.Background(), transferTimeout)
	defer tcancel()
	deadline, _ := tctx.Deadline()
	// ctx ends at the deadline or when the watchdog sees the transfer
	// stall; its end unblocks the dial, the accept, every read and write.
	ctx, stop := context.WithCancelCause(tctx)
	defer stop(nil)
	type result struct {
		sum [32]byte
		err error
	}
	var received, written atomic.Int64
	failf := func(format string, args ...any) {
		tb.Helper()
		msg := fmt.Sprintf(format, args...)
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			msg += ": " + cause.Error()
		}
		tb.Fatalf("%s; sent %d of %d bytes, received %d; A: %s; B: %s", msg,
			written.Load(), n, received.Load(), statsLine(p.a.ep.Stats()), statsLine(p.b.ep.Stats()))
	}
	go func() { // the watchdog
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		drops0 := dropTotal(p.a.ep.Stats()) + dropTotal(p.b.ep.Stats())
		last, since := int64(-1), time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if moved := written.Load() + received.Load(); moved != last {
				last, since = moved, time.Now()
				continue
			}
			idle := time.Since(since)
			dropped := dropTotal(p.a.ep.Stats()) + dropTotal(p.b.ep.Stats()) - drops0
			switch {
			case dropped > 0 && idle >= stallAfterDrop:
				stop(fmt.Errorf("no progress for %v after drops %v", stallAfterDrop, dropsLine(p)))
				return
			case idle >= stallTimeout:
				stop(fmt.Errorf("no progress for %v, no drop counted", stallTimeout))
				return
			}
		}
	}()
	context.AfterFunc(ctx, func() { ln.Close() })
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		c.SetReadDeadline(deadline)
		defer context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })()
		h := sha256.New()
		_, err = io.Copy(countingWriter{h, &received}, c)
		var r result
		copy(r.sum[:], h.Sum(nil))
		r.err = err
		done <- r
	}()
	c, err := gonet.DialContextTCP(ctx, p.a.st, full, proto)
	if err != nil {
		failf("dial %v: %v", full.Addr, err)
	}
	c.SetWriteDeadline(deadline)
	defer context.AfterFunc(ctx, func() { c.SetWriteDeadline(time.Now()) })()
	h := sha256.New()
	src := io.TeeReader(io.LimitReader(newPRNGReader(uint64(n)), n), h)
	if _, err := io.Copy(countingWriter{c, &written}, src); err != nil {
		c.Close()
		failf("write: %v", err)
	}
	c.Close()
	copy(sent[:], h.Sum(nil))
	select {
	case r := <-done:
		if r.err != nil {
			failf("receive: %v", r.err)
		}
		got = r.sum
	case <-ctx.Done():
		failf("transfer timed out after %v", transferTimeout)
	}
	return sent, got
}

// dropsLine lists both endpoints' non-zero drop counters.
func dropsLine(p *pair) string {
	var drops []string
	for side, s := range map[string]mplsendpoint.Stats{"A": p.a.ep.Stats(), "B": p.b.ep.Stats()} {
		for _, r := range mplsendpoint.DropReasons() {
			if d := s.Drop(r); d != 0 {
				drops = append(drops, fmt.Sprintf("%s %s=%d", side, r, d))
			}
		}
	}
	sort.Strings(drops)
	return "[" + strings.Join(drops, " ") + "]"
}

// statsLine formats an endpoint's counters for a failure message: the
// traffic counters and the non-zero drops by reason.
func statsLine(s mplsendpoint.Stats) string {
	var drops []string
	for _, r := range mplsendpoint.DropReasons() {
		if d := s.Drop(r); d != 0 {
			drops = append(drops, fmt.Sprintf("%s=%d", r, d))
		}
	}
	return fmt.Sprintf("rx_frames %d rx_delivered %d tx_packets %d tx_frames %d gso %d fib_pushes %d ilm_hits %d drops %v",
		s.RXFrames, s.RXDelivered, s.TXPackets, s.TXFrames, s.GSOPackets, s.FIBPushes, s.ILMHits, drops)
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

// Write implements io.Writer.
func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// prngReader yields a deterministic byte stream.
type prngReader struct{ r *rand.ChaCha8 }

func newPRNGReader(seed uint64) io.Reader {
	var s [32]byte
	s[0] = byte(seed)
	return prngReader{rand.NewChaCha8(s)}
}

func (p prngReader) Read(b []byte) (int, error) { return p.r.Read(b) }

func labelStack(n int) []mpls.Label {
	ls := make([]mpls.Label, n)
	for i := range ls {
		ls[i] = mpls.Label(100 + i)
	}
	return ls
}

func TestTransferMain(t *testing.T) {
	n := int64(64 << 20)
	if testing.Short() {
		n = 8 << 20
	}
	cfg := pairConfig{labels: labelStack(3), gso: mplsendpoint.GSOEndpoint, mtu: 1500}
	runTransfer(t, cfg, false, n)
}

func TestTransferMatrix(t *testing.T) {
	n := int64(4 << 20)
	for _, v6 := range []bool{false, true} {
		for _, nl := range []int{0, 1, 3, 16} {
			for _, g := range []mplsendpoint.GSOMode{mplsendpoint.GSOOff, mplsendpoint.GSOStack, mplsendpoint.GSOEndpoint} {
				for _, mtu := range []uint32{1500, 9000} {
					binding := mpls.PayloadNone // version nibble
					if nl == 3 {
						binding = mpls.PayloadIPv4
						if v6 {
							binding = mpls.PayloadIPv6
						}
					}
					name := fmt.Sprintf("v6=%v/labels=%d/gso=%v/mtu=%d", v6, nl, g, mtu)
					t.Run(name, func(t *testing.T) {
						runTransfer(t, pairConfig{labels: labelStack(nl), gso: g, mtu: mtu, binding: binding}, v6, n)
					})
				}
			}
		}
	}
}

// TestLargestTCPFrame checks that a bulk transfer fills the link: the
// largest TCP frame is exactly link MTU + 14 (Ethernet header) whatever
// the label count, because MTU() reports link MTU - label overhead and the
// endpoint segments to the same size.
//
// With SACK enabled (gVisor's default), gVisor's TCP sender sizes its
// payload as route MTU - 20 - maxOptionSize(), and maxOptionSize() reserves
// room for the timestamp option and three SACK blocks: 40 bytes, of which a
// data segment without SACK blocks uses 12 (timestamps). Frames are then 28
// bytes under the link MTU, labels or not: the "1486 bytes at MTU 1500"
// seen before is gVisor's reserve, not label overhead counted twice.
func TestLargestTCPFrame(t *testing.T) {
	const (
		linkMTU = 1500
		// gVisor's option reserve with SACK (40) minus the timestamp
		// option a data segment carries (12).
		sackReserve = header.TCPOptionsMaximumSize - (header.TCPOptionTSLength + 2) // 2 NOPs align the timestamp option
	)
	for _, sack := range []bool{false, true} {
		for _, nl := range []int{0, 1, 3} {
			for _, g := range []mplsendpoint.GSOMode{mplsendpoint.GSOOff, mplsendpoint.GSOStack, mplsendpoint.GSOEndpoint} {
				t.Run(fmt.Sprintf("sack=%v/labels=%d/gso=%v", sack, nl, g), func(t *testing.T) {
					cfg := pairConfig{labels: labelStack(nl), gso: g, mtu: linkMTU, noSACK: !sack}
					p := newPair(t, cfg)
					chk := &frameChecker{mtu: linkMTU, labels: cfg.labels}
					p.a.tap.setInspect(chk.check)
					if sent, got := transfer(t, p, false, 1<<20); sent != got {
						t.Fatalf("got SHA-256 %x, want %x", got, sent)
					}
					chk.mu.Lock()
					defer chk.mu.Unlock()
					if chk.err != nil {
						t.Fatalf("wire check: %v", chk.err)
					}
					want := linkMTU + header.EthernetMinimumSize
					if sack {
						want -= sackReserve
					}
					if chk.maxTCP != want {
						t.Errorf("got largest TCP frame %d bytes, want %d", chk.maxTCP, want)
					}
				})
			}
		}
	}
}

func runTransfer(t *testing.T, cfg pairConfig, v6 bool, n int64) {
	p := newPair(t, cfg)
	chk := &frameChecker{mtu: int(cfg.mtu), labels: cfg.labels}
	p.a.tap.setInspect(chk.check)
	p.b.tap.setInspect(chk.check)
	sent, got := transfer(t, p, v6, n)
	if got != sent {
		t.Fatalf("got SHA-256 %x, want %x", got, sent)
	}
	chk.mu.Lock()
	defer chk.mu.Unlock()
	if chk.err != nil {
		t.Fatalf("wire check: %v", chk.err)
	}
	if len(cfg.labels) > 0 && chk.labelled == 0 {
		t.Fatalf("got 0 labelled frames of %d", chk.frames)
	}
	wantMTU := cfg.mtu - uint32(4*len(cfg.labels))
	if got := p.a.ep.MTU(); got != wantMTU {
		t.Errorf("got MTU() = %d, want %d", got, wantMTU)
	}
	sa, sb := p.a.ep.Stats(), p.b.ep.Stats()
	for _, s := range []mplsendpoint.Stats{sa, sb} {
		for _, r := range mplsendpoint.DropReasons() {
			if s.Drop(r) == 1 && r == mplsendpoint.DropMTUExceeded && raceDetector {
				// Under the race detector, on a loaded machine, one
				// non-GSO packet over the MTU has been seen now and then
				// (cause unknown, docs/TESTING.md); the sender got its
				// ICMP error and the transfer's bytes are checked above.
				// Without the race detector it fails as any other drop.
				t.Logf("got %s = 1, tolerated under the race detector (an open problem)", r)
				continue
			}
			if s.Drop(r) != 0 {
				t.Errorf("got %s = %d, want 0", r, s.Drop(r))
			}
		}
	}
	if cfg.gso == mplsendpoint.GSOEndpoint && sa.GSOPackets == 0 {
		t.Errorf("got GSOPackets = 0 in GSO endpoint mode, want > 0")
	}
	t.Logf("frames %d (labelled %d, tcp %d, max %d bytes), A: fib_pushes %d gso %d; B: ilm_hits %d", chk.frames, chk.labelled, chk.tcp, chk.maxLen, sa.FIBPushes, sa.GSOPackets, sb.ILMHits)
}
