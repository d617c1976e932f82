package tap_test

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/linktest"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/link/tap"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

var (
	gvisorAddr = netip.MustParsePrefix("10.99.2.1/24")
	kernelAddr = netip.MustParsePrefix("10.99.2.2/24")
)

// tapTopo is: ns a holds our TAP and veth end va, bridged; ns b holds the
// kernel peer on vb.
type tapTopo struct {
	a, b   *netns.NS
	vb     string
	ep     *tap.Endpoint
	bridge string
}

func newTapTopo(t testing.TB, opts tap.Options) tapTopo {
	t.Helper()
	netns.SkipUnlessRoot(t)
	var tp tapTopo
	tp.a = netns.New(t, "tapa")
	tp.b = netns.New(t, "tapb")
	var va string
	va, tp.vb = netns.VethPair(t, tp.a, tp.b)
	opts.Name = netns.Name("tap")
	if err := tp.a.Run(func() (err error) {
		tp.ep, err = tap.New(opts)
		return err
	}); err != nil {
		t.Fatalf("tap.New: %v", err)
	}
	t.Cleanup(tp.ep.Close)
	tp.bridge = netns.Bridge(t, tp.a, tp.ep.Name(), va)
	tp.b.MustExec("ip", "addr", "add", kernelAddr.String(), "dev", tp.vb)
	return tp
}

