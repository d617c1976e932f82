package mplsendpoint

import (
	"sync/atomic"

	"github.com/mplsnode/mplsnode/forward/labelstats"
	"github.com/mplsnode/mplsnode/internal/drops"
	"github.com/mplsnode/mplsnode/internal/enum"
)

// DropReason names why the endpoint discarded a frame or packet. Each reason
// has its own counter in Stats and its own rate-limited warning.
type DropReason uint8

// Drop reasons. The String form (snake_case) is the counter name used in
// logs and, by the node, as the `reason` label of the drop metric.
const (
	// DropNoILMEntry: a labelled frame whose top label has no ILM entry.
	DropNoILMEntry DropReason = iota
	// DropTTLExpired: a label (or the IP packet under it) with TTL 0.
	DropTTLExpired
	// DropTruncatedLabelStack: the frame ends inside a label stack entry.
	DropTruncatedLabelStack
	// DropNoBottomOfStack: the frame ends after whole entries, none with S.
	DropNoBottomOfStack
	// DropLabelStackTooDeep: more entries than Options.MaxLabels.
	DropLabelStackTooDeep
	// DropReservedLabel: a reserved label (1, 3, 7, 13, 14, ...) on top that
	// this node does not process.
	DropReservedLabel
	// DropUnknownPayload: the payload under the bottom label is neither
	// bound, nor an explicit null, nor a valid IP header; or it is not the
	// IP version (or not a valid header of it) that the explicit null or
	// binding says.
	DropUnknownPayload
	// DropMTUExceeded: an outgoing packet larger than the link MTU after the
	// label push that cannot be segmented (ICMP sent back to the stack).
	DropMTUExceeded
	// DropGSOUnsupported: a GSO packet the endpoint cannot segment (not TCP,
	// unknown GSO type, or a malformed header).
	DropGSOUnsupported
	// DropLowerWriteError: the lower link refused the frame.
	DropLowerWriteError
	// DropUnsupportedEthertype: an ethertype this endpoint does not carry
	// (multicast MPLS 0x8848, or anything not ARP/IPv4/IPv6/MPLS).
	DropUnsupportedEthertype
	// DropNotForUs: a unicast frame addressed to another MAC address, or a
	// unicast MPLS (0x8847) frame addressed to a broadcast or multicast
	// one.
	DropNotForUs
	// DropTruncatedFrame: a frame shorter than an Ethernet header.
	DropTruncatedFrame
	// DropNoForwarder: a forwarding ILM entry matched but Options.Forwarder is
	// nil.
	DropNoForwarder
	// DropBadChecksum: an IP packet whose checksum does not verify, or
	// whose IP header is malformed (version nibble other than the
	// ethertype's, IHL below 5, length beyond the frame), or whose partial
	// checksum could not be completed (malformed transport header).
	DropBadChecksum
	// DropMPLSInputDisabled: a labelled frame on a link that refuses them
	// (Options.RejectMPLS; net.mpls.conf.DEV.input=0).
	DropMPLSInputDisabled
	// DropNoRoute: a packet the stack handed to the FIB (FIBEndpoint)
	// whose destination no route covers; counted on the node's first
	// link, since it has no egress link.
	DropNoRoute
	// DropNoNeighbor: the FIB's next hop on this link did not answer
	// ARP/NDP, or too many packets were waiting for it.
	DropNoNeighbor
	// DropForwardingDisabled: an IP packet for another host that the
	// stack would forward by the FIB although the node does not forward
	// (FIBOptions.Forwarding off); counted on the first link.
	DropForwardingDisabled
	// DropFragmentOverlap: a fragment that overlaps or duplicates another
	// of its datagram, or a final fragment that disagrees with the
	// datagram's length (RFC 5722): the datagram's held fragments and the
	// later ones until the reassembly timeout are dropped.
	DropFragmentOverlap
	// DropFragmentTimeout: held fragments of a datagram that did not
	// complete within the reassembly timeout (30 s IPv4, 60 s IPv6;
	// discarded by a timer, with or without further traffic), or that
	// were evicted to make room (1024 datagrams, 4 MiB held; the datagram
	// nearest its deadline first).
	DropFragmentTimeout
	// DropUnverifiableChecksum: a packet whose transport checksum the
	// endpoint cannot verify and gVisor would not verify either: more
	// than 8 IPv6 extension headers, a fragment header after other
	// extension headers, a fragment with IPv4 options, more than 128
	// fragments, a first fragment without its whole upper-layer header,
	// a fragment length gVisor refuses; with every fragment of its
	// datagram.
	DropUnverifiableChecksum
	// DropEndpointClosed: a packet the endpoint held when it closed (a
	// fragment waiting for the rest of its datagram, a TCP segment
	// waiting for the end of its receive batch), or one the lower link
	// delivered after Close.
	DropEndpointClosed
	// DropImplicitNull: the received label stack holds label 3 (implicit
	// null), which is signalled, never sent (RFC 3032 §2.1).
	DropImplicitNull

	numDropReasons
)

