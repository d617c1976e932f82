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
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/mplsnode/mplsnode/internal/virtionet"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

const (
	// DefaultRecvBatch is the number of frames one recvmmsg call can return.
	// 32 amortises the syscall well while keeping 32 x 64 KiB = 2 MiB of
	// receive buffers per queue.
	DefaultRecvBatch = 32

	// DefaultMaxFrameSize fits the largest GSO packet a veth peer may hand us
	// (IPv4/IPv6 payload up to 64 KiB) plus its Ethernet header.
	DefaultMaxFrameSize = 1<<16 + header.EthernetMinimumSize

	// DefaultReceiveBufferSize is the socket receive buffer New asks for
	// when Options.ReceiveBufferSize is 0. The kernel default (about 208 KiB)
	// holds only three 64 KiB GSO frames from a veth peer, and overflows
	// (Stats.RXDrops) under a single TCP stream.
	DefaultReceiveBufferSize = 4 << 20

	// maxSendBatch bounds the messages of one sendmmsg call; the kernel caps
	// vlen at UIO_MAXIOV (1024) anyway.
	maxSendBatch = 1024

	// vlanRoom is headroom before each receive buffer so an 802.1Q tag the
	// kernel took out of the frame (VLAN offload) can be put back in place.
	vlanRoom = 4 // an 802.1Q tag: TPID and TCI, 2 bytes each

	// ethPAll is ETH_P_ALL in network byte order, as bind(2) wants it.
	ethPAll = uint16(unix.ETH_P_ALL>>8 | (unix.ETH_P_ALL&0xff)<<8)
)

// sizeofAuxdata is sizeof(struct tpacket_auxdata).
const sizeofAuxdata = int(unsafe.Sizeof(unix.TpacketAuxdata{}))

// auxSpace is the control buffer size for one PACKET_AUXDATA message.
var auxSpace = unix.CmsgSpace(sizeofAuxdata)

// Options configures New. The zero value of every field but Interface is a
// sensible default.
type Options struct {
	// Interface is the name of the interface to bind to, in the network
	// namespace of the calling thread. Required.
	Interface string

	// Queues is the number of sockets, each with its own receive goroutine,
	// joined in one PACKET_FANOUT group that picks a queue by our flow hash
	// (FlowHash, a classic BPF program), so a flow stays on one queue. 0 or
	// 1 means a single socket without fanout.
	Queues int

	// QdiscBypass sets PACKET_QDISC_BYPASS: sent frames skip the interface's
	// queueing discipline (faster; no traffic shaping, no backpressure from
	// the qdisc).
	QdiscBypass bool

	// RecvBatch is the number of frames read per recvmmsg call, and the
	// most frames of a frame ring's receive batch. 0 means DefaultRecvBatch
	// (mmsg) or DefaultRingBatch (ring).
	RecvBatch int

	// MaxFrameSize is the size of each receive buffer; longer frames are
	// dropped and counted in Stats.RXTruncated. 0 means DefaultMaxFrameSize.
	MaxFrameSize int

	// ReceiveBufferSize sets the socket receive buffer (SO_RCVBUFFORCE,
	// falling back to SO_RCVBUF, which net.core.rmem_max caps, without
	// CAP_NET_ADMIN). 0 means DefaultReceiveBufferSize; -1 keeps the
	// kernel's default.
	ReceiveBufferSize int

	// SendBufferSize, if non-zero, sets the socket send buffer
	// (SO_SNDBUFFORCE, falling back to SO_SNDBUF).
	SendBufferSize int

	// MTU overrides the link MTU read from the interface. 0 means the
	// interface's MTU. In ring mode the rings' slots are sized for it
	// (capped by the interface's MTU), so their memory follows the MTU the
	// link is configured for, not the interface's: RingGeometry.
	MTU uint32

	// LinkAddress overrides the interface's MAC address reported by
	// LinkAddress. Empty means the interface's MAC.
	LinkAddress tcpip.LinkAddress

	// RXChecksumOffload makes Capabilities report
	// stack.CapabilityRXChecksumOffload. Set it when a gVisor NIC sits
	// directly on this endpoint (through gVisor's ethernet endpoint, say):
	// the NIC overwrites pkt.RXChecksumValidated from that capability, so
	// without it frames with partial checksums from a veth peer are dropped.
	// So that the claim holds, frames the kernel did not flag are then
	// verified here (IPv4 header, TCP, UDP, ICMP) and dropped if bad
	// (Stats.RXBadChecksum). An upper endpoint that reads the per-frame flag
	// itself (link/mplsendpoint) leaves this off.
	RXChecksumOffload bool

	// Mode chooses how frames move: ModeAuto (the default) uses
	// memory-mapped rings where they can be set up, else recvmmsg and
	// sendmmsg; ModeRing insists on rings; ModeMMsg never uses them.
	Mode Mode

	// RXRing chooses the receive ring in ring mode: RXRingFrame (the
	// default) or RXRingBlock.
	RXRing RXRing

	// RXRingFrames is the number of slots of an RXRingFrame ring, each
	// sized for the link MTU (Options.MTU, capped by the interface's: 2 KiB
	// for 1500 bytes, 9088 bytes for 9000), rounded up to whole blocks
	// (Endpoint.RXRingFrames, Endpoint.RingGeometry). 0 means
	// DefaultRXRingFrames. The ring is resident memory, per queue; its
	// slots are what the kernel holds while the reader is not running (a
	// stalled reader loses what arrives beyond them: Stats.RXDrops).
	RXRingFrames int

	// RingBlockSize is the size of a TPACKET_V3 receive block (a multiple
	// of the page size); frames longer than a block can hold are dropped
	// and counted in Stats.RXTruncated. 0 means DefaultRingBlockSize.
	RingBlockSize int

	// RingBlocks is the number of receive blocks per queue. 0 means
	// DefaultRingBlocks.
	RingBlocks int

	// RingBlockTimeout is the receive block timeout in milliseconds. 0
	// means DefaultRingBlockTimeout.
	RingBlockTimeout int

	// TXRingFrames is the number of transmit slots per queue, each sized
	// for the link MTU (as RXRingFrames's), rounded up to whole blocks.
	// 0 means DefaultTXRingFrames.
	TXRingFrames int

	// GSOFrames opens a second, send-only socket with PACKET_VNET_HDR.
	// WritePackets sends a batch that holds a TCP GSO packet (one whose
	// GSOOptions say GSOTCPv4 or GSOTCPv6, with a partial checksum) through
	// it, each frame behind a virtio-net header, so the packet leaves as one
	// frame larger than the MTU and crosses a veth whole: the peer's kernel
	// takes it as one GSO skb, as from a local sender. GSOFrames reports it.
	// That socket uses sendmmsg in every Mode: a 64 KiB GSO frame does not
	// fit a transmit ring slot sized for the MTU.
	GSOFrames bool

	// DropKernelRX keeps the namespace's kernel from processing the frames
	// the interface receives (kernelrx.go): set it on an interface the
	// node owns, where the kernel holds no address and would only route
	// and drop each IP frame. This endpoint still receives every frame.
	// It needs CAP_BPF (or CAP_SYS_ADMIN) and a kernel with TCX (6.6);
	// without them the endpoint works as if it were off
	// (KernelRXDropped reports which).
	DropKernelRX bool

	// BusyPoll, in ring mode, puts the endpoint's queues in the process's
	// busy group (wait.go): after a receive batch, one goroutine of the
	// group (never more) keeps checking the next slot of every member's
	// ring until BusyPoll has passed since the last frame, and delivers
	// what arrives at once, without a wake-up. A request/response flow
	// through a node (the request on one link, the response on another)
	// gains the wake-up latency twice per transaction. The cost is CPU:
	// while frames keep coming less than BusyPoll apart the spinning
	// goroutine holds a core that nothing else wants (it yields the CPU
	// between its rounds; Stats.BusyPollTime); after the last frame it
	// spins BusyPoll once, then sleeps, so an idle node stays idle.
	// 0 (the default) sleeps at once. Ignored in mmsg mode.
	BusyPoll time.Duration
	// BusyPollAdaptive, with BusyPoll, spins only where it is likely to
	// pay: after a queue's batch when, the last time, the next frame (on
	// any link of the busy group) came less than BusyPoll after that
	// queue's batch, and only as long as the frames it catches are of
	// that kind. Through a node, a request forwarded from one link to the
	// other is followed by its response within the peer's turnaround, so
	// the node spins for the response; a response, followed by nothing
	// until the client's next request, puts it to sleep at once. A frame
	// after a quiet spell, or a trickle of frames further apart than
	// BusyPoll, never starts a spin.
	BusyPollAdaptive bool
}

