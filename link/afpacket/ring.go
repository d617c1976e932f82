//go:build linux

package afpacket

import (
	"encoding/binary"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Mode says how a queue moves frames between the kernel and us.
type Mode uint8

// Modes. The zero value is ModeAuto.
const (
	// ModeAuto uses memory-mapped rings where the kernel lets New set them
	// up, and recvmmsg/sendmmsg otherwise (Endpoint.Mode and
	// Endpoint.FallbackReason say which, and why).
	ModeAuto Mode = iota
	// ModeMMsg reads with recvmmsg into preallocated buffers and writes
	// with sendmmsg: one system call per batch, and the kernel copies
	// every frame between the socket and those buffers.
	ModeMMsg
	// ModeRing receives through a TPACKET_V3 ring (the kernel writes
	// frames into shared blocks; one wakeup per filled or timed-out block)
	// and sends through a TPACKET_V2 ring on a second, send-only socket
	// (frames written into shared slots; one send() kicks a whole batch).
	// New fails if the rings cannot be set up.
	ModeRing
)

// String returns the mode's config word: auto, mmsg or ring.
func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeMMsg:
		return "mmsg"
	case ModeRing:
		return "ring"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses a mode's config word.
func ParseMode(s string) (Mode, bool) {
	switch s {
	case "auto":
		return ModeAuto, true
	case "mmsg":
		return ModeMMsg, true
	case "ring":
		return ModeRing, true
	}
	return 0, false
}

const (
	// DefaultRingBlockSize is the size of one TPACKET_V3 receive block.
	// A block must hold the largest frame a veth peer hands over (a 64 KiB
	// GSO packet and its headers); the kernel wakes the reader once per
	// block, when it is full or Options.RingBlockTimeout has passed.
	DefaultRingBlockSize = 256 << 10

	// DefaultRingBlocks is the number of receive blocks: 32 x 256 KiB =
	// 8 MiB per queue, room for about 100 of a veth peer's 64 KiB GSO
	// frames (a block holds three).
	DefaultRingBlocks = 32

	// DefaultRingBlockTimeout is the receive block timeout in milliseconds
	// (tp_retire_blk_tov): a block that is not full is handed over after
	// it, so a lone frame waits at most this long. 1 is the kernel's
	// smallest.
	DefaultRingBlockTimeout = 1

	// DefaultRXRingFrames is the number of receive slots per queue of an
	// RXRingFrame ring: 2048 x 2 KiB = 4 MiB for a 1500-byte MTU, as much
	// as the mmsg mode's socket buffer (rings are resident memory).
	DefaultRXRingFrames = 2048

	// DefaultRingBatch is the most frames of a frame ring's receive batch
	// when Options.RecvBatch is 0: the ready ones, never waiting for more.
	// Longer batches than mmsg's let the label switch write more frames per
	// kick of the egress ring.
	DefaultRingBatch = 256

	// DefaultTXRingFrames is the number of transmit slots per queue (1 MiB
	// for a 1500-byte MTU). A slot is free again once the kernel has
	// handed its frame on (on a veth, at the peer's receive).
	DefaultTXRingFrames = 512

	// tpacket2HdrLen is where a TPACKET_V2 transmit frame's data starts:
	// TPACKET_ALIGN(sizeof(struct tpacket2_hdr)), the kernel's default
	// offset without PACKET_TX_HAS_OFF.
	tpacket2HdrLen = 32

	// tpacketAlign is TPACKET_ALIGNMENT.
	tpacketAlign = 16

	// Offsets in struct tpacket_block_desc (version, offset_to_priv, then
	// struct tpacket_hdr_v1).
	blkStatusOff   = 8
	blkNumPktsOff  = 12
	blkFirstPktOff = 16
	blkLenOff      = 20
	blkHdrLen      = 48

	// Offsets in struct tpacket3_hdr.
	f3NextOff     = 0
	f3SnapLenOff  = 12
	f3LenOff      = 16
	f3StatusOff   = 20
	f3MacOff      = 24
	f3VlanTCIOff  = 32
	f3VlanTPIDOff = 36
	f3HdrLen      = 48

	// Offsets in struct tpacket2_hdr.
	f2StatusOff = 0
	f2LenOff    = 4
)

// u32at returns the uint32 at mem[off:] for atomic access.
func u32at(mem []byte, off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&mem[off]))
}

