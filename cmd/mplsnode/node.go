package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/link/pcap"
	"github.com/mplsnode/mplsnode/node"
)

const runUsage = `usage: mplsnode run -c FILE [--log-format text|json] [--log-level debug|info|warn|error]
                    [--control-socket PATH] [--metrics-addr ADDR]
                    [--pcap FILE[,DEV...] [-s SNAPLEN] [-C SIZE [-W COUNT]]]

Runs the node that FILE describes until SIGINT or SIGTERM. SIGHUP reloads
FILE: routes and label routes are replaced without dropping connections; a
file with errors, or one that changes links, addresses, sysctls or settings
(those need a restart), is rejected and logged, and the old tables stay.

Example (the LSR of the seed topology, ns1):

	# ns1.conf
	link add virt10 type afpacket queues 2
	link add virt12 type afpacket
	addr add 172.16.20.21/24 dev virt10
	addr add 172.16.21.21/24 dev virt12
	-f mpls route add 100 via inet 172.16.21.22 dev virt12

	ip netns exec ns1 mplsnode run -c ns1.conf --log-format json

The kernel must hold no IP address on the interfaces the node owns.
An afpacket link takes [queues N] (sockets in one PACKET_FANOUT group, one
goroutine each: the number of cores) and [mode auto|mmsg|ring] (packet
rings, recvmmsg/sendmmsg, or rings where the kernel has them: the default);
"mplsnode stats" shows the mode each link runs. [busy-poll USEC] (ring
mode) spins over the rings up to USEC after the last frame instead of
sleeping: lower latency for a core's CPU; a node that forwards does so
adaptively for 100 by default, busy-poll 0 turns it off (docs/CONFIG.md).
Counters: "mplsnode stats" reads them over the control socket (root-only,
mode 0600, which also takes "mplsnode route add|del"; "" turns it off);
--metrics-addr 127.0.0.1:9477 serves them to Prometheus at /metrics
(names in docs/METRICS.md).
--pcap ns1.pcapng,virt10 records every frame on the wire of virt10 (of
every link without DEV), sent and received, labels and all, as pcapng: one
interface a link (name, MTU), each frame with its link and direction,
nanosecond timestamps. Read it with tshark -r ns1.pcapng (-T fields -e
frame.interface_name; one link: -Y 'frame.interface_name == "virt10"'), or
live: --pcap - | tshark -r -; a reader that exits stops the capture
(logged), not the node. -s SNAPLEN cuts frames;
-C SIZE and -W COUNT rotate files as tcpdump does.
A second node on the same control socket or metrics address refuses to
start (exit 1, naming the first one's pid) before it opens any link.
Exit codes: 0 stopped by a signal, 1 runtime failure (another node holds
the control socket or metrics address, an interface is missing), 2 usage or
config error.

Options:
`

const checkUsage = `usage: mplsnode check -c FILE

Parses FILE and runs the node's semantic checks (label tables, supported
features) without opening any interface; where a link's interface exists
here, a link mtu larger than the interface's is an error. Prints "FILE: ok"
("FILE: ok (no links, no routes)" for a file that declares nothing), or
every error as FILE:LINE:COL: message.

Example:

	mplsnode check -c ns0.conf
	ns0.conf: ok

Exit codes: 0 ok, 2 the file has errors or cannot be read (or bad usage).

Options:
`

// newFlagSet returns a flag set that prints usage to w.
func newFlagSet(name, usage string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		printDefaults(fs)
	}
	return fs
}

// printDefaults lists fs's options as flag.PrintDefaults does, but names
// each as the usage texts write it: one dash for a single letter (-c FILE),
// two for a long option (--control-socket PATH). The flag package accepts
// both spellings of either.
func printDefaults(fs *flag.FlagSet) {
	w := fs.Output()
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		line := "  " + dash + f.Name
		name, text := flag.UnquoteUsage(f)
		if name != "" {
			line += " " + name
		}
		line += "\n    \t" + strings.ReplaceAll(text, "\n", "\n    \t")
		switch f.DefValue {
		case "", "0", "false", "0s":
		default:
			if g, ok := f.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					line += fmt.Sprintf(" (default %q)", f.DefValue)
					break
				}
			}
			line += " (default " + f.DefValue + ")"
		}
		fmt.Fprintln(w, line)
	})
}

