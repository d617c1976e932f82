package stack_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/link/pipe"

	"github.com/mplsnode/mplsnode/stack"
)

// lone builds one stack on a pipe link whose far end nobody reads, with
// an IPv4 and an IPv6 address and no routes beyond the connected subnets.
func lone(t *testing.T) *stack.Stack {
	t.Helper()
	la, _ := pipe.New(macA, macB, 1500)
	s, err := stack.New(stack.Config{
		Links: []stack.Link{{Name: "a0", Kind: stack.LinkEndpoint, Endpoint: la}},
		Addresses: []stack.Address{
			{Link: "a0", Prefix: netip.PrefixFrom(ipA, 24)},
			{Link: "a0", Prefix: netip.MustParsePrefix("2001:db8:20::20/64")},
		},
	})
	if err != nil {
		t.Fatalf("stack.New = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestDialNoRoute checks that a dial to an address the stack has no
// route to fails at once with ENETUNREACH, as connect(2) does, in both
// families, for TCP and for a UDP dial; and that a write on a UDP socket
// whose route has gone, or a WriteTo a destination with none, reports it
// too. Planted bugs: without the route check in DialTCPFrom the TCP dial
// runs into the context's deadline (SYNs dropped as no_route); without it
// in udpConn.Write the write after RemoveRoute returns nil.
func TestDialNoRoute(t *testing.T) {
	s := lone(t)
	for _, addr := range []string{"192.0.2.1:80", "[2001:db8:99::1]:80"} {
		for _, network := range []string{"tcp", "udp"} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := s.DialContext(ctx, network, addr)
			cancel()
			if err == nil {
				c.Close()
				t.Errorf("DialContext(%s, %s) = nil error, want ENETUNREACH", network, addr)
				continue
			}
			var oe *net.OpError
			if !errors.Is(err, syscall.ENETUNREACH) || !errors.As(err, &oe) {
				t.Errorf("DialContext(%s, %s) = %v, want a *net.OpError wrapping ENETUNREACH", network, addr, err)
			}
		}
	}

	// A route makes the UDP dial succeed; removing it makes the next
	// write fail.
	dst := netip.MustParsePrefix("192.0.2.0/24")
	if err := s.AddRoute(stack.Route{Prefix: dst, Via: ipB}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := s.DialContext(ctx, "udp", "192.0.2.1:9")
	if err != nil {
		t.Fatalf("DialContext with a route = %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("Write with a route = %v", err)
	}
	if !s.RemoveRoute(dst) {
		t.Fatal("RemoveRoute = false")
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("Write after RemoveRoute = %v, want ENETUNREACH", err)
	}

	pc, err := s.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := pc.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.51.100.1:9"))); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("WriteTo with no route = %v, want ENETUNREACH", err)
	}
	// A connected subnet is a route.
	if _, err := pc.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(netip.AddrPortFrom(ipB, 9))); err != nil {
		t.Errorf("WriteTo on the connected subnet = %v", err)
	}
}

// TestLoopback checks that a stack talks to itself over 127.0.0.1 and
// [::1], TCP both ways and UDP, as a program does over a kernel's lo.
// Planted bug: without the loopback NIC the IPv4 dial runs into the
// deadline and the IPv6 one fails with EADDRNOTAVAIL.
func TestLoopback(t *testing.T) {
	s := lone(t)
	for _, host := range []string{"127.0.0.1", "::1"} {
		ln, err := s.Listen("tcp", net.JoinHostPort(host, "7000"))
		if err != nil {
			t.Fatalf("Listen(%s) = %v", host, err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			io.Copy(c, c)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := s.DialContext(ctx, "tcp", net.JoinHostPort(host, "7000"))
		if err != nil {
			cancel()
			ln.Close()
			t.Fatalf("DialContext(tcp, %s) = %v", host, err)
		}
		deadline, _ := ctx.Deadline()
		c.SetDeadline(deadline)
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Errorf("Write over %s = %v", host, err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Errorf("echo over %s = %q, %v; want \"ping\"", host, buf, err)
		}
		if got := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr(); !got.IsLoopback() {
			t.Errorf("local address over %s = %s, want a loopback address", host, got)
		}
		c.Close()
		ln.Close()

		pc, err := s.ListenPacket("udp", net.JoinHostPort(host, "7001"))
		if err != nil {
			cancel()
			t.Fatalf("ListenPacket(%s) = %v", host, err)
		}
		uc, err := s.DialContext(ctx, "udp", net.JoinHostPort(host, "7001"))
		if err != nil {
			cancel()
			pc.Close()
			t.Fatalf("DialContext(udp, %s) = %v", host, err)
		}
		if _, err := uc.Write([]byte("datagram")); err != nil {
			t.Errorf("UDP write over %s = %v", host, err)
		}
		pc.SetDeadline(deadline)
		dgram := make([]byte, 64)
		n, _, err := pc.ReadFrom(dgram)
		if err != nil || string(dgram[:n]) != "datagram" {
			t.Errorf("UDP read over %s = %q, %v; want \"datagram\"", host, dgram[:n], err)
		}
		uc.Close()
		pc.Close()
		cancel()
	}
}

// TestUnboundSourceNotLoopback checks that a datagram from an unbound
// socket, routed by the FIB, leaves from a link address and never from
// the loopback's (gVisor takes the source from any NIC's primary
// addresses, in map order, so each of many fresh sockets is a new draw).
// Planted bug: with the loopback addresses primary, some datagrams never
// arrive (sent from 127.0.0.1, or refused as the write's route is
// invalid).
func TestUnboundSourceNotLoopback(t *testing.T) {
	a, b := pair(t, nil)
	pc, err := b.ListenUDP(netip.AddrPortFrom(svc, 7002))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(svc, 7002))
	buf := make([]byte, 64)
	for i := range 32 {
		unspec := netip.IPv4Unspecified()
		if i%2 == 1 {
			unspec = netip.IPv6Unspecified() // dual-stack, as the node's LSP ping responder
		}
		c, err := a.ListenUDP(netip.AddrPortFrom(unspec, 0))
		if err != nil {
			t.Fatal(err)
		}
		dst := to
		if i%2 == 1 {
			dst = net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom16(svc.As16()), 7002))
		}
		if _, err := c.WriteTo([]byte("x"), dst); err != nil {
			c.Close()
			t.Fatalf("socket %d (%s): WriteTo = %v", i, unspec, err)
		}
		pc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, from, err := pc.ReadFrom(buf)
		c.Close()
		if err != nil {
			t.Fatalf("socket %d (%s): no datagram: %v", i, unspec, err)
		}
		if got := from.(*net.UDPAddr).AddrPort().Addr().Unmap(); got != ipA {
			t.Fatalf("socket %d (%s): datagram from %s, want %s", i, unspec, got, ipA)
		}
	}
}
