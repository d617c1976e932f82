package mplsendpoint

import (
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/stack/gro"
)

// Receive coalescing (GRO) on a host. When the lower link ends its receive
// batches with EndBatch (docs/CONTRACTS.md), the consecutive TCP segments
// of one flow that a batch delivers to this host's stack (plain, or popped
// from a local label) are merged by gVisor's GRO engine (package
// stack/gro: same addresses, ports, TTL/hop limit and TOS, identical TCP
// options and ack, contiguous sequence numbers, segments of the first
// one's size, no SYN/RST/URG/FIN/PSH in the middle) into one packet, and
// the batch's end flushes what it holds. gVisor's IP and TCP layers then
// run once per merged packet instead of once per segment, and TCP
// acknowledges fewer, larger segments.
//
// Only segments whose checksums were verified here, or that the lower link
// flagged as checked by the kernel (pkt.RXChecksumValidated), are merged:
// a merged packet carries the first segment's TCP checksum, which no one
// checks again, so merging a corrupt segment would hand its bytes to the
// application as valid data. A
// segment whose checksum fails never gets here: deliver drops it
// (bad_checksum). The engine also refuses shapes whose transport checksum
// this endpoint does not verify (IPv4 options or fragments, IPv6
// extension headers): those are delivered one by one.
//
// It is off when the stack may forward what it receives (Options.Forwarding
// or an IPForwarder: the forwarding plane coalesces towards its next hop
// itself), with Options.DisableGRO, and until the lower link has called
// EndBatch once (a link that never ends batches never flushes).
//
// The engine holds a reference to each packet it keeps until it hands it
// up, and gVisor's GRO has no Close: Close hands what it holds to a
// dispatcher that counts it (endpoint_closed) instead of delivering it,
// and from then on nothing is enqueued (a segment the lower link still
// delivers is dropped, endpoint_closed), so no PacketBuffer is left
// held. gVisor's Flush hands up only the first packet of each of its
// buckets (it steps to the next packet of a bucket through one it has
// just unlinked), so a bucket holding several flows needs one Flush per
// flow: drain flushes until nothing comes out.

// rxGRO is the endpoint's coalescing state. The engine is not safe for
// concurrent use and a lower link with several queues delivers from
// several goroutines, so mu guards it; it is held while merged packets go
// up (in order: a flow's held segments are flushed before a later one of
// the same flow passes). Every queue's EndBatch flushes every flow, which
// is always correct, only less coalesced.
type rxGRO struct {
	mu   sync.Mutex
	eng  gro.GRO
	held bool // something was enqueued since the last flush
	// closed: Close released what the engine held; nothing is enqueued
	// after.
	closed bool
	// in counts segments given to the engine, out packets it handed up;
	// in - out segments were merged into the packet before them.
	in, out atomic.Uint64
}

// groUp is the engine's dispatcher: the stack above the endpoint.
type groUp struct{ e *Endpoint }

// DeliverNetworkPacket implements stack.NetworkDispatcher.
func (u groUp) DeliverNetworkPacket(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	u.e.gro.out.Add(1)
	u.e.ctr.rxDelivered.Add(1)
	u.e.Endpoint.DeliverNetworkPacket(proto, pkt)
}

// DeliverLinkPacket implements stack.NetworkDispatcher; the engine never
// calls it.
func (groUp) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// groClosed is the engine's dispatcher once the endpoint is closed: it
// counts what the engine held as dropped (endpoint_closed). The engine
// releases its own reference after handing a packet over, as it does
// after groUp's.
type groClosed struct{ e *Endpoint }

// DeliverNetworkPacket implements stack.NetworkDispatcher.
func (c groClosed) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	c.e.gro.out.Add(1)
	c.e.drop(DropEndpointClosed, -1, nil)
}

// DeliverLinkPacket implements stack.NetworkDispatcher; the engine never
// calls it.
func (groClosed) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// initGRO sets the engine up (enabled says whether it coalesces).
func (e *Endpoint) initGRO(enabled bool) {
	e.groOn = enabled
	e.gro.eng.Init(enabled)
	e.gro.eng.Dispatcher = groUp{e}
}

// groEligible reports whether pkt (an IP packet of proto, link header
// consumed, checks done) may be coalesced: GRO is on and the lower link
// ends its batches, the packet is unicast to this host, its checksums were
// verified or flagged by the kernel, and it is TCP in the one shape whose
// transport checksum checkRXChecksum verifies: IPv4 with a 20-byte header
// and no fragmentation, or IPv6 with TCP as its next header. Data beyond
// the IP length (Ethernet padding) is cut off, so that the engine does not
// count it as payload.
func (e *Endpoint) groEligible(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) bool {
	if !e.groOn || !e.batched.Load() || !pkt.RXChecksumValidated || pkt.PktType != tcpip.PacketHost {
		return false
	}
	size := pkt.Data().Size()
	var tot int
	switch proto {
	case header.IPv4ProtocolNumber:
		b, ok := pkt.Data().PullUp(header.IPv4MinimumSize)
		if !ok {
			return false
		}
		ip := header.IPv4(b)
		if ip.HeaderLength() != header.IPv4MinimumSize || ip.Protocol() != uint8(header.TCPProtocolNumber) ||
			ip.More() || ip.FragmentOffset() != 0 {
			return false
		}
		tot = int(ip.TotalLength())
	case header.IPv6ProtocolNumber:
		b, ok := pkt.Data().PullUp(header.IPv6MinimumSize)
		if !ok {
			return false
		}
		ip := header.IPv6(b)
		if ip.NextHeader() != uint8(header.TCPProtocolNumber) {
			return false
		}
		tot = header.IPv6MinimumSize + int(ip.PayloadLength())
	default:
		return false
	}
	if tot > size {
		return false
	}
	if tot < size {
		pkt.Data().CapLength(tot)
	}
	return true
}

// groEnqueue hands an eligible packet to the engine, which holds it or
// delivers it (and any packet of its flow it held) at once.
func (e *Endpoint) groEnqueue(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	pkt.NetworkProtocolNumber = proto
	e.gro.mu.Lock()
	if e.gro.closed {
		e.gro.mu.Unlock()
		e.drop(DropEndpointClosed, -1, nil)
		return
	}
	e.gro.in.Add(1)
	e.gro.held = true
	e.gro.eng.Enqueue(pkt)
	e.gro.mu.Unlock()
}

// groFlush delivers every packet the engine holds: at the end of each
// receive batch.
func (e *Endpoint) groFlush() {
	if !e.groOn {
		return
	}
	e.gro.mu.Lock()
	if e.gro.held {
		e.gro.held = false
		e.gro.drain()
	}
	e.gro.mu.Unlock()
}

// drain flushes the engine until it holds nothing (g.mu held): each
// Flush hands up at least one packet while any is held, and at most one
// a bucket, so a bucket of 8 flows takes 8 and the last one finds none.
// Both dispatchers count what comes out in g.out.
func (g *rxGRO) drain() {
	for {
		before := g.out.Load()
		g.eng.Flush()
		if g.out.Load() == before {
			return
		}
	}
}

// groClose releases every packet the engine holds, counting them
// (endpoint_closed), and makes later enqueues drop theirs.
func (e *Endpoint) groClose() {
	e.gro.mu.Lock()
	defer e.gro.mu.Unlock()
	if e.gro.closed {
		return
	}
	e.gro.closed = true
	e.gro.held = false
	e.gro.eng.Dispatcher = groClosed{e}
	e.gro.drain()
}
