// Package lsrrate measures label-switching rate: how many labelled frames
// per second mplsnode, as an LSR, swaps and forwards between two veths, and
// at what CPU cost, next to the Linux kernel IP-forwarding frames of the
// same sizes in the same topology. It is configuration 10 of the seed
// bench (bench/), and owns only this measurement.
//
// Run builds three network namespaces with unique names, removed on every
// exit path (a cancelled context included):
//
//	gen  lg…  10.77.1.2 ---- li… LSR lo… ---- ls… 10.77.2.2  sink
//	     generator           10.77.1.1  10.77.2.1             counter
//
// The generator (Options.Generator) sends for Options.Seconds, as fast as
// it can or at Options.Rate:
//
//   - xdp (the default where the kernel runs it): BPF_PROG_TEST_RUN of the
//     XDP program lsrrate_gen (bpf/trafficgen.c) in live-frames mode
//     (BPF_F_TEST_XDP_LIVE_FRAMES, Linux 5.18), as xdp-tools'
//     xdp-trafficgen does: every repetition of the frame is redirected into
//     the generator's veth and sent, without a socket or an skb. Each
//     repetition rewrites the headers from a template (the kernel recycles
//     the pages of its frame pool with whatever the forwarders wrote into
//     them) and writes the next of genFlows UDP source ports with the
//     checksum updated, so flow hashing sees many flows. One thread per
//     CPU, each pinned to its CPU, each in one long call ended by a signal;
//     paced, the program spaces each thread's frames. A frame
//     redirected into a veth is received only if the peer runs NAPI:
//     Run turns GRO on on the LSR's ingress veth for this generator (an
//     XDP program on it, the node's or the AF_XDP link's, does the same).
//     The veths have one queue per CPU, so each thread fills its own
//     receive queue; the AF_XDP links serve them all (queues N).
//   - afpacket: pre-built frames on an AF_PACKET socket, 64 per sendmmsg,
//     on one thread. It tops out near 400k frames/s here, which the kernel
//     and the XDP label switch both forward in full.
//
// Where the kernel refuses live frames, Run says why (Options.Log) and
// falls back to afpacket. Configurations:
//
//   - mplsnode-swap: `mplsnode run` in the LSR namespace swaps label 100
//     for 200 (`-f mpls route add 100 as to 200 via inet 10.77.2.2`). The
//     frames are label 100 (S=1, TTL 64) over IPv4/UDP to 10.77.3.9. The
//     kernel in the sink holds 10.77.2.2 so it answers mplsnode's ARP. Its
//     links run the default mode (auto: packet rings).
//   - mplsnode-swap-mmsg, mplsnode-swap-ring-q2: the same with the LSR's
//     links in `mode mmsg` (recvmmsg/sendmmsg) and in `mode ring queues 2`
//     (two PACKET_FANOUT queues per link; frames of one label all hash to
//     one queue).
//   - mplsnode-swap-xdp: the same with the LSR's links on AF_XDP (link
//     type xdp: an XDP program hands every frame of the veth to mplsnode).
//   - mplsnode-swap-tap: the same with the LSR's links on TAPs, each in a
//     Linux bridge with its veth; the TAP ends take the veths' MACs (the
//     veths get others), so the generator's frames reach mplsnode.
//   - mplsnode-xdp-fwd: mplsnode-swap as a forwarding node runs by
//     default (no `set forward` line: xdp auto; the other mplsnode
//     configurations say `set forward xdp off`): the node's XDP label switch (package forward/xdp) swaps the label inside
//     the kernel and redirects the frame to the egress veth; GRO is turned
//     on on the sink's veth so that it runs NAPI and takes redirected
//     frames. Its CPU figure is the mplsnode process's time plus the
//     machine's softirq time, where the program runs.
//   - kernel-ipfwd: no mplsnode; the kernel in the LSR namespace holds the
//     addresses, net.ipv4.ip_forward=1 and a route to 10.77.3.0/24 via the
//     sink. The frames are the same IPv4/UDP packets without the label,
//     padded to the same frame size.
//   - mplsnode-swap@kernel-pps: mplsnode-swap again, last, offered per
//     frame size the rate kernel-ipfwd reached (paced generator), so that
//     its ingress drops at the kernel's rate can be read off (the
//     lower_rx_overflow target).
//
// The counter in the sink is the XDP program lsrrate_sink on the sink's
// veth: it counts per CPU the frames one correct hop produces (MPLS,
// label 200, S=1; or IPv4 UDP to 10.77.3.9) and drops them, so counting
// costs less than any forwarder; everything else (ARP) goes up to the
// sink's kernel. Behind it an AF_PACKET socket with a classic BPF filter
// of the same test receives the first numSamples counted frames of each
// measurement, which the program passes up; they are read at the end and
// checked (label 200, S=1, label TTL 63; or IPv4 TTL 63). Where the
// program cannot be attached, the socket counts alone (its
// PACKET_STATISTICS).
//
// What the CPU figures cover (Result.CPUSecondsPerMpkt), read from /proc:
//
//   - mplsnode-swap: user+sys time of the mplsnode process (/proc/PID/stat,
//     all threads) over the measurement. The kernel's work to deliver a
//     frame into mplsnode's AF_PACKET socket runs in softirq context on the
//     generator's thread (veth hands frames over inline) and is NOT in this
//     figure; the sink's receive work triggered by mplsnode's sends is.
//   - kernel-ipfwd: the machine-wide softirq time (/proc/stat, all CPUs)
//     over the measurement. Forwarding through a veth runs in softirq
//     context, inline in the generator's send; the figure also holds the
//     sink's receive work and any softirq work of other processes on the
//     machine, and not the generator's own sendmmsg cost. Without
//     CONFIG_IRQ_TIME_ACCOUNTING it is sampled at the timer tick.
//
// Both are per million frames counted at the sink. Progress lines give the
// rest (generator thread CPU, softirq time, device and mplsnode counters),
// so where frames were lost can be read off: Sent is what the kernel took
// from the generator, Frames what reached the sink.
//
// On a shared machine every figure also depends on what else runs: the
// generator, the forwarder and the kernel's inline work share its cores.
// Paced, the xdp generator's threads busy-wait in the kernel (the program
// drops the repetitions before a frame is due), so each holds its CPU
// whatever the rate, and the userspace LSR waits for a CPU: its ingress
// drops (lower_rx_overflow) are frames that found the LSR's receive ring
// still full because the LSR was not running. Options.GenCPUs,
// Options.FwdCPUs and Options.FwdNice arrange the CPUs (the kernel
// forwarder runs in softirq context, ahead of every task, where the
// generator runs); Options.LinkWords measures a link option such as
// rx-ring-frames.
//
// Run needs root (it creates namespaces) and ip(8) from iproute2.
package lsrrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Configuration names, the values of Result.Config.
const (
	// ConfigMPLSNode is mplsnode swapping label 100 for 200 in the LSR
	// namespace.
	ConfigMPLSNode = "mplsnode-swap"
	// ConfigMPLSNodeMMsg is ConfigMPLSNode with the LSR's links in mode
	// mmsg (recvmmsg/sendmmsg instead of packet rings).
	ConfigMPLSNodeMMsg = "mplsnode-swap-mmsg"
	// ConfigMPLSNodeQueues2 is ConfigMPLSNode with the LSR's links in mode
	// ring with two fanout queues each.
	ConfigMPLSNodeQueues2 = "mplsnode-swap-ring-q2"
	// ConfigKernel is the Linux kernel IP-forwarding in the LSR namespace.
	ConfigKernel = "kernel-ipfwd"
	// ConfigMPLSNodeXDP is ConfigMPLSNode with the LSR's links on AF_XDP
	// (link type xdp).
	ConfigMPLSNodeXDP = "mplsnode-swap-xdp"
	// ConfigMPLSNodeTAP is ConfigMPLSNode with the LSR's links on TAPs, each
	// in a Linux bridge with its veth (link type tap).
	ConfigMPLSNodeTAP = "mplsnode-swap-tap"
	// ConfigMPLSNodeInKernel is ConfigMPLSNode with the node's XDP label
	// switch (the default of a forwarding node): the swap happens in the LSR
	// namespace's kernel, redirected veth to veth.
	ConfigMPLSNodeInKernel = "mplsnode-xdp-fwd"
	// ConfigMPLSNodeAtKernelRate is ConfigMPLSNode offered, per frame
	// size, the rate the kernel forwarder achieved in the same Run (issue
	// 13's lower_rx_overflow target); it runs last, and only when
	// Options.Rate is 0 and the kernel forwarded frames.
	ConfigMPLSNodeAtKernelRate = "mplsnode-swap@kernel-pps"
)

