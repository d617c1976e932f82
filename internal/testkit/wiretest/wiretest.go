// Package wiretest holds what the forwarding plane's end-to-end tests
// share to put frames on a wire and read them back: frames sent from a
// kernel's end of a veth through an AF_PACKET socket (Inject), taps that
// record what an interface receives from the moment they return (Tap),
// tshark's decode of what they kept (Decode, Wire: checksums verified,
// an MD5 of each frame), and the kernel settings such tests need (GRO on
// veth ends that take XDP redirects, IPv6 off). Only tests import it.
//
// Captures sit where no XDP program runs (a kernel's end of a veth, a
// bridge port, a host node's link): a program on an interface runs before
// the capture taps, and its redirects bypass them.
package wiretest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/link/pcap"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// GROOn turns GRO on at kernel ends of veths: a veth takes frames an XDP
// program redirects into it only while its peer runs NAPI
// (docs/CONFIG.md, set forward xdp). Set in both modes, so that both see
// the same links.
func GROOn(t *testing.T, ns *netns.NS, devs ...string) {
	t.Helper()
	for _, d := range devs {
		ns.MustExec("ethtool", "-K", d, "gro", "on")
	}
}

// MAC returns dev's MAC address in ns.
func MAC(t *testing.T, ns *netns.NS, dev string) net.HardwareAddr {
	t.Helper()
	mac, err := net.ParseMAC(strings.TrimSpace(ns.MustExec("cat", "/sys/class/net/"+dev+"/address")))
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// Inject sends frames, whole Ethernet frames, out of dev in ns through an
// AF_PACKET socket, in order.
func Inject(t *testing.T, ns *netns.NS, dev string, frames [][]byte) {
	t.Helper()
	if err := ns.Run(func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6}
		for i, f := range frames {
			copy(sa.Addr[:], f[:6])
			if err := unix.Sendto(fd, f, 0, sa); err != nil {
				return fmt.Errorf("frame %d: %w", i, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("inject on %s: %v", dev, err)
	}
}

// WireFields are the Decoded fields compared between modes: addresses,
// labels, TTLs, checksums (value and verdict), ICMP, and the MD5 of the
// whole frame.
var WireFields = []string{"frame.len", "eth.src", "eth.dst", "mpls.label", "mpls.exp", "mpls.bottom", "mpls.ttl",
	"ip.src", "ip.dst", "ip.ttl", "ip.checksum", "ip.checksum.status", "ipv6.src", "ipv6.dst", "ipv6.hlim",
	"udp.srcport", "udp.checksum.status", "tcp.srcport", "tcp.seq_raw", "tcp.checksum.status", "icmp.type", "icmp.code", "icmp.mpls.label", "frame.md5_hash"}

// Tap records the frames an interface receives, through an AF_PACKET
// socket opened (and so capturing) before NewTap returns, unlike tshark,
// which says it captures a moment before it does; tshark then Decodes
// what the tap kept (Decode).
type Tap struct {
	t   *testing.T
	dev string
	// sent: keep what dev sends too.
	sent   bool
	mu     sync.Mutex
	cond   *sync.Cond
	frames [][]byte
}

// NewTap starts recording what dev in ns receives (not what it sends);
// keep says which frames to keep. It stops when the test ends.
func NewTap(t *testing.T, ns *netns.NS, dev string, keep func([]byte) bool) *Tap {
	t.Helper()
	return startTap(t, &Tap{t: t, dev: dev}, ns, keep)
}

// NewTapBoth is NewTap for what dev sends and receives.
func NewTapBoth(t *testing.T, ns *netns.NS, dev string, keep func([]byte) bool) *Tap {
	t.Helper()
	return startTap(t, &Tap{t: t, dev: dev, sent: true}, ns, keep)
}

func startTap(t *testing.T, tp *Tap, ns *netns.NS, keep func([]byte) bool) *Tap {
	t.Helper()
	dev := tp.dev
	tp.cond = sync.NewCond(&tp.mu)
	var fd int
	if err := ns.Run(func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_ALL))
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20); err != nil {
			unix.Close(fd)
			return err
		}
		// A blocked recvfrom outlives close: wake up to see the stop.
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			unix.Close(fd)
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		return nil
	}); err != nil {
		t.Fatalf("tap on %s: %v", dev, err)
	}
	done, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				if err == unix.EINTR || err == unix.EAGAIN {
					continue
				}
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype == unix.PACKET_OUTGOING && !tp.sent || !keep(buf[:n]) {
				continue
			}
			tp.mu.Lock()
			tp.frames = append(tp.frames, append([]byte(nil), buf[:n]...))
			tp.cond.Broadcast()
			tp.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		unix.Close(fd)
	})
	return tp
}

// FirstN keeps the first n frames keep keeps (for a tap: one goroutine
// calls it).
func FirstN(n int, keep func([]byte) bool) func([]byte) bool {
	return func(f []byte) bool {
		if n == 0 || !keep(f) {
			return false
		}
		n--
		return true
	}
}

