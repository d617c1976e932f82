// Package stack is mplsnode's embedder API: it builds a gVisor netstack
// whose links push and pop MPLS labels, and hands out net.Conn, net.Listener
// and net.PacketConn values over it.
//
// A Stack owns its links (AF_PACKET sockets on existing interfaces, TAP
// devices, MPLS-in-UDP links over ordinary UDP sockets, which need no
// privilege (LinkUDP), or any lower stack.LinkEndpoint carrying Ethernet
// frames), each
// wrapped in an mplsendpoint.Endpoint; the addresses; the IP routes, with or
// without a label stack, one or several next hops; and the shared MPLS
// tables (FIB and ILM, Tables). Routes can be added and removed while
// connections run. PingLSP and TraceLSP check an LSP before it is used
// (LSP ping and traceroute, RFC 8029).
//
// # Routes
//
// The routes live in the FIB (mpls.FIB in Tables: longest-prefix match,
// copy-on-write, any number of routes), written through Tables
// (ReplaceRoutes, UpdateRoutes: the one API for the config, its reload,
// the control socket and BGP) or the Stack's SetRoutes, UpdateRoutes,
// AddRoute and RemoveRoute, which call it. Each write checks the routes
// against the links (a next hop's link is named or found from the
// connected subnet that holds it) and replaces the FIB in one atomic step.
//
// gVisor's route table never holds the FIB (it is a list: linear to
// insert into and to search). It holds, whatever the FIB's size:
//   - each link's connected subnets, on that link;
//   - the FIB's routes that lie inside a connected subnet (rare: they must
//     win over the subnet), towards the FIB NIC;
//   - default routes, IPv4 and IPv6, towards the FIB NIC.
//
// The FIB NIC is an mplsendpoint.FIBEndpoint: a NIC without addresses that
// looks each packet up in the FIB, picks the hop (per flow, for ECMP),
// resolves the hop's MAC address through the stack's neighbour table on
// the hop's link (ARP for an IPv4 next hop, NDP for IPv6, whatever the
// packet: 6PE), and hands the packet to that link's endpoint, which pushes
// Ethernet and the hop's labels and segments. Traffic the stack originates
// and answers (accepted TCP, ICMP replies) takes that path, and so does IP
// it forwards (the LER role). Dial binds the egress link's address first,
// as Linux picks a source address, since the FIB NIC has none. gVisor
// routes out of one NIC with another's source address only when both
// forward, so IP forwarding is on for every NIC (see addFIBNIC).
//
// Errors follow package net: a *net.OpError wrapping the errno a kernel
// socket would give (errors.Is(err, syscall.ECONNREFUSED)),
// os.ErrDeadlineExceeded for a deadline (Timeout() true), and
// net.ErrClosed for a conn or listener used after Close and for Dial or
// Listen on a closed Stack. The conns pass golang.org/x/net/nettest's
// TestConn.
//
// # Loopback, unreachable destinations and names
//
// Every stack has a loopback NIC with 127.0.0.1/8 and ::1/128: it talks to
// itself there as a program does over a kernel's lo (its own link
// addresses are delivered locally too). A dial or UDP write to a
// destination no route, connected subnet or local address covers fails at
// once with ENETUNREACH ("network is unreachable"), as connect(2) and
// sendto(2) do. DialContext takes host names: the stack's Resolver asks
// Config.DNS over the stack itself.
//
// # Example
//
// An HTTP client whose route to 10.10.10.10 pushes label 100 (the
// package's Example runs it against a server stack joined by a pipe, no
// root needed: go test -run '^Example$' -v ./stack; pkg.go.dev shows it
// in full):
//
//	client, err := stack.New(stack.Config{
//		Links:     []stack.Link{{Name: "veth0"}}, // AF_PACKET on an existing interface
//		Addresses: []stack.Address{{Link: "veth0", Prefix: netip.MustParsePrefix("172.16.20.20/24")}},
//		Routes: []stack.Route{{
//			Prefix: netip.MustParsePrefix("10.10.10.10/32"),
//			Via:    netip.MustParseAddr("172.16.20.21"),
//			Labels: []mpls.Label{100},
//		}},
//	})
//	if err != nil {
//		return err
//	}
//	defer client.Close()
//	hc := &http.Client{Transport: &http.Transport{DialContext: client.DialContext}}
//	resp, err := hc.Get("http://10.10.10.10/")
//
// It does not parse text: the node (package node) turns a config file into a
// Config.
package stack

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
)

