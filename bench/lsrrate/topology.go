package lsrrate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// topology is gen --veth-- LSR --veth-- sink.
type topology struct {
	gen, lsr, sink                 *namespace
	genDev, lsrIn, lsrOut, sinkDev string
	// TAPs and bridges of mplsnode-swap-tap (bridgeForTAPs), else empty.
	tapIn, tapOut, brIn, brOut string
}

// macString formats a MAC address for ip(8).
func macString(m [6]byte) string { return net.HardwareAddr(m[:]).String() }

// newTopology creates the namespaces and veths (up, fixed MACs) and gives
// the sink its address. On error everything made so far is removed.
func newTopology() (t *topology, err error) {
	t = &topology{
		genDev: uniqueName("lg"), lsrIn: uniqueName("li"),
		lsrOut: uniqueName("lo"), sinkDev: uniqueName("ls"),
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.close())
			t = nil
		}
	}()
	if t.gen, err = newNamespace("lrg"); err != nil {
		return t, err
	}
	if t.lsr, err = newNamespace("lrl"); err != nil {
		return t, err
	}
	if t.sink, err = newNamespace("lrs"); err != nil {
		return t, err
	}
	pairs := []struct {
		a, b       string
		nsA, nsB   *namespace
		macA, macB [6]byte
	}{
		{t.genDev, t.lsrIn, t.gen, t.lsr, genMAC, inMAC},
		{t.lsrOut, t.sinkDev, t.lsr, t.sink, outMAC, sinkMAC},
	}
	// One queue per CPU on each end: the XDP generator's threads (one per
	// CPU) redirect into the receive queue of their CPU, each with its
	// own NAPI, as on a multi-queue NIC.
	queues := strconv.Itoa(runtime.NumCPU())
	for _, p := range pairs {
		if _, err := ipCmd("link", "add", p.a, "address", macString(p.macA), "netns", p.nsA.name,
			"numtxqueues", queues, "numrxqueues", queues, "type", "veth",
			"peer", "name", p.b, "address", macString(p.macB), "netns", p.nsB.name,
			"numtxqueues", queues, "numrxqueues", queues); err != nil {
			return t, err
		}
		if _, err := p.nsA.ip("link", "set", p.a, "up"); err != nil {
			return t, err
		}
		if _, err := p.nsB.ip("link", "set", p.b, "up"); err != nil {
			return t, err
		}
	}
	// The sink's kernel holds the LSR's next hop, so it answers ARP; what
	// it receives (MPLS, or IPv4 for a prefix it does not route) it drops.
	if _, err := t.sink.ip("addr", "add", sinkAddr, "dev", t.sinkDev); err != nil {
		return t, err
	}
	return t, nil
}

