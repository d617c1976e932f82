//go:build linux

// Package tap is a gVisor link endpoint that sends and receives whole
// Ethernet frames through a Linux TAP device (IFF_TAP, IFF_NO_PI: no
// packet-information header), created or attached to through /dev/net/tun.
//
// It owns the TAP file descriptors, brings the device up, and moves frames:
// one goroutine per queue reads frames and delivers them with
// DeliverNetworkPacket(0, pkt) (Ethernet header unconsumed), and
// WritePackets writes each packet as one frame with writev. It knows nothing
// of MPLS or of any network protocol: it is a "lower link" as
// docs/CONTRACTS.md defines it.
//
// Offloads (the default; Options.NoOffloads turns them off): the device is
// opened with IFF_VNET_HDR, so every frame, both ways, carries a virtio-net
// header (internal/virtionet), and TUNSETOFFLOAD (TUN_F_CSUM, TUN_F_TSO4,
// TUN_F_TSO6) lets the kernel hand us frames with partial checksums and TCP
// GSO frames up to 64 KiB, as a veth does to a packet socket:
//   - a received frame flagged VIRTIO_NET_HDR_F_NEEDS_CSUM (partial
//     checksum) or F_DATA_VALID is delivered with pkt.RXChecksumValidated
//     set, as link/afpacket does for TP_STATUS_CSUMNOTREADY/CSUM_VALID; a
//     received GSO frame is delivered whole, as link/afpacket delivers a
//     veth peer's (link/mplsendpoint segments it when it forwards);
//   - GSOFrames reports true: a TCP GSO packet (pkt.GSOOptions TCPv4/TCPv6
//     with a partial checksum, a plain Ethernet header) leaves as one frame
//     whose header tells the kernel to segment it and finish the checksum;
//     other frames leave behind a zero header (full checksums, no GSO).
//
// Without offloads the kernel segments and checksums before the TAP, and
// frames arrive with pkt.RXChecksumValidated false.
//
// Receive batches: each queue reads frames until the device has none left
// (or RecvBatch frames), then calls EndBatch on a dispatcher that has it
// (link/mplsendpoint), so the node's label switch can coalesce and write the
// batch's forwarded frames together.
//
// Queues: Options.Queues > 1 opens the device with IFF_MULTI_QUEUE, one file
// per queue; the kernel spreads flows over the queues by hash, each queue
// has its own receive goroutine, and WritePackets picks a queue by the
// packet's hash.
//
// Cost: a TAP has no batching system call (sendmmsg, recvmmsg and packet
// rings are for sockets; the tun driver's batched path is reserved for
// vhost-net in the kernel), so every frame is one read or one writev, and
// a write runs the kernel's whole receive path for the frame (tun_get_user,
// then the bridge and whatever it forwards to) in the writer's thread.
// perf profiles of the bench's configurations 7 and 10 (Linux 6.18) put
// the time inside tun_get_user (the bridge and what it forwards to
// included) at 80 to 85% of a writev; BenchmarkFrames (one frame TAP -> bridge -> TAP
// a op) allocates nothing per frame either way. Coalescing is what cuts
// frames: TCP GSO frames cross a TAP whole both ways (see above), but
// labelled ones cannot: an MPLS frame written with a GSO header is taken
// (the write succeeds) but never reaches a second TAP on the same bridge
// (tried on Linux 6.18): tun offers no MPLS offloads, so the kernel must
// segment it, and its MPLS segmentation (mpls_gso_segment) refuses a
// packet whose inner headers its own MPLS output did not set. So the MPLS
// endpoint above segments labelled packets before WritePackets.
//
// Link address: the endpoint is the far end of the TAP "wire", so it must
// not use the TAP device's own MAC (a bridge holding the TAP delivers frames
// for that MAC to the host instead of forwarding them into the TAP). By
// default it uses a random locally administered MAC; see Options.LinkAddress.
package tap

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/internal/virtionet"
	"github.com/mplsnode/mplsnode/link/lowerlink"
)

