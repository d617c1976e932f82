// Command lsrrate measures the label-switching rate of mplsnode as an LSR
// next to the Linux kernel IP-forwarding the same frame sizes, in network
// namespaces it builds and removes (package bench/lsrrate), and prints a
// table. It needs root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/mplsnode/mplsnode/bench/lsrrate"
)

const usage = `usage: lsrrate [-bin PATH] [-seconds N] [-sizes 64,1500] [-gen xdp|afpacket] [-rate PPS]
               [-configs NAME,...] [-gen-cpus LIST] [-fwd-cpus LIST] [-fwd-nice N]
               [-link-words WORDS] [-q]

Measures how many frames per second mplsnode swaps as an LSR (label 100 in,
label 200 out, between two veths) and the CPU it spends per million frames,
next to the Linux kernel IP-forwarding plain IPv4/UDP frames of the same
sizes. It builds three network namespaces (generator, LSR, sink) with unique
names and removes them when it ends, also on Ctrl-C. The generator sends
from inside the kernel (-gen xdp: BPF_PROG_TEST_RUN of an XDP program in
live-frames mode redirecting each repetition into the generator's veth, one
thread per CPU, 64 UDP source ports) or from one thread of AF_PACKET
sendmmsg (-gen afpacket); by default xdp where the kernel runs it (Linux
5.18 and up), else afpacket, with a line saying which and why. An XDP
program on the sink's veth counts the frames that arrive correctly
forwarded and drops them. After the kernel forwarder, mplsnode-swap runs
once more offered the kernel's rate (mplsnode-swap@kernel-pps), so its
ingress drops (lower_rx_overflow) at that rate can be read off. Needs root.

Columns: sent = frames the generator sent (offered pps = sent per
second), frames = frames counted at the sink, pps = frames per second at
the sink, cpu s/Mpkt = CPU seconds of the forwarder per million frames
(mplsnode: its user+sys time; kernel: softirq time of the whole machine;
see go doc ./bench/lsrrate).

CPUs: by default the xdp generator runs one thread pinned to each CPU and
the forwarder is not pinned. Paced (-rate), each generator thread
busy-waits in the kernel between its frames, so on a small machine it
holds every CPU and the userspace LSR waits for one (its ring overflows
while it waits, though it uses little CPU). -gen-cpus LIST puts the
generator's threads on LIST only (the afpacket generator's one thread too)
and -fwd-cpus LIST starts every mplsnode forwarder under taskset -c LIST;
both apply to every configuration. The kernel forwarder has no process: it
runs inline in the generator's softirq work, on the generator's CPUs,
ahead of every task. -fwd-nice N starts every mplsnode forwarder under
nice -n N: a negative N gives the userspace LSR a similar precedence over
the generator and whatever else runs. The generator line says what was
used. On 2 cores -gen-cpus 0 -fwd-cpus 1 gives the LSR a core of its own,
which helps only when nothing else runs there (LIST: taskset's words, e.g.
0, 0-1, 1,3). -link-words adds words to the LSR's afpacket link lines, to
measure a link option (-link-words "rx-ring-frames 16384").

Example:

	go build -o bin/mplsnode ./cmd/mplsnode
	go run ./bench/lsrrate/cmd/lsrrate -bin bin/mplsnode -seconds 5 -sizes 64,1500

Exit codes: 0 ok, 1 the measurement failed, 2 usage error.

Options:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, code := parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	results, err := lsrrate.Run(ctx, opts)
	printTable(stdout, results)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// parseArgs parses the command line into lsrrate's options; code is the
// exit status when the command ends here (help, bad usage), else -1.
func parseArgs(args []string, stdout, stderr io.Writer) (opts lsrrate.Options, code int) {
	fs := flag.NewFlagSet("lsrrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	bin := fs.String("bin", "bin/mplsnode", "`PATH` of the mplsnode binary (go build -o bin/mplsnode ./cmd/mplsnode)")
	seconds := fs.Float64("seconds", lsrrate.DefaultSeconds, "duration of each measurement in `SECONDS`")
	sizes := fs.String("sizes", "64,1500", "comma-separated Ethernet frame `SIZES` without FCS (60..1514)")
	quiet := fs.Bool("q", false, "no progress lines (only the generator line and the table)")
	gen := fs.String("gen", "", "generator: xdp or afpacket (default: xdp where the kernel runs it, else afpacket)")
	only := fs.String("configs", "", "comma-separated `CONFIGS` to measure (default all: "+strings.Join(lsrrate.Configs(), ",")+")")
	rate := fs.Float64("rate", 0, "frames per second the generator offers (`PPS`); 0 means as many as it can")
	genCPUs := fs.String("gen-cpus", "", "CPU `LIST` for the generator's threads (default: one xdp thread per CPU)")
	fwdCPUs := fs.String("fwd-cpus", "", "CPU `LIST` for the mplsnode forwarder process, via taskset (default: not pinned)")
	fwdNice := fs.Int("fwd-nice", 0, "`NICE` value (-20..19) of the mplsnode forwarder process, via nice(1) (default 0)")
	linkWords := fs.String("link-words", "", "`WORDS` appended to the LSR's afpacket link lines, e.g. \"rx-ring-frames 16384\" (docs/CONFIG.md)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of each mplsnode forwarder's run to `DIR`/CONFIG.pprof (go tool pprof)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return opts, 0
		}
		return opts, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lsrrate: unexpected argument %q (see -help)\n", fs.Arg(0))
		return opts, 2
	}
	frameSizes, err := parseSizes(*sizes)
	if err != nil {
		fmt.Fprintln(stderr, "lsrrate:", err)
		return opts, 2
	}
	if err := checkValues(*seconds, *gen, *rate); err != nil {
		fmt.Fprintln(stderr, "lsrrate:", err)
		return opts, 2
	}
	opts = lsrrate.Options{Bin: *bin, Seconds: *seconds, FrameSizes: frameSizes, Generator: *gen, Rate: *rate, Log: stderr, LinkWords: *linkWords, FwdNice: *fwdNice}
	for _, c := range []struct {
		flag string
		val  string
		dst  *[]int
	}{{"-gen-cpus", *genCPUs, &opts.GenCPUs}, {"-fwd-cpus", *fwdCPUs, &opts.FwdCPUs}} {
		if c.val == "" {
			continue
		}
		cpus, err := lsrrate.ParseCPUList(c.val)
		if err != nil {
			fmt.Fprintf(stderr, "lsrrate: %s: %v\n", c.flag, err)
			return opts, 2
		}
		*c.dst = cpus
	}
	if *cpuProfile != "" {
		if err := os.MkdirAll(*cpuProfile, 0o755); err != nil {
			fmt.Fprintf(stderr, "lsrrate: -cpuprofile: %v\n", err)
			return opts, 1
		}
		opts.CPUProfileDir = *cpuProfile
	}
	if *only != "" {
		opts.Configs = strings.Split(*only, ",")
	}
	if !*quiet {
		opts.Progress = stderr
	}
	return opts, -1
}

// checkValues refuses a duration, generator or rate lsrrate cannot use.
func checkValues(seconds float64, gen string, rate float64) error {
	if !(seconds > 0) {
		return fmt.Errorf("-seconds %v: want more than 0", seconds)
	}
	switch gen {
	case "", lsrrate.GenXDP, lsrrate.GenAFPacket:
	default:
		return fmt.Errorf("-gen %q: want %s or %s", gen, lsrrate.GenXDP, lsrrate.GenAFPacket)
	}
	if !(rate >= 0) {
		return fmt.Errorf("-rate %v: want 0 or more", rate)
	}
	return nil
}

// parseSizes parses "64,1500".
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("-sizes %q: %q is not a number", s, f)
		}
		if n < lsrrate.MinFrameSize || n > lsrrate.MaxFrameSize {
			return nil, fmt.Errorf("-sizes: %d: want %d..%d (Ethernet frame without FCS)", n, lsrrate.MinFrameSize, lsrrate.MaxFrameSize)
		}
		out = append(out, n)
	}
	return out, nil
}

// printTable prints the results and, per frame size, mplsnode's rate over
// the kernel's.
func printTable(w io.Writer, results []lsrrate.Result) {
	if len(results) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tframe B\tsent\toffered pps\tframes\tloss %\tpps\tMbit/s\tcpu s/Mpkt\tingress drops\t")
	kernel := map[int]float64{}
	for _, r := range results {
		loss := 0.0
		if r.Sent > 0 {
			loss = 100 * (1 - float64(r.Frames)/float64(r.Sent))
		}
		// Mbit/s of frames without FCS, preamble or gap.
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%d\t%.1f\t%.0f\t%.0f\t%.3f\t%d\t\n", r.Config, r.FrameSize, r.Sent, r.OfferedPPS, r.Frames,
			loss, r.PPS, r.PPS*float64(r.FrameSize)*8/1e6, r.CPUSecondsPerMpkt, r.IngressDrops)
		if r.Config == lsrrate.ConfigKernel {
			kernel[r.FrameSize] = r.PPS
		}
	}
	tw.Flush()
	for _, r := range results {
		if r.Config != lsrrate.ConfigKernel && kernel[r.FrameSize] > 0 {
			fmt.Fprintf(w, "%d B: %s / kernel-ipfwd pps = %.2f\n", r.FrameSize, r.Config, r.PPS/kernel[r.FrameSize])
		}
	}
}