// rxBlockRing is a TPACKET_V3 receive ring: blockNr blocks of blockSize bytes
// that the kernel fills and hands to us one block at a time.
type rxBlockRing struct {
	mem       []byte
	blockSize int
	blockNr   int
	cur       int // the next block we expect the kernel to hand over
	unmapOnce sync.Once
}

// setupRXRing turns fd into a TPACKET_V3 socket with a receive ring and
// maps it. On failure it returns the call that failed and its errno.
func setupRXRing(fd int, blockSize, blockNr, tov int) (*rxBlockRing, string, unix.Errno) {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return nil, "setsockopt PACKET_VERSION TPACKET_V3", err.(unix.Errno)
	}
	const frameSize = 2048 // V3 frames are variable; the kernel wants a nominal size
	req := unix.TpacketReq3{
		Block_size:       uint32(blockSize),
		Block_nr:         uint32(blockNr),
		Frame_size:       frameSize,
		Frame_nr:         uint32(blockSize / frameSize * blockNr),
		Retire_blk_tov:   uint32(tov),
		Sizeof_priv:      0,
		Feature_req_word: 0,
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, "setsockopt PACKET_RX_RING", err.(unix.Errno)
	}
	mem, err := unix.Mmap(fd, 0, blockSize*blockNr, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, "mmap PACKET_RX_RING", err.(unix.Errno)
	}
	return &rxBlockRing{mem: mem, blockSize: blockSize, blockNr: blockNr}, "", 0
}

func (r *rxBlockRing) unmap() {
	r.unmapOnce.Do(func() { unix.Munmap(r.mem) })
}

// block returns block i's memory.
func (r *rxBlockRing) block(i int) []byte {
	return r.mem[i*r.blockSize : (i+1)*r.blockSize : (i+1)*r.blockSize]
}

// ready reports whether the current block is ours to read.
func (r *rxBlockRing) ready() bool {
	return u32at(r.block(r.cur), blkStatusOff).Load()&unix.TP_STATUS_USER != 0
}

// release hands the current block back to the kernel and moves on.
func (r *rxBlockRing) release() {
	u32at(r.block(r.cur), blkStatusOff).Store(unix.TP_STATUS_KERNEL)
	r.cur++
	if r.cur == r.blockNr {
		r.cur = 0
	}
}

// rxRingLoop reads blocks, one batch each, until the socket is closed,
// then unmaps the ring (wait.go's ringLoop).
func (q *queue) rxRingLoop() {
	q.ringLoop(q.blockRing.ready, q.deliverBlocks, q.blockRing.unmap)
}

// deliverBlocks delivers every block the kernel retired, one batch each,
// until none is left or the endpoint closes (a peer that never stops
// sending would otherwise keep the loop, and Close's Wait, here forever).
func (q *queue) deliverBlocks() {
	for q.blockRing.ready() && !q.ep.Closed() {
		q.deliverBlock(q.blockRing.block(q.blockRing.cur))
		q.blockRing.release()
	}
}

