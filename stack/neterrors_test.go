package stack_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/mplsnode/mplsnode/mpls"
)

// TestNetConn runs golang.org/x/net/nettest's conformance suite for
// net.Conn (basic I/O, ping-pong, racy reads and writes, past/present/
// future deadlines reported as Timeout() errors, Close unblocking every
// method, concurrent methods) over a TCP connection between two stacks
// joined by a pipe link, labelled on one direction. gonet's conns pass it;
// it guards our wrapper (stack/errors.go). Planted bug: a wrapper Close
// that only marks the conn closed leaves the peer's reads blocked and the
// suite hangs (until go test's -timeout; nettest sets no deadlines of its
// own).
func TestNetConn(t *testing.T) {
	var port atomic.Uint32
	port.Store(6000)
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		a, b := pair(t, []mpls.Label{100})
		addr := netip.AddrPortFrom(svc, uint16(port.Add(1)))
		ln, err := b.ListenTCP(addr)
		if err != nil {
			return nil, nil, nil, err
		}
		defer ln.Close()
		accepted := acceptOne(ln)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c1, err = a.DialTCP(ctx, addr)
		if err != nil {
			return nil, nil, nil, err
		}
		select {
		case c2 = <-accepted:
		case <-ctx.Done():
		}
		if c2 == nil {
			c1.Close()
			return nil, nil, nil, errors.New("accept failed")
		}
		stop = func() {
			c1.Close()
			c2.Close()
			a.Close()
			b.Close()
		}
		return c1, c2, stop, nil
	})
}

// TestNetErrors checks the embedder API's errors against package net's
// conventions with errors.Is: Accept after Close is net.ErrClosed, a read
// or write past its deadline is os.ErrDeadlineExceeded (and a net.Error
// with Timeout() true), Read/Write after Close is net.ErrClosed, and Dial
// and Listen on a closed Stack are net.ErrClosed. Planted bugs (errors as
// gVisor words them): "endpoint is in invalid state", a timeoutError that
// is not os.ErrDeadlineExceeded, "network is unreachable".
func TestNetErrors(t *testing.T) {
	a, b := pair(t, nil)
	addr := netip.AddrPortFrom(svc, 5100)
	ln, err := b.ListenTCP(addr)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := connect(t, ln, 10*time.Second, func(ctx context.Context) (net.Conn, error) {
		return a.DialTCP(ctx, addr)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	check := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: got %v (%T), want errors.Is %v", what, err, err, want)
		}
	}
	// Deadlines.
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	check("Read past its deadline", err, os.ErrDeadlineExceeded)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("Read past its deadline: %v is not a net.Error with Timeout() true", err)
	}
	c.SetWriteDeadline(time.Now().Add(-time.Second))
	_, err = c.Write([]byte("x"))
	check("Write past its deadline", err, os.ErrDeadlineExceeded)
	c.SetDeadline(time.Time{})

	// Close.
	c.Close()
	_, err = c.Read(make([]byte, 1))
	check("Read after Close", err, net.ErrClosed)
	_, err = c.Write([]byte("x"))
	check("Write after Close", err, net.ErrClosed)
	ln.Close()
	_, err = ln.Accept()
	check("Accept after Close", err, net.ErrClosed)
	// An Accept blocked when Close comes (http.Server.Close does this).
	ln2, err := b.ListenTCP(netip.AddrPortFrom(svc, 5105))
	if err != nil {
		t.Fatal(err)
	}
	acceptErr := make(chan error, 1)
	go func() {
		_, err := ln2.Accept()
		acceptErr <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it block
	ln2.Close()
	select {
	case err := <-acceptErr:
		check("Accept blocked across Close", err, net.ErrClosed)
	case <-time.After(10 * time.Second):
		t.Error("Accept still blocked 10s after Close")
	}

	// UDP: a read deadline, then use after Close.
	u, err := b.ListenUDP(netip.AddrPortFrom(svc, 5104))
	if err != nil {
		t.Fatal(err)
	}
	u.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, _, err = u.ReadFrom(make([]byte, 1))
	check("UDP ReadFrom past its deadline", err, os.ErrDeadlineExceeded)
	u.Close()
	_, _, err = u.ReadFrom(make([]byte, 1))
	check("UDP ReadFrom after Close", err, net.ErrClosed)
	_, err = u.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(netip.AddrPortFrom(ipA, 9)))
	check("UDP WriteTo after Close", err, net.ErrClosed)

	// A closed Stack.
	a.Close()
	_, err = a.DialTCP(ctx, netip.AddrPortFrom(svc, 5101))
	check("DialTCP after Stack.Close", err, net.ErrClosed)
	_, err = a.DialContext(ctx, "tcp", "10.10.10.10:5101")
	check("DialContext after Stack.Close", err, net.ErrClosed)
	_, err = a.ListenTCP(netip.AddrPortFrom(ipA, 5102))
	check("ListenTCP after Stack.Close", err, net.ErrClosed)
	_, err = a.DialUDP(netip.AddrPort{}, netip.AddrPortFrom(svc, 5103))
	check("DialUDP after Stack.Close", err, net.ErrClosed)
}