// DefaultReadBufferSize bounds a received frame: a TCP GSO frame of up to
// 64 KiB of IP packet, its Ethernet header, a VLAN tag and the virtio-net
// header, with room to spare. Without offloads frames are at most MTU +
// Ethernet header (+ VLAN tags).
const DefaultReadBufferSize = 1<<16 + 256

// DefaultRecvBatch is the most frames a queue delivers before it calls
// EndBatch.
const DefaultRecvBatch = 64

// readsPerWake is the number of frames one wake-up of a queue's goroutine
// reads (one read each) before it delivers them.
const readsPerWake = 16

// MaxQueues bounds Options.Queues (the kernel's MAX_TAP_QUEUES is 256).
const MaxQueues = 256

// tunOffloads are the offloads TUNSETOFFLOAD enables: the kernel may hand
// us partial checksums and TCP GSO frames (not ECN-marked GSO, not UDP GSO:
// those it segments itself first).
const tunOffloads = unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6

// Options configures New.
type Options struct {
	// Name is the TAP device's name. Empty lets the kernel choose (tapN);
	// an existing TAP of that name is attached to.
	Name string

	// Persist keeps the device after the endpoint closes (TUNSETPERSIST).
	Persist bool

	// MTU overrides the link MTU read from the device. 0 means the device's
	// MTU (1500 for a new TAP).
	MTU uint32

	// LinkAddress is the MAC the endpoint reports (the userspace side's
	// address). Empty means a random locally administered unicast MAC.
	LinkAddress tcpip.LinkAddress

	// ReadBufferSize bounds received frames (virtio-net header included);
	// longer ones are dropped (Stats.RXTruncated). 0 means
	// DefaultReadBufferSize.
	ReadBufferSize int

	// RecvBatch is the most frames a queue delivers between two EndBatch
	// calls. 0 means DefaultRecvBatch.
	RecvBatch int

	// Queues is the number of queues (IFF_MULTI_QUEUE when more than one),
	// each with its own file and receive goroutine. 0 or 1 means one queue
	// on a single-queue device.
	Queues int

	// NoOffloads opens the device without IFF_VNET_HDR: no virtio-net
	// header, the kernel segments and checksums every frame before the TAP,
	// and GSOFrames reports false.
	NoOffloads bool
}

// Stats are the endpoint's counters, summed over its queues.
type Stats struct {
	// RXPackets and RXBytes count frames delivered upward (virtio-net
	// headers not counted).
	RXPackets, RXBytes uint64
	// RXChecksumValidated counts delivered frames flagged NEEDS_CSUM
	// (partial checksum) or DATA_VALID.
	RXChecksumValidated uint64
	// RXGSOFrames counts delivered frames the kernel handed over as GSO
	// frames (longer than one segment).
	RXGSOFrames uint64
	// RXOverflow counts frames the kernel dropped because the device's
	// queue towards us was full: the node did not read fast enough (the
	// device's tx_dropped, read from /sys/class/net/NAME/statistics, opened
	// at New; 0 where /sys did not show the device's network namespace).
	RXOverflow uint64
	// RXTruncated counts frames that filled the read buffer, dropped.
	RXTruncated uint64
	// RXShort counts reads too short to hold a virtio-net header and an
	// Ethernet header, dropped.
	RXShort uint64
	// RXNotAttached counts frames read while no dispatcher was attached.
	RXNotAttached uint64
	// RXErrors counts failed reads.
	RXErrors uint64
	// TXPackets and TXBytes count frames written (virtio-net headers not
	// counted).
	TXPackets, TXBytes uint64
	// TXGSOFrames counts frames written as GSO frames for the kernel to
	// segment.
	TXGSOFrames uint64
	// TXErrors counts frames whose write failed; the error was returned from
	// WritePackets.
	TXErrors uint64
}