// Stats are the endpoint's counters, summed over its queues.
type Stats struct {
	// RXPackets and RXBytes count frames delivered upward.
	RXPackets, RXBytes uint64
	// RXChecksumValidated counts delivered frames the kernel flagged
	// TP_STATUS_CSUMNOTREADY or TP_STATUS_CSUM_VALID.
	RXChecksumValidated uint64
	// RXDrops counts frames the kernel dropped because a socket's receive
	// queue was full (PACKET_STATISTICS tp_drops).
	RXDrops uint64
	// RXTruncated counts frames longer than Options.MaxFrameSize, dropped.
	RXTruncated uint64
	// RXNotAttached counts frames read while no dispatcher was attached.
	RXNotAttached uint64
	// RXBadChecksum counts unflagged frames dropped because a software
	// checksum check failed (only with Options.RXChecksumOffload).
	RXBadChecksum uint64
	// RXErrors counts failed receive calls.
	RXErrors uint64
	// TXPackets and TXBytes count frames the kernel accepted.
	TXPackets, TXBytes uint64
	// TXDropped counts frames the device queue refused (ENOBUFS), dropped
	// like a loss on the wire.
	TXDropped uint64
	// TXErrors counts frames a send failed on with any other error; the
	// error was returned from WritePackets.
	TXErrors uint64
	// RXBlocks counts receive ring blocks read (ring mode): each is one
	// wakeup and one receive batch.
	RXBlocks uint64
	// TXRingFull counts the times a send found every transmit ring slot
	// in use and waited for the kernel (ring mode).
	TXRingFull uint64
	// BusyPolls counts the busy polls (Options.BusyPoll) the endpoint's
	// goroutines ran, BusyPollHits the endpoint's receive batches that a
	// busy poll delivered (each a wake-up saved; the spinner may be any
	// queue of the busy group, this process's), and BusyPollTime the
	// time the endpoint's goroutines spent spinning: at most the CPU the
	// option costs (it includes the time the spinner yielded to others).
	BusyPolls, BusyPollHits uint64
	BusyPollTime            time.Duration
}

// Addr is the net.Addr of a packet socket bound to an interface; it appears
// in *net.OpError values New returns.
type Addr struct {
	// Interface is the interface's name.
	Interface string
}

// Network implements net.Addr.
func (a Addr) Network() string { return "packet" }

// String implements net.Addr.
func (a Addr) String() string { return a.Interface }

// hintError adds a remedy to an error without hiding it from errors.Is.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + " (" + e.hint + ")" }
func (e *hintError) Unwrap() error { return e.err }