// parseFlags parses args; it returns (exit code, true) when the caller must
// stop: -h (0) or a usage error (2).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (int, bool) {
	// The flag package prints the usage itself on any failure, -h
	// included; hold it back so that help goes to stdout only, and a
	// usage error's usage to stderr after its message.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return exitOK, true
		}
		fs.SetOutput(stderr)
		fs.Usage()
		return exitUsage, true
	}
	if fs.NArg() > 0 {
		hint := ""
		if c := fs.Lookup("c"); c != nil && c.Value.String() == "" && fs.NArg() == 1 {
			// `mplsnode check node.conf`: say where the file goes.
			hint = fmt.Sprintf(" (a config file goes after -c: mplsnode %s -c %s)", fs.Name(), fs.Arg(0))
		}
		fmt.Fprintf(stderr, "mplsnode %s: unexpected argument %q%s\n", fs.Name(), fs.Arg(0), hint)
		return exitUsage, true
	}
	return 0, false
}

// captureFlags are run's capture options beyond --pcap.
type captureFlags struct {
	snapLen   int
	fileSize  float64 // -C, millions of bytes
	fileCount int     // -W
}

// openCapture creates the pcapng capture path ("-": w, the process's
// stdout) and writes its header; the file is 0600 (it holds the traffic
// itself). A write error (a full disk, a reader that closed the pipe)
// stops the capture with a log line; the node keeps running.
func openCapture(path string, w io.Writer, cf captureFlags, logger *slog.Logger) (*pcap.Writer, error) {
	o := pcap.Options{
		NG:        true,
		SnapLen:   cf.snapLen,
		FileSize:  int64(cf.fileSize * 1e6),
		FileCount: cf.fileCount,
		OnError: func(err error) {
			logger.Error("capture stopped; the node keeps running", "file", path, "err", err)
		},
	}
	if path == "-" {
		// A reader that exits (tshark -c 6) closes the pipe: without this
		// the Go runtime kills the process on the write to fd 1 (SIGPIPE);
		// ignored, the write fails with EPIPE and only the capture stops.
		signal.Ignore(syscall.SIGPIPE)
		return pcap.NewWriterOptions(w, o)
	}
	pw, err := pcap.Create(path, o)
	if err != nil {
		return nil, fmt.Errorf("--pcap: %w", err)
	}
	return pw, nil
}

// closeCapture flushes and closes the capture and logs what it recorded,
// and what it could not.
func closeCapture(w *pcap.Writer, path string, logger *slog.Logger) {
	err := w.Close()
	if err != nil || w.Dropped() > 0 {
		logger.Error("capture incomplete", "file", path, "frames", w.Frames(), "files", w.Files(), "not_recorded", w.Dropped(), "err", err)
		return
	}
	logger.Info("capture closed", "file", path, "frames", w.Frames(), "files", w.Files())
}

// checkCaptureFlags returns what is wrong with -s, -C and -W, or "".
func checkCaptureFlags(pcapFile string, cf captureFlags) string {
	switch {
	case cf.snapLen < 0:
		return fmt.Sprintf("-s %d: want 0 (the default, 262144) or more", cf.snapLen)
	case cf.fileSize < 0 || cf.fileCount < 0:
		return "-C and -W take positive numbers"
	case pcapFile == "" && (cf.snapLen != 0 || cf.fileSize != 0 || cf.fileCount != 0):
		return "-s, -C and -W need --pcap"
	case pcapFile == "-" && cf.fileSize != 0:
		return "-C rotates files: it needs --pcap FILE, not -"
	case cf.fileCount != 0 && cf.fileSize == 0:
		return "-W needs -C SIZE"
	case cf.fileSize != 0 && cf.fileSize*1e6 < 1:
		return fmt.Sprintf("-C %g: at least one byte", cf.fileSize)
	}
	return ""
}

// pcapLinksOrAll names the captured links for the log.
func pcapLinksOrAll(links []string) string {
	if len(links) == 0 {
		return "all"
	}
	return strings.Join(links, ",")
}

// whileLoading runs load in the background and returns what it returns,
// with loaded true (a million routes take seconds, and a SIGTERM
// meanwhile must end the process now, not after the load); when ctx ends first it returns at once with loaded
// false, and the load dies with the process.
func whileLoading[T any](ctx context.Context, load func() (T, error)) (v T, loaded bool, err error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := load()
		done <- result{v, err}
	}()
	select {
	case <-ctx.Done():
		return v, false, nil
	case r := <-done:
		return r.v, true, r.err
	}
}

// loadGCPercent is the garbage collector's GOGC while a node loads: the
// load builds a config and a FIB of up to millions of routes, and the
// default (100) lets the heap grow to twice what is live; 10 keeps the
// peak resident memory of a million-route load near what it holds (about
// 400 MiB instead of 800), for a few percent more CPU during the load
// only (bench/cmd/routescale measures it).
const loadGCPercent = 10