// opError is the error New returns for device name, with a remedy for the
// usual causes.
func opError(name string, err error) error {
	const needAdmin = "creating a TAP needs CAP_NET_ADMIN: run as root or grant the capability"
	remedies := []lowerlink.Remedy{
		{Err: unix.EPERM, Hint: needAdmin},
		{Err: unix.EACCES, Hint: needAdmin},
		{Err: unix.ENOENT, Hint: "no /dev/net/tun: load the tun module"},
		{Err: unix.EBUSY, Hint: fmt.Sprintf("%q exists and is not a free TAP", name)},
	}
	if name != "" {
		remedies = append(remedies, lowerlink.Remedy{Err: unix.EINVAL,
			Hint: fmt.Sprintf("%q may exist with other flags (single- or multi-queue, or not a TAP)", name)})
	}
	return lowerlink.OpenError("tap", name, err, remedies...)
}

// Endpoint is a stack.LinkEndpoint over a TAP device. Create it with New; it
// is safe for concurrent use.
type Endpoint struct {
	name      string
	txDropped *os.File // /sys/class/net/NAME/statistics/tx_dropped, or nil
	queues    []*queue
	vnet      bool // IFF_VNET_HDR: a virtio-net header before every frame

	// Ethernet gives the MTU and MAC and the methods of a link that builds
	// and parses no header.
	lowerlink.Ethernet

	// Lifecycle gives Attach (which starts one receive goroutine per
	// queue), IsAttached, Wait, SetOnCloseAction and Close (which closes
	// the TAP files, so the device goes unless Options.Persist). With no
	// dispatcher attached, received frames are counted in
	// Stats.RXNotAttached and dropped.
	lowerlink.Lifecycle
}

// queue is one file of the device with its receive and send state.
type queue struct {
	ep   *Endpoint
	file *os.File
	rc   syscall.RawConn

	// Receive state, touched only by the queue's goroutine: one read
	// callback fills up to len(rxBufs) buffers.
	rxBufs    [][]byte
	rxLens    []int
	rxN       int        // buffers filled by the last callback
	rxErr     unix.Errno // the error that ended the last callback, if any
	rxPending int        // frames delivered since the last EndBatch
	rxDrained bool       // the last callback found the device empty
	rxBatch   int
	readFn    func(fd uintptr) bool

	// Send state, under txMu: a batch's iovecs, each frame's first iovec
	// and virtio-net header; txDone frames of txCount written so far.
	txMu    sync.Mutex
	txIovs  []unix.Iovec
	txFirst []int
	txVnet  [][virtionet.HdrLen]byte
	txCount int
	txDone  int
	txErr   unix.Errno
	writeFn func(fd uintptr) bool

	rxPackets, rxBytes, rxCsum, rxGSO, rxTrunc, rxShort, rxNoDisp, rxErrors atomic.Uint64
	txPackets, txBytes, txGSO, txErrors                                     atomic.Uint64
}

var _ stack.LinkEndpoint = (*Endpoint)(nil)

// New creates (or attaches to) the TAP device in the calling thread's
// network namespace and brings it up. Receiving starts at Attach.
//
// Errors are *net.OpError values wrapping the underlying error, so
// errors.Is(err, syscall.EPERM) works when CAP_NET_ADMIN is missing.
func New(opts Options) (*Endpoint, error) {
	if opts.ReadBufferSize < 0 || opts.RecvBatch < 0 || opts.Queues < 0 || opts.Queues > MaxQueues {
		return nil, fmt.Errorf("tap: ReadBufferSize (%d) and RecvBatch (%d) must not be negative, Queues (%d) must be 0..%d",
			opts.ReadBufferSize, opts.RecvBatch, opts.Queues, MaxQueues)
	}
	if len(opts.Name) >= unix.IFNAMSIZ {
		return nil, opError(opts.Name, unix.EINVAL)
	}
	e := &Endpoint{name: opts.Name, vnet: !opts.NoOffloads}
	e.Init(e.startReceivers, e.closeFiles)
	if err := e.openQueues(opts); err != nil {
		e.closeFiles(false)
		return nil, opError(e.name, err)
	}
	mtu, err := bringUp(e.name)
	if err != nil {
		e.closeFiles(false)
		return nil, opError(e.name, err)
	}
	if opts.MTU != 0 {
		mtu = opts.MTU
	}
	e.SetMTU(mtu)
	// The file stays bound to the device, whichever namespace later reads it.
	e.txDropped, _ = os.Open("/sys/class/net/" + e.name + "/statistics/tx_dropped")
	addr := opts.LinkAddress
	if addr == "" {
		var mac [6]byte
		_, _ = rand.Read(mac[:])
		mac[0] = mac[0]&^1 | 2 // unicast, locally administered
		addr = tcpip.LinkAddress(mac[:])
	}
	e.SetLinkAddress(addr)
	return e, nil
}

