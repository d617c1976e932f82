// Package config owns mplsnode's node config language: iproute2's words,
// one statement a line, parsed to typed values (netip types, labels as
// uint32) with the file, line and column of every item. It does no network
// I/O and imports nothing of the stack; the node converts the values to
// mpls and stack types and reports its own findings with Pos.Errorf.
//
// # Language
//
// A line is blank, a comment, or one statement. A file may hold a million
// routes (up to 64 MiB). '#' starts a comment
// anywhere on a line. Words are separated by blanks. Lines of a shell
// script paste in once any "ip netns exec NAME" prefix is removed: the
// leading "ip" before link, addr and route is optional, as are the options
// -4, -6, -M and -f inet|inet6|mpls (-family too). A config describes
// state, so the only verb is add.
//
//	link add NAME type afpacket [mtu N]
//	link add NAME type tap [bridge BRIDGE] [mtu N]
//	    A lower link. afpacket attaches to an existing interface (a veth);
//	    tap creates a TAP device, optionally enslaved to a Linux bridge.
//	    mtu is the link MTU (68..65535), default the interface's. NAME is
//	    at most 15 bytes; "lo" is the stack's loopback and needs no link.
//
//	addr add ADDRESS[/LEN] dev NAME
//	    An interface address, IPv4 or IPv6 (no /LEN: a host address).
//	    mplsnode owns it: the kernel should not hold the same address.
//	    With dev lo it must be a host address (/32, /128): the node owns it
//	    on every link, as Linux does an address on lo (a router ID, the
//	    tail of an LSP whose label is popped with dev lo).
//
//	route add PREFIX|default [encap mpls STACK [ttl N]] [via [inet|inet6] ADDR] [dev NAME] [mtu [lock] N]
//	    An IP route; with encap mpls, an FTN entry pushing STACK (labels
//	    outermost first: 100/200). ttl N (1..255) sets the pushed TTL
//	    instead of the TTL model. mtu is the route's IP MTU. Without dev,
//	    the link is the one whose connected subnet holds the next hop.
//	    An IPv6 prefix may take an IPv4 next hop when it is labelled:
//	    6PE (RFC 4798), route add 2001:db8::/48 encap mpls 300 via inet
//	    172.16.20.21; the next hop is resolved with ARP and the frame
//	    carries label 300 over the IPv6 packet.
//
//	route add PREFIX|default [mtu [lock] N] nexthop HOP [nexthop HOP ...]
//	    HOP: [encap mpls STACK [ttl N]] [via [inet|inet6] ADDR] [dev NAME] [weight N]
//	    A multipath (ECMP) route, as ip-route(8) writes it: each flow (IP
//	    source, destination, protocol and ports) sticks to one hop, and
//	    flows spread over the hops in proportion to weight (1..256,
//	    default 1). Route options (mtu) come before the first nexthop.
//	    route add 10.10.10.0/24 nexthop via 172.16.20.21 dev virt01 weight 1
//	        nexthop encap mpls 200 via inet 172.16.30.21 dev virt02
//	    (one line in the file).
//
//	-f mpls route add LABEL via [inet|inet6] ADDR [dev NAME]
//	    Pop LABEL and forward to ADDR (as IP if it was the bottom label).
//	-f mpls route add LABEL as [to] STACK via [inet|inet6] ADDR [dev NAME]
//	    Swap LABEL for STACK and forward to ADDR.
//	-f mpls route add LABEL dev lo
//	    Pop LABEL and deliver to the node's own stack. For LABEL 0 (IPv4
//	    explicit null) and 2 (IPv6 explicit null) the payload is known.
//
//	sysctl [-w] NAME=VALUE
//	    net.mpls.ip_ttl_propagate   1 uniform TTL model (default), 0 pipe (RFC 3443)
//	    net.mpls.default_ttl        1..255, default 255: the pushed TTL when not copied
//	    net.mpls.platform_labels    0..1048576: incoming labels must be below it
//	                                (default 1048576, all labels; Linux's 0 would refuse all)
//	    net.mpls.conf.DEV.input     1 (default) accept labelled frames on DEV, 0 drop them
//	    net.ipv4.ip_forward         0 (default) or 1: forward IPv4 not for the node
//	    net.ipv6.conf.all.forwarding 0 (default) or 1
//
//	set gso endpoint|stack|off
//	    Where TCP segments are cut to the MTU: endpoint (default) in the
//	    MPLS link endpoint after the labels are pushed; stack in gVisor's
//	    software GSO; off, TCP sends MSS-sized segments.
//	set tcp cc reno|cubic   congestion control (default cubic, as Linux)
//	set tcp sack on|off     selective acknowledgements (default on)
//	set tcp rack on|off     RACK-TLP loss detection (default on)
//
// Each sysctl and setting may appear once.
//
// # Labels
//
// Labels are 0..1048575 (20 bits). Pushed labels (encap mpls, as to) are
// 16 and up, except explicit null: 0 under an IPv4 route or 2 under an IPv6
// route, and only as the bottom label. Label 3 (implicit null) is never
// pushed: the previous hop pops instead. A stack holds at most 16 labels.
// Incoming labels are 0, 2 or 16 and up, below net.mpls.platform_labels.
//
// # Errors
//
// Parse returns every error it finds (up to MaxErrors) as an ErrorList of
// *Error, each naming the file, line, column and token and saying what was
// expected:
//
//	node.conf:4:34: label 3 (implicit null) cannot be pushed; use a pop route at the previous hop
//
// Besides syntax it checks: prefixes are canonical (it suggests the masked
// form), address families agree, devices are declared, links, routes,
// labels, addresses and settings are not repeated, subnets of different
// links do not overlap, next hops are on a connected subnet (or name dev),
// and unknown words get the closest valid word as a suggestion.
package config
