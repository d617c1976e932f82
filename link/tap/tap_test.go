package tap_test

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/mplsnode/mplsnode/internal/linktest"
	"github.com/mplsnode/mplsnode/internal/netns"
	"github.com/mplsnode/mplsnode/link/tap"
)

var (
	gvisorAddr = netip.MustParsePrefix("10.99.2.1/24")
	kernelAddr = netip.MustParsePrefix("10.99.2.2/24")
)

// tapTopo is: ns a holds our TAP and veth end va, bridged; ns b holds the
// kernel peer on vb.
type tapTopo struct {
	a, b *netns.NS
	ep   *tap.Endpoint
}

func newTapTopo(t testing.TB) tapTopo {
	t.Helper()
	netns.SkipUnlessRoot(t)
	var tp tapTopo
	tp.a = netns.New(t, "tapa")
	tp.b = netns.New(t, "tapb")
	va, vb := netns.VethPair(t, tp.a, tp.b)
	if err := tp.a.Run(func() (err error) {
		tp.ep, err = tap.New(tap.Options{Name: netns.Name("tap")})
		return err
	}); err != nil {
		t.Fatalf("tap.New: %v", err)
	}
	t.Cleanup(tp.ep.Close)
	netns.Bridge(t, tp.a, tp.ep.Name(), va)
	tp.b.MustExec("ip", "addr", "add", kernelAddr.String(), "dev", vb)
	return tp
}

func TestTCPBothWaysThroughBridge(t *testing.T) {
	tp := newTapTopo(t)
	out := tp.a.MustExec("ip", "-o", "link", "show", tp.ep.Name())
	if !strings.Contains(out, ",UP") && !strings.Contains(out, "<UP") {
		t.Errorf("ip link show %s: got %q, want the UP flag", tp.ep.Name(), out)
	}
	if got, want := tp.ep.MTU(), uint32(1500); got != want {
		t.Errorf("got MTU() = %d, want %d", got, want)
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
	if st.RXTruncated != 0 || st.TXErrors != 0 || st.RXErrors != 0 {
		t.Errorf("got RXTruncated = %d, TXErrors = %d, RXErrors = %d, want 0", st.RXTruncated, st.TXErrors, st.RXErrors)
	}
	t.Logf("stats: %+v", st)
}

func TestNewNameTooLong(t *testing.T) {
	_, err := tap.New(tap.Options{Name: "abcdefghijklmnopq"})
	if err == nil || !strings.Contains(err.Error(), "abcdefghijklmnopq") || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("New with a 17-byte name: got %v, want EINVAL naming it", err)
	}
}
