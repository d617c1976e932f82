//go:build linux

// Package netem impairs the frames between two interfaces the way Linux's
// sch_netem qdisc does (loss, duplication, delay with jitter, reordering),
// in userspace, for tests on kernels built without sch_netem
// (CONFIG_NET_SCH_NETEM unset and no modules to load).
//
// It owns nothing in the product: only tests import it. A Relay sits in a
// namespace of its own between two veth ends, reads every frame arriving on
// one end through an AF_PACKET socket and writes it, impaired, out of the
// other end, in both directions, like a bridge with a netem qdisc on each
// port. Parse reads the same words as tc-netem(8), so a test can hand the
// same spec to tc where the kernel has netem and to Start where it has not.
//
// Typical use:
//
//	mid := netns.New(t, "mid")
//	a0, a1 := netns.VethPair(t, left, mid)
//	b1, b0 := netns.VethPair(t, mid, right)
//	p, err := netem.Parse("delay 20ms 5ms")
//	r, err := netem.Start(mid, a1, b1, p, 1)
//	defer r.Close()
//
// Differences from sch_netem: each direction draws from its own
// deterministic random source (seeded), a duplicate goes through the delay
// again (netem re-enqueues it at the root qdisc, which does the same), and
// rate limiting and corruption are not emulated.
package netem

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// DefaultLimit is sch_netem's default queue limit in packets: frames that
// arrive while this many wait for their delay are dropped.
const DefaultLimit = 1000

// Params is one direction's impairment, as in tc-netem(8).
type Params struct {
	// Loss is the probability (0..1) that a frame is dropped.
	Loss float64
	// Duplicate is the probability (0..1) that a frame is sent twice.
	Duplicate float64
	// Delay is added to every frame not chosen for reordering.
	Delay time.Duration
	// Jitter spreads Delay uniformly over [Delay-Jitter, Delay+Jitter];
	// frames then overtake each other, as under netem.
	Jitter time.Duration
	// Reorder is the probability (0..1) that a frame is sent at once,
	// skipping Delay, so that it overtakes the delayed ones (netem's
	// "reorder P" with its default gap of 1). It needs a Delay.
	Reorder float64
	// ReorderCorrelation (0..1) ties each reorder draw to the previous
	// one, as netem's correlation does.
	ReorderCorrelation float64
	// Limit is the most frames that may wait for their delay; 0 means
	// DefaultLimit.
	Limit int
}

// Parse reads tc-netem(8) words: "loss P%", "duplicate P%",
// "delay TIME [JITTER]", "reorder P% [CORRELATION%]" and "limit N", in any
// order; times take the units us, ms and s. The empty spec is no
// impairment.
func Parse(spec string) (Params, error) {
	var p Params
	f := strings.Fields(spec)
	pct := func(i int) (float64, error) {
		if i >= len(f) || !strings.HasSuffix(f[i], "%") {
			return 0, fmt.Errorf("netem %q: %s wants a percentage such as 1%%", spec, f[i-1])
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[i], "%"), 64)
		if err != nil || v < 0 || v > 100 {
			return 0, fmt.Errorf("netem %q: bad percentage %q", spec, f[i])
		}
		return v / 100, nil
	}
	optional := func(i int, suffix string) bool { return i < len(f) && strings.HasSuffix(f[i], suffix) }
	for i := 0; i < len(f); i++ {
		var err error
		switch f[i] {
		case "loss":
			i++
			p.Loss, err = pct(i)
		case "duplicate":
			i++
			p.Duplicate, err = pct(i)
		case "reorder":
			i++
			if p.Reorder, err = pct(i); err == nil && optional(i+1, "%") {
				i++
				p.ReorderCorrelation, err = pct(i)
			}
		case "delay":
			i++
			if p.Delay, err = duration(spec, f, i); err == nil && i+1 < len(f) && isDuration(f[i+1]) {
				i++
				p.Jitter, err = duration(spec, f, i)
			}
		case "limit":
			i++
			if i >= len(f) {
				return p, fmt.Errorf("netem %q: limit wants a number of packets", spec)
			}
			p.Limit, err = strconv.Atoi(f[i])
			if err == nil && p.Limit <= 0 {
				err = fmt.Errorf("netem %q: limit %d must be positive", spec, p.Limit)
			}
		default:
			return p, fmt.Errorf("netem %q: unknown word %q (want loss, duplicate, delay, reorder or limit)", spec, f[i])
		}
		if err != nil {
			return p, err
		}
	}
	if p.Reorder > 0 && p.Delay == 0 {
		return p, fmt.Errorf("netem %q: reorder needs a delay", spec)
	}
	if p.Jitter > p.Delay {
		return p, fmt.Errorf("netem %q: jitter %v exceeds the delay %v", spec, p.Jitter, p.Delay)
	}
	return p, nil
}

