//go:build linux

// Package xdp is a gVisor link endpoint that sends and receives whole
// Ethernet frames on one Linux interface (typically a veth) through AF_XDP
// sockets, built on gVisor's pkg/xdp (UMEM, fill, completion, RX and TX
// rings) and an XDP program that cilium/ebpf loads and attaches.
//
// It owns the sockets, their memory, the XSKMAP and the XDP program, and
// moves frames; it knows nothing of MPLS or of any network protocol: it is
// a "lower link" as docs/CONTRACTS.md defines it. Frames go up with
// DeliverNetworkPacket(0, pkt), the Ethernet header unconsumed.
//
// What the program claims: every frame that arrives on an RX queue the
// link serves (queues 0..Options.Queues-1) is redirected to that queue's
// socket, whatever its ethertype: ARP, IPv4, IPv6, MPLS and the rest. The
// node owns the link's addresses and answers ARP itself, so the kernel
// sees none of the interface's incoming frames, and neither does a packet
// capture on the interface (XDP runs before either; a capture there shows
// only what is sent). Frames on other RX queues
// pass to the kernel. See redirectProgram.
//
// Attachment: the program is attached through a BPF link, native (driver)
// mode where the driver has XDP (veth), else generic mode. Close detaches
// it, and so does the process's exit: the interface is left as it was.
//
// Modes: on a veth the sockets run in copy mode (the kernel copies each
// frame between its buffer and the UMEM); each receive batch (what the RX
// ring holds when the queue's goroutine wakes) is copied out into gVisor
// buffers and delivered, and EndBatch is called on a dispatcher that has
// it. WritePackets copies a batch into UMEM frames, posts them on the TX
// ring and kicks the kernel with one sendto per 32 frames or so (the
// kernel's copy-mode budget per call).
//
// Checksums: every frame goes up with pkt.RXChecksumValidated false, so the
// layer above verifies its IP, TCP and UDP checksums in software (or, in
// transit, forwards it with its checksums as they came). A veth peer with
// TX checksum offload (the default) sends its own TCP and UDP frames with
// partial checksums (the pseudo-header sum, CHECKSUM_PARTIAL), and AF_XDP
// carries no flag that says so: the form alone cannot be trusted (a
// crafted or corrupted frame can carry it), so such frames fail
// verification (dropped as bad_checksum) or, in transit, leave with the
// checksum they came with and fail at their receiver. The peer must send
// full checksums: `ethtool -K PEER tx off`. Stats.RXChecksumPartialForm
// counts the frames that arrived in the partial form, to show a peer that
// does not.
//
// Frames sent must carry full checksums. With XDP attached, a veth's peer
// stops sending GSO frames (the kernel segments before the veth), so
// frames are at most MTU + Ethernet header long; GSOFrames is not offered.
package xdp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	gxdp "gvisor.dev/gvisor/pkg/xdp"
)

const (
	// DefaultFrames is the number of UMEM frames per queue: half of them
	// wait in the fill ring for received frames, half carry sent ones.
	DefaultFrames = 4096

	// MaxQueues bounds Options.Queues.
	MaxQueues = 256

	// xdpHeadroom is XDP_PACKET_HEADROOM: where a frame starts in its UMEM
	// frame in copy mode.
	xdpHeadroom = 256

	// vlanRoom allows for one 802.1Q tag in a frame.
	vlanRoom = 4
)

// Options configures New. The zero value of every field but Interface is a
// sensible default.
type Options struct {
	// Interface is the name of the interface, in the network namespace of
	// the calling thread. Required. It must be up and carry no other XDP
	// program.
	Interface string

	// Queues is the number of the interface's RX queues served, 0..Queues-1,
	// one AF_XDP socket and receive goroutine each (a veth has as many as
	// its numrxqueues). 0 or 1 means queue 0 only.
	Queues int

	// Frames is the number of UMEM frames per queue, a power of two. 0
	// means DefaultFrames.
	Frames int

	// MTU overrides the link MTU read from the interface. 0 means the
	// interface's MTU.
	MTU uint32

	// LinkAddress overrides the interface's MAC address reported by
	// LinkAddress. Empty means the interface's MAC.
	LinkAddress tcpip.LinkAddress
}

