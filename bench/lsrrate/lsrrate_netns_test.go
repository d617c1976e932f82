package lsrrate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// skipUnlessRoot skips tests that build namespaces when they cannot.
func skipUnlessRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces: run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("needs the ip tool from iproute2 in PATH")
	}
}

// buildMPLSNode builds cmd/mplsnode into a temporary directory.
func buildMPLSNode(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "mplsnode")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/mplsnode/mplsnode/cmd/mplsnode").CombinedOutput()
	if err != nil {
		tb.Fatalf("go build ./cmd/mplsnode: %v\n%s", err, out)
	}
	return bin
}

// logWriter sends progress lines to the test log.
type logWriter struct{ tb testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// ourNamespaces lists the namespaces this process made that still exist.
func ourNamespaces(tb testing.TB) []string {
	tb.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		tb.Fatalf("ip netns list: %v: %s", err, out)
	}
	pid := strconv.FormatUint(uint64(os.Getpid()), 36)
	var ours []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && strings.HasPrefix(f[0], "mn-lr") && strings.Contains(f[0], pid+"x") {
			ours = append(ours, f[0])
		}
	}
	return ours
}

// TestRunForwards runs both configurations for a second at 64 and 1500
// bytes and checks that frames arrived, that the counted frames are the
// forwarded ones (tshark decodes the frames read back from the sink: label
// 200, S=1, label TTL 63 for mplsnode; IPv4 TTL 63 for the kernel) and that
// nothing is left behind.
func TestRunForwards(t *testing.T) {
	skipUnlessRoot(t)
	bin := buildMPLSNode(t)
	var mu sync.Mutex
	samples := map[string][][]byte{}
	sinkRX := map[string]uint64{}
	key := func(cfg string, size int) string { return fmt.Sprintf("%s/%d", cfg, size) }
	h := hooks{
		samples: func(cfg string, size int, f [][]byte) {
			mu.Lock()
			defer mu.Unlock()
			samples[key(cfg, size)] = f
		},
		sinkRX: func(cfg string, size int, rx uint64) {
			mu.Lock()
			defer mu.Unlock()
			sinkRX[key(cfg, size)] = rx
		},
	}
	rs, err := run(context.Background(), Options{Bin: bin, Seconds: 1, FrameSizes: []int{64, 1500}, Progress: logWriter{t}}, h)
	if left := ourNamespaces(t); len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
	if err != nil {
		t.Fatal(err)
	}
	type cs struct {
		config string
		size   int
	}
	var want []cs
	for _, c := range Configs() { // mplsnode-swap@kernel-pps last
		want = append(want, cs{c, 64}, cs{c, 1500})
	}
	if len(rs) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(rs), len(want), rs)
	}
	for i, r := range rs {
		k := key(r.Config, r.FrameSize)
		t.Logf("%s: %+v", k, r)
		if r.Config != want[i].config || r.FrameSize != want[i].size {
			t.Errorf("result %d is %s, want %s/%d", i, k, want[i].config, want[i].size)
		}
		if r.Frames == 0 || r.PPS <= 0 {
			t.Errorf("%s: got Frames = %d, PPS = %v, want > 0", k, r.Frames, r.PPS)
		}
		if r.Sent < r.Frames {
			t.Errorf("%s: got Sent = %d < Frames = %d", k, r.Sent, r.Frames)
		}
		if rx := sinkRX[k]; r.Frames > rx {
			t.Errorf("%s: counted %d frames but the sink interface received only %d", k, r.Frames, rx)
		}
		if r.CPUSecondsPerMpkt <= 0 {
			t.Errorf("%s: got CPUSecondsPerMpkt = %v, want > 0", k, r.CPUSecondsPerMpkt)
		}
		fs := samples[k]
		if len(fs) == 0 {
			t.Errorf("%s: no frame read back from the sink", k)
			continue
		}
		// frame.cap_len is the sample length; ip.len tells the frame size.
		rows := tsharkRows(t, fs, "eth.dst", "mpls.label", "mpls.bottom", "mpls.ttl", "ip.ttl", "ip.dst", "ip.checksum.status", "ip.len")
		ipLen := r.FrameSize - ethLen
		wantRow := fmt.Sprintf("%s\t\t\t\t63\t%s\t1\t%d", macString(sinkMAC), dstIP, ipLen)
		if r.Config != ConfigKernel {
			// The uniform TTL model leaves the IP TTL alone on a swap.
			wantRow = fmt.Sprintf("%s\t%d\t1\t63\t64\t%s\t1\t%d", macString(sinkMAC), outLabel, dstIP, ipLen-labelLen)
		}
		for j, row := range rows {
			if row != wantRow {
				t.Errorf("%s: sink frame %d decoded by tshark: got %q, want %q (eth.dst mpls.label mpls.bottom mpls.ttl ip.ttl ip.dst ip.checksum.status ip.len)", k, j, row, wantRow)
			}
		}
	}
}

