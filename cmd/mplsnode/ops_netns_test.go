package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// TestLinkMTULargerThanInterface gives a link `mtu 9000` on a veth of MTU
// 1500: check (run where the interface exists) and run both reject it at
// the mtu value with exit code 2, and run opens no link ("node started"
// never appears). Planted bug: without node.CheckInterfaces both accepted
// it (check said ok, run started forwarding with frames the veth drops).
func TestLinkMTULargerThanInterface(t *testing.T) {
	bin := rootBinary(t)
	a, b := netns.New(t, "mtua"), netns.New(t, "mtub")
	va, _ := netns.VethPair(t, a, b)
	conf := filepath.Join(t.TempDir(), "big.conf")
	text := fmt.Sprintf("link add %s type afpacket mtu 9000\naddr add 10.1.0.1/24 dev %s\n", va, va)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	col := len("link add "+va+" type afpacket mtu ") + 1
	want := fmt.Sprintf("%s:1:%d: link %s: mtu 9000 is larger than the interface's MTU 1500", conf, col, va)
	for _, args := range [][]string{
		{"check", "-c", conf},
		{"run", "-c", conf, "--control-socket", ""},
	} {
		// A run that accepts the file would run until killed: 20 s.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", a.Name(), bin}, args...)...)
		out, err := cmd.CombinedOutput()
		cancel()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), want) {
			t.Errorf("mplsnode %s: %v\n%s\nwant exit code 2 and %q", args[0], err, out, want)
		}
		if strings.Contains(string(out), "node started") {
			t.Errorf("mplsnode %s opened its links:\n%s", args[0], out)
		}
	}
	// The same file passes where the interface does not exist (check runs
	// anywhere), and an mtu within the interface's passes everywhere.
	if out, err := exec.Command(bin, "check", "-c", conf).CombinedOutput(); err != nil {
		t.Errorf("check outside the namespace: %v: %s", err, out)
	}
	if err := os.WriteFile(conf, []byte(strings.Replace(text, "9000", "1500", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Exec(bin, "check", "-c", conf); err != nil {
		t.Errorf("mtu 1500 on a 1500 veth: %v: %s", err, out)
	}
}

// TestSecondNodeRefuses starts a node (ns b, one veth to the kernel in ns
// a), then a second `mplsnode run` on the same config: sharing the
// control socket, sharing only the metrics address, and sharing only the
// link (its own control socket, no metrics: the link's claim, an abstract
// Unix socket of the namespace, stops it). The second must
// exit 1 within 20 s naming the first one's pid, log no "node started",
// and record nothing in its --pcap file (it captures every frame its links
// would send or receive: the kernel in ns a connects to the node meanwhile, so a
// second node that opened the link would record the ARP request and its
// answer). Planted bug (the listeners claimed after node.New, as before):
// the second opens the link, answers ARP next to the first, logs
// "in use" and keeps running, so the wait for its exit times out.
func TestSecondNodeRefuses(t *testing.T) {
	bin := rootBinary(t)
	a, b := netns.New(t, "dupa"), netns.New(t, "dupb")
	va, vb := netns.VethPair(t, a, b)
	a.MustExec("ip", "addr", "add", "172.16.20.20/24", "dev", va)
	conf := fmt.Sprintf("link add %s type afpacket\naddr add 172.16.20.21/24 dev %s\n", vb, vb)
	first := startLSR(t, bin, b, conf)
	const metricsAddr = "127.0.0.1:9477"
	// The first node's metrics: a second node started with the first's
	// arguments plus metrics is the same node for this test's purpose; a
	// plain listener in the first process's place would hide the pid, so
	// restart the first with metrics on.
	if err := first.stop(); err != nil {
		t.Fatalf("first node: %v", err)
	}
	first.extra = []string{"--metrics-addr", metricsAddr}
	first.start()
	if err := knock(a, "172.16.20.21:9"); err != nil {
		t.Fatalf("the first node does not answer: %v", err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"same control socket", []string{"--control-socket", first.sock},
			fmt.Sprintf("control socket %s is in use by pid %d", first.sock, first.pid())},
		{"same metrics address", []string{"--control-socket", filepath.Join(dir, "other.sock"), "--metrics-addr", metricsAddr},
			fmt.Sprintf("metrics address %s is in use by pid %d", metricsAddr, first.pid())},
		{"same link only", []string{"--control-socket", filepath.Join(dir, "third.sock")},
			fmt.Sprintf("link %s is in use by pid %d", vb, first.pid())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pcapFile := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".pcap")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			args := append([]string{"netns", "exec", b.Name(), bin, "run", "-c", first.conf, "--pcap", pcapFile}, tc.args...)
			cmd := exec.CommandContext(ctx, "ip", args...)
			var logs lockedBuffer
			cmd.Stderr = &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// Traffic for the node while the second one lives.
			var knockErr error
			for range 3 {
				if err := knock(a, "172.16.20.21:9"); err != nil {
					knockErr = err
				}
				time.Sleep(200 * time.Millisecond)
			}
			err := <-done
			if cmd.ProcessState.ExitCode() != exitFailure || !strings.Contains(logs.String(), tc.want) {
				t.Errorf("second node: %v (exit code %d)\n%s\nwant exit code 1 and %q", err, cmd.ProcessState.ExitCode(), logs.String(), tc.want)
			}
			if strings.Contains(logs.String(), "node started") {
				t.Errorf("the second node opened its links:\n%s", logs.String())
			}
			if fi, err := os.Stat(pcapFile); err == nil {
				t.Errorf("the second node created its capture (%d bytes): it opened the links", fi.Size())
			}
			if knockErr != nil {
				t.Errorf("the first node during the second's start: %v", knockErr)
			}
		})
	}
	// The first node is unharmed: its control socket answers.
	if _, err := first.report(); err != nil {
		t.Errorf("first node after the refusals: %v", err)
	}
}