// openQueues opens the device's queues (one file each, Options.Queues
// of them, at least one) with their receive buffers, and sets the
// device's offloads and persistence through the first. On an error the
// files opened so far stay in e.queues for the caller to close, and
// e.name is the device's name as far as it is known.
func (e *Endpoint) openQueues(opts Options) error {
	nq := max(opts.Queues, 1)
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if !opts.NoOffloads {
		flags |= unix.IFF_VNET_HDR
	}
	if nq > 1 {
		flags |= unix.IFF_MULTI_QUEUE
	}
	rbs := opts.ReadBufferSize
	if rbs == 0 {
		rbs = DefaultReadBufferSize
	}
	batch := opts.RecvBatch
	if batch == 0 {
		batch = DefaultRecvBatch
	}
	for i := 0; i < nq; i++ {
		f, name, err := openTUN(e.name, flags)
		if err != nil {
			return err
		}
		e.name = name // the kernel's choice when opts.Name was empty
		q := &queue{ep: e, file: f, rxBatch: batch, rxLens: make([]int, readsPerWake)}
		for range readsPerWake {
			q.rxBufs = append(q.rxBufs, make([]byte, rbs))
		}
		q.readFn = q.read
		q.writeFn = q.writev
		e.queues = append(e.queues, q)
		if q.rc, err = f.SyscallConn(); err != nil {
			return err
		}
		if i > 0 {
			continue
		}
		if e.vnet {
			if err := ioctlInt(f, unix.TUNSETOFFLOAD, tunOffloads, "ioctl TUNSETOFFLOAD"); err != nil {
				return err
			}
		}
		if opts.Persist {
			if err := ioctlInt(f, unix.TUNSETPERSIST, 1, "ioctl TUNSETPERSIST"); err != nil {
				return err
			}
		}
	}
	return nil
}

// openTUN opens /dev/net/tun non-blocking and attaches it (TUNSETIFF) to
// the TAP name with flags; it returns the file and the device's name.
func openTUN(name string, flags uint16) (*os.File, string, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, name, os.NewSyscallError("open /dev/net/tun", err)
	}
	req, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, name, err
	}
	req.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, req); err != nil {
		unix.Close(fd)
		return nil, name, os.NewSyscallError("ioctl TUNSETIFF", err)
	}
	// The fd is non-blocking, so os.NewFile registers it with the Go
	// poller: the receive goroutine parks instead of holding a thread, and
	// Close wakes it.
	return os.NewFile(uintptr(fd), "/dev/net/tun"), req.Name(), nil
}

// ioctlInt issues an ioctl whose argument is a plain integer on f.
func ioctlInt(f *os.File, req uint, v int, call string) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno error
	if err := rc.Control(func(fd uintptr) {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, uintptr(req), uintptr(v)); e != 0 {
			errno = os.NewSyscallError(call, e)
		}
	}); err != nil {
		return err
	}
	return errno
}

// ifreq is struct ifreq: name, then a 24-byte union of which we use the
// leading short (ifr_flags) or int (ifr_mtu); 40 bytes in all.
type ifreq struct {
	name  [unix.IFNAMSIZ]byte
	union [24]byte
}