// mplsStack is a gVisor stack on link/mplsendpoint (no labels) over the
// TAP, as package stack builds it: host GSO, per-frame checksum flags.
func mplsStack(t *testing.T, ep *tap.Endpoint) *linktestStack {
	t.Helper()
	m, err := mplsendpoint.New(ep, mplsendpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &linktestStack{linktest.NewStack(t, m, gvisorAddr, true), m}
}

type linktestStack struct {
	s *stack.Stack
	m *mplsendpoint.Endpoint
}

// TestOffloadsBothWays carries 256 MiB each way between gVisor (on
// link/mplsendpoint over the TAP, offloads on) and the Linux kernel behind
// a bridge and a veth, SHA-256 checked, and has tshark decode frames on
// both sides: the kernel received our TCP GSO packets as single frames
// longer than the MTU (a virtio-net GSO frame crossed the bridge and veth
// whole), and handed us its GSO frames through the TAP. Planted bugs:
// a zero virtio-net header on GSO packets (the kernel then sees a 64 KiB
// frame on a 1500-byte link and drops it: the transfer stalls and the
// guard fails it); RXChecksumValidated not set for NEEDS_CSUM frames (the
// kernel->gVisor direction is dropped as bad checksums: transfer fails).
func TestOffloadsBothWays(t *testing.T) {
	tp := newTapTopo(t, tap.Options{})
	if !tp.ep.GSOFrames() {
		t.Fatal("GSOFrames() = false with offloads on")
	}
	st := mplsStack(t, tp.ep)
	ln := linktest.ListenIn(t, tp.b, kernelAddr.Addr().String()+":5002")
	// Frames from gVisor the kernel took whole: longer than one 1500-byte
	// frame. Frames from the kernel into the TAP, likewise.
	ours := tshark.StartCapture(t, tp.b, tp.vb, "tcp and src host "+gvisorAddr.Addr().String()+" and greater 3000", 20)
	theirs := tshark.StartCapture(t, tp.a, tp.ep.Name(), "tcp and src host "+kernelAddr.Addr().String()+" and greater 3000", 20)
	linktest.TransferBothWays(t, st.s, ln, netip.AddrPortFrom(kernelAddr.Addr(), 5002), 256<<20)

	s := tp.ep.Stats()
	t.Logf("tap stats: %+v; mplsendpoint GSO frames %d, segmented %d", s, st.m.Stats().GSOFrames, st.m.Stats().GSOPackets)
	if s.TXGSOFrames == 0 || st.m.Stats().GSOFrames == 0 {
		t.Errorf("no GSO frame sent: tap TXGSOFrames %d, mplsendpoint GSOFrames %d", s.TXGSOFrames, st.m.Stats().GSOFrames)
	}
	if s.RXGSOFrames == 0 || s.RXChecksumValidated == 0 {
		t.Errorf("the kernel handed no GSO frame or partial checksum: RXGSOFrames %d, RXChecksumValidated %d", s.RXGSOFrames, s.RXChecksumValidated)
	}
	if s.RXTruncated != 0 || s.TXErrors != 0 || s.RXErrors != 0 || s.RXShort != 0 {
		t.Errorf("got RXTruncated %d, RXShort %d, TXErrors %d, RXErrors %d, want 0", s.RXTruncated, s.RXShort, s.TXErrors, s.RXErrors)
	}
	check := func(what string, rows [][]string, src netip.Addr) {
		for i, r := range rows {
			// ip.src, ip.len, ip.checksum.status, tcp.len: the IP header
			// checksum is whole (1 = good); TCP's is partial on a GSO frame,
			// so tshark cannot judge it.
			ipLen, _ := strconv.Atoi(r[1])
			tcpLen, _ := strconv.Atoi(r[3])
			if r[0] != src.String() || ipLen <= 1500 || r[2] != "1" || tcpLen <= 1500-40 {
				t.Errorf("%s frame %d: ip.src, ip.len, ip.checksum.status, tcp.len = %v; want %s, > 1500, 1, > 1460", what, i, r, src)
			}
		}
	}
	check("gVisor->kernel (on "+tp.vb+")", ours.Fields("ip.src", "ip.len", "ip.checksum.status", "tcp.len"), gvisorAddr.Addr())
	check("kernel->gVisor (on the TAP)", theirs.Fields("ip.src", "ip.len", "ip.checksum.status", "tcp.len"), kernelAddr.Addr())
}

// TestMultiQueue opens the TAP with two queues (IFF_MULTI_QUEUE) and
// carries a transfer both ways. Planted bug: the second queue opened
// without IFF_MULTI_QUEUE (TUNSETIFF fails with EINVAL: New fails).
func TestMultiQueue(t *testing.T) {
	tp := newTapTopo(t, tap.Options{Queues: 2})
	if got := tp.ep.Queues(); got != 2 {
		t.Fatalf("Queues() = %d, want 2", got)
	}
	out := tp.a.MustExec("ip", "-d", "link", "show", tp.ep.Name())
	if !strings.Contains(out, "multi_queue") {
		t.Errorf("ip -d link show: %q; want multi_queue", out)
	}
	st := mplsStack(t, tp.ep)
	ln := linktest.ListenIn(t, tp.b, kernelAddr.Addr().String()+":5002")
	linktest.TransferBothWays(t, st.s, ln, netip.AddrPortFrom(kernelAddr.Addr(), 5002), 32<<20)
}

// TestPlainBothWays is the TAP without offloads under gVisor's own
// ethernet endpoint: the kernel segments and checksums before the TAP.
func TestPlainBothWays(t *testing.T) {
	tp := newTapTopo(t, tap.Options{NoOffloads: true})
	out := tp.a.MustExec("ip", "-o", "link", "show", tp.ep.Name())
	if !strings.Contains(out, ",UP") && !strings.Contains(out, "<UP") {
		t.Errorf("ip link show %s: got %q, want the UP flag", tp.ep.Name(), out)
	}
	if got, want := tp.ep.MTU(), uint32(1500); got != want {
		t.Errorf("got MTU() = %d, want %d", got, want)
	}
	if tp.ep.GSOFrames() {
		t.Error("GSOFrames() = true without offloads")
	}
	mac := []byte(tp.ep.LinkAddress())
	if len(mac) != 6 || mac[0]&1 != 0 || mac[0]&2 == 0 {
		t.Errorf("got LinkAddress() = % x, want a locally administered unicast MAC", mac)
	}
	if strings.Contains(out, net.HardwareAddr(mac).String()) {
		t.Errorf("LinkAddress() %s equals the TAP device's own MAC, want a distinct one", net.HardwareAddr(mac).String())
	}
	s := linktest.NewStack(t, tp.ep, gvisorAddr, false)
	ln := linktest.ListenIn(t, tp.b, kernelAddr.Addr().String()+":5002")
	linktest.TransferBothWays(t, s, ln, netip.AddrPortFrom(kernelAddr.Addr(), 5002), 32<<20)
	st := tp.ep.Stats()
	if st.RXBytes < 32<<20 || st.TXBytes < 32<<20 {
		t.Errorf("got RXBytes = %d, TXBytes = %d, want >= %d each", st.RXBytes, st.TXBytes, 32<<20)
	}
	if st.RXTruncated != 0 || st.TXErrors != 0 || st.RXErrors != 0 || st.RXGSOFrames != 0 || st.TXGSOFrames != 0 {
		t.Errorf("got %+v, want no truncation, error or GSO frame", st)
	}
}

func TestNewNameTooLong(t *testing.T) {
	_, err := tap.New(tap.Options{Name: "abcdefghijklmnopq"})
	if err == nil || !strings.Contains(err.Error(), "abcdefghijklmnopq") || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("New with a 17-byte name: got %v, want EINVAL naming it", err)
	}
}

func TestNewBadQueues(t *testing.T) {
	if _, err := tap.New(tap.Options{Queues: tap.MaxQueues + 1}); err == nil {
		t.Errorf("New with %d queues: no error", tap.MaxQueues+1)
	}
}
