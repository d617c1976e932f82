package stack

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
)

// dnsPort is the port Config.DNS servers answer on.
const dnsPort = 53

// errNoDNS is the dial error of the Resolver of a stack configured with
// no DNS servers.
var errNoDNS = errors.New("no DNS servers (stack.Config.DNS is empty)")

// Resolver returns a resolver whose queries go over the stack itself, to
// the servers of Config.DNS (port 53, UDP, TCP for a truncated answer),
// taken in turn. It is Go's own resolver (PreferGo): it still reads
// /etc/hosts and takes search domains, ndots, timeouts and attempts from
// /etc/resolv.conf, but never sends to the servers listed there.
// DialContext uses it for host names.
func (s *Stack) Resolver() *net.Resolver { return s.resolver }

// newResolver builds the Resolver for the stack's DNS servers.
func (s *Stack) newResolver(servers []netip.Addr) *net.Resolver {
	s.dns = make([]netip.Addr, len(servers))
	for i, a := range servers {
		s.dns[i] = a.Unmap()
	}
	return &net.Resolver{PreferGo: true, Dial: s.dialDNS}
}

// dialDNS is the Resolver's Dial: it ignores the server Go's resolver
// read from /etc/resolv.conf and connects over the stack to the next of
// Config.DNS.
func (s *Stack) dialDNS(ctx context.Context, network, _ string) (net.Conn, error) {
	if len(s.dns) == 0 {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errNoDNS}
	}
	server := s.dns[int(s.dnsNext.Add(1)-1)%len(s.dns)]
	dst := netip.AddrPortFrom(server, dnsPort)
	switch network {
	case "tcp", "tcp4", "tcp6":
		return s.DialTCP(ctx, dst)
	}
	return s.DialUDP(netip.AddrPort{}, dst)
}

// dialName resolves host with the stack's Resolver, in the family network
// names, and dials its addresses in the resolver's order until one
// answers; it returns the first error when none does, as package net
// does.
func (s *Stack) dialName(ctx context.Context, network, host string, port uint16) (net.Conn, error) {
	family := "ip"
	switch network[len(network)-1] {
	case '4':
		family = "ip4"
	case '6':
		family = "ip6"
	}
	addrs, err := s.resolver.LookupNetIP(ctx, family, host)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) {
			// Go's resolver names the server of /etc/resolv.conf it
			// thought it asked; the stack asked its own.
			fixed := *de
			fixed.Server = s.dnsServers()
			err = &fixed
		}
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var first error
	for _, a := range addrs {
		c, err := s.dialAddr(ctx, network, netip.AddrPortFrom(a.Unmap(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if first == nil {
		first = &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no suitable address", Name: host, IsNotFound: true}}
	}
	return nil, first
}

// dnsServers lists Config.DNS as "addr:53", comma-separated, for errors.
func (s *Stack) dnsServers() string {
	names := make([]string, len(s.dns))
	for i, a := range s.dns {
		names[i] = netip.AddrPortFrom(a, dnsPort).String()
	}
	return strings.Join(names, ",")
}
