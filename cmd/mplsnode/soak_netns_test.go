package main

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/node"
)

// soakShort is TestSoak's duration when MPLSNODE_SOAK is not set: enough
// for three thirds of samples in `make test`.
const soakShort = 24 * time.Second

// TestSoak runs labelled TCP through the seed topology (the LSR as an
// `mplsnode run` process) for MPLSNODE_SOAK (a Go duration, `make soak`)
// or soakShort: one long-lived connection paced at about 80 Mbit/s, and a
// new 4 MiB connection every 2 s. Each second it samples the RSS of the
// LSR process and of this process (the host side, ns0's node), and the
// goroutines of both (the LSR's from its stats report). Every connection's
// bytes must arrive (SHA-256), no drop counter may move on either node,
// and after the first third (warm-up) neither RSS nor goroutines may grow:
// the median of the last third is compared with the median of the second.
func TestSoak(t *testing.T) {
	netns.SkipUnlessRoot(t)
	dur := soakShort
	if v := os.Getenv("MPLSNODE_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 15*time.Second {
			t.Fatalf("MPLSNODE_SOAK=%q: want a Go duration of at least 15s, e.g. 5m", v)
		}
		dur = d
	}
	s := newSeedProc(t, buildBinary(t), "sk", seedOptions{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	var conns, bytes sync.Map // counters by kind, for the log
	count := func(kind string, n int64) {
		v, _ := conns.LoadOrStore(kind, new(int64))
		*(v.(*int64))++
		b, _ := bytes.LoadOrStore(kind, new(int64))
		*(b.(*int64)) += n
	}
	var countMu sync.Mutex

	// The long-lived connection: writes until stop, then closes and
	// checks its SHA-256 at the sink.
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, err := longLived(s, stop)
		countMu.Lock()
		count("long-lived", n)
		countMu.Unlock()
		if err != nil {
			errs <- fmt.Errorf("long-lived connection: %w", err)
		}
	}()
	// A new connection every 2 s, 4 MiB each, one at a time.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for i := uint64(1); ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			const size = 4 << 20
			if err := shortConn(s, size, i); err != nil {
				errs <- fmt.Errorf("connection %d: %w", i, err)
				continue
			}
			countMu.Lock()
			count("short", size)
			countMu.Unlock()
		}
	}()

	type sample struct {
		lsrRSS, hostRSS       int64 // KiB
		lsrGorout, hostGorout int
		lsrHeap, hostHeap     uint64
		hostLive              int64 // heap bytes after a GC, every 5th sample; else -1
	}
	var samples []sample
	end := time.Now().Add(dur)
	tick := time.NewTicker(time.Second)
	for time.Now().Before(end) {
		<-tick.C
		r, err := s.lsr.report()
		if err != nil {
			t.Errorf("sample %d: %v", len(samples), err)
			break
		}
		h := s.n0.Report().Runtime
		smp := sample{lsrRSS: vmRSS(t, s.lsr.pid()), hostRSS: vmRSS(t, os.Getpid()),
			lsrGorout: r.Runtime.Goroutines, hostGorout: runtime.NumGoroutine(),
			lsrHeap: r.Runtime.HeapObjectsBytes, hostHeap: h.HeapObjectsBytes}
		smp.hostLive = -1
		if len(samples)%5 == 0 {
			// The live heap after a collection: RSS and the heap
			// between collections move with GC timing, this does not.
			runtime.GC()
			smp.hostLive = int64(s.n0.Report().Runtime.HeapObjectsBytes)
		}
		samples = append(samples, smp)
		if testing.Verbose() && (len(samples)%30 == 1) {
			t.Logf("t=%3ds LSR rss %d KiB goroutines %d heap %d KiB; host rss %d KiB goroutines %d heap %d KiB",
				len(samples), smp.lsrRSS, smp.lsrGorout, smp.lsrHeap>>10, smp.hostRSS, smp.hostGorout, smp.hostHeap>>10)
		}
	}
	tick.Stop()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	countMu.Lock()
	conns.Range(func(k, v any) bool {
		b, _ := bytes.Load(k)
		t.Logf("%s: %d connection(s), %d MiB, all intact", k, *(v.(*int64)), *(b.(*int64))>>20)
		return true
	})
	countMu.Unlock()

	// No drop counter of either node moved: the topology is clean, so
	// every drop would be a bug.
	checkNoDrops(t, "LSR", s.lsr.mustReport())
	checkNoDrops(t, "ns0", s.n0.Report())

	if len(samples) < 15 {
		t.Fatalf("only %d samples", len(samples))
	}
	first, last := samples[0], samples[len(samples)-1]
	liveFirst, liveLast := samples[0].hostLive, int64(-1)
	for _, x := range samples {
		if x.hostLive >= 0 {
			liveLast = x.hostLive
		}
	}
	t.Logf("host live heap after GC %d -> %d KiB", liveFirst>>10, liveLast>>10)
	t.Logf("%d samples over %v: LSR rss %d -> %d KiB, goroutines %d -> %d, heap %d -> %d KiB; host rss %d -> %d KiB, goroutines %d -> %d, heap %d -> %d KiB",
		len(samples), dur, first.lsrRSS, last.lsrRSS, first.lsrGorout, last.lsrGorout, first.lsrHeap>>10, last.lsrHeap>>10,
		first.hostRSS, last.hostRSS, first.hostGorout, last.hostGorout, first.hostHeap>>10, last.hostHeap>>10)
	third := len(samples) / 3
	mid, tail := samples[third:2*third], samples[len(samples)-third:]
	med := func(ss []sample, f func(sample) int64) int64 {
		var v []int64
		for _, s := range ss {
			if x := f(s); x >= 0 {
				v = append(v, x)
			}
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	for _, c := range []struct {
		name  string
		f     func(sample) int64
		slack func(m int64) int64 // allowed growth of the median
	}{
		// RSS moves with GC cycles and buffer pools: 10% or 8 MiB.
		{"LSR RSS KiB", func(s sample) int64 { return s.lsrRSS }, func(m int64) int64 { return max(m/10, 8<<10) }},
		{"host RSS KiB", func(s sample) int64 { return s.hostRSS }, func(m int64) int64 { return max(m/10, 8<<10) }},
		// The host's live heap (ns0's node and this test): 10% or 2 MiB.
		{"host live heap bytes", func(s sample) int64 { return s.hostLive }, func(m int64) int64 { return max(m/10, 2<<20) }},
		// Goroutines come and go with connections (a few each); a leak
		// of one per connection grows the median by the connections of a
		// third (4 in the short run, 50 in five minutes).
		{"LSR goroutines", func(s sample) int64 { return int64(s.lsrGorout) }, func(int64) int64 { return 3 }},
		{"host goroutines", func(s sample) int64 { return int64(s.hostGorout) }, func(int64) int64 { return 3 }},
	} {
		m2, m3 := med(mid, c.f), med(tail, c.f)
		t.Logf("%s: median of the second third %d, of the last third %d", c.name, m2, m3)
		if m3 > m2+c.slack(m2) {
			t.Errorf("%s grows: median %d in the second third, %d in the last (allowed +%d)", c.name, m2, m3, c.slack(m2))
		}
	}
}

// longLived writes pseudorandom data on one connection, paced at about
// 80 Mbit/s (64 KiB every 6.5 ms), until stop; then it closes and checks
// the sink got the same bytes. It returns the bytes sent.
func longLived(s *seedProc, stop <-chan struct{}) (int64, error) {
	c, err := s.dial(30 * time.Second)
	if err != nil {
		return 0, err
	}
	r := rand.NewChaCha8([32]byte{7})
	h := sha256.New()
	buf := make([]byte, 64<<10)
	var sent int64
	pace := time.NewTicker(6500 * time.Microsecond)
	defer pace.Stop()
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-pace.C:
		}
		r.Read(buf)
		h.Write(buf)
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return sent, fmt.Errorf("write after %d bytes: %w", sent, err)
		}
		sent += int64(len(buf))
	}
	if err := c.Close(); err != nil {
		return sent, err
	}
	return sent, s.sink.check(c.LocalAddr().String(), sent, [32]byte(h.Sum(nil)), time.Minute)
}

