//go:build linux

// Package afpacket is a gVisor link endpoint that sends and receives whole
// Ethernet frames on one Linux interface (typically a veth) through AF_PACKET
// raw sockets.
//
// It owns the socket work only: binding, memory-mapped packet rings or
// batched system calls, PACKET_FANOUT queues and counters (Options.Mode):
//
//   - ring mode (ModeRing; ModeAuto where the kernel sets rings up): a
//     TPACKET_V2 receive ring read frame by frame, a batch being the frames
//     ready (or a TPACKET_V3 block ring, Options.RXRing), and a TPACKET_V2
//     transmit ring on a second, send-only socket, filled in order and
//     kicked with one send() per WritePackets batch. Frames are copied once
//     between a slot and a packet buffer; the TXRing methods (TXBegin,
//     TXSlot, TXCommit, TXEnd) let link/mplsendpoint write segments straight
//     into the slots.
//   - mmsg mode (ModeMMsg, or ModeAuto's fallback, FallbackReason): recvmmsg
//     into preallocated buffers, sendmmsg over a WritePackets batch.
//
// Either way each queue (Options.Queues, one socket of a PACKET_FANOUT hash
// group) has its own receive goroutine and its own transmit lock.
//
// Waiting (wait.go): a receive goroutine parks in the Go netpoller until
// its socket has a frame. In ring mode the transmit socket stays out of
// the netpoller and a kick is a raw sendto(MSG_DONTWAIT), so sending a
// frame wakes no other thread (neither the netpoller's nor the runtime's
// sysmon). Options.BusyPoll trades CPU for latency: after a batch one
// goroutine of the process spins over the rings of every busy-polled
// queue and takes a frame that arrives meanwhile without a wake-up, until
// BusyPoll has passed since the last frame, yielding the CPU to any
// thread that wants it; then it parks again, so an idle endpoint costs
// nothing. Options.BusyPollAdaptive spins only where the last gaps say a
// frame will come within BusyPoll. Stats.BusyPollTime is what it spent.
// It knows nothing of MPLS or of any
// network protocol: it is a "lower link" as docs/CONTRACTS.md defines it.
// Frames go up with DeliverNetworkPacket(0, pkt), the Ethernet header
// unconsumed in pkt.Data(); wrap the endpoint (for example with gVisor's
// ethernet.New, or our link/mplsendpoint) to get a NIC a stack can use.
//
// Checksums: on a veth the peer kernel hands over frames whose TCP/UDP
// checksum was never computed (CHECKSUM_PARTIAL). The kernel reports this in
// PACKET_AUXDATA as TP_STATUS_CSUMNOTREADY (or TP_STATUS_CSUM_VALID when it
// verified it), and in a ring frame's tp_status; such frames are delivered
// with pkt.RXChecksumValidated set so the stack does not drop them. Frames
// sent must carry full checksums.
//
// Large frames: a veth passes the peer's TSO/GSO packets through unsegmented,
// so a received "frame" can be up to 64 KiB even with a 1500-byte link MTU.
// The receive buffers are sized for that (Options.MaxFrameSize).
package afpacket