// deliverBlock hands the frames of one retired block to the dispatcher,
// each copied once into a packet buffer, and ends the batch.
func (q *queue) deliverBlock(blk []byte) {
	d := q.ep.Dispatcher()
	q.rxBlocks.Add(1)
	n := int(binary.NativeEndian.Uint32(blk[blkNumPktsOff:]))
	off := int(binary.NativeEndian.Uint32(blk[blkFirstPktOff:]))
	var t rxTally
	var trunc, nodisp uint64
	for i := 0; i < n; i++ {
		if off < blkHdrLen || off+f3HdrLen > len(blk) {
			q.rxErrors.Add(1) // a block the kernel did not lay out as documented
			break
		}
		fh := blk[off:]
		next := int(binary.NativeEndian.Uint32(fh[f3NextOff:]))
		snap := int(binary.NativeEndian.Uint32(fh[f3SnapLenOff:]))
		wire := int(binary.NativeEndian.Uint32(fh[f3LenOff:]))
		status := binary.NativeEndian.Uint32(fh[f3StatusOff:])
		mac := int(binary.NativeEndian.Uint16(fh[f3MacOff:]))
		switch {
		case snap < wire || snap > q.maxFrame:
			// Longer than a block can hold (the kernel clamped it) or
			// than Options.MaxFrameSize: dropped, the next frame is intact.
			trunc++
		case mac < f3HdrLen+vlanRoom || mac+snap > len(fh):
			q.rxErrors.Add(1)
		case d == nil:
			nodisp++
		default:
			start := mac
			if status&unix.TP_STATUS_VLAN_VALID != 0 && snap >= 2*header.EthernetAddressSize {
				// Put the offloaded 802.1Q tag back after the MAC
				// addresses, in the room before the frame.
				tpid := binary.NativeEndian.Uint16(fh[f3VlanTPIDOff:])
				if status&unix.TP_STATUS_VLAN_TPID_VALID == 0 {
					tpid = unix.ETH_P_8021Q
				}
				tci := uint16(binary.NativeEndian.Uint32(fh[f3VlanTCIOff:]))
				start = mac - vlanRoom
				copy(fh[start:], fh[mac:mac+2*header.EthernetAddressSize])
				binary.BigEndian.PutUint16(fh[start+12:], tpid)
				binary.BigEndian.PutUint16(fh[start+14:], tci)
			}
			frame := fh[start : mac+snap]
			// The block goes back to the kernel at the batch's end.
			q.deliverFrame(d, frame, status, &t)
		}
		if next == 0 {
			break
		}
		off += next
	}
	if d != nil && t.pkts > 0 {
		lowerlink.EndBatch(d)
	}
	q.add(&t)
	if trunc != 0 {
		q.rxTrunc.Add(trunc)
	}
	if nodisp != 0 {
		q.rxNoDisp.Add(nodisp)
	}
}

// txRing is a TPACKET_V2 transmit ring on a send-only socket: frameNr
// fixed slots of frameSize bytes, filled strictly in order (the kernel
// walks them in order and stops at the first slot not marked for sending).
type txRing struct {
	mem       []byte
	frameSize int
	frameNr   int
	layout    ringLayout
	// next is the slot the next frame goes into; head is the oldest slot
	// marked for sending that the kernel has not taken yet (head == next:
	// none). lens holds each pending slot's frame length, 0 for a frame
	// withdrawn (counted as dropped) before the kernel took it.
	next, head int
	pending    int
	lens       []uint32
	closed     bool
}

// setupTXRing turns fd into a TPACKET_V2 socket with a transmit ring of
// frameNr slots, each big enough for a frame of maxFrame bytes, and maps it.
func setupTXRing(fd, maxFrame, frameNr int) (*txRing, string, unix.Errno) {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return nil, "setsockopt PACKET_VERSION TPACKET_V2", err.(unix.Errno)
	}
	// PACKET_LOSS: a slot the kernel cannot send (we withdraw one by
	// zeroing its length) is skipped and made available, not left to stop
	// the ring.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_LOSS, 1); err != nil {
		return nil, "setsockopt PACKET_LOSS", err.(unix.Errno)
	}
	// A slot holds the TPACKET_V2 header, the virtio-net header and the
	// frame (txDataOff + maxFrame): the kernel takes tp_len (virtio-net
	// header and frame) up to the slot less the TPACKET_V2 header.
	l := layoutRing(txDataOff+maxFrame, frameNr)
	req := l.req()
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
		return nil, "setsockopt PACKET_TX_RING", err.(unix.Errno)
	}
	mem, err := unix.Mmap(fd, 0, l.mapped(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, "mmap PACKET_TX_RING", err.(unix.Errno)
	}
	return &txRing{mem: mem, frameSize: l.frameSize, frameNr: l.frameNr, layout: l, lens: make([]uint32, l.frameNr)}, "", 0
}

