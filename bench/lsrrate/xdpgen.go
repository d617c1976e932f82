package lsrrate

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Generator names, the values of Options.Generator and Result.Generator.
const (
	// GenXDP is the in-kernel generator: BPF_PROG_TEST_RUN of an XDP
	// program in live-frames mode, one thread per CPU.
	GenXDP = "xdp"
	// GenAFPacket is the AF_PACKET sendmmsg generator on one thread.
	GenAFPacket = "afpacket"
)

// Settings of the XDP generator.
const (
	// maxRepeat is the repetitions of one BPF_PROG_TEST_RUN call of run:
	// more than any measurement sends; the call ends when a signal
	// interrupts it (EINTR).
	maxRepeat = 1 << 31
	// stopSignal interrupts the generator threads' calls at the end: the
	// Go runtime's preemption signal, which it handles harmlessly.
	stopSignal = unix.SIGURG
	// stopEvery is how often the threads are signalled until they stop.
	stopEvery = 5 * time.Millisecond
	// paceSlack is how far a paced thread may fall behind and still send
	// the frames it missed, at once: about one period of the scheduler,
	// so that a thread preempted on a busy machine keeps the average rate
	// (the generator running flat out is preempted the same way).
	paceSlack = 20 * time.Millisecond
	// bpfProgTestRun is the BPF_PROG_TEST_RUN command of bpf(2).
	bpfProgTestRun = 10
	// bpfFTestXDPLiveFrames is BPF_F_TEST_XDP_LIVE_FRAMES (Linux 5.18):
	// the frames the program redirects are transmitted for real.
	bpfFTestXDPLiveFrames = 1 << 1
)

// errLiveFramesRefused is the error of a kernel that does not run XDP
// programs in live-frames mode.
var errLiveFramesRefused = errors.New("the kernel refused live frames (BPF_F_TEST_XDP_LIVE_FRAMES needs Linux 5.18)")

// progTestRunAttr is the BPF_PROG_TEST_RUN part of union bpf_attr.
type progTestRunAttr struct {
	progFD      uint32
	retval      uint32
	dataSizeIn  uint32
	dataSizeOut uint32
	dataIn      uint64
	dataOut     uint64
	repeat      uint32
	duration    uint32
	ctxSizeIn   uint32
	ctxSizeOut  uint32
	ctxIn       uint64
	ctxOut      uint64
	flags       uint32
	cpu         uint32
	batchSize   uint32
	_           uint32
}