// LoopbackLink is the Address.Link that puts an address on the stack's
// loopback, as `ip addr add 10.10.10.10/32 dev lo` does on Linux: a host
// address (/32, /128) the stack owns whichever link a packet for it
// arrives on (Linux's weak host model), never chosen as a source address
// unless a socket binds to it. A router ID or an LSP's tail end lives there.
const LoopbackLink = "lo"

// Address is an address the stack owns on a link.
type Address struct {
	// Link names the link, or LoopbackLink.
	Link string
	// Prefix is the address with its on-link prefix length.
	Prefix netip.Prefix
}

// Route is an IP route, optionally through a label-switched path, with
// one next hop (Via, Link, Labels) or several (NextHops: ECMP).
type Route struct {
	// Prefix is the destination.
	Prefix netip.Prefix
	// Via is the next hop; the invalid Addr means the prefix is on-link.
	// An IPv4 next hop for an IPv6 prefix (6PE, RFC 4798) needs Labels.
	Via netip.Addr
	// Link is the egress link; empty means the link with an address whose
	// prefix contains Via.
	Link string
	// Labels are pushed on packets to Prefix, outermost first. Empty means
	// plain IP.
	Labels []mpls.Label
	// NextHops, when not empty, are the route's next hops (ECMP: flows
	// spread by weight, each flow on one hop), and Via, Link and Labels
	// must be left empty. A hop's empty Device is chosen as Link is.
	NextHops []mpls.NextHop
	// MTU caps the IP MTU of the route ("mtu lock"); 0 means the link MTU
	// less the label overhead.
	MTU uint32
	// TTL, when not zero, is the TTL of pushed labels regardless of the
	// TTL model.
	TTL uint8
}

// Config describes a stack. Links, Addresses and Routes refer to each other
// by link name.
type Config struct {
	Links     []Link
	Addresses []Address
	Routes    []Route
	// ILM holds the incoming-label entries: local pops (this host's
	// labels) and, with a Forwarder, forwarding entries. Explicit null
	// (0 and 2) is always delivered locally.
	ILM []mpls.ILMEntry
	// Forwarder receives labelled frames whose ILM entry forwards them
	// (the node's label switch). Nil drops them as no_ilm_entry.
	Forwarder mplsendpoint.Forwarder
	// IPForwarder, if set, forwards transit IP packets outside gVisor
	// (package forward): every link offers it the unicast IP packets it
	// receives, and what gVisor would forward is dropped even with
	// Forwarding, so that gVisor sees only the node's own traffic.
	IPForwarder mplsendpoint.IPForwarder
	// TTLModel is uniform (the default) or pipe (RFC 3443).
	TTLModel mpls.TTLModel
	// PipeTTL is the TTL of pushed labels in the pipe model (0 means 255).
	PipeTTL uint8
	// MultipathHashSeed seeds the flow hash that picks a multipath route's
	// hop for the stack's own traffic; 0 means a random seed.
	MultipathHashSeed uint32
	// CopyTCFromDSCP sets pushed labels' TC from the top three bits of the
	// IP DSCP; otherwise TC is 0.
	CopyTCFromDSCP bool
	// GSO selects who segments TCP: the endpoint after the label push (the
	// default), gVisor before it, or nobody (MSS-sized packets only).
	GSO mplsendpoint.GSOMode
	// Forwarding enables IP forwarding between the stack's links (the LER
	// role, and unlabelled transit such as the seed's return path). Set an
	// IPForwarder with it (the node always does): without one, gVisor's own
	// IPv4 forwarding runs, which in the pinned gVisor reads a header it
	// has just returned to its buffer pool (a use-after-free the race
	// detector reports; docs/TESTING.md).
	Forwarding bool
	// TCP holds the TCP settings.
	TCP TCPOptions
	// Logger receives warnings (drops, by reason, rate-limited); nil means
	// slog.Default().
	Logger *slog.Logger
	// DNS are the name servers (port 53) the stack's Resolver asks over
	// the stack, in turn; DialContext resolves host names with it. Empty:
	// host names do not resolve (IP literals and /etc/hosts still do).
	DNS []netip.Addr
}

