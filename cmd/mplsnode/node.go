package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/link/pcap"
	"github.com/mplsnode/mplsnode/node"
)

func init() {
	register(command{name: "run", summary: "run a node (host, LER, LSR) from a config file", run: runNode})
	register(command{name: "check", summary: "validate a node config file without touching the network", run: runCheck})
}

const runUsage = `usage: mplsnode run -c FILE [--log-format text|json] [--log-level debug|info|warn|error]
                    [--control-socket PATH] [--metrics-addr ADDR] [--pcap FILE[,DEV...]]

Runs the node that FILE describes until SIGINT or SIGTERM. SIGHUP reloads
FILE: routes and label routes are replaced without dropping connections; a
file with errors, or one that changes links, addresses, sysctls or settings
(those need a restart), is rejected and logged, and the old tables stay.

Example (the LSR of the seed topology, ns1):

	# ns1.conf
	link add virt10 type afpacket
	link add virt12 type afpacket
	addr add 172.16.20.21/24 dev virt10
	addr add 172.16.21.21/24 dev virt12
	-f mpls route add 100 via inet 172.16.21.22 dev virt12

	ip netns exec ns1 mplsnode run -c ns1.conf --log-format json

The kernel must hold no IP address on the interfaces the node owns.
Counters: "mplsnode stats" reads them over the control socket (read-only,
mode 0600; "" turns it off); --metrics-addr 127.0.0.1:9477 serves them to
Prometheus at /metrics (names in docs/METRICS.md).
--pcap ns1.pcap,virt10 records every frame on the wire of virt10 (of every
link without DEV), sent and received, labels and all, as an Ethernet pcap
with nanosecond timestamps: tshark -r ns1.pcap, or --pcap - | tshark -r -.
Exit codes: 0 stopped by a signal, 1 runtime failure, 2 usage or config error.

Options:
`