// nodeSetup is how one mplsnode configuration runs the LSR.
type nodeSetup struct {
	// linkType is the LSR's link type: afpacket, xdp or tap (TAPs in the
	// bridges of bridgeForTAPs, with the veths' former MACs).
	linkType string
	// words go on both link lines (" mode mmsg").
	words string
	// inKernel turns on the node's XDP label switch.
	inKernel bool
	// cpuProfile is where mplsnode writes a CPU profile of its run
	// (--cpuprofile); empty: none.
	cpuProfile string
	// cpus pins the mplsnode process (taskset); empty: not pinned.
	cpus []int
	// nice is the mplsnode process's nice value (nice(1)); 0: default.
	nice int
}

// nodeSetups gives each mplsnode configuration's setup: the link type
// and afpacket link mode dimensions (ConfigMPLSNode runs the default,
// afpacket in mode auto, which is ring where the kernel has packet rings),
// and the in-kernel label switch (on AF_PACKET links: the program takes
// the frames it switches, the socket gets the rest).
var nodeSetups = map[string]nodeSetup{
	ConfigMPLSNode:             {linkType: "afpacket"},
	ConfigMPLSNodeMMsg:         {linkType: "afpacket", words: " mode mmsg"},
	ConfigMPLSNodeQueues2:      {linkType: "afpacket", words: " mode ring queues 2"},
	ConfigMPLSNodeXDP:          {linkType: "xdp"},
	ConfigMPLSNodeTAP:          {linkType: "tap"},
	ConfigMPLSNodeInKernel:     {linkType: "afpacket", inKernel: true},
	ConfigMPLSNodeAtKernelRate: {linkType: "afpacket"},
}

