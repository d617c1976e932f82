package stack

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
)

// This file is the edge where gVisor's errors become package net's: the
// errno a kernel socket would report (errors.Is(err, syscall.ECONNREFUSED)),
// net.ErrClosed for a closed connection, listener or Stack, and
// os.ErrDeadlineExceeded for a deadline, each inside a *net.OpError as
// package net returns them.

// errnos maps netstack errors to the errno a kernel socket would report.
var errnos = []struct {
	err   tcpip.Error
	errno syscall.Errno
}{
	{&tcpip.ErrConnectionRefused{}, syscall.ECONNREFUSED},
	{&tcpip.ErrConnectionReset{}, syscall.ECONNRESET},
	{&tcpip.ErrConnectionAborted{}, syscall.ECONNABORTED},
	{&tcpip.ErrAborted{}, syscall.ECONNABORTED},
	{&tcpip.ErrTimeout{}, syscall.ETIMEDOUT},
	{&tcpip.ErrNetworkUnreachable{}, syscall.ENETUNREACH},
	{&tcpip.ErrNoNet{}, syscall.ENETUNREACH},
	{&tcpip.ErrHostUnreachable{}, syscall.EHOSTUNREACH},
	{&tcpip.ErrHostDown{}, syscall.EHOSTDOWN},
	{&tcpip.ErrPortInUse{}, syscall.EADDRINUSE},
	{&tcpip.ErrDuplicateAddress{}, syscall.EADDRINUSE},
	{&tcpip.ErrBadLocalAddress{}, syscall.EADDRNOTAVAIL},
	{&tcpip.ErrNoPortAvailable{}, syscall.EAGAIN},
	{&tcpip.ErrAlreadyBound{}, syscall.EINVAL},
	{&tcpip.ErrAlreadyConnected{}, syscall.EISCONN},
	{&tcpip.ErrNotConnected{}, syscall.ENOTCONN},
	{&tcpip.ErrMessageTooLong{}, syscall.EMSGSIZE},
	{&tcpip.ErrNoBufferSpace{}, syscall.ENOBUFS},
	{&tcpip.ErrNotPermitted{}, syscall.EPERM},
	{&tcpip.ErrAddressFamilyNotSupported{}, syscall.EAFNOSUPPORT},
	{&tcpip.ErrInvalidEndpointState{}, syscall.EINVAL},
	{&tcpip.ErrInvalidOptionValue{}, syscall.EINVAL},
	// A write after shutdown(SHUT_WR) or after the peer's reset: Linux
	// says EPIPE.
	{&tcpip.ErrClosedForSend{}, syscall.EPIPE},
}

// errnoByText maps the text of each netstack error in errnos to its errno:
// gonet's conns report errors as errors.New(err.String()), so the text is
// all that is left of the type by the time they reach us.
var errnoByText = func() map[string]syscall.Errno {
	m := make(map[string]syscall.Errno, len(errnos))
	for _, e := range errnos {
		if _, dup := m[e.err.String()]; !dup {
			m[e.err.String()] = e.errno
		}
	}
	return m
}()

// errnoOf maps a netstack error to the errno a kernel socket would report,
// so callers can test errors with errors.Is(err, syscall.ECONNREFUSED) as
// they would with package net. Errors with no errno counterpart keep
// netstack's text.
func errnoOf(err tcpip.Error) error {
	if errno, ok := errnoByText[err.String()]; ok {
		return errno
	}
	return errors.New(err.String())
}

// netError turns an error from gonet into package net's form: closed
// (the caller closed the socket) gives net.ErrClosed, a timeout
// os.ErrDeadlineExceeded (Timeout() stays true), a known netstack error
// its errno. io.EOF stays io.EOF unless closed.
func netError(err error, closed bool, op string, local, remote net.Addr) error {
	if err == nil {
		return nil
	}
	var oe *net.OpError
	if !errors.As(err, &oe) {
		if closed {
			return &net.OpError{Op: op, Net: "tcp", Source: local, Addr: remote, Err: net.ErrClosed}
		}
		return err
	}
	fixed := *oe
	switch {
	case closed:
		fixed.Err = net.ErrClosed
	case isTimeout(oe.Err):
		fixed.Err = os.ErrDeadlineExceeded
	default:
		if errno, ok := errnoByText[oe.Err.Error()]; ok {
			fixed.Err = errno
		}
	}
	return &fixed
}

