package verdict

import (
	"net/netip"

	"github.com/mplsnode/mplsnode/mpls"
)

// Route is one transit route as the forwarding plane needs it.
type Route struct {
	// Prefix is the destination.
	Prefix netip.Prefix
	// Device is the egress link's name.
	Device string
	// Via is the next hop; the invalid Addr means on-link (the next hop is
	// the destination itself).
	Via netip.Addr
	// Labels are pushed, outermost first (an LER push); empty means plain
	// IP.
	Labels []mpls.Label
	// MTU caps the IP MTU of the route; 0 means the link MTU less the
	// labels.
	MTU uint32
	// TTL, when not zero, is the TTL of pushed labels regardless of the
	// TTL model.
	TTL uint8
}

// Router looks up transit routes by longest prefix match. The lookup is on
// every forwarded packet: it must not allocate and must be safe for
// concurrent use.
type Router interface {
	// Lookup returns the route for dst, or false when none matches. ip is
	// the packet from its IP header on, as much as is contiguous: a route
	// with several next hops picks one by its flow (5-tuple).
	Lookup(dst netip.Addr, ip []byte) (Route, bool)
}

// Node is what a verdict needs to know of the node beyond its label and
// route tables.
type Node interface {
	// LinkMTU returns the MTU of the link named dev (the IP MTU: bytes
	// after the Ethernet header), false if the node has no such link.
	LinkMTU(dev string) (uint32, bool)
	// IsLocal reports whether a is one of the node's addresses or the
	// network or broadcast address of a subnet it is on.
	IsLocal(a netip.Addr) bool
}

// Tables are the node's tables a decision reads. A Tables is read-only
// while decisions use it.
type Tables struct {
	// Model is the TTL model (RFC 3443).
	Model mpls.TTLModel
	// MaxDepth bounds the label stack received; 0 means
	// mpls.DefaultMaxDepth.
	MaxDepth int
	// ILM maps incoming labels; nil has no entries.
	ILM *mpls.ILM
	// Seed varies the flow hash that picks a multipath label route's hop.
	Seed uint32
	// Router holds the transit IP routes; nil routes nothing (IP goes to
	// the stack).
	Router Router
	// Node answers for the links and the node's own addresses; required.
	Node Node
}

// Decide is DecideLabelled or DecideIP by ethertype, for an Ethernet
// frame already addressed to the ingress link; other ethertypes are
// Local (the stack's: ARP, or nothing the planes forward).
func (t *Tables) Decide(etype uint16, pkt []byte, size int, v *Verdict) {
	switch etype {
	case 0x8847:
		t.DecideLabelled(pkt, size, v)
	case 0x0800:
		t.DecideIP(false, pkt, size, v)
	case 0x86dd:
		t.DecideIP(true, pkt, size, v)
	default:
		*v = Verdict{Action: Local, TTLOff: -1}
	}
}

// FIBWins reports whether a FIB route to fib beats the connected subnet
// conn for an address both hold: the longer prefix wins, and the FIB's on
// a tie. Both planes decide by it (forward.FIBRouter.Lookup, the XDP mirror).
func FIBWins(fib, conn netip.Prefix) bool { return fib.Bits() >= conn.Bits() }