// ringLayout is the geometry of a TPACKET_V2 ring (frame ring, receive or
// transmit): blockNr blocks of blockSize bytes, each holding perBlock
// slots of frameSize bytes from its start (the kernel leaves a block's
// tail unused), frameNr = blockNr*perBlock slots in all.
type ringLayout struct {
	frameSize, frameNr int
	blockSize, blockNr int
	perBlock           int
	offs               []int // each slot's offset in the mapping
}

// minRingBlock is the smallest block layoutRing uses: 64 KiB with 4 KiB
// pages (32 slots of 2 KiB).
func minRingBlock() int { return 16 * unix.Getpagesize() }

// layoutRing lays out a frame ring of at least frames slots that each
// hold need bytes (the kernel's header and the longest frame), so that
// what the ring maps (it is resident: MAP_POPULATE) follows need, that is
// the link MTU the ring serves:
//
//   - A slot is need rounded up to TPACKET_ALIGNMENT, or, up to 2 KiB, to
//     a power of two (the standard MTU's geometry that docs/CONFIG.md and
//     the rx-ring-frames tests state: 32 slots of 2 KiB per 64 KiB block,
//     at most 1 KiB a slot lost). A jumbo slot is not rounded to a power
//     of two: 9088 bytes for a 9000-byte MTU, not 16 KiB.
//   - A block is a power of two pages (the kernel allocates each block as
//     one 2^order-page chunk, so any other size would waste the rest of
//     the chunk unseen), at least 64 KiB and one slot; of the block sizes
//     up to 8 times the smallest, the one that maps the fewest bytes for
//     frames slots wins (the smaller on a tie): with 65 KiB slots a 1 MiB
//     block holds 15 where a 128 KiB one holds 1.
func layoutRing(need, frames int) ringLayout {
	fs := (need + tpacketAlign - 1) &^ (tpacketAlign - 1)
	if fs <= 2048 {
		p := tpacketAlign
		for p < fs {
			p <<= 1
		}
		fs = p
	}
	b0 := minRingBlock()
	for b0 < fs {
		b0 <<= 1
	}
	var best ringLayout
	for bs := b0; bs <= 8*b0; bs <<= 1 {
		per := bs / fs
		nr := (frames + per - 1) / per
		if best.blockSize == 0 || nr*bs < best.mapped() {
			best = ringLayout{frameSize: fs, frameNr: nr * per, blockSize: bs, blockNr: nr, perBlock: per}
		}
	}
	best.offs = make([]int, best.frameNr)
	for i := range best.offs {
		best.offs[i] = i/best.perBlock*best.blockSize + i%best.perBlock*best.frameSize
	}
	return best
}

// mapped is the size of the ring's mapping.
func (l *ringLayout) mapped() int { return l.blockSize * l.blockNr }

// req is the ring's PACKET_RX_RING or PACKET_TX_RING request.
func (l *ringLayout) req() unix.TpacketReq {
	return unix.TpacketReq{
		Block_size: uint32(l.blockSize),
		Block_nr:   uint32(l.blockNr),
		Frame_size: uint32(l.frameSize),
		Frame_nr:   uint32(l.frameNr),
	}
}

// capacity is the largest frame a slot holds.
func (r *txRing) capacity() int { return r.frameSize - txDataOff }

// txDataOff is where a transmit slot's frame starts: after the TPACKET_V2
// header and a virtio-net header (PACKET_VNET_HDR on the transmit socket)
// whose hdr_len covers the whole frame, so that the kernel copies the frame
// into the skb's linear part. Without it the frame's bytes would ride as
// page fragments of the ring (zero-copy), which a veth must copy again
// into freshly allocated pages (skb_copy_ubufs) before the peer takes the
// skb: a page allocation and free per frame.
const txDataOff = tpacket2HdrLen + virtioNetHdrLen

func (r *txRing) slot(i int) []byte {
	o := r.layout.offs[i]
	return r.mem[o : o+r.frameSize : o+r.frameSize]
}

func (r *txRing) status(i int) uint32 { return u32at(r.slot(i), f2StatusOff).Load() }

