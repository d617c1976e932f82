//go:build linux

package afpacket

import (
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

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
	blockRing *rxBlockRing // RXRingBlock
	frameRing *rxFrameRing // RXRingFrame
	rxBatch   int          // frames per receive batch with frameRing
	maxFrame  int          // longest frame delivered (Options.MaxFrameSize)
	tx        *txRing
	txFD      int
	txFile    *os.File
	txRC      syscall.RawConn
	txWait    bool
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
func openQueue(opts *Options, e *Endpoint, batch, frameSize int, ring bool) (_ *queue, info ifaceInfo, err error) {
	vnet := batch == 0
	name := opts.Interface
	// Protocol 0: the socket receives nothing until bind names the
	// interface, so no frame of another interface slips in.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, ifaceInfo{}, opError(name, "socket", err.(syscall.Errno))
	}
	q := &queue{ep: e, fd: fd, rxBatch: batch, maxFrame: frameSize, busyPoll: opts.BusyPoll, busyAdaptive: opts.BusyPollAdaptive}
	defer func() {
		if err != nil {
			q.release()
		}
	}()
	if info, err = checkIface(fd, name); err != nil {
		return nil, info, err
	}
	if err = setSocketOptions(fd, opts, vnet); err != nil {
		return nil, info, err
	}
	proto := uint16(ethPAll)
	if vnet {
		proto = 0
	}
	// The rings' slots hold frames of the link MTU: Options.MTU, the one
	// the link is configured for, where set, and never more than the
	// interface's (the kernel sends and receives no longer frame but a
	// GSO packet, which needs no slot: see ringMTU).
	mtu := ringMTU(opts.MTU, info.mtu)
	if ring && !vnet {
		if err = q.setupRXRing(opts, mtu, frameSize); err != nil {
			return nil, info, err
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: info.index}); err != nil {
		return nil, info, opError(name, "bind", err.(syscall.Errno))
	}
	q.gapAfter.Store(math.MaxInt64)
	if q.frameRing != nil && opts.RecvBatch == 0 {
		q.rxBatch = DefaultRingBatch
	}
	if ring && !vnet {
		// A slot holds the largest frame the MTU allows, with one
		// 802.1Q tag; longer frames go out with sendmmsg on fd.
		if err = q.openTX(opts, info.index, mtu+header.EthernetMinimumSize+vlanRoom); err != nil {
			return nil, info, err
		}
	}
	// The socket is non-blocking, so os.NewFile registers it with the Go
	// poller: receive goroutines park instead of holding threads, and Close
	// wakes them.
	q.file = os.NewFile(uintptr(fd), "packet:"+name)
	if q.rc, err = q.file.SyscallConn(); err != nil {
		return nil, info, lowerlink.OpenError("packet", name, err)
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

// release frees what a queue that failed to open holds: its socket (through
// its file once it has one), its receive ring and its transmit socket.
func (q *queue) release() {
	if q.file != nil {
		q.file.Close()
	} else {
		unix.Close(q.fd)
	}
	if q.blockRing != nil {
		q.blockRing.unmap()
	}
	if q.frameRing != nil {
		q.frameRing.unmap()
	}
	if q.tx != nil {
		q.txFile.Close()
		unix.Munmap(q.tx.mem)
	}
}

// checkIface looks the interface up on fd and refuses one that is down or
// not Ethernet.
func checkIface(fd int, name string) (ifaceInfo, error) {
	info, call, errno := lookupIface(fd, name)
	switch {
	case errno != 0:
		return info, opError(name, call, errno)
	case info.flags&unix.IFF_UP == 0:
		return info, opError(name, "ioctl SIOCGIFFLAGS", unix.ENETDOWN)
	case info.hwType != unix.ARPHRD_ETHER && info.hwType != unix.ARPHRD_LOOPBACK:
		return info, lowerlink.OpenError("packet", name,
			fmt.Errorf("interface hardware type %d is not Ethernet", info.hwType))
	}
	return info, nil
}

// setSocketOptions sets a queue socket's options: never read back what it
// sends, the checksum status (and VLAN tag) of each frame, the qdisc bypass,
// the buffer sizes, and the virtio-net header on the GSOFrames socket
// (vnet).
func setSocketOptions(fd int, opts *Options, vnet bool) error {
	set := func(level, opt, v int, call string) error {
		if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
			return opError(opts.Interface, call, err.(syscall.Errno))
		}
		return nil
	}
	// setBuf asks for a buffer size beyond the sysctl limit (the FORCE
	// option, needing CAP_NET_ADMIN) and falls back to the limited one.
	setBuf := func(force, opt, n int, call string) error {
		if n <= 0 || unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, n) == nil {
			return nil
		}
		return set(unix.SOL_SOCKET, opt, n, call)
	}
	if err := set(unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1, "setsockopt PACKET_IGNORE_OUTGOING"); err != nil {
		return err
	}
	if err := set(unix.SOL_PACKET, unix.PACKET_AUXDATA, 1, "setsockopt PACKET_AUXDATA"); err != nil {
		return err
	}
	if opts.QdiscBypass {
		if err := set(unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1, "setsockopt PACKET_QDISC_BYPASS"); err != nil {
			return err
		}
	}
	rcvbuf := cmpDefault(opts.ReceiveBufferSize, DefaultReceiveBufferSize)
	if err := setBuf(unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, rcvbuf, "setsockopt SO_RCVBUF"); err != nil {
		return err
	}
	if err := setBuf(unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, opts.SendBufferSize, "setsockopt SO_SNDBUF"); err != nil {
		return err
	}
	if vnet {
		return set(unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1, "setsockopt PACKET_VNET_HDR")
	}
	return nil
}

// setupRXRing maps the queue's receive ring (Options.RXRing) with slots
// for frames of mtu; a ring the kernel refuses is a *ringError.
func (q *queue) setupRXRing(opts *Options, mtu, frameSize int) error {
	var call string
	var errno syscall.Errno
	if opts.RXRing == RXRingBlock {
		q.blockRing, call, errno = setupRXRing(q.fd, cmpDefault(opts.RingBlockSize, DefaultRingBlockSize),
			cmpDefault(opts.RingBlocks, DefaultRingBlocks), cmpDefault(opts.RingBlockTimeout, DefaultRingBlockTimeout))
	} else {
		q.frameRing, call, errno = setupRXFrameRing(q.fd, mtu+header.EthernetMinimumSize+vlanRoom,
			cmpDefault(opts.RXRingFrames, DefaultRXRingFrames), frameSize)
	}
	if errno != 0 {
		return &ringError{opError(opts.Interface, call, errno)}
	}
	return nil
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
		return &ringError{lowerlink.OpenError("packet", name, err)}
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
			return 0, lowerlink.OpenError("packet", name, err)
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