// configs are the configurations Run measures, in order.
var configs = []string{ConfigMPLSNode, ConfigMPLSNodeMMsg, ConfigMPLSNodeQueues2, ConfigMPLSNodeXDP,
	ConfigMPLSNodeTAP, ConfigMPLSNodeInKernel, ConfigKernel}

// Configs returns the configuration names in the order Run measures them.
func Configs() []string { return append(slices.Clone(configs), ConfigMPLSNodeAtKernelRate) }

// Defaults for zero Options fields.
const (
	// DefaultSeconds is the duration of each measurement.
	DefaultSeconds = 5.0
	// maxSeconds bounds one measurement (and the 32-bit kernel counter
	// read every 250 ms is far from wrapping).
	maxSeconds = 3600.0
)

// DefaultFrameSizes are the frame sizes measured when Options.FrameSizes is
// empty: the smallest frame (64 bytes) and a full 1500-byte one.
var DefaultFrameSizes = []int{64, 1500}

// Options configures Run.
type Options struct {
	// Bin is the path of the mplsnode binary (built with go build
	// ./cmd/mplsnode). Required.
	Bin string
	// Seconds is the duration of each measurement; 0 means
	// DefaultSeconds.
	Seconds float64
	// FrameSizes are Ethernet frame sizes without FCS, MinFrameSize..
	// MaxFrameSize (60..1514); empty means DefaultFrameSizes.
	FrameSizes []int
	// Progress receives progress lines (one per step and per
	// measurement, with the counters behind each result); nil means none.
	Progress io.Writer
	// Log receives the lines worth reading even without progress: the
	// generator used, and why the XDP one was not; nil means none.
	Log io.Writer
	// Generator is GenXDP, GenAFPacket, or empty for GenXDP where the
	// kernel runs it and GenAFPacket otherwise.
	Generator string
	// Rate is the frames per second the generator offers; 0 means as
	// many as it can.
	Rate float64
	// Configs picks the configurations to measure (Configs() names them,
	// in the order they run); empty means all.
	Configs []string
	// CPUProfileDir, when set, makes each mplsnode forwarder write a CPU
	// profile of its whole run (every frame size) to
	// CPUProfileDir/CONFIG.pprof, for go tool pprof.
	CPUProfileDir string
	// GenCPUs are the CPUs the generator runs on: the xdp generator one
	// thread pinned to each, the afpacket generator its one thread on
	// them. Empty means the default: every CPU the process may use for
	// xdp, not pinned for afpacket. The kernel forwarder (kernel-ipfwd)
	// and the in-kernel label switch run inline in the generator's
	// softirq work, so on these CPUs too.
	GenCPUs []int
	// FwdCPUs are the CPUs the userspace forwarder (every mplsnode
	// configuration) runs on: the process is started under taskset(1).
	// Empty means not pinned. GenCPUs 0 with FwdCPUs 1 gives a 2-core
	// machine's LSR a core of its own, which the generator's paced
	// threads (they busy-wait in the kernel) would otherwise share.
	FwdCPUs []int
	// FwdNice is the nice value the userspace forwarder runs at (every
	// mplsnode configuration; nice(1), -20..19); 0 means the default.
	// The kernel forwarder's work runs in softirq context, ahead of every
	// task; a negative FwdNice gives the userspace LSR a similar
	// precedence over the generator and whatever else runs.
	FwdNice int
	// LinkWords are appended to both afpacket link lines of the mplsnode
	// configurations (" rx-ring-frames 16384"), to measure a link option;
	// empty means none. The TAP and AF_XDP configurations do not get them.
	LinkWords string

	resolved string // the generator opened so far
}

