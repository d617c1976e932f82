// Command bgpscale measures a node receiving a full BGP labeled-unicast
// table: one receiving mplsnode, in a process of its own so that its RSS
// is its own, fed by a second mplsnode process that originates the
// routes. For each table size it reports the time from the session's
// coming up to the first route received (the feeder's share: it builds
// its advertisements first), to the last route in the FIB (the speaker's
// installed count: it writes the FIB before it counts a route installed)
// and to the last route in the XDP plane's FIB mirror
// (fib_entries_resolved), the
// receiver's peak and steady RSS, its heap profile split by owner
// (GoBGP, the node's BGP RIB, the node's tables, the FIB, the XDP mirror),
// and the same for the withdrawal of everything (the feeder stops: a peer
// reset):
//
//	go run ./bench/cmd/bgpscale [-bin bin/mplsnode[,OTHER]] [-feeder PATH] [-runs 100000,500000,1000000+200000]
//
// The feeder runs the receiver's binary unless -feeder names one: one
// feeder for every binary compares the receivers alone.
//
// A run V4+V6 feeds V4 IPv4 /24s (per-prefix labels from the feeder's
// label range) and V6 IPv6 /48s (explicit null). The receiver forwards
// (the FIB is mirrored) with `set forward xdp on` on a veth in a namespace
// of its own. make bench runs it. It needs root; the namespaces are
// removed on every exit, an interrupt included.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	o := parseFlags()
	if o.split != "" {
		printSplit(o.split, o.splitRoutes)
		return
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bgpscale: needs root (it builds network namespaces)")
		os.Exit(2)
	}
	bins := resolveBins(o.bin)
	if o.feeder != "" {
		o.feeder = resolveBins(o.feeder)[0]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	measureAll(ctx, bins, o)
}

// options is the command line.
type options struct {
	bin    string
	feeder string
	// feederGOGC, when not empty, is the feeder's GOGC.
	feederGOGC  string
	sizes       []size
	timeout     time.Duration
	heap        bool
	split       string
	splitRoutes int
	// cpu has the receiver and the feeder write CPU profiles of their
	// whole runs into keepDir.
	cpu bool
}

// parseFlags reads the command line (keepDir included) and exits with the
// usage on a bad one.
func parseFlags() options {
	var o options
	bin := flag.String("bin", "bin/mplsnode", "the mplsnode binary (make build); several, comma-separated, are measured one after the other at each size (before/after a change)")
	runs := flag.String("runs", "100000,500000,1000000+200000", "table sizes, comma-separated, each `V4[+V6]` routes")
	flag.StringVar(&o.feeder, "feeder", "", "the feeder's mplsnode binary (default: the binary measured)")
	flag.StringVar(&o.feederGOGC, "feeder-gogc", "", "the feeder's GOGC (default: the environment's); a higher one spends less of the machine on the feeder's garbage collection")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "the longest a run's installation or withdrawal may take")
	flag.BoolVar(&o.heap, "heap", true, "fetch and split the receiver's heap profile at steady state")
	flag.StringVar(&keepDir, "profiles", "", "keep the receiver's heap profiles (and, with -cpu, CPU profiles) in `DIR` (heap-BINARY-V4+V6.pb.gz)")
	flag.BoolVar(&o.cpu, "cpu", false, "have the receiver and the feeder write CPU profiles of their runs into -profiles DIR as cpu-recv-BINARY-V4+V6.pb.gz and cpu-feed-...")
	flag.StringVar(&o.split, "split", "", "only print the split of a kept heap `PROFILE` (with -routes), measuring nothing")
	flag.IntVar(&o.splitRoutes, "routes", 0, "the routes the -split profile's node held")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: bgpscale [-bin PATH[,PATH...]] [-feeder PATH] [-feeder-gogc N] [-runs V4[+V6],...] [-timeout D] [-heap=false] [-profiles DIR [-cpu]]\n       bgpscale -split PROFILE -routes N\n\n")
		fmt.Fprintf(os.Stderr, "A node fed a BGP labeled-unicast table by a second node: install and withdrawal times, RSS, heap split.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	o.bin = *bin
	if o.split != "" {
		return o
	}
	sizes, err := parseRuns(*runs)
	if err != nil || flag.NArg() != 0 {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bgpscale: -runs:", err)
		}
		flag.Usage()
		os.Exit(2)
	}
	o.sizes = sizes
	if o.cpu && keepDir == "" {
		fmt.Fprintln(os.Stderr, "bgpscale: -cpu needs -profiles DIR")
		os.Exit(2)
	}
	return o
}

