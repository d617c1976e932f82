package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
)

// LSRResult is one row of configuration 10 (the LSR forwarding rate),
// copied from bench/lsrrate's results.
type LSRResult struct {
	// Config is a bench/lsrrate configuration name ("mplsnode-swap",
	// "kernel-ipfwd", "mplsnode-swap@kernel-pps", ...).
	Config string `json:"config"`
	// FrameSize is the generated frame's size in bytes.
	FrameSize int `json:"frame_size"`
	// PPS is the frames per second counted in ns2.
	PPS float64 `json:"pps"`
	// CPUSecondsPerMpkt is the forwarder's CPU seconds per million frames.
	CPUSecondsPerMpkt float64 `json:"cpu_s_per_mpkt"`
	// Frames is how many frames were counted.
	Frames uint64 `json:"frames"`
	// IngressDrops counts frames the forwarder lost at its ingress
	// (mplsnode's lower_rx_overflow; the kernel's rx_dropped).
	IngressDrops uint64 `json:"ingress_drops"`
	// OfferedPPS is the frames per second the generator sent.
	OfferedPPS float64 `json:"offered_pps,omitempty"`
	// Generator is the generator that sent: "xdp" or "afpacket".
	Generator string `json:"generator,omitempty"`
}

// LSRRateFunc runs configuration 10 (bench/lsrrate.Run, adapted by the
// command so that this package does not depend on it).
type LSRRateFunc func(ctx context.Context, bin string, seconds float64, frameSizes []int, progress io.Writer) ([]LSRResult, error)

// Options configures Run.
type Options struct {
	// Bin is the mplsnode binary.
	Bin string
	// Rounds is how many times every configuration runs (interleaved).
	Rounds int
	// Seconds is each netperf run's length.
	Seconds int
	// Select picks the configurations.
	Select Selection
	// OutDir receives results.md, results.json, results.png/svg and the
	// profiles.
	OutDir string
	// Profile runs the hot configurations (ProfileIDs) once more with
	// --cpuprofile and writes go tool pprof -top into OutDir.
	Profile bool
	// GoTool is the go command for pprof; empty means "go".
	GoTool string
	// GVisorCmd is the command (argv prefix) that runs GVisorClientMain;
	// GVisorEnv is added to its environment.
	GVisorCmd []string
	GVisorEnv []string
	// LSRRate runs configuration 10; nil leaves it out.
	LSRRate LSRRateFunc
	// LSRFrameSizes are configuration 10's frame sizes.
	LSRFrameSizes []int
	// Progress receives one line per run; nil discards.
	Progress io.Writer
	// NSPrefix names the namespaces; empty means mpb<pid>-.
	NSPrefix string
}

// ProfileIDs are the hot configurations profiled with Options.Profile.
var ProfileIDs = []string{"5", "7", "9c"}

// Run is one netperf run of one configuration.
type Run struct {
	// Config is the configuration's ID; Round counts from 1 (0: a profile
	// run, not in the statistics).
	Config string `json:"config"`
	Round  int    `json:"round"`
	// OK is true when the client reported a result; Error says why not.
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Throughput is in Units (Mbit/s, or trans/s for TCP_RR).
	Throughput float64 `json:"throughput"`
	Units      string  `json:"units"`
	// WallSeconds is the whole run including process start and stop.
	WallSeconds float64 `json:"wall_s"`
	// MachineCPUSeconds is the machine's busy CPU time during the client's
	// run (all processes and the kernel's softirq work, other load too).
	MachineCPUSeconds float64 `json:"machine_cpu_s"`
	// Procs are the processes of the run.
	Procs []ProcStats `json:"procs"`
	// Result is the client's netperf result.
	Result *netperf.Result `json:"netperf,omitempty"`
}

// Results is everything one bench run produced (results.json).
type Results struct {
	Started     time.Time   `json:"started"`
	Finished    time.Time   `json:"finished"`
	DurationSec float64     `json:"duration_s"`
	Host        HostInfo    `json:"host"`
	Rounds      int         `json:"rounds"`
	Seconds     int         `json:"seconds"`
	Configs     []ConfigDoc `json:"configs"`
	Runs        []Run       `json:"runs"`
	Summaries   []Summary   `json:"summaries"`
	LSR         []LSRResult `json:"lsr,omitempty"`
	LSRError    string      `json:"lsr_error,omitempty"`
	Targets     []Target    `json:"targets"`
	Profiles    []string    `json:"profiles,omitempty"`
}