// knock connects from the kernel in ns to addr, a closed port of a node:
// the node's stack answers the ARP request and then the SYN with a reset.
// It returns nil on that answer (connection refused).
func knock(ns *netns.NS, addr string) error {
	return ns.Run(func() error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
			return fmt.Errorf("%s accepted a connection; want a reset", addr)
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		return err
	})
}

// pcapPair skips t unless it runs as root with tshark installed, builds
// the binary and joins two namespaces by a veth: prefix+"a", whose kernel
// has 172.16.20.20/24 (it knocks), and prefix+"b", for a node whose config
// (returned) puts 172.16.20.21/24 on its one link vb.
func pcapPair(t *testing.T, prefix string) (bin string, a, b *netns.NS, vb, conf string) {
	t.Helper()
	netns.SkipUnlessRoot(t)
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("needs tshark")
	}
	bin = buildBinary(t)
	a, b = netns.New(t, prefix+"a"), netns.New(t, prefix+"b")
	va, vb := netns.VethPair(t, a, b)
	a.MustExec("ip", "addr", "add", "172.16.20.20/24", "dev", va)
	return bin, a, b, vb, fmt.Sprintf("link add %s type afpacket\naddr add 172.16.20.21/24 dev %s\n", vb, vb)
}

// TestPcapReaderExits runs a node with `--pcap -,DEV -s 96` piped into
// `tshark -r - -c 6` (the reader stops after 6 frames) while the kernel
// next to it keeps connecting to a closed port of the node (ARP, SYN,
// RST). tshark must read 6 frames of the named interface, cut to 96
// bytes; the node must then log that the capture stopped, keep answering,
// serve its control socket, and exit 0 on SIGTERM. Planted bug (SIGPIPE
// not ignored): the runtime kills the node on its first write to the
// closed pipe, so the knocks after tshark exits go unanswered and the
// exit status is "signal: broken pipe".
func TestPcapReaderExits(t *testing.T) {
	bin, a, b, vb, text := pcapPair(t, "pip")
	dir := t.TempDir()
	conf, sock := writeFile(t, dir, "n.conf", text), filepath.Join(dir, "n.sock")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	node := exec.Command("ip", "netns", "exec", b.Name(), bin, "run", "-c", conf, "--control-socket", sock,
		"--log-format", "json", "--pcap", "-,"+vb, "-s", "96")
	var logs lockedBuffer
	node.Stdout, node.Stderr = pw, &logs
	reader := exec.Command("tshark", "-r", "-", "-c", "6", "-T", "fields", "-e", "frame.interface_name", "-e", "frame.cap_len")
	var readerOut, readerErr lockedBuffer
	reader.Stdin, reader.Stdout, reader.Stderr = pr, &readerOut, &readerErr
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range []*exec.Cmd{node, reader} {
			if c.Process != nil && c.ProcessState == nil {
				c.Process.Kill()
				c.Wait()
			}
		}
	})
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	pw.Close()
	nodeDone := make(chan error, 1)
	go func() { nodeDone <- node.Wait() }()
	readerDone := make(chan error, 1)
	go func() { readerDone <- reader.Wait() }()
	waitFor(t, &logs, startedMsg)

	// Knock until tshark has its 6 frames and exits.
	deadline := time.After(30 * time.Second)
