package stack

import (
	"net/netip"
)

// OnLink reports whether packets to dst leave without a gateway: the
// longest prefix holding dst, among the routes and the prefixes of the
// stack's addresses (its connected routes), has no next hop. It answers
// the question SO_DONTROUTE asks of a kernel socket, which gVisor has
// none of (netperf's -R 0: "send only to hosts on a link"). false when no
// route holds dst.
func (s *Stack) OnLink(dst netip.Addr) bool {
	dst = dst.Unmap()
	best, onLink := -1, false
	for _, r := range s.Routes() {
		if r.Prefix.Contains(dst) && r.Prefix.Bits() > best {
			best, onLink = r.Prefix.Bits(), !r.Via.IsValid() && len(r.NextHops) == 0
		}
	}
	for _, addrs := range s.ns.AllAddresses() {
		for _, pa := range addrs {
			a, ok := netip.AddrFromSlice(pa.AddressWithPrefix.Address.AsSlice())
			if !ok {
				continue
			}
			p := netip.PrefixFrom(a.Unmap(), pa.AddressWithPrefix.PrefixLen).Masked()
			if p.IsValid() && p.Contains(dst) && p.Bits() >= best {
				best, onLink = p.Bits(), true
			}
		}
	}
	return onLink
}