// reloadNode parses the config at path and reloads n with it, with the
// garbage collector as tight as during the first load (the old FIB lives
// until the new one replaces it).
func reloadNode(n *node.Node, path string) error {
	defer debug.SetGCPercent(debug.SetGCPercent(loadGCPercent))
	newCfg, err := config.ParseFile(path)
	if err != nil {
		return err
	}
	return n.Reload(newCfg)
}

// loadConfig parses and checks path, printing errors to stderr.
func loadConfig(path string) (*config.Config, error) {
	cfg, err := config.ParseFile(path)
	if err != nil {
		return nil, err
	}
	if err := node.Check(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func runCheck(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", checkUsage, stderr)
	file := fs.String("c", "", "config `FILE` (required)")
	if code, stop := parseFlags(fs, args, stdout, stderr); stop {
		return code
	}
	if *file == "" {
		return usageError(stderr, "check", "-c FILE is required")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(loadGCPercent)) // a million routes, as run
	cfg, err := loadConfig(*file)
	if err == nil {
		err = node.CheckInterfaces(cfg, nil)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if len(cfg.Links) == 0 && len(cfg.Routes) == 0 && len(cfg.LabelRoutes) == 0 {
		// Not an error (a node may learn everything later), but rarely
		// what was meant: an empty file, or one all comments.
		fmt.Fprintf(stdout, "%s: ok (no links, no routes)\n", *file)
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: ok\n", *file)
	return exitOK
}

// newLogger builds the slog logger the flags ask for.
func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// runOptions is what mplsnode run's flags say.
type runOptions struct {
	file, format, level  string
	ctlSock, metricsAddr string
	cpuProfile           string
	pcapFile, pcapLinks  string
	capture              captureFlags
}

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ro, code, stop := parseRunFlags(args, stdout, stderr)
	if stop {
		return code
	}
	stopProfile, ok := startCPUProfile("run", ro.cpuProfile, stderr)
	if !ok {
		return exitUsage
	}
	defer stopProfile()
	logger, err := newLogger(ro.format, ro.level, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "mplsnode run:", err)
		return exitUsage
	}
	cfg, captureLinks, code, ok := loadRunConfig(ctx, ro, logger, stderr)
	if !ok {
		return code
	}
	n, stopServers, done, code, ok := startRunNode(ctx, ro, cfg, captureLinks, logger, stdout, stderr)
	if !ok {
		return code
	}
	defer done()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			stopServers()
			if err := n.Close(); err != nil {
				logger.Error("close", "err", err)
				return exitFailure
			}
			return exitOK
		case <-hup:
			logger.Info("SIGHUP: reloading", "config", ro.file)
			if err := reloadNode(n, ro.file); err != nil {
				logger.Error("reload rejected; the old tables stay", "config", ro.file, "err", err.Error())
			}
		}
	}
}

