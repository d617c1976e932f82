//go:build linux

package afpacket

import (
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
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

// opError builds the error New returns: it wraps the errno in an
// *os.SyscallError naming the call, with a hint for the usual causes.
func opError(ifname, call string, errno syscall.Errno) error {
	const needRaw = "raw packet sockets need CAP_NET_RAW: run as root or grant the capability"
	noIface := fmt.Sprintf("no interface named %q in this network namespace", ifname)
	return lowerlink.OpenError("packet", ifname, os.NewSyscallError(call, errno),
		lowerlink.Remedy{Err: unix.EPERM, Hint: needRaw},
		lowerlink.Remedy{Err: unix.EACCES, Hint: needRaw},
		lowerlink.Remedy{Err: unix.ENODEV, Hint: noIface},
		lowerlink.Remedy{Err: unix.ENXIO, Hint: noIface},
		lowerlink.Remedy{Err: unix.ENETDOWN, Hint: fmt.Sprintf("interface %q is down: ip link set %s up", ifname, ifname)})
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
