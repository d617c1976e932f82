// Command routescale measures how a node's start scales with its route
// count: for 10k, 100k and 1M routes (IPv4 /24 and /32, IPv6 /48 and /64,
// a quarter labelled, some multipath) it writes a config file, starts a
// node from it in a fresh child process (config parse, checks, stack and
// FIB build, over in-memory links: no namespaces needed) and prints the
// load time, the child's peak RSS, the FIB lookup time (one address at a
// time, and in batches of 32 with LookupBatch; the thread's CPU time, so
// that other load on the machine does not count), the size of gVisor's
// own route table, and the time and peak RSS of a reload of the same file
// (SIGHUP):
//
//	go run ./bench/cmd/routescale [-counts 10000,100000,1000000]
//
// make bench runs it after the seed benchmark.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/node"
)

func main() {
	counts := flag.String("counts", "10000,100000,1000000", "comma-separated route counts")
	load := flag.String("load", "", "internal: load `FILE` in this process and print one result line")
	write := flag.String("write", "", "only write the config of the first count to `FILE`")
	cpuProfile := flag.String("cpuprofile", "", "with -load: write a CPU profile of the load to `FILE`")
	flag.Parse()
	if *load != "" && *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			pprof.StartCPUProfile(f)
		}
	}
	if *write != "" {
		n, _ := strconv.Atoi(strings.Split(*counts, ",")[0])
		if _, err := writeConfig(*write, n); err != nil {
			fmt.Fprintln(os.Stderr, "routescale:", err)
			os.Exit(1)
		}
		return
	}
	if *load != "" {
		if err := loadOne(*load); err != nil {
			fmt.Fprintln(os.Stderr, "routescale:", err)
			os.Exit(1)
		}
		return
	}
	dir, err := os.MkdirTemp("", "routescale")
	if err != nil {
		fmt.Fprintln(os.Stderr, "routescale:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "routescale:", err)
		os.Exit(1)
	}
	fmt.Println("## Route scaling (config parse + checks + stack/FIB build, one process per count)")
	fmt.Println()
	fmt.Println("| routes | file MiB | load s | peak RSS MiB | FIB lookup ns (IPv4/IPv6) | batched lookup ns (IPv4/IPv6) | gVisor routes | reload s | peak RSS with reload MiB |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "routescale: bad count %q\n", s)
			os.Exit(2)
		}
		path := filepath.Join(dir, fmt.Sprintf("routes-%d.conf", n))
		size, err := writeConfig(path, n)
		if err != nil {
			fmt.Fprintln(os.Stderr, "routescale:", err)
			os.Exit(1)
		}
		cmd := exec.Command(self, "-load", path)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "routescale: %d routes: %v\n", n, err)
			os.Exit(1)
		}
		fmt.Printf("| %d | %.1f | %s\n", n, float64(size)/(1<<20), strings.TrimSpace(string(out)))
		os.Remove(path)
	}
}