// gvisorForwards reports whether gVisor itself forwards transit IP: the
// stack forwards (Forwarding) and no IPForwarder takes transit from it.
func (c *Config) gvisorForwards() bool { return c.Forwarding && c.IPForwarder == nil }

// Stack is a running userspace stack. Its methods are safe for concurrent
// use.
type Stack struct {
	ns     *gstack.Stack
	tables *mpls.Tables
	logger *slog.Logger
	tcp    TCPOptions

	links   []*link
	byName  map[string]*link
	loAddrs []netip.Addr // addresses on LoopbackLink

	// fibNIC is the NIC behind the default routes (see the package doc,
	// "Routes").
	fibNIC tcpip.NICID
	fib    *mplsendpoint.FIBEndpoint
	// loNIC is the loopback NIC (127.0.0.1/8, ::1/128).
	loNIC tcpip.NICID
	// gvisorRoutes is the route table last given to gVisor.
	gvisorRoutes []tcpip.Route

	// resolver asks dns, in turn (dnsNext counts the queries' dials).
	resolver *net.Resolver
	dns      []netip.Addr
	dnsNext  atomic.Uint32

	mu     sync.Mutex // serialises ILM changes and Close
	ilm    []mpls.ILMEntry
	closed bool
}

// ICMP errors the stack sends (fragmentation needed, time exceeded, port
// unreachable, and the label switch's, which takes from the same bucket via
// Netstack().AllowICMPMessage) are limited to ICMPRateLimit a second with
// bursts of ICMPBurst, node-wide: a flood of expiring or oversize packets
// cannot make the node an ICMP amplifier. (gVisor's default, like Linux's
// icmp_msgs_per_sec, is 1000 a second.)
const (
	ICMPRateLimit = 100
	ICMPBurst     = 10
)

// New builds and starts a stack. On error nothing is left open.
func New(cfg Config) (s *Stack, err error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s = &Stack{
		ns: gstack.New(gstack.Options{
			NetworkProtocols:   []gstack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol, arp.NewProtocol},
			TransportProtocols: []gstack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6},
			// HandleLocal lets a program talk to its own
			// addresses without a wire.
			HandleLocal: true,
		}),
		tables: new(mpls.Tables),
		logger: logger,
		tcp:    cfg.TCP,
		byName: make(map[string]*link),
	}
	s.resolver = s.newResolver(cfg.DNS)
	defer func() {
		if err != nil {
			s.Close()
			s = nil
		}
	}()
	s.ns.SetICMPLimit(rate.Limit(ICMPRateLimit))
	s.ns.SetICMPBurst(ICMPBurst)
	ilm, err := buildILM(cfg.ILM)
	if err != nil {
		return s, err
	}
	s.tables.SetILM(ilm)
	s.ilm = slices.Clone(cfg.ILM)
	s.tables.SetRouteCheck(s.checkRoute)
	s.tables.SetPublishHook(s.syncRouteTable)

	for i, l := range cfg.Links {
		if err := s.addLink(tcpip.NICID(i+1), l, cfg); err != nil {
			return s, err
		}
	}
	if err := s.addFIBNIC(tcpip.NICID(len(cfg.Links)+1), cfg); err != nil {
		return s, err
	}
	if err := s.addLoopbackNIC(tcpip.NICID(len(cfg.Links) + 2)); err != nil {
		return s, err
	}
	// The TCP options follow the links: their receive queues bound the
	// default receive window. No connection exists before this.
	if err := cfg.TCP.apply(s.ns, s.receiveCapacity()); err != nil {
		return s, err
	}
	for _, a := range cfg.Addresses {
		if err := s.addAddress(a); err != nil {
			return s, err
		}
	}
	if cfg.gvisorForwards() {
		for _, p := range []tcpip.NetworkProtocolNumber{ipv4.ProtocolNumber, ipv6.ProtocolNumber} {
			if terr := s.ns.SetForwardingDefaultAndAllNICs(p, true); terr != nil {
				return s, fmt.Errorf("enable IP forwarding: %s", terr)
			}
		}
	}
	if err := s.SetRoutes(cfg.Routes); err != nil {
		return s, err
	}
	return s, nil
}