wait:
	for {
		select {
		case err := <-readerDone:
			if err != nil {
				t.Fatalf("tshark: %v\n%s", err, readerErr.String())
			}
			break wait
		case err := <-nodeDone:
			t.Fatalf("the node exited while tshark read: %v\n%s", err, logs.String())
		case <-deadline:
			t.Fatalf("tshark did not get 6 frames within 30s; it read:\n%s\nnode log:\n%s", readerOut.String(), logs.String())
		default:
		}
		_ = knock(a, "172.16.20.21:9")
		time.Sleep(100 * time.Millisecond)
	}
	rows := strings.Split(strings.TrimSpace(readerOut.String()), "\n")
	if len(rows) != 6 {
		t.Errorf("tshark read %d frames, want 6:\n%s", len(rows), readerOut.String())
	}
	for _, r := range rows {
		f := strings.Split(r, "\t")
		if len(f) != 2 || f[0] != vb {
			t.Errorf("frame %q: want it on interface %s", r, vb)
		} else if n, _ := strconv.Atoi(f[1]); n < 42 || n > 96 {
			t.Errorf("frame %q: captured length out of 42..96 (-s 96)", r)
		}
	}
	// The reader is gone; the node writes to a closed pipe within 200 ms
	// of the next frame.
	stopped := `"msg":"capture stopped; the node keeps running"`
	for i := 0; !strings.Contains(logs.String(), stopped); i++ {
		if i == 100 {
			t.Fatalf("no %s within 100 knocks; node log:\n%s", stopped, logs.String())
		}
		select {
		case err := <-nodeDone:
			t.Fatalf("the node exited after its reader: %v\n%s", err, logs.String())
		default:
		}
		_ = knock(a, "172.16.20.21:9")
		time.Sleep(100 * time.Millisecond)
	}
	if err := knock(a, "172.16.20.21:9"); err != nil {
		t.Errorf("the node does not answer after its capture stopped: %v", err)
	}
	if out, err := exec.Command(bin, "stats", "--socket", sock).CombinedOutput(); err != nil {
		t.Errorf("mplsnode stats after the capture stopped: %v\n%s", err, out)
	}
	node.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-nodeDone:
		if err != nil {
			t.Errorf("node after SIGTERM: %v (want exit 0)\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the node did not exit within 20s of SIGTERM")
	}
}

