// Command seedbench is `make bench`: it builds the seed topology of the
// 2016 netdev thread (ns0 -- ns1 -- ns2) in network namespaces and measures
// every configuration of bench/README.md side by side in one run, interleaved over
// rounds, with the project's own netperf. It prints progress while it runs,
// then a Markdown table and which targets are met, and writes results.md,
// results.json (every raw run), results.png and results.svg into -out.
// bench/README.md explains each configuration and how to read the results.
//
// It needs root (network namespaces, veths, AF_PACKET, TAP) and exits 2
// without it. Exit codes: 0 done (targets met or not: they are reported),
// 1 the bench failed or a configuration had no successful run, 2 usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mplsnode/mplsnode/bench"
	"github.com/mplsnode/mplsnode/bench/lsrrate"
)

const usage = `usage: seedbench [-rounds N] [-seconds S] [-configs LIST] [-out DIR] [-profile=false] [-bin PATH]

Builds the seed topology (ns0 -- ns1 -- ns2, names mpb<pid>-<kind><n>, removed
on every exit, Ctrl-C included) and measures, interleaved over rounds:

   1  kernel -> kernel, plain IP, veth offloads on
   2  kernel -> kernel, plain IP, tso/gso off on ns0's virt01
   3  stock gVisor (fdbased on AF_PACKET), plain IP, no GSO
   4  mplsnode in ns0, no labels, the kernel forwards in ns1
   5  mplsnode ns0 (push 100) -> mplsnode LSR ns1 (pop) -> kernel ns2   <- the headline
      (afpacket links in mode auto: packet rings; 5m: mode mmsg; 5q: ring, queues 2)
   6  6a: 3 labels (ns1 pops all three), IPv4; 6b: the same with IPv6 inside
   7  as 5 over TAP devices in Linux bridges instead of AF_PACKET
   8  8a: as 5 with set gso off; 8b: set gso stack (endpoint, the default, is 5)
   9  TCP_MAERTS (9a, 9b, 9c) and TCP_RR (9d, 9e, 9f) for 1, 2 and 5
  10  LSR forwarding rate (bench/lsrrate, in-kernel XDP generator): mplsnode
      swapping (rings, mmsg, rings with queues 2, AF_XDP, TAP, its XDP
      label switch) vs kernel IP forwarding, then the rings offered the
      kernel's rate

Every run uses the project's netperf: "mplsnode netperf" on kernel sockets or
on a node's stack (--config) in ns0, "mplsnode netserver --kernel" in ns2.
Per configuration it reports the median throughput and min-max over the
rounds, the CPU seconds (user/sys) of each process and the peak RSS of each
mplsnode, and checks the targets: 5/4 >= 0.95, 5/3 >= 5, 5/2 >= 1.0,
LSR pps / kernel >= 1.0, peak RSS < 64 MiB.

Needs root: it creates network namespaces and veths and opens AF_PACKET
sockets and TAP devices.

Options:
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == bench.GVisorClientCommand {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := bench.GVisorClientMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seedbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	// 5 rounds of 5 s keep the whole bench (16 netperf configurations,
	// the LSR rate and two profile runs) near 10 minutes on 2 cores.
	rounds := fs.Int("rounds", 5, "rounds: every configuration runs once per round, interleaved")
	seconds := fs.Int("seconds", 5, "length of each netperf run (and of each LSR rate measurement), seconds")
	configs := fs.String("configs", "all", "configurations to run: numbers 1..10 and rows such as 6b or 9c, comma-separated")
	out := fs.String("out", "", "directory for results.md, results.json, results.png/svg and profiles (default a new mplsnode-bench-TIME under $TMPDIR; -out bench/results refreshes the committed run)")
	profile := fs.Bool("profile", true, "profile the hot configurations (5, 9c) in one extra run each; pprof -top into -out")
	bin := fs.String("bin", filepath.Join("bin", "mplsnode"), "the mplsnode binary (make build)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "seedbench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	sel, err := bench.ParseSelection(*configs, bench.Configs())
	if err != nil {
		fmt.Fprintf(stderr, "seedbench: %v\n", err)
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintf(stderr, "seedbench: %v\n", bench.ErrNotRoot)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "seedbench: %v\n", err)
		return 1
	}
	absBin, err := filepath.Abs(*bin)
	if err != nil {
		fmt.Fprintf(stderr, "seedbench: %v\n", err)
		return 2
	}
	*out = resultsDir(*out)
	fmt.Fprintf(stdout, "seedbench: results go to %s\n", *out)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opt := bench.Options{
		Bin: absBin, Rounds: *rounds, Seconds: *seconds, Select: sel, OutDir: *out,
		Profile: *profile, GVisorCmd: []string{self, bench.GVisorClientCommand},
		LSRRate: lsrRate, Progress: stdout,
	}
	res, err := bench.Bench(ctx, opt)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "seedbench: interrupted; processes stopped and namespaces removed")
		return 130
	}
	if err != nil {
		fmt.Fprintf(stderr, "seedbench: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout)
	if err := bench.WriteMarkdown(stdout, res); err != nil {
		fmt.Fprintf(stderr, "seedbench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nwritten: %s\n", filepath.Join(*out, "results.{md,json,png,svg}"))
	for _, s := range res.Summaries {
		if s.Runs == 0 {
			fmt.Fprintf(stderr, "seedbench: configuration %s had no successful run\n", s.ID)
			return 1
		}
	}
	return 0
}

// lsrRate adapts bench/lsrrate.Run (configuration 10) to bench.LSRRateFunc;
// nil frame sizes mean lsrrate's defaults (64- and 1500-byte class frames).
func lsrRate(ctx context.Context, bin string, seconds float64, sizes []int, progress io.Writer) ([]bench.LSRResult, error) {
	rs, err := lsrrate.Run(ctx, lsrrate.Options{Bin: bin, Seconds: seconds, FrameSizes: sizes, Progress: progress})
	out := make([]bench.LSRResult, 0, len(rs))
	for _, r := range rs {
		out = append(out, bench.LSRResult{Config: r.Config, FrameSize: r.FrameSize, PPS: r.PPS,
			CPUSecondsPerMpkt: r.CPUSecondsPerMpkt, Frames: r.Frames, IngressDrops: r.IngressDrops,
			OfferedPPS: r.OfferedPPS, Generator: r.Generator})
	}
	return out, err
}

// resultsDir is -out, or by default a new directory under $TMPDIR named for
// the time: outside the checkout, so a run leaves the tracked tree clean.
func resultsDir(out string) string {
	if out != "" {
		return out
	}
	return filepath.Join(os.TempDir(), "mplsnode-bench-"+time.Now().UTC().Format("20060102-150405"))
}