// printSplit prints the owner split of a kept heap profile (-split).
func printSplit(prof string, routes int) {
	if routes <= 0 {
		fmt.Fprintln(os.Stderr, "bgpscale: -split needs -routes N")
		os.Exit(2)
	}
	out, _, err := splitHeap(context.Background(), prof, routes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bgpscale:", err)
		os.Exit(1)
	}
	fmt.Println(out)
}

// resolveBins turns -bin's comma-separated list into absolute paths of
// files that exist, or exits.
func resolveBins(list string) []string {
	var bins []string
	for _, b := range strings.Split(list, ",") {
		abs, err := filepath.Abs(b)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bgpscale: %v (make build writes bin/mplsnode)\n", err)
			os.Exit(1)
		}
		bins = append(bins, abs)
	}
	return bins
}

// measureAll runs every binary at every size and prints the table, then
// the heap splits.
func measureAll(ctx context.Context, bins []string, o options) {
	fmt.Println("## BGP labeled unicast at scale (receiver: its own process, set forward xdp on)")
	fmt.Println()
	fmt.Println("| binary | routes (v4+v6) | first route received / installed: FIB / XDP mirror (s from session up) | RSS steady / peak (MiB) | heap in use (MiB) | withdrawn: FIB / XDP mirror (s from feeder stop) | RSS after withdrawal (MiB) |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|")
	var splits []string
	for _, sz := range o.sizes {
		for _, bin := range bins {
			r, err := runOne(ctx, bin, sz, o)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bgpscale: %s, %d+%d: %v\n", bin, sz.v4, sz.v6, err)
				os.Exit(1)
			}
			name := filepath.Base(bin)
			fmt.Printf("| %s | %d+%d | %.2f / %.2f / %.2f | %d / %d | %d | %.2f / %.2f | %d |\n", name, sz.v4, sz.v6,
				r.first.Seconds(), r.fib.Seconds(), r.mirror.Seconds(), r.rss>>20, r.peak>>20, r.heapInuse>>20,
				r.wdFIB.Seconds(), r.wdMirror.Seconds(), r.rssAfter>>20)
			if r.split != "" {
				splits = append(splits, fmt.Sprintf("%s, %d+%d routes: %s", name, sz.v4, sz.v6, r.split))
			}
		}
	}
	if len(splits) > 0 {
		fmt.Println()
		fmt.Println("Heap in use at steady state by owner (bytes per route; allocation sites attributed to the first frame outside the runtime and standard library):")
		fmt.Println()
		for _, s := range splits {
			fmt.Println("- " + s)
		}
	}
}

// keepDir is where the heap profiles are kept ("" : not kept).
var keepDir string

type size struct{ v4, v6 int }

func parseRuns(s string) ([]size, error) {
	var out []size
	for _, f := range strings.Split(s, ",") {
		a, b, _ := strings.Cut(strings.TrimSpace(f), "+")
		v4, err := strconv.Atoi(a)
		if err != nil || v4 < 0 || v4 > 1_000_000 {
			return nil, fmt.Errorf("%q: want V4[+V6], V4 from 0 to 1000000", f)
		}
		v6 := 0
		if b != "" {
			if v6, err = strconv.Atoi(b); err != nil || v6 < 0 || v6 > 1<<20 {
				return nil, fmt.Errorf("%q: bad V6 %q", f, b)
			}
		}
		if v4+v6 == 0 {
			return nil, fmt.Errorf("%q: no routes", f)
		}
		out = append(out, size{v4, v6})
	}
	return out, nil
}