// Result is one measurement: one configuration at one frame size.
type Result struct {
	// Config is ConfigMPLSNode ("mplsnode-swap"), ConfigMPLSNodeAtKernelRate, ConfigMPLSNodeXDP
	// ("mplsnode-swap-xdp"), ConfigMPLSNodeTAP ("mplsnode-swap-tap"),
	// ConfigMPLSNodeInKernel ("mplsnode-xdp-fwd") or
	// ConfigKernel ("kernel-ipfwd").
	Config string
	// FrameSize is the Ethernet frame size without FCS.
	FrameSize int
	// PPS is frames per second counted at the receiver in the sink
	// namespace (Frames over the generator's sending time).
	PPS float64
	// CPUSecondsPerMpkt is the forwarder's CPU seconds (user+sys of
	// mplsnode; softirq time for the kernel: see the package doc) per
	// million frames counted at the receiver; 0 when none arrived.
	CPUSecondsPerMpkt float64
	// Frames counts frames counted at the receiver.
	Frames uint64
	// Sent counts frames the generator sent (the kernel accepted).
	Sent uint64
	// Generator is the generator that sent (GenXDP or GenAFPacket).
	Generator string
	// OfferedPPS is Sent over the generator's sending time.
	OfferedPPS float64
	// IngressDrops counts the frames the forwarder lost at its ingress:
	// mplsnode's lower_rx_overflow (its receive ring or socket queue was
	// full), the kernel's rx_dropped of the LSR's ingress interface.
	IngressDrops uint64
}

// Addresses and labels of the topology.
var (
	genIP   = netip.MustParseAddr("10.77.1.2")
	dstIP   = netip.MustParseAddr("10.77.3.9") // beyond the sink, which drops it
	genMAC  = [6]byte{0x02, 0x6c, 0x73, 0, 0, 1}
	inMAC   = [6]byte{0x02, 0x6c, 0x73, 0, 0, 2} // LSR ingress
	outMAC  = [6]byte{0x02, 0x6c, 0x73, 0, 0, 3} // LSR egress
	sinkMAC = [6]byte{0x02, 0x6c, 0x73, 0, 0, 4}
)

