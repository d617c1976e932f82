//go:build linux

package afpacket

import (
	"encoding/binary"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

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
	// A slot holds the TPACKET_V2 header, the virtio-net header and the
	// frame (txDataOff + maxFrame): the kernel takes tp_len (virtio-net
	// header and frame) up to the slot less the TPACKET_V2 header.
	l := layoutRing(txDataOff+maxFrame, frameNr)
	// PACKET_LOSS: a slot the kernel cannot send (we withdraw one by
	// zeroing its length) is skipped and made available, not left to stop
	// the ring.
	loss := packetOpt{"PACKET_LOSS", unix.PACKET_LOSS, 1}
	mem, call, errno := l.mapV2(fd, loss, unix.PACKET_TX_RING)
	if errno != 0 {
		return nil, call, errno
	}
	return &txRing{mem: mem, frameSize: l.frameSize, frameNr: l.frameNr, layout: l, lens: make([]uint32, l.frameNr)}, "", 0
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
