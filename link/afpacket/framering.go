//go:build linux

package afpacket

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"
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
