package stack

import (
	"github.com/mplsnode/mplsnode/link/afpacket"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/link/pcap"
)

// The contracts between the links this package stacks on each other
// (docs/CONTRACTS.md, "Lower links") are interfaces declared by the package
// that calls them and checked at run time by a type assertion there; a
// renamed method would silently turn the feature off. They are asserted
// here, at compile time, for every implementation: stack is the package
// that puts them together.
var (
	// Receive batches: link/afpacket (and link/pcap in between) call
	// EndBatch on the dispatcher above after each batch.
	_ afpacket.BatchDispatcher = (*mplsendpoint.Endpoint)(nil)
	_ afpacket.BatchDispatcher = (*pcap.Endpoint)(nil)
	_ pcap.BatchDispatcher     = (*mplsendpoint.Endpoint)(nil)
	// GSO frames: link/mplsendpoint (and link/pcap in between) ask the
	// lower link whether it sends a TCP GSO packet as one frame.
	_ mplsendpoint.GSOFramer = (*afpacket.Endpoint)(nil)
	_ mplsendpoint.GSOFramer = (*pcap.Endpoint)(nil)
	_ pcap.GSOFramer         = (*afpacket.Endpoint)(nil)
)
