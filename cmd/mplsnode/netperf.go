package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/mplsnode/mplsnode/netperf"
	"github.com/mplsnode/mplsnode/node"
)

const netperfUsage = `usage: mplsnode netperf [--config node.conf | --kernel] -H HOST[,FAMILY] [-p PORT[,LPORT]] [-4|-6]
         [-l SECONDS|-COUNT] [-t TEST] [-f k|m|g|K|M|G|x] [-c [RATE]] [-C [RATE]] [-L LOCAL] [-P 0|1]
         [-v LEVEL] [-D [[-]SECONDS]] [-i MAX[,MIN]] [-I LEVEL[,WIDTH]] [-Z PASSPHRASE] [-O SND,RCV]
         [-F FILE[,RFILE]] [-Y TOS[,RTOS]] [-T LCPU[,RCPU]] [--json] [--classic] [--cpuprofile FILE]
         [-- [-m SIZE[,RSIZE]] [-M SIZE[,RSIZE]] [-s BUF[,BUF]] [-S BUF[,BUF]] [-r REQ[,RESP]] [-D]
             [-H HOST] [-L LOCAL] [-P LPORT[,RPORT]] [-p MIN[,MAX]] [-R 0|1] [-e SECONDS]
             [-K ALG[,RALG]] [-o|-O|-k [OUTPUT,...]]]

A netperf 2.x client that speaks the stock control protocol, so it measures
against stock netserver as well as "mplsnode netserver". With --config the
client runs on the userspace stack of the node that node.conf describes (its
links, addresses and label routes: TCP to a labelled route leaves as MPLS);
without it (or with --kernel) it uses the kernel's sockets. Stock netperf's
letters keep their meanings and its output layouts; our additions are long
options (--json prints one JSON object instead of netperf's tables; the
node's frame counters go to stderr). Global options come before "--",
test-specific ones after it, as in netperf:

  -H HOST[,FAM]  netserver's address (control connection); FAM 4 or 6
  -p PORT[,LP]   its port (12865) and our control connection's local port
  -4, -6         IPv4 or IPv6 only     -f UNITS  k/m/g: 10^3/6/9 bits/s, K/M/G: 2^10/20/30 bytes/s, x: Trans/s
                 (with -f k..G, TCP_RR, TCP_CRR and UDP_RR report the bytes moved both ways)
  -t TEST        TCP_STREAM (we send), TCP_MAERTS (we receive), TCP_RR (transactions),
                 TCP_CRR (a connection per transaction), TCP_CC (connect/close only),
                 UDP_STREAM (we send datagrams), UDP_RR (datagram transactions)
  -l N           run N seconds; -l -N: N bytes (STREAM/MAERTS) or N transactions (RR)
  -c, -C [RATE]  report local / remote CPU utilisation
  -L LOCAL       local address of the control connection   -P 0|1   banner off/on
  -v 0|1|2       0: only the result (throughput or service demand); 2: the table and stock's
                 alignment/offset/calls block (STREAM, MAERTS, RR, CRR); as stock, other
                 levels print no table (above 2 the banner and that block, below 0 the banner)
  --histogram    print as a netperf built with --enable-histogram: " : histogram" in the banner,
                 with -v 2 the histogram of transaction times (RR, CRR, CC; UDP_RR)
  -D [SECONDS]   interim results every SECONDS (1) while the test runs; a negative
                 interval (stock's "always timestamp" mode, flent's -D -0.20) reports
                 alike; under -- -k/-o the lines are stock's NETPERF_INTERIM_RESULT[n]=...
  -F FILE[,RF]   fill the send buffers from FILE (read again at its end); RF to the server
  -Y TOS[,RTOS]  IP TOS / traffic class of our data socket and the server's: CS0..CS7,
                 AF11..AF43, EF, lowdelay, throughput, reliability or 0..255
  -T LCPU[,RCPU] bind this process (every thread) to CPU LCPU; RCPU is sent to the
                 server (mplsnode netserver does not bind)
  -B BRAND       tag the result line with BRAND when -P 0 (and RESULT_BRAND)
  -i, -I         confidence-interval iterations and level   -Z PASS  netserver passphrase
  -O SND,RCV     the server's buffer offsets (-o, the local ones, is accepted)
  -- -m/-M    send / receive size       -- -s/-S  local / remote socket buffers
  -- -r R,S   request and response size -- -D     TCP_NODELAY
  -- -H, -L, -P   data connection's remote host, local address (each NAME[,FAM]), local,remote ports
  -- -4, -6   the data connection's family
  -- -p MIN,MAX   TCP_CRR/TCP_CC: client ports, consecutive from a random start (5000,65535)
  -- -R 0|1   routing of the data: as stock, UDP_STREAM reaches a server behind a
              gateway only with -R 1 (else "network is unreachable"); sent to the server
  -- -e SECS  UDP_RR: give a response up after SECS and send the next request
  -- -K ALG[,RALG]   TCP congestion control of our data socket and the server's
  -- -o/-O/-k [OUTPUT,...]   omni output: CSV, columns, NAME=value (THROUGHPUT,
                 THROUGHPUT_UNITS, ELAPSED_TIME, MEAN_LATENCY, P99_LATENCY, ...; "all";
                 "?" lists the names; or a FILE of such lists, one output line each)
  --cpuprofile FILE   write a CPU profile of the run (client and node) for go tool pprof

SIGINT or SIGTERM stops the test at once: no result, a line on stderr, exit 1.
flent runs this as its netperf: put a "netperf" script running "mplsnode netperf"
first on its PATH.

Exit codes: 0 the test ran and its result is printed, 1 it failed (no
netserver answers, the server refused, a signal stopped it) or "-- -o ?"
listed the output names, 2 usage error (a bad option, config file or CPU),
255 an output selection file that cannot be used (stock's exit(-1)).

Example (ns0 of the seed topology: 10 s of TCP over label 100):
  mplsnode netperf --config examples/seed/ns0.conf -H 10.10.10.10 -l 10 -t TCP_STREAM
`

