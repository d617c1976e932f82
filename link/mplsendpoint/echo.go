package mplsendpoint

import (
	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// EchoRequest is an MPLS echo request (RFC 8029: UDP to port 3503, a
// 127/8 or ::ffff:127/104 destination) that a data plane stopped: one
// that reached the node with every label popped (or as IP, its last label
// popped upstream), one whose label TTL ran out here, one whose top label
// has no entry.
type EchoRequest struct {
	// Where says which of these it is.
	Where lspping.Where
	// Labels is the label stack received, outermost first (empty for a
	// request that came as IP).
	Labels []mpls.Entry
	// IP is the request's IP packet, its headers on.
	IP []byte
}

// EchoHandler takes the echo requests the planes stop (the node's
// responder). The request and its slices are valid only during the call:
// the handler copies what it keeps and returns without blocking.
type EchoHandler interface {
	Echo(in *Endpoint, req *EchoRequest)
}

// echoHolder boxes an EchoHandler for an atomic.Pointer.
type echoHolder struct{ h EchoHandler }

// SetEchoHandler sets the handler of the MPLS echo requests this
// endpoint receives (nil: none; they are then delivered or dropped as
// any other packet).
func (e *Endpoint) SetEchoHandler(h EchoHandler) {
	if h == nil {
		e.echo.Store(nil)
		return
	}
	e.echo.Store(&echoHolder{h})
}

// maxEchoLen bounds the bytes of a request handed to the handler: a
// request is small; a larger one is cut and fails its checks there.
const maxEchoLen = 9216

// echoIP hands the IP packet pkt (link header consumed) to the echo
// handler if it is an echo request, and reports whether it did.
func (e *Endpoint) echoIP(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) bool {
	eh := e.echo.Load()
	if eh == nil || proto != header.IPv4ProtocolNumber && proto != header.IPv6ProtocolNumber {
		return false
	}
	b, _ := pullUpTo(pkt, header.IPv4MaximumHeaderSize+8)
	if !lspping.IsRequest(b) {
		return false
	}
	ip, _ := pullUpTo(pkt, maxEchoLen)
	e.ctr.rxDelivered.Add(1)
	eh.h.Echo(e, &EchoRequest{Where: lspping.AtEgress, IP: ip})
	return true
}

// echoMPLS hands a labelled frame (Ethernet header on, its labels
// parsed, hdrLen bytes of headers) to the echo handler if it carries an
// echo request, and reports whether it did.
func (e *Endpoint) echoMPLS(where lspping.Where, pkt *stack.PacketBuffer, labels []mpls.Entry, hdrLen int) bool {
	eh := e.echo.Load()
	if eh == nil {
		return false
	}
	b, _ := pullUpTo(pkt, hdrLen+header.IPv4MaximumHeaderSize+8)
	if len(b) < hdrLen || !lspping.IsRequest(b[hdrLen:]) {
		return false
	}
	f, _ := pullUpTo(pkt, hdrLen+maxEchoLen)
	e.ctr.rxDelivered.Add(1)
	eh.h.Echo(e, &EchoRequest{Where: where, Labels: labels, IP: f[hdrLen:]})
	return true
}

// stackEnd returns the length of the label stack at the start of b (the
// bytes after the Ethernet header) and its entries, appended to dst.
func stackEnd(b []byte, maxDepth int, dst []mpls.Entry) ([]mpls.Entry, int, bool) {
	entries, n, err := mpls.ParseStack(b, maxDepth, dst)
	return entries, n, err == nil
}
