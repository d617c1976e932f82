package stack

import (
	"fmt"
	"net/netip"
	"os"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/loopback"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// loopbackNICName names the loopback NIC in gVisor; like the FIB NIC's
// name it holds a ':', so no link can take it.
const loopbackNICName = ":lo"

// The loopback NIC's addresses, as a Linux "lo" has them.
var (
	loopback4 = netip.MustParsePrefix("127.0.0.1/8")
	loopback6 = netip.MustParsePrefix("::1/128")
)

// addLoopbackNIC creates gVisor's loopback NIC with 127.0.0.1/8 and
// ::1/128, so that the stack talks to itself on those addresses as a
// kernel does over lo. gVisor drops packets to or from a loopback address
// that arrive on any other NIC, so nothing from a wire reaches it.
func (s *Stack) addLoopbackNIC(id tcpip.NICID) error {
	if terr := s.ns.CreateNICWithOptions(id, loopback.New(), gstack.NICOptions{Name: loopbackNICName}); terr != nil {
		return fmt.Errorf("create the loopback NIC: %s", terr)
	}
	for _, p := range []netip.Prefix{loopback4, loopback6} {
		pa := tcpip.ProtocolAddress{
			Protocol:          protoOf(p.Addr()),
			AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFromSlice(p.Addr().AsSlice()), PrefixLen: p.Bits()},
		}
		// Never primary: gVisor picks the source of an unbound socket's
		// packet routed out of the FIB NIC (which has no address) from
		// any NIC's primary addresses, and must never pick these.
		if terr := s.ns.AddProtocolAddress(id, pa, gstack.AddressProperties{PEB: gstack.NeverPrimaryEndpoint}); terr != nil {
			return fmt.Errorf("loopback address %s: %s", p, terr)
		}
	}
	s.loNIC = id
	return nil
}

// loopbackRoutes returns gVisor's routes to the loopback NIC.
func (s *Stack) loopbackRoutes() []tcpip.Route {
	if s.loNIC == 0 {
		return nil
	}
	return []tcpip.Route{
		{Destination: subnetOf(loopback4.Masked()), NIC: s.loNIC},
		{Destination: subnetOf(loopback6), NIC: s.loNIC},
	}
}

// limitedBroadcast is 255.255.255.255.
var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// reachable reports whether the stack has somewhere to send packets to
// dst: a route in the FIB, a connected subnet, one of its own addresses,
// the loopback, or a multicast or broadcast group (which gVisor sends out
// of a NIC of its choosing). Without it, the packet would reach the FIB
// NIC and be dropped as no_route.
func (s *Stack) reachable(dst netip.Addr) bool {
	dst = dst.Unmap()
	if !dst.IsValid() || dst.IsUnspecified() || dst.IsLoopback() || dst.IsMulticast() || dst == limitedBroadcast {
		return true
	}
	if _, ok := s.tables.FIB().Lookup(dst); ok {
		return true
	}
	for _, l := range s.links {
		for _, p := range l.addrs {
			if p.Contains(dst) {
				return true
			}
		}
	}
	return s.ns.CheckLocalAddress(0, protoOf(dst), tcpip.AddrFromSlice(dst.AsSlice())) != 0
}

// unreachable returns the error a kernel socket gives for a destination
// with no route (ENETUNREACH, "network is unreachable"), or nil when dst
// is reachable. A non-empty call names the system call, as package net's
// errors do ("connect: network is unreachable").
func (s *Stack) unreachable(call string, dst netip.Addr) error {
	if s.reachable(dst) {
		return nil
	}
	if call != "" {
		return os.NewSyscallError(call, syscall.ENETUNREACH)
	}
	return syscall.ENETUNREACH
}