// Stats are the endpoint's counters, summed over its queues.
type Stats struct {
	// RXPackets and RXBytes count frames delivered upward.
	RXPackets, RXBytes uint64
	// RXChecksumPartialForm counts delivered frames whose TCP or UDP
	// checksum field held the partial form (see partialChecksum): sent by a
	// veth peer with TX checksum offload on, they are not trusted and fail
	// verification above unless their checksum happens to be right. A
	// frame with a good full checksum lands here too once in 65536 or so
	// (its checksum equals the pseudo-header sum): a steady count against
	// RXPackets, not the odd frame, says the peer offloads.
	RXChecksumPartialForm uint64
	// RXDrops counts frames the kernel dropped for the sockets: RX ring
	// full or no free frame in the fill ring (XDP_STATISTICS rx_dropped and
	// rx_ring_full).
	RXDrops uint64
	// RXInvalid counts descriptors the kernel found invalid (XDP_STATISTICS
	// rx_invalid_descs and tx_invalid_descs); never expected.
	RXInvalid uint64
	// RXNotAttached counts frames read while no dispatcher was attached.
	RXNotAttached uint64
	// TXPackets and TXBytes count frames posted on the TX rings.
	TXPackets, TXBytes uint64
	// TXDropped counts frames dropped because the TX ring or the UMEM had
	// no room (like a full device queue: a loss on the wire).
	TXDropped uint64
	// TXTooBig counts frames longer than a UMEM frame holds, dropped.
	TXTooBig uint64
	// TXErrors counts failed kicks (sendto) other than "try again".
	TXErrors uint64
}

// opError is the error New returns for interface ifname, with a remedy
// for the usual causes.
func opError(ifname string, err error) error {
	const needRoot = "AF_XDP and BPF need CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF: run as root"
	return lowerlink.OpenError("xdp", ifname, err,
		lowerlink.Remedy{Err: unix.EPERM, Hint: needRoot},
		lowerlink.Remedy{Err: unix.EACCES, Hint: needRoot},
		lowerlink.Remedy{Err: unix.EAFNOSUPPORT, Hint: "the kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)"},
		lowerlink.Remedy{Err: unix.ENETDOWN, Hint: fmt.Sprintf("interface %q is down: ip link set %s up", ifname, ifname)},
		lowerlink.Remedy{Err: unix.EBUSY, Hint: "another AF_XDP socket or XDP program holds the interface's queue"})
}

// Endpoint is a stack.LinkEndpoint over AF_XDP sockets on one interface.
// Create it with New; it is safe for concurrent use.
type Endpoint struct {
	ifname    string
	ifindex   int
	queues    []*queue
	prog      *program
	frameSize uint32

	// Ethernet gives the MTU and MAC and the methods of a link that builds
	// and parses no header.
	lowerlink.Ethernet

	// Lifecycle gives Attach (which starts one receive goroutine per
	// queue), IsAttached, Wait, SetOnCloseAction and Close (which detaches
	// the XDP program, leaving the interface as it was found, and closes
	// the sockets; later writes fail with tcpip.ErrClosedForSend). With no
	// dispatcher attached, received frames are counted in
	// Stats.RXNotAttached and dropped.
	lowerlink.Lifecycle
}

var _ stack.LinkEndpoint = (*Endpoint)(nil)