// HostInfo describes the machine.
type HostInfo struct {
	CPUs    int    `json:"cpus"`
	Kernel  string `json:"kernel"`
	GoOS    string `json:"goos"`
	GoArch  string `json:"goarch"`
	Version string `json:"go_version"`
}

// ConfigDoc is a configuration as results.json records it.
type ConfigDoc struct {
	ID       string `json:"id"`
	Group    int    `json:"group"`
	Name     string `json:"name"`
	Test     string `json:"test"`
	Units    string `json:"units"`
	Topology string `json:"topology"`
	Client   string `json:"client"`
	Host     string `json:"host"`
	NS0Conf  string `json:"ns0_conf,omitempty"`
	NS1Conf  string `json:"ns1_conf,omitempty"`
}

// ErrNotRoot is returned when the bench is not run as root.
var ErrNotRoot = errors.New("the bench needs root: it creates network namespaces and veth pairs " +
	"(CAP_SYS_ADMIN, CAP_NET_ADMIN) and opens AF_PACKET sockets and TAP devices (CAP_NET_RAW); run: sudo make bench")

// runner holds a bench run's state.
type runner struct {
	opt   Options
	ns    *Namespaces
	procs procs
	dir   string // temp dir: config files, control sockets
	out   io.Writer
}

// Bench runs the selected configurations over opt.Rounds interleaved rounds,
// then configuration 10 and the profiles, and writes the results into
// opt.OutDir. The namespaces and processes it made are removed on every
// return, including when ctx is cancelled (Ctrl-C).
func Bench(ctx context.Context, opt Options) (res *Results, err error) {
	if err := checkOptions(&opt); err != nil {
		return nil, err
	}
	r := &runner{opt: opt, ns: NewNamespaces(opt.NSPrefix), out: opt.Progress}
	if r.out == nil {
		r.out = io.Discard
	}
	if r.dir, err = os.MkdirTemp("", "seedbench-"); err != nil {
		return nil, err
	}
	defer func() {
		r.procs.killAll()
		if cerr := r.ns.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("removing namespaces: %w", cerr)
		}
		os.RemoveAll(r.dir)
	}()
	if err := os.MkdirAll(opt.OutDir, 0o755); err != nil {
		return nil, err
	}
	cfgs := opt.Select.Filter(Configs())
	res = &Results{Started: time.Now().UTC(), Host: hostInfo(), Rounds: opt.Rounds, Seconds: opt.Seconds}
	for i := range cfgs {
		res.Configs = append(res.Configs, docOf(&cfgs[i]))
	}
	if err := r.rounds(ctx, cfgs, res); err != nil {
		return res, err
	}
	if opt.LSRRate != nil && opt.Select.Has("10") {
		r.lsrRate(ctx, res)
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	res.Summaries = Summarize(cfgs, res.Runs)
	res.Targets = Targets(res.Summaries, res.LSR)
	if opt.Profile {
		r.profiles(ctx, cfgs, res)
	}
	res.Finished = time.Now().UTC()
	res.DurationSec = res.Finished.Sub(res.Started).Seconds()
	if err := WriteOutputs(opt.OutDir, res); err != nil {
		return res, err
	}
	return res, nil
}

// checkOptions refuses a run that cannot start (not root, no binary,
// nothing to measure) and fills in opt's defaults.
func checkOptions(opt *Options) error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	if opt.Rounds < 1 || opt.Seconds < 1 {
		return fmt.Errorf("rounds (%d) and seconds (%d) must be at least 1", opt.Rounds, opt.Seconds)
	}
	if _, err := os.Stat(opt.Bin); err != nil {
		return fmt.Errorf("mplsnode binary: %w (run make build)", err)
	}
	if opt.GoTool == "" {
		opt.GoTool = "go"
	}
	if opt.NSPrefix == "" {
		opt.NSPrefix = fmt.Sprintf("mpb%d-", os.Getpid())
	}
	return nil
}

