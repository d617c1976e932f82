package stack

import (
	"github.com/mplsnode/mplsnode/link/afpacket"
	"github.com/mplsnode/mplsnode/link/lowerlink"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/link/pcap"
)

// The contracts between the links this package stacks on each other
// (docs/CONTRACTS.md, "Lower links") are interfaces declared once, in
// link/lowerlink, and checked at run time by a type assertion where they are
// called; a
// renamed method would silently turn the feature off. They are asserted
// here, at compile time, for every implementation: stack is the package
// that puts them together.
var (
	// Receive batches: the lower links (and link/pcap in between) call
	// EndBatch on the dispatcher above after each batch.
	_ lowerlink.BatchDispatcher = (*mplsendpoint.Endpoint)(nil)
	_ lowerlink.BatchDispatcher = (*pcap.Endpoint)(nil)
	// GSO frames: link/mplsendpoint (and link/pcap in between) ask the
	// lower link whether it sends a TCP GSO packet as one frame.
	_ lowerlink.GSOFramer = (*afpacket.Endpoint)(nil)
	_ lowerlink.GSOFramer = (*pcap.Endpoint)(nil)
	// Transmit rings: link/mplsendpoint segments into the slots of
	// link/afpacket's ring, through link/pcap too.
	_ lowerlink.TXRing = (*afpacket.Endpoint)(nil)
	_ lowerlink.TXRing = (*pcap.Endpoint)(nil)
)
