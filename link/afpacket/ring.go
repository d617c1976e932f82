//go:build linux

package afpacket

import (
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
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

// packetOpt is an integer SOL_PACKET socket option and the value it is
// set to, with its name for errors.
type packetOpt struct {
	name       string
	opt, value int
}

// mapV2 turns fd into a TPACKET_V2 socket, sets opt, asks for the ring
// (unix.PACKET_RX_RING or unix.PACKET_TX_RING) laid out as l, and maps it.
// On failure it returns the call that failed and its errno.
func (l *ringLayout) mapV2(fd int, opt packetOpt, ring int) ([]byte, string, unix.Errno) {
	ringName := "PACKET_RX_RING"
	if ring == unix.PACKET_TX_RING {
		ringName = "PACKET_TX_RING"
	}
	for _, o := range []packetOpt{{"PACKET_VERSION TPACKET_V2", unix.PACKET_VERSION, unix.TPACKET_V2}, opt} {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, o.opt, o.value); err != nil {
			return nil, "setsockopt " + o.name, err.(unix.Errno)
		}
	}
	req := unix.TpacketReq{
		Block_size: uint32(l.blockSize),
		Block_nr:   uint32(l.blockNr),
		Frame_size: uint32(l.frameSize),
		Frame_nr:   uint32(l.frameNr),
	}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, ring, &req); err != nil {
		return nil, "setsockopt " + ringName, err.(unix.Errno)
	}
	mem, err := unix.Mmap(fd, 0, l.mapped(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, "mmap " + ringName, err.(unix.Errno)
	}
	return mem, "", 0
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
