package pcap

import (
	"sync"
	"sync/atomic"

	"github.com/mplsnode/mplsnode/link/lowerlink"
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

	// slotMu guards slots: per transmit queue of a lower TXRing, the slot
	// its last TXSlot returned, recorded at TXCommit.
	slotMu sync.Mutex
	slots  [][]byte
	parts  [1][]byte
}

var (
	_ stack.LinkEndpoint      = (*Endpoint)(nil)
	_ stack.NetworkDispatcher = (*Endpoint)(nil)
	_ stack.GSOEndpoint       = (*Endpoint)(nil)
	_ lowerlink.TXRing        = (*Endpoint)(nil)
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

// GSOFrames passes on the lower link's answer (see link/afpacket's
// Options.GSOFrames); such frames are recorded as the one frame they are.
func (e *Endpoint) GSOFrames() bool {
	g, ok := e.Child().(lowerlink.GSOFramer)
	return ok && g.GSOFrames()
}

// TXBegin passes on to a lower link with a transmit ring
// (lowerlink.TXRing); with none, ok is false and WritePackets is the way, as
// on the lower link itself.
func (e *Endpoint) TXBegin(hash uint32) (queue int, ok bool) {
	r, ok := e.Child().(lowerlink.TXRing)
	if !ok {
		return 0, false
	}
	return r.TXBegin(hash)
}

// TXSlot passes on to the lower link's ring and keeps the slot, to record
// the frame written into it at TXCommit.
func (e *Endpoint) TXSlot(queue, size int) ([]byte, tcpip.Error) {
	buf, err := e.Child().(lowerlink.TXRing).TXSlot(queue, size)
	e.slotMu.Lock()
	for len(e.slots) <= queue {
		e.slots = append(e.slots, nil)
	}
	e.slots[queue] = buf
	e.slotMu.Unlock()
	return buf, err
}

// TXCommit records the n bytes written into the queue's slot as an
// outbound frame, then passes the commit on. A frame a failed send
// withdraws later (TXEnd) is recorded all the same: the record is of what
// was handed to the link.
func (e *Endpoint) TXCommit(queue, n int) {
	e.slotMu.Lock()
	if queue < len(e.slots) && n <= len(e.slots[queue]) {
		e.parts[0] = e.slots[queue][:n]
		e.w.WriteFrameOn(e.id, DirOutbound, e.w.now(), e.parts[:])
		e.parts[0], e.slots[queue] = nil, nil
	}
	e.slotMu.Unlock()
	e.Child().(lowerlink.TXRing).TXCommit(queue, n)
}

// TXEnd passes on to the lower link's ring.
func (e *Endpoint) TXEnd(queue int) (int, tcpip.Error) {
	return e.Child().(lowerlink.TXRing).TXEnd(queue)
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
// lowerlink.BatchDispatcher).
func (e *Endpoint) EndBatch() {
	if d := e.up.Load(); d != nil {
		lowerlink.EndBatch(*d)
	}
}

// DeliverNetworkPacket implements stack.NetworkDispatcher: it records the
// received frame and passes it up.
func (e *Endpoint) DeliverNetworkPacket(protocol tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	e.w.WriteFrameOn(e.id, DirInbound, e.w.now(), pkt.AsSlices())
	e.Endpoint.DeliverNetworkPacket(protocol, pkt)
}
