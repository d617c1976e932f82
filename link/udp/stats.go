package udp

import (
	"sync/atomic"

	"github.com/mplsnode/mplsnode/internal/enum"
)

// DropReason names why the link discarded a datagram or a frame.
type DropReason uint8

// Drop reasons.
const (
	// DropNone: not dropped.
	DropNone DropReason = iota
	// DropUnknownPeer: a datagram from a source address that is not the
	// link's remote: the link is not an open relay.
	DropUnknownPeer
	// DropTruncated: a datagram too short to hold one label stack entry.
	DropTruncated
	// DropOversized: a datagram larger than the link's MTU (or than the
	// receive buffer).
	DropOversized
	// DropNotAttached: a datagram arrived before the stack attached.
	DropNotAttached
	// DropNotUnicast: a frame to send to a multicast or broadcast IP
	// destination (the link reaches one peer; IPv6 router and multicast
	// listener messages among them), or an NDP message other than a
	// neighbour solicitation, which the link answers itself.
	DropNotUnicast
	// DropUnsupported: a frame to send that is neither MPLS, IPv4, IPv6
	// nor ARP, or too short for its header.
	DropUnsupported
	// DropSendError: the kernel refused a datagram (sendmmsg failed).
	DropSendError
	// DropNeighborQueueFull: an ARP or NDP answer was dropped because the
	// answers waiting for delivery fill their queue.
	DropNeighborQueueFull
	numDropReasons
)

var dropNames = [numDropReasons]string{
	DropNone:              "none",
	DropUnknownPeer:       "rx_unknown_peer",
	DropTruncated:         "rx_truncated",
	DropOversized:         "rx_oversized",
	DropNotAttached:       "rx_not_attached",
	DropNotUnicast:        "tx_not_unicast",
	DropUnsupported:       "tx_unsupported",
	DropSendError:         "tx_send_error",
	DropNeighborQueueFull: "neighbor_queue_full",
}

// String returns the counter name, e.g. "rx_unknown_peer".
func (r DropReason) String() string { return enum.Name(dropNames[:], r) }

// DropReasons lists every drop reason but DropNone, in counter order.
func DropReasons() []DropReason { return enum.Range(DropNone+1, numDropReasons) }

// Stats are the link's counters.
type Stats struct {
	// RXDatagrams counts datagrams read (a coalesced read counts its
	// segments), RXPackets the MPLS packets delivered, RXBytes their
	// bytes (label stack and payload), RXCoalesced the reads that held
	// more than one datagram (UDP GRO).
	RXDatagrams, RXPackets, RXBytes, RXCoalesced uint64
	// RXReads counts recvmmsg calls that returned datagrams, RXErrors
	// those that failed.
	RXReads, RXErrors uint64
	// TXPackets counts the MPLS packets sent, TXBytes their bytes,
	// TXSegmented the UDP GSO sends (one datagram per segment),
	// TXCalls the sendmmsg calls.
	TXPackets, TXBytes, TXSegmented, TXCalls uint64
	// NeighborAnswers counts the ARP and NDP requests the link answered.
	NeighborAnswers uint64
	// Drops counts discards by reason (index DropReason).
	Drops [numDropReasons]uint64
	// GSO and GRO report whether UDP segmentation offload and receive
	// coalescing are in use.
	GSO, GRO bool
}

// Dropped returns the count for reason r.
func (s Stats) Dropped(r DropReason) uint64 { return enum.At(s.Drops[:], r) }

type counters struct {
	rxDatagrams, rxPackets, rxBytes, rxCoalesced atomic.Uint64
	rxReads, rxErrors                            atomic.Uint64
	txPackets, txBytes, txSegmented, txCalls     atomic.Uint64
	neighborAnswers                              atomic.Uint64
	drops                                        [numDropReasons]atomic.Uint64
}
