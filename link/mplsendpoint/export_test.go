package mplsendpoint

import (
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/mpls"
)

// PushHeader pushes pkt's link header with labels, as the FIBEndpoint
// does for a packet's hop: the egress tests build packets by hand and
// write them on the Endpoint without a FIBEndpoint in between.
func (e *Endpoint) PushHeader(pkt *stack.PacketBuffer, labels []mpls.Label, fixedTTL uint8) {
	e.pushHeader(pkt, labels, fixedTTL)
}