// close removes the veths and the namespaces.
func (t *topology) close() error {
	var errs []error
	// Deleting one end of a pair removes both. Delete them explicitly: a
	// namespace outlives its name while a thread or socket still uses it.
	if t.gen != nil {
		if _, err := t.gen.ip("link", "del", t.genDev); err != nil && !noDevice(err) {
			errs = append(errs, err)
		}
	}
	if t.lsr != nil {
		if _, err := t.lsr.ip("link", "del", t.lsrOut); err != nil && !noDevice(err) {
			errs = append(errs, err)
		}
	}
	for _, ns := range []*namespace{t.gen, t.lsr, t.sink} {
		if ns != nil {
			if err := ns.remove(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// noDevice reports whether an ip(8) error says the device does not exist
// (not created yet when setup failed).
func noDevice(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot find device") || strings.Contains(s, "does not exist")
}

// topoStats are the counters of the four veth ends.
type topoStats struct {
	gen, in, out, sink ifStats
}

// deviceStats reads the counters of the four veth ends.
func (t *topology) deviceStats() (s topoStats, err error) {
	for _, d := range []struct {
		ns  *namespace
		dev string
		st  *ifStats
	}{{t.gen, t.genDev, &s.gen}, {t.lsr, t.lsrIn, &s.in}, {t.lsr, t.lsrOut, &s.out}, {t.sink, t.sinkDev, &s.sink}} {
		if *d.st, err = d.ns.deviceStats(d.dev); err != nil {
			return s, err
		}
	}
	return s, nil
}

// kernelForwarder is the kernel IP-forwarding in the LSR namespace.
type kernelForwarder struct{}

// mark implements forwarder: the kernel has no counters of its own here.
func (kernelForwarder) mark() {}

// startKernel gives the LSR kernel the addresses, a route beyond the sink
// and net.ipv4.ip_forward=1.
func startKernel(t *topology) (forwarder, error) {
	steps := [][]string{
		{"addr", "add", lsrInAddr, "dev", t.lsrIn},
		{"addr", "add", lsrOutAddr, "dev", t.lsrOut},
		{"route", "add", dstPrefix, "via", sinkIP, "dev", t.lsrOut},
	}
	for _, s := range steps {
		if _, err := t.lsr.ip(s...); err != nil {
			return nil, err
		}
	}
	if _, err := t.lsr.exec("sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return nil, err
	}
	return kernelForwarder{}, nil
}

// cpu implements forwarder: the machine's softirq time.
func (kernelForwarder) cpu() (time.Duration, error) { return softirqTime() }

// describe implements forwarder.
func (kernelForwarder) describe() string { return "kernel (CPU figure: /proc/stat softirq)" }

// stop implements forwarder: the namespace goes with the topology.
func (kernelForwarder) stop() error { return nil }

// ingressDrops implements forwarder: the ingress interface's rx_dropped.
func (kernelForwarder) ingressDrops(dev uint64) uint64 { return dev }

// Limits for the mplsnode process.
const (
	// startTimeout bounds mplsnode's start (links opened, control socket
	// answering).
	startTimeout = 15 * time.Second
	// stopTimeout is how long mplsnode gets to exit after SIGTERM before
	// it is killed.
	stopTimeout = 5 * time.Second
	// maxLog is how much of mplsnode's log is kept for error messages.
	maxLog = 16 << 10
)

// mplsnodeForwarder is an `mplsnode run` process in the LSR namespace.
type mplsnodeForwarder struct {
	inKernel bool // the node runs its XDP label switch
	cmd      *exec.Cmd
	dir      string // config and control socket
	sock     string
	log      *tailBuffer
	exited   chan struct{}
	err      error       // Wait's result, once exited is closed
	base     *nodeReport // counters at the last mark
}

// lsrConfig is the LSR's config: swap inLabel for outLabel towards the sink,
// set up as setup says.
func lsrConfig(t *topology, setup nodeSetup) string {
	in, out := t.lsrIn, t.lsrOut
	inLink, outLink := in+" type "+setup.linkType+setup.words, out+" type "+setup.linkType+setup.words
	if setup.linkType == "tap" {
		in, out = t.tapIn, t.tapOut
		inLink = fmt.Sprintf("%s type tap bridge %s address %s", in, t.brIn, macString(inMAC))
		outLink = fmt.Sprintf("%s type tap bridge %s address %s", out, t.brOut, macString(outMAC))
	}
	// The in-kernel configuration is the default forwarding node (no `set
	// forward` line: auto); the others keep every frame in userspace.
	extra := "set forward xdp off\n"
	if setup.inKernel {
		extra = ""
	}
	return extra + fmt.Sprintf(`# lsrrate LSR: swap label %d for %d and forward to the sink.
link add %s
link add %s
addr add %s dev %s
addr add %s dev %s
-f mpls route add %d as to %d via inet %s dev %s
`, inLabel, outLabel, inLink, outLink, lsrInAddr, in, lsrOutAddr, out,
		inLabel, outLabel, sinkIP, out)
}

// bridgeForTAPs makes the LSR's veths bridge ports for mplsnode's TAPs:
// a bridge each, and other MACs for the veths, so that the generator's
// frames (to inMAC) and the sink's (to outMAC) are forwarded to the TAPs
// that take those MACs instead of being kept by the bridges.
func (t *topology) bridgeForTAPs() error {
	t.tapIn, t.tapOut = uniqueName("ti"), uniqueName("to")
	t.brIn, t.brOut = uniqueName("bi"), uniqueName("bo")
	for _, b := range []struct {
		br, dev string
		mac     [6]byte
	}{{t.brIn, t.lsrIn, inMAC}, {t.brOut, t.lsrOut, outMAC}} {
		other := b.mac
		other[5] ^= 0x80
		for _, args := range [][]string{
			{"link", "add", b.br, "type", "bridge"},
			{"link", "set", b.dev, "address", macString(other)},
			{"link", "set", b.dev, "master", b.br},
			{"link", "set", b.br, "up"},
		} {
			if _, err := t.lsr.ip(args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// startMPLSNode writes lsr.conf and starts `mplsnode run` in the LSR
// namespace, and returns once its control socket answers.
// With setup.inKernel the node runs its XDP label switch, and the sink's
// veth gets GRO so that it takes redirected frames.
func startMPLSNode(ctx context.Context, bin string, t *topology, setup nodeSetup) (fw forwarder, err error) {
	if setup.inKernel {
		if out, err := t.sink.exec("ethtool", "-K", t.sinkDev, "gro", "on"); err != nil {
			return nil, fmt.Errorf("ethtool -K %s gro on: %v: %s", t.sinkDev, err, out)
		}
	}
	dir, err := os.MkdirTemp("", "lsrrate-")
	if err != nil {
		return nil, err
	}
	m := &mplsnodeForwarder{inKernel: setup.inKernel, dir: dir, sock: filepath.Join(dir, "ctl.sock"), log: &tailBuffer{max: maxLog}, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			err = errors.Join(err, m.stop())
		}
	}()
	conf := filepath.Join(dir, "lsr.conf")
	if err := os.WriteFile(conf, []byte(lsrConfig(t, setup)), 0o600); err != nil {
		return nil, err
	}
	// ip netns exec execs the binary in place: the pid is mplsnode's.
	args := []string{"netns", "exec", t.lsr.name, bin, "run", "-c", conf, "--control-socket", m.sock, "--log-level", "warn"}
	if setup.cpuProfile != "" {
		args = append(args, "--cpuprofile", setup.cpuProfile)
	}
	name := "ip"
	if len(setup.cpus) > 0 {
		// taskset execs ip, which execs mplsnode: the pid stays
		// mplsnode's, and every thread inherits the affinity.
		name, args = "taskset", append([]string{"-c", cpuListString(setup.cpus), "ip"}, args...)
	}
	if setup.nice != 0 {
		// nice execs the rest: same pid, every thread at that value.
		name, args = "nice", append([]string{"-n", strconv.Itoa(setup.nice), name}, args...)
	}
	m.cmd = exec.Command(name, args...)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		close(m.exited)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.exited)
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		if _, err := m.report(); err == nil {
			return m, nil
		}
		select {
		case <-m.exited:
			return nil, fmt.Errorf("mplsnode run exited at start (%v): %s", m.err, m.log.String())
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("mplsnode run: control socket %s not answering after %v: %s", m.sock, startTimeout, m.log.String())
		}
	}
}

// nodeReport is the part of the node's stats document (node.Report, the
// JSON of mplsnode stats --json) that progress lines show.
type nodeReport struct {
	Links       []linkReport `json:"links"`
	LabelSwitch struct {
		Forwarded uint64            `json:"forwarded"`
		Swapped   uint64            `json:"swapped"`
		Queued    uint64            `json:"queued"`
		Drops     map[string]uint64 `json:"drops"`
	} `json:"label_switch"`
	XDP *struct {
		Swapped uint64            `json:"swapped"`
		Passed  map[string]uint64 `json:"passed"`
	} `json:"xdp"`
}

// linkReport is one link's part of nodeReport.
type linkReport struct {
	Name     string            `json:"name"`
	RXRing   int               `json:"rx_ring_frames"`
	RXFrames uint64            `json:"rx_frames"`
	TXFrames uint64            `json:"tx_frames"`
	ILMHits  uint64            `json:"ilm_hits"`
	Drops    map[string]uint64 `json:"drops"`
}

// report asks the node for its counters over the control socket.
func (m *mplsnodeForwarder) report() (*nodeReport, error) {
	c, err := net.DialTimeout("unix", m.sock, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte("stats\n")); err != nil {
		return nil, err
	}
	var r nodeReport
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&r); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", m.sock, err)
	}
	return &r, nil
}

// cpu implements forwarder: mplsnode's user+sys time, plus the
// machine's softirq time where its XDP label switch runs.
func (m *mplsnodeForwarder) cpu() (time.Duration, error) {
	select {
	case <-m.exited:
		return 0, fmt.Errorf("mplsnode exited (%v): %s", m.err, m.log.String())
	default:
	}
	d, err := processCPU(m.cmd.Process.Pid)
	if err != nil || !m.inKernel {
		return d, err
	}
	si, err := softirqTime()
	return d + si, err
}

// mark implements forwarder: describe counts from here.
func (m *mplsnodeForwarder) mark() {
	if r, err := m.report(); err == nil {
		m.base = r
	}
}

// ingressDrops implements forwarder: lower_rx_overflow of every link
// since the last mark; with the XDP label switch, plus the ingress veth's
// rx_dropped (frames its receive ring refused before the program saw
// them; the AF_XDP link's own drops are already in that veth counter and
// in lower_rx_overflow, so they are not added for it).
func (m *mplsnodeForwarder) ingressDrops(dev uint64) uint64 {
	var n uint64
	if m.inKernel {
		n = dev
	}
	r, err := m.report()
	if err != nil || m.base == nil || len(m.base.Links) != len(r.Links) {
		return n
	}
	for i, l := range r.Links {
		n += l.Drops["lower_rx_overflow"] - m.base.Links[i].Drops["lower_rx_overflow"]
	}
	return n
}

// describe implements forwarder: the node's frame counters since the
// last mark (since its start if none) and every non-zero drop.
func (m *mplsnodeForwarder) describe() string {
	r, err := m.report()
	if err != nil {
		return fmt.Sprintf("mplsnode counters unavailable: %v", err)
	}
	base := m.base
	if base == nil || len(base.Links) != len(r.Links) {
		base = &nodeReport{}
		base.Links = make([]linkReport, len(r.Links))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mplsnode:")
	for i, l := range r.Links {
		o := base.Links[i]
		fmt.Fprintf(&b, " %s rx %d tx %d ilm %d", l.Name, l.RXFrames-o.RXFrames, l.TXFrames-o.TXFrames, l.ILMHits-o.ILMHits)
		if l.RXRing > 0 {
			fmt.Fprintf(&b, " (rx ring %d slots)", l.RXRing)
		}
		writeDrops(&b, l.Drops, o.Drops)
	}
	sw, o := r.LabelSwitch, base.LabelSwitch
	fmt.Fprintf(&b, "; switch swapped %d forwarded %d queued %d", sw.Swapped-o.Swapped, sw.Forwarded-o.Forwarded, sw.Queued-o.Queued)
	writeDrops(&b, sw.Drops, o.Drops)
	if x := r.XDP; x != nil {
		var ob uint64
		var op map[string]uint64
		if base.XDP != nil {
			ob, op = base.XDP.Swapped, base.XDP.Passed
		}
		fmt.Fprintf(&b, "; xdp swapped %d", x.Swapped-ob)
		writeDrops(&b, x.Passed, op)
	}
	return b.String()
}

// writeDrops appends the counters of drops that grew since base, sorted
// by name.
func writeDrops(b *strings.Builder, drops, base map[string]uint64) {
	var names []string
	for k, v := range drops {
		if v != base[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(b, " %s=%d", k, drops[k]-base[k])
	}
}

// stop implements forwarder: SIGTERM, then SIGKILL after stopTimeout; the
// temporary directory is removed.
func (m *mplsnodeForwarder) stop() error {
	defer os.RemoveAll(m.dir)
	if m.cmd == nil || m.cmd.Process == nil {
		return nil
	}
	select {
	case <-m.exited:
		return nil
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
		if m.err != nil {
			return fmt.Errorf("mplsnode run after SIGTERM: %v: %s", m.err, m.log.String())
		}
		return nil
	case <-time.After(stopTimeout):
		_ = m.cmd.Process.Kill()
		<-m.exited
		return fmt.Errorf("mplsnode run did not exit within %v of SIGTERM; killed", stopTimeout)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// Write implements io.Writer.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// String returns what the buffer holds.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
