package bgp

import (
	"context"
	"net"
	"net/netip"

	"github.com/mplsnode/mplsnode/mpls"
)

// Family is an address family the speaker exchanges.
type Family uint8

// Families: labeled unicast only (SAFI 4).
const (
	// IPv4LabeledUnicast is AFI 1, SAFI 4.
	IPv4LabeledUnicast Family = iota + 1
	// IPv6LabeledUnicast is AFI 2, SAFI 4.
	IPv6LabeledUnicast
)

// String returns the config word: ipv4-labeled-unicast or ipv6-labeled-unicast.
func (f Family) String() string {
	switch f {
	case IPv4LabeledUnicast:
		return "ipv4-labeled-unicast"
	case IPv6LabeledUnicast:
		return "ipv6-labeled-unicast"
	}
	return "unknown-family"
}

// LabelMode says which label a local network is advertised with.
type LabelMode uint8

// Label modes of a Network.
const (
	// LabelFromRange binds a label from the speaker's range, popped to the
	// node itself (ILM pop-local).
	LabelFromRange LabelMode = iota
	// LabelExplicitNull advertises 0 (IPv4) or 2 (IPv6); the node pops
	// explicit nulls to itself already.
	LabelExplicitNull
	// LabelImplicitNull advertises 3: the neighbour pops (PHP) and sends
	// plain IP.
	LabelImplicitNull
	// LabelFixed advertises Network.Label and binds it to pop-local.
	LabelFixed
)

// Network is a prefix the node originates.
type Network struct {
	Prefix netip.Prefix
	Mode   LabelMode
	// Label is the label for LabelFixed.
	Label mpls.Label
}

// Neighbor is one BGP peer.
type Neighbor struct {
	// Address is the neighbour's address (the session's remote end).
	Address netip.Addr
	// RemoteAS is its AS number; equal to Config.AS makes it internal.
	RemoteAS uint32
	// Families are the families negotiated; empty means both.
	Families []Family
	// Local is the node's address the session runs from: an address of
	// the node on the neighbour's link.
	Local netip.Addr
	// NextHop4 and NextHop6 are the next hops advertised to this
	// neighbour for IPv4 and IPv6 routes (the node's addresses on the
	// neighbour's link; NextHop6 may be an IPv4-mapped address, for 6PE
	// over a link without IPv6, RFC 4798). A family without one is not
	// advertised.
	NextHop4, NextHop6 netip.Addr
	// NextHopSelf re-advertises the routes learned from other neighbours
	// to this one, each with a local label swapped to the received one.
	NextHopSelf bool
	// HoldTime is the proposed hold time in seconds; 0 means 90.
	HoldTime uint16
	// Port is the neighbour's BGP port; 0 means 179.
	Port uint16
}

// Config describes a speaker.
type Config struct {
	// AS is the node's AS number.
	AS uint32
	// RouterID is the BGP identifier (an IPv4 address).
	RouterID netip.Addr
	// Neighbors are the peers, each with a distinct address.
	Neighbors []Neighbor
	// LabelLow and LabelHigh bound the labels the speaker binds (both
	// included); they must not collide with the node's static label routes.
	LabelLow, LabelHigh mpls.Label
	// Networks are the prefixes the node originates.
	Networks []Network
	// ListenPort is the port the userspace listener takes; 0 means 179.
	ListenPort uint16
}

// Resolution is how a BGP next hop is reached now.
type Resolution struct {
	// Via is the directly connected neighbour packets go to.
	Via netip.Addr
	// Device is the egress link.
	Device string
	// Labels are the transport labels already needed to reach the next
	// hop (from a labelled route that covers it), outermost first; empty
	// when the next hop is connected or behind a plain IP route.
	Labels []mpls.Label
}

// Changes is one batch of table edits.
type Changes struct {
	// AddRoutes adds or replaces the route to each entry's Prefix; each
	// has one next hop. A hop with no Labels is a plain IP route via its
	// Via (the BGP label was implicit null and no transport label is
	// needed).
	AddRoutes []mpls.Route
	// DelRoutes removes the routes bgp installed to these prefixes.
	DelRoutes []netip.Prefix
	// AddILM adds or replaces the entry for each Label.
	AddILM []mpls.ILMEntry
	// DelILM removes the entries bgp installed for these labels.
	DelILM []mpls.Label
}

// Tables is what the speaker needs from the node's forwarding tables.
// Routes written through it are BGP routes: a static route (from the
// config file or the control socket) to the same prefix takes precedence
// (administrative distance static 1 < BGP 20) and the BGP route shows again
// when the static one goes.
type Tables interface {
	// Resolve returns how nh is reached through connected routes and the
	// node's routes (recursively through labelled ones), or false.
	Resolve(nh netip.Addr) (Resolution, bool)
	// Apply makes one batch of changes, deletions first.
	Apply(Changes) error
}

// Transport opens the sessions' TCP connections in the node's userspace
// stack (*stack.Stack implements it).
type Transport interface {
	ListenTCP(addr netip.AddrPort) (net.Listener, error)
	DialTCPFrom(ctx context.Context, local, remote netip.AddrPort) (net.Conn, error)
}