// TestPcapRotation runs a node with `--pcap FILE -C 0.002 -W 3` (files of
// ~2000 bytes, three kept) while the kernel next to it connects to it:
// once the node stops, FILE0, FILE1 and FILE2 exist (and no FILE3), and
// tshark reads each on its own with the link's name on every frame.
// Planted bug (-W ignored): FILE3 and more appear.
func TestPcapRotation(t *testing.T) {
	bin, a, b, vb, conf := pcapPair(t, "rot")
	p := startLSR(t, bin, b, conf)
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cap.pcapng")
	p.extra = []string{"--pcap", file, "-C", "0.002", "-W", "3"}
	p.start()
	// 40 knocks: ~80 frames of 60-74 bytes, ~8 kB: four or more files' worth.
	for range 40 {
		if err := knock(a, "172.16.20.21:9"); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.stop(); err != nil {
		t.Fatalf("node: %v\n%s", err, p.logs.String())
	}
	for i := range 4 {
		name := fmt.Sprintf("%s%d", file, i)
		_, err := os.Stat(name)
		if i == 3 {
			if err == nil {
				t.Errorf("%s exists: -W 3 keeps three files", name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v\nnode log:\n%s", err, p.logs.String())
		}
		out, err := exec.Command("tshark", "-r", name, "-T", "fields", "-e", "frame.interface_name").Output()
		if err != nil {
			t.Fatalf("tshark -r %s: %v", name, err)
		}
		names := strings.Fields(string(out))
		if len(names) == 0 || strings.Count(string(out), vb) != len(names) {
			t.Errorf("%s: interfaces %q; want frames, each on %s", name, names, vb)
		}
	}
	if !strings.Contains(p.logs.String(), `"files":`) {
		t.Errorf("the node's log does not count the capture's files:\n%s", p.logs.String())
	}
}

// openToAll makes dir (mode perm) and its parents up to the temporary
// directory root searchable by every user, for a process run as another
// user.
func openToAll(t *testing.T, dir string, perm os.FileMode) {
	t.Helper()
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
	root := filepath.Clean(os.TempDir())
	for d := filepath.Dir(dir); strings.HasPrefix(d, root+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// capNetAdmin and capNetRaw are the capability bits (linux/capability.h).
const (
	capNetAdmin = 12
	capNetRaw   = 13
)

// TestSeedNonRoot runs the seed topology's LSR as dist/systemd's unit
// runs it: user nobody, no supplementary groups, and exactly
// CAP_NET_RAW and CAP_NET_ADMIN (ambient, bounding set cut to them, no
// new privileges) by setpriv from util-linux; its control socket lives in
// a directory it may write, as RuntimeDirectory= gives it. The process's
// /proc status must show uid 65534 and CapEff = CapPrm = those two bits;
// 8 MiB must cross the LSP intact and `mplsnode stats` must read its
// counters. Planted bug: without --ambient-caps the node cannot open its
// AF_PACKET sockets (EPERM) and never starts.
func TestSeedNonRoot(t *testing.T) {
	netns.SkipUnlessRoot(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	// The capabilities the unit grants, as setpriv words.
	var caps []string
	for _, c := range strings.Fields(unitValue(t, "AmbientCapabilities")) {
		caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	if got := strings.Join(caps, ","); got != "+net_raw,+net_admin" {
		t.Fatalf("the unit grants %s; this test checks CAP_NET_RAW and CAP_NET_ADMIN", got)
	}
	if unitValue(t, "NoNewPrivileges") != "yes" || unitValue(t, "DynamicUser") != "yes" {
		t.Fatalf("the unit does not set NoNewPrivileges=yes and DynamicUser=yes")
	}
	set := "-all," + strings.Join(caps, ",")
	bin := buildBinary(t)
	openToAll(t, filepath.Dir(bin), 0o755)
	wrap := []string{setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
		"--inh-caps=" + set, "--ambient-caps=" + set, "--bounding-set=" + set, "--no-new-privs"}
	s := newSeedProc(t, bin, "nr", seedOptions{wrap: wrap})

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.lsr.pid()))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Uid:":        "65534",
		"CapEff:":     fmt.Sprintf("%016x", 1<<capNetAdmin|1<<capNetRaw),
		"CapPrm:":     fmt.Sprintf("%016x", 1<<capNetAdmin|1<<capNetRaw),
		"CapBnd:":     fmt.Sprintf("%016x", 1<<capNetAdmin|1<<capNetRaw),
		"NoNewPrivs:": "1",
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && want[f[0]] != "" {
			if f[1] != want[f[0]] {
				t.Errorf("LSR %s %s, want %s", f[0], f[1], want[f[0]])
			}
			delete(want, f[0])
		}
	}
	if len(want) > 0 {
		t.Errorf("/proc status lacks %v", want)
	}
	const size = 8 << 20
	el := s.transfer(t, size, time.Minute, nil)
	t.Logf("8 MiB through the LSR run as nobody with CAP_NET_RAW+CAP_NET_ADMIN: %v", el)
	if r := s.lsr.mustReport(); ilmHits(r) < size/1500 {
		t.Errorf("LSR ILM hits %d, want at least %d", ilmHits(r), size/1500)
	}
	if err := s.lsr.stop(); err != nil {
		t.Errorf("LSR after SIGTERM: %v\n%s", err, s.lsr.logs.String())
	}
}

// unitFile is the systemd unit the service tests check.
const unitFile = "../../dist/systemd/mplsnode@.service"

// unitValue returns the value of the unit's key= line ("" if absent).
func unitValue(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestSystemdUnit has systemd-analyze verify the unit (with the binary's
// path pointing at an executable file, as an installed one would be) and
// checks that it runs `mplsnode run` with its control socket in its
// RuntimeDirectory. Planted bug: a misspelt directive (AmbientCapabilites)
// makes systemd-analyze report "Unknown key name".
//
// verify only checks that ExecStart's program is an executable file; it
// never runs it. The test binary stands in for mplsnode: no go build here.
// A build would be almost all of this test's time, and a run of the package without
// -timeout (go test's default 10 minutes: scripts/mutate.sh, a plain `go
// test ./cmd/mplsnode`) once ran out while this test sat in that build:
// the panic named TestSystemdUnit, which looked like a test catching a
// planted bug in node/xdp.go it has nothing to do with. In itself it
// passed 20 runs in 20 (-count=20, as root).
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("needs systemd-analyze")
	}
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "mplsnode@ns1.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/mplsnode", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", unit).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	dir := unitValue(t, "RuntimeDirectory")
	if start := unitValue(t, "ExecStart"); dir == "" || !strings.Contains(start, " run ") ||
		!strings.Contains(start, "--control-socket /run/"+dir+"/") {
		t.Errorf("ExecStart=%s; want mplsnode run with --control-socket in /run/%s (RuntimeDirectory)", start, dir)
	}
}