// shortConn sends size bytes on a new connection and checks them at the
// sink.
func shortConn(s *seedProc, size int64, seed uint64) error {
	c, err := s.dial(30 * time.Second)
	if err != nil {
		return err
	}
	watchdog := time.AfterFunc(time.Minute, func() { c.Close() })
	defer watchdog.Stop()
	sum, err := sendData(c, size, seed, nil)
	if err != nil {
		return err
	}
	return s.sink.check(c.LocalAddr().String(), size, sum, time.Minute)
}

// checkNoDrops fails the test if any drop counter of r is not zero.
func checkNoDrops(t *testing.T, who string, r node.Report) {
	t.Helper()
	moved := map[string]uint64{}
	for _, l := range r.Links {
		for k, v := range l.Drops {
			if v != 0 {
				moved[l.Name+" "+k] = v
			}
		}
	}
	for k, v := range r.LabelSwitch.Drops {
		if v != 0 {
			moved["label switch "+k] = v
		}
	}
	for k, v := range r.IP.Drops {
		if v != 0 {
			moved["ip "+k] = v
		}
	}
	if len(moved) != 0 {
		t.Errorf("%s drop counters moved: %v", who, moved)
	}
}

// vmRSS returns the VmRSS of process pid in KiB.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS of %d: %q: %v", pid, v, err)
			}
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