// reap moves head past the slots the kernel has taken and returns the
// frames and bytes it sent.
func (r *txRing) reap() (frames, bytes uint64) {
	for r.pending > 0 && r.status(r.head) != unix.TP_STATUS_SEND_REQUEST {
		if l := r.lens[r.head]; l != 0 {
			frames++
			bytes += uint64(l)
		}
		r.head++
		if r.head == r.frameNr {
			r.head = 0
		}
		r.pending--
	}
	return frames, bytes
}

// withdraw zeroes the length of pending slots from head on (all of them,
// or only the first), so the kernel skips them, and returns how many it
// withdrew.
func (r *txRing) withdraw(all bool) int {
	n := 0
	for i, j := 0, r.head; i < r.pending; i++ {
		if r.lens[j] != 0 {
			binary.NativeEndian.PutUint32(r.slot(j)[f2LenOff:], 0)
			r.lens[j] = 0
			n++
			if !all {
				break
			}
		}
		j++
		if j == r.frameNr {
			j = 0
		}
	}
	return n
}

// writeRing puts pkts into the transmit ring and kicks the kernel once per
// batch (more often only when the ring fills). Called with txMu held.
// Frames too long for a slot go out with sendmmsg on the receive socket,
// after the ring has been flushed so the order holds.
func (q *queue) writeRing(pkts []*stack.PacketBuffer) (int, tcpip.Error) {
	r := q.tx
	if r.closed {
		return 0, &tcpip.ErrClosedForSend{}
	}
	errs0 := q.txErrors.Load()
	done := 0
	// A failed kick withdraws the frames still pending, all of this call
	// (earlier calls' kicks left none): they were not sent.
	failed := func() int { return int(q.txErrors.Load() - errs0) }
	for i, pkt := range pkts {
		size := pkt.Size()
		if size > r.capacity() {
			if err := q.kick(true); err != nil {
				return done - failed(), err
			}
			n, err := q.write(pkts[i : i+1])
			done += n
			if err != nil {
				return done, err
			}
			continue
		}
		for r.pending == r.frameNr || r.status(r.next) != unix.TP_STATUS_AVAILABLE {
			// Ring full: send what is in it and wait for slots.
			if err := q.kick(true); err != nil {
				return done - failed(), err
			}
			q.txRingFull.Add(1)
		}
		data := r.slot(r.next)[txDataOff : txDataOff+size]
		lowerlink.CopyPacket(data, pkt)
		r.commit(size)
		done++
	}
	if err := q.kick(false); err != nil {
		return done - failed(), err
	}
	return done, nil
}

// kick asks the kernel to send the pending slots (send with no data).
// With wait, it returns only once a slot is free (waiting for the socket
// to become writable if need be); without, once the kernel stopped taking
// slots for a reason other than a full device queue. A device that refuses
// a frame (ENOBUFS, such as a veth whose peer's backlog is full) loses it
// as a wire would: the slot is withdrawn and counted in Stats.TXDropped.
// Other errors (ENETDOWN) withdraw every pending slot, count them in
// Stats.TXErrors and are returned.
func (q *queue) kick(wait bool) tcpip.Error {
	r := q.tx
	q.txWait = wait
	q.txErr = 0
	err := q.txRC.Control(q.kickFn)
	if err == nil && q.txClosing.Load() {
		err = errClosing
	}
	frames, bytes := r.reap()
	q.txPackets.Add(frames)
	q.txBytes.Add(bytes)
	if err != nil {
		return &tcpip.ErrClosedForSend{}
	}
	if q.txErr != 0 {
		n := r.withdraw(true)
		q.txErrors.Add(uint64(n))
		// One more kick lets the kernel skip the withdrawn slots.
		_, _, _ = unix.RawSyscall6(unix.SYS_SENDTO, uintptr(q.txFD), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		f, b := r.reap()
		q.txPackets.Add(f)
		q.txBytes.Add(b)
		return tcpip.TranslateErrno(q.txErr)
	}
	return nil
}

// kickOnce is one round of kick (kickLoop): false waits for the socket to
// become writable. The send never blocks (MSG_DONTWAIT), so it is a raw
// system call (wait.go says why).
func (q *queue) kickOnce(fd uintptr) bool {
	r := q.tx
	for {
		_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, fd, 0, 0, unix.MSG_DONTWAIT, 0, 0)
		frames, bytes := r.reap()
		q.txPackets.Add(frames)
		q.txBytes.Add(bytes)
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			// The socket's send buffer is full of frames in flight.
			if r.pending == 0 {
				return true
			}
			return false
		case unix.ENOBUFS:
			// The kernel put the refused frame's slot back as
			// pending: withdraw it (lost, as on a wire) and go on.
			if r.withdraw(false) > 0 {
				q.txDrops.Add(1)
			}
			continue
		default:
			q.txErr = errno
			return true
		}
		if r.pending != 0 && r.status(r.head) == unix.TP_STATUS_SEND_REQUEST {
			continue // the kernel stopped early (send buffer); go on
		}
		if !q.txWait || r.pending < r.frameNr && r.status(r.next) == unix.TP_STATUS_AVAILABLE {
			return true
		}
		// Every slot is in flight: wait until the kernel frees one.
		return false
	}
}

