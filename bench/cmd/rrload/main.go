// Command rrload measures TCP_RR against `mplsnode netserver --config`
// (the userspace stack) while six bulk flows load it, against the same on
// `mplsnode netserver --kernel` (kernel sockets), against the target "TCP_RR
// on the --config server under 6 parallel streams >= 0.5 x the same on
// --kernel".
//
// It builds four namespaces: kernel netperf clients in ns0, the kernel
// forwarding in ns1, and behind it side by side the --config server (its
// AF_PACKET link on a veth to ns1) and the --kernel server. Each round, for
// each server in turn (the order alternates), it starts 3 TCP_STREAM and 3
// TCP_MAERTS, waits a second for them to reach their windows, and measures
// one TCP_RR; it prints each round, the medians and their ratio with the
// target line:
//
//	go run ./bench/cmd/rrload [-bin bin/mplsnode] [-rounds 3] [-seconds 3]
//
// make bench runs it after the seed benchmark. It needs root; the
// namespaces are removed on every exit, an interrupt included.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "bin/mplsnode", "the mplsnode binary (make build)")
	rounds := flag.Int("rounds", 3, "rounds, each measuring both servers")
	seconds := flag.Int("seconds", 3, "TCP_RR duration of each measurement, in seconds")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: rrload [-bin PATH] [-rounds N] [-seconds S]\n\n")
		fmt.Fprintf(os.Stderr, "TCP_RR against netserver --config and --kernel, each under 3 TCP_STREAM + 3 TCP_MAERTS.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 || *rounds < 1 || *seconds < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "rrload: needs root (it builds network namespaces)")
		os.Exit(2)
	}
	abs, err := filepath.Abs(*bin)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rrload: %v (make build writes bin/mplsnode)\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, abs, *rounds, *seconds); err != nil {
		fmt.Fprintln(os.Stderr, "rrload:", err)
		os.Exit(1)
	}
}

// target is the --config server's TCP_RR under load as a fraction of the
// --kernel server's, at least.
const target = 0.5

// server is one netserver behind ns1.
type server struct {
	name string // "--config" or "--kernel"
	ns   string
	addr string
	cmd  *exec.Cmd
	logs *lockedWriter // its stderr
}

func run(ctx context.Context, bin string, rounds, seconds int) error {
	dir, err := os.MkdirTemp("", "rrload")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	prefix := fmt.Sprintf("mpr%d-", os.Getpid())
	ns0, ns1, nsU, nsK := prefix+"0", prefix+"1", prefix+"u", prefix+"k"
	defer func() {
		for _, ns := range []string{ns0, ns1, nsU, nsK} {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	}()
	if err := buildNamespaces(ctx, ns0, ns1, nsU, nsK); err != nil {
		return err
	}
	conf := filepath.Join(dir, "u.conf")
	if err := os.WriteFile(conf, []byte("link add vu1 type afpacket\naddr add 172.16.21.22/24 dev vu1\nroute add 172.16.20.0/24 via 172.16.21.21\n"), 0o644); err != nil {
		return err
	}
	servers := []*server{
		{name: "--config", ns: nsU, addr: "172.16.21.22"},
		{name: "--kernel", ns: nsK, addr: "172.16.22.22"},
	}
	for _, s := range servers {
		args := []string{"netns", "exec", s.ns, bin, "netserver", "-p", "12865", "-v"}
		if s.name == "--config" {
			args = append(args, "--config", conf)
		} else {
			args = append(args, "--kernel")
		}
		s.logs = new(lockedWriter)
		s.cmd = exec.Command("ip", args...)
		s.cmd.Stderr = s.logs
		if err := s.cmd.Start(); err != nil {
			return err
		}
		defer func() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() }()
	}
	if err := waitListening(ctx, servers); err != nil {
		return err
	}

	return measureRounds(ctx, bin, ns0, servers, rounds, seconds)
}