const checkUsage = `usage: mplsnode check -c FILE

Parses FILE and runs the node's semantic checks (label tables, supported
features) without opening any interface. Prints "FILE: ok", or every error
as FILE:LINE:COL: message.

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
		fs.PrintDefaults()
	}
	return fs
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
		fmt.Fprintf(stderr, "mplsnode %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, true
	}
	return 0, false
}

// openCapture creates the pcap file path ("-": w) and writes its header.
// The file is 0600: it holds the traffic itself.
func openCapture(path string, w io.Writer) (*pcap.Writer, error) {
	if path == "-" {
		return pcap.NewWriter(w, 0)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--pcap: %w", err)
	}
	pw, err := pcap.NewWriter(f, 0)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("--pcap %s: %w", path, err)
	}
	return pw, nil
}

// closeCapture flushes and closes the capture and logs what it recorded,
// and what it could not.
func closeCapture(w *pcap.Writer, path string, logger *slog.Logger) {
	err := w.Close()
	if err != nil || w.Dropped() > 0 {
		logger.Error("capture incomplete", "file", path, "frames", w.Frames(), "not_recorded", w.Dropped(), "err", err)
		return
	}
	logger.Info("capture closed", "file", path, "frames", w.Frames())
}

// pcapLinksOrAll names the captured links for the log.
func pcapLinksOrAll(links []string) string {
	if len(links) == 0 {
		return "all"
	}
	return strings.Join(links, ",")
}

// loadResult is what loadNode gives back.
type loadResult struct {
	node  *node.Node
	err   error
	usage bool // err is the config file's (exit 2), not the network's
}

// loadGCPercent is the garbage collector's GOGC while a node loads: the
// load builds a config and a FIB of up to millions of routes, and the
// default (100) lets the heap grow to twice what is live; 10 keeps the
// peak resident memory of a million-route load near what it holds (about
// 400 MiB instead of 800), for a few percent more CPU during the load
// only (bench/cmd/routescale measures it).
const loadGCPercent = 10

// loadNode parses the config at path and starts its node.
func loadNode(path string, opts node.Options) loadResult {
	defer debug.SetGCPercent(debug.SetGCPercent(loadGCPercent))
	cfg, err := config.ParseFile(path)
	if err != nil {
		return loadResult{err: err, usage: true}
	}
	n, err := node.New(cfg, opts)
	return loadResult{node: n, err: err}
}

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
		fmt.Fprintln(stderr, "mplsnode check: -c FILE is required")
		return exitUsage
	}
	defer debug.SetGCPercent(debug.SetGCPercent(loadGCPercent)) // a million routes, as run
	if _, err := loadConfig(*file); err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
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

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", runUsage, stderr)
	file := fs.String("c", "", "config `FILE` (required)")
	format := fs.String("log-format", "text", "log format: text or json")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	ctlSock := fs.String("control-socket", node.DefaultControlSocket, "control socket `PATH` for mplsnode stats (empty: off)")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://`ADDR`/metrics (empty: off), e.g. 127.0.0.1:9477; :9477 listens on loopback only")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `FILE` (read it with go tool pprof)")
	pcapSpec := fs.String("pcap", "", "record the frames of the links DEV (default all) to `FILE[,DEV...]` (pcap, Ethernet, ns timestamps; - is stdout)")
	if code, stop := parseFlags(fs, args, stdout, stderr); stop {
		return code
	}
	if *file == "" {
		fmt.Fprintln(stderr, "mplsnode run: -c FILE is required")
		return exitUsage
	}
	pcapFile, pcapLinks, _ := strings.Cut(*pcapSpec, ",")
	if *pcapSpec != "" && pcapFile == "" {
		fmt.Fprintf(stderr, "mplsnode run: --pcap %q: want FILE[,DEV...]\n", *pcapSpec)
		return exitUsage
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		fmt.Fprintln(stderr, "mplsnode run:", err)
		return exitUsage
	}
	defer stopProfile()
	logger, err := newLogger(*format, *level, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "mplsnode run:", err)
		return exitUsage
	}
	opts := node.Options{Logger: logger}
	if pcapFile != "" {
		w, err := openCapture(pcapFile, stdout)
		if err != nil {
			fmt.Fprintln(stderr, "mplsnode run:", err)
			return exitUsage
		}
		defer closeCapture(w, pcapFile, logger)
		opts.Capture = w
		if pcapLinks != "" {
			opts.CaptureLinks = strings.Split(pcapLinks, ",")
		}
	}
	// Load in the background: a million routes take seconds, and a
	// SIGTERM meanwhile must end the process now, not after the load.
	logger.Info("loading config", "config", *file)
	loaded := make(chan loadResult, 1)
	go func() { loaded <- loadNode(*file, opts) }()
	var n *node.Node
	select {
	case <-ctx.Done():
		logger.Info("stopped while loading the config", "config", *file)
		return exitOK // the loader dies with the process
	case r := <-loaded:
		if r.err != nil {
			var el config.ErrorList
			switch {
			case r.usage || errors.As(r.err, &el):
				fmt.Fprintln(stderr, r.err) // positioned: file:line:col
				return exitUsage
			case errors.Is(r.err, node.ErrUnknownLink):
				fmt.Fprintf(stderr, "mplsnode run: %s: %v\n", *file, r.err)
				return exitUsage
			}
			logger.Error("node failed to start", "err", r.err)
			return exitFailure
		}
		n = r.node
	}
	if opts.Capture != nil {
		logger.Info("capturing frames", "file", pcapFile, "links", pcapLinksOrAll(opts.CaptureLinks))
	}
	stopServers := startObservability(ctx, n, *ctlSock, *metricsAddr, logger)
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
			logger.Info("SIGHUP: reloading", "config", *file)
			err := reloadNode(n, *file)
			if err != nil {
				logger.Error("reload rejected; the old tables stay", "config", *file, "err", err.Error())
			}
		}
	}
}
