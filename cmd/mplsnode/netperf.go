package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
	"github.com/mplsnode/mplsnode/node"
)

func init() {
	register(command{name: "netperf", summary: "netperf-compatible client (TCP_STREAM/MAERTS/RR/CRR/CC, UDP_STREAM/RR)", run: runNetperf})
	register(command{name: "netserver", summary: "netserver-compatible server", run: runNetserver})
}

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
  -- -K ALG[,RALG]   TCP congestion control of our data socket (kernel) and the server's
  -- -o/-O/-k [OUTPUT,...]   omni output: CSV, columns, NAME=value (THROUGHPUT,
                 THROUGHPUT_UNITS, ELAPSED_TIME, MEAN_LATENCY, P99_LATENCY, ...; "all";
                 "?" lists the names; or a FILE of such lists, one output line each)
  --cpuprofile FILE   write a CPU profile of the run (client and node) for go tool pprof

SIGINT or SIGTERM stops the test at once: no result, a line on stderr, exit 1.
flent runs this as its netperf: put a "netperf" script running "mplsnode netperf"
first on its PATH.

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

Example (ns2 of the seed topology, the kernel as TCP peer):
  mplsnode netserver --kernel -p 12865
`

// argKind says whether an option takes a value.
type argKind int

const (
	noArg          argKind = iota
	needsArg               // "-x value" or "-xvalue"
	optionalArg            // the next argument unless it starts with '-'
	optionalNum            // the next argument if it starts with a digit
	optionalSigned         // the next argument if it is a number, negative too ("-D -0.20")
)

// optSpec tells the parser which options take a value.
type optSpec map[string]argKind

// opt is one parsed option.
type opt struct{ name, value string }

// parseOpts parses netperf-style options: "-x", "-x value", "-xvalue",
// "--long", "--long value", "--long=value", and netperf's optional values
// (-o [list], -c [rate]). Parsing stops at "--", whose remaining
// arguments are returned as rest.
func parseOpts(args []string, spec optSpec) (opts []opt, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return opts, args[i+1:], nil
		}
		if len(a) < 2 || a[0] != '-' {
			return nil, nil, fmt.Errorf("unexpected argument %q", a)
		}
		name, val, hasVal := a, "", false
		if strings.HasPrefix(a, "--") {
			if k, v, ok := strings.Cut(a, "="); ok {
				name, val, hasVal = k, v, true
			}
		} else if len(a) > 2 {
			name, val, hasVal = a[:2], a[2:], true
		}
		kind, known := spec[name]
		if !known {
			return nil, nil, fmt.Errorf("unknown option %s", name)
		}
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		switch {
		case kind == noArg && hasVal:
			return nil, nil, fmt.Errorf("option %s takes no value", name)
		case hasVal || kind == noArg:
		case kind == needsArg:
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("option %s needs a value", name)
			}
			i++
			val = next
		case kind == optionalArg && next != "" && next[0] != '-',
			kind == optionalNum && next != "" && next[0] >= '0' && next[0] <= '9',
			kind == optionalSigned && signedNumber(next):
			i++
			val = next
		}
		opts = append(opts, opt{name, val})
	}
	return opts, nil, nil
}

// signedNumber reports whether s starts as a number does, a negative one
// too: "2", "-0.20", ".5", "-1,1000".
func signedNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '.' && len(s) > 1 && s[1] >= '0' && s[1] <= '9')
}

// pair parses "a[,b]" into integers; a missing b copies a when both is set,
// else leaves def. An empty part keeps its default.
func pair(s string, both bool, defA, defB int) (int, int, error) {
	as, bs, hasB := strings.Cut(s, ",")
	a, b := defA, defB
	var err error
	if as != "" {
		if a, err = strconv.Atoi(as); err != nil {
			return 0, 0, fmt.Errorf("bad number %q", as)
		}
	}
	if hasB && bs != "" {
		if b, err = strconv.Atoi(bs); err != nil {
			return 0, 0, fmt.Errorf("bad number %q", bs)
		}
	} else if !hasB && both {
		b = a
	}
	return a, b, nil
}

// netperfArgs is the parsed netperf command line.
type netperfArgs struct {
	cfg        netperf.Config
	kernel     bool
	configFile string
	headers    bool
	json       bool
	localAddr  string // global -L: control connection source
	localPort  int    // -p ,localport: control connection source port
	// localFamily is the family of the global -L name,family.
	localFamily uint32
	cpuProfile  string // --cpuprofile FILE
	// localCPU and remoteCPU are -T lcpu,rcpu (-1: not given): the CPU
	// this process is bound to and the one netserver is asked to bind to.
	localCPU, remoteCPU int
	verbosity           int // -v
	// omniMode is the test-specific -o, -O or -k (0: the classic table),
	// omniSelection its list of output names.
	omniMode      netperf.OmniMode
	omniSelection string
}

// parseInterim reads -D interval[,units]: interim results every interval
// seconds (1 without a value). A negative interval is stock's "always
// timestamp" mode, which ours always is; the units (stock's first guess
// of the work between timestamps) are accepted and not needed.
func parseInterim(v string) (time.Duration, error) {
	iv := 1.0
	if first, _, _ := strings.Cut(v, ","); first != "" {
		var err error
		if iv, err = strconv.ParseFloat(first, 64); err != nil {
			return 0, fmt.Errorf("interval %q: want seconds", first)
		}
	}
	iv = math.Abs(iv)
	if iv == 0 {
		return 0, errors.New("want an interval other than 0 seconds")
	}
	return time.Duration(iv * float64(time.Second)), nil
}

// parseTOSPair reads -Y local[,remote]: a TOS (DSCP name or number) for
// each side; one value is both, as stock's break_args.
func parseTOSPair(v string) (local, remote netperf.TOS, err error) {
	ls, rs, two := strings.Cut(v, ",")
	if !two {
		rs = ls
	}
	if ls != "" {
		if local, err = netperf.ParseTOS(ls); err != nil {
			return
		}
	}
	if rs != "" {
		remote, err = netperf.ParseTOS(rs)
	}
	return
}

// parseFamily reads the family of -H host,family: 4, 6, inet or inet6.
func parseFamily(s string) (uint32, error) {
	switch strings.ToLower(s) {
	case "4", "inet", "af_inet":
		return netperf.FamilyIPv4, nil
	case "6", "inet6", "af_inet6":
		return netperf.FamilyIPv6, nil
	case "0", "unspec", "af_unspec":
		return netperf.FamilyUnspec, nil
	}
	return 0, fmt.Errorf("family %q: want 4 or 6", s)
}

var globalSpec = optSpec{"-H": needsArg, "-p": needsArg, "-l": needsArg, "-t": needsArg,
	"-c": optionalNum, "-C": optionalNum, "-L": needsArg, "-P": needsArg, "-i": needsArg, "-I": needsArg,
	"-Z": needsArg, "-B": needsArg, "-f": needsArg, "-v": needsArg, "-4": noArg, "-6": noArg, "-o": needsArg, "-O": needsArg,
	"-D": optionalSigned, "-F": needsArg, "-T": needsArg, "-Y": needsArg, "-h": noArg, "--help": noArg, "--kernel": noArg, "--config": needsArg,
	"--classic": noArg, "--cpuprofile": needsArg, "--json": noArg, "--histogram": noArg}

var testSpec = optSpec{"-m": needsArg, "-M": needsArg, "-s": needsArg, "-S": needsArg, "-r": needsArg,
	"-D": noArg, "-H": needsArg, "-L": needsArg, "-P": needsArg, "-p": needsArg, "-h": noArg,
	"-o": optionalArg, "-O": optionalArg, "-k": optionalArg, "-R": needsArg, "-4": noArg, "-6": noArg,
	"-e": needsArg, "-K": needsArg}

// parseNetperfArgs turns a netperf command line into a Config.
func parseNetperfArgs(args []string) (*netperfArgs, error) {
	a := &netperfArgs{cfg: netperf.NewConfig("localhost", netperf.TCPStream), headers: true, verbosity: 1,
		localCPU: -1, remoteCPU: -1}
	c := &a.cfg
	global, rest, err := parseOpts(args, globalSpec)
	if err != nil {
		return nil, err
	}
	for _, o := range global {
		var err error
		switch o.name {
		case "-h", "--help":
			return nil, errHelp
		case "-H":
			// -H host[,family]
			var fam string
			c.Host, fam, _ = strings.Cut(o.value, ",")
			if fam != "" {
				c.Family, err = parseFamily(fam)
			}
		case "-p":
			// -p port[,localport]: the control connection's ports.
			c.Port, a.localPort, err = pair(o.value, false, netperf.DefaultPort, 0)
		case "-4":
			c.Family = netperf.FamilyIPv4
		case "-6":
			c.Family = netperf.FamilyIPv6
		case "-f":
			if len(o.value) != 1 || !strings.Contains("kmgKMGx", o.value) {
				err = fmt.Errorf("-f %s: want one of k, m, g (10^3, 10^6, 10^9 bits/s), K, M, G (2^10, 2^20, 2^30 bytes/s), x (transactions)", o.value)
			} else {
				c.Units = o.value[0]
			}
		case "-v":
			a.verbosity, err = strconv.Atoi(o.value)
		case "-B":
			c.ResultBrand = o.value
		case "-D":
			c.Interim, err = parseInterim(o.value)
		case "-F":
			c.FillFile, c.RemoteFillFile, _ = strings.Cut(o.value, ",")
			if len(c.RemoteFillFile) > 31 {
				err = errors.New("remote fill file name must be less than 32 characters")
			}
		case "-T":
			// -T lcpu[,rcpu]: one number is both, as stock's break_args.
			a.localCPU, a.remoteCPU, err = pair(o.value, true, -1, -1)
			if err == nil && a.remoteCPU >= 0 {
				c.RemoteAffinity, c.BindRemote = int32(a.remoteCPU), true
			}
		case "-Y":
			c.LocalTOS, c.RemoteTOS, err = parseTOSPair(o.value)
		case "--json":
			a.json = true
		case "--histogram":
			c.Histogram = true
		case "-l":
			c.Length, err = strconv.Atoi(o.value)
			if err == nil && c.Length == 0 {
				err = errors.New("-l 0: want seconds (>0) or -count (<0)")
			}
		case "-t":
			c.Test = netperf.TestType(strings.ToUpper(o.value))
			if !slices.Contains(netperf.Tests, c.Test) {
				err = fmt.Errorf("-t %s: supported tests are %v", o.value, netperf.Tests)
			}
		case "-c":
			// -c [rate]: stock skips its calibration with a rate; we never
			// calibrate (/proc/stat needs none), so the rate is accepted.
			c.LocalCPU = true
			if o.value != "" {
				_, err = strconv.ParseFloat(o.value, 32)
			}
		case "-C":
			c.RemoteCPU = true
			if o.value != "" {
				var r float64
				r, err = strconv.ParseFloat(o.value, 32)
				c.RemoteCPURate = float32(r)
			}
		case "-L":
			// -L name[,family]: the control connection's local end; its
			// family (stock's local_address_family) picks the control
			// connection's family when -H, -4 or -6 did not.
			var fam string
			a.localAddr, fam, _ = strings.Cut(o.value, ",")
			c.LocalHost = a.localAddr
			if fam != "" {
				a.localFamily, err = parseFamily(fam)
			}
		case "-P":
			a.headers = o.value != "0"
		case "-i":
			c.MaxIterations, c.MinIterations, err = pair(o.value, false, 1, 1)
			if err == nil && (c.MaxIterations < 1 || c.MaxIterations > 30) {
				err = errors.New("-i: max iterations must be 1..30")
			}
		case "-I":
			var w int
			c.ConfidenceLevel, w, err = pair(o.value, false, 99, 5)
			c.ConfidenceWidth = float64(w)
			if c.MaxIterations < 2 {
				c.MaxIterations, c.MinIterations = 10, 3 // netperf: -I alone implies -i 10,3
			}
		case "-Z":
			c.Passphrase = o.value
		case "-o", "-O":
			// Stock's global -o/-O: local/remote buffer offsets. Go's
			// buffers have no alignment to offset, so only the remote
			// ones are passed on.
			var snd, rcv int
			snd, rcv, err = pair(o.value, true, 0, 0)
			if err == nil && o.name == "-O" {
				c.RemoteSendOffset, c.RemoteRecvOffset = uint32(snd), uint32(rcv)
			} else if err == nil {
				c.LocalSendOffset, c.LocalRecvOffset = int32(snd), int32(rcv) // reported only
			}
		case "--kernel":
			a.kernel = true
		case "--config":
			a.configFile = o.value
		case "--classic":
			c.Classic = true
		case "--cpuprofile":
			a.cpuProfile = o.value
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
	}
	if c.Classic && !slices.Contains(netperf.ClassicTests, c.Test) {
		return nil, fmt.Errorf("--classic: %s has no classic form here (classic tests: %v)", c.Test, netperf.ClassicTests)
	}
	if c.Family == netperf.FamilyUnspec {
		c.Family = a.localFamily
	}
	if a.kernel && a.configFile != "" {
		return nil, errors.New("--kernel and --config are exclusive")
	}
	ts, _, err := parseOpts(rest, testSpec)
	if err != nil {
		return nil, fmt.Errorf("test-specific options: %w", err)
	}
	for _, o := range ts {
		var err error
		var x, y int
		switch o.name {
		case "-h":
			return nil, errHelp
		case "-m":
			x, y, err = pair(o.value, false, -1, -1)
			c.LocalSendSize, c.RemoteSendSize = int32(x), int32(y)
		case "-M":
			x, y, err = pair(o.value, false, -1, -1)
			c.LocalRecvSize, c.RemoteRecvSize = int32(x), int32(y)
		case "-s":
			x, y, err = pair(o.value, true, -1, -1)
			c.LocalSendBuf, c.LocalRecvBuf = int32(x), int32(y)
		case "-S":
			x, y, err = pair(o.value, true, -1, -1)
			c.RemoteSendBuf, c.RemoteRecvBuf = int32(x), int32(y)
		case "-r":
			x, y, err = pair(o.value, true, 1, 1)
			if err == nil && (x <= 0 || y <= 0) {
				err = errors.New("sizes must be > 0")
			}
			c.RequestSize, c.ResponseSize = int32(x), int32(y)
		case "-D":
			c.NoDelay = true
		case "-H":
			// -H name[,family]: where the data connection goes.
			var fam string
			c.DataHost, fam, _ = strings.Cut(o.value, ",")
			if fam != "" {
				c.RemoteDataFamily, err = parseFamily(fam)
			}
		case "-L":
			var fam string
			c.LocalDataAddr, fam, _ = strings.Cut(o.value, ",")
			if fam != "" {
				c.LocalDataFamily, err = parseFamily(fam)
			}
		case "-4", "-6":
			// The data connection's family, both ends.
			f := map[string]uint32{"-4": netperf.FamilyIPv4, "-6": netperf.FamilyIPv6}[o.name]
			c.LocalDataFamily, c.RemoteDataFamily = f, f
			if c.Family == netperf.FamilyUnspec {
				c.Family = f
			}
		case "-P":
			c.LocalDataPort, c.RemoteDataPort, err = pair(o.value, false, 0, 0)
		case "-p":
			// TCP_CRR and TCP_CC: the range of the client's ports.
			c.ClientPortMin, c.ClientPortMax, err = pair(o.value, false, netperf.DefaultClientPortMin, netperf.DefaultClientPortMax)
			if err == nil && (c.ClientPortMin < 1 || c.ClientPortMax > 0xffff || c.ClientPortMin > c.ClientPortMax) {
				err = errors.New("want min,max with 1 <= min <= max <= 65535")
			}
		case "-o", "-O", "-k":
			a.omniMode = map[string]netperf.OmniMode{"-o": netperf.OmniCSV, "-O": netperf.OmniHuman, "-k": netperf.OmniKeyval}[o.name]
			// In a list, names stock does not know are skipped, as stock
			// skips them (parse_output_selection_line); a single word that
			// is no output name is the file listing them.
			a.omniSelection = o.value
			if netperf.IsSelectionFile(o.value) {
				a.omniSelection, err = netperf.ReadSelectionFile(o.value)
			}
		case "-e":
			// -e SECONDS: UDP_RR's receive timeout (accepted, unused, on
			// other tests, as stock).
			var secs int
			secs, err = strconv.Atoi(o.value)
			if err == nil && secs < 0 {
				err = errors.New("want seconds >= 0")
			}
			c.ReceiveTimeout = time.Duration(secs) * time.Second
		case "-K":
			// -K local[,remote]: congestion control; one name is both.
			var remote string
			var both bool
			c.CongControl, remote, both = strings.Cut(o.value, ",")
			c.RemoteCongControl = c.CongControl
			if both {
				c.RemoteCongControl = remote
			}
			if len(c.CongControl) > 15 || len(c.RemoteCongControl) > 15 {
				err = errors.New("algorithm names are at most 15 characters")
			}
		case "-R":
			// -R 0|1: routing allowed (SO_DONTROUTE off) on both data
			// sockets.
			var r int
			r, err = strconv.Atoi(o.value)
			c.Routing = map[bool]int{true: 1, false: -1}[r != 0]
		}
		if err != nil {
			return nil, fmt.Errorf("-- %s: %w", o.name, err)
		}
	}
	if c.LocalDataAddr == "" && c.DataHost == "" {
		// As stock's complete_addrinfos: the global -L is the data
		// connection's local address too, unless a test-specific -L or -H
		// says otherwise.
		c.LocalDataAddr = c.LocalHost
	}
	for _, v := range []int32{c.LocalSendSize, c.RemoteSendSize, c.LocalRecvSize, c.RemoteRecvSize} {
		if v == 0 || v < -1 {
			return nil, errors.New("-m/-M: sizes must be > 0")
		}
	}
	return a, nil
}

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
	stopProfile, err := startCPUProfile(a.cpuProfile)
	if err != nil {
		fmt.Fprintf(stderr, "mplsnode netperf: %v\n", err)
		return exitUsage
	}
	defer stopProfile()
	var n *node.Node
	if a.configFile != "" {
		if n, err = startNode(a.configFile, stderr); err != nil {
			fmt.Fprintf(stderr, "mplsnode netperf: %v\n", err)
			return exitUsage
		}
		defer n.Close()
		a.cfg.ListenPacket = n.Stack().ListenPacket
		a.cfg.TransportInfo = n.Stack().TransportInfo
		a.cfg.OnLink = n.Stack().OnLink
		if a.cfg.Dial, err = nodeDialer(n, a.localAddr, a.localPort); err == nil {
			a.cfg.DataDial, err = nodeDialer(n, a.cfg.LocalDataAddr, a.cfg.LocalDataPort)
		}
		if err == nil {
			a.cfg.ConnectDial, err = nodePortDialer(n, a.cfg.LocalDataAddr)
		}
		if err != nil {
			fmt.Fprintf(stderr, "mplsnode netperf: %v\n", err)
			return exitUsage
		}
	} else {
		if a.cfg.Dial, err = kernelDialer(a.localAddr, a.localPort); err == nil {
			a.cfg.DataDial, err = kernelDialer(a.cfg.LocalDataAddr, a.cfg.LocalDataPort)
		}
		if err == nil {
			a.cfg.ConnectDial, err = kernelPortDialer(a.cfg.LocalDataAddr)
		}
		if err != nil {
			fmt.Fprintf(stderr, "mplsnode netperf: %v\n", err)
			return exitUsage
		}
	}
	if a.localCPU >= 0 {
		if err := bindToCPU(a.localCPU); err != nil {
			fmt.Fprintf(stderr, "mplsnode netperf: %v\n", err)
			return exitUsage
		}
	}
	a.cfg.InterimOut, a.cfg.InterimMode = stdout, a.omniMode
	interimBanner := a.cfg.Interim > 0 && a.headers && !a.json
	if interimBanner {
		// As stock: the banner, then the interim results as they come.
		fam := a.cfg.Family
		if ip, err := netip.ParseAddr(a.cfg.Host); fam == 0 && err == nil && !ip.Unmap().Is4() {
			fam = netperf.FamilyIPv6
		}
		fmt.Fprint(stdout, (&netperf.Report{Config: a.cfg, Family: fam}).Banner())
	}
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
	if err != nil {
		fmt.Fprintf(stderr, "mplsnode netperf: %v\n", err)
		return exitFailure
	}
	return exitOK
}

var netserverSpec = optSpec{"-p": needsArg, "-L": needsArg, "-Z": needsArg, "-D": noArg, "-v": optionalNum,
	"-h": noArg, "--help": noArg, "-4": noArg, "-6": noArg, "--kernel": noArg, "--config": needsArg,
	"--cpuprofile": needsArg}

func runNetserver(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, rest, err := parseOpts(args, netserverSpec)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected arguments after --: %q", rest)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mplsnode netserver: %v\n%s", err, netserverUsage)
		return exitUsage
	}
	port, host, network := netperf.DefaultPort, "", "tcp"
	var srv netperf.Server
	level := slog.LevelInfo
	var configFile, cpuProfile string
	kernel := false
	for _, o := range opts {
		switch o.name {
		case "-h", "--help":
			fmt.Fprint(stdout, netserverUsage)
			return exitOK
		case "-p":
			if port, err = strconv.Atoi(o.value); err != nil || port < 0 || port > 0xffff {
				fmt.Fprintf(stderr, "mplsnode netserver: -p %q: want a port number\n", o.value)
				return exitUsage
			}
		case "-L":
			host, _, _ = strings.Cut(o.value, ",")
		case "-Z":
			srv.Passphrase = o.value
		case "-v":
			// -v [LEVEL], as stock netserver's -v level: debug logs
			// unless the level is 0.
			if o.value != "0" {
				level = slog.LevelDebug
			}
		case "-4":
			network = "tcp4"
		case "-6":
			network = "tcp6"
		case "--kernel":
			kernel = true
		case "--config":
			configFile = o.value
		case "--cpuprofile":
			cpuProfile = o.value
		}
	}
	stopProfile, err := startCPUProfile(cpuProfile)
	if err != nil {
		fmt.Fprintf(stderr, "mplsnode netserver: %v\n", err)
		return exitUsage
	}
	defer stopProfile()
	if kernel && configFile != "" {
		fmt.Fprintln(stderr, "mplsnode netserver: --kernel and --config are exclusive")
		return exitUsage
	}
	srv.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	listen := net.Listen
	if configFile != "" {
		n, err := startNode(configFile, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "mplsnode netserver: %v\n", err)
			return exitUsage
		}
		defer n.Close()
		// At exit, where the node's frames went and what TCP recovered.
		defer printNodeDrops(stderr, n)
		listen = n.Stack().Listen
		srv.Listen = n.Stack().Listen
		srv.ListenPacket = n.Stack().ListenPacket
		srv.TransportInfo = n.Stack().TransportInfo
	}
	ln, err := listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
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