// queue is one AF_XDP socket, bound to one RX queue, with its UMEM and
// rings.
type queue struct {
	ep   *Endpoint
	id   int
	fd   int
	file *os.File
	rc   syscall.RawConn
	cb   *gxdp.ControlBlock

	// Receive state, touched only by the queue's goroutine.
	rxN, rxIdx uint32
	readFn     func(fd uintptr) bool

	// Send state, under txMu; closed stops sending before the memory goes.
	// txProducer is the TX ring's shared producer index (see
	// ringProducer).
	txProducer *uint32
	txMu       sync.Mutex
	txClosed   bool
	released   bool

	rxPackets, rxBytes, rxPartialForm, rxNoDisp atomic.Uint64
	txPackets, txBytes, txDrops, txBig, txErr   atomic.Uint64
}

// New opens Options.Queues AF_XDP sockets on Options.Interface in the
// calling thread's network namespace, binds each to its RX queue, and
// attaches the redirect program. Receiving starts at Attach.
//
// Errors are *net.OpError values: errors.Is(err, syscall.EAFNOSUPPORT)
// means the kernel lacks CONFIG_XDP_SOCKETS; EPERM, no privilege.
func New(opts Options) (*Endpoint, error) {
	name := opts.Interface
	if name == "" {
		return nil, errors.New("xdp: Options.Interface is empty")
	}
	if opts.Queues < 0 || opts.Queues > MaxQueues {
		return nil, fmt.Errorf("xdp: Queues %d out of 0..%d", opts.Queues, MaxQueues)
	}
	nFrames := opts.Frames
	if nFrames == 0 {
		nFrames = DefaultFrames
	}
	if nFrames < 64 || nFrames&(nFrames-1) != 0 {
		return nil, fmt.Errorf("xdp: Frames %d is not a power of two of at least 64", nFrames)
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, opError(name, err)
	}
	if ifi.Flags&net.FlagUp == 0 {
		return nil, opError(name, unix.ENETDOWN)
	}
	mtu := uint32(ifi.MTU)
	if opts.MTU != 0 {
		mtu = opts.MTU
	}
	// A UMEM frame is 2048 or 4096 bytes; the frame starts xdpHeadroom in.
	frameSize := uint32(2048)
	if need := xdpHeadroom + header.EthernetMinimumSize + vlanRoom + int(max(mtu, uint32(ifi.MTU))); need > 2048 {
		frameSize = 4096
		if need > 4096 {
			return nil, opError(name, fmt.Errorf("MTU %d does not fit a 4096-byte UMEM frame (at most %d)",
				max(mtu, uint32(ifi.MTU)), 4096-xdpHeadroom-header.EthernetMinimumSize-vlanRoom))
		}
	}
	nq := max(opts.Queues, 1)
	e := &Endpoint{ifname: name, ifindex: ifi.Index, frameSize: frameSize}
	e.Init(e.startReceivers, e.closeFiles)
	e.SetMTU(mtu)
	addr := opts.LinkAddress
	if addr == "" {
		addr = tcpip.LinkAddress(ifi.HardwareAddr)
	}
	e.SetLinkAddress(addr)
	if e.prog, err = loadProgram(nq); err != nil {
		return nil, opError(name, err)
	}
	fail := func(err error) (*Endpoint, error) {
		e.prog.close()
		for _, q := range e.queues {
			q.file.Close()
			q.release()
		}
		return nil, opError(name, err)
	}
	for i := 0; i < nq; i++ {
		q, err := openQueue(e, i, uint32(nFrames), frameSize)
		if err != nil {
			return fail(err)
		}
		e.queues = append(e.queues, q)
		if err := e.prog.setSocket(i, q.fd); err != nil {
			return fail(fmt.Errorf("XSKMAP entry for queue %d: %w", i, err))
		}
	}
	if err := e.prog.attach(ifi.Index); err != nil {
		return fail(err)
	}
	return e, nil
}

