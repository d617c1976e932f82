package stack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// listenBacklog matches the usual Linux somaxconn default, as package net does.
const listenBacklog = 4096

// DialContext connects to address on the named network ("tcp", "tcp4",
// "tcp6", "udp", "udp4", "udp6") through the userspace stack. It has the
// shape of net.Dialer.DialContext, so it plugs into http.Transport. The
// address is "host:port": a host that is not an IP literal is looked up
// with the stack's Resolver (Config.DNS) and its addresses tried in turn.
// A destination the stack has no route to fails at once with
// ENETUNREACH, as connect(2) does.
func (s *Stack) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
	}
	if host, portStr, err := net.SplitHostPort(address); err == nil && host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			port, err := strconv.ParseUint(portStr, 10, 16)
			if err != nil {
				return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("bad port %q", portStr)}
			}
			return s.dialName(ctx, network, host, uint16(port))
		}
	}
	ap, err := parseAddrPort(network, address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	return s.dialAddr(ctx, network, ap)
}

// dialAddr dials ap on network, which DialContext has checked.
func (s *Stack) dialAddr(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
	if network[0] == 't' {
		return s.DialTCP(ctx, ap)
	}
	return s.DialUDP(netip.AddrPort{}, ap)
}

// DialTCP opens a TCP connection to addr through the userspace stack.
// Errors are *net.OpError wrapping the errno a kernel socket would give
// (errors.Is(err, syscall.ECONNREFUSED) works), or net.ErrClosed once the
// Stack is closed. The conn's errors follow package net too: a deadline is
// os.ErrDeadlineExceeded, use after Close net.ErrClosed.
func (s *Stack) DialTCP(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	return s.DialTCPFrom(ctx, netip.AddrPort{}, addr)
}

// DialTCPFrom is DialTCP with the local address and/or port bound first;
// the zero AddrPort means any (an invalid address with a port binds the
// port only).
func (s *Stack) DialTCPFrom(ctx context.Context, local, addr netip.AddrPort) (net.Conn, error) {
	opErr := func(op string, err error) error { return s.tcpOpError(op, addr, err) }
	if s.isClosed() {
		return nil, opErr("dial", net.ErrClosed)
	}
	// Fail at once, as connect(2) does, rather than send SYNs the FIB NIC
	// drops until the connection times out.
	if err := s.unreachable("connect", addr.Addr()); err != nil {
		return nil, opErr("dial", err)
	}
	var wq waiter.Queue
	ep, terr := s.ns.NewEndpoint(tcp.ProtocolNumber, protoOf(addr.Addr()), &wq)
	if terr != nil {
		return nil, opErr("dial", errnoOf(terr))
	}
	s.applySocketOptions(ep)
	entry, notify := waiter.NewChannelEntry(waiter.WritableEvents)
	wq.EventRegister(&entry)
	defer wq.EventUnregister(&entry)
	if !local.Addr().IsValid() || local.Addr().IsUnspecified() {
		// Routes beyond the connected subnets leave through the FIB NIC,
		// which has no address of its own: take the egress link's.
		if src := s.sourceFor(addr.Addr()); src.IsValid() {
			local = netip.AddrPortFrom(src, local.Port())
		}
	}
	if local.Addr().IsValid() || local.Port() != 0 {
		if terr := ep.Bind(fullAddr(local)); terr != nil {
			ep.Close()
			return nil, opErr("bind", errnoOf(terr))
		}
	}
	terr = ep.Connect(fullAddr(addr))
	if _, ok := terr.(*tcpip.ErrConnectStarted); ok {
		select {
		case <-ctx.Done():
			ep.Close()
			return nil, opErr("dial", ctx.Err())
		case <-notify:
		}
		terr = ep.LastError()
	}
	if terr != nil {
		ep.Close()
		return nil, opErr("dial", errnoOf(terr))
	}
	return newTCPConn(&wq, ep), nil
}

// tcpOpError is a TCP socket's error for op on addr, as package net
// gives it: net.ErrClosed once the Stack is closed, whatever err was.
func (s *Stack) tcpOpError(op string, addr netip.AddrPort, err error) error {
	if s.isClosed() {
		err = net.ErrClosed
	}
	return &net.OpError{Op: op, Net: "tcp", Addr: net.TCPAddrFromAddrPort(addr), Err: err}
}