// addAddress assigns a.Prefix's address to its link and installs the
// on-link route for its prefix.
func (s *Stack) addAddress(a Address) error {
	if a.Link == LoopbackLink {
		return s.addLoopbackAddress(a)
	}
	if slices.Contains(s.loAddrs, a.Prefix.Addr()) {
		return fmt.Errorf("address %s on %s: already assigned on %s", a.Prefix.Addr(), a.Link, LoopbackLink)
	}
	l, ok := s.byName[a.Link]
	if !ok {
		return fmt.Errorf("address %s: no link named %q", a.Prefix, a.Link)
	}
	if !a.Prefix.IsValid() {
		return fmt.Errorf("address on %s: invalid prefix", a.Link)
	}
	for _, other := range s.links {
		for _, p := range other.addrs {
			if p.Addr() == a.Prefix.Addr() {
				return fmt.Errorf("address %s on %s: already assigned on %s", a.Prefix.Addr(), a.Link, other.Name)
			}
			if other != l && p.Overlaps(a.Prefix) {
				return fmt.Errorf("address %s on %s overlaps %s on %s", a.Prefix, a.Link, p, other.Name)
			}
		}
	}
	pa := tcpip.ProtocolAddress{
		Protocol: protoOf(a.Prefix.Addr()),
		AddressWithPrefix: tcpip.AddressWithPrefix{
			Address:   tcpip.AddrFromSlice(a.Prefix.Addr().AsSlice()),
			PrefixLen: a.Prefix.Bits(),
		},
	}
	if terr := s.ns.AddProtocolAddress(l.nic, pa, gstack.AddressProperties{}); terr != nil {
		return fmt.Errorf("address %s on %s: %s", a.Prefix, a.Link, terr)
	}
	l.addrs = append(l.addrs, a.Prefix)
	return nil
}

// addLoopbackAddress assigns the host address a to every link, as an
// address that is never primary: the stack accepts packets for it on any
// link (and answers ARP/NDP for it, as Linux does by default) but picks it
// as a source only when a socket binds to it.
func (s *Stack) addLoopbackAddress(a Address) error {
	if !a.Prefix.IsValid() || !a.Prefix.IsSingleIP() {
		return fmt.Errorf("address %s on %s: want a host address (/%d)", a.Prefix, LoopbackLink, a.Prefix.Addr().BitLen())
	}
	addr := a.Prefix.Addr()
	if slices.Contains(s.loAddrs, addr) {
		return fmt.Errorf("address %s on %s: already assigned on %s", addr, LoopbackLink, LoopbackLink)
	}
	for _, l := range s.links {
		for _, p := range l.addrs {
			if p.Addr() == addr {
				return fmt.Errorf("address %s on %s: already assigned on %s", addr, LoopbackLink, l.Name)
			}
		}
	}
	if len(s.links) == 0 {
		return fmt.Errorf("address %s on %s: the stack has no link to receive it on", addr, LoopbackLink)
	}
	pa := tcpip.ProtocolAddress{
		Protocol:          protoOf(addr),
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFromSlice(addr.AsSlice()), PrefixLen: addr.BitLen()},
	}
	for _, l := range s.links {
		if terr := s.ns.AddProtocolAddress(l.nic, pa, gstack.AddressProperties{PEB: gstack.NeverPrimaryEndpoint}); terr != nil {
			return fmt.Errorf("address %s on %s (via %s): %s", a.Prefix, LoopbackLink, l.Name, terr)
		}
	}
	s.loAddrs = append(s.loAddrs, addr)
	return nil
}

// SetILM replaces the incoming-label table. On error the old one stays.
func (s *Stack) SetILM(entries []mpls.ILMEntry) error {
	ilm, err := buildILM(entries)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables.SetILM(ilm)
	s.ilm = slices.Clone(entries)
	return nil
}

