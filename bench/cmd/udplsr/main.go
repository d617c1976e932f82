// Command udplsr measures an mplsnode LSR swapping label 100 to 200
// between two udp links (MPLS in UDP, RFC 7510) next to the Linux kernel
// IP-forwarding the same UDP datagrams, in three network namespaces it
// builds and removes (generator, LSR, sink), and prints datagrams per
// second at the sink and their ratio. It needs root.
//
// The generator (in the generator namespace, one thread) sends datagrams
// to the LSR's udp link with sendmmsg, 64 a call, each an MPLS packet of
// label 100 over an IPv4/UDP packet from one of 64 source ports, of the
// given size (the UDP payload: label and inner packet); the sink counts
// what arrives on its port with recvmmsg. For the kernel the same
// datagrams go to the sink's address, routed by the LSR namespace's
// kernel. Each measurement runs for -seconds after a warm-up second; the
// LSR's and the machine's CPU seconds are printed too.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const usage = `usage: udplsr -bin PATH [-seconds N] [-sizes 64,1400]

Measures datagrams per second through an mplsnode LSR that swaps label 100
to 200 between two udp links (link type udp), next to the kernel
IP-forwarding the same datagrams, on veths between three namespaces it
creates and removes. Needs root.
`

func main() {
	bin := flag.String("bin", "bin/mplsnode", "the mplsnode binary")
	seconds := flag.Int("seconds", 3, "seconds per measurement")
	sizesFlag := flag.String("sizes", "64,1400", "UDP payload sizes (label and inner packet), comma-separated")
	flag.Usage = func() { fmt.Fprint(os.Stderr, usage); flag.PrintDefaults() }
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "udplsr: needs root (network namespaces)")
		os.Exit(2)
	}
	var sizes []int
	for _, f := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 4+28 || n > 1472 {
			fmt.Fprintf(os.Stderr, "udplsr: bad size %q: want 32..1472\n", f)
			os.Exit(2)
		}
		sizes = append(sizes, n)
	}
	t := &topo{prefix: fmt.Sprintf("mpu%d-", os.Getpid())}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; t.close(); os.Exit(1) }()
	err := run(t, *bin, *seconds, sizes)
	t.close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "udplsr:", err)
		os.Exit(1)
	}
}

// Addresses: generator 192.168.80.20 -- 192.168.80.21 LSR 192.168.81.21
// -- 192.168.81.22 sink.
const (
	genIP, lsrInIP   = "192.168.80.20", "192.168.80.21"
	lsrOutIP, sinkIP = "192.168.81.21", "192.168.81.22"
	port             = 6635
)

const lsrConf = `link add mu1 type udp local 192.168.80.21:6635 remote 192.168.80.20:6635
link add mu2 type udp local 192.168.81.21:6635 remote 192.168.81.22:6635
addr add 172.16.30.21/24 dev mu1
addr add 172.16.31.21/24 dev mu2
-f mpls route add 100 as to 200 via inet 172.16.31.22 dev mu2
set forward xdp off
`

type topo struct {
	prefix string
	made   []string
}

func (t *topo) ns(i int) string { return t.prefix + strconv.Itoa(i) }

func sh(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (t *topo) build() error {
	for i := range 3 {
		if err := sh("ip", "netns", "add", t.ns(i)); err != nil {
			return err
		}
		t.made = append(t.made, t.ns(i))
	}
	n0, n1, n2 := t.ns(0), t.ns(1), t.ns(2)
	steps := [][]string{
		{"ip", "-n", n0, "link", "set", "lo", "up"}, {"ip", "-n", n1, "link", "set", "lo", "up"}, {"ip", "-n", n2, "link", "set", "lo", "up"},
		{"ip", "link", "add", "ug01", "netns", n0, "type", "veth", "peer", "name", "ug10", "netns", n1},
		{"ip", "link", "add", "ug12", "netns", n1, "type", "veth", "peer", "name", "ug21", "netns", n2},
		{"ip", "-n", n0, "link", "set", "ug01", "up"}, {"ip", "-n", n1, "link", "set", "ug10", "up"},
		{"ip", "-n", n1, "link", "set", "ug12", "up"}, {"ip", "-n", n2, "link", "set", "ug21", "up"},
		{"ip", "-n", n0, "addr", "add", genIP + "/24", "dev", "ug01"},
		{"ip", "-n", n1, "addr", "add", lsrInIP + "/24", "dev", "ug10"},
		{"ip", "-n", n1, "addr", "add", lsrOutIP + "/24", "dev", "ug12"},
		{"ip", "-n", n2, "addr", "add", sinkIP + "/24", "dev", "ug21"},
		{"ip", "-n", n0, "route", "add", "192.168.81.0/24", "via", lsrInIP},
		{"ip", "-n", n2, "route", "add", "192.168.80.0/24", "via", lsrOutIP},
		{"ip", "netns", "exec", n1, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	}
	for _, s := range steps {
		if err := sh(s...); err != nil {
			return err
		}
	}
	return nil
}

func (t *topo) close() {
	for _, ns := range t.made {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
	t.made = nil
}

// inNS runs f on a thread in namespace ns; sockets f opens stay there.
func inNS(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

// datagram returns label 100 (S, TTL 64) over an IPv4/UDP packet from
// source port sport, size bytes in all.
func datagram(size int, sport uint16) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint32(b, 100<<12|1<<8|64)
	ip := b[4:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 10, 10, 10})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], 9)
	binary.BigEndian.PutUint16(ip[24:], uint16(len(ip)-20))
	return b
}

type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// generate sends datagrams of size to dst from the generator namespace
// until stop is set, and returns how many went.
func generate(ns, dst string, size int, stop *atomic.Bool, sent *atomic.Uint64) error {
	return inNS(ns, func() error {
		c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(genIP), Port: port}, &net.UDPAddr{IP: net.ParseIP(dst), Port: port})
		if err != nil {
			return err
		}
		defer c.Close()
		rc, _ := c.SyscallConn()
		const batch = 64
		msgs := make([]mmsghdr, batch)
		iovs := make([]unix.Iovec, batch)
		for i := range msgs {
			d := datagram(size, uint16(1024+i))
			iovs[i].Base = &d[0]
			iovs[i].SetLen(len(d))
			msgs[i].hdr.Iov = &iovs[i]
			msgs[i].hdr.SetIovlen(1)
		}
		var werr error
		for !stop.Load() {
			err := rc.Write(func(fd uintptr) bool {
				n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&msgs[0])), batch, unix.MSG_DONTWAIT, 0, 0)
				switch e {
				case 0:
					sent.Add(uint64(n))
				case unix.EAGAIN:
					return false
				case unix.ECONNREFUSED, unix.ENOBUFS:
				default:
					werr = e
				}
				return true
			})
			if err != nil || werr != nil {
				return fmt.Errorf("send: %v %v", err, werr)
			}
		}
		return nil
	})
}

// sink counts the datagrams arriving on the sink's port until stop.
func sink(ns string, ready chan<- error, stop *atomic.Bool, got *atomic.Uint64) {
	_ = inNS(ns, func() error {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(sinkIP), Port: port})
		ready <- err
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetReadBuffer(8 << 20)
		rc, _ := c.SyscallConn()
		const batch = 64
		msgs := make([]mmsghdr, batch)
		iovs := make([]unix.Iovec, batch)
		for i := range msgs {
			b := make([]byte, 2048)
			iovs[i].Base = &b[0]
			iovs[i].SetLen(len(b))
			msgs[i].hdr.Iov = &iovs[i]
			msgs[i].hdr.SetIovlen(1)
		}
		for !stop.Load() {
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			rc.Read(func(fd uintptr) bool {
				n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&msgs[0])), batch, unix.MSG_DONTWAIT, 0, 0)
				if e == unix.EAGAIN {
					return false
				}
				if e == 0 {
					got.Add(uint64(n))
				}
				return true
			})
		}
		return nil
	})
}

// cpuBusy returns the machine's busy CPU seconds so far (/proc/stat).
func cpuBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	var busy float64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		busy += n
	}
	return busy / 100
}

type result struct {
	sent, got uint64
	pps       float64
	machine   float64
}

// measure runs the generator against dst and the sink for seconds, after
// a warm-up second.
func measure(t *topo, dst string, size, seconds int) (result, error) {
	var stop, sinkStop atomic.Bool
	var sent, got atomic.Uint64
	ready := make(chan error, 1)
	go sink(t.ns(2), ready, &sinkStop, &got)
	if err := <-ready; err != nil {
		return result{}, err
	}
	gerr := make(chan error, 1)
	go func() { gerr <- generate(t.ns(0), dst, size, &stop, &sent) }()
	time.Sleep(time.Second)
	s0, g0, c0 := sent.Load(), got.Load(), cpuBusy()
	start := time.Now()
	time.Sleep(time.Duration(seconds) * time.Second)
	s1, g1, c1 := sent.Load(), got.Load(), cpuBusy()
	el := time.Since(start).Seconds()
	stop.Store(true)
	err := <-gerr
	sinkStop.Store(true)
	return result{sent: s1 - s0, got: g1 - g0, pps: float64(g1-g0) / el, machine: c1 - c0}, err
}

// procCPU returns a process's user+sys seconds.
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100
}

func run(t *topo, bin string, seconds int, sizes []int) error {
	if err := t.build(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "udplsr")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, "lsr.conf")
	if err := os.WriteFile(conf, []byte(lsrConf), 0o644); err != nil {
		return err
	}
	fmt.Printf("udplsr: %d s per measurement, %d CPUs; datagrams per second at the sink\n", seconds, runtime.NumCPU())
	fmt.Printf("%-22s %6s %12s %12s %12s %14s\n", "forwarder", "size", "sent/s", "pps", "lsr cpu s", "machine cpu s")
	for _, size := range sizes {
		// The kernel: the same datagrams to the sink's address, routed.
		_ = sh("ip", "netns", "exec", t.ns(1), "sysctl", "-qw", "net.ipv4.ip_forward=1")
		k, err := measure(t, sinkIP, size, seconds)
		if err != nil {
			return err
		}
		fmt.Printf("%-22s %6d %12.0f %12.0f %12s %14.2f\n", "kernel-ipfwd", size, float64(k.sent)/float64(seconds), k.pps, "-", k.machine)
		_ = sh("ip", "netns", "exec", t.ns(1), "sysctl", "-qw", "net.ipv4.ip_forward=0")
		lsr := exec.Command("ip", "netns", "exec", t.ns(1), bin, "run", "-c", conf, "--control-socket", filepath.Join(dir, "lsr.sock"), "--log-level", "warn")
		lsr.Stderr = os.Stderr
		if err := lsr.Start(); err != nil {
			return err
		}
		time.Sleep(time.Second)
		c0 := procCPU(lsr.Process.Pid)
		m, err := measure(t, lsrInIP, size, seconds)
		c1 := procCPU(lsr.Process.Pid)
		lsr.Process.Signal(os.Interrupt)
		lsr.Wait()
		if err != nil {
			return err
		}
		fmt.Printf("%-22s %6d %12.0f %12.0f %12.2f %14.2f\n", "mplsnode-udp-swap", size, float64(m.sent)/float64(seconds), m.pps, c1-c0, m.machine)
		ratio := 0.0
		if k.pps > 0 {
			ratio = m.pps / k.pps
		}
		mark := " "
		if ratio >= 1.0 {
			mark = "x"
		}
		fmt.Printf("- [%s] LSR swapping between udp links / kernel IP forwarding, %d B = %.2f (want >= 1.0)\n", mark, size, ratio)
	}
	return nil
}
