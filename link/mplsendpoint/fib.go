package mplsendpoint

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/mplsnode/mplsnode/link/neighbor"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

var _ stack.LinkEndpoint = (*FIBEndpoint)(nil)
var _ stack.GSOEndpoint = (*FIBEndpoint)(nil)

// FIBEndpoint is the gVisor NIC behind the stack's default routes: every
// packet the stack sends beyond its connected subnets (its own traffic,
// and IP it forwards) is written to it, and it routes the packet by the
// FIB (mpls.Tables.FIB): longest-prefix match on the destination, a next
// hop chosen per flow (mpls.FlowHash: ECMP), the next hop's MAC resolved
// through the stack's neighbour table on the hop's link (link/neighbor:
// ARP for an IPv4 next hop, NDP for IPv6, whatever the packet's family:
// 6PE), and the packet handed to that link's Endpoint, which pushes
// Ethernet and the hop's labels and segments GSO packets.
//
// So gVisor's own route table holds only the connected subnets and two
// default routes to this NIC, however many routes the FIB holds (gVisor's
// table is a list: linear to insert into and to search).
//
// It has no addresses and no link address, needs no link resolution of its
// own, and never receives. Drops are counted on the hop's link endpoint
// (no_neighbor) or, for a destination no route covers, on the first link
// (no_route). Create it with NewFIB, register its links with SetLinks.
type FIBEndpoint struct {
	tables     *mpls.Tables
	resolve    Resolver
	seed       uint32
	gsoMode    GSOMode
	forwarding bool

	links atomic.Pointer[map[string]*FIBLink]
	first atomic.Pointer[Endpoint]

	mtuCache atomic.Pointer[fibMTU]

	hops *neighbor.Table[*FIBLink, hopPacket]

	dispatcher atomic.Pointer[stack.NetworkDispatcher]
	listPool   sync.Pool // *stack.PacketBufferList
}

// Resolver resolves addr to a link address on NIC nic, as
// gVisor's stack.Stack.GetLinkAddress: nil when the answer is known (and
// onResolve was called with it, synchronously), ErrWouldBlock while
// resolution runs (onResolve is called later), another error otherwise.
type Resolver = neighbor.Resolver

// FIBLink is a link a FIB next hop may leave by.
type FIBLink struct {
	// Endpoint is the link's MPLS endpoint.
	Endpoint *Endpoint
	// NIC is the link's NIC in the stack (for neighbour resolution).
	NIC tcpip.NICID
}

// FIBOptions configures a FIBEndpoint.
type FIBOptions struct {
	// Tables holds the FIB; nil means an empty one.
	Tables *mpls.Tables
	// Resolve resolves next hops; required.
	Resolve Resolver
	// Seed varies the flow hash per node (against hash polarisation).
	Seed uint32
	// GSOMode is the links' GSO mode, which this NIC advertises to the
	// stack in their stead.
	GSOMode GSOMode
	// Forwarding says the node forwards IP. Off, packets the stack would
	// forward (their source is not the route's local address: not the
	// node's own) are dropped (forwarding_disabled): the stack must run
	// with IP forwarding on for routes through this NIC to be usable at
	// all, so this is where a host stops forwarding.
	Forwarding bool
}

// fibHop is a next hop's neighbour state: the link it leaves by and the
// packets waiting for its MAC address (neighbor.DefaultMaxQueued of them
// at most, neighbor.DefaultMaxEntries next hops).
type fibHop = neighbor.Entry[*FIBLink, hopPacket]

// hopPacket is a packet for a next hop, with the labels its route gave it
// (they belong to an immutable FIB) and the route's fixed label TTL.
type hopPacket struct {
	pkt    *stack.PacketBuffer
	labels []mpls.Label
	ttl    uint8
}

type fibMTU struct {
	fib   *mpls.FIB
	links *map[string]*FIBLink
	mtu   uint32
}

// NewFIB returns a FIB endpoint. opts.Resolve must be set.
func NewFIB(opts FIBOptions) *FIBEndpoint {
	t := opts.Tables
	if t == nil {
		t = &mpls.Tables{}
	}
	f := &FIBEndpoint{tables: t, resolve: opts.Resolve, seed: opts.Seed, gsoMode: opts.GSOMode, forwarding: opts.Forwarding}
	empty := map[string]*FIBLink{}
	f.links.Store(&empty)
	f.hops = neighbor.New(neighbor.Options[*FIBLink, hopPacket]{Resolve: opts.Resolve, Handler: neighbor.Handler[*FIBLink, hopPacket]{
		Write: f.writeHop,
		Drop:  f.dropHop,
		Keep:  keepPacket,
	}})
	f.listPool.New = func() any { return new(stack.PacketBufferList) }
	return f
}

// SetLinks sets the links next hops may leave by, keyed by device name;
// first is the link that counts no_route drops.
func (f *FIBEndpoint) SetLinks(links map[string]*FIBLink, first *Endpoint) {
	f.links.Store(&links)
	f.first.Store(first)
	for _, l := range links {
		l.Endpoint.fibNIC.Store(f)
	}
}