var dropNames = [numDropReasons]string{
	DropNoILMEntry:           "no_ilm_entry",
	DropTTLExpired:           "ttl_expired",
	DropTruncatedLabelStack:  "truncated_label_stack",
	DropNoBottomOfStack:      "no_bottom_of_stack",
	DropLabelStackTooDeep:    "label_stack_too_deep",
	DropReservedLabel:        "reserved_label",
	DropUnknownPayload:       "unknown_payload",
	DropMTUExceeded:          "mtu_exceeded",
	DropGSOUnsupported:       "gso_unsupported",
	DropLowerWriteError:      "lower_write_error",
	DropUnsupportedEthertype: "unsupported_ethertype",
	DropNotForUs:             "not_for_us",
	DropTruncatedFrame:       "truncated_frame",
	DropNoForwarder:          "no_forwarder",
	DropBadChecksum:          "bad_checksum",
	DropMPLSInputDisabled:    "mpls_input_disabled",
	DropNoRoute:              "no_route",
	DropNoNeighbor:           "no_neighbor",
	DropForwardingDisabled:   "forwarding_disabled",
	DropFragmentOverlap:      "fragment_overlap",
	DropFragmentTimeout:      "fragment_timeout",
	DropUnverifiableChecksum: "unverifiable_checksum",
	DropEndpointClosed:       "endpoint_closed",
	DropImplicitNull:         "implicit_null_label",
}

// remedies says what an operator can do about each drop reason; it is
// logged with the warning.
var remedies = [numDropReasons]string{
	DropNoILMEntry:           "add an ILM entry for the label (mpls route add <label> ...) or fix the upstream LSR's label",
	DropTTLExpired:           "look for a forwarding loop or a too-small TTL at the ingress LER",
	DropTruncatedLabelStack:  "the sender emits malformed MPLS frames; capture on the lower link",
	DropNoBottomOfStack:      "the sender emits a label stack without the S bit; capture on the lower link",
	DropLabelStackTooDeep:    "raise Options.MaxLabels or shorten the label stacks upstream",
	DropReservedLabel:        "the upstream sends a reserved label this node does not process",
	DropUnknownPayload:       "bind the label to a payload (ILM Payload) or use an explicit null label; if the label already says IPv4 or IPv6, the sender put another payload under it",
	DropMTUExceeded:          "lower the route MTU or raise the link MTU; the sender got an ICMP error",
	DropGSOUnsupported:       "set Options.GSOMode to GSOStack or GSOOff",
	DropLowerWriteError:      "check the lower link (interface down, buffer full)",
	DropUnsupportedEthertype: "multicast MPLS (0x8848) and other ethertypes are not supported",
	DropNotForUs:             "the peer sends to another MAC address (or MPLS to a broadcast or multicast one); check ARP/NDP and the link address",
	DropTruncatedFrame:       "the lower link delivered a runt frame",
	DropNoForwarder:          "configure a label switch (Options.Forwarder) for transit labels",
	DropBadChecksum:          "a frame arrived with a bad IPv4 header, TCP, UDP or ICMP checksum or a malformed IP header: corrupted on the wire, or a sender that emits malformed packets",
	DropMPLSInputDisabled:    "the link refuses labelled frames (net.mpls.conf.DEV.input=0); set it to 1 if the peer is meant to send them",
	DropNoRoute:              "add a route to the destination (route add PREFIX ...) or a default route",
	DropNoNeighbor:           "check that the route's next hop is up and answers ARP/NDP on the egress link",
	DropForwardingDisabled:   "a peer sends this host IP for others; enable forwarding (sysctl net.ipv4.ip_forward=1) if the node is a router",
	DropFragmentOverlap:      "a sender (or the path) emits overlapping or duplicate IP fragments; capture on the lower link",
	DropFragmentTimeout:      "fragments of a datagram were lost on the way, or too many datagrams were in reassembly at once; lower the senders' datagram size below the path MTU",
	DropUnverifiableChecksum: "the sender emits fragments or extension header chains whose checksum cannot be checked (IPv4 options on fragments, extension headers before or after a fragment header, tiny fragments); capture on the lower link",
	DropEndpointClosed:       "none: the link was closed (node shutdown, link removed) while packets were held or still arriving",
	DropImplicitNull:         "the upstream LSR sends label 3 (implicit null), which must never be on the wire; fix its label bindings",
}