import (
	"errors"
	"fmt"
	"os"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Endpoint is a stack.LinkEndpoint over AF_PACKET sockets bound to one
// interface. Create it with New; it is safe for concurrent use.
type Endpoint struct {
	ifname  string
	ifindex int
	queues  []*queue
	gsoq    *queue   // Options.GSOFrames: the send-only virtio-net socket
	tcxDrop *os.File // Options.DropKernelRX: the BPF link, nil if off or failed
	rxCsum  bool     // Options.RXChecksumOffload
	mode    Mode     // ModeRing or ModeMMsg: what the queues run
	// fallback says why ModeAuto runs ModeMMsg ("" if it did not have to).
	fallback string

	// Ethernet gives the MTU and MAC (the interface's unless
	// Options.LinkAddress overrode it) and the methods of a link that
	// builds and parses no header. SetMTU changes what MTU reports, not the
	// interface, nor the ring slots New sized for Options.MTU: a frame
	// longer than a transmit slot then leaves with sendmmsg, and TXSlot
	// refuses it.
	lowerlink.Ethernet

	// Lifecycle gives Attach (which starts one receive goroutine per
	// queue), IsAttached, Wait, SetOnCloseAction and Close (which closes
	// the sockets, stopping the goroutines; later writes fail with
	// tcpip.ErrClosedForSend). With no dispatcher attached, received
	// frames are counted in Stats.RXNotAttached and dropped.
	lowerlink.Lifecycle
}

var _ stack.LinkEndpoint = (*Endpoint)(nil)

// New opens Options.Queues AF_PACKET sockets bound to Options.Interface in
// the calling thread's network namespace. Receiving starts at Attach.
//
// Errors are *net.OpError values wrapping the syscall.Errno, so
// errors.Is(err, syscall.EPERM) (no CAP_NET_RAW), errors.Is(err,
// syscall.ENODEV) (no such interface) and errors.Is(err, syscall.ENETDOWN)
// (interface not up) work.
func New(opts Options) (*Endpoint, error) {
	if opts.Interface == "" {
		return nil, errors.New("afpacket: Options.Interface is empty")
	}
	if len(opts.Interface) >= unix.IFNAMSIZ {
		return nil, opError(opts.Interface, "ioctl SIOCGIFINDEX", unix.ENODEV)
	}
	if opts.Queues < 0 || opts.RecvBatch < 0 || opts.MaxFrameSize < 0 {
		return nil, fmt.Errorf("afpacket: negative Queues (%d), RecvBatch (%d) or MaxFrameSize (%d)",
			opts.Queues, opts.RecvBatch, opts.MaxFrameSize)
	}
	nq := max(opts.Queues, 1)
	switch opts.Mode {
	case ModeAuto, ModeMMsg, ModeRing:
	default:
		return nil, fmt.Errorf("afpacket: unknown Mode %d", opts.Mode)
	}
	if opts.BusyPoll < 0 {
		return nil, fmt.Errorf("afpacket: negative BusyPoll (%v)", opts.BusyPoll)
	}
	if opts.RingBlockSize < 0 || opts.RingBlocks < 0 || opts.RingBlockTimeout < 0 || opts.TXRingFrames < 0 || opts.RXRingFrames < 0 || opts.RXRing > RXRingBlock {
		return nil, fmt.Errorf("afpacket: negative ring option")
	}
	if opts.Mode == ModeMMsg {
		return open(opts, nq, false)
	}
	e, err := open(opts, nq, true)
	var re *ringError
	if opts.Mode == ModeAuto && errors.As(err, &re) {
		// The kernel would not set up the rings: recvmmsg/sendmmsg.
		e, err = open(opts, nq, false)
		if e != nil {
			e.fallback = re.Error()
		}
	}
	return e, err
}

// ringError marks a failure to set up a ring, after which ModeAuto falls
// back to recvmmsg/sendmmsg.
type ringError struct{ err error }

func (e *ringError) Error() string { return e.err.Error() }
func (e *ringError) Unwrap() error { return e.err }

// open opens the endpoint's sockets, with rings or without.
func open(opts Options, nq int, ring bool) (*Endpoint, error) {
	batch := cmpDefault(opts.RecvBatch, DefaultRecvBatch)
	frameSize := cmpDefault(opts.MaxFrameSize, DefaultMaxFrameSize)

	e := &Endpoint{ifname: opts.Interface, rxCsum: opts.RXChecksumOffload, mode: ModeMMsg}
	e.Init(e.startReceivers, e.closeFiles)
	if ring {
		e.mode = ModeRing
	}
	if opts.GSOFrames {
		q, _, err := openQueue(&opts, e, 0, 0, false)
		if err != nil {
			return nil, err
		}
		e.gsoq = q
	}
	var fanoutArg int
	for i := 0; i < nq; i++ {
		q, info, err := openQueue(&opts, e, batch, frameSize, ring)
		if err != nil {
			e.closeFiles(false)
			return nil, err
		}
		e.queues = append(e.queues, q)
		if i == 0 {
			e.ifindex = info.index
			mtu := info.mtu
			if opts.MTU != 0 {
				mtu = opts.MTU
			}
			e.SetMTU(mtu)
			addr := opts.LinkAddress
			if addr == "" {
				addr = tcpip.LinkAddress(info.mac[:])
			}
			e.SetLinkAddress(addr)
		}
		if nq > 1 {
			if fanoutArg, err = q.joinFanout(fanoutArg); err != nil {
				e.closeFiles(false)
				return nil, err
			}
		}
	}
	if opts.DropKernelRX {
		e.tcxDrop, _ = dropKernelRX(e.ifindex) // best effort: KernelRXDropped says
	}
	return e, nil
}

// KernelRXDropped reports whether the namespace's kernel is kept from
// processing the interface's received frames (Options.DropKernelRX).
func (e *Endpoint) KernelRXDropped() bool { return e.tcxDrop != nil }

func cmpDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Interface returns the name of the interface the endpoint is bound to.
func (e *Endpoint) Interface() string { return e.ifname }

// InterfaceIndex returns the index of the interface the endpoint is bound to.
func (e *Endpoint) InterfaceIndex() int { return e.ifindex }

// Capabilities implements stack.LinkEndpoint.Capabilities:
// stack.CapabilityRXChecksumOffload with Options.RXChecksumOffload, else
// none (checksum status is then reported per frame only).
func (e *Endpoint) Capabilities() stack.LinkEndpointCapabilities {
	if e.rxCsum {
		return stack.CapabilityRXChecksumOffload
	}
	return 0
}

// startReceivers starts one receive goroutine per queue, each running
// its queue's receive mode.
func (e *Endpoint) startReceivers() {
	for _, q := range e.queues {
		switch {
		case q.blockRing != nil:
			e.Go(q.rxRingLoop)
		case q.frameRing != nil:
			e.Go(q.rxFrameRingLoop)
		default:
			e.Go(q.rxLoop)
		}
	}
}

// closeFiles closes the sockets and unmaps the transmit rings; the receive
// rings too when no receive goroutine was started (started false), which
// otherwise unmaps its own as it ends.
func (e *Endpoint) closeFiles(started bool) {
	for _, q := range e.queues {
		q.file.Close()
		if q.tx != nil {
			// A writer waiting for a slot sees txClosing within
			// txWaitSlice; the ring is unmapped once no writer holds
			// txMu.
			q.txClosing.Store(true)
			q.txFile.Close()
			q.txMu.Lock()
			q.tx.closed = true
			unix.Munmap(q.tx.mem)
			q.txMu.Unlock()
		}
	}
	if e.gsoq != nil {
		e.gsoq.file.Close()
	}
	if e.tcxDrop != nil {
		e.tcxDrop.Close()
	}
	if !started {
		// No receive goroutine owns the receive rings: unmap them here.
		for _, q := range e.queues {
			if q.blockRing != nil {
				q.blockRing.unmap()
			}
			if q.frameRing != nil {
				q.frameRing.unmap()
			}
		}
	}
}

// Mode returns what the endpoint's queues run: ModeRing or ModeMMsg (never
// ModeAuto).
func (e *Endpoint) Mode() Mode { return e.mode }

// FallbackReason says why Options.Mode ModeAuto runs ModeMMsg: the error
// that setting up a ring gave. It is empty when the rings run or ModeMMsg
// was asked for.
func (e *Endpoint) FallbackReason() string { return e.fallback }

// Queues returns the number of queues (sockets in the fanout group).
func (e *Endpoint) Queues() int { return len(e.queues) }

// ReceiveCapacity returns how many bytes of frames one receive queue holds
// before the kernel drops (Stats.RXDrops) or cuts (Stats.RXTruncated) what
// arrives while the reader is behind: with a frame ring the fewer of its
// slots times the MTU and the socket receive buffer (which holds the frames
// too long for a slot: a veth peer's GSO frames); with a block ring its
// blocks; in mmsg mode the socket receive buffer. The buffer counts as the
// size asked for, half what the kernel reports, which keeps the other half
// for the kernel's per-frame overhead. A TCP receiver on this link keeps
// the windows it advertises, summed over its connections, below it: the
// peers then cannot overrun the queue (package stack does, see
// stack.TCPOptions.ReceiveBufferMax). Fanout spreads flows over queues by
// hash but may put them all in one, so this is one queue's capacity.
func (e *Endpoint) ReceiveCapacity() int {
	if len(e.queues) == 0 {
		return 0
	}
	q := e.queues[0]
	if q.blockRing != nil {
		return q.blockRing.blockSize * q.blockRing.blockNr
	}
	buf := 0
	if n, err := unix.GetsockoptInt(q.fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err == nil {
		buf = n / 2
	}
	if q.frameRing != nil {
		return min(q.frameRing.frameNr*int(e.MTU()), buf)
	}
	return buf
}

// RXRingFrames returns the slots of each queue's receive frame ring:
// Options.RXRingFrames (or DefaultRXRingFrames) rounded up to a whole
// number of the ring's blocks (64 KiB, 32 slots of 2 KiB, for a 1500-byte
// MTU; for larger slots the power of two of at least 64 KiB and one slot,
// up to 8 times that, that maps the least: RingGeometry). It is 0 without
// a frame ring (mmsg mode, block ring).
func (e *Endpoint) RXRingFrames() int {
	if len(e.queues) == 0 || e.queues[0].frameRing == nil {
		return 0
	}
	return e.queues[0].frameRing.frameNr
}

// RingGeometry is the layout of one queue's memory-mapped packet rings
// (Endpoint.RingGeometry). Each ring maps BlockSize*Blocks bytes, resident
// for the endpoint's life.
type RingGeometry struct {
	// RX is the receive ring: a frame ring's slots, or a block ring's
	// blocks (SlotSize and Slots 0). TX is the transmit ring.
	RX, TX RingLayout
}

// RingLayout is one ring's geometry: Slots slots of SlotSize bytes (the
// kernel's header, for a transmit slot the virtio-net header, and a frame
// of up to the link MTU, Ethernet header and one 802.1Q tag included), in
// Blocks blocks of BlockSize bytes.
type RingLayout struct {
	SlotSize, Slots   int
	BlockSize, Blocks int
}

// Mapped returns the bytes the ring maps: BlockSize*Blocks.
func (l RingLayout) Mapped() int { return l.BlockSize * l.Blocks }

// RingGeometry returns the layout of queue 0's rings (every queue has the
// same); the zero RingGeometry without rings (mmsg mode).
func (e *Endpoint) RingGeometry() RingGeometry {
	var g RingGeometry
	if len(e.queues) == 0 {
		return g
	}
	q := e.queues[0]
	if r := q.frameRing; r != nil {
		g.RX = RingLayout{SlotSize: r.frameSize, Slots: r.frameNr, BlockSize: r.layout.blockSize, Blocks: r.layout.blockNr}
	}
	if r := q.blockRing; r != nil {
		g.RX = RingLayout{BlockSize: r.blockSize, Blocks: r.blockNr}
	}
	if r := q.tx; r != nil {
		g.TX = RingLayout{SlotSize: r.frameSize, Slots: r.frameNr, BlockSize: r.layout.blockSize, Blocks: r.layout.blockNr}
	}
	return g
}

// QueueRXPackets returns the frames each queue delivered upward, in queue
// order (FlowHash % Queues picks the queue).
func (e *Endpoint) QueueRXPackets() []uint64 {
	out := make([]uint64, len(e.queues))
	for i, q := range e.queues {
		out[i] = q.rxPackets.Load()
	}
	return out
}

// GSOFrames reports whether WritePackets sends TCP GSO packets as single
// frames (Options.GSOFrames).
func (e *Endpoint) GSOFrames() bool { return e.gsoq != nil }