// htons is the network byte order of a 16-bit protocol number.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Wait returns the first n frames kept, failing t if fewer came within 20
// s.
func (tp *Tap) Wait(n int) [][]byte {
	tp.t.Helper()
	timer := time.AfterFunc(20*time.Second, func() { tp.mu.Lock(); tp.cond.Broadcast(); tp.mu.Unlock() })
	defer timer.Stop()
	deadline := time.Now().Add(20 * time.Second)
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for len(tp.frames) < n {
		if time.Now().After(deadline) {
			tp.t.Fatalf("%s received %d frames in 20 s, want %d", tp.dev, len(tp.frames), n)
		}
		tp.cond.Wait()
	}
	return tp.frames[:n]
}

// Count is the number of frames kept so far.
func (tp *Tap) Count() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.frames)
}

// Decode returns tshark's Decode of frames, fields per frame.
func Decode(t *testing.T, frames [][]byte, fields ...string) [][]string {
	t.Helper()
	tshark.Need(t)
	return tshark.Fields(t, tshark.WritePcap(t, pcap.LinkTypeEthernet, frames), fields...)
}

// Wire returns frames Decoded to WireFields, one line each, sorted (the
// modes may interleave two paths differently; order within a flow is the
// ECMP test's subject).
func Wire(t *testing.T, frames [][]byte) []string {
	t.Helper()
	rows := Decode(t, frames, WireFields...)
	lines := make([]string, len(rows))
	for i, r := range rows {
		lines[i] = strings.Join(r, " ")
	}
	slices.Sort(lines)
	return lines
}

// UDPTo keeps IPv4 and IPv6 UDP datagrams to port (plain or under labels,
// whose payload is taken as IP), as a BPF "udp dst port" would.
func UDPTo(port uint16) func([]byte) bool {
	return func(f []byte) bool {
		if len(f) < 14 {
			return false
		}
		typ, p := uint16(f[12])<<8|uint16(f[13]), f[14:]
		if typ == 0x8847 {
			for len(p) >= 4 {
				bottom := p[2]&1 == 1
				p = p[4:]
				if bottom {
					break
				}
			}
			if len(p) == 0 {
				return false
			}
			typ = map[byte]uint16{4: 0x0800, 6: 0x86dd}[p[0]>>4]
		}
		switch {
		case typ == 0x0800 && len(p) >= 24 && p[9] == 17:
			ihl := int(p[0]&15) * 4
			return len(p) >= ihl+4 && uint16(p[ihl+2])<<8|uint16(p[ihl+3]) == port
		case typ == 0x86dd && len(p) >= 44 && p[6] == 17:
			return uint16(p[42])<<8|uint16(p[43]) == port
		}
		return false
	}
}

// DisableIPv6 turns IPv6 off in ns before its interfaces exist: the
// kernels' link-local chatter would reach the nodes.
func DisableIPv6(t *testing.T, ns *netns.NS) {
	t.Helper()
	WriteSysctl(t, ns, "net/ipv6/conf/default/disable_ipv6", "1")
	WriteSysctl(t, ns, "net/ipv6/conf/all/disable_ipv6", "1")
}

// WriteSysctl writes value to /proc/sys/<key> in ns.
func WriteSysctl(t *testing.T, ns *netns.NS, key, value string) {
	t.Helper()
	if err := ns.Run(func() error { return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644) }); err != nil {
		t.Fatalf("sysctl %s=%s in %s: %v", key, value, ns.Name(), err)
	}
}

// WaitTaps waits until the taps together kept n frames (20 s at most).
func WaitTaps(t *testing.T, n int, taps ...*Tap) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := 0
		for _, tp := range taps {
			got += tp.Count()
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the taps kept %d frames in 20 s, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WithoutIPv4ID returns copies of frames with the IPv4 header's ID zeroed
// and its checksum made again.
func WithoutIPv4ID(frames [][]byte) [][]byte {
	out := make([][]byte, len(frames))
	for i, f := range frames {
		f = append([]byte(nil), f...)
		if len(f) >= 34 && f[12] == 8 && f[13] == 0 {
			ip := header.IPv4(f[14:])
			ip.SetID(0)
			ip.SetChecksum(0)
			ip.SetChecksum(^ip.CalculateChecksum())
		}
		out[i] = f
	}
	return out
}

// WithoutMACs returns copies of frames with both Ethernet addresses
// zeroed: to compare what two topologies built alike put on the wire.
func WithoutMACs(frames [][]byte) [][]byte {
	out := make([][]byte, len(frames))
	for i, f := range frames {
		f = append([]byte(nil), f...)
		clear(f[:min(12, len(f))])
		out[i] = f
	}
	return out
}

// Need skips t unless the tools these helpers run are installed: tshark
// (the decoder) and ethtool (GROOn). scripts/deps.sh installs both.
func Need(t *testing.T) {
	t.Helper()
	tshark.Need(t)
	if _, err := exec.LookPath("ethtool"); err != nil {
		t.Skip("needs ethtool (Debian package ethtool; scripts/deps.sh installs it) to turn GRO on where XDP redirects")
	}
}
