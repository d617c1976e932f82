package mplsendpoint

// splitMTU is the largest IP packet a received TCP packet larger than
// MTU() is cut into (a veth peer's GSO frame, which does not tell the
// segment size its sender chose): MTU(), and no more than the smallest
// MTU() of the node's other links (linksMTU), so that the pieces fit
// whichever link the packet is forwarded on. The sender's segments were
// no larger than its path MTU, which one of those links bounds; cutting
// smaller is within TCP's rules (any segment up to the receiver's MSS).
// So a link that carries less than its neighbours (a udp link's outer
// headers) needs no matching "mtu" on the others. The price: on a node
// whose links differ, a GSO frame bound for a larger link is cut to the
// smallest one too (more, smaller segments), since the endpoint cuts
// before the route is known.
func (e *Endpoint) splitMTU() uint32 {
	mtu := e.MTU()
	if f := e.fibNIC.Load(); f != nil {
		if m := f.linksMTU(); m != 0 && m < mtu {
			mtu = m
		}
	}
	return mtu
}

// linksMTU returns the smallest MTU() of the links next hops may leave
// by (each link's MTU less the label overhead of the FIB's deepest
// stack), 0 with no link.
func (f *FIBEndpoint) linksMTU() uint32 {
	var mtu uint32
	for _, l := range *f.links.Load() {
		if m := l.Endpoint.MTU(); m != 0 && (mtu == 0 || m < mtu) {
			mtu = m
		}
	}
	return mtu
}