const netserverUsage = `usage: mplsnode netserver [--config node.conf | --kernel] [-p PORT] [-L ADDR] [-4|-6] [-Z PASSPHRASE] [-D] [-v [LEVEL]]
         [--cpuprofile FILE]

A netperf 2.x netserver: serves stock netperf and "mplsnode netperf" clients
(TCP_STREAM, TCP_MAERTS, TCP_RR, TCP_CRR, TCP_CC, UDP_STREAM, UDP_RR; omni and
classic requests) until SIGINT or SIGTERM. With --config it listens on the
userspace stack of the node that node.conf describes (and prints the node's
frame and TCP counters on stderr when it stops); without it (or with
--kernel) on kernel sockets.

  -p PORT   control port (12865)          -L ADDR  listen address (all)
  -4, -6    IPv4 or IPv6 only             -Z PASS  require this passphrase
  -D        stay in the foreground (it always does; accepted for netserver's sake)
  -v [LEVEL]  debug logs (unless LEVEL is 0)
  --cpuprofile FILE   write a CPU profile of the server (and node) until it stops

Exit codes: 0 stopped by SIGINT or SIGTERM, 1 runtime failure (the port
cannot be listened on), 2 usage or config error.

Example (ns2 of the seed topology, the kernel as TCP peer):
  mplsnode netserver --kernel -p 12865
`

var errHelp = errors.New("help requested")

// exitSelectionFile is stock netperf's exit(-1) for an output selection
// file it cannot use.
const exitSelectionFile = 255

// kernelDialer returns a dialer on kernel sockets bound to local (host or
// host:port; empty means any), for TCP and UDP.
func kernelDialer(local string, port int) (netperf.DialFunc, error) {
	if local == "" && port == 0 {
		var d net.Dialer
		return d.DialContext, nil
	}
	ip := net.ParseIP(local)
	if local != "" && ip == nil {
		return nil, fmt.Errorf("local address %q is not an IP address", local)
	}
	tcp := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip, Port: port}}
	udp := net.Dialer{LocalAddr: &net.UDPAddr{IP: ip, Port: port}}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if strings.HasPrefix(network, "udp") {
			return udp.DialContext(ctx, network, address)
		}
		return tcp.DialContext(ctx, network, address)
	}, nil
}

// kernelPortDialer returns TCP_CRR's and TCP_CC's dialer on kernel
// sockets: each connection from local (empty: any) and the port the
// client picks, with SO_REUSEADDR as stock netperf's data sockets, so a
// port whose earlier connection is in TIME_WAIT binds again.
func kernelPortDialer(local string) (netperf.PortDialFunc, error) {
	ip := net.ParseIP(local)
	if local != "" && ip == nil {
		return nil, fmt.Errorf("local address %q is not an IP address", local)
	}
	reuse := func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
		}); err != nil {
			return err
		}
		return serr
	}
	return func(ctx context.Context, network, address string, port int) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip, Port: port}, Control: reuse}
		return d.DialContext(ctx, network, address)
	}, nil
}

