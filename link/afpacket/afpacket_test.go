package afpacket_test

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/linktest"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/link/afpacket"
)

// topo is ns a (our endpoint on veth va) <-> ns b (kernel on vb, 10.99.1.2).
type topo struct {
	a, b   *netns.NS
	va, vb string
}

var (
	gvisorAddr = netip.MustParsePrefix("10.99.1.1/24")
	kernelAddr = netip.MustParsePrefix("10.99.1.2/24")
)

func newTopo(t testing.TB) topo {
	t.Helper()
	netns.SkipUnlessRoot(t)
	var tp topo
	tp.a = netns.New(t, "afa")
	tp.b = netns.New(t, "afb")
	tp.va, tp.vb = netns.VethPair(t, tp.a, tp.b)
	// ns a's kernel keeps no address on va: the gVisor stack owns it.
	tp.b.MustExec("ip", "addr", "add", kernelAddr.String(), "dev", tp.vb)
	return tp
}

func openIn(t testing.TB, ns *netns.NS, opts afpacket.Options) (*afpacket.Endpoint, error) {
	t.Helper()
	var ep *afpacket.Endpoint
	err := ns.Run(func() (err error) {
		ep, err = afpacket.New(opts)
		return err
	})
	return ep, err
}

func TestTCPBothWaysOverVeth(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts afpacket.Options
	}{
		{"default", afpacket.Options{RXChecksumOffload: true}},
		{"mmsg", afpacket.Options{Mode: afpacket.ModeMMsg, RXChecksumOffload: true}},
		{"ring", afpacket.Options{Mode: afpacket.ModeRing, RXChecksumOffload: true}},
		{"fanout2-qdiscbypass", afpacket.Options{Queues: 2, QdiscBypass: true, RXChecksumOffload: true}},
		{"ring-fanout2", afpacket.Options{Mode: afpacket.ModeRing, Queues: 2, RXChecksumOffload: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTopo(t)
			tc.opts.Interface = tp.va
			ep, err := openIn(t, tp.a, tc.opts)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if got, want := ep.MTU(), uint32(1500); got != want {
				t.Errorf("got MTU() = %d, want %d", got, want)
			}
			// auto runs rings on this kernel (it has them), or says why not.
			if want := tc.opts.Mode; want != afpacket.ModeAuto && ep.Mode() != want {
				t.Errorf("got Mode() = %v, want %v", ep.Mode(), want)
			} else if want == afpacket.ModeAuto && ep.Mode() != afpacket.ModeRing {
				t.Errorf("auto runs %v: %s", ep.Mode(), ep.FallbackReason())
			}
			if got := len(ep.LinkAddress()); got != 6 {
				t.Errorf("got LinkAddress() of %d bytes, want 6", got)
			}
			s := linktest.NewStack(t, ep, gvisorAddr, false)
			ln := linktest.ListenIn(t, tp.b, kernelAddr.Addr().String()+":5001")
			// 64 MiB each way; the kernel's veth keeps its default TX
			// checksum offload, so its frames reach us with partial checksums.
			linktest.TransferBothWays(t, s, ln, netip.AddrPortFrom(kernelAddr.Addr(), 5001), 64<<20)

			st := ep.Stats()
			if st.RXChecksumValidated == 0 {
				t.Errorf("got Stats().RXChecksumValidated = 0, want > 0 (kernel veth frames carry partial checksums)")
			}
			if st.RXBytes < 64<<20 || st.TXBytes < 64<<20 {
				t.Errorf("got RXBytes = %d, TXBytes = %d, want >= %d each", st.RXBytes, st.TXBytes, 64<<20)
			}
			// Twice the bytes would mean our own frames read back (fanout
			// lost PACKET_IGNORE_OUTGOING before FLAG_IGNORE_OUTGOING).
			if st.RXBytes > 3*(64<<20)/2 {
				t.Errorf("got RXBytes = %d for 64 MiB each way: our own frames read back", st.RXBytes)
			}
			if st.TXErrors != 0 || st.RXTruncated != 0 || st.RXErrors != 0 {
				t.Errorf("got TXErrors = %d, RXTruncated = %d, RXErrors = %d, want 0", st.TXErrors, st.RXTruncated, st.RXErrors)
			}
			if ep.Mode() == afpacket.ModeRing && st.RXBlocks == 0 {
				t.Errorf("ring mode read no receive block: %+v", st)
			}
			t.Logf("mode %v, stats: %+v", ep.Mode(), st)
		})
	}
}

func TestNewErrors(t *testing.T) {
	netns.SkipUnlessRoot(t)
	a := netns.New(t, "afe")
	b := netns.New(t, "afe")
	va, _ := netns.VethPair(t, a, b)
	a.MustExec("ip", "link", "set", va, "down")
	for _, tc := range []struct {
		name  string
		iface string
		want  syscall.Errno
	}{
		{"missing", "nosuchif0", syscall.ENODEV},
		{"down", va, syscall.ENETDOWN},
		{"name too long", "abcdefghijklmnopq", syscall.ENODEV},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, err := openIn(t, a, afpacket.Options{Interface: tc.iface})
			if err == nil {
				ep.Close()
				t.Fatalf("New(%q): got nil error, want %v", tc.iface, tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("New(%q): got %v, want errors.Is %v", tc.iface, err, tc.want)
			}
			var op *net.OpError
			if !errors.As(err, &op) {
				t.Errorf("New(%q): got %T, want *net.OpError", tc.iface, err)
			}
			if !strings.Contains(err.Error(), tc.iface) {
				t.Errorf("New(%q): got message %q, want it to name the interface", tc.iface, err)
			}
		})
	}
}
