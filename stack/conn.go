package stack

import (
	"net"
	"net/netip"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// socketOptions gives a userspace-stack socket the per-socket settings a
// kernel socket has: its buffer sizes (SO_SNDBUF / SO_RCVBUF) and Nagle's
// algorithm (TCP_NODELAY).
type socketOptions struct{ ep tcpip.Endpoint }

// SetReadBuffer sets the receive buffer size in bytes, as SO_RCVBUF does;
// the size is clamped to the stack's receive buffer range (for TCP
// TCPOptions.ReceiveBufferMax, which the links' receive queues bound), as
// Linux clamps to net.core.rmem_max: a socket cannot advertise more window
// than the stack lets it.
func (o socketOptions) SetReadBuffer(bytes int) error {
	so := o.ep.SocketOptions()
	lo, hi := so.ReceiveBufferLimits()
	so.SetReceiveBufferSize(min(max(int64(bytes), lo), hi), true)
	return nil
}

// SetWriteBuffer sets the send buffer size in bytes, as SO_SNDBUF does,
// clamped to the stack's send buffer range.
func (o socketOptions) SetWriteBuffer(bytes int) error {
	so := o.ep.SocketOptions()
	lo, hi := so.SendBufferLimits()
	so.SetSendBufferSize(min(max(int64(bytes), lo), hi), true)
	return nil
}

// BufferSizes returns the send and receive buffer sizes in bytes.
func (o socketOptions) BufferSizes() (send, recv int) {
	so := o.ep.SocketOptions()
	return int(so.GetSendBufferSize()), int(so.GetReceiveBufferSize())
}

// SetNoDelay turns Nagle's algorithm off (true) or on, as TCP_NODELAY does.
func (o socketOptions) SetNoDelay(noDelay bool) error {
	o.ep.SocketOptions().SetDelayOption(!noDelay)
	return nil
}

// TCPConn is a TCP connection on the userspace stack: a net.Conn with
// CloseWrite and the socket options of socketOptions, whose errors follow
// package net (see the package doc).
type TCPConn struct {
	*tcpConn
	socketOptions
}

func newTCPConn(wq *waiter.Queue, ep tcpip.Endpoint) *TCPConn {
	return &TCPConn{tcpConn: wrapTCPConn(gonet.NewTCPConn(wq, ep)), socketOptions: socketOptions{ep}}
}

// TCPListener is a TCP listener on the userspace stack. Its buffer sizes
// can be set before connections arrive (they inherit the receive buffer),
// and Accept returns *TCPConn.
type TCPListener struct {
	*gonet.TCPListener
	socketOptions
	wq *waiter.Queue

	closeOnce sync.Once
	closed    chan struct{}
}

func newTCPListener(l *gonet.TCPListener, wq *waiter.Queue, ep tcpip.Endpoint) *TCPListener {
	return &TCPListener{TCPListener: l, socketOptions: socketOptions{ep}, wq: wq, closed: make(chan struct{})}
}

// errListenerClosed is what Accept returns once the listener is closed; it
// wraps net.ErrClosed, as a kernel listener's error does.
var errListenerClosed = &net.OpError{Op: "accept", Net: "tcp", Err: net.ErrClosed}

// Accept waits for the next connection.
func (l *TCPListener) Accept() (net.Conn, error) {
	entry, notify := waiter.NewChannelEntry(waiter.ReadableEvents)
	l.wq.EventRegister(&entry)
	defer l.wq.EventUnregister(&entry)
	for {
		n, wq, terr := l.ep.Accept(nil)
		if terr == nil {
			return newTCPConn(wq, n), nil
		}
		if _, ok := terr.(*tcpip.ErrWouldBlock); !ok {
			select {
			case <-l.closed:
				return nil, errListenerClosed
			default:
			}
			return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: errnoOf(terr)}
		}
		select {
		case <-l.closed:
			return nil, errListenerClosed
		case <-notify:
		}
	}
}

// Close stops the listener; a blocked Accept returns. A second Close is
// net.ErrClosed, as in package net.
func (l *TCPListener) Close() error {
	first := false
	l.closeOnce.Do(func() { close(l.closed); first = true })
	if !first {
		return &net.OpError{Op: "close", Net: "tcp", Addr: l.Addr(), Err: net.ErrClosed}
	}
	return l.TCPListener.Close()
}

// ListenPacket is ListenUDP in package net's shape: network "udp", "udp4"
// or "udp6", address "ip:port" or ":port".
func (s *Stack) ListenPacket(network, address string) (net.PacketConn, error) {
	ap, err := listenAddrPort("udp", network, address)
	if err != nil {
		return nil, err
	}
	return s.ListenUDP(ap)
}

// UDPConn is a UDP socket on the userspace stack: a net.Conn and
// net.PacketConn with the socket options of socketOptions (the buffer
// sizes; SetNoDelay does nothing for UDP).
type UDPConn struct {
	*udpConn
	socketOptions
}

// udpConn opens a UDP socket bound to laddr when it is valid (or has a
// port) and connected to raddr when it is not nil.
func (s *Stack) udpConn(laddr netip.AddrPort, raddr *netip.AddrPort) (*UDPConn, error) {
	op, addr := "listen", laddr
	if raddr != nil {
		op, addr = "dial", *raddr
	}
	opErr := func(err error) error {
		return &net.OpError{Op: op, Net: "udp", Addr: net.UDPAddrFromAddrPort(addr), Err: err}
	}
	if s.isClosed() {
		return nil, opErr(net.ErrClosed)
	}
	var wq waiter.Queue
	ep, terr := s.ns.NewEndpoint(udp.ProtocolNumber, protoOf(addr.Addr()), &wq)
	if terr != nil {
		return nil, opErr(errnoOf(terr))
	}
	// A listening socket is bound even to "any" port 0: it needs its port.
	if raddr == nil || laddr.IsValid() || laddr.Port() != 0 {
		if terr := ep.Bind(fullAddr(laddr)); terr != nil {
			ep.Close()
			return nil, opErr(errnoOf(terr))
		}
	}
	if raddr != nil {
		if err := s.unreachable("connect", raddr.Addr()); err != nil {
			ep.Close()
			return nil, opErr(err)
		}
		if terr := ep.Connect(fullAddr(*raddr)); terr != nil {
			ep.Close()
			return nil, opErr(errnoOf(terr))
		}
	}
	c := &udpConn{UDPConn: gonet.NewUDPConn(&wq, ep), s: s}
	if raddr != nil {
		c.raddr = raddr.Addr()
	}
	return &UDPConn{udpConn: c, socketOptions: socketOptions{ep}}, nil
}