// opError builds the *net.OpError New returns: it wraps the errno in an
// *os.SyscallError naming the call, with a hint for the usual causes.
func opError(ifname, call string, errno syscall.Errno) error {
	var err error = os.NewSyscallError(call, errno)
	switch errno {
	case unix.EPERM, unix.EACCES:
		err = &hintError{err, "raw packet sockets need CAP_NET_RAW: run as root or grant the capability"}
	case unix.ENODEV, unix.ENXIO:
		err = &hintError{err, fmt.Sprintf("no interface named %q in this network namespace", ifname)}
	case unix.ENETDOWN:
		err = &hintError{err, fmt.Sprintf("interface %q is down: ip link set %s up", ifname, ifname)}
	}
	return &net.OpError{Op: "open", Net: "packet", Addr: Addr{ifname}, Err: err}
}

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

	mtu atomic.Uint32

	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher
	addr       tcpip.LinkAddress
	started    bool
	onClose    func()

	wg        sync.WaitGroup
	closeOnce sync.Once
	closing   atomic.Bool // Close has begun: a busy poll stops
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
			e.closeFiles()
			return nil, err
		}
		e.queues = append(e.queues, q)
		if i == 0 {
			e.ifindex = info.index
			mtu := info.mtu
			if opts.MTU != 0 {
				mtu = opts.MTU
			}
			e.mtu.Store(mtu)
			e.addr = opts.LinkAddress
			if e.addr == "" {
				e.addr = tcpip.LinkAddress(info.mac[:])
			}
		}
		if nq > 1 {
			if fanoutArg, err = q.joinFanout(fanoutArg); err != nil {
				e.closeFiles()
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

// queue is one socket with its receive and send batches.
type queue struct {
	ep   *Endpoint
	fd   int
	file *os.File
	rc   syscall.RawConn

	// Receive state, touched only by the queue's goroutine.
	rxMsgs []mmsghdr
	rxIovs []unix.Iovec
	rxBufs [][]byte // each vlanRoom + frame size
	rxCtl  []byte   // auxSpace bytes per message
	rxN    int
	rxErr  unix.Errno
	recvFn func(fd uintptr) bool

	// Send state, under txMu.
	txMu      sync.Mutex
	txMsgs    []mmsghdr
	txIovs    []unix.Iovec
	txFirst   []int // index of each message's first iovec in txIovs
	txLens    []int // bytes of each message
	txCount   int
	txDone    int
	txDropped int
	txErr     unix.Errno
	sendFn    func(fd uintptr) bool
	// vnetHdrs, on the GSOFrames socket, holds each message's virtio-net
	// header (fixed length, so the iovecs' pointers stay valid).
	vnetHdrs [][virtioNetHdrLen]byte

	// Ring mode: the receive ring on fd; the transmit ring on its own
	// send-only socket txFD (txFile, txRC), under txMu.
	rx       *rxRing      // RXRingBlock
	rx2      *rxFrameRing // RXRingFrame
	rxBatch  int          // frames per receive batch with rx2
	maxFrame int          // longest frame delivered (Options.MaxFrameSize)
	tx       *txRing
	txFD     int
	txFile   *os.File
	txRC     syscall.RawConn
	txWait   bool
	// txClosing tells a writer waiting for a slot that Close has begun.
	txClosing atomic.Bool
	// kickFn is kick's RawConn.Control callback (wait.go).
	kickFn func(fd uintptr)
	// txBatchFrames counts the frames TXCommit put in the ring since
	// TXBegin, under txMu.
	txBatchFrames int

	// Ring mode: rxMu is held by whoever reads the receive ring, the
	// queue's goroutine or a busy-polling one (wait.go); rxDead, under it,
	// says the ring is unmapped. busyPoll is Options.BusyPoll.
	rxMu      sync.Mutex
	rxDead    bool
	rxReady   func() bool // the ring's next slot is ours
	rxDeliver func()      // deliver what is ready
	busyPoll  time.Duration
	// busyAdaptive is Options.BusyPollAdaptive; gapAfter is how long after
	// this queue's last batch the busy group's next frame came
	// (nanoseconds; initially forever), its guess for the next one.
	busyAdaptive bool
	gapAfter     atomic.Int64

	// Counters; the ring-drop counter is accumulated from PACKET_STATISTICS.
	rxPackets, rxBytes, rxCsum, rxTrunc, rxNoDisp, rxBad, rxErrors atomic.Uint64
	txPackets, txBytes, txDrops, txErrors, kernelDrops             atomic.Uint64
	rxBlocks, txRingFull                                           atomic.Uint64
	rxBusySpins, rxBusyHits, rxBusyNanos                           atomic.Uint64
	statsMu                                                        sync.Mutex
}

// mmsghdr is struct mmsghdr from <sys/socket.h>.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// openQueue opens one socket on opts.Interface. batch 0 makes the send-only
// socket of Options.GSOFrames: PACKET_VNET_HDR, bound to no protocol (it
// receives nothing), no receive buffers. With ring, the socket receives
// through a TPACKET_V3 ring and the queue sends through a TPACKET_V2 ring
// on a second socket; a ring that cannot be set up fails with a
// *ringError.
func openQueue(opts *Options, e *Endpoint, batch, frameSize int, ring bool) (*queue, ifaceInfo, error) {
	vnet := batch == 0
	name := opts.Interface
	// Protocol 0: the socket receives nothing until bind names the
	// interface, so no frame of another interface slips in.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, ifaceInfo{}, opError(name, "socket", err.(syscall.Errno))
	}
	fail := func(call string, errno syscall.Errno) (*queue, ifaceInfo, error) {
		unix.Close(fd)
		return nil, ifaceInfo{}, opError(name, call, errno)
	}
	info, call, errno := lookupIface(fd, name)
	if errno != 0 {
		return fail(call, errno)
	}
	if info.flags&unix.IFF_UP == 0 {
		return fail("ioctl SIOCGIFFLAGS", unix.ENETDOWN)
	}
	if info.hwType != unix.ARPHRD_ETHER && info.hwType != unix.ARPHRD_LOOPBACK {
		unix.Close(fd)
		return nil, ifaceInfo{}, &net.OpError{Op: "open", Net: "packet", Addr: Addr{name},
			Err: fmt.Errorf("interface hardware type %d is not Ethernet", info.hwType)}
	}
	setInt := func(level, opt, v int, call string) error {
		if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
			return opError(name, call, err.(syscall.Errno))
		}
		return nil
	}
	// Never read back the frames we send.
	if err := setInt(unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1, "setsockopt PACKET_IGNORE_OUTGOING"); err != nil {
		unix.Close(fd)
		return nil, ifaceInfo{}, err
	}
	// Checksum status (and VLAN tag) of each frame.
	if err := setInt(unix.SOL_PACKET, unix.PACKET_AUXDATA, 1, "setsockopt PACKET_AUXDATA"); err != nil {
		unix.Close(fd)
		return nil, ifaceInfo{}, err
	}
	if opts.QdiscBypass {
		if err := setInt(unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1, "setsockopt PACKET_QDISC_BYPASS"); err != nil {
			unix.Close(fd)
			return nil, ifaceInfo{}, err
		}
	}
	if n := cmpDefault(opts.ReceiveBufferSize, DefaultReceiveBufferSize); n > 0 {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) != nil {
			if err := setInt(unix.SOL_SOCKET, unix.SO_RCVBUF, n, "setsockopt SO_RCVBUF"); err != nil {
				unix.Close(fd)
				return nil, ifaceInfo{}, err
			}
		}
	}
	if n := opts.SendBufferSize; n > 0 {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n) != nil {
			if err := setInt(unix.SOL_SOCKET, unix.SO_SNDBUF, n, "setsockopt SO_SNDBUF"); err != nil {
				unix.Close(fd)
				return nil, ifaceInfo{}, err
			}
		}
	}
	proto := uint16(ethPAll)
	if vnet {
		if err := setInt(unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1, "setsockopt PACKET_VNET_HDR"); err != nil {
			unix.Close(fd)
			return nil, ifaceInfo{}, err
		}
		proto = 0
	}
	var rx *rxRing
	var rx2 *rxFrameRing
	// The rings' slots hold frames of the link MTU: Options.MTU, the one
	// the link is configured for, where set, and never more than the
	// interface's (the kernel sends and receives no longer frame but a
	// GSO packet, which needs no slot: see ringMTU).
	mtu := ringMTU(opts.MTU, info.mtu)
	unmapRX := func() {
		if rx != nil {
			rx.unmap()
		}
		if rx2 != nil {
			rx2.unmap()
		}
	}
	if ring && !vnet {
		var call string
		var errno syscall.Errno
		if opts.RXRing == RXRingBlock {
			rx, call, errno = setupRXRing(fd, cmpDefault(opts.RingBlockSize, DefaultRingBlockSize),
				cmpDefault(opts.RingBlocks, DefaultRingBlocks), cmpDefault(opts.RingBlockTimeout, DefaultRingBlockTimeout))
		} else {
			rx2, call, errno = setupRXFrameRing(fd, mtu+header.EthernetMinimumSize+vlanRoom,
				cmpDefault(opts.RXRingFrames, DefaultRXRingFrames), frameSize)
		}
		if errno != 0 {
			unix.Close(fd)
			return nil, ifaceInfo{}, &ringError{opError(name, call, errno)}
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: info.index}); err != nil {
		unmapRX()
		return fail("bind", err.(syscall.Errno))
	}

	q := &queue{ep: e, fd: fd, rx: rx, rx2: rx2, rxBatch: batch, maxFrame: frameSize, busyPoll: opts.BusyPoll, busyAdaptive: opts.BusyPollAdaptive}
	q.gapAfter.Store(math.MaxInt64)
	if rx2 != nil && opts.RecvBatch == 0 {
		q.rxBatch = DefaultRingBatch
	}
	if ring && !vnet {
		// A slot holds the largest frame the MTU allows, with one
		// 802.1Q tag; longer frames go out with sendmmsg on fd.
		if err := q.openTX(opts, info.index, mtu+header.EthernetMinimumSize+vlanRoom); err != nil {
			unmapRX()
			unix.Close(fd)
			return nil, ifaceInfo{}, err
		}
	}
	// The socket is non-blocking, so os.NewFile registers it with the Go
	// poller: receive goroutines park instead of holding threads, and Close
	// wakes them.
	q.file = os.NewFile(uintptr(fd), "packet:"+name)
	if q.rc, err = q.file.SyscallConn(); err != nil {
		q.file.Close()
		return nil, ifaceInfo{}, &net.OpError{Op: "open", Net: "packet", Addr: Addr{name}, Err: err}
	}
	if vnet {
		q.vnetHdrs = make([][virtioNetHdrLen]byte, maxSendBatch)
	} else if !ring {
		q.initRX(batch, frameSize)
	}
	q.txMsgs = make([]mmsghdr, 0, 64)
	q.txIovs = make([]unix.Iovec, 0, 256)
	q.txFirst = make([]int, 0, 64)
	q.txLens = make([]int, 0, 64)
	q.recvFn = q.recv
	q.sendFn = q.send
	return q, info, nil
}

