package forward

import (
	"net/netip"
	"slices"

	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// LocalAddrs returns the addresses IP packets to which are the node's own,
// never transit: the stack's addresses and, for each IPv4 subnet wider
// than /31, its network and broadcast addresses (RFC 1812 §4.2.3.1, §5.3.5).
// The result is sorted, so two calls over the same addresses compare equal
// (the stack keeps them in a map). Both planes take their local set from
// it: the label switch and the XDP mirror.
func LocalAddrs(ns *gstack.Stack) []netip.Addr {
	var out []netip.Addr
	add := func(b []byte) {
		if a, ok := netip.AddrFromSlice(b); ok {
			out = append(out, a)
		}
	}
	for _, addrs := range ns.AllAddresses() {
		for _, pa := range addrs {
			add(pa.AddressWithPrefix.Address.AsSlice())
			if pa.Protocol == header.IPv4ProtocolNumber && pa.AddressWithPrefix.PrefixLen < 31 {
				sn := pa.AddressWithPrefix.Subnet()
				id, bc := sn.ID(), sn.Broadcast()
				add(id.AsSlice())
				add(bc.AsSlice())
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