// buildNamespaces builds the four namespaces: kernel clients in ns0, the
// kernel forwarding in ns1, the --config server's link in nsU, the
// --kernel server in nsK.
func buildNamespaces(ctx context.Context, ns0, ns1, nsU, nsK string) error {
	steps := [][]string{
		{"", "ip", "netns", "add", ns0}, {"", "ip", "netns", "add", ns1},
		{"", "ip", "netns", "add", nsU}, {"", "ip", "netns", "add", nsK},
		{"", "ip", "link", "add", "v01", "netns", ns0, "type", "veth", "peer", "name", "v10", "netns", ns1},
		{"", "ip", "link", "add", "v1u", "netns", ns1, "type", "veth", "peer", "name", "vu1", "netns", nsU},
		{"", "ip", "link", "add", "v1k", "netns", ns1, "type", "veth", "peer", "name", "vk1", "netns", nsK},
		{ns0, "ip", "link", "set", "lo", "up"}, {ns1, "ip", "link", "set", "lo", "up"},
		{nsU, "ip", "link", "set", "lo", "up"}, {nsK, "ip", "link", "set", "lo", "up"},
		{ns0, "ip", "link", "set", "v01", "up"}, {ns1, "ip", "link", "set", "v10", "up"},
		{ns1, "ip", "link", "set", "v1u", "up"}, {nsU, "ip", "link", "set", "vu1", "up"},
		{ns1, "ip", "link", "set", "v1k", "up"}, {nsK, "ip", "link", "set", "vk1", "up"},
		{ns0, "ip", "addr", "add", "172.16.20.20/24", "dev", "v01"},
		{ns0, "ip", "route", "add", "172.16.21.0/24", "via", "172.16.20.21"},
		{ns0, "ip", "route", "add", "172.16.22.0/24", "via", "172.16.20.21"},
		{ns1, "ip", "addr", "add", "172.16.20.21/24", "dev", "v10"},
		{ns1, "ip", "addr", "add", "172.16.21.21/24", "dev", "v1u"},
		{ns1, "ip", "addr", "add", "172.16.22.21/24", "dev", "v1k"},
		{ns1, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{nsK, "ip", "addr", "add", "172.16.22.22/24", "dev", "vk1"},
		{nsK, "ip", "route", "add", "172.16.20.0/24", "via", "172.16.22.21"},
	}
	for _, s := range steps {
		argv := s[1:]
		if s[0] != "" {
			argv = append([]string{"ip", "netns", "exec", s[0]}, argv...)
		}
		if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	return nil
}

// measureRounds measures both servers once a round, alternating which goes
// first, and prints each round, the medians and the target's verdict.
func measureRounds(ctx context.Context, bin, ns0 string, servers []*server, rounds, seconds int) error {
	fmt.Printf("## TCP_RR under load (3 TCP_STREAM + 3 TCP_MAERTS against the same server), %d round(s) x %d s\n\n", rounds, seconds)
	fmt.Println("| round | server | TCP_RR trans/s | bulk Mbit/s (STREAM / MAERTS) |")
	fmt.Println("|---:|---|---:|---|")
	rates := map[string][]float64{}
	for r := 1; r <= rounds; r++ {
		order := servers
		if r%2 == 0 {
			order = []*server{servers[1], servers[0]}
		}
		for _, s := range order {
			rr, stream, maerts, err := measure(ctx, bin, ns0, s, seconds)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w\nserver log:\n%s", r, s.name, err, lastLines(s.logs.String(), 20))
			}
			rates[s.name] = append(rates[s.name], rr)
			fmt.Printf("| %d | netserver %s | %.0f | %.0f / %.0f |\n", r, s.name, rr, stream, maerts)
		}
	}
	u, k := median(rates["--config"]), median(rates["--kernel"])
	ratio := u / k
	mark, verdict := "[ ]", "NOT met"
	if ratio >= target {
		mark, verdict = "[x]", "met"
	}
	fmt.Printf("\nMedians: --config %.0f, --kernel %.0f transactions/s; per round:", u, k)
	for i := range rates["--config"] {
		fmt.Printf(" %.2f", rates["--config"][i]/rates["--kernel"][i])
	}
	fmt.Printf("\n\n- %s TCP_RR on netserver --config under 6 bulk flows / the same on --kernel = %.2f (want >= %.1f): %s\n", mark, ratio, target, verdict)
	return nil
}

// measure runs the six bulk flows and one TCP_RR against s and returns the
// RR's transactions a second and the bulk flows' summed Mbit/s each way.
func measure(ctx context.Context, bin, ns0 string, s *server, seconds int) (rr, stream, maerts float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+60)*time.Second)
	defer cancel()
	netperf := func(args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns0, bin, "netperf", "--kernel", "-H", s.addr, "-P", "0"}, args...)...)
	}
	bulkSeconds := strconv.Itoa(seconds + 3)
	type flow struct {
		test string
		cmd  *exec.Cmd
		out  strings.Builder
	}
	var flows []*flow
	for _, test := range []string{"TCP_STREAM", "TCP_MAERTS", "TCP_STREAM", "TCP_MAERTS", "TCP_STREAM", "TCP_MAERTS"} {
		f := &flow{test: test, cmd: netperf("-t", test, "-l", bulkSeconds, "--", "-k", "THROUGHPUT")}
		f.cmd.Stdout, f.cmd.Stderr = &f.out, &f.out
		if err := f.cmd.Start(); err != nil {
			return 0, 0, 0, err
		}
		flows = append(flows, f)
	}
	defer func() {
		for _, f := range flows {
			if werr := f.cmd.Wait(); werr != nil && err == nil {
				err = fmt.Errorf("%s: %v: %s", f.test, werr, f.out.String())
			}
			v, ok := keyValue(f.out.String(), "THROUGHPUT")
			if !ok && err == nil {
				err = fmt.Errorf("%s printed no THROUGHPUT: %s", f.test, f.out.String())
			}
			if f.test == "TCP_STREAM" {
				stream += v
			} else {
				maerts += v
			}
		}
	}()
	select {
	case <-time.After(time.Second): // the bulk flows reach their windows
	case <-ctx.Done():
		return 0, 0, 0, ctx.Err()
	}
	out, rerr := netperf("-t", "TCP_RR", "-l", strconv.Itoa(seconds), "--", "-k", "THROUGHPUT").CombinedOutput()
	if rerr != nil {
		return 0, 0, 0, fmt.Errorf("TCP_RR: %v: %s", rerr, out)
	}
	v, ok := keyValue(string(out), "THROUGHPUT")
	if !ok || v <= 0 {
		return 0, 0, 0, fmt.Errorf("TCP_RR: no transactions: %s", out)
	}
	return v, 0, 0, nil
}

// keyValue returns the number after "KEY=" on a line of out (netperf -k).
func keyValue(out, key string) (float64, bool) {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+"="); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// waitListening waits until every server logged that it listens.
func waitListening(ctx context.Context, servers []*server) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range servers {
		for !strings.Contains(s.logs.String(), "netserver listening") {
			if time.Now().After(deadline) {
				return fmt.Errorf("netserver %s did not start in 30 s:\n%s", s.name, s.logs.String())
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// lockedWriter is a process's stderr, read while the process writes it.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