type result struct {
	first           time.Duration
	fib, mirror     time.Duration
	rss, peak       uint64
	heapInuse       uint64
	split           string
	wdFIB, wdMirror time.Duration
	rssAfter        uint64
}

// metricsPort is the receiver's metrics (and pprof) port, inside its
// namespace.
const metricsPort = 9477

// runOne builds the two namespaces, starts the receiver and then the
// feeder, and measures.
func runOne(ctx context.Context, bin string, sz size, o options) (_ *result, err error) {
	dir, err := os.MkdirTemp("", "bgpscale")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	nsR, nsF := fmt.Sprintf("bs%d-r", os.Getpid()), fmt.Sprintf("bs%d-f", os.Getpid())
	defer deleteNamespaces(nsR, nsF)
	if err := makeNamespaces(ctx, nsR, nsF); err != nil {
		return nil, err
	}
	if err := writeConfigs(dir, sz); err != nil {
		return nil, err
	}
	ctl := filepath.Join(dir, "recv.sock")
	recvArgs := []string{"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", metricsPort), "--log-format", "json"}
	var feedArgs []string
	if o.cpu {
		prof := func(who string) string {
			return filepath.Join(keepDir, fmt.Sprintf("cpu-%s-%s-%d+%d.pb.gz", who, filepath.Base(bin), sz.v4, sz.v6))
		}
		recvArgs = append(recvArgs, "--cpuprofile", prof("recv"))
		feedArgs = append(feedArgs, "--cpuprofile", prof("feed"))
	}
	recv, recvLog, err := startNode(dir, nsR, bin, "recv", nil, recvArgs...)
	if err != nil {
		return nil, err
	}
	defer recvLog.Close()
	defer func() { _ = recv.Process.Signal(syscall.SIGTERM); _ = recv.Wait() }()
	defer withLogs(&err, dir)
	if err := waitFor(ctx, 30*time.Second, "the receiver's control socket", func() (bool, error) {
		_, err := query(ctl, "stats")
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	feedBin := bin
	if o.feeder != "" {
		feedBin = o.feeder
	}
	var feedEnv []string
	if o.feederGOGC != "" {
		feedEnv = []string{"GOGC=" + o.feederGOGC}
	}
	feeder, feedLog, err := startNode(dir, nsF, feedBin, "feed", feedEnv, feedArgs...)
	if err != nil {
		return nil, err
	}
	defer feedLog.Close()
	feederDone := false
	defer func() {
		if !feederDone {
			_ = feeder.Process.Kill()
			_ = feeder.Wait()
		}
	}()
	total := sz.v4 + sz.v6
	// The feeder's IPv4 address (the session's) and, with IPv6 routes, its
	// IPv6 one (their next hop) are mirrored as on-link hosts beside the
	// routes.
	hosts := 1
	if sz.v6 > 0 {
		hosts = 2
	}
	r := &result{}
	if r.first, r.fib, r.mirror, err = waitInstalled(ctx, ctl, o.timeout, total, hosts); err != nil {
		return nil, err
	}
	// Steady state: the node idle for a few seconds, its garbage
	// collected (the profile fetch collects first).
	time.Sleep(5 * time.Second)
	if o.heap {
		if r.split, r.heapInuse, err = heapSplit(ctx, dir, nsR, bin, sz); err != nil {
			return nil, err
		}
		time.Sleep(time.Second)
	}
	if r.rss, r.peak, err = rss(recv.Process.Pid); err != nil {
		return nil, err
	}
	// A peer reset: the feeder stops, its session goes, every route with
	// it.
	stopAt := time.Now()
	_ = feeder.Process.Signal(syscall.SIGTERM)
	if r.wdFIB, r.wdMirror, err = waitWithdrawn(ctx, ctl, o.timeout, hosts, stopAt); err != nil {
		return nil, err
	}
	_ = feeder.Wait()
	feederDone = true
	time.Sleep(5 * time.Second)
	if r.rssAfter, _, err = rss(recv.Process.Pid); err != nil {
		return nil, err
	}
	return r, nil
}

// withLogs adds the tails of the receiver's and the feeder's logs in dir
// to a failed run's *err.
func withLogs(err *error, dir string) {
	if *err == nil {
		return
	}
	logTail := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return lastLines(string(b), 20)
	}
	*err = fmt.Errorf("%w\nreceiver log:\n%s\nfeeder log:\n%s", *err, logTail("recv.log"), logTail("feed.log"))
}