// openQueue opens, maps and binds the socket of RX queue id.
func openQueue(e *Endpoint, id int, nFrames, frameSize uint32) (*queue, error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket AF_XDP", err)
	}
	cb, err := gxdp.NewFromSocket(fd, uint32(e.ifindex), uint32(id), gxdp.Opts{
		NFrames: nFrames, FrameSize: frameSize, NDescriptors: nFrames / 2,
	})
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	q := &queue{ep: e, id: id, fd: fd, cb: cb, txProducer: ringProducer(&cb.TX)}
	q.readFn = q.peek
	// Copy mode (a veth has no zero-copy), no need-wakeup flags: every
	// send kicks the kernel.
	if err := bindQueue(fd, e.ifindex, id); err != nil {
		unix.Close(fd)
		q.unmap()
		if errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("bind AF_XDP socket to queue %d: %w (does the interface have %d RX queues? a veth needs numrxqueues)", id, err, id+1)
		}
		return nil, os.NewSyscallError("bind AF_XDP", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		q.unmap()
		return nil, err
	}
	// Non-blocking: os.NewFile registers the socket with the Go poller, so
	// the receive goroutine parks instead of holding a thread, and Close
	// wakes it.
	q.file = os.NewFile(uintptr(fd), "xdp:"+e.ifname)
	if q.rc, err = q.file.SyscallConn(); err != nil {
		q.file.Close()
		q.unmap()
		return nil, err
	}
	cb.UMEM.Lock()
	cb.Fill.FillAll(&cb.UMEM)
	cb.UMEM.Unlock()
	return q, nil
}

// bindRetry bounds how long bindQueue waits for a queue that a closed
// socket still holds.
const bindRetry = 2 * time.Second