// writeConfig writes a node config with n routes: the seed's two links,
// then IPv4 /24 and /32 and IPv6 /48 and /64 routes in turn, every fourth
// labelled, one in a hundred over two next hops.
func writeConfig(path string, n int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprint(w, `link add virt01 type afpacket
link add virt02 type afpacket
addr add 172.16.20.20/24 dev virt01
addr add 2001:db8:ffff::20/64 dev virt01
addr add 172.16.30.20/24 dev virt02
sysctl net.ipv4.ip_forward=1
sysctl net.ipv6.conf.all.forwarding=1
`)
	for i := range n {
		p := mplstest.ScalePrefix(i)
		v6 := p.Addr().Is6()
		switch {
		case i%100 == 99 && !v6:
			fmt.Fprintf(w, "route add %s nexthop via 172.16.20.21 nexthop encap mpls %d via 172.16.30.21\n", p, 16+i%5000)
		case i%4 == 0 || i%4 == 3 && i%8 == 3:
			// Labelled: IPv4 over 172.16.20.21; IPv6 over the same IPv4
			// next hop (6PE) every other time.
			via := "172.16.20.21"
			if v6 && i%16 != 3 {
				via = "2001:db8:ffff::21"
			}
			fmt.Fprintf(w, "route add %s encap mpls %d via %s\n", p, 16+i%5000, via)
		case v6:
			fmt.Fprintf(w, "route add %s via 2001:db8:ffff::21\n", p)
		default:
			fmt.Fprintf(w, "route add %s via 172.16.20.21\n", p)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, err
	}
	return st.Size(), f.Close()
}

// loadOne starts a node from path over channel endpoints, looks up, and
// reloads it, printing the rest of a table row.
func loadOne(path string) error {
	// As mplsnode run does while it loads (cmd/mplsnode, loadGCPercent).
	debug.SetGCPercent(10)
	start := time.Now()
	cfg, err := config.ParseFile(path)
	if err != nil {
		return err
	}
	eps := map[string]gstack.LinkEndpoint{}
	for _, l := range cfg.Links {
		eps[l.Name] = channel.New(64, 1500, "\x02\x00\x00\x00\x00\x01")
	}
	n, err := node.New(cfg, node.Options{Endpoints: eps, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	debug.SetGCPercent(100)
	pprof.StopCPUProfile()
	if mp := os.Getenv("ROUTESCALE_MEMPROFILE"); mp != "" {
		if f, err := os.Create(mp); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	defer n.Close()
	fib := n.Stack().Tables().FIB()
	v4, v6 := sampleAddrs(fib, 1<<16)
	// Lookups are timed in the thread's CPU time: a lookup never blocks,
	// and time the thread spends descheduled is other load's.
	runtime.LockOSThread()
	l4, l6 := lookupNanos(fib, v4), lookupNanos(fib, v6)
	b4, b6 := batchLookupNanos(fib, v4), batchLookupNanos(fib, v6)
	runtime.UnlockOSThread()
	rss := peakRSSMiB()
	// A reload of the same file (SIGHUP), as mplsnode run does it.
	debug.SetGCPercent(10)
	start = time.Now()
	cfg, err = config.ParseFile(path)
	if err == nil {
		err = n.Reload(cfg)
	}
	reload := time.Since(start)
	debug.SetGCPercent(100)
	if err != nil {
		return err
	}
	fmt.Printf("%.2f | %.0f | %.1f / %.1f | %.1f / %.1f | %d | %.2f | %.0f |\n", elapsed.Seconds(), rss, l4, l6, b4, b6, n.Stack().GVisorRouteCount(), reload.Seconds(), peakRSSMiB())
	return nil
}

// sampleAddrs returns n IPv4 and n IPv6 addresses inside random routes of
// fib (random host bits), from a fixed seed.
func sampleAddrs(fib *mpls.FIB, n int) (v4, v6 []netip.Addr) {
	rng := rand.New(rand.NewPCG(1, 2))
	for len(v4) < n || len(v6) < n {
		p := fib.Entry(rng.IntN(fib.Len())).Prefix
		b := p.Addr().AsSlice()
		for i := p.Bits(); i < len(b)*8; i++ {
			if rng.IntN(2) == 1 {
				b[i/8] |= 0x80 >> (i % 8)
			}
		}
		a, _ := netip.AddrFromSlice(b)
		if a.Is4() && len(v4) < n {
			v4 = append(v4, a)
		} else if a.Is6() && len(v6) < n {
			v6 = append(v6, a)
		}
	}
	return v4, v6
}

// lookupRounds is how often each address is looked up.
const lookupRounds = 30

// lookupNanos returns the thread CPU nanoseconds one Lookup of addrs takes
// (0 when none is found: the numbers would mean nothing).
func lookupNanos(fib *mpls.FIB, addrs []netip.Addr) float64 {
	t := threadCPU()
	hits := 0
	for range lookupRounds {
		for _, a := range addrs {
			if _, ok := fib.Lookup(a); ok {
				hits++
			}
		}
	}
	if hits == 0 {
		return 0
	}
	return float64(threadCPU()-t) / float64(lookupRounds*len(addrs))
}

// batchLookupNanos is lookupNanos for LookupBatch, 32 addresses a call.
func batchLookupNanos(fib *mpls.FIB, addrs []netip.Addr) float64 {
	out := make([]*mpls.FIBEntry, 32)
	t := threadCPU()
	hits := 0
	for range lookupRounds {
		for i := 0; i+len(out) <= len(addrs); i += len(out) {
			fib.LookupBatch(addrs[i:i+len(out)], out)
			if out[0] != nil {
				hits++
			}
		}
	}
	if hits == 0 {
		return 0
	}
	return float64(threadCPU()-t) / float64(lookupRounds*len(addrs))
}

// threadCPU returns the calling thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return time.Now().UnixNano()
	}
	return ts.Nano()
}

// peakRSSMiB reads VmHWM (the peak resident set) from /proc/self/status.
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}