// ringMTU is the MTU a queue's ring slots are sized for: the configured
// MTU (Options.MTU) where set, capped by the interface's MTU ifMTU, else
// ifMTU. Memory then follows the MTU the link uses, not the interface's (a
// veth at 65535 with the link configured for 1500 or 9000). Frames longer
// than a slot never go into one truncated: a transmit ring sends them with
// sendmmsg (writeRing; TXSlot refuses them), a receive frame ring has the
// kernel queue them whole on the socket (TP_STATUS_COPY, read into a
// buffer of Options.MaxFrameSize). The whole GSO packets of
// Options.GSOFrames use a socket without a ring, and a veth peer's GSO
// packets are such long received frames.
func ringMTU(configured, ifMTU uint32) int {
	if configured != 0 && configured < ifMTU {
		return int(configured)
	}
	return int(ifMTU)
}

// openTX opens the queue's send-only socket with its transmit ring.
func (q *queue) openTX(opts *Options, ifindex, maxFrame int) error {
	name := opts.Interface
	// Blocking, so that os.NewFile keeps it out of the Go netpoller (every
	// sent frame would wake it with an EPOLLOUT edge); sends say
	// MSG_DONTWAIT and a writer waiting for a slot uses ppoll (wait.go).
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &ringError{opError(name, "socket", err.(syscall.Errno))}
	}
	fail := func(call string, errno syscall.Errno) error {
		unix.Close(fd)
		return &ringError{opError(name, call, errno)}
	}
	if opts.QdiscBypass {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return fail("setsockopt PACKET_QDISC_BYPASS", err.(syscall.Errno))
		}
	}
	// Frames in flight count against the send buffer: room for the ring.
	frames := cmpDefault(opts.TXRingFrames, DefaultTXRingFrames)
	sndbuf := max(opts.SendBufferSize, frames*(maxFrame+1024))
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sndbuf) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, sndbuf)
	}
	// A virtio-net header in front of each frame (txDataOff).
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		return fail("setsockopt PACKET_VNET_HDR", err.(syscall.Errno))
	}
	r, call, errno := setupTXRing(fd, maxFrame, frames)
	if errno != 0 {
		return fail(call, errno)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: 0, Ifindex: ifindex}); err != nil {
		unix.Munmap(r.mem)
		return fail("bind", err.(syscall.Errno))
	}
	q.tx, q.txFD = r, fd
	q.kickFn = q.kickLoop
	q.txFile = os.NewFile(uintptr(fd), "packet-tx:"+name)
	if q.txRC, err = q.txFile.SyscallConn(); err != nil {
		q.txFile.Close()
		unix.Munmap(r.mem)
		q.tx = nil
		return &ringError{&net.OpError{Op: "open", Net: "packet", Addr: Addr{name}, Err: err}}
	}
	return nil
}