func isTimeout(err error) bool {
	t, ok := err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

// tcpConn is a gonet.TCPConn whose errors follow package net.
type tcpConn struct {
	*gonet.TCPConn
	closed atomic.Bool
}

func wrapTCPConn(c *gonet.TCPConn) *tcpConn { return &tcpConn{TCPConn: c} }

func (c *tcpConn) opError(op string, err error) error {
	return netError(err, c.closed.Load(), op, c.LocalAddr(), c.RemoteAddr())
}

// Read implements net.Conn.
func (c *tcpConn) Read(b []byte) (int, error) {
	if c.closed.Load() {
		return 0, c.opError("read", net.ErrClosed)
	}
	n, err := c.TCPConn.Read(b)
	if err != nil && (err != io.EOF || c.closed.Load()) {
		err = c.opError("read", err)
	}
	return n, err
}

// Write implements net.Conn.
func (c *tcpConn) Write(b []byte) (int, error) {
	if c.closed.Load() {
		return 0, c.opError("write", net.ErrClosed)
	}
	n, err := c.TCPConn.Write(b)
	return n, c.opError("write", err)
}

// Close implements net.Conn; a second Close is net.ErrClosed, as in
// package net.
func (c *tcpConn) Close() error {
	if c.closed.Swap(true) {
		return c.opError("close", net.ErrClosed)
	}
	return c.TCPConn.Close()
}

// CloseRead shuts down the reading side (see gonet.TCPConn.CloseRead).
func (c *tcpConn) CloseRead() error { return c.opError("close", c.TCPConn.CloseRead()) }

// CloseWrite shuts down the writing side, sending FIN.
func (c *tcpConn) CloseWrite() error { return c.opError("close", c.TCPConn.CloseWrite()) }

// SetDeadline implements net.Conn.
func (c *tcpConn) SetDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opError("set", net.ErrClosed)
	}
	return c.TCPConn.SetDeadline(t)
}

// SetReadDeadline implements net.Conn.
func (c *tcpConn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opError("set", net.ErrClosed)
	}
	return c.TCPConn.SetReadDeadline(t)
}

// SetWriteDeadline implements net.Conn.
func (c *tcpConn) SetWriteDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opError("set", net.ErrClosed)
	}
	return c.TCPConn.SetWriteDeadline(t)
}

// udpConn is a gonet.UDPConn whose errors follow package net, as tcpConn.
type udpConn struct {
	*gonet.UDPConn
	closed atomic.Bool
	// s is the stack the socket is on, asked for a route before each
	// write: gVisor would hand a datagram with none to the FIB NIC, which
	// drops it, and report success.
	s *Stack
	// raddr is the connected peer's address; invalid when unconnected.
	raddr netip.Addr
}

// noRoute returns the write error for a datagram to dst when the stack
// has no route to it: a *net.OpError wrapping ENETUNREACH, as a kernel
// socket's sendto(2) reports it.
func (c *udpConn) noRoute(dst net.Addr, a netip.Addr) error {
	if c.s == nil {
		return nil
	}
	if err := c.s.unreachable("", a); err != nil {
		return &net.OpError{Op: "write", Net: "udp", Source: c.LocalAddr(), Addr: dst, Err: err}
	}
	return nil
}

func (c *udpConn) opError(op string, err error) error {
	if err == nil {
		return nil
	}
	var oe *net.OpError
	if !errors.As(err, &oe) {
		if c.closed.Load() {
			return &net.OpError{Op: op, Net: "udp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: net.ErrClosed}
		}
		return err
	}
	return netError(err, c.closed.Load(), op, nil, nil)
}

// Read implements net.Conn.
func (c *udpConn) Read(b []byte) (int, error) {
	if c.closed.Load() {
		return 0, c.opError("read", net.ErrClosed)
	}
	n, err := c.UDPConn.Read(b)
	return n, c.opError("read", err)
}

// ReadFrom implements net.PacketConn.
func (c *udpConn) ReadFrom(b []byte) (int, net.Addr, error) {
	if c.closed.Load() {
		return 0, nil, c.opError("read", net.ErrClosed)
	}
	n, addr, err := c.UDPConn.ReadFrom(b)
	return n, addr, c.opError("read", err)
}

// Write implements net.Conn.
func (c *udpConn) Write(b []byte) (int, error) {
	if c.closed.Load() {
		return 0, c.opError("write", net.ErrClosed)
	}
	if c.raddr.IsValid() {
		if err := c.noRoute(c.RemoteAddr(), c.raddr); err != nil {
			return 0, err
		}
	}
	n, err := c.UDPConn.Write(b)
	return n, c.opError("write", err)
}

// WriteTo implements net.PacketConn.
func (c *udpConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if c.closed.Load() {
		return 0, c.opError("write", net.ErrClosed)
	}
	if ua, ok := addr.(*net.UDPAddr); ok {
		if err := c.noRoute(addr, ua.AddrPort().Addr()); err != nil {
			return 0, err
		}
	}
	n, err := c.UDPConn.WriteTo(b, addr)
	return n, c.opError("write", err)
}

// Close implements net.Conn; a second Close is net.ErrClosed.
func (c *udpConn) Close() error {
	if c.closed.Swap(true) {
		return c.opError("close", net.ErrClosed)
	}
	return c.UDPConn.Close()
}