// MTU implements stack.LinkEndpoint: the smallest link MTU less the label
// overhead of the FIB's deepest stack, and no more than the smallest
// explicit route MTU, so that TCP's MSS fits every route. (Egress segments
// GSO packets to each route's own fit in any case.)
func (f *FIBEndpoint) MTU() uint32 {
	fib := f.tables.FIB()
	links := f.links.Load()
	if c := f.mtuCache.Load(); c != nil && c.fib == fib && c.links == links {
		return c.mtu
	}
	var mtu uint32
	for _, l := range *links {
		m := l.Endpoint.LinkMTU()
		if oh := uint32(fib.MaxLabels() * mpls.EntryLen); m > oh {
			m -= oh
		} else {
			m = 0
		}
		if mtu == 0 || m < mtu {
			mtu = m
		}
	}
	if m := fib.MinMTU(); m != 0 && m < mtu {
		mtu = m
	}
	if mtu == 0 {
		mtu = header.IPv6MinimumMTU
	}
	f.mtuCache.Store(&fibMTU{fib: fib, links: links, mtu: mtu})
	return mtu
}

// SetMTU implements stack.LinkEndpoint; the MTU follows the links.
func (*FIBEndpoint) SetMTU(uint32) {}

// MaxHeaderLength implements stack.LinkEndpoint: the largest of the
// links', so the stack leaves room for any hop's Ethernet and labels.
func (f *FIBEndpoint) MaxHeaderLength() uint16 {
	var m uint16
	for _, l := range *f.links.Load() {
		m = max(m, l.Endpoint.MaxHeaderLength())
	}
	return m
}

// LinkAddress implements stack.LinkEndpoint: none.
func (*FIBEndpoint) LinkAddress() tcpip.LinkAddress { return "" }

// SetLinkAddress implements stack.LinkEndpoint; ignored.
func (*FIBEndpoint) SetLinkAddress(tcpip.LinkAddress) {}

// Capabilities implements stack.LinkEndpoint: none (no resolution of its
// own; checksums are the stack's or the egress endpoint's).
func (*FIBEndpoint) Capabilities() stack.LinkEndpointCapabilities { return 0 }

// Attach implements stack.LinkEndpoint.
func (f *FIBEndpoint) Attach(d stack.NetworkDispatcher) {
	if d == nil {
		f.dispatcher.Store(nil)
		return
	}
	f.dispatcher.Store(&d)
}

// IsAttached implements stack.LinkEndpoint.
func (f *FIBEndpoint) IsAttached() bool { return f.dispatcher.Load() != nil }

// Wait implements stack.LinkEndpoint.
func (*FIBEndpoint) Wait() {}

// ARPHardwareType implements stack.LinkEndpoint.
func (*FIBEndpoint) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareNone }

// AddHeader implements stack.LinkEndpoint: nothing; the egress link
// pushes its header once the next hop is known.
func (*FIBEndpoint) AddHeader(*stack.PacketBuffer) {}

// ParseHeader implements stack.LinkEndpoint.
func (*FIBEndpoint) ParseHeader(*stack.PacketBuffer) bool { return true }

// Close implements stack.LinkEndpoint: it drops the packets waiting for a
// neighbour.
func (f *FIBEndpoint) Close() { f.hops.Close() }

// SetOnCloseAction implements stack.LinkEndpoint.
func (*FIBEndpoint) SetOnCloseAction(func()) {}

// GSOMaxSize implements stack.GSOEndpoint, as the links.
func (f *FIBEndpoint) GSOMaxSize() uint32 { return gsoMaxSizeFor(f.gsoMode) }

// SupportedGSO implements stack.GSOEndpoint, as the links.
func (f *FIBEndpoint) SupportedGSO() stack.SupportedGSO { return supportedGSOFor(f.gsoMode) }

// WritePackets implements stack.LinkEndpoint: each packet is routed by the
// FIB and written on its hop's link (or queued while the hop's MAC address
// is resolved). Packets no route covers are dropped (no_route); multicast
// and link-local packets (the stack's own IPv6 chatter on this NIC) are
// discarded silently: they have no business beyond a link.
func (f *FIBEndpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	fib := f.tables.FIB()
	n := 0
	for _, pkt := range pkts.AsSlice() {
		n++
		dst, ok := netDst(pkt)
		if !ok || dst.IsMulticast() || dst.IsLinkLocalUnicast() || dst.IsUnspecified() {
			continue
		}
		if !f.forwarding && !fromRouteSource(pkt) {
			if first := f.first.Load(); first != nil {
				first.drop(DropForwardingDisabled, -1, nil)
			}
			continue
		}
		ent, ok := fib.Lookup(dst)
		if !ok {
			if first := f.first.Load(); first != nil {
				first.drop(DropNoRoute, -1, nil)
			}
			continue
		}
		hop := ent.Group.Hops[0]
		if len(ent.Group.Hops) > 1 {
			hop = *ent.Group.Select(f.flowHash(pkt))
		}
		h, l := f.hop(&hop, dst)
		if h == nil {
			if l != nil {
				l.Endpoint.drop(DropNoNeighbor, -1, nil) // too many next hops
			} else if first := f.first.Load(); first != nil {
				first.drop(DropNoRoute, -1, nil)
			}
			continue
		}
		f.hops.Send(h, hopPacket{pkt: pkt, labels: hop.Labels, ttl: ent.TTL})
	}
	return n, nil
}