// joinFanout adds q to the endpoint's fanout group. arg is 0 for the first
// queue (the kernel picks a unique group id) and the group's setsockopt value
// afterwards, which joinFanout returns.
func (q *queue) joinFanout(arg int) (int, error) {
	name := q.ep.ifname
	if arg == 0 {
		// PACKET_FANOUT_FLAG_IGNORE_OUTGOING: the group's hook replaces
		// each socket's, whose PACKET_IGNORE_OUTGOING it would lose, so
		// the sockets would read back every frame the queues send.
		req := (unix.PACKET_FANOUT_CBPF | unix.PACKET_FANOUT_FLAG_UNIQUEID | unix.PACKET_FANOUT_FLAG_IGNORE_OUTGOING) << 16
		if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, req); err != nil {
			return 0, opError(name, "setsockopt PACKET_FANOUT", err.(syscall.Errno))
		}
		got, err := unix.GetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
		if err != nil {
			return 0, opError(name, "getsockopt PACKET_FANOUT", err.(syscall.Errno))
		}
		// The group's flow hash (fanout.go).
		prog, err := flowHashProgram()
		if err != nil {
			return 0, &net.OpError{Op: "open", Net: "packet", Addr: Addr{name}, Err: err}
		}
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		if err := unix.SetsockoptSockFprog(q.fd, unix.SOL_PACKET, unix.PACKET_FANOUT_DATA, &fprog); err != nil {
			return 0, opError(name, "setsockopt PACKET_FANOUT_DATA", err.(syscall.Errno))
		}
		// The others join with the kernel's id.
		return got&0xffff | (unix.PACKET_FANOUT_CBPF|unix.PACKET_FANOUT_FLAG_IGNORE_OUTGOING)<<16, nil
	}
	if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, arg); err != nil {
		return 0, opError(name, "setsockopt PACKET_FANOUT", err.(syscall.Errno))
	}
	return arg, nil
}

func (q *queue) initRX(batch, frameSize int) {
	q.rxMsgs = make([]mmsghdr, batch)
	q.rxIovs = make([]unix.Iovec, batch)
	q.rxBufs = make([][]byte, batch)
	q.rxCtl = make([]byte, batch*auxSpace)
	for i := range q.rxMsgs {
		q.rxBufs[i] = make([]byte, vlanRoom+frameSize)
		q.rxIovs[i].Base = &q.rxBufs[i][vlanRoom]
		q.rxIovs[i].SetLen(frameSize)
		h := &q.rxMsgs[i].hdr
		h.Iov = &q.rxIovs[i]
		h.SetIovlen(1)
		h.Control = &q.rxCtl[i*auxSpace]
	}
}

// recv is the RawConn.Read callback: one recvmmsg. It returns false to wait
// for the socket to become readable.
func (q *queue) recv(fd uintptr) bool {
	for i := range q.rxMsgs {
		h := &q.rxMsgs[i].hdr
		h.SetControllen(auxSpace)
		h.Flags = 0
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd,
			uintptr(unsafe.Pointer(&q.rxMsgs[0])), uintptr(len(q.rxMsgs)), 0, 0, 0)
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		q.rxN, q.rxErr = int(n), errno
		return true
	}
}

// rxLoop reads batches until the socket is closed.
func (q *queue) rxLoop() {
	defer q.ep.wg.Done()
	for {
		if err := q.rc.Read(q.recvFn); err != nil {
			return // closed
		}
		if q.rxErr != 0 {
			q.rxErrors.Add(1)
			continue
		}
		q.deliver(q.rxN)
	}
}

