package mplstest

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// ForwardCall is one recorded mplsendpoint.Forwarder.Forward call, with
// everything copied out of the request (which is only valid during the
// call).
type ForwardCall struct {
	// Frame is the whole frame (Ethernet header, labels, payload).
	Frame []byte
	// Labels is the received label stack, outermost first.
	Labels []mpls.Entry
	// Top is the index in Labels of the entry that matched.
	Top int
	// Entry is a copy of the matched ILM entry.
	Entry mpls.ILMEntry
}

// Forwarder is an mplsendpoint.Forwarder that records its calls and
// forwards nothing. Its zero value is ready; it is safe for concurrent use.
type Forwarder struct {
	mu    sync.Mutex
	calls []ForwardCall
}

var _ mplsendpoint.Forwarder = (*Forwarder)(nil)

// Forward implements mplsendpoint.Forwarder: it records a copy of req.
func (f *Forwarder) Forward(_ *mplsendpoint.Endpoint, req *mplsendpoint.ForwardRequest) {
	c := ForwardCall{
		Frame:  req.Packet.Data().AsRange().ToSlice(),
		Labels: append([]mpls.Entry(nil), req.Labels...),
		Top:    req.Top,
	}
	if req.Entry != nil {
		c.Entry = *req.Entry
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
}

// Calls returns the calls recorded so far, oldest first.
func (f *Forwarder) Calls() []ForwardCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ForwardCall(nil), f.calls...)
}

// Len returns the number of calls recorded so far.
func (f *Forwarder) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// Reset forgets the recorded calls.
func (f *Forwarder) Reset() {
	f.mu.Lock()
	f.calls = nil
	f.mu.Unlock()
}

// Sink is a lower link (whole Ethernet frames, see the "Lower links"
// contract) that takes every frame written to it and either records a copy
// (Record true) or just counts it. Inbound frames can be injected with
// InjectInbound. Create it with NewSink.
type Sink struct {
	*channel.Endpoint

	// Record makes WritePackets keep a copy of every frame (read them with
	// Frames); set it before the first write.
	Record bool

	mu     sync.Mutex
	frames [][]byte
	n      uint64
}

var _ stack.LinkEndpoint = (*Sink)(nil)

// NewSink returns a Sink with the given link MTU and MAC address.
func NewSink(mtu uint32, mac tcpip.LinkAddress) *Sink {
	// The channel endpoint's queue is unused (WritePackets is ours); one
	// slot is the least it accepts.
	return &Sink{Endpoint: channel.New(1, mtu, mac)}
}

// WritePackets implements stack.LinkEndpoint: it takes every frame (the
// caller keeps ownership of pkts) and reports them all written.
func (s *Sink) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	n := pkts.Len()
	s.mu.Lock()
	s.n += uint64(n)
	if s.Record {
		for _, pkt := range pkts.AsSlice() {
			var b []byte
			for _, v := range pkt.AsSlices() {
				b = append(b, v...)
			}
			s.frames = append(s.frames, b)
		}
	}
	s.mu.Unlock()
	return n, nil
}

// Frames returns copies of the frames recorded so far (Record true).
func (s *Sink) Frames() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.frames...)
}

// Written returns the number of frames written so far.
func (s *Sink) Written() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Reset forgets the recorded frames.
func (s *Sink) Reset() {
	s.mu.Lock()
	s.frames = nil
	s.mu.Unlock()
}

// ARPHardwareType implements stack.LinkEndpoint: Ethernet.
func (*Sink) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareEther }

// ReadFrame returns the next packet written to ep, every byte of it
// (headers and payload), or nil if none comes within timeout.
func ReadFrame(ep *channel.Endpoint, timeout time.Duration) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pkt := ep.ReadContext(ctx)
	if pkt == nil {
		return nil
	}
	defer pkt.DecRef()
	var b []byte
	for _, v := range pkt.AsSlices() {
		b = append(b, v...)
	}
	return b
}

// RingSink is a Sink with an in-memory transmit ring (lowerlink.TXRing): one
// slot of SlotSize bytes reused for every frame, the committed frames
// copied into Frames when Record is set. Batches counts TXEnd calls,
// Commits TXCommit calls.
type RingSink struct {
	*Sink
	Slot     []byte
	SlotSize int
	Record   bool
	Frames   [][]byte
	Commits  uint64
	Batches  int
	open     bool
}

// NewRingSink returns a RingSink whose slots hold frames of up to slotSize
// bytes.
func NewRingSink(mtu uint32, mac tcpip.LinkAddress, slotSize int) *RingSink {
	return &RingSink{Sink: NewSink(mtu, mac), Slot: make([]byte, slotSize), SlotSize: slotSize}
}

// TXBegin opens a batch on queue 0; it panics if one is open already.
func (r *RingSink) TXBegin(uint32) (int, bool) {
	if r.open {
		panic("TXBegin with a batch open")
	}
	r.open = true
	return 0, true
}

// TXSlot returns the slot, nil when size exceeds SlotSize.
func (r *RingSink) TXSlot(_, size int) ([]byte, tcpip.Error) {
	if size > r.SlotSize {
		return nil, nil
	}
	return r.Slot[:size], nil
}

// TXCommit counts the frame of n bytes and records it with Record.
func (r *RingSink) TXCommit(_, n int) {
	r.Commits++
	if r.Record {
		r.Frames = append(r.Frames, bytes.Clone(r.Slot[:n]))
	}
}

// TXEnd ends the batch; every committed frame is sent.
func (r *RingSink) TXEnd(int) (int, tcpip.Error) {
	r.open = false
	r.Batches++
	return 0, nil
}
