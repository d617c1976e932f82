package lsrrate

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Generator settings.
const (
	// genBatch is the number of frames per sendmmsg call: enough to make
	// the syscall cost small per frame, small enough that the deadline and
	// the stop flag are checked often (a batch of 1514-byte frames takes
	// tens of microseconds).
	genBatch = 64
	// genFlows is the number of distinct frames (UDP source ports) in a
	// batch, so that any flow hashing on the path sees several flows.
	genFlows = genBatch
	// genSendBuffer is the socket send buffer: room for several batches
	// of the largest frames in flight.
	genSendBuffer = 4 << 20
)

// mmsghdr is struct mmsghdr from <sys/socket.h>.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// generator sends pre-built frames on an AF_PACKET socket as fast as the
// kernel takes them: one sendmmsg of genBatch frames after another, with
// no allocation and no copy in Go per frame.
type generator struct {
	fd     int
	frames [][]byte
	iovs   []unix.Iovec
	msgs   []mmsghdr
	// cpus is where run's thread runs; empty: where the scheduler puts it.
	cpus []int
}

// genStats is what one generator run did.
type genStats struct {
	// sent counts frames the kernel accepted (sendmmsg's return values).
	sent uint64
	// refused counts sendmmsg calls that failed with ENOBUFS or EAGAIN.
	refused uint64
	// elapsed is the time from the first send to the return of the last.
	elapsed time.Duration
	// cpu is the sending thread's user+sys CPU time; softirq work the
	// kernel ran inline in that thread is included (see package doc).
	cpu time.Duration
}

// openAFPacketGenerator opens a send-only AF_PACKET socket bound to dev in the
// namespace at nsPath. Sent frames bypass the qdisc.
func openAFPacketGenerator(nsPath, dev string) (*generator, error) {
	// Protocol 0: the socket receives nothing, it only sends.
	fd, err := openPacketSocket(nsPath, dev, "generator", 0, func(fd int) error {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return fmt.Errorf("PACKET_QDISC_BYPASS: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, genSendBuffer); err != nil {
			return fmt.Errorf("SO_SNDBUFFORCE: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &generator{fd: fd}, nil
}

// close closes the socket.
func (g *generator) close() error { return unix.Close(g.fd) }

// setFrames builds genFlows frames from spec, one per UDP source port
// spec.srcPort, spec.srcPort+1, ..., and points the batch at them.
func (g *generator) setFrames(spec frameSpec) error {
	g.frames = g.frames[:0]
	for i := 0; i < genFlows; i++ {
		s := spec
		s.srcPort = spec.srcPort + uint16(i)
		f, err := buildFrame(s)
		if err != nil {
			return err
		}
		g.frames = append(g.frames, f)
	}
	g.iovs = make([]unix.Iovec, genBatch)
	g.msgs = make([]mmsghdr, genBatch)
	for i := range g.msgs {
		f := g.frames[i%len(g.frames)]
		g.iovs[i].Base = &f[0]
		g.iovs[i].SetLen(len(f))
		g.msgs[i].hdr.Iov = &g.iovs[i]
		g.msgs[i].hdr.SetIovlen(1)
	}
	return nil
}

// sendBatch sends the first n frames of the batch once and returns how
// many the kernel accepted.
func (g *generator) sendBatch(n int) (int, error) {
	r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(g.fd),
		uintptr(unsafe.Pointer(&g.msgs[0])), uintptr(n), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// frameGenerator is a generator of either kind (GenXDP, GenAFPacket).
type frameGenerator interface {
	// kind is GenXDP or GenAFPacket.
	kind() string
	// describe names the generator for the log line.
	describe() string
	// setFrames builds the frames to send from spec.
	setFrames(spec frameSpec) error
	// send sends exactly n frames (warm-up, tests).
	send(n uint64) error
	// run sends until d has passed or stop is set, as fast as it can
	// (rate 0) or at rate frames per second.
	run(d time.Duration, rate float64, stop *atomic.Bool) (genStats, error)
	// setCPUs makes run's threads run on cpus (empty: the default).
	setCPUs(cpus []int)
	// close releases the generator.
	close() error
}

// kind implements frameGenerator.
func (g *generator) kind() string { return GenAFPacket }

// describe implements frameGenerator.
func (g *generator) describe() string {
	where := "not pinned"
	if len(g.cpus) > 0 {
		where = "on CPUs " + cpuListString(g.cpus)
	}
	return fmt.Sprintf("afpacket (sendmmsg of %d frames on one thread, %s, %d UDP source ports)", genBatch, where, genFlows)
}

// setCPUs implements frameGenerator.
func (g *generator) setCPUs(cpus []int) { g.cpus = slices.Clone(cpus) }

// send implements frameGenerator: exactly n frames, retrying what the
// kernel refuses.
func (g *generator) send(n uint64) error {
	for sent := uint64(0); sent < n; {
		m, err := g.sendBatch(int(min(genBatch, n-sent)))
		switch err {
		case nil:
			sent += uint64(m)
		case unix.ENOBUFS, unix.EAGAIN, unix.EINTR:
			time.Sleep(time.Millisecond)
		default:
			return fmt.Errorf("generator: sendmmsg: %w", err)
		}
	}
	return nil
}

// run implements frameGenerator: batches until d has passed or stop is
// set, on one locked OS thread whose CPU time it measures; with rate > 0
// it sleeps between batches to keep to rate frames per second.
func (g *generator) run(d time.Duration, rate float64, stop *atomic.Bool) (genStats, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if len(g.cpus) > 0 {
		var old unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			return genStats{}, fmt.Errorf("generator: sched_getaffinity: %w", err)
		}
		set := cpuSet(g.cpus)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return genStats{}, fmt.Errorf("generator: pin to CPUs %s: %w", cpuListString(g.cpus), err)
		}
		// The thread goes back to the runtime's pool as it was.
		defer unix.SchedSetaffinity(0, &old)
	}
	tid := unix.Gettid()
	cpu0, err := threadCPU(tid)
	if err != nil {
		return genStats{}, err
	}
	var st genStats
	start := time.Now()
	deadline := start.Add(d)
	for {
		if rate > 0 {
			due := start.Add(time.Duration(float64(st.sent) / rate * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				time.Sleep(min(wait, time.Until(deadline)))
				if now := time.Now(); !now.Before(deadline) || stop.Load() {
					st.elapsed = now.Sub(start)
					break
				}
				continue
			}
		}
		n, err := g.sendBatch(genBatch)
		switch err {
		case nil:
			st.sent += uint64(n)
		case unix.ENOBUFS, unix.EAGAIN, unix.EINTR:
			st.refused++
		default:
			return st, fmt.Errorf("generator: sendmmsg: %w", err)
		}
		now := time.Now()
		if !now.Before(deadline) || stop.Load() {
			st.elapsed = now.Sub(start)
			break
		}
	}
	cpu1, err := threadCPU(tid)
	if err != nil {
		return st, err
	}
	st.cpu = cpu1 - cpu0
	return st, nil
}