// BatchDispatcher is a dispatcher that wants to know where a receive batch
// ends: after delivering the frames of one recvmmsg, the endpoint calls
// EndBatch (link/mplsendpoint uses it to write forwarded frames together).
type BatchDispatcher interface {
	stack.NetworkDispatcher
	// EndBatch is called after the last frame of a receive batch.
	EndBatch()
}

// deliver hands the first n received frames to the dispatcher.
func (q *queue) deliver(n int) {
	q.ep.mu.RLock()
	d := q.ep.dispatcher
	q.ep.mu.RUnlock()
	var t rxTally
	var trunc uint64
	for i := 0; i < n; i++ {
		m := &q.rxMsgs[i]
		if m.hdr.Flags&unix.MSG_TRUNC != 0 {
			trunc++
			continue
		}
		buf := q.rxBufs[i]
		frame := buf[vlanRoom : vlanRoom+int(m.len)]
		status, tci, tpid := q.aux(i, &m.hdr)
		if status&unix.TP_STATUS_VLAN_VALID != 0 && len(frame) >= 2*header.EthernetAddressSize {
			// Put the offloaded 802.1Q tag back after the MAC addresses.
			if status&unix.TP_STATUS_VLAN_TPID_VALID == 0 {
				tpid = unix.ETH_P_8021Q
			}
			copy(buf, buf[vlanRoom:vlanRoom+2*header.EthernetAddressSize])
			binary.BigEndian.PutUint16(buf[12:], tpid)
			binary.BigEndian.PutUint16(buf[14:], tci)
			frame = buf[:vlanRoom+int(m.len)]
		}
		if d == nil {
			continue
		}
		q.deliverFrame(d, frame, status, &t)
	}
	if d == nil {
		q.rxNoDisp.Add(uint64(n) - trunc)
	} else if be, ok := d.(BatchDispatcher); ok && t.pkts > 0 {
		be.EndBatch()
	}
	q.add(&t)
	if trunc != 0 {
		q.rxTrunc.Add(trunc)
	}
}

// rxTally counts what one receive batch delivered, whatever path read it
// (recvmmsg, a block ring or a frame ring).
type rxTally struct{ pkts, bytes, csum, bad uint64 }

// deliverFrame hands frame to d, flagged checksum-validated when the kernel
// said so (TP_STATUS_CSUMNOTREADY or CSUM_VALID in status) or, with
// Options.RXChecksumOffload, when its checksums verify; a frame that fails
// that check is counted bad (lower_rx_bad_checksum) and not delivered. The
// frame is copied once, into a pooled chunk: the ring slot or receive
// buffer is reused while upper layers may keep the packet.
func (q *queue) deliverFrame(d stack.NetworkDispatcher, frame []byte, status uint32, t *rxTally) {
	validated := status&(unix.TP_STATUS_CSUMNOTREADY|unix.TP_STATUS_CSUM_VALID) != 0
	if !validated && q.ep.rxCsum {
		if !checksumOK(frame) {
			t.bad++
			return
		}
		validated = true
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	pkt.RXChecksumValidated = validated
	d.DeliverNetworkPacket(0, pkt)
	pkt.DecRef()
	t.pkts++
	t.bytes += uint64(len(frame))
	if validated {
		t.csum++
	}
}

// add adds a batch's tally to the queue's counters.
func (q *queue) add(t *rxTally) {
	q.rxPackets.Add(t.pkts)
	q.rxBytes.Add(t.bytes)
	q.rxCsum.Add(t.csum)
	if t.bad != 0 {
		q.rxBad.Add(t.bad)
	}
}

// aux returns tp_status, tp_vlan_tci and tp_vlan_tpid from message i's
// PACKET_AUXDATA control message, or zeros if there is none.
func (q *queue) aux(i int, h *unix.Msghdr) (status uint32, tci, tpid uint16) {
	ctl := q.rxCtl[i*auxSpace : i*auxSpace+int(h.Controllen)]
	for len(ctl) >= unix.SizeofCmsghdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
		clen := int(c.Len)
		if clen < unix.SizeofCmsghdr || clen > len(ctl) {
			return 0, 0, 0
		}
		if c.Level == unix.SOL_PACKET && c.Type == unix.PACKET_AUXDATA &&
			clen >= unix.CmsgLen(sizeofAuxdata) {
			a := (*unix.TpacketAuxdata)(unsafe.Pointer(&ctl[unix.CmsgLen(0)]))
			return a.Status, a.Vlan_tci, a.Vlan_tpid
		}
		next := unix.CmsgSpace(clen - unix.CmsgLen(0))
		if next > len(ctl) {
			break
		}
		ctl = ctl[next:]
	}
	return 0, 0, 0
}

