package pcap

import (
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/nested"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Endpoint is a link endpoint that records every frame its lower link sends
// or receives to a Writer, then passes it on unchanged. It expects a lower
// link that carries whole Ethernet frames (docs/CONTRACTS.md, "Lower
// links"): packets written to it hold their link header, and packets it
// delivers hold the whole frame.
type Endpoint struct {
	nested.Endpoint
	w  *Writer
	id uint32 // the link's interface in w
	// up is the dispatcher above, for EndBatch (nested.Endpoint keeps its
	// own copy private).
	up atomic.Pointer[stack.NetworkDispatcher]
}

var (
	_ stack.LinkEndpoint      = (*Endpoint)(nil)
	_ stack.NetworkDispatcher = (*Endpoint)(nil)
	_ stack.GSOEndpoint       = (*Endpoint)(nil)
)

// New returns an endpoint that records lower's frames to w (on interface
// 0 of a pcapng Writer; see NewNamed).
func New(lower stack.LinkEndpoint, w *Writer) *Endpoint {
	e := &Endpoint{w: w}
	e.Endpoint.Init(lower, e)
	return e
}

// NewNamed returns an endpoint that records lower's frames to w as the
// link name: a pcapng Writer gets an interface for it (name, lower's MTU)
// and each frame's direction.
func NewNamed(lower stack.LinkEndpoint, w *Writer, name string) *Endpoint {
	e := &Endpoint{w: w, id: w.AddInterface(name, lower.MTU())}
	e.Endpoint.Init(lower, e)
	return e
}

// WritePackets implements stack.LinkEndpoint: it writes pkts to the lower
// link and records the frames the lower link took.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	n, err := e.Endpoint.WritePackets(pkts)
	if n > 0 {
		ts := e.w.now()
		e.w.mu.Lock()
		for _, pkt := range pkts.AsSlice()[:n] {
			e.w.writeLocked(e.id, DirOutbound, ts, pkt.AsSlices())
		}
		e.w.mu.Unlock()
	}
	return n, err
}

// GSOFramer is a lower link that may send TCP GSO packets as single frames
// (link/afpacket; the same contract as link/mplsendpoint.GSOFramer, which
// this endpoint implements by asking its lower link).
type GSOFramer interface {
	GSOFrames() bool
}

// BatchDispatcher is a dispatcher above that wants to know where a receive
// batch ends (the same contract as link/afpacket.BatchDispatcher, which
// this endpoint implements by passing EndBatch up).
type BatchDispatcher interface {
	EndBatch()
}

// GSOFrames passes on the lower link's answer (see link/afpacket's
// Options.GSOFrames); such frames are recorded as the one frame they are.
func (e *Endpoint) GSOFrames() bool {
	g, ok := e.Child().(GSOFramer)
	return ok && g.GSOFrames()
}

// Attach implements stack.LinkEndpoint.
func (e *Endpoint) Attach(d stack.NetworkDispatcher) {
	if d == nil {
		e.up.Store(nil)
	} else {
		e.up.Store(&d)
	}
	e.Endpoint.Attach(d)
}

// EndBatch passes the lower link's end of a receive batch up (see
// link/afpacket.BatchDispatcher).
func (e *Endpoint) EndBatch() {
	if d := e.up.Load(); d != nil {
		if be, ok := (*d).(BatchDispatcher); ok {
			be.EndBatch()
		}
	}
}

// DeliverNetworkPacket implements stack.NetworkDispatcher: it records the
// received frame and passes it up.
func (e *Endpoint) DeliverNetworkPacket(protocol tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	e.w.WriteFrameOn(e.id, DirInbound, e.w.now(), pkt.AsSlices())
	e.Endpoint.DeliverNetworkPacket(protocol, pkt)
}