// rounds runs every configuration of cfgs once a round, interleaved, for
// opt.Rounds rounds, appending each run to res.Runs with a progress line;
// it stops at ctx's end.
func (r *runner) rounds(ctx context.Context, cfgs []Config, res *Results) error {
	total := len(cfgs) * r.opt.Rounds
	done := 0
	start := time.Now()
	for round := 1; round <= r.opt.Rounds; round++ {
		for i := range cfgs {
			if err := ctx.Err(); err != nil {
				return err
			}
			c := &cfgs[i]
			run := r.runOne(ctx, c, round, nil)
			res.Runs = append(res.Runs, run)
			done++
			fmt.Fprintf(r.out, "[%3d/%d %s, eta %s] round %d/%d  %-3s %-58s %s\n", done, total,
				time.Since(start).Round(time.Second), eta(start, done, total), round, r.opt.Rounds, c.ID, c.Name, runLine(&run))
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// lsrRate measures configuration 10 (opt.LSRRate) into res; a failure is
// recorded in res.LSRError, not returned.
func (r *runner) lsrRate(ctx context.Context, res *Results) {
	fmt.Fprintf(r.out, "configuration 10: LSR forwarding rate (bench/lsrrate), %d s per frame size\n", r.opt.Seconds)
	lsr, err := r.opt.LSRRate(ctx, r.opt.Bin, float64(r.opt.Seconds), r.opt.LSRFrameSizes, r.out)
	if err != nil {
		res.LSRError = err.Error()
		fmt.Fprintf(r.out, "configuration 10 failed: %v\n", err)
	}
	res.LSR = lsr
}

// profiles takes the CPU profiles of the configurations of ProfileIDs
// among cfgs into res.Profiles; a failed one is reported and skipped.
func (r *runner) profiles(ctx context.Context, cfgs []Config, res *Results) {
	for i := range cfgs {
		if !contains(ProfileIDs, cfgs[i].ID) {
			continue
		}
		files, err := r.profile(ctx, &cfgs[i])
		if err != nil {
			fmt.Fprintf(r.out, "profile of %s failed: %v\n", cfgs[i].ID, err)
		}
		res.Profiles = append(res.Profiles, files...)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func eta(start time.Time, done, total int) string {
	if done == 0 {
		return "?"
	}
	per := time.Since(start) / time.Duration(done)
	return (per * time.Duration(total-done)).Round(time.Second).String()
}

// runLine is a run's progress line.
func runLine(r *Run) string {
	if !r.OK {
		return "FAILED: " + r.Error
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%10.2f %-7s", r.Throughput, r.Units)
	for _, p := range r.Procs {
		fmt.Fprintf(&b, "  %s %.1fu/%.1fs", p.Role, p.UserSeconds, p.SysSeconds)
		if p.Mplsnode {
			fmt.Fprintf(&b, " %.0fMiB", float64(p.PeakRSSKiB)/1024)
		}
	}
	return b.String()
}

func hostInfo() HostInfo {
	h := HostInfo{CPUs: runtime.NumCPU(), GoOS: runtime.GOOS, GoArch: runtime.GOARCH, Version: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	return h
}

func docOf(c *Config) ConfigDoc {
	return ConfigDoc{ID: c.ID, Group: c.Group, Name: c.Name, Test: string(c.Test), Units: c.Units(),
		Topology: c.Topo.String(), Client: c.Client.String(), Host: c.Host, NS0Conf: c.NS0Conf, NS1Conf: c.NS1Conf}
}

// profileFiles are the CPU profile paths of a profiled run (empty: none).
type profileFiles struct{ client, lsr string }

// runOne runs configuration c once: LSR (if any) and netserver up, the
// client for opt.Seconds, everything stopped and accounted.
func (r *runner) runOne(ctx context.Context, c *Config, round int, prof *profileFiles) (run Run) {
	run = Run{Config: c.ID, Round: round, Units: c.Units()}
	t0 := time.Now()
	defer func() { run.WallSeconds = time.Since(t0).Seconds() }()
	fail := func(err error) Run {
		run.Error = err.Error()
		return run
	}
	topo, err := r.ns.Get(ctx, c.Topo)
	if err != nil {
		return fail(err)
	}
	var lsr *proc
	stopAll := func(ps ...*proc) {
		for _, p := range ps {
			if p != nil {
				run.Procs = append(run.Procs, p.stopMeasured())
			}
		}
	}
	if c.NS1Conf != "" {
		if lsr, err = r.startLSR(ctx, c, topo, prof, stopAll); err != nil {
			return fail(err)
		}
	}
	srv, err := r.startReady(ctx, topo.NS[2], "ns2 netserver", false, []string{r.opt.Bin, "netserver", "--kernel", "-p", "12865"},
		func(*proc) bool { return listening(topo.NS[2], 12865) }, "netserver in "+topo.NS[2], stopAll, lsr)
	if err != nil {
		return fail(err)
	}
	argv, env, mplsnode, err := r.clientArgv(c, prof)
	if err != nil {
		stopAll(lsr, srv)
		return fail(err)
	}
	busy0, _ := machineBusy()
	cli, err := r.procs.start(topo.NS[0], "ns0 client", mplsnode, env, argv...)
	if err != nil {
		stopAll(lsr, srv)
		return fail(err)
	}
	werr := cli.wait(ctx, time.Duration(r.opt.Seconds)*time.Second+60*time.Second)
	busy1, _ := machineBusy()
	run.MachineCPUSeconds = busy1 - busy0
	run.Procs = append(run.Procs, cli.stats())
	stopAll(lsr, srv)
	if werr != nil {
		return fail(fmt.Errorf("client: %v %s", werr, lastLines(cli.stderr.String())))
	}
	if err := clientResult(&run, cli); err != nil {
		return fail(err)
	}
	return run
}

// startLSR writes configuration c's LSR config and starts the LSR in the
// topology's middle namespace (with a CPU profile when prof asks), ready
// when its control socket exists.
func (r *runner) startLSR(ctx context.Context, c *Config, topo *Topo, prof *profileFiles, stop func(...*proc)) (*proc, error) {
	conf, err := r.writeConf(c.ID+"-ns1.conf", c.NS1Conf)
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(r.dir, c.ID+"-ns1.sock")
	os.Remove(sock)
	argv := []string{r.opt.Bin, "run", "-c", conf, "--control-socket", sock, "--log-level", "warn"}
	if prof != nil && prof.lsr != "" {
		argv = append(argv, "--cpuprofile", prof.lsr)
	}
	return r.startReady(ctx, topo.NS[1], "ns1 lsr", true, argv,
		func(*proc) bool { _, err := os.Stat(sock); return err == nil }, "the LSR in "+topo.NS[1], stop)
}

// startReady starts argv in namespace ns and waits up to 10 s until ready
// holds or the process exits. On a failure it stops the processes already
// running and the new one (stop, in that order) and says that what did
// not start.
func (r *runner) startReady(ctx context.Context, ns, role string, mplsnode bool, argv []string, ready func(*proc) bool, what string, stop func(...*proc), running ...*proc) (*proc, error) {
	p, err := r.procs.start(ns, role, mplsnode, nil, argv...)
	if err != nil {
		stop(running...)
		return nil, err
	}
	if err := waitUntil(ctx, 10*time.Second, func() bool { return ready(p) || p.exited() }); err != nil || p.exited() {
		stop(append(running, p)...)
		return nil, fmt.Errorf("%s did not start: %v %s", what, err, lastLines(p.stderr.String()))
	}
	return p, nil
}

// clientArgv is configuration c's client command line and environment,
// and whether the client is an mplsnode (its RSS is accounted).
func (r *runner) clientArgv(c *Config, prof *profileFiles) (argv, env []string, mplsnode bool, err error) {
	mplsnode = true
	switch c.Client {
	case ClientKernel:
		argv = []string{r.opt.Bin, "netperf", "--kernel"}
		mplsnode = false
	case ClientGVisor:
		argv = append(append([]string{}, r.opt.GVisorCmd...), gvisorArgs(c, r.opt.Seconds)...)
		env = r.opt.GVisorEnv
		mplsnode = false
	case ClientNode:
		conf, err := r.writeConf(c.ID+"-ns0.conf", c.NS0Conf)
		if err != nil {
			return nil, nil, false, err
		}
		argv = []string{r.opt.Bin, "netperf", "--config", conf}
	}
	if c.Client != ClientGVisor {
		argv = append(argv, "-H", c.Host, "-t", string(c.Test), "-l", fmt.Sprint(r.opt.Seconds), "--json")
		if prof != nil && prof.client != "" && c.Client == ClientNode {
			argv = append(argv, "--cpuprofile", prof.client)
		}
	}
	return argv, env, mplsnode, nil
}

// clientResult reads the client's JSON report into run; a run with no
// throughput is not OK.
func clientResult(run *Run, cli *proc) error {
	var rep struct {
		Result netperf.Result `json:"result"`
	}
	if err := json.Unmarshal(cli.stdout.Bytes(), &rep); err != nil {
		return fmt.Errorf("client output: %v: %q", err, lastLines(cli.stdout.String()))
	}
	run.Result = &rep.Result
	run.Throughput = rep.Result.Throughput
	run.OK = run.Throughput > 0
	if !run.OK {
		run.Error = "zero throughput"
	}
	return nil
}

func (r *runner) writeConf(name, text string) (string, error) {
	p := filepath.Join(r.dir, name)
	return p, os.WriteFile(p, []byte(text), 0o644)
}

// lastLines returns the last few lines of s, for error messages.
func lastLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 4 {
		lines = lines[len(lines)-4:]
	}
	return strings.Join(lines, " | ")
}

// waitUntil polls cond every 50 ms until it holds, ctx ends or timeout.
func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// listening reports whether a TCP socket listens on port in namespace ns.
func listening(ns string, port int) bool {
	out, err := exec.Command("ip", "netns", "exec", ns, "ss", "-Hltn", fmt.Sprintf("sport = :%d", port)).Output()
	return err == nil && strings.TrimSpace(string(out)) != ""
}

// profile runs c once more with CPU profiles of its mplsnode processes and
// writes go tool pprof -top for each into OutDir.
func (r *runner) profile(ctx context.Context, c *Config) ([]string, error) {
	pf := &profileFiles{}
	if c.Client == ClientNode {
		pf.client = filepath.Join(r.dir, "profile-"+c.ID+"-ns0.pprof")
	}
	if c.NS1Conf != "" {
		pf.lsr = filepath.Join(r.dir, "profile-"+c.ID+"-ns1.pprof")
	}
	fmt.Fprintf(r.out, "profiling %s (%s), %d s\n", c.ID, c.Name, r.opt.Seconds)
	run := r.runOne(ctx, c, 0, pf)
	if !run.OK {
		return nil, errors.New(run.Error)
	}
	var files []string
	for _, p := range []struct{ src, role string }{{pf.client, "ns0-client"}, {pf.lsr, "ns1-lsr"}} {
		if p.src == "" {
			continue
		}
		text := fmt.Sprintf("# configuration %s: %s; %s, %d s, %.2f %s\n", c.ID, c.Name, p.role, r.opt.Seconds, run.Throughput, run.Units)
		for _, sortBy := range [][]string{{"-top"}, {"-top", "-cum"}} {
			args := append(append([]string{"tool", "pprof"}, sortBy...), "-nodecount=30", r.opt.Bin, p.src)
			out, err := exec.CommandContext(ctx, r.opt.GoTool, args...).CombinedOutput()
			if err != nil {
				return files, fmt.Errorf("go tool pprof %s: %v: %s", p.src, err, lastLines(string(out)))
			}
			text += fmt.Sprintf("\n# go %s\n%s", strings.Join(args[:len(args)-2], " "), out)
		}
		name := fmt.Sprintf("profile-%s-%s.txt", c.ID, p.role)
		if err := os.WriteFile(filepath.Join(r.opt.OutDir, name), []byte(text), 0o644); err != nil {
			return files, err
		}
		files = append(files, name)
		fmt.Fprintf(r.out, "  %s\n", filepath.Join(r.opt.OutDir, name))
	}
	return files, nil
}
