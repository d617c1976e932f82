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
//	link add NAME type afpacket [mtu N] [queues N] [mode auto|mmsg|ring] [qdisc-bypass on|off] [busy-poll USEC] [rx-ring-frames N]
//	link add NAME type tap [bridge BRIDGE] [address MAC] [mtu N] [queues N]
//	link add NAME type xdp [mtu N] [queues N]
//	link add NAME type udp local ADDR[:PORT] remote ADDR[:PORT] [mtu N] [source-ports MIN-MAX] [flows N] [checksum compute|zero] [ttl N] [dscp N] [gso on|off] [gro on|off]
//	    A lower link. afpacket attaches to an existing interface (a veth);
//	    tap creates a TAP device (virtio-net offloads on), optionally
//	    enslaved to a Linux bridge; xdp attaches to an existing interface
//	    with AF_XDP sockets and an XDP program that hands every frame of
//	    the interface to them (the kernel sees none). mtu is the link MTU
//	    (68..65535), default the interface's. queues (1..256, default 1)
//	    is a multi-queue TAP's number of queues, or the number of the
//	    interface's RX queues an xdp link serves, one socket each. address
//	    is the MAC of mplsnode's end of a TAP (default: random, locally
//	    administered; never the TAP device's own MAC). NAME is
//	    at most 15 bytes; "lo" is the stack's loopback and needs no link.
//	    queues (1..64, default 1) opens that many AF_PACKET sockets in one
//	    PACKET_FANOUT hash group (a flow stays on one), each read by its own
//	    goroutine: give it the number of cores. mode says how frames move:
//	    ring, memory-mapped packet rings (TPACKET_V3 receive, TPACKET_V2
//	    transmit); mmsg, recvmmsg/sendmmsg; auto (default), ring where the
//	    kernel sets the rings up, else mmsg. `mplsnode stats` shows what
//	    each link runs. qdisc-bypass on (default off) sends past the
//	    interface's queueing discipline (PACKET_QDISC_BYPASS): no tc
//	    shaping, and captures on the interface miss the frames sent.
//	    busy-poll USEC (0..1000; 0: off) trades CPU for latency: after a
//	    receive batch one goroutine keeps checking the rings of every
//	    busy-polled link until USEC has passed since the last frame (up
//	    to a core while frames keep coming, yielded to any thread that
//	    wants it; idle after). Default: adaptive 100 on a node that
//	    forwards (more than one link, or ip_forward on): it spins only
//	    after a batch that was followed within 100 us the last time;
//	    off on other nodes.
//	    rx-ring-frames N (64..32768, default 2048) sizes each queue's
//	    receive ring: the frames the kernel holds while the node is not
//	    running (2 KiB of resident memory each at MTU 1500); not with
//	    mode mmsg.
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
//	    The words mplsnode route show writes after a route (proto
//	    static|bgp|kernel|boot, metric N, scope link|global) are accepted
//	    anywhere in it (and in a -f mpls route), so that its lines parse
//	    back; they change nothing.
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
//	-f mpls route add LABEL nexthop HOP [nexthop HOP ...]
//	    HOP: [as [to] STACK] via [inet|inet6] ADDR [dev NAME] [weight N]
//	    A multipath (ECMP) label route: each hop swaps LABEL for STACK,
//	    or without as pops it and forwards; each flow (the label stack
//	    and the inner IP 5-tuple, or the entropy label of RFC 6790) sticks
//	    to one hop, flows spread in proportion to weight (1..256, default
//	    1). One nexthop is the one-hop route.
//
//	sysctl [-w] NAME=VALUE
//	    net.mpls.ip_ttl_propagate   1 uniform TTL model (default), 0 pipe (RFC 3443)
//	    net.mpls.default_ttl        1..255, default 255: the pushed TTL when not copied
//	    net.mpls.platform_labels    0..1048576: incoming labels must be below it
//	                                (default 1048576, all labels; Linux's 0 would refuse all)
//	    net.mpls.conf.DEV.input     1 (default) accept labelled frames on DEV, 0 drop them
//	    net.ipv4.ip_forward         0 (default) or 1: forward IPv4 not for the node
//	    net.ipv6.conf.all.forwarding 0 (default) or 1
//	    net.ipv4.fib_multipath_hash_seed 0 (default: random) or the seed of the multipath flow hash
//
//	set gso endpoint|stack|off
//	    Where TCP segments are cut to the MTU: endpoint (default) in the
//	    MPLS link endpoint after the labels are pushed; stack in gVisor's
//	    software GSO; off, TCP sends MSS-sized segments.
//	set tcp cc reno|cubic   congestion control (default cubic, as Linux)
//	set tcp sack on|off     selective acknowledgements (default on)
//	set tcp rack on|off     RACK-TLP loss detection (default on)
//	set forward xdp on|off|auto
//	    Run the label switch's swap and pop also as an XDP program on the
//	    links (package forward/xdp): frames it carries never leave the
//	    kernel; everything else takes the userspace path. Default: auto
//	    on a forwarding node (Config.IsForwardingNode), off on any other.
//	    on: the node refuses to start where the program cannot attach;
//	    auto: on where it attaches, else off with one log line saying why.
//
// Each sysctl and setting may appear once.
//
//	bgp as ASN router-id IPV4
//	    Run a BGP labeled unicast speaker (RFC 8277) as AS ASN (1..4294967295).
//	bgp neighbor ADDR remote-as ASN [family ipv4-labeled-unicast|ipv6-labeled-unicast...]
//	        [next-hop-self] [hold-time SECONDS]
//	    A directly connected peer (ADDR on one of the node's subnets); both
//	    families by default. next-hop-self re-advertises to it the routes
//	    learned from other neighbours, each with a local label swapped to
//	    the received one. hold-time 3..65535 seconds (default 90).
//	bgp label-range LOW HIGH
//	    The labels BGP binds (default 16000 23999); label routes and fixed
//	    network labels must stay outside it.
//	bgp network PREFIX [label explicit-null|implicit-null|LABEL]
//	    Originate PREFIX with a label from the range (popped to the node
//	    itself), explicit null (0 or 2), implicit null (3: the neighbour
//	    pops) or a fixed LABEL. A reload may change the network lines; other
//	    bgp lines need a restart.
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