// testRunLive runs prog repeat times over frame in live-frames mode. It
// calls bpf(2) itself rather than ebpf.Program.Run, which restarts an
// interrupted run from the beginning (so more than repeat frames would go
// out); here an interrupted run returns EINTR and the program's own
// per-CPU counter says how many ran.
func testRunLive(prog *ebpf.Program, frame []byte, repeat uint32) error {
	attr := progTestRunAttr{
		progFD:     uint32(prog.FD()),
		dataSizeIn: uint32(len(frame)),
		dataIn:     uint64(uintptr(unsafe.Pointer(&frame[0]))),
		repeat:     repeat,
		flags:      bpfFTestXDPLiveFrames,
	}
	_, _, errno := unix.Syscall(unix.SYS_BPF, bpfProgTestRun, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(frame)
	if errno != 0 {
		return errno
	}
	return nil
}

// xdpGenerator sends frames from inside the kernel: BPF_PROG_TEST_RUN of
// lsrrate_gen (bpf/trafficgen.c) in live-frames mode, which redirects each
// repetition of the frame to the generator's veth, from one thread per
// CPU, each pinned to its CPU and in the generator's namespace (the
// kernel resolves the redirect's ifindex there). Each call has a large
// repeat count and ends when the thread is signalled: setting up and
// tearing down a call's frame pool costs milliseconds (an RCU grace
// period), too much to pay per slice. The program writes a UDP source
// port from its per-CPU frame counter into each frame, so the path sees
// genFlows flows; that counter is also what the generator counts as sent.
// Paced (run with a rate), the program itself spaces each thread's frames
// (gen_pace).
type xdpGenerator struct {
	nsPath string
	objs   xdpGenObjects
	frame  []byte
	cpus   []int
}

// xdpGenObjects are the generator's program and maps.
type xdpGenObjects struct {
	Prog     *ebpf.Program `ebpf:"lsrrate_gen"`
	State    *ebpf.Map     `ebpf:"gen_state"`
	Template *ebpf.Map     `ebpf:"gen_template"`
	Pace     *ebpf.Map     `ebpf:"gen_pace"`
}

// genStateValue is struct gen_state of bpf/trafficgen.c.
type genStateValue struct {
	Sent   uint64
	NextNS uint64
}

// openXDPGenerator loads the generator program for dev in the namespace
// at nsPath and checks that the kernel runs it in live-frames mode (one
// frame to a MAC address nobody holds). The error says why not.
func openXDPGenerator(nsPath, dev string) (*xdpGenerator, error) {
	var ifindex int
	if err := inNamespace(nsPath, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err == nil {
			ifindex = ifi.Index
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("xdp generator: %w", err)
	}
	spec, err := loadTrafficgen()
	if err != nil {
		return nil, fmt.Errorf("xdp generator: %w", err)
	}
	for name, v := range map[string]any{"ifindex_out": uint32(ifindex), "port_start": uint16(srcPort), "port_count": uint16(genFlows)} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("xdp generator: set %s: %w", name, err)
		}
	}
	g := &xdpGenerator{nsPath: nsPath}
	if err := spec.LoadAndAssign(&g.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("xdp generator: load: %+v", ve)
		}
		return nil, fmt.Errorf("xdp generator: load: %w", err)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		g.close()
		return nil, fmt.Errorf("xdp generator: sched_getaffinity: %w", err)
	}
	for c := 0; c < runtime.NumCPU()*4 && len(g.cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			g.cpus = append(g.cpus, c)
		}
	}
	probe := probeSpec()
	if err := g.setFrames(probe); err != nil {
		g.close()
		return nil, err
	}
	if err := g.send(1); err != nil {
		g.close()
		return nil, fmt.Errorf("xdp generator: %w: %w", errLiveFramesRefused, err)
	}
	return g, nil
}

// probeSpec is the probe frame: labelled, to a MAC address nobody
// holds, so whoever receives it drops it.
func probeSpec() frameSpec {
	return frameSpec{dst: [6]byte{0x02, 0, 0, 0, 0, 0x99}, src: genMAC, label: inLabel,
		srcIP: genIP, dstIP: dstIP, srcPort: srcPort, dstPort: dstPort, size: MinFrameSize}
}

// kind implements frameGenerator.
func (g *xdpGenerator) kind() string { return GenXDP }

// describe implements frameGenerator.
func (g *xdpGenerator) describe() string {
	return fmt.Sprintf("xdp (BPF_PROG_TEST_RUN of an XDP program in live-frames mode, %d threads on CPUs %s, one pinned to each, %d UDP source ports)",
		len(g.cpus), cpuListString(g.cpus), genFlows)
}

// setCPUs implements frameGenerator: one thread on each of cpus instead
// of one on each CPU the process may use.
func (g *xdpGenerator) setCPUs(cpus []int) {
	if len(cpus) > 0 {
		g.cpus = slices.Clone(cpus)
	}
}

// close implements frameGenerator.
func (g *xdpGenerator) close() error {
	return errors.Join(g.objs.Prog.Close(), g.objs.State.Close(), g.objs.Template.Close(), g.objs.Pace.Close())
}

// templateLen is TMPL_LEN of bpf/trafficgen.c.
const templateLen = 48

// setFrames implements frameGenerator: the program varies the source port
// itself, so one frame is enough; its headers go into gen_template.
func (g *xdpGenerator) setFrames(spec frameSpec) error {
	f, err := buildFrame(spec)
	if err != nil {
		return err
	}
	var head [templateLen]byte
	copy(head[:], f)
	if err := g.objs.Template.Put(uint32(0), head); err != nil {
		return fmt.Errorf("xdp generator: gen_template: %w", err)
	}
	g.frame = f
	return nil
}

// runs returns how many frames the program sent, all CPUs together.
func (g *xdpGenerator) runs() (uint64, error) {
	var per []genStateValue
	if err := g.objs.State.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("xdp generator: read gen_state: %w", err)
	}
	var n uint64
	for _, v := range per {
		n += v.Sent
	}
	return n, nil
}