// bringUp sets IFF_UP on the device and returns its MTU.
func bringUp(name string) (uint32, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	var r ifreq
	copy(r.name[:unix.IFNAMSIZ-1], name)
	ioctl := func(req uintptr, call string) error {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(&r))); e != 0 {
			return os.NewSyscallError(call, e)
		}
		return nil
	}
	if err := ioctl(unix.SIOCGIFFLAGS, "ioctl SIOCGIFFLAGS"); err != nil {
		return 0, err
	}
	*(*uint16)(unsafe.Pointer(&r.union[0])) |= unix.IFF_UP
	if err := ioctl(unix.SIOCSIFFLAGS, "ioctl SIOCSIFFLAGS"); err != nil {
		return 0, err
	}
	if err := ioctl(unix.SIOCGIFMTU, "ioctl SIOCGIFMTU"); err != nil {
		return 0, err
	}
	return uint32(*(*int32)(unsafe.Pointer(&r.union[0]))), nil
}

// read is the RawConn.Read callback: up to len(rxBufs) frames, one read
// each. It waits (false) only when the device is empty and nothing is
// pending; when frames were delivered since the last EndBatch it returns
// with rxDrained set instead, so that the loop ends the batch first.
func (q *queue) read(fd uintptr) bool {
	for q.rxN < len(q.rxBufs) {
		b := q.rxBufs[q.rxN]
		n, _, errno := unix.Syscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch errno {
		case 0:
			q.rxLens[q.rxN] = int(n)
			q.rxN++
			continue
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if q.rxN > 0 || q.rxPending > 0 {
				q.rxDrained = true
				return true
			}
			return false
		}
		q.rxErr = errno
		return true
	}
	return true
}

// rxLoop reads frames until the device is closed.
func (q *queue) rxLoop() {
	for {
		q.rxN, q.rxErr, q.rxDrained = 0, 0, false
		err := q.rc.Read(q.readFn)
		q.deliver()
		if err != nil {
			q.endBatch()
			return // closed
		}
		if q.rxErr != 0 {
			q.rxErrors.Add(1)
		}
		if q.rxDrained || q.rxPending >= q.rxBatch {
			q.endBatch()
		}
	}
}

// deliver hands the rxN frames read to the dispatcher.
func (q *queue) deliver() {
	e := q.ep
	hdrLen := 0
	if e.vnet {
		hdrLen = virtionet.HdrLen
	}
	d := e.Dispatcher()
	for i := 0; i < q.rxN; i++ {
		buf, n := q.rxBufs[i], q.rxLens[i]
		switch {
		case n >= len(buf):
			q.rxTrunc.Add(1)
			continue
		case n == 0:
			continue
		case n < hdrLen+header.EthernetMinimumSize:
			q.rxShort.Add(1)
			continue
		case d == nil:
			q.rxNoDisp.Add(1)
			continue
		}
		frame := buf[hdrLen:n]
		validated := false
		if e.vnet {
			h := virtionet.Decode(buf)
			validated = h.Flags&(virtionet.FlagNeedsCsum|virtionet.FlagDataValid) != 0
			if h.GSOType&^virtionet.GSOECN != virtionet.GSONone {
				q.rxGSO.Add(1)
			}
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
		pkt.RXChecksumValidated = validated
		d.DeliverNetworkPacket(0, pkt)
		pkt.DecRef()
		q.rxPackets.Add(1)
		q.rxBytes.Add(uint64(len(frame)))
		if validated {
			q.rxCsum.Add(1)
		}
		q.rxPending++
	}
}

// endBatch tells the dispatcher, if it wants to know, that the frames
// delivered since the last call are a batch.
func (q *queue) endBatch() {
	if q.rxPending == 0 {
		return
	}
	q.rxPending = 0
	lowerlink.EndBatch(q.ep.Dispatcher())
}

// writev is the RawConn.Write callback: one writev per frame of the batch,
// from txDone on, until all are written, one fails, or the device says
// EAGAIN (false: wait until it is writable).
func (q *queue) writev(fd uintptr) bool {
	for q.txDone < q.txCount {
		first := q.txFirst[q.txDone]
		end := len(q.txIovs)
		if q.txDone+1 < q.txCount {
			end = q.txFirst[q.txDone+1]
		}
		_, _, errno := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&q.txIovs[first])), uintptr(end-first))
		switch errno {
		case 0:
			q.txDone++
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			q.txErr = errno
			return true
		}
	}
	return true
}