// RXRing chooses the receive ring of ModeRing.
type RXRing uint8

// Receive rings. The zero value is RXRingDefault.
const (
	// RXRingDefault is RXRingFrame.
	RXRingDefault RXRing = iota
	// RXRingFrame is a TPACKET_V2 ring of fixed slots sized for the link
	// MTU, handed over frame by frame: the reader sleeps only when the
	// ring is empty, so a lone frame (a TCP ACK) is read at once. A frame
	// longer than a slot (a veth peer's GSO packet) is copied whole to
	// the socket's queue (PACKET_COPY_THRESH) and read from there.
	RXRingFrame
	// RXRingBlock is a TPACKET_V3 ring of blocks, handed over a block at
	// a time (one wakeup per block): the fewest wakeups, but a block that
	// does not fill waits for Options.RingBlockTimeout (at least 1 ms),
	// which a TCP sender feels as added round-trip time.
	RXRingBlock
)

// String returns "frame" or "block".
func (r RXRing) String() string {
	switch r {
	case RXRingDefault, RXRingFrame:
		return "frame"
	case RXRingBlock:
		return "block"
	}
	return "RXRing(" + strconv.Itoa(int(r)) + ")"
}

// Offsets in struct tpacket2_hdr (receive side).
const (
	// rxFrameMacOff is where the kernel puts an Ethernet frame in a
	// receive slot: TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14, with
	// TPACKET2_HDRLEN = 32 + sizeof(struct sockaddr_ll) = 52.
	rxFrameMacOff = 66
	f2SnapLenOff  = 8
	f2MacOff      = 12
	f2VlanTCIOff  = 24
	f2VlanTPIDOff = 26
)

// rxFrameRing is a TPACKET_V2 receive ring: frameNr slots the kernel fills
// and hands over one at a time.
type rxFrameRing struct {
	mem       []byte
	frameSize int
	frameNr   int
	layout    ringLayout
	cur       int
	// copyBuf and copyCtl receive the frames the kernel queued whole
	// because they did not fit a slot (TP_STATUS_COPY).
	copyBuf   []byte
	copyMsg   unix.Msghdr
	copyIov   unix.Iovec
	unmapOnce sync.Once
}

// setupRXFrameRing turns fd into a TPACKET_V2 socket with a receive ring
// of at least frames slots, each big enough for a frame of maxFrame bytes
// behind the kernel's header, and maps it.
func setupRXFrameRing(fd, maxFrame, frames, bigFrame int) (*rxFrameRing, string, unix.Errno) {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return nil, "setsockopt PACKET_VERSION TPACKET_V2", err.(unix.Errno)
	}
	// Frames too long for a slot go whole to the socket's receive queue.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_COPY_THRESH, 1); err != nil {
		return nil, "setsockopt PACKET_COPY_THRESH", err.(unix.Errno)
	}
	// The kernel puts a frame's network header at TPACKET_ALIGN(
	// TPACKET2_HDRLEN + 16) = 80 bytes into the slot (its Ethernet header
	// 66 bytes in), and a frame that would end past the slot goes whole
	// to the socket's queue (TP_STATUS_COPY).
	l := layoutRing(rxFrameMacOff+maxFrame, frames)
	req := l.req()
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, "setsockopt PACKET_RX_RING", err.(unix.Errno)
	}
	mem, err := unix.Mmap(fd, 0, l.mapped(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, "mmap PACKET_RX_RING", err.(unix.Errno)
	}
	r := &rxFrameRing{mem: mem, frameSize: l.frameSize, frameNr: l.frameNr, layout: l, copyBuf: make([]byte, vlanRoom+bigFrame)}
	r.copyIov.Base = &r.copyBuf[vlanRoom]
	r.copyIov.SetLen(bigFrame)
	r.copyMsg.Iov = &r.copyIov
	r.copyMsg.SetIovlen(1)
	return r, "", 0
}