// buildILM adds the explicit-null local entries every host answers to
// unless the caller bound them itself.
func buildILM(entries []mpls.ILMEntry) (*mpls.ILM, error) {
	all := slices.Clone(entries)
	for _, l := range []mpls.Label{mpls.LabelIPv4ExplicitNull, mpls.LabelIPv6ExplicitNull} {
		if !slices.ContainsFunc(all, func(e mpls.ILMEntry) bool { return e.Label == l }) {
			all = append(all, mpls.ILMEntry{Label: l, Action: mpls.ILMPopLocal})
		}
	}
	return mpls.NewILM(all)
}

// subnetOf converts a masked prefix to netstack's subnet.
func subnetOf(p netip.Prefix) tcpip.Subnet {
	p = p.Masked()
	addr := tcpip.AddrFromSlice(p.Addr().AsSlice())
	n := p.Addr().BitLen()
	mask := make([]byte, n/8)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	sn, err := tcpip.NewSubnet(addr, tcpip.MaskFromBytes(mask))
	if err != nil {
		panic(fmt.Sprintf("subnet of masked prefix %s: %v", p, err)) // unreachable: p is masked
	}
	return sn
}

// Netstack returns the underlying gVisor stack, for what this API does not
// cover: its statistics, static neighbours, raw endpoints. Embedders need
// that escape hatch; a forwarding plane (package forward) attaches to it
// too, for its neighbour tables and routes. Each link is a NIC named after
// the link, whose link endpoint is the link's *mplsendpoint.Endpoint.
func (s *Stack) Netstack() *gstack.Stack { return s.ns }

// Tables returns the MPLS tables the links consult: the FIB and ILM,
// and the one API that writes routes (Tables.ReplaceRoutes,
// Tables.UpdateRoutes), checked against the stack's links.
func (s *Stack) Tables() *mpls.Tables { return s.tables }

// Close shuts the stack down: connections are aborted, links closed (their
// sockets and TAP devices released), and every goroutine the stack started
// has returned when Close returns. It always returns nil; the error is
// there so Stack fits io.Closer.
func (s *Stack) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.ns.Close() // aborts every connection
	if s.fibNIC != 0 {
		s.ns.RemoveNIC(s.fibNIC)
	}
	if s.loNIC != 0 {
		s.ns.RemoveNIC(s.loNIC)
	}
	for _, l := range s.links {
		// Removing the NIC closes its endpoint, which closes the lower link.
		s.ns.RemoveNIC(l.nic)
	}
	s.ns.Wait()
	for _, l := range s.links {
		l.endpoint.Wait()
	}
	return nil
}

// isClosed reports whether Close was called.
func (s *Stack) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// receiveCapacity returns the smallest receive queue, in bytes, of the
// links that report one (afpacket.Endpoint.ReceiveCapacity); 0 if none
// does.
func (s *Stack) receiveCapacity() int {
	capacity := 0
	for _, l := range s.links {
		if l.rxCapacity > 0 && (capacity == 0 || l.rxCapacity < capacity) {
			capacity = l.rxCapacity
		}
	}
	return capacity
}

// applySocketOptions sets per-socket options that follow from TCPOptions.
func (s *Stack) applySocketOptions(ep tcpip.Endpoint) {
	if s.tcp.NoDelay {
		ep.SocketOptions().SetDelayOption(false)
	}
}

// Stats is a snapshot of the stack's counters.
type Stats struct {
	// Links holds each link's counters, in configuration order.
	Links []LinkStats
	// Netstack holds gVisor's counters (IP, TCP, UDP, ICMP, ...); its
	// fields are live counters, read them with Value().
	Netstack tcpip.Stats
}

// Stats returns the stack's counters.
func (s *Stack) Stats() Stats {
	st := Stats{Netstack: s.ns.Stats()}
	for _, l := range s.links {
		ls := LinkStats{Name: l.Name, MPLS: l.endpoint.Stats()}
		if l.lowerStats != nil {
			ls.Lower = l.lowerStats()
		}
		st.Links = append(st.Links, ls)
	}
	return st
}