// parseRunFlags parses mplsnode run's flags; stop says the command ends
// here with code (help, bad usage).
func parseRunFlags(args []string, stdout, stderr io.Writer) (ro runOptions, code int, stop bool) {
	fs := newFlagSet("run", runUsage, stderr)
	fs.StringVar(&ro.file, "c", "", "config `FILE` (required)")
	fs.StringVar(&ro.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&ro.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&ro.ctlSock, "control-socket", node.DefaultControlSocket, "control socket `PATH` for mplsnode stats (empty: off)")
	fs.StringVar(&ro.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://`ADDR`/metrics (empty: off), e.g. 127.0.0.1:9477; :9477 listens on loopback only")
	fs.StringVar(&ro.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE` (read it with go tool pprof)")
	pcapSpec := fs.String("pcap", "", "record the frames of the links DEV (default all) to `FILE[,DEV...]` (pcapng, one interface a link; - is stdout); a recorded link runs without the XDP program, so every frame it forwards is seen")
	fs.IntVar(&ro.capture.snapLen, "s", 0, "with --pcap: record at most `SNAPLEN` bytes of a frame (0: 262144)")
	fs.Float64Var(&ro.capture.fileSize, "C", 0, "with --pcap FILE: start a new file when the current one is past `SIZE` million bytes (tcpdump -C): FILE, FILE1, FILE2, ...")
	fs.IntVar(&ro.capture.fileCount, "W", 0, "with -C: keep at most `COUNT` files, FILE0 .. FILE<COUNT-1>, reused in turn (tcpdump -W)")
	if code, stop := parseFlags(fs, args, stdout, stderr); stop {
		return ro, code, true
	}
	if ro.file == "" {
		fmt.Fprintln(stderr, "mplsnode run: -c FILE is required")
		return ro, exitUsage, true
	}
	ro.pcapFile, ro.pcapLinks, _ = strings.Cut(*pcapSpec, ",")
	if *pcapSpec != "" && ro.pcapFile == "" {
		fmt.Fprintf(stderr, "mplsnode run: --pcap %q: want FILE[,DEV...]\n", *pcapSpec)
		return ro, exitUsage, true
	}
	if msg := checkCaptureFlags(ro.pcapFile, ro.capture); msg != "" {
		fmt.Fprintln(stderr, "mplsnode run:", msg)
		return ro, exitUsage, true
	}
	return ro, 0, false
}

// loadRunConfig parses the config file in the background (a million routes
// take seconds, and a SIGTERM meanwhile must end the process now, not after
// the load) and checks the --pcap links against it; ok false means the
// command ends with code.
func loadRunConfig(ctx context.Context, ro runOptions, logger *slog.Logger, stderr io.Writer) (cfg *config.Config, captureLinks []string, code int, ok bool) {
	logger.Info("loading config", "config", ro.file)
	cfg, loaded, err := whileLoading(ctx, func() (*config.Config, error) {
		defer debug.SetGCPercent(debug.SetGCPercent(loadGCPercent))
		// Parsed only: node.New runs the semantic checks (node.Check)
		// itself, and a second FIB build would cost a million-route file
		// seconds.
		return config.ParseFile(ro.file)
	})
	if !loaded {
		logger.Info("stopped while loading the config", "config", ro.file)
		return nil, nil, exitOK, false // the loader dies with the process
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil, exitUsage, false
	}
	if ro.pcapLinks != "" {
		captureLinks = strings.Split(ro.pcapLinks, ",")
		if err := node.CheckCaptureLinks(cfg, captureLinks); err != nil {
			fmt.Fprintf(stderr, "mplsnode run: %s: %v\n", ro.file, err)
			return nil, nil, exitUsage, false
		}
	}
	return cfg, captureLinks, 0, true
}

// startRunNode claims the control socket and the metrics address and checks
// that no other node holds the links, before anything else (the capture
// file, the links): a second node on the same config stops here, exit 1,
// naming the first. Then it opens the capture, starts the node and its
// servers. done closes the capture; ok false means the command ends with
// code.
func startRunNode(ctx context.Context, ro runOptions, cfg *config.Config, captureLinks []string, logger *slog.Logger,
	stdout, stderr io.Writer) (n *node.Node, stopServers, done func(), code int, ok bool) {
	done = func() {}
	ctlLn, metricsLn, err := claimObservability(ro.ctlSock, ro.metricsAddr)
	if err != nil {
		fmt.Fprintln(stderr, "mplsnode run: not starting:", err)
		return nil, nil, done, exitFailure, false
	}
	fail := func(code int) (*node.Node, func(), func(), int, bool) {
		for _, ln := range []net.Listener{ctlLn, metricsLn} {
			if ln != nil {
				ln.Close()
			}
		}
		done()
		return nil, nil, func() {}, code, false
	}
	if err := node.CheckLinksFree(cfg); err != nil {
		fmt.Fprintln(stderr, "mplsnode run: not starting:", err)
		return fail(exitFailure)
	}
	opts := node.Options{Logger: logger}
	if ro.pcapFile != "" {
		w, err := openCapture(ro.pcapFile, stdout, ro.capture, logger)
		if err != nil {
			fmt.Fprintln(stderr, "mplsnode run:", err)
			return fail(exitUsage)
		}
		done = func() { closeCapture(w, ro.pcapFile, logger) }
		opts.Capture, opts.CaptureLinks = w, captureLinks
	}
	n, loaded, err := whileLoading(ctx, func() (*node.Node, error) {
		defer debug.SetGCPercent(debug.SetGCPercent(loadGCPercent))
		return node.New(cfg, opts)
	})
	if !loaded {
		logger.Info("stopped while loading the config", "config", ro.file)
		return fail(exitOK) // the loader dies with the process
	}
	if err != nil {
		var el config.ErrorList
		if errors.As(err, &el) || errors.Is(err, node.ErrUnknownLink) {
			fmt.Fprintf(stderr, "mplsnode run: %s: %v\n", ro.file, err)
			return fail(exitUsage)
		}
		logger.Error("node failed to start", "err", err)
		return fail(exitFailure)
	}
	if opts.Capture != nil {
		logger.Info("capturing frames", "file", ro.pcapFile, "links", pcapLinksOrAll(opts.CaptureLinks))
	}
	return n, startObservability(ctx, n, ctlLn, metricsLn, logger), done, 0, true
}