func (r *rxFrameRing) unmap() {
	r.unmapOnce.Do(func() { unix.Munmap(r.mem) })
}

func (r *rxFrameRing) slot(i int) []byte {
	o := r.layout.offs[i]
	return r.mem[o : o+r.frameSize : o+r.frameSize]
}

// ready reports whether the current slot is ours to read.
func (r *rxFrameRing) ready() bool {
	return u32at(r.slot(r.cur), f2StatusOff).Load()&unix.TP_STATUS_USER != 0
}

// release hands the current slot back to the kernel and moves on.
func (r *rxFrameRing) release() {
	u32at(r.slot(r.cur), f2StatusOff).Store(unix.TP_STATUS_KERNEL)
	r.cur++
	if r.cur == r.frameNr {
		r.cur = 0
	}
}

// rxFrameRingLoop reads frames until the endpoint is closed (wait.go),
// then unmaps the ring. A receive batch is at most Options.RecvBatch
// frames: the ready ones, never waiting for more.
func (q *queue) rxFrameRingLoop() {
	q.ringLoop(q.frameRing.ready, q.deliverAllFrames, q.frameRing.unmap)
}

// deliverAllFrames delivers the ready frames, a batch at a time, until
// none is left or the endpoint closes (see deliverBlocks).
func (q *queue) deliverAllFrames() {
	for q.frameRing.ready() && !q.ep.Closed() {
		q.deliverFrames()
	}
}

// deliverFrames hands up to a batch of ready slots to the dispatcher, each
// copied once into a packet buffer, and ends the batch.
func (q *queue) deliverFrames() {
	d := q.ep.Dispatcher()
	r := q.frameRing
	q.rxBlocks.Add(1)
	var t rxTally
	var trunc, nodisp uint64
	for n := 0; n < q.rxBatch && r.ready(); n++ {
		fh := r.slot(r.cur)
		wire := int(binary.NativeEndian.Uint32(fh[f2LenOff:]))
		snap := int(binary.NativeEndian.Uint32(fh[f2SnapLenOff:]))
		status := binary.NativeEndian.Uint32(fh[f2StatusOff:])
		mac := int(binary.NativeEndian.Uint16(fh[f2MacOff:]))
		buf, start := fh, mac
		if status&unix.TP_STATUS_COPY != 0 {
			// The whole frame waits in the socket's queue.
			got, ok := q.recvCopy()
			if !ok {
				q.rxErrors.Add(1)
				r.release()
				continue
			}
			buf, start, snap = r.copyBuf, vlanRoom, got
		}
		switch {
		case snap < wire || snap > q.maxFrame:
			trunc++
		case start < vlanRoom || start+snap > len(buf):
			q.rxErrors.Add(1)
		case d == nil:
			nodisp++
		default:
			end := start + snap
			if status&unix.TP_STATUS_VLAN_VALID != 0 && snap >= 2*header.EthernetAddressSize {
				tpid := binary.NativeEndian.Uint16(fh[f2VlanTPIDOff:])
				if status&unix.TP_STATUS_VLAN_TPID_VALID == 0 {
					tpid = unix.ETH_P_8021Q
				}
				tci := binary.NativeEndian.Uint16(fh[f2VlanTCIOff:])
				copy(buf[start-vlanRoom:], buf[start:start+2*header.EthernetAddressSize])
				start -= vlanRoom
				binary.BigEndian.PutUint16(buf[start+12:], tpid)
				binary.BigEndian.PutUint16(buf[start+14:], tci)
			}
			frame := buf[start:end]
			q.deliverFrame(d, frame, status, &t)
		}
		r.release()
	}
	if d != nil && t.pkts > 0 {
		lowerlink.EndBatch(d)
	}
	q.add(&t)
	if trunc != 0 {
		q.rxTrunc.Add(trunc)
	}
	if nodisp != 0 {
		q.rxNoDisp.Add(nodisp)
	}
}

