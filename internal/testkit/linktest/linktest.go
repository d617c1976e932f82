// Package linktest holds what the lower-link packages' tests share: a
// gVisor stack on a lower endpoint, kernel listeners inside a namespace,
// duplex transfers checked by SHA-256, and a stream benchmark. Only tests
// import it.
package linktest

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

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// IOGuard bounds how long a transfer may hang before the test fails; it is a
// hang guard, not a performance assertion.
const IOGuard = 2 * time.Minute

// NICID is the NIC of the stack NewStack builds.
const NICID = 1

// NewStack builds a gVisor stack (IPv4, ARP, TCP) on lower, wrapped in
// gVisor's ethernet endpoint unless raw is set, with addr on the NIC.
func NewStack(t testing.TB, lower stack.LinkEndpoint, addr netip.Prefix, raw bool) *stack.Stack {
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
	if err := s.CreateNIC(NICID, ep); err != nil {
		t.Fatalf("CreateNIC: %v", err)
	}
	pa := tcpip.ProtocolAddress{
		Protocol: ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{
			Address:   tcpip.AddrFrom4(addr.Addr().As4()),
			PrefixLen: addr.Bits(),
		},
	}
	if err := s.AddProtocolAddress(NICID, pa, stack.AddressProperties{}); err != nil {
		t.Fatalf("AddProtocolAddress: %v", err)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: pa.AddressWithPrefix.Subnet(), NIC: NICID}})
	t.Cleanup(func() {
		// RemoveNIC closes the link endpoint; Stack.Close does not.
		s.RemoveNIC(NICID)
		s.Destroy()
		lower.Close()
		lower.Wait()
	})
	return s
}

// Stream returns a deterministic pseudo-random byte stream for seed.
func Stream(seed uint64) io.Reader {
	var key [32]byte
	key[0] = byte(seed)
	return rand.NewChaCha8(key)
}

// ListenIn opens a kernel TCP listener inside ns.
func ListenIn(t testing.TB, ns *netns.NS, addr string) net.Listener {
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

// SideResult is what one side of a duplex transfer saw.
type SideResult struct {
	sent, got [32]byte
	gotN      int64
	err       error
}

// Duplex writes n bytes of Stream(seed) to c while reading c to EOF, and
// returns the SHA-256 of what it sent and of what it received.
func Duplex(c net.Conn, n int64, seed uint64) SideResult {
	var r SideResult
	_ = c.SetDeadline(time.Now().Add(IOGuard))
	errc := make(chan error, 1)
	go func() {
		h := sha256.New()
		_, err := io.Copy(io.MultiWriter(c, h), io.LimitReader(Stream(seed), n))
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

// TransferBothWays runs a duplex transfer of n bytes each way between a
// gVisor client on s and the kernel listener ln (at dst), and checks both
// directions' SHA-256.
func TransferBothWays(t *testing.T, s *stack.Stack, ln net.Listener, dst netip.AddrPort, n int64) {
	t.Helper()
	srvc := make(chan SideResult, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvc <- SideResult{err: err}
			return
		}
		defer c.Close()
		srvc <- Duplex(c, n, 2)
	}()
	c := Dial(t, s, dst)
	defer c.Close()
	cli := Duplex(c, n, 1)
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

// BenchChunk is the bytes moved per benchmark op.
const BenchChunk = 1 << 20

// Zeros reads as an endless run of zero bytes.
type Zeros struct{}

// Read fills p with zeros.
func (Zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// BenchStream measures one TCP stream between a gVisor client on s and the
// kernel listener ln: "tx" sends from gVisor to the kernel, "rx" the other
// way. The time includes draining the last bytes at the receiver.
func BenchStream(b *testing.B, s *stack.Stack, ln net.Listener, dst netip.AddrPort, dir string) {
	srvDone := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvDone <- err
			return
		}
		defer c.Close()
		if dir == "tx" {
			_, err = io.Copy(io.Discard, c)
		} else {
			_, err = io.Copy(c, io.LimitReader(Zeros{}, int64(b.N)*BenchChunk))
		}
		srvDone <- err
	}()
	c, err := gonet.DialContextTCP(context.Background(), s, tcpip.FullAddress{
		NIC: NICID, Addr: tcpip.AddrFrom4(dst.Addr().As4()), Port: dst.Port(),
	}, ipv4.ProtocolNumber)
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	defer c.Close()
	buf := make([]byte, BenchChunk)
	b.SetBytes(BenchChunk)
	b.ReportAllocs()
	b.ResetTimer()
	if dir == "tx" {
		for i := 0; i < b.N; i++ {
			if _, err := c.Write(buf); err != nil {
				b.Fatalf("write: %v", err)
			}
		}
		c.CloseWrite()
		if err := <-srvDone; err != nil {
			b.Fatalf("server: %v", err)
		}
	} else {
		if n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, buf); err != nil || n != int64(b.N)*BenchChunk {
			b.Fatalf("read: got %d bytes, err %v; want %d", n, err, int64(b.N)*BenchChunk)
		}
		<-srvDone
	}
	b.StopTimer()
}

// Dial opens a TCP connection from the gVisor stack s (NIC NICID) to dst,
// within IOGuard; the connection is closed in t.Cleanup.
func Dial(t testing.TB, s *stack.Stack, dst netip.AddrPort) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), IOGuard)
	defer cancel()
	c, err := gonet.DialContextTCP(ctx, s, tcpip.FullAddress{
		NIC: NICID, Addr: tcpip.AddrFrom4(dst.Addr().As4()), Port: dst.Port(),
	}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatalf("gVisor dial %v: %v", dst, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