// deleteNamespaces removes the namespaces, those that exist.
func deleteNamespaces(names ...string) {
	for _, ns := range names {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
}

// makeNamespaces builds the receiver's and the feeder's namespaces and
// the veth between them (bsr in nsR, bsf in nsF), up, with no kernel IPv6.
func makeNamespaces(ctx context.Context, nsR, nsF string) error {
	for _, argv := range [][]string{
		{"ip", "netns", "add", nsR}, {"ip", "netns", "add", nsF},
		{"ip", "link", "add", "bsr", "netns", nsR, "type", "veth", "peer", "name", "bsf", "netns", nsF},
		{"ip", "-n", nsR, "link", "set", "lo", "up"}, {"ip", "-n", nsF, "link", "set", "lo", "up"},
		{"ip", "-n", nsR, "link", "set", "bsr", "up"}, {"ip", "-n", nsF, "link", "set", "bsf", "up"},
		// The kernels hold no address on the links the nodes own, and no
		// IPv6 autoconfiguration.
		{"ip", "netns", "exec", nsR, "sysctl", "-qw", "net.ipv6.conf.bsr.disable_ipv6=1"},
		{"ip", "netns", "exec", nsF, "sysctl", "-qw", "net.ipv6.conf.bsf.disable_ipv6=1"},
	} {
		if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	return nil
}

// recvConf is the receiver's configuration: one BGP session, forwarding
// with the XDP plane.
const recvConf = `link add bsr type afpacket
addr add 172.16.40.1/24 dev bsr
addr add fd00:40::1/64 dev bsr
sysctl -w net.ipv4.ip_forward=1
sysctl -w net.ipv6.conf.all.forwarding=1
set forward xdp on
bgp as 65001 router-id 172.16.40.1
bgp neighbor 172.16.40.2 remote-as 65002
`

// writeConfigs writes recv.conf and feed.conf into dir: the feeder
// originates sz.v4 IPv4 /24s with per-prefix labels and sz.v6 IPv6
// prefixes with explicit null.
func writeConfigs(dir string, sz size) error {
	var feed strings.Builder
	feed.WriteString(`link add bsf type afpacket
addr add 172.16.40.2/24 dev bsf
addr add fd00:40::2/64 dev bsf
bgp as 65002 router-id 172.16.40.2
bgp label-range 16 1048575
bgp neighbor 172.16.40.1 remote-as 65001
`)
	w := bufio.NewWriter(&feed)
	for i := range sz.v4 {
		fmt.Fprintf(w, "bgp network %d.%d.%d.0/24\n", 11+i>>16, i>>8&0xff, i&0xff)
	}
	for i := range sz.v6 {
		fmt.Fprintf(w, "bgp network 2001:db8:%x:%x::/64 label explicit-null\n", i>>16, i&0xffff)
	}
	w.Flush()
	files := map[string]string{"recv.conf": recvConf, "feed.conf": feed.String()}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startNode starts bin in namespace ns with dir/NAME.conf and the control
// socket dir/NAME.sock and env added to the environment, its output to
// dir/NAME.log (returned, for the caller to close).
func startNode(dir, ns, bin, name string, env []string, extra ...string) (*exec.Cmd, *os.File, error) {
	args := append([]string{"netns", "exec", ns, bin, "run", "-c", filepath.Join(dir, name+".conf"),
		"--control-socket", filepath.Join(dir, name+".sock")}, extra...)
	cmd := exec.Command("ip", args...)
	cmd.Env = append(os.Environ(), env...)
	log, _ := os.Create(filepath.Join(dir, name+".log"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, nil, err
	}
	return cmd, log, nil
}

// waitInstalled polls the receiver until total routes are in its FIB and
// total+hosts entries in its XDP mirror, and returns how long after the
// session came up the first route was received and each was reached (the
// session is up when the receiver says so or holds a route, whichever it
// shows first).
func waitInstalled(ctx context.Context, ctl string, timeout time.Duration, total, hosts int) (first, fib, mirror time.Duration, err error) {
	var up, firstAt, fibAt, mirrorAt time.Time
	if err := waitFor(ctx, timeout, fmt.Sprintf("%d routes in the FIB and the XDP mirror", total), func() (bool, error) {
		st, err := observe(ctl)
		if err != nil {
			return false, err
		}
		now := time.Now()
		if up.IsZero() && (st.established || st.received > 0) {
			up = now
		}
		if firstAt.IsZero() && st.received > 0 {
			firstAt = now
		}
		if fibAt.IsZero() && st.installed >= total {
			fibAt = now
		}
		if mirrorAt.IsZero() && st.mirrored >= total+hosts {
			mirrorAt = now
		}
		return !fibAt.IsZero() && !mirrorAt.IsZero(), nil
	}); err != nil {
		return 0, 0, 0, err
	}
	return firstAt.Sub(up), fibAt.Sub(up), mirrorAt.Sub(up), nil
}

// waitWithdrawn polls the receiver until its FIB is empty and its XDP
// mirror holds only the hosts, and returns how long after stopAt each was
// reached.
func waitWithdrawn(ctx context.Context, ctl string, timeout time.Duration, hosts int, stopAt time.Time) (fib, mirror time.Duration, err error) {
	var wdFIB, wdMirror time.Time
	if err := waitFor(ctx, timeout, "every route withdrawn", func() (bool, error) {
		st, err := observe(ctl)
		if err != nil {
			return false, err
		}
		now := time.Now()
		if wdFIB.IsZero() && st.installed == 0 {
			wdFIB = now
		}
		if wdMirror.IsZero() && st.mirrored <= hosts {
			wdMirror = now
		}
		return !wdFIB.IsZero() && !wdMirror.IsZero(), nil
	}); err != nil {
		return 0, 0, err
	}
	return wdFIB.Sub(stopAt), wdMirror.Sub(stopAt), nil
}

// heapSplit fetches the receiver's heap profile (after a collection),
// keeps a copy in keepDir when asked, and splits it by owner.
func heapSplit(ctx context.Context, dir, nsR, bin string, sz size) (string, uint64, error) {
	prof := filepath.Join(dir, "heap.pb.gz")
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nsR, "curl", "-sf", "-o", prof,
		fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", metricsPort)).CombinedOutput(); err != nil {
		return "", 0, fmt.Errorf("heap profile: %v: %s", err, out)
	}
	if keepDir != "" {
		if b, err := os.ReadFile(prof); err == nil {
			_ = os.WriteFile(filepath.Join(keepDir, fmt.Sprintf("heap-%s-%d+%d.pb.gz", filepath.Base(bin), sz.v4, sz.v6)), b, 0o644)
		}
	}
	return splitHeap(ctx, prof, sz.v4+sz.v6)
}

// errBusy is a poll the node did not answer in time.
var errBusy = errors.New("the node did not answer in time")

// state is what one poll of the receiver's control socket tells.
type state struct {
	established bool
	installed   int // routes the speaker installed (written to the FIB)
	received    int // routes the speaker holds from the feeder
	// mirrored is the entries the XDP mirror carries with a resolved
	// next hop: the routes, and the connected neighbours (the feeder's
	// addresses) as on-link hosts.
	mirrored int
}

func observe(ctl string) (state, error) {
	var st state
	b, err := query(ctl, "bgp summary")
	if err != nil {
		return st, err
	}
	var sum struct {
		Neighbors []struct {
			State    string `json:"state"`
			Families []struct {
				Received int `json:"received"`
			} `json:"families"`
		} `json:"neighbors"`
		Installed int `json:"installed"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		// A node busy writing a large batch holds its RIB past the
		// control socket's deadline and answers nothing: no news.
		return st, errBusy
	}
	st.established = len(sum.Neighbors) > 0 && sum.Neighbors[0].State == "established"
	st.installed = sum.Installed
	for _, n := range sum.Neighbors {
		for _, f := range n.Families {
			st.received += f.Received
		}
	}
	if b, err = query(ctl, "stats"); err != nil {
		return st, err
	}
	var rep struct {
		XDP *struct {
			FIBEntries int `json:"fib_entries_resolved"`
		} `json:"xdp"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return st, errBusy
	}
	if rep.XDP == nil {
		return st, errors.New("the receiver runs no XDP plane")
	}
	st.mirrored = rep.XDP.FIBEntries
	return st, nil
}

// query sends one command line to the control socket and returns the
// answer.
func query(path, cmd string) ([]byte, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", cmd); err != nil {
		return nil, err
	}
	var b []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil {
			break
		}
	}
	if strings.HasPrefix(string(b), "error:") {
		return nil, errors.New(strings.TrimSpace(string(b)))
	}
	return b, nil
}

// waitFor polls cond every 50 ms until it holds, fails or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil && !errors.Is(err, errBusy) {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// rss returns a process's resident set size and its peak (VmHWM), in
// bytes.
func rss(pid int) (cur, peak uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseUint(f[0], 10, 64)
		switch k {
		case "VmRSS":
			cur = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return cur, peak, nil
}

// owners maps a function name's package to the part of the node it
// belongs to, first match wins.
var owners = []struct{ prefix, owner string }{
	{"github.com/osrg/gobgp/", "GoBGP"},
	{"github.com/mplsnode/mplsnode/bgp.", "node BGP RIB (bgp.Speaker)"},
	{"github.com/mplsnode/mplsnode/node.(*xdpPlane)", "XDP mirror"},
	{"github.com/mplsnode/mplsnode/forward/xdp.", "XDP mirror"},
	{"github.com/cilium/ebpf", "XDP mirror"},
	{"github.com/mplsnode/mplsnode/node.", "node tables (bgpTables)"},
	{"github.com/mplsnode/mplsnode/mpls.", "FIB (mpls)"},
	{"github.com/mplsnode/mplsnode/", "other mplsnode"},
}

// splitHeap reads the heap profile's in-use bytes by stack (go tool
// pprof -traces) and attributes each stack to the first frame, from the
// allocation site up, that is in a package of owners.
func splitHeap(ctx context.Context, prof string, routes int) (string, uint64, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-traces", "-sample_index=inuse_space", prof).Output()
	if err != nil {
		return "", 0, fmt.Errorf("go tool pprof: %v", err)
	}
	by := map[string]float64{}
	var total float64
	var cur float64
	attributed := true
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "-----------+") {
			if !attributed {
				by["other"] += cur
			}
			cur, attributed = 0, true
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		fn := f[len(f)-1]
		if len(f) == 2 { // a stack's first line: its bytes, then the allocation site
			v, ok := parseBytes(f[0])
			if !ok {
				continue
			}
			cur, attributed = v, false
			total += v
		}
		if attributed {
			continue
		}
		for _, o := range owners {
			if strings.HasPrefix(fn, o.prefix) {
				by[o.owner] += cur
				attributed = true
				break
			}
		}
	}
	if !attributed {
		by["other"] += cur
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return by[keys[i]] > by[keys[j]] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f MiB (%.0f B/route)", k, by[k]/(1<<20), by[k]/float64(routes)))
	}
	return fmt.Sprintf("in use %.0f MiB (%.0f B/route): %s", total/(1<<20), total/float64(routes), strings.Join(parts, ", ")), uint64(total), nil
}

// parseBytes reads pprof's sizes: 512B, 1.50kB, 3MB, 2.25GB.
func parseBytes(s string) (float64, bool) {
	mult := 1.0
	for _, u := range []struct {
		suffix string
		m      float64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.m
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	return v * mult, err == nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
