package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
)

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
	if err := applyOpts(global, a.applyGlobal, ""); err != nil {
		return nil, err
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
	if err := applyOpts(ts, a.applyTest, "-- "); err != nil {
		return nil, err
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

// applyOpts applies each option in turn with apply; an error names the
// option (after prefix: "-- " for a test-specific one), errHelp stays
// itself.
func applyOpts(opts []opt, apply func(opt) error, prefix string) error {
	for _, o := range opts {
		if err := apply(o); errors.Is(err, errHelp) {
			return errHelp
		} else if err != nil {
			return fmt.Errorf("%s%s: %w", prefix, o.name, err)
		}
	}
	return nil
}

// applyGlobal applies one global option (before "--") to the parsed
// command line; parseOpts has checked its name against globalSpec.
func (a *netperfArgs) applyGlobal(o opt) error {
	c := &a.cfg
	var err error
	switch o.name {
	case "-h", "--help":
		return errHelp
	case "-H":
		// -H host[,family]
		err = hostFamily(o.value, &c.Host, &c.Family)
	case "-p":
		// -p port[,localport]: the control connection's ports.
		c.Port, a.localPort, err = pair(o.value, false, netperf.DefaultPort, 0)
	case "-4":
		c.Family = netperf.FamilyIPv4
	case "-6":
		c.Family = netperf.FamilyIPv6
	case "-f":
		if len(o.value) != 1 || !strings.Contains("kmgKMGx", o.value) {
			return fmt.Errorf("-f %s: want one of k, m, g (10^3, 10^6, 10^9 bits/s), K, M, G (2^10, 2^20, 2^30 bytes/s), x (transactions)", o.value)
		}
		c.Units = o.value[0]
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
		err = hostFamily(o.value, &a.localAddr, &a.localFamily)
		c.LocalHost = a.localAddr
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
	return err
}

// applyTest applies one test-specific option (after "--"); parseOpts has
// checked its name against testSpec.
func (a *netperfArgs) applyTest(o opt) error {
	c := &a.cfg
	var err error
	switch o.name {
	case "-h":
		return errHelp
	case "-m":
		err = int32Pair(o.value, false, &c.LocalSendSize, &c.RemoteSendSize)
	case "-M":
		err = int32Pair(o.value, false, &c.LocalRecvSize, &c.RemoteRecvSize)
	case "-s":
		err = int32Pair(o.value, true, &c.LocalSendBuf, &c.LocalRecvBuf)
	case "-S":
		err = int32Pair(o.value, true, &c.RemoteSendBuf, &c.RemoteRecvBuf)
	case "-r":
		var req, resp int
		req, resp, err = pair(o.value, true, 1, 1)
		if err == nil && (req <= 0 || resp <= 0) {
			err = errors.New("sizes must be > 0")
		}
		c.RequestSize, c.ResponseSize = int32(req), int32(resp)
	case "-D":
		c.NoDelay = true
	case "-H":
		// -H name[,family]: where the data connection goes.
		err = hostFamily(o.value, &c.DataHost, &c.RemoteDataFamily)
	case "-L":
		err = hostFamily(o.value, &c.LocalDataAddr, &c.LocalDataFamily)
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
		// The omni output mode and its selection. In a list, names stock
		// does not know are skipped, as stock skips them
		// (parse_output_selection_line); a single word that is no output
		// name is the file listing them.
		a.omniMode = map[string]netperf.OmniMode{"-o": netperf.OmniCSV, "-O": netperf.OmniHuman, "-k": netperf.OmniKeyval}[o.name]
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
	return err
}

// hostFamily reads NAME[,FAMILY] (-H and -L) into host and, when a family
// is written, family.
func hostFamily(v string, host *string, family *uint32) error {
	var fam string
	*host, fam, _ = strings.Cut(v, ",")
	if fam == "" {
		return nil
	}
	var err error
	*family, err = parseFamily(fam)
	return err
}

// int32Pair reads A[,B] (the sizes and buffers of -m, -M, -s, -S) into a
// and b, -1 (the default) for a part not written; both: a lone A is B
// too.
func int32Pair(v string, both bool, a, b *int32) error {
	x, y, err := pair(v, both, -1, -1)
	*a, *b = int32(x), int32(y)
	return err
}