// TestRunCancelled cancels a long run during its first measurement: Run must
// return the context's error and remove everything it made.
func TestRunCancelled(t *testing.T) {
	skipUnlessRoot(t)
	bin := buildMPLSNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var measuring atomic.Bool
	pw := progressFunc(func(line string) {
		t.Log(line)
		// The first line of a measurement's setup is the mplsnode start.
		if strings.Contains(line, "starting") && measuring.CompareAndSwap(false, true) {
			time.AfterFunc(3*time.Second, cancel)
		}
	})
	_, err := Run(ctx, Options{Bin: bin, Seconds: 600, FrameSizes: []int{64}, Progress: pw})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got err = %v, want context.Canceled", err)
	}
	if left := ourNamespaces(t); len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
}

// progressFunc is an io.Writer calling f with each line.
type progressFunc func(line string)

func (f progressFunc) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		f(l)
	}
	return len(p), nil
}

// TestOptionsErrors checks that bad options are refused before anything
// is built, with the reason.
func TestOptionsErrors(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no bin", Options{}, "Options.Bin is empty"},
		{"missing bin", Options{Bin: "/nonexistent/mplsnode"}, "no such file"},
		{"dir bin", Options{Bin: t.TempDir()}, "not an executable"},
		{"negative seconds", Options{Bin: exe, Seconds: -1}, "Seconds -1"},
		{"small frame", Options{Bin: exe, FrameSizes: []int{64, 59}}, "frame size 59"},
		{"big frame", Options{Bin: exe, FrameSizes: []int{1515}}, "frame size 1515"},
		{"generator CPU", Options{Bin: exe, GenCPUs: []int{0, maxCPU - 1}}, fmt.Sprintf("GenCPUs (-gen-cpus): CPU %d is not one this process may run on", maxCPU-1)},
		{"forwarder nice", Options{Bin: exe, FwdNice: -21}, "FwdNice -21: want -20..19"},
		{"forwarder CPU", Options{Bin: exe, FwdCPUs: []int{maxCPU - 1}}, fmt.Sprintf("FwdCPUs (-fwd-cpus): CPU %d is not one this process may run on", maxCPU-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestRunPinned runs mplsnode-swap for a short measurement with the
// generator on the first CPU this process may use and the forwarder on
// the last (-gen-cpus, -fwd-cpus) at nice -5 (-fwd-nice), and a link
// option (-link-words): the mplsnode process may run only on its CPU
// (Cpus_allowed_list in /proc/PID/status, read while it runs) and runs at
// nice -5 (/proc/PID/stat), the generator line names one
// thread on the first CPU and the forwarder's CPU, and the LSR's links
// got the receive ring asked for. Planted bugs: startMPLSNode ignoring
// setup.cpus (the process may run on 0-1) or setup.nice (nice 0),
// openGenerator not passing GenCPUs (2 threads on CPUs 0-1).
func TestRunPinned(t *testing.T) {
	skipUnlessRoot(t)
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	gen, fwd := allowed[:1], allowed[len(allowed)-1:]
	bin := buildMPLSNode(t)
	var mu sync.Mutex
	cpusAllowed := map[string]string{}
	nice := map[string]string{}
	h := hooks{nodeStarted: func(cfg string, pid int) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		mu.Lock()
		defer mu.Unlock()
		// proc(5): field 19 is nice; the fields after the command name
		// (in parentheses) start at field 3.
		if i := strings.LastIndexByte(string(st), ')'); i >= 0 {
			if f := strings.Fields(string(st[i+1:])); len(f) > 19-3 {
				nice[cfg] = f[19-3]
			}
		}
		if err != nil {
			cpusAllowed[cfg] = err.Error()
			return
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				cpusAllowed[cfg] = strings.TrimSpace(v)
			}
		}
	}}
	var lines []string
	pw := progressFunc(func(line string) {
		t.Log(line)
		mu.Lock()
		lines = append(lines, line)
		mu.Unlock()
	})
	rs, err := run(context.Background(), Options{Bin: bin, Seconds: 0.3, FrameSizes: []int{64}, Configs: []string{ConfigMPLSNode},
		GenCPUs: gen, FwdCPUs: fwd, FwdNice: -5, LinkWords: "rx-ring-frames 4096", Progress: pw}, h)
	if left := ourNamespaces(t); len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Frames == 0 {
		t.Errorf("got results %+v, want one with frames", rs)
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := cpusAllowed[ConfigMPLSNode], cpuListString(fwd); got != want {
		t.Errorf("mplsnode's Cpus_allowed_list: got %q, want %q", got, want)
	}
	if got := nice[ConfigMPLSNode]; got != "-5" {
		t.Errorf("mplsnode's nice value: got %q, want -5", got)
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		fmt.Sprintf("1 threads on CPUs %d,", gen[0]),
		fmt.Sprintf("userspace forwarder on CPUs %d (taskset), at nice -5", fwd[0]),
		"(rx ring 4096 slots)",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("progress lines do not say %q", want)
		}
	}
}