func runNetperf(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a, err := parseNetperfArgs(args)
	if err == nil {
		a.cfg.CommandLine = strings.Join(os.Args, " ") // COMMAND_LINE: argv as netperf keeps it
	}
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, netperfUsage)
		return exitOK
	}
	var selErr *netperf.SelectionFileError
	if errors.As(err, &selErr) {
		// As stock: the complaint on stdout, exit(-1).
		fmt.Fprintln(stdout, selErr.Msg)
		return exitSelectionFile
	}
	if err != nil {
		fmt.Fprintf(stderr, "mplsnode netperf: %v\n%s", err, netperfUsage)
		return exitUsage
	}
	if a.omniSelection == "?" {
		// As stock: the list of output names, then exit 1 without a test.
		_ = netperf.WriteOmniChoices(stdout, a.omniMode)
		return exitFailure
	}
	stopProfile, ok := startCPUProfile("netperf", a.cpuProfile, stderr)
	if !ok {
		return exitUsage
	}
	defer stopProfile()
	var n *node.Node
	if a.configFile != "" {
		if n, err = startNode(a.configFile, stderr); err != nil {
			return usageError(stderr, "netperf", "%v", err)
		}
		defer n.Close()
	}
	if err := a.setDialers(n); err != nil {
		return usageError(stderr, "netperf", "%v", err)
	}
	if a.localCPU >= 0 {
		if err := bindToCPU(a.localCPU); err != nil {
			return usageError(stderr, "netperf", "%v", err)
		}
	}
	a.cfg.InterimOut, a.cfg.InterimMode = stdout, a.omniMode
	interimBanner := a.printInterimBanner(stdout)
	rep, err := netperf.Run(ctx, a.cfg)
	if rep != nil {
		rep.BannerPrinted = interimBanner
	}
	if n != nil {
		// On stderr: stdout carries exactly what stock netperf prints.
		defer printNodeDrops(stderr, n)
	}
	if err != nil && ctx.Err() != nil {
		// SIGINT or SIGTERM: the test stopped where it was, no result.
		fmt.Fprintln(stderr, "mplsnode netperf: interrupted by a signal: test stopped, no result")
		return exitFailure
	}
	if err != nil {
		fmt.Fprintf(stderr, "mplsnode netperf: %v\n", err)
		return exitFailure
	}
	err = a.writeReport(stdout, rep)
	if err != nil {
		fmt.Fprintf(stderr, "mplsnode netperf: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// printInterimBanner prints the banner ahead of the test when interim
// results will follow it, as stock does; it reports whether it did.
func (a *netperfArgs) printInterimBanner(stdout io.Writer) bool {
	if a.cfg.Interim <= 0 || !a.headers || a.json {
		return false
	}
	fam := a.cfg.Family
	if ip, err := netip.ParseAddr(a.cfg.Host); fam == 0 && err == nil && !ip.Unmap().Is4() {
		fam = netperf.FamilyIPv6
	}
	fmt.Fprint(stdout, (&netperf.Report{Config: a.cfg, Family: fam}).Banner())
	return true
}

// setDialers gives the test its dialers: on the userspace stack of n (and
// the stack's answers for what its sockets cannot tell), or on kernel
// sockets when n is nil.
func (a *netperfArgs) setDialers(n *node.Node) (err error) {
	if n == nil {
		if a.cfg.Dial, err = kernelDialer(a.localAddr, a.localPort); err == nil {
			a.cfg.DataDial, err = kernelDialer(a.cfg.LocalDataAddr, a.cfg.LocalDataPort)
		}
		if err == nil {
			a.cfg.ConnectDial, err = kernelPortDialer(a.cfg.LocalDataAddr)
		}
		return err
	}
	a.cfg.ListenPacket = n.Stack().ListenPacket
	a.cfg.TransportInfo = n.Stack().TransportInfo
	a.cfg.OnLink = n.Stack().OnLink
	if a.cfg.Dial, err = nodeDialer(n, a.localAddr, a.localPort); err == nil {
		a.cfg.DataDial, err = nodeDialer(n, a.cfg.LocalDataAddr, a.cfg.LocalDataPort)
	}
	if err == nil {
		a.cfg.ConnectDial, err = nodePortDialer(n, a.cfg.LocalDataAddr)
	}
	return err
}

// writeReport prints rep as the command line asked: JSON, omni output,
// or stock's tables at its -v level.
func (a *netperfArgs) writeReport(stdout io.Writer, rep *netperf.Report) (err error) {
	switch {
	case a.json:
		err = rep.WriteJSON(stdout)
	case a.omniMode != 0:
		err = rep.WriteOmni(stdout, a.omniMode, a.omniSelection, a.headers)
		if err == nil && a.verbosity > 1 && a.cfg.Histogram {
			err = rep.WriteHistogram(stdout)
		}
	case a.verbosity < 0 || a.verbosity > 2:
		// Stock prints its tables for -v 0, 1 and 2 only; above 2 the
		// -v 2 block still follows.
		err = rep.WritePreamble(stdout, a.headers)
		if err == nil && a.verbosity > 2 {
			err = rep.WriteVerbose(stdout)
		}
	case a.verbosity == 0:
		err = rep.WriteTerse(stdout, a.headers)
	default:
		err = rep.WriteText(stdout, a.headers)
		if err == nil && a.verbosity > 1 {
			err = rep.WriteVerbose(stdout)
		}
	}
	return err
}

var netserverSpec = optSpec{"-p": needsArg, "-L": needsArg, "-Z": needsArg, "-D": noArg, "-v": optionalNum,
	"-h": noArg, "--help": noArg, "-4": noArg, "-6": noArg, "--kernel": noArg, "--config": needsArg,
	"--cpuprofile": needsArg}

func runNetserver(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a, code, stop := parseNetserverArgs(args, stdout, stderr)
	if stop {
		return code
	}
	stopProfile, ok := startCPUProfile("netserver", a.cpuProfile, stderr)
	if !ok {
		return exitUsage
	}
	defer stopProfile()
	if a.kernel && a.configFile != "" {
		return usageError(stderr, "netserver", "--kernel and --config are exclusive")
	}
	srv := &netperf.Server{Passphrase: a.passphrase}
	srv.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: a.level}))
	listen := net.Listen
	if a.configFile != "" {
		n, err := startNode(a.configFile, stderr)
		if err != nil {
			return usageError(stderr, "netserver", "%v", err)
		}
		defer n.Close()
		// At exit, where the node's frames went and what TCP recovered.
		defer printNodeDrops(stderr, n)
		listen = n.Stack().Listen
		srv.Listen = n.Stack().Listen
		srv.ListenPacket = n.Stack().ListenPacket
		srv.TransportInfo = n.Stack().TransportInfo
	}
	ln, err := listen(a.network, net.JoinHostPort(a.host, strconv.Itoa(a.port)))
	if err != nil {
		fmt.Fprintf(stderr, "mplsnode netserver: %v\n", err)
		return exitFailure
	}
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintf(stderr, "mplsnode netserver: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// netserverArgs is the netserver command line.
type netserverArgs struct {
	port                   int
	host, network          string
	passphrase             string // -Z
	level                  slog.Level
	configFile, cpuProfile string
	kernel                 bool
}

// parseNetserverArgs reads the netserver command line; stop: the command
// ends here with code (--help, or a usage error printed to stderr).
func parseNetserverArgs(args []string, stdout, stderr io.Writer) (a netserverArgs, code int, stop bool) {
	opts, rest, err := parseOpts(args, netserverSpec)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected arguments after --: %q", rest)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mplsnode netserver: %v\n%s", err, netserverUsage)
		return a, exitUsage, true
	}
	a.port, a.network, a.level = netperf.DefaultPort, "tcp", slog.LevelInfo
	for _, o := range opts {
		switch o.name {
		case "-h", "--help":
			fmt.Fprint(stdout, netserverUsage)
			return a, exitOK, true
		case "-p":
			if a.port, err = strconv.Atoi(o.value); err != nil || a.port < 0 || a.port > 0xffff {
				fmt.Fprintf(stderr, "mplsnode netserver: -p %q: want a port number\n", o.value)
				return a, exitUsage, true
			}
		case "-L":
			a.host, _, _ = strings.Cut(o.value, ",")
		case "-Z":
			a.passphrase = o.value
		case "-v":
			// -v [LEVEL], as stock netserver's -v level: debug logs
			// unless the level is 0.
			if o.value != "0" {
				a.level = slog.LevelDebug
			}
		case "-4":
			a.network = "tcp4"
		case "-6":
			a.network = "tcp6"
		case "--kernel":
			a.kernel = true
		case "--config":
			a.configFile = o.value
		case "--cpuprofile":
			a.cpuProfile = o.value
		}
	}
	return a, exitOK, false
}
