// Package lowerlink declares the contract between a lower link (the
// endpoints that move whole frames: link/afpacket, link/tap, link/xdp,
// link/pcap's recorder) and the MPLS endpoint above it
// (link/mplsendpoint), and what every lower link shares: the attach and
// close lifecycle (docs/CONTRACTS.md, "Lower links"), the error New returns,
// the walk over a packet's bytes (as slices or iovecs) and the parse of a
// frame's IP packet for checksum checks.
//
// The interfaces take and return plain values and gVisor types only, so a
// lower link implements them without importing the endpoint above it.
package lowerlink

import (
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// BatchDispatcher is a dispatcher that wants to know where a receive batch
// ends: after delivering the frames of one batch (one recvmmsg, one ring
// batch, one TAP read burst) a lower link calls EndBatch, and
// link/mplsendpoint writes what it forwarded from the batch together.
type BatchDispatcher interface {
	stack.NetworkDispatcher
	// EndBatch is called after the last frame of a receive batch.
	EndBatch()
}

// EndBatch tells d that a receive batch ended, if d wants to know.
func EndBatch(d stack.NetworkDispatcher) {
	if be, ok := d.(BatchDispatcher); ok {
		be.EndBatch()
	}
}

// GSOFramer is a lower link that may send a TCP GSO packet (pkt.GSOOptions
// set, partial checksum) as one frame larger than the MTU, which the peer
// takes whole.
type GSOFramer interface {
	// GSOFrames reports whether the link does so now.
	GSOFrames() bool
}

// TXRing is a lower link with a memory-mapped transmit ring whose slots
// the endpoint above fills directly (link/afpacket in ring mode): a TCP GSO
// packet is segmented straight into the slots, one segment per slot, with
// no intermediate buffer and no packet buffer per segment, and one kick
// sends the whole batch.
type TXRing interface {
	// TXBegin locks the transmit queue that hash selects for a batch and
	// returns its index; ok is false when that queue has no ring (then
	// nothing is locked and WritePackets is the way).
	TXBegin(hash uint32) (queue int, ok bool)
	// TXSlot returns room for a frame of up to size bytes in the next
	// slot of the queue, waiting for the kernel to free one if the ring is
	// full. It returns nil and no error when size does not fit a slot,
	// nil and an error when the link failed (closed, interface down).
	TXSlot(queue, size int) ([]byte, tcpip.Error)
	// TXCommit marks the slot TXSlot returned as holding a frame of n
	// bytes, to be sent at TXEnd (or earlier, when the ring fills).
	TXCommit(queue, n int)
	// TXEnd sends the committed frames with one kick and unlocks the
	// queue. On a failed send it returns the number of frames that did not
	// go (withdrawn from the ring) and the error.
	TXEnd(queue int) (failed int, err tcpip.Error)
}

// Lifecycle is the attach and close state of a lower link endpoint: the
// dispatcher, the receive goroutines, the on-close action. An endpoint
// embeds it, which gives it stack.LinkEndpoint's Attach, IsAttached, Wait,
// SetOnCloseAction and Close, and calls Init once before use.
//
// The first non-nil dispatcher starts the receive goroutines (Init's
// start); a link that is closed first never starts them. Close runs Init's
// closeFiles once, which must make every receive goroutine return, then
// the on-close action, outside the once: gVisor's action removes the NIC,
// which closes the endpoint again, and a re-entrant sync.Once would
// deadlock.
type Lifecycle struct {
	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher
	started    bool
	onClose    func()
	closeOnce  sync.Once
	closed     atomic.Bool
	wg         sync.WaitGroup

	start      func()
	closeFiles func(started bool)
}

// Init sets what Attach starts and what Close releases. closeFiles gets
// whether the receive goroutines were started: when they were not, no
// goroutine owns the receive memory and closeFiles frees it itself.
func (l *Lifecycle) Init(start func(), closeFiles func(started bool)) {
	l.start, l.closeFiles = start, closeFiles
}

// Go runs f as one of the endpoint's receive goroutines, which Wait waits
// for.
func (l *Lifecycle) Go(f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// Attach implements stack.LinkEndpoint.Attach. The first non-nil
// dispatcher starts the receive goroutines; they run until Close. With a
// nil dispatcher the link counts what it receives as not attached and
// drops it.
func (l *Lifecycle) Attach(d stack.NetworkDispatcher) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dispatcher = d
	if d == nil || l.started || l.closed.Load() {
		return
	}
	l.started = true
	l.start()
}

// Dispatcher returns the attached dispatcher, nil if none.
func (l *Lifecycle) Dispatcher() stack.NetworkDispatcher {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.dispatcher
}

// IsAttached implements stack.LinkEndpoint.IsAttached.
func (l *Lifecycle) IsAttached() bool { return l.Dispatcher() != nil }

// Wait implements stack.LinkEndpoint.Wait: it returns once the receive
// goroutines have stopped (after Close).
func (l *Lifecycle) Wait() { l.wg.Wait() }

// SetOnCloseAction implements stack.LinkEndpoint.SetOnCloseAction.
func (l *Lifecycle) SetOnCloseAction(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onClose = f
}

// Closed reports whether Close has begun.
func (l *Lifecycle) Closed() bool { return l.closed.Load() }

// Close implements stack.LinkEndpoint.Close: it releases the link's files
// (stopping the receive goroutines) and runs the on-close action. Safe to
// call more than once.
func (l *Lifecycle) Close() {
	first := false
	l.closeOnce.Do(func() {
		first = true
		l.mu.Lock()
		l.closed.Store(true)
		started := l.started
		l.mu.Unlock()
		l.closeFiles(started)
	})
	if !first {
		return
	}
	l.mu.RLock()
	f := l.onClose
	l.mu.RUnlock()
	if f != nil {
		f()
	}
}

// Ethernet is the link-layer state of a lower link that carries whole
// Ethernet frames: its MTU and MAC, and the stack.LinkEndpoint methods of
// such a link, which builds and parses no header (frames go down with
// their link header and up with it unconsumed). An endpoint embeds it and
// sets the MTU and MAC with SetMTU and SetLinkAddress.
type Ethernet struct {
	mtu  atomic.Uint32
	addr atomic.Pointer[tcpip.LinkAddress]
}

// MTU implements stack.LinkEndpoint.MTU: the link MTU (L2 payload).
func (e *Ethernet) MTU() uint32 { return e.mtu.Load() }

// SetMTU implements stack.LinkEndpoint.SetMTU. It changes what MTU
// reports, not the interface.
func (e *Ethernet) SetMTU(mtu uint32) { e.mtu.Store(mtu) }

// LinkAddress implements stack.LinkEndpoint.LinkAddress.
func (e *Ethernet) LinkAddress() tcpip.LinkAddress {
	if a := e.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// SetLinkAddress implements stack.LinkEndpoint.SetLinkAddress. It changes
// what LinkAddress reports, not the interface.
func (e *Ethernet) SetLinkAddress(addr tcpip.LinkAddress) { e.addr.Store(&addr) }

// MaxHeaderLength implements stack.LinkEndpoint.MaxHeaderLength: 0, frames
// arrive with their link header already built.
func (*Ethernet) MaxHeaderLength() uint16 { return 0 }

// ARPHardwareType implements stack.LinkEndpoint.ARPHardwareType.
func (*Ethernet) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareEther }

// AddHeader implements stack.LinkEndpoint.AddHeader: nothing to add.
func (*Ethernet) AddHeader(*stack.PacketBuffer) {}

// ParseHeader implements stack.LinkEndpoint.ParseHeader: nothing to parse.
func (*Ethernet) ParseHeader(*stack.PacketBuffer) bool { return true }