// bindQueue binds the socket to RX queue id in copy mode. The kernel
// releases a closed socket's hold on its queue in deferred work, so a link
// closed and opened again at once (a reload) may find the queue busy for a
// moment: EBUSY is retried for up to bindRetry.
func bindQueue(fd, ifindex, id int) error {
	sa := &unix.SockaddrXDP{Flags: unix.XDP_COPY, Ifindex: uint32(ifindex), QueueID: uint32(id)}
	deadline := time.Now().Add(bindRetry)
	for {
		err := unix.Bind(fd, sa)
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// peek is the RawConn.Read callback: false (wait for POLLIN) while the RX
// ring is empty.
func (q *queue) peek(uintptr) bool {
	q.rxN, q.rxIdx = q.cb.RX.Peek()
	return q.rxN > 0
}

// rxLoop delivers receive batches until the socket is closed, then
// releases the queue's memory.
func (q *queue) rxLoop() {
	defer q.release()
	for {
		if err := q.rc.Read(q.readFn); err != nil {
			return // closed
		}
		// Chunks, so that frames go back to the fill ring while the rest
		// of a long ring is delivered.
		for n, idx := q.rxN, q.rxIdx; n > 0; {
			k := min(n, rxChunk)
			q.deliver(k, idx)
			n -= k
			idx += k
		}
	}
}

// rxChunk is the most frames delivered between two refills of the fill
// ring (and two EndBatch calls).
const rxChunk = 64

// deliver hands n received frames, from RX ring index idx on, to the
// dispatcher, then returns their UMEM frames to the fill ring.
func (q *queue) deliver(n, idx uint32) {
	d := q.ep.Dispatcher()
	cb := q.cb
	var bytes, partialForm uint64
	for i := uint32(0); i < n; i++ {
		desc := cb.RX.Get(idx + i)
		if d == nil {
			continue
		}
		frame := cb.UMEM.Get(desc)
		if partialChecksum(frame) {
			partialForm++
		}
		// Never flagged RXChecksumValidated: nothing in an AF_XDP frame
		// says the kernel vouches for its checksums (see the package
		// doc).
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
		d.DeliverNetworkPacket(0, pkt)
		pkt.DecRef()
		bytes += uint64(len(frame))
	}
	cb.UMEM.Lock()
	for i := uint32(0); i < n; i++ {
		cb.UMEM.FreeFrame(cb.RX.Get(idx + i).Addr)
	}
	cb.Fill.FillAll(&cb.UMEM)
	cb.UMEM.Unlock()
	cb.RX.Release(n)
	if d == nil {
		q.rxNoDisp.Add(uint64(n))
		return
	}
	q.rxPackets.Add(uint64(n))
	q.rxBytes.Add(bytes)
	q.rxPartialForm.Add(partialForm)
	lowerlink.EndBatch(d)
}

// maxKicks bounds the sendto calls of one WritePackets chunk: the kernel
// sends up to 32 frames per call in copy mode and says EAGAIN while more
// wait.
func maxKicks(n int) int { return n/16 + 4 }

// WritePackets implements stack.LinkWriter.WritePackets. The batch is
// copied into UMEM frames on the TX ring of the queue the first packet's
// hash selects, and the kernel is kicked. Frames that find no room count
// as sent (and in Stats.TXDropped), as a loss on the wire would.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	s := pkts.AsSlice()
	if len(s) == 0 {
		return 0, nil
	}
	q := e.queues[s[0].Hash%uint32(len(e.queues))]
	q.txMu.Lock()
	defer q.txMu.Unlock()
	if q.txClosed {
		return 0, &tcpip.ErrClosedForSend{}
	}
	cb := q.cb
	room := int(e.frameSize) - xdpHeadroom
	for sent := 0; sent < len(s); {
		// A run of packets that fit a UMEM frame.
		k := 0
		for sent+k < len(s) && s[sent+k].Size() <= room {
			k++
		}
		if k == 0 {
			q.txBig.Add(1)
			sent++
			continue
		}
		cb.UMEM.Lock()
		cb.Completion.FreeAll(&cb.UMEM)
		n, idx := cb.TX.Reserve(&cb.UMEM, uint32(k))
		for n == 0 && k > 1 {
			k /= 2
			n, idx = cb.TX.Reserve(&cb.UMEM, uint32(k))
		}
		if n == 0 {
			cb.UMEM.Unlock()
			// No room: kick what waits, drop the rest of the batch.
			q.kick(len(s))
			q.txDrops.Add(uint64(len(s) - sent))
			return len(s), nil
		}
		var bytes uint64
		for i := 0; i < k; i++ {
			pkt := s[sent+i]
			addr := cb.UMEM.AllocFrame()
			frame := cb.UMEM.Get(unix.XDPDesc{Addr: addr, Len: uint32(room)})
			off := lowerlink.CopyPacket(frame, pkt)
			cb.TX.Set(idx+uint32(i), unix.XDPDesc{Addr: addr, Len: uint32(off)})
			bytes += uint64(off)
		}
		// Publish the descriptors (what TXQueue.Notify does, without its
		// kick, which allocates an error whenever the kernel says "more
		// to do"): kick below.
		atomic.StoreUint32(q.txProducer, idx+uint32(k))
		cb.UMEM.Unlock()
		q.kick(k)
		q.txPackets.Add(uint64(k))
		q.txBytes.Add(bytes)
		sent += k
	}
	return len(s), nil
}

// kick makes the kernel send what waits on the TX ring (copy mode sends
// only in sendto). Called with txMu held.
func (q *queue) kick(n int) {
	for i := maxKicks(n); i > 0; i-- {
		_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(q.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			return
		case unix.EAGAIN, unix.EINTR:
			// More frames wait (the per-call budget), or a completion
			// slot was missing: go on.
			q.cb.UMEM.Lock()
			q.cb.Completion.FreeAll(&q.cb.UMEM)
			q.cb.UMEM.Unlock()
		case unix.ENOBUFS, unix.EBUSY:
			// The device queue is full: the frames wait for the next kick.
			return
		default:
			// ENETDOWN and the like: the frames wait on the ring until the
			// interface is back.
			q.txErr.Add(1)
			return
		}
	}
}

// ringProducer returns the address of the TX ring's producer index, shared
// with the kernel. pkg/xdp keeps it in an unexported field (an
// atomicbitops.Uint32: the uint32 itself, no padding); it is found by
// reflection once, at open.
func ringProducer(tq *gxdp.TXQueue) *uint32 {
	return (*uint32)(unsafe.Pointer(reflect.ValueOf(tq).Elem().FieldByName("producer").Pointer()))
}

// kernelStats reads the socket's XDP_STATISTICS.
func (q *queue) kernelStats() (unix.XDPStatistics, bool) {
	var st unix.XDPStatistics
	l := uint32(unsafe.Sizeof(st))
	ok := false
	q.txMu.Lock()
	defer q.txMu.Unlock()
	if q.txClosed {
		return st, false
	}
	_ = q.rc.Control(func(fd uintptr) {
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_XDP, unix.XDP_STATISTICS,
			uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&l)), 0)
		ok = errno == 0
	})
	return st, ok
}

