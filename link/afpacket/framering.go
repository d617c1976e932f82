//go:build linux

package afpacket

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
	rxSlots
	frameSize int
	frameNr   int
	layout    ringLayout
	// copyBuf and copyCtl receive the frames the kernel queued whole
	// because they did not fit a slot (TP_STATUS_COPY).
	copyBuf []byte
	copyMsg unix.Msghdr
	copyIov unix.Iovec
}

// setupRXFrameRing turns fd into a TPACKET_V2 socket with a receive ring
// of at least frames slots, each big enough for a frame of maxFrame bytes
// behind the kernel's header, and maps it.
func setupRXFrameRing(fd, maxFrame, frames, bigFrame int) (*rxFrameRing, string, unix.Errno) {
	// The kernel puts a frame's network header at TPACKET_ALIGN(
	// TPACKET2_HDRLEN + 16) = 80 bytes into the slot (its Ethernet header
	// 66 bytes in), and a frame that would end past the slot goes whole
	// to the socket's queue (TP_STATUS_COPY).
	l := layoutRing(rxFrameMacOff+maxFrame, frames)
	// Frames too long for a slot go whole to the socket's receive queue.
	copyThresh := packetOpt{"PACKET_COPY_THRESH", unix.PACKET_COPY_THRESH, 1}
	mem, call, errno := l.mapV2(fd, copyThresh, unix.PACKET_RX_RING)
	if errno != 0 {
		return nil, call, errno
	}
	r := &rxFrameRing{frameSize: l.frameSize, frameNr: l.frameNr, layout: l, copyBuf: make([]byte, vlanRoom+bigFrame)}
	r.rxSlots = rxSlots{mem: mem, size: l.frameSize, offs: l.offs, statusOff: f2StatusOff}
	r.copyIov.Base = &r.copyBuf[vlanRoom]
	r.copyIov.SetLen(bigFrame)
	r.copyMsg.Iov = &r.copyIov
	r.copyMsg.SetIovlen(1)
	return r, "", 0
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
	r := q.frameRing
	b := q.beginRingBatch()
	for n := 0; n < q.rxBatch && r.ready(); n++ {
		fh := r.slot(r.cur)
		f := ringFrame{
			buf:      fh,
			start:    int(binary.NativeEndian.Uint16(fh[f2MacOff:])),
			minStart: vlanRoom,
			snap:     int(binary.NativeEndian.Uint32(fh[f2SnapLenOff:])),
			wire:     int(binary.NativeEndian.Uint32(fh[f2LenOff:])),
			status:   binary.NativeEndian.Uint32(fh[f2StatusOff:]),
			vlanTPID: binary.NativeEndian.Uint16(fh[f2VlanTPIDOff:]),
			vlanTCI:  binary.NativeEndian.Uint16(fh[f2VlanTCIOff:]),
		}
		if f.status&unix.TP_STATUS_COPY != 0 {
			// The whole frame waits in the socket's queue.
			got, ok := q.recvCopy()
			if !ok {
				q.rxErrors.Add(1)
				r.release()
				continue
			}
			f.buf, f.start, f.snap = r.copyBuf, vlanRoom, got
		}
		q.offer(&b, f)
		r.release()
	}
	q.endRingBatch(&b)
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