const (
	lsrInAddr  = "10.77.1.1/24"
	lsrOutAddr = "10.77.2.1/24"
	sinkAddr   = "10.77.2.2/24"
	sinkIP     = "10.77.2.2"
	dstPrefix  = "10.77.3.0/24"
	// inLabel is the label the generator sends; outLabel the one the LSR
	// swaps it for.
	inLabel  = 100
	outLabel = 200
	srcPort  = 10000
	dstPort  = 9 // discard
)

// Timing of each measurement.
const (
	// warmupTimeout bounds the wait for the first frame at the sink (the
	// LSR resolving the sink's MAC, mplsnode starting to read).
	warmupTimeout = 5 * time.Second
	// settle is how long the counter keeps counting after the generator
	// stops, so frames still queued in the LSR are counted.
	settle = 200 * time.Millisecond
	// pollEvery is how often the kernel's 32-bit counter is read.
	pollEvery = 250 * time.Millisecond
	// numSamples is how many counted frames are read back and checked.
	numSamples = 16
)

// hooks lets tests see what Run saw; nil fields are not called.
type hooks struct {
	// samples receives the frames read back from the sink counter.
	samples func(config string, size int, frames [][]byte)
	// sinkRX receives the sink interface's rx_packets delta.
	sinkRX func(config string, size int, rx uint64)
	// nodeStarted receives the pid of each mplsnode forwarder started.
	nodeStarted func(config string, pid int)
}

// Run measures each configuration (configs: the mplsnode ones, then
// kernel-ipfwd) at
// each of opts.FrameSizes and returns one Result per pair, in that order.
// On error it returns the results measured so far and the error. Run needs
// root; everything it creates is removed before it returns.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	return run(ctx, opts, hooks{})
}

func run(ctx context.Context, opts Options, h hooks) ([]Result, error) {
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	var results []Result
	kernelPPS := map[int]float64{}
	for _, cfg := range configs {
		if len(opts.Configs) > 0 && !slices.Contains(opts.Configs, cfg) {
			continue
		}
		rs, err := runConfig(ctx, &opts, cfg, h, nil)
		results = append(results, rs...)
		if err != nil {
			return results, fmt.Errorf("lsrrate %s: %w", cfg, err)
		}
		for _, r := range rs {
			if r.Config == ConfigKernel && r.PPS > 0 {
				kernelPPS[r.FrameSize] = r.PPS
			}
		}
	}
	if opts.Rate == 0 && len(kernelPPS) == len(opts.FrameSizes) &&
		(len(opts.Configs) == 0 || slices.Contains(opts.Configs, ConfigMPLSNodeAtKernelRate)) {
		cfg := ConfigMPLSNodeAtKernelRate
		rs, err := runConfig(ctx, &opts, cfg, h, kernelPPS)
		results = append(results, rs...)
		if err != nil {
			return results, fmt.Errorf("lsrrate %s: %w", cfg, err)
		}
	}
	return results, nil
}