// Stats returns the counters summed over all queues.
func (e *Endpoint) Stats() Stats {
	var s Stats
	for _, q := range e.queues {
		if ks, ok := q.kernelStats(); ok {
			s.RXDrops += ks.Rx_dropped + ks.Rx_ring_full
			s.RXInvalid += ks.Rx_invalid_descs + ks.Tx_invalid_descs
		}
		s.RXPackets += q.rxPackets.Load()
		s.RXBytes += q.rxBytes.Load()
		s.RXChecksumPartialForm += q.rxPartialForm.Load()
		s.RXNotAttached += q.rxNoDisp.Load()
		s.TXPackets += q.txPackets.Load()
		s.TXBytes += q.txBytes.Load()
		s.TXDropped += q.txDrops.Load()
		s.TXTooBig += q.txBig.Load()
		s.TXErrors += q.txErr.Load()
	}
	return s
}

// Mode returns how the program is attached: "native" (driver mode, the
// veth's) or "generic".
func (e *Endpoint) Mode() string { return e.prog.mode }

// Interface returns the name of the interface.
func (e *Endpoint) Interface() string { return e.ifname }

// Capabilities implements stack.LinkEndpoint.Capabilities: none (no
// frame comes with verified checksums).
func (*Endpoint) Capabilities() stack.LinkEndpointCapabilities { return 0 }

// startReceivers starts one receive goroutine per queue.
func (e *Endpoint) startReceivers() {
	for _, q := range e.queues {
		e.Go(q.rxLoop)
	}
}

// closeFiles detaches the program and closes the sockets, which stops the
// receive goroutines (each releases its queue's memory as it ends); with
// none started it releases the queues' memory itself.
func (e *Endpoint) closeFiles(started bool) {
	e.prog.close()
	for _, q := range e.queues {
		q.txMu.Lock()
		q.txClosed = true
		q.txMu.Unlock()
		q.file.Close()
		if !started {
			q.release()
		}
	}
}

// release unmaps the queue's UMEM and rings once nothing can touch them:
// sends are stopped (txClosed, or the queue never opened) and the receive
// goroutine, if any, has ended.
func (q *queue) release() {
	q.txMu.Lock()
	defer q.txMu.Unlock()
	q.txClosed = true
	if q.released {
		return
	}
	q.released = true
	q.unmap()
}

// unmap unmaps the memory gVisor's pkg/xdp mapped for the control block:
// the UMEM and the four rings. pkg/xdp (at our pin) has no function that
// does it and keeps the mappings in unexported fields, so they are found
// by reflection; the socket is only destroyed (and its XSKMAP entry and
// queue binding released) once its rings are unmapped.
func (q *queue) unmap() {
	cb := q.cb
	for _, v := range []any{&cb.UMEM, &cb.Fill, &cb.RX, &cb.TX, &cb.Completion} {
		mem := reflect.ValueOf(v).Elem().FieldByName("mem")
		if !mem.IsValid() || mem.Kind() != reflect.Slice || mem.Len() == 0 {
			continue
		}
		unix.Syscall(unix.SYS_MUNMAP, mem.Pointer(), uintptr(mem.Len()), 0)
	}
}
