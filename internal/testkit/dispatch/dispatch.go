// Package dispatch holds the stack.NetworkDispatcher fakes that link tests
// attach to an endpoint to see what it delivers up. Only tests import it.
package dispatch

import (
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Counter counts the frames delivered and the receive batches ended
// (EndBatch, for endpoints that end batches); it keeps nothing, so it
// allocates nothing. It is safe for concurrent use.
type Counter struct {
	Frames  atomic.Uint64 // DeliverNetworkPacket calls
	Batches atomic.Uint64 // EndBatch calls
}

var _ stack.NetworkDispatcher = (*Counter)(nil)

// DeliverNetworkPacket implements stack.NetworkDispatcher: it counts the frame.
func (c *Counter) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	c.Frames.Add(1)
}

// DeliverLinkPacket implements stack.NetworkDispatcher; it counts nothing.
func (*Counter) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// EndBatch counts the end of a receive batch.
func (c *Counter) EndBatch() { c.Batches.Add(1) }
