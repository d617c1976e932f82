//go:build linux

package afpacket_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/linktest"
	"github.com/mplsnode/mplsnode/link/afpacket"
)

// TestDropKernelRX opens the endpoint with DropKernelRX on an interface
// whose kernel does hold an address (10.99.1.3, for the test): the kernel
// no longer answers the peer's ping (it never sees the ARP request or the
// echo), while the endpoint still receives those frames; once the
// endpoint closes, the kernel answers again (the BPF link went with it).
// Checked by planting: with the drop program returning TCX_PASS the first
// ping is answered.
func TestDropKernelRX(t *testing.T) {
	tp := newTopo(t)
	tp.a.MustExec("ip", "addr", "add", "10.99.1.3/24", "dev", tp.va)
	// ping: a TCP connection attempt to a closed port; the kernel answers
	// with a reset (connection refused) if it sees the SYN.
	ping := func() error {
		return tp.b.Run(func() error {
			c, err := net.DialTimeout("tcp", "10.99.1.3:9", time.Second)
			if err == nil {
				c.Close()
				return nil
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				return nil
			}
			return err
		})
	}
	if err := ping(); err != nil {
		t.Fatalf("the kernel does not answer before the endpoint opens: %v", err)
	}
	tp.b.MustExec("ip", "neigh", "flush", "dev", tp.vb)
	ep, err := openIn(t, tp.a, afpacket.Options{Interface: tp.va, DropKernelRX: true, RXChecksumOffload: true})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if !ep.KernelRXDropped() {
		t.Skip("no TCX drop program (kernel older than 6.6, or no CAP_BPF)")
	}
	linktest.NewStack(t, ep, gvisorAddr, false)
	before := ep.Stats().RXPackets
	if err := ping(); err == nil {
		t.Fatal("the kernel answered a ping on an interface whose kernel RX is dropped")
	}
	if got := ep.Stats().RXPackets - before; got == 0 {
		t.Errorf("the endpoint received %d frames during the ping, want the peer's ARP requests", got)
	}
	ep.Close()
	tp.b.MustExec("ip", "neigh", "flush", "dev", tp.vb)
	deadline := time.Now().Add(5 * time.Second)
	for ping() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the kernel still does not answer after the endpoint closed: the drop program stayed")
		}
	}
}