// WritePackets implements stack.LinkWriter.WritePackets. Each packet is sent
// as one frame; the batch goes out in sendmmsg calls on the queue the first
// packet's hash selects. Frames the device queue refuses (ENOBUFS) count as
// sent (and in Stats.TXDropped), as a loss on the wire would.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	s := pkts.AsSlice()
	if len(s) == 0 {
		return 0, nil
	}
	q := e.queues[s[0].Hash%uint32(len(e.queues))]
	if e.gsoq != nil && hasGSO(s) {
		q = e.gsoq
	}
	q.txMu.Lock()
	defer q.txMu.Unlock()
	if q.tx != nil {
		return q.writeRing(s)
	}
	sent := 0
	for sent < len(s) {
		chunk := s[sent:]
		if len(chunk) > maxSendBatch {
			chunk = chunk[:maxSendBatch]
		}
		n, err := q.write(chunk)
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// write sends pkts with sendmmsg; called with txMu held.
func (q *queue) write(pkts []*stack.PacketBuffer) (int, tcpip.Error) {
	q.txMsgs = q.txMsgs[:0]
	q.txIovs = q.txIovs[:0]
	q.txFirst = q.txFirst[:0]
	q.txLens = q.txLens[:0]
	for i, pkt := range pkts {
		first := len(q.txIovs)
		size := 0
		if q.vnetHdrs != nil {
			h := &q.vnetHdrs[i]
			putVirtioNetHdr(h, pkt)
			var iov unix.Iovec
			iov.Base = &h[0]
			iov.SetLen(virtioNetHdrLen)
			q.txIovs = append(q.txIovs, iov)
		}
		vl, off := pkt.AsViewList()
		for v := vl.Front(); v != nil; v = v.Next() {
			b := v.AsSlice()
			if off >= len(b) {
				off -= len(b)
				continue
			}
			b = b[off:]
			off = 0
			var iov unix.Iovec
			iov.Base = &b[0]
			iov.SetLen(len(b))
			q.txIovs = append(q.txIovs, iov)
			size += len(b)
		}
		q.txFirst = append(q.txFirst, first)
		q.txLens = append(q.txLens, size)
		q.txMsgs = append(q.txMsgs, mmsghdr{})
	}
	// txIovs has stopped growing: point each message at its iovecs.
	for i := range q.txMsgs {
		h := &q.txMsgs[i].hdr
		end := len(q.txIovs)
		if i+1 < len(q.txFirst) {
			end = q.txFirst[i+1]
		}
		if end > q.txFirst[i] {
			h.Iov = &q.txIovs[q.txFirst[i]]
		}
		h.SetIovlen(end - q.txFirst[i])
	}
	q.txCount, q.txDone, q.txDropped, q.txErr = len(pkts), 0, 0, 0
	err := q.rc.Write(q.sendFn)
	var bytes uint64
	for _, l := range q.txLens[:q.txDone] {
		bytes += uint64(l)
	}
	q.txPackets.Add(uint64(q.txDone - q.txDropped))
	q.txBytes.Add(bytes)
	if q.txDropped != 0 {
		q.txDrops.Add(uint64(q.txDropped))
	}
	// Views referenced by the iovecs stay alive through pkts until here.
	clear(q.txIovs)
	if err != nil {
		return q.txDone, &tcpip.ErrClosedForSend{}
	}
	if q.txErr != 0 {
		q.txErrors.Add(1)
		return q.txDone, tcpip.TranslateErrno(q.txErr)
	}
	return q.txDone, nil
}

// send is the RawConn.Write callback: sendmmsg until every message is out,
// an error stops it, or the socket buffer is full (false: wait for room).
func (q *queue) send(fd uintptr) bool {
	for q.txDone < q.txCount {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd,
			uintptr(unsafe.Pointer(&q.txMsgs[q.txDone])), uintptr(q.txCount-q.txDone), 0, 0, 0)
		switch errno {
		case 0:
			q.txDone += int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		case unix.ENOBUFS:
			q.txDone++
			q.txDropped++
		default:
			q.txErr = errno
			return true
		}
	}
	return true
}

// Stats returns the counters summed over all queues. It reads (and so
// resets) each socket's PACKET_STATISTICS and accumulates the drops.
func (e *Endpoint) Stats() Stats {
	var s Stats
	for _, q := range e.queues {
		q.statsMu.Lock()
		_ = q.rc.Control(func(fd uintptr) {
			if st, err := unix.GetsockoptTpacketStats(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
				q.kernelDrops.Add(uint64(st.Drops))
			}
		})
		q.statsMu.Unlock()
		s.RXPackets += q.rxPackets.Load()
		s.RXBytes += q.rxBytes.Load()
		s.RXChecksumValidated += q.rxCsum.Load()
		s.RXDrops += q.kernelDrops.Load()
		s.RXTruncated += q.rxTrunc.Load()
		s.RXNotAttached += q.rxNoDisp.Load()
		s.RXBadChecksum += q.rxBad.Load()
		s.RXErrors += q.rxErrors.Load()
		s.TXPackets += q.txPackets.Load()
		s.TXBytes += q.txBytes.Load()
		s.TXDropped += q.txDrops.Load()
		s.TXErrors += q.txErrors.Load()
		s.RXBlocks += q.rxBlocks.Load()
		s.TXRingFull += q.txRingFull.Load()
		s.BusyPolls += q.rxBusySpins.Load()
		s.BusyPollHits += q.rxBusyHits.Load()
		s.BusyPollTime += time.Duration(q.rxBusyNanos.Load())
	}
	if q := e.gsoq; q != nil {
		s.TXPackets += q.txPackets.Load()
		s.TXBytes += q.txBytes.Load()
		s.TXDropped += q.txDrops.Load()
		s.TXErrors += q.txErrors.Load()
	}
	return s
}

// Interface returns the name of the interface the endpoint is bound to.
func (e *Endpoint) Interface() string { return e.ifname }

// InterfaceIndex returns the index of the interface the endpoint is bound to.
func (e *Endpoint) InterfaceIndex() int { return e.ifindex }

// MTU implements stack.LinkEndpoint.MTU: the link MTU (L2 payload).
func (e *Endpoint) MTU() uint32 { return e.mtu.Load() }

// SetMTU implements stack.LinkEndpoint.SetMTU. It changes what MTU reports,
// not the interface, nor the ring slots New sized for Options.MTU: a frame
// longer than a transmit slot then leaves with sendmmsg, and TXSlot
// refuses it.
func (e *Endpoint) SetMTU(mtu uint32) { e.mtu.Store(mtu) }