func isDuration(s string) bool {
	_, err := time.ParseDuration(s)
	return err == nil
}

func duration(spec string, f []string, i int) (time.Duration, error) {
	if i >= len(f) {
		return 0, fmt.Errorf("netem %q: delay wants a time such as 20ms", spec)
	}
	d, err := time.ParseDuration(f[i])
	if err != nil || d < 0 {
		return 0, fmt.Errorf("netem %q: bad time %q (want e.g. 20ms)", spec, f[i])
	}
	return d, nil
}

// Stats counts what a Relay did to the frames, both directions summed.
type Stats struct {
	// Received counts frames read from either interface.
	Received uint64
	// Sent counts frames written out (duplicates included).
	Sent uint64
	// Lost counts frames dropped by Params.Loss.
	Lost uint64
	// Duplicated counts frames sent twice.
	Duplicated uint64
	// Reordered counts frames sent at once past delayed ones.
	Reordered uint64
	// Delayed counts frames held for a delay (Params.Delay, with jitter)
	// before they were sent.
	Delayed uint64
	// Overlimit counts frames dropped because Params.Limit frames waited.
	Overlimit uint64
	// SendErrors counts writes that failed (a frame above the MTU, a full
	// device queue).
	SendErrors uint64
}

// String formats the counters on one line, for test logs.
func (s Stats) String() string {
	return fmt.Sprintf("received %d sent %d lost %d duplicated %d reordered %d delayed %d overlimit %d send_errors %d",
		s.Received, s.Sent, s.Lost, s.Duplicated, s.Reordered, s.Delayed, s.Overlimit, s.SendErrors)
}

// Relay impairs frames between two interfaces. Create it with Start.
type Relay struct {
	files [2]*os.File
	dirs  [2]*direction
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

// Start opens an AF_PACKET socket on each of interfaces a and b in ns and
// relays frames both ways, each direction impaired by p with its own random
// source derived from seed. The interfaces must be up and should carry no
// addresses (the namespace's kernel would answer for them).
//
// Frames pass unchanged, so they must carry whole checksums: a kernel
// sender on a veth leaves them partial for its peer unless told otherwise
// (ethtool -K DEV tx off); mplsnode's links always finish them.
func Start(ns *netns.NS, a, b string, p Params, seed uint64) (*Relay, error) {
	if p.Limit == 0 {
		p.Limit = DefaultLimit
	}
	r := &Relay{done: make(chan struct{})}
	for i, name := range []string{a, b} {
		var f *os.File
		if err := ns.Run(func() (err error) { f, err = open(name); return err }); err != nil {
			r.closeFiles()
			return nil, err
		}
		r.files[i] = f
	}
	for i := range r.dirs {
		d := &direction{p: p, in: r.files[i], out: r.files[1-i], done: r.done, wake: make(chan struct{}, 1),
			rng: rand.New(rand.NewPCG(seed, uint64(i)+1))}
		r.dirs[i] = d
		r.wg.Add(2)
		go func() { defer r.wg.Done(); d.read() }()
		go func() { defer r.wg.Done(); d.send() }()
	}
	return r, nil
}

// open returns a non-blocking AF_PACKET socket bound to name in the calling
// thread's namespace, as an *os.File on the Go poller.
func open(name string) (*os.File, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("netem: %w", err)
	}
	// Protocol 0 until bind: no frame of another interface slips in.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("netem: packet socket: %w", err)
	}
	// Frames we write out of an interface must not come back as input.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netem: PACKET_IGNORE_OUTGOING: %w", err)
	}
	// Room for a burst, so that the relay itself loses nothing.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20)
	const ethPAll = uint16(unix.ETH_P_ALL>>8 | (unix.ETH_P_ALL&0xff)<<8) // network byte order
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: ethPAll, Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netem: bind %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "netem:"+name), nil
}

