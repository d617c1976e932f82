// Package forward is the forwarding plane: everything that crosses the
// node without ending in its own TCP/IP stack. Every transit frame is
// decided by the reference decision (package forward/verdict, which the
// XDP program is held to) and the verdict carried out here (decide.go):
// the frames it describes are built and written, its drops counted, its
// ICMP errors sent. The plane owns:
//
//   - ILM actions on labelled frames that link/mplsendpoint hands over
//     (Switch implements mplsendpoint.Forwarder): swap, swap and push, pop
//     and forward as IP (PHP) or still labelled, with the TTL rules of RFC
//     3032 §2.4 and the TTL model of RFC 3443;
//   - IP transit (ip.go): unicast IP packets for other hosts that the links
//     offer (Switch implements mplsendpoint.IPForwarder) are routed here,
//     never by gVisor: longest-prefix match through a Router (FIBRouter: the
//     node's FIB, ECMP per flow; or a plain Table), set with SetRouter, TTL/hop limit per RFC 1812, labels
//     pushed for routes with an encap (the LER role for transit traffic);
//   - hostile input: every header read is bounds-checked; label 3 and
//     reserved labels a pop would expose never leave (an ELI and its
//     entropy label are popped with the label above, RFC 6790);
//   - GRO towards next hops whose link takes TCP GSO frames (gro.go), only
//     for segments whose checksums verify; a labelled TCP packet the
//     endpoint merged from a receive batch's segments (lgro.go, Switch
//     implements mplsendpoint.GSOForwarder) is decided once and sent whole
//     when popped to IP towards such a link, counted per segment; anything
//     else is declined and forwarded segment by segment;
//   - IPv4 fragmentation (fragment.go) and ICMP errors with the received
//     label stack (RFC 4950; time exceeded, fragmentation needed, Packet
//     Too Big), never to sources that name no single host or the node;
//   - neighbour resolution through the gVisor stack's neighbour table, a
//     bounded queue per next hop while it resolves, and batched writes: the
//     frames of one receive batch leave per egress link in one write
//     (mplsendpoint.BatchForwarder, at EndBatch).
//
// Every discard increments a counter named for its reason (Drop, Stats) and
// logs a rate-limited warning with the reason and the remedy.
//
// The package sits beside package stack, one floor below node: it imports
// forward/verdict, link/mplsendpoint, mpls, internal/* and gVisor, never
// node, config or stack. The node creates a Switch, gives it to the stack's links as their
// Forwarder and IPForwarder, Attaches the running gVisor stack and sets
// its routes (SetRouter).
package forward