// ListenTCP listens for TCP connections on addr (an unspecified address
// listens on all of the stack's addresses of that family; the zero AddrPort
// listens on IPv4 and IPv6).
func (s *Stack) ListenTCP(addr netip.AddrPort) (net.Listener, error) {
	proto := ipv6.ProtocolNumber
	if addr.Addr().Is4() {
		proto = ipv4.ProtocolNumber
	}
	var wq waiter.Queue
	opErr := func(op string, err error) error { return s.tcpOpError(op, addr, err) }
	if s.isClosed() {
		return nil, opErr("listen", net.ErrClosed)
	}
	ep, terr := s.ns.NewEndpoint(tcp.ProtocolNumber, proto, &wq)
	if terr != nil {
		return nil, opErr("listen", errnoOf(terr))
	}
	s.applySocketOptions(ep)
	// SO_REUSEADDR, as package net sets on kernel listeners: a port whose
	// earlier connections sit in TIME_WAIT can be listened on again
	// (netperf -i asks for the previous test's data port).
	ep.SocketOptions().SetReuseAddress(true)
	if terr := ep.Bind(fullAddr(addr)); terr != nil {
		ep.Close()
		return nil, opErr("bind", errnoOf(terr))
	}
	if terr := ep.Listen(listenBacklog); terr != nil {
		ep.Close()
		return nil, opErr("listen", errnoOf(terr))
	}
	return newTCPListener(gonet.NewTCPListener(s.ns, &wq, ep), &wq, ep), nil
}

// Listen is ListenTCP in package net's shape: network "tcp", "tcp4" or
// "tcp6", address "ip:port" or ":port".
func (s *Stack) Listen(network, address string) (net.Listener, error) {
	ap, err := listenAddrPort("tcp", network, address)
	if err != nil {
		return nil, err
	}
	return s.ListenTCP(ap)
}

// listenAddrPort is the address of Listen and ListenPacket: network is
// proto ("tcp" or "udp") or proto with "4" or "6", address "ip:port" or
// ":port" (parseAddrPort). Its errors are *net.OpError, as package net's.
func listenAddrPort(proto, network, address string) (netip.AddrPort, error) {
	switch network {
	case proto, proto + "4", proto + "6":
	default:
		return netip.AddrPort{}, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	ap, err := parseAddrPort(network, address)
	if err != nil {
		return netip.AddrPort{}, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	return ap, nil
}

// DialUDP returns a connected UDP socket to raddr, bound to laddr when it is
// valid.
func (s *Stack) DialUDP(laddr, raddr netip.AddrPort) (net.Conn, error) {
	if !laddr.IsValid() || laddr.Addr().IsUnspecified() {
		if src := s.sourceFor(raddr.Addr()); src.IsValid() {
			laddr = netip.AddrPortFrom(src, laddr.Port())
		}
	}
	return s.udpConn(laddr, &raddr)
}

// ListenUDP opens an unconnected UDP socket bound to laddr.
func (s *Stack) ListenUDP(laddr netip.AddrPort) (net.PacketConn, error) {
	return s.udpConn(laddr, nil)
}

// parseAddrPort parses "ip:port" or ":port" for network, checking the
// address family against a "4"/"6" suffix.
func parseAddrPort(network, address string) (netip.AddrPort, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port %q", portStr)
	}
	var ip netip.Addr
	if host != "" {
		ip, err = netip.ParseAddr(host)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("%q is not an IP address", host)
		}
		ip = ip.Unmap()
	}
	switch network[len(network)-1] {
	case '4':
		if ip.IsValid() && !ip.Is4() {
			return netip.AddrPort{}, fmt.Errorf("%s is not an IPv4 address", ip)
		}
		if !ip.IsValid() {
			ip = netip.IPv4Unspecified()
		}
	case '6':
		if ip.IsValid() && !ip.Is6() {
			return netip.AddrPort{}, fmt.Errorf("%s is not an IPv6 address", ip)
		}
	}
	return netip.AddrPortFrom(ip, uint16(port)), nil
}

// fullAddr converts to netstack's address form; an invalid or unspecified
// address becomes the empty address (bind to any).
func fullAddr(ap netip.AddrPort) tcpip.FullAddress {
	fa := tcpip.FullAddress{Port: ap.Port()}
	if a := ap.Addr(); a.IsValid() && !a.IsUnspecified() {
		fa.Addr = tcpip.AddrFromSlice(a.AsSlice())
	}
	return fa
}

// protoOf returns the network protocol for a, IPv6 for the invalid address.
func protoOf(a netip.Addr) tcpip.NetworkProtocolNumber {
	if a.Is4() {
		return ipv4.ProtocolNumber
	}
	return ipv6.ProtocolNumber
}