// Stats returns the counters of both directions, summed.
func (r *Relay) Stats() Stats {
	var s Stats
	for _, d := range r.dirs {
		s.Received += d.received.Load()
		s.Sent += d.sent.Load()
		s.Lost += d.lost.Load()
		s.Duplicated += d.duplicated.Load()
		s.Reordered += d.reordered.Load()
		s.Delayed += d.delayed.Load()
		s.Overlimit += d.overlimit.Load()
		s.SendErrors += d.sendErrors.Load()
	}
	return s
}

// Close stops relaying; frames still waiting are dropped. It returns once
// the relay's goroutines have ended.
func (r *Relay) Close() error {
	r.once.Do(func() {
		close(r.done)
		r.closeFiles()
		r.wg.Wait()
	})
	return nil
}

func (r *Relay) closeFiles() {
	for _, f := range r.files {
		if f != nil {
			f.Close()
		}
	}
}

// direction relays frames read from in to out.
type direction struct {
	p       Params
	in, out *os.File
	done    chan struct{}
	rng     *rand.Rand // read goroutine only
	last    float64    // previous reorder draw, for the correlation

	mu   sync.Mutex
	q    frameHeap
	seq  uint64
	wake chan struct{}

	received, sent, lost, duplicated, reordered, delayed, overlimit, sendErrors atomic.Uint64
}

// maxFrame fits a veth peer's 64 KiB GSO packet with its Ethernet header.
const maxFrame = 1<<16 + 14

func (d *direction) read() {
	buf := make([]byte, maxFrame)
	for {
		n, err := d.in.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			continue // e.g. ENETDOWN while the interface went down
		}
		d.received.Add(1)
		if d.p.Loss > 0 && d.rng.Float64() < d.p.Loss {
			d.lost.Add(1)
			continue
		}
		frame := append([]byte(nil), buf[:n]...)
		copies := 1
		if d.p.Duplicate > 0 && d.rng.Float64() < d.p.Duplicate {
			copies = 2
			d.duplicated.Add(1)
		}
		for range copies {
			if d.p.Delay == 0 {
				d.write(frame)
				continue
			}
			dl := d.delay()
			if dl > 0 {
				d.delayed.Add(1)
			}
			d.enqueue(frame, dl)
		}
	}
}

// delay draws one frame's delay: 0 when it is chosen to overtake.
func (d *direction) delay() time.Duration {
	if d.p.Reorder > 0 {
		// netem's correlated random: a mix of a fresh draw and the last.
		c := d.p.ReorderCorrelation
		v := d.rng.Float64()*(1-c) + d.last*c
		d.last = v
		if v < d.p.Reorder {
			d.reordered.Add(1)
			return 0
		}
	}
	if d.p.Jitter == 0 {
		return d.p.Delay
	}
	return d.p.Delay - d.p.Jitter + time.Duration(d.rng.Int64N(int64(2*d.p.Jitter)+1))
}

func (d *direction) enqueue(frame []byte, delay time.Duration) {
	d.mu.Lock()
	if d.q.Len() >= d.p.Limit {
		d.mu.Unlock()
		d.overlimit.Add(1)
		return
	}
	d.seq++
	heap.Push(&d.q, item{at: time.Now().Add(delay), seq: d.seq, frame: frame})
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *direction) write(frame []byte) {
	if _, err := d.out.Write(frame); err != nil {
		d.sendErrors.Add(1)
		return
	}
	d.sent.Add(1)
}

// send writes queued frames when they are due.
func (d *direction) send() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		d.mu.Lock()
		var frame []byte
		wait := time.Duration(-1)
		if d.q.Len() > 0 {
			if w := time.Until(d.q[0].at); w <= 0 {
				frame = heap.Pop(&d.q).(item).frame
			} else {
				wait = w
			}
		}
		d.mu.Unlock()
		if frame != nil {
			d.write(frame)
			continue
		}
		var tick <-chan time.Time
		if wait >= 0 {
			timer.Reset(wait)
			tick = timer.C
		}
		select {
		case <-d.done:
			return
		case <-d.wake:
		case <-tick:
		}
	}
}

// item is a frame waiting for its time.
type item struct {
	at    time.Time
	seq   uint64 // equal times leave in arrival order
	frame []byte
}

// frameHeap orders items by time, then arrival.
type frameHeap []item

func (h frameHeap) Len() int { return len(h) }
func (h frameHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h frameHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *frameHeap) Push(x any)   { *h = append(*h, x.(item)) }
func (h *frameHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
