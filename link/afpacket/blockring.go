//go:build linux

package afpacket

import (
	"encoding/binary"
	"sync"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

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
