//go:build linux

package afpacket

import (
	"encoding/binary"
	"sync"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// rxSlots is what the two receive rings share: a mapping cut into slots
// (the TPACKET_V3 ring's blocks, the TPACKET_V2 ring's frames) that the
// kernel hands over in order, each with a status word, and the reader's
// place in it.
type rxSlots struct {
	mem       []byte
	size      int   // bytes in a slot
	offs      []int // each slot's offset in mem
	statusOff int   // where a slot's status word is
	cur       int   // the next slot we expect the kernel to hand over
	unmapOnce sync.Once
}

// evenSlots returns the offsets of n slots of size bytes laid end to end.
func evenSlots(n, size int) []int {
	offs := make([]int, n)
	for i := range offs {
		offs[i] = i * size
	}
	return offs
}

func (r *rxSlots) unmap() {
	r.unmapOnce.Do(func() { unix.Munmap(r.mem) })
}

// slot returns slot i's memory.
func (r *rxSlots) slot(i int) []byte {
	o := r.offs[i]
	return r.mem[o : o+r.size : o+r.size]
}

// ready reports whether the current slot is ours to read.
func (r *rxSlots) ready() bool {
	return u32at(r.slot(r.cur), r.statusOff).Load()&unix.TP_STATUS_USER != 0
}

// release hands the current slot back to the kernel and moves on.
func (r *rxSlots) release() {
	u32at(r.slot(r.cur), r.statusOff).Store(unix.TP_STATUS_KERNEL)
	r.cur++
	if r.cur == len(r.offs) {
		r.cur = 0
	}
}

// ringBatch is one receive batch read from a ring: the dispatcher it goes
// to and what it counted, handed on by queue.endRingBatch.
type ringBatch struct {
	d             stack.NetworkDispatcher
	t             rxTally
	trunc, nodisp uint64
}

// beginRingBatch starts a receive batch (one V3 block, or up to
// Options.RecvBatch V2 frames).
func (q *queue) beginRingBatch() ringBatch {
	q.rxBlocks.Add(1)
	return ringBatch{d: q.ep.Dispatcher()}
}

// ringFrame is one frame as a ring's header describes it: its bytes at
// buf[start:start+snap], wire bytes long on the wire, with the header's
// status word and offloaded VLAN tag (TPID and TCI, read as the kernel
// wrote them).
type ringFrame struct {
	buf               []byte
	start, minStart   int // minStart: the lowest start that leaves vlanRoom free before it
	snap, wire        int
	status            uint32
	vlanTPID, vlanTCI uint16
}

// offer delivers f into b, or counts why not: truncated (longer than the
// slot held or than Options.MaxFrameSize), laid out against the header's
// own bounds (lower_rx_errors), or no dispatcher. An offloaded 802.1Q tag
// is put back after the MAC addresses, in the vlanRoom bytes before the
// frame, so upper layers see the frame as it was on the wire. The slot
// goes back to the kernel after the frame was copied (deliverFrame).
func (q *queue) offer(b *ringBatch, f ringFrame) {
	switch {
	case f.snap < f.wire || f.snap > q.maxFrame:
		b.trunc++
	case f.start < f.minStart || f.start+f.snap > len(f.buf):
		q.rxErrors.Add(1)
	case b.d == nil:
		b.nodisp++
	default:
		buf, start, end := f.buf, f.start, f.start+f.snap
		if f.status&unix.TP_STATUS_VLAN_VALID != 0 && f.snap >= 2*header.EthernetAddressSize {
			tpid := f.vlanTPID
			if f.status&unix.TP_STATUS_VLAN_TPID_VALID == 0 {
				tpid = unix.ETH_P_8021Q
			}
			copy(buf[start-vlanRoom:], buf[start:start+2*header.EthernetAddressSize])
			start -= vlanRoom
			binary.BigEndian.PutUint16(buf[start+12:], tpid)
			binary.BigEndian.PutUint16(buf[start+14:], f.vlanTCI)
		}
		q.deliverFrame(b.d, buf[start:end], f.status, &b.t)
	}
}

// endRingBatch ends b's batch at the dispatcher and adds its counts to
// the queue's.
func (q *queue) endRingBatch(b *ringBatch) {
	if b.d != nil && b.t.pkts > 0 {
		lowerlink.EndBatch(b.d)
	}
	q.add(&b.t)
	if b.trunc != 0 {
		q.rxTrunc.Add(b.trunc)
	}
	if b.nodisp != 0 {
		q.rxNoDisp.Add(b.nodisp)
	}
}
