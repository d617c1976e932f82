package tap_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/netns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// ioGuard bounds how long a transfer may hang before the test fails; it is a
// hang guard, not a performance assertion.
const ioGuard = 2 * time.Minute

const nicID = 1

// newStack builds a gVisor stack (IPv4, ARP, TCP) on lower, wrapped in
// gVisor's ethernet endpoint unless raw is set, with addr on the NIC.
func newStack(t testing.TB, lower stack.LinkEndpoint, addr netip.Prefix, raw bool) *stack.Stack {
	t.Helper()
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol},
	})
	// SACK: recover from the odd loss without collapsing the window.
	sack := tcpip.TCPSACKEnabled(true)
	// Buffers up to 8 MiB so the window is not the bottleneck on a veth.
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: 1 << 20, Max: 8 << 20}
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: 1 << 20, Max: 8 << 20}
	for _, opt := range []tcpip.SettableTransportProtocolOption{&sack, &snd, &rcv} {
		if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, opt); err != nil {
			t.Fatalf("SetTransportProtocolOption(%T): %v", opt, err)
		}
	}
	ep := lower
	if !raw {
		ep = ethernet.New(lower)
	}
	if err := s.CreateNIC(nicID, ep); err != nil {
		t.Fatalf("CreateNIC: %v", err)
	}
	pa := tcpip.ProtocolAddress{
		Protocol: ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{
			Address:   tcpip.AddrFrom4(addr.Addr().As4()),
			PrefixLen: addr.Bits(),
		},
	}
	if err := s.AddProtocolAddress(nicID, pa, stack.AddressProperties{}); err != nil {
		t.Fatalf("AddProtocolAddress: %v", err)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: pa.AddressWithPrefix.Subnet(), NIC: nicID}})
	t.Cleanup(func() {
		// RemoveNIC closes the link endpoint; Stack.Close does not.
		s.RemoveNIC(nicID)
		s.Destroy()
		lower.Close()
		lower.Wait()
	})
	return s
}

// stream returns a deterministic pseudo-random byte stream for seed.
func stream(seed uint64) io.Reader {
	var key [32]byte
	key[0] = byte(seed)
	return rand.NewChaCha8(key)
}

// listenIn opens a kernel TCP listener inside ns.
func listenIn(t testing.TB, ns *netns.NS, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := ns.Run(func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		t.Fatalf("listen in %s: %v", ns.Name(), err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// sideResult is what one side of a duplex transfer saw.
type sideResult struct {
	sent, got [32]byte
	gotN      int64
	err       error
}

// duplex writes n bytes of stream(seed) to c while reading c to EOF, and
// returns the SHA-256 of what it sent and of what it received.
func duplex(c net.Conn, n int64, seed uint64) sideResult {
	var r sideResult
	_ = c.SetDeadline(time.Now().Add(ioGuard))
	errc := make(chan error, 1)
	go func() {
		h := sha256.New()
		_, err := io.Copy(io.MultiWriter(c, h), io.LimitReader(stream(seed), n))
		copy(r.sent[:], h.Sum(nil))
		if err == nil {
			err = c.(interface{ CloseWrite() error }).CloseWrite()
		}
		errc <- err
	}()
	h := sha256.New()
	var err error
	r.gotN, err = io.Copy(h, c)
	copy(r.got[:], h.Sum(nil))
	if werr := <-errc; werr != nil {
		err = fmt.Errorf("write: %w", werr)
	}
	r.err = err
	return r
}

// transferBothWays runs a duplex transfer of n bytes each way between a
// gVisor client on s and the kernel listener ln (at dst), and checks both
// directions' SHA-256.
func transferBothWays(t *testing.T, s *stack.Stack, ln net.Listener, dst netip.AddrPort, n int64) {
	t.Helper()
	srvc := make(chan sideResult, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvc <- sideResult{err: err}
			return
		}
		defer c.Close()
		srvc <- duplex(c, n, 2)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), ioGuard)
	defer cancel()
	c, err := gonet.DialContextTCP(ctx, s, tcpip.FullAddress{
		NIC: nicID, Addr: tcpip.AddrFrom4(dst.Addr().As4()), Port: dst.Port(),
	}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatalf("gVisor dial %v: %v", dst, err)
	}
	defer c.Close()
	cli := duplex(c, n, 1)
	srv := <-srvc
	if cli.err != nil || srv.err != nil {
		t.Fatalf("transfer: gVisor side: %v; kernel side: %v", cli.err, srv.err)
	}
	if cli.gotN != n || srv.gotN != n {
		t.Errorf("got %d bytes at gVisor and %d at the kernel, want %d each", cli.gotN, srv.gotN, n)
	}
	if srv.got != cli.sent {
		t.Errorf("gVisor->kernel: got SHA-256 %x, want %x", srv.got, cli.sent)
	}
	if cli.got != srv.sent {
		t.Errorf("kernel->gVisor: got SHA-256 %x, want %x", cli.got, srv.sent)
	}
}