// fromRouteSource reports whether pkt's IP source is its route's local
// address: the node's own packet, not one it forwards.
func fromRouteSource(pkt *stack.PacketBuffer) bool {
	nh := pkt.NetworkHeader().Slice()
	local := pkt.EgressRoute.LocalAddress
	switch pkt.NetworkProtocolNumber {
	case header.IPv4ProtocolNumber:
		return len(nh) >= header.IPv4MinimumSize && header.IPv4(nh).SourceAddress() == local
	case header.IPv6ProtocolNumber:
		return len(nh) >= header.IPv6MinimumSize && header.IPv6(nh).SourceAddress() == local
	}
	return false
}

// flowHash hashes pkt's IP header and first transport bytes (the ports).
func (f *FIBEndpoint) flowHash(pkt *stack.PacketBuffer) uint32 {
	var buf [header.IPv6MinimumSize + 4]byte
	nh := pkt.NetworkHeader().Slice()
	if len(nh) > header.IPv6MinimumSize {
		nh = nh[:header.IPv6MinimumSize] // IPv4 options: hash the fixed part
	}
	n := copy(buf[:], nh)
	if len(nh) >= header.IPv4MinimumSize && nh[0]>>4 == 4 {
		buf[0] = 0x45 // ports follow the fixed header in buf
		n = header.IPv4MinimumSize
	}
	n += copy(buf[n:], pkt.TransportHeader().Slice())
	return mpls.FlowHash(f.seed, buf[:min(n, len(buf))])
}

// hop returns the neighbour state of hop (towards dst when on-link) and
// its link; nil, nil when its device is not a link, nil and the link when
// the table holds all the next hops it may.
func (f *FIBEndpoint) hop(hop *mpls.NextHop, dst netip.Addr) (*fibHop, *FIBLink) {
	addr := hop.Via
	if !addr.IsValid() {
		addr = dst
	}
	key := neighbor.Key{Link: hop.Device, Addr: addr}
	if h := f.hops.Lookup(key); h != nil {
		return h, h.Value
	}
	l, ok := (*f.links.Load())[hop.Device]
	if !ok {
		return nil, nil
	}
	return f.hops.Add(key, l.NIC, l), l
}

// keepPacket is what waits for a hop's MAC address in place of a packet
// WritePackets was given: a clone, not a reference. The caller still
// reads the packet after WritePackets returns (gVisor's NIC takes its size
// for its counters) while writeHop, in the goroutine that handles the
// neighbour's answer, pushes the link header on what was queued; the clone
// has its own header offsets, and its bytes are copied on that write (the
// race detector caught the shared packet in stack's TestNetConn).
func keepPacket(q hopPacket) hopPacket {
	q.pkt = q.pkt.Clone()
	return q
}

// writeHop writes q to mac on h's link; a queued packet (keepPacket's
// clone) is released after.
func (f *FIBEndpoint) writeHop(h *fibHop, q hopPacket, mac tcpip.LinkAddress, queued bool) {
	f.write(h.Value.Endpoint, q.pkt, mac, q.labels, q.ttl)
	if queued {
		q.pkt.DecRef()
	}
}

// dropHop counts q on h's link as no_neighbor (unless the endpoint is
// closing); a queued packet is released.
func (f *FIBEndpoint) dropHop(h *fibHop, q hopPacket, why neighbor.Reason, queued bool) {
	if why != neighbor.Closed {
		h.Value.Endpoint.drop(DropNoNeighbor, -1, nil)
	}
	if queued {
		q.pkt.DecRef()
	}
}

// write pushes the hop's header on pkt and writes it on link ep.
// The caller keeps its reference to pkt.
func (f *FIBEndpoint) write(ep *Endpoint, pkt *stack.PacketBuffer, mac tcpip.LinkAddress, labels []mpls.Label, fixedTTL uint8) {
	pkt.EgressRoute.LocalLinkAddress = ep.LinkAddress()
	pkt.EgressRoute.RemoteLinkAddress = mac
	ep.pushHeader(pkt, labels, fixedTTL)
	l := f.listPool.Get().(*stack.PacketBufferList)
	l.PushBack(pkt.IncRef())
	_, _ = ep.WritePackets(*l) // counts its own drops
	l.Reset()
	f.listPool.Put(l)
}