// WritePackets implements stack.LinkWriter.WritePackets: each packet is
// written as one frame with one writev, on the queue the first packet's
// hash selects. With offloads a TCP GSO packet leaves as one GSO frame
// (see the package doc).
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	s := pkts.AsSlice()
	if len(s) == 0 {
		return 0, nil
	}
	q := e.queues[s[0].Hash%uint32(len(e.queues))]
	q.txMu.Lock()
	defer q.txMu.Unlock()
	if e.vnet && len(q.txVnet) < len(s) {
		q.txVnet = make([][virtionet.HdrLen]byte, len(s))
	}
	q.txIovs, q.txFirst = q.txIovs[:0], q.txFirst[:0]
	var bytes, gso uint64
	for i, pkt := range s {
		q.txFirst = append(q.txFirst, len(q.txIovs))
		if e.vnet {
			h := virtionet.ForPacket(pkt)
			if h.GSOType != virtionet.GSONone {
				gso++
			}
			h.Encode(q.txVnet[i][:])
			q.txIovs = append(q.txIovs, lowerlink.Iovec(q.txVnet[i][:]))
		}
		var n int
		q.txIovs, n = lowerlink.AppendIovecs(q.txIovs, pkt, 0)
		bytes += uint64(n)
	}
	q.txCount, q.txDone, q.txErr = len(s), 0, 0
	err := q.rc.Write(q.writeFn)
	// Views referenced by the iovecs stay alive through pkts until here.
	clear(q.txIovs)
	done := q.txDone
	q.txPackets.Add(uint64(done))
	if done == len(s) {
		q.txBytes.Add(bytes)
		q.txGSO.Add(gso)
	}
	if err != nil {
		return done, &tcpip.ErrClosedForSend{}
	}
	if q.txErr != 0 {
		q.txErrors.Add(1)
		return done, tcpip.TranslateErrno(q.txErr)
	}
	return done, nil
}

// Stats returns the endpoint's counters, summed over its queues.
func (e *Endpoint) Stats() Stats {
	var s Stats
	if f := e.txDropped; f != nil {
		var b [24]byte
		if n, err := f.ReadAt(b[:], 0); n > 0 && (err == nil || errors.Is(err, io.EOF)) {
			s.RXOverflow, _ = strconv.ParseUint(strings.TrimSpace(string(b[:n])), 10, 64)
		}
	}
	for _, q := range e.queues {
		s.RXPackets += q.rxPackets.Load()
		s.RXBytes += q.rxBytes.Load()
		s.RXChecksumValidated += q.rxCsum.Load()
		s.RXGSOFrames += q.rxGSO.Load()
		s.RXTruncated += q.rxTrunc.Load()
		s.RXShort += q.rxShort.Load()
		s.RXNotAttached += q.rxNoDisp.Load()
		s.RXErrors += q.rxErrors.Load()
		s.TXPackets += q.txPackets.Load()
		s.TXBytes += q.txBytes.Load()
		s.TXGSOFrames += q.txGSO.Load()
		s.TXErrors += q.txErrors.Load()
	}
	return s
}

// GSOFrames reports whether WritePackets sends TCP GSO packets as single
// frames for the kernel to segment (offloads on; see docs/CONTRACTS.md).
func (e *Endpoint) GSOFrames() bool { return e.vnet }

// Queues returns the number of queues.
func (e *Endpoint) Queues() int { return len(e.queues) }

// Name returns the TAP device's name.
func (e *Endpoint) Name() string { return e.name }

// Capabilities implements stack.LinkEndpoint.Capabilities: none.
func (*Endpoint) Capabilities() stack.LinkEndpointCapabilities { return 0 }

// startReceivers starts one receive goroutine per queue.
func (e *Endpoint) startReceivers() {
	for _, q := range e.queues {
		e.Go(q.rxLoop)
	}
}

// closeFiles closes the TAP files, which stops the receive goroutines.
func (e *Endpoint) closeFiles(bool) {
	for _, q := range e.queues {
		q.file.Close()
	}
	if e.txDropped != nil {
		e.txDropped.Close()
	}
}