// checkOptions validates opts and fills in defaults.
func checkOptions(opts *Options) error {
	if opts.Bin == "" {
		return errors.New("lsrrate: Options.Bin is empty: give the path of the mplsnode binary (go build -o bin/mplsnode ./cmd/mplsnode)")
	}
	fi, err := os.Stat(opts.Bin)
	if err != nil {
		return fmt.Errorf("lsrrate: mplsnode binary: %w (build it with go build -o bin/mplsnode ./cmd/mplsnode)", err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("lsrrate: mplsnode binary %s is not an executable file", opts.Bin)
	}
	switch {
	case opts.Seconds == 0:
		opts.Seconds = DefaultSeconds
	case !(opts.Seconds > 0 && opts.Seconds <= maxSeconds): // also rejects NaN
		return fmt.Errorf("lsrrate: Seconds %v: want more than 0 and at most %v", opts.Seconds, maxSeconds)
	}
	if len(opts.FrameSizes) == 0 {
		opts.FrameSizes = DefaultFrameSizes
	}
	for _, s := range opts.FrameSizes {
		if s < MinFrameSize || s > MaxFrameSize {
			return fmt.Errorf("lsrrate: frame size %d: want %d..%d (Ethernet frame without FCS)", s, MinFrameSize, MaxFrameSize)
		}
	}
	for _, c := range opts.Configs {
		if !slices.Contains(Configs(), c) {
			return fmt.Errorf("lsrrate: configuration %q: want one of %s", c, strings.Join(Configs(), ", "))
		}
	}
	switch opts.Generator {
	case "", GenXDP, GenAFPacket:
	default:
		return fmt.Errorf("lsrrate: generator %q: want %s or %s", opts.Generator, GenXDP, GenAFPacket)
	}
	if err := checkCPUs("GenCPUs (-gen-cpus)", opts.GenCPUs); err != nil {
		return err
	}
	if err := checkCPUs("FwdCPUs (-fwd-cpus)", opts.FwdCPUs); err != nil {
		return err
	}
	if opts.FwdNice < -20 || opts.FwdNice > 19 {
		return fmt.Errorf("lsrrate: FwdNice %d: want -20..19", opts.FwdNice)
	}
	if !(opts.Rate >= 0 && opts.Rate <= 1e9) {
		return fmt.Errorf("lsrrate: Rate %v: want 0 (as fast as possible) up to 1e9 frames/s", opts.Rate)
	}
	if os.Geteuid() != 0 {
		return errors.New("lsrrate: needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces and veths")
	}
	return nil
}

// log writes one line to opts.Log and opts.Progress.
func (o *Options) log(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
	if o.Progress != nil && o.Progress != o.Log {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// openGenerator opens the generator opts.Generator names on dev in the
// namespace at nsPath; when it is empty, the XDP one if the kernel runs
// it, else the AF_PACKET one, and opts.Generator records the choice so
// that one Run uses one generator. The first open logs the generator.
func (o *Options) openGenerator(nsPath, dev string) (frameGenerator, error) {
	first := o.resolved == ""
	var g frameGenerator
	var err error
	switch o.Generator {
	case GenAFPacket:
		g, err = openAFPacketGenerator(nsPath, dev)
	case GenXDP:
		g, err = openXDPGenerator(nsPath, dev)
	default:
		g, err = openXDPGenerator(nsPath, dev)
		if err != nil {
			o.log("lsrrate: generator: %v; falling back to afpacket", err)
			o.Generator = GenAFPacket
			g, err = openAFPacketGenerator(nsPath, dev)
		} else {
			o.Generator = GenXDP
		}
	}
	if err != nil {
		return nil, err
	}
	g.setCPUs(o.GenCPUs)
	o.resolved = g.kind()
	if first {
		fwd := "userspace forwarder not pinned"
		if len(o.FwdCPUs) > 0 {
			fwd = "userspace forwarder on CPUs " + cpuListString(o.FwdCPUs) + " (taskset)"
		}
		if o.FwdNice != 0 {
			fwd += fmt.Sprintf(", at nice %d", o.FwdNice)
		}
		if o.LinkWords != "" {
			fwd += fmt.Sprintf(", afpacket links with %q", strings.TrimSpace(o.LinkWords))
		}
		o.log("lsrrate: generator: %s; %s; kernel forwarding inline on the generator's CPUs", g.describe(), fwd)
	}
	return g, nil
}

// progress writes one progress line if opts.Progress is set.
func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// forwarder is what sits in the LSR namespace.
type forwarder interface {
	// cpu returns the CPU time the forwarder figure is made of, so far.
	cpu() (time.Duration, error)
	// mark notes the forwarder's counters; describe counts from there.
	mark()
	// describe returns the forwarder's own counters since the last mark,
	// for a progress line.
	describe() string
	// ingressDrops returns the frames lost at the forwarder's ingress
	// since the last mark (see Result.IngressDrops); dev is the LSR
	// ingress interface's rx_dropped over the same time.
	ingressDrops(dev uint64) uint64
	// stop ends the forwarder.
	stop() error
}

// runConfig builds the topology, starts cfg's forwarder and measures every
// frame size.
// rates, if not nil, gives the rate per frame size instead of opts.Rate.
func runConfig(ctx context.Context, opts *Options, cfg string, h hooks, rates map[int]float64) (results []Result, err error) {
	opts.progress("%s: building namespaces", cfg)
	t, err := newTopology()
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, t.close()) }()

	var spec frameSpec
	filter, wantLabel := ipv4UDPFilter(dstIP), uint32(0)
	fw, err := startForwarder(ctx, opts, cfg, t, h)
	if err != nil {
		return nil, err
	}
	if _, ok := nodeSetups[cfg]; ok {
		spec.label = inLabel
		filter = mplsFilter(outLabel)
		wantLabel = outLabel
	}
	defer func() { err = errors.Join(err, fw.stop()) }()

	g, err := opts.openGenerator(t.gen.path(), t.genDev)
	if err != nil {
		return nil, err
	}
	defer g.close()
	if g.kind() == GenXDP {
		// The XDP generator's frames enter the LSR's ingress veth by
		// XDP_REDIRECT, which needs NAPI there: GRO on (an XDP program
		// of the forwarder's, where it has one, does the same).
		if out, err := t.lsr.exec("ethtool", "-K", t.lsrIn, "gro", "on"); err != nil {
			return nil, fmt.Errorf("ethtool -K %s gro on: %v: %s", t.lsrIn, err, out)
		}
	}
	sock, err := openCounter(t.sink.path(), t.sinkDev, filter)
	if err != nil {
		return nil, err
	}
	var c frameCounter = sock
	if xs, err := openXDPSink(t.sink.path(), t.sinkDev, wantLabel, dstIP, sock); err != nil {
		opts.progress("%s: %v; counting with the socket alone", cfg, err)
	} else {
		c = xs
	}
	defer c.close()

	spec.dst, spec.src = inMAC, genMAC
	spec.srcIP, spec.dstIP = genIP, dstIP
	spec.srcPort, spec.dstPort = srcPort, dstPort
	for _, size := range opts.FrameSizes {
		spec.size = size
		if err := g.setFrames(spec); err != nil {
			return results, err
		}
		rate := opts.Rate
		if rates != nil {
			rate = rates[size]
		}
		r, err := measure(ctx, opts, cfg, t, fw, g, c, wantLabel, size, rate, h)
		if err != nil {
			return results, fmt.Errorf("%d-byte frames: %w", size, err)
		}
		results = append(results, r)
	}
	return results, nil
}

// startForwarder starts cfg's forwarder in the LSR's namespace of t: an
// mplsnode run with the configuration's link setup, or the kernel.
func startForwarder(ctx context.Context, opts *Options, cfg string, t *topology, h hooks) (forwarder, error) {
	if cfg == ConfigKernel {
		return startKernel(t)
	}
	setup, ok := nodeSetups[cfg]
	if !ok {
		return nil, fmt.Errorf("unknown configuration %q", cfg)
	}
	if setup.linkType == "xdp" {
		// One AF_XDP socket per receive queue of the veths (one queue per
		// CPU, see newTopology).
		setup.words += fmt.Sprintf(" queues %d", runtime.NumCPU())
	}
	if setup.linkType == "tap" {
		if err := t.bridgeForTAPs(); err != nil {
			return nil, err
		}
	}
	opts.progress("%s: starting %s run in %s", cfg, opts.Bin, t.lsr.name)
	if opts.CPUProfileDir != "" {
		setup.cpuProfile = filepath.Join(opts.CPUProfileDir, cfg+".pprof")
	}
	setup.cpus, setup.nice = opts.FwdCPUs, opts.FwdNice
	if setup.linkType == "afpacket" && opts.LinkWords != "" {
		setup.words += " " + strings.TrimSpace(opts.LinkWords)
	}
	fw, err := startMPLSNode(ctx, opts.Bin, t, setup)
	if m, ok := fw.(*mplsnodeForwarder); ok && err == nil && h.nodeStarted != nil {
		h.nodeStarted(cfg, m.cmd.Process.Pid)
	}
	return fw, err
}
