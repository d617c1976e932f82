//go:build linux

package afpacket

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// rxBlockRing is a TPACKET_V3 receive ring: blockNr blocks of blockSize bytes
// that the kernel fills and hands to us one block at a time.
type rxBlockRing struct {
	rxSlots
	blockSize int
	blockNr   int
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
	r := &rxBlockRing{blockSize: blockSize, blockNr: blockNr}
	r.rxSlots = rxSlots{mem: mem, size: blockSize, offs: evenSlots(blockNr, blockSize), statusOff: blkStatusOff}
	return r, "", 0
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
		q.deliverBlock(q.blockRing.slot(q.blockRing.cur))
		q.blockRing.release()
	}
}

// deliverBlock hands the frames of one retired block to the dispatcher,
// each copied once into a packet buffer, and ends the batch.
func (q *queue) deliverBlock(blk []byte) {
	b := q.beginRingBatch()
	n := int(binary.NativeEndian.Uint32(blk[blkNumPktsOff:]))
	off := int(binary.NativeEndian.Uint32(blk[blkFirstPktOff:]))
	for i := 0; i < n; i++ {
		if off < blkHdrLen || off+f3HdrLen > len(blk) {
			q.rxErrors.Add(1) // a block the kernel did not lay out as documented
			break
		}
		fh := blk[off:]
		next := int(binary.NativeEndian.Uint32(fh[f3NextOff:]))
		// The frame's offloaded VLAN tag goes back into the room between
		// its header and its MAC addresses; the block goes back to the
		// kernel at the batch's end.
		q.offer(&b, ringFrame{
			buf:      fh,
			start:    int(binary.NativeEndian.Uint16(fh[f3MacOff:])),
			minStart: f3HdrLen + vlanRoom,
			snap:     int(binary.NativeEndian.Uint32(fh[f3SnapLenOff:])),
			wire:     int(binary.NativeEndian.Uint32(fh[f3LenOff:])),
			status:   binary.NativeEndian.Uint32(fh[f3StatusOff:]),
			vlanTPID: binary.NativeEndian.Uint16(fh[f3VlanTPIDOff:]),
			vlanTCI:  uint16(binary.NativeEndian.Uint32(fh[f3VlanTCIOff:])),
		})
		if next == 0 {
			break
		}
		off += next
	}
	q.endRingBatch(&b)
}