// String returns the counter name, e.g. "no_ilm_entry".
func (r DropReason) String() string { return enum.Name(dropNames[:], r) }

// DropReasons returns every drop reason, in counter order.
func DropReasons() []DropReason { return enum.Range(0, numDropReasons) }

// Stats is a snapshot of the endpoint's counters.
type Stats struct {
	// RXFrames counts frames received from the lower link.
	RXFrames uint64
	// RXDelivered counts packets delivered up to the stack.
	RXDelivered uint64
	// RXForwarded counts labelled frames handed to Options.Forwarder and
	// transit IP packets Options.IPForwarder took.
	RXForwarded uint64
	// TXPackets counts packets the stack handed to WritePackets.
	TXPackets uint64
	// TXFrames counts frames written to the lower link (one GSO packet can
	// become many frames).
	TXFrames uint64
	// GSOPackets counts GSO packets segmented by the endpoint.
	GSOPackets uint64
	// GSOFrames counts unlabelled GSO packets passed whole to a lower link
	// that sends GSO frames (the kernel segments them).
	GSOFrames uint64
	// RXSplit counts received TCP packets larger than the link MTU that
	// were segmented before delivery (Options.Forwarding).
	RXSplit uint64
	// RXCoalesced counts received TCP segments merged into the packet
	// before them by receive coalescing (GRO) on a host: RXDelivered
	// counts the merged packets.
	RXCoalesced uint64
	// RXFragmentsHeld is the number of IP fragments held right now until
	// their datagram is whole and its transport checksum verified
	// (delivered, or dropped as bad_checksum, fragment_overlap,
	// fragment_timeout, unverifiable_checksum or endpoint_closed).
	RXFragmentsHeld uint64
	// FIBPushes counts outgoing packets that got the label stack of their
	// FIB route's hop.
	FIBPushes uint64
	// ILMHits counts incoming labels that matched an ILM entry.
	ILMHits uint64
	// Drops counts discards by reason, indexed by DropReason.
	Drops [numDropReasons]uint64
}

// Drop returns the counter for reason r.
func (s *Stats) Drop(r DropReason) uint64 { return enum.At(s.Drops[:], r) }

// counters holds the live atomic counters.
type counters struct {
	rxFrames, rxDelivered, rxForwarded atomic.Uint64
	txPackets, txFrames, gsoPackets    atomic.Uint64
	gsoFrames                          atomic.Uint64
	rxSplit                            atomic.Uint64
	fibPushes, ilmHits                 atomic.Uint64
	// labels counts the frames popped for the node per label (labelstats.go).
	labels labelstats.Table
	// drops counts discards by reason, with at most one warning a second
	// per reason, so a flood of bad frames cannot flood the log.
	drops *drops.Counters[DropReason]
}

// Stats returns a snapshot of the counters.
func (e *Endpoint) Stats() Stats {
	c := &e.ctr
	groOut := e.gro.out.Load() // before in: out <= in at every instant
	s := Stats{
		RXFrames:        c.rxFrames.Load(),
		RXDelivered:     c.rxDelivered.Load(),
		RXForwarded:     c.rxForwarded.Load(),
		TXPackets:       c.txPackets.Load(),
		TXFrames:        c.txFrames.Load(),
		GSOPackets:      c.gsoPackets.Load(),
		GSOFrames:       c.gsoFrames.Load(),
		RXSplit:         c.rxSplit.Load(),
		RXCoalesced:     e.gro.in.Load() - groOut,
		RXFragmentsHeld: e.frag.heldFragments(),
		FIBPushes:       c.fibPushes.Load(),
		ILMHits:         c.ilmHits.Load(),
	}
	c.drops.Snapshot(s.Drops[:])
	return s
}

// drop counts one discard for reason r and logs a rate-limited warning
// naming the reason, the label involved (if any, -1 otherwise), the cause
// and the remedy.
func (e *Endpoint) drop(r DropReason, label int64, cause error) {
	e.dropN(r, 1, label, cause)
}

func (e *Endpoint) dropN(r DropReason, n uint64, label int64, cause error) {
	e.ctr.drops.Add(r, n, label, cause)
}

// LabelStats returns the endpoint's per-label counters: the labelled
// frames whose every label it popped for the node and delivered to the
// stack, under the bottom label (package labelstats). The label switch
// counts the frames it forwards (forward.Switch.LabelStats).
func (e *Endpoint) LabelStats() *labelstats.Table { return &e.ctr.labels }