// recvCopy reads the frame the kernel queued whole (TP_STATUS_COPY) into
// copyBuf and returns its length.
func (q *queue) recvCopy() (int, bool) {
	r := q.frameRing
	for {
		r.copyMsg.Flags = 0
		n, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(q.fd), uintptr(unsafe.Pointer(&r.copyMsg)), unix.MSG_DONTWAIT|unix.MSG_TRUNC)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, false
		}
		return int(n), true // longer than copyBuf: MSG_TRUNC's real length, dropped as truncated
	}
}

// TXBegin locks the transmit queue hash selects for a batch of TXSlot and
// TXCommit calls, ended by TXEnd; ok is false (nothing locked) when the
// queue has no transmit ring (mmsg mode) or the endpoint is closed.
// link/mplsendpoint segments TCP GSO packets straight into the slots.
func (e *Endpoint) TXBegin(hash uint32) (queue int, ok bool) {
	i := int(hash % uint32(len(e.queues)))
	q := e.queues[i]
	if q.tx == nil {
		return 0, false
	}
	q.txMu.Lock()
	if q.tx.closed {
		q.txMu.Unlock()
		return 0, false
	}
	q.txBatchFrames = 0
	return i, true
}

// TXSlot returns room for a frame of up to size bytes in the queue's next
// transmit slot, kicking the kernel and waiting for a free slot when the
// ring is full. It returns nil and no error when size does not fit a slot.
func (e *Endpoint) TXSlot(queue, size int) ([]byte, tcpip.Error) {
	q := e.queues[queue]
	r := q.tx
	if size > r.capacity() {
		return nil, nil
	}
	for r.pending == r.frameNr || r.status(r.next) != unix.TP_STATUS_AVAILABLE {
		if err := q.kick(true); err != nil {
			return nil, err
		}
		q.txRingFull.Add(1)
	}
	return r.slot(r.next)[txDataOff : txDataOff+size], nil
}

// TXCommit marks the slot TXSlot returned as a frame of n bytes to send.
func (e *Endpoint) TXCommit(queue, n int) {
	q := e.queues[queue]
	q.tx.commit(n)
	q.txBatchFrames++
}

// TXEnd sends the committed frames with one kick and unlocks the queue.
// On a failed send (ENETDOWN) it returns the frames withdrawn unsent. A
// batch that committed nothing (link/mplsendpoint opens one before it
// knows whether any frame goes into a slot) makes no system call.
func (e *Endpoint) TXEnd(queue int) (int, tcpip.Error) {
	q := e.queues[queue]
	if q.txBatchFrames == 0 {
		q.txMu.Unlock()
		return 0, nil
	}
	before := q.txErrors.Load()
	err := q.kick(false)
	failed := int(q.txErrors.Load() - before)
	q.txMu.Unlock()
	return failed, err
}

// commit marks slot next as a frame of n bytes to send and moves on.
func (r *txRing) commit(n int) {
	s := r.slot(r.next)
	// The virtio-net header: no offload, hdr_len the whole frame.
	h := s[tpacket2HdrLen:txDataOff]
	clear(h)
	binary.NativeEndian.PutUint16(h[2:], uint16(n))
	binary.NativeEndian.PutUint32(s[f2LenOff:], uint32(virtioNetHdrLen+n))
	u32at(s, f2StatusOff).Store(unix.TP_STATUS_SEND_REQUEST)
	r.lens[r.next] = uint32(n)
	r.next++
	if r.next == r.frameNr {
		r.next = 0
	}
	r.pending++
}