// send implements frameGenerator: exactly n frames, from the calling
// goroutine's thread moved into the generator's namespace.
func (g *xdpGenerator) send(n uint64) error {
	if err := g.setPace(0); err != nil {
		return err
	}
	return inNamespace(g.nsPath, func() error {
		base, err := g.runs()
		if err != nil {
			return err
		}
		for {
			done, err := g.runs()
			if err != nil {
				return err
			}
			if done-base >= n {
				return nil
			}
			err = testRunLive(g.objs.Prog, g.frame, uint32(min(n-(done-base), maxRepeat)))
			if err != nil && err != unix.EINTR {
				return err
			}
		}
	})
}

// setPace writes gen_pace: 0, or the nanoseconds between two frames of
// one CPU, with paceSlack of catching up.
func (g *xdpGenerator) setPace(ns uint64) error {
	if err := g.objs.Pace.Put(uint32(1), uint64(paceSlack)); err != nil {
		return fmt.Errorf("xdp generator: gen_pace: %w", err)
	}
	if err := g.objs.Pace.Put(uint32(0), ns); err != nil {
		return fmt.Errorf("xdp generator: gen_pace: %w", err)
	}
	return nil
}

// runThread is one generator thread: pinned to cpu in the generator's
// namespace, BPF_PROG_TEST_RUN calls until stop is set. It publishes its
// thread id in tid while it runs (for stopThreads' signal) and returns
// the CPU time it used.
func (g *xdpGenerator) runThread(cpu int, tid *atomic.Int32, stop *atomic.Bool) (time.Duration, error) {
	var used time.Duration
	err := inNamespace(g.nsPath, func() error {
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("xdp generator: pin to CPU %d: %w", cpu, err)
		}
		self := unix.Gettid()
		tid.Store(int32(self))
		defer tid.Store(0)
		cpu0, err := threadCPU(self)
		if err != nil {
			return err
		}
		for !stop.Load() {
			err := testRunLive(g.objs.Prog, g.frame, maxRepeat)
			if err != nil && err != unix.EINTR {
				return fmt.Errorf("xdp generator: BPF_PROG_TEST_RUN: %w", err)
			}
		}
		cpu1, err := threadCPU(self)
		used = cpu1 - cpu0
		return err
	})
	return used, err
}

// stopThreads waits until done closes, setting stop after d and then
// signalling the threads in tids out of their BPF_PROG_TEST_RUN calls
// every stopEvery until they have all returned.
func stopThreads(done <-chan struct{}, d time.Duration, tids []atomic.Int32, stop *atomic.Bool) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(stopEvery)
	defer tick.Stop()
	pid := unix.Getpid()
	for {
		select {
		case <-done:
			return
		case <-deadline.C:
			stop.Store(true)
		case <-tick.C:
		}
		if stop.Load() {
			for i := range tids {
				if tid := tids[i].Load(); tid != 0 {
					_ = unix.Tgkill(pid, int(tid), stopSignal)
				}
			}
		}
	}
}

// run implements frameGenerator: one thread per CPU (paced by the
// program at rate/threads each when rate > 0), each in a
// BPF_PROG_TEST_RUN call until d has passed or stop is set, when the
// threads are signalled out of their calls. Sent is the program's frame
// count.
func (g *xdpGenerator) run(d time.Duration, rate float64, stop *atomic.Bool) (genStats, error) {
	cpus := g.cpus
	var pace uint64
	if rate > 0 {
		pace = uint64(max(1, float64(time.Second)*float64(len(cpus))/rate))
	}
	if err := g.setPace(pace); err != nil {
		return genStats{}, err
	}
	base, err := g.runs()
	if err != nil {
		return genStats{}, err
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    error
		cpuTime time.Duration
		tids    = make([]atomic.Int32, len(cpus))
	)
	start := time.Now()
	for i, cpu := range cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			used, err := g.runThread(cpu, &tids[i], stop)
			mu.Lock()
			cpuTime += used
			mu.Unlock()
			if err != nil {
				mu.Lock()
				errs = errors.Join(errs, err)
				mu.Unlock()
				stop.Store(true)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	stopThreads(done, d, tids, stop)
	st := genStats{elapsed: time.Since(start), cpu: cpuTime}
	if err := g.setPace(0); err != nil {
		errs = errors.Join(errs, err)
	}
	end, err := g.runs()
	if err != nil {
		return st, errors.Join(errs, err)
	}
	st.sent = end - base
	return st, errs
}