// MaxHeaderLength implements stack.LinkEndpoint.MaxHeaderLength: 0, frames
// arrive with their link header already built.
func (*Endpoint) MaxHeaderLength() uint16 { return 0 }

// LinkAddress implements stack.LinkEndpoint.LinkAddress: the interface's MAC
// unless Options.LinkAddress overrode it.
func (e *Endpoint) LinkAddress() tcpip.LinkAddress {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.addr
}

// SetLinkAddress implements stack.LinkEndpoint.SetLinkAddress. It changes
// what LinkAddress reports, not the interface.
func (e *Endpoint) SetLinkAddress(addr tcpip.LinkAddress) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.addr = addr
}

// Capabilities implements stack.LinkEndpoint.Capabilities:
// stack.CapabilityRXChecksumOffload with Options.RXChecksumOffload, else
// none (checksum status is then reported per frame only).
func (e *Endpoint) Capabilities() stack.LinkEndpointCapabilities {
	if e.rxCsum {
		return stack.CapabilityRXChecksumOffload
	}
	return 0
}

// Attach implements stack.LinkEndpoint.Attach. The first non-nil dispatcher
// starts one receive goroutine per queue; they run until Close. With a nil
// dispatcher received frames are counted in Stats.RXNotAttached and dropped.
func (e *Endpoint) Attach(dispatcher stack.NetworkDispatcher) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dispatcher = dispatcher
	if dispatcher == nil || e.started {
		return
	}
	e.started = true
	for _, q := range e.queues {
		e.wg.Add(1)
		if q.rx != nil {
			go q.rxRingLoop()
		} else if q.rx2 != nil {
			go q.rxFrameRingLoop()
		} else {
			go q.rxLoop()
		}
	}
}

// IsAttached implements stack.LinkEndpoint.IsAttached.
func (e *Endpoint) IsAttached() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.dispatcher != nil
}

// Wait implements stack.LinkEndpoint.Wait: it returns once the receive
// goroutines have stopped (after Close).
func (e *Endpoint) Wait() { e.wg.Wait() }

// ARPHardwareType implements stack.LinkEndpoint.ARPHardwareType.
func (*Endpoint) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareEther }

// AddHeader implements stack.LinkEndpoint.AddHeader: nothing to add.
func (*Endpoint) AddHeader(*stack.PacketBuffer) {}

// ParseHeader implements stack.LinkEndpoint.ParseHeader: nothing to parse.
func (*Endpoint) ParseHeader(*stack.PacketBuffer) bool { return true }

// SetOnCloseAction implements stack.LinkEndpoint.SetOnCloseAction.
func (e *Endpoint) SetOnCloseAction(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onClose = f
}

// Close implements stack.LinkEndpoint.Close: it closes the sockets, which
// stops the receive goroutines, and runs the on-close action. Later writes
// fail with tcpip.ErrClosedForSend. Safe to call more than once.
func (e *Endpoint) Close() {
	first := false
	e.closeOnce.Do(func() {
		first = true
		e.closeFiles()
	})
	if !first {
		return
	}
	// The on-close action runs outside the Once: gVisor's action removes
	// the NIC, which closes this endpoint again, and a re-entrant
	// Once.Do would deadlock.
	e.mu.RLock()
	f := e.onClose
	e.mu.RUnlock()
	if f != nil {
		f()
	}
}

func (e *Endpoint) closeFiles() {
	e.closing.Store(true)
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
	e.mu.RLock()
	started := e.started
	e.mu.RUnlock()
	if !started {
		// No receive goroutine owns the receive rings: unmap them here.
		for _, q := range e.queues {
			if q.rx != nil {
				q.rx.unmap()
			}
			if q.rx2 != nil {
				q.rx2.unmap()
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
	if q.rx != nil {
		return q.rx.blockSize * q.rx.blockNr
	}
	buf := 0
	if n, err := unix.GetsockoptInt(q.fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err == nil {
		buf = n / 2
	}
	if q.rx2 != nil {
		return min(q.rx2.frameNr*int(e.MTU()), buf)
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
	if len(e.queues) == 0 || e.queues[0].rx2 == nil {
		return 0
	}
	return e.queues[0].rx2.frameNr
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
	if r := q.rx2; r != nil {
		g.RX = RingLayout{SlotSize: r.frameSize, Slots: r.frameNr, BlockSize: r.layout.blockSize, Blocks: r.layout.blockNr}
	}
	if r := q.rx; r != nil {
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

// virtioNetHdrLen is sizeof(struct virtio_net_hdr), the header before each
// frame on a PACKET_VNET_HDR socket (internal/virtionet).
const virtioNetHdrLen = virtionet.HdrLen

// hasGSO reports whether a packet of pkts may leave whole as a TCP GSO
// frame (virtionet.IsGSOFrame).
func hasGSO(pkts []*stack.PacketBuffer) bool {
	for _, p := range pkts {
		if isGSOFrame(p) {
			return true
		}
	}
	return false
}

// isGSOFrame reports whether pkt leaves as a TCP GSO frame for the
// virtio-net socket: virtionet.IsGSOFrame, the one statement of what may.
// A labelled GSO frame
// never may: the kernel drops one from user space unless it has
// CONFIG_NET_MPLS_GSO (TestKernelLabelledGSOOverVeth).
func isGSOFrame(pkt *stack.PacketBuffer) bool { return virtionet.IsGSOFrame(pkt) }

// putVirtioNetHdr fills h for pkt, a whole Ethernet frame: zero (a plain
// frame with its checksums done) unless isGSOFrame(pkt), whose segment
// size, header length and partial TCP checksum it then describes
// (virtionet.ForPacket).
func putVirtioNetHdr(h *[virtioNetHdrLen]byte, pkt *stack.PacketBuffer) {
	virtionet.ForPacket(pkt).Encode(h[:])
}
