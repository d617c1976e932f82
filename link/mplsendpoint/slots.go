package mplsendpoint

import (
	"github.com/mplsnode/mplsnode/internal/virtionet"
	"github.com/mplsnode/mplsnode/link/lowerlink"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// slotBatch is WritePackets' open batch on a TXRing lower link; it opens
// on the first frame and is ended before anything that might write to the
// link again (an ICMP error towards a local sender).
type slotBatch struct {
	ring  lowerlink.TXRing
	hash  uint32
	queue int
	open  bool
	err   tcpip.Error // the first failure, returned by WritePackets
	// failed counts committed frames a send failure withdrew.
	failed int
}

// slot returns room for a frame of size bytes, opening the batch if need
// be; nil with ok true means the frame does not fit a slot.
func (b *slotBatch) slot(size int) (buf []byte, ok bool) {
	if !b.open {
		q, ok := b.ring.TXBegin(b.hash)
		if !ok {
			return nil, false
		}
		b.queue, b.open = q, true
	}
	buf, err := b.ring.TXSlot(b.queue, size)
	if err != nil {
		if b.err == nil {
			b.err = err
		}
		return nil, false
	}
	return buf, true
}

func (b *slotBatch) commit(n int) { b.ring.TXCommit(b.queue, n) }

// end sends what the batch holds and closes it.
func (b *slotBatch) end() {
	if !b.open {
		return
	}
	b.open = false
	failed, err := b.ring.TXEnd(b.queue)
	b.failed += failed
	if err != nil && b.err == nil {
		b.err = err
	}
}

// writeSlots is WritePackets on a TXRing lower link. It returns false
// (having written nothing) when the queue has no ring.
func (e *Endpoint) writeSlots(r lowerlink.TXRing, pkts []*stack.PacketBuffer, s *txScratch) (int, tcpip.Error, bool) {
	if len(pkts) == 0 {
		return 0, nil, true
	}
	b := &s.batch
	*b = slotBatch{ring: r, hash: pkts[0].Hash}
	q, ok := r.TXBegin(b.hash)
	if !ok {
		return 0, nil, false
	}
	b.queue, b.open = q, true
	linkMTU := int(e.lower.MTU())
	written, frames := 0, 0
	// whole: unlabelled TCP GSO packets leave whole, as writeGSO sends
	// them, through the link's GSO socket (s.out, sent by sendWhole
	// before the next frame goes into a slot and at the end), so that
	// the peer's kernel forwards and receives one skb, not some 45
	// frames, per 64 KiB, and a small packet beside them does not wait
	// behind the cut frames in the kernel's backlog.
	whole := e.LowerGSOFrames()
	sendWhole := func() {
		if s.out.Len() == 0 {
			return
		}
		b.end() // the frames already in slots go first
		n, err := e.lower.WritePackets(s.out)
		if lost := s.out.Len() - n; lost > 0 {
			e.dropN(DropLowerWriteError, uint64(lost), -1, errString(err))
		}
		s.out.Reset()
		frames += n
		written += n
	}
	for _, pkt := range pkts {
		e.ctr.txPackets.Add(1)
		if lh := pkt.LinkHeader().Slice(); len(lh) == header.EthernetMinimumSize && header.Ethernet(lh).Type() == EthertypeMPLSUnicast {
			e.drop(DropLabelStackTooDeep, -1, nil)
			continue
		}
		// A host-GSO packet that may leave whole goes through writeGSO,
		// which decides (leavesWhole); any other is segmented into slots.
		isGSO := hostGSO(pkt)
		if isGSO && whole && virtionet.IsGSOFrame(pkt) {
			// Queued in s.out, or dropped and counted (writeGSO).
			_ = e.writeGSO(s, pkt, linkMTU)
			continue
		}
		sendWhole()
		if isGSO {
			n, err := e.writeGSOSlots(s, pkt, linkMTU)
			frames += n
			if err == nil {
				written++
			}
			continue
		}
		n, ok := e.writeSlotFrame(s, pkt, linkMTU)
		frames += n
		if ok {
			written++
		}
	}
	sendWhole()
	b.end()
	e.ctr.txFrames.Add(uint64(frames - b.failed))
	if b.failed > 0 {
		e.dropN(DropLowerWriteError, uint64(b.failed), -1, errString(b.err))
	}
	if b.err != nil && (written == 0 || b.failed == frames) {
		return 0, upperError(b.err), true
	}
	return written, nil, true
}

// writeSlotFrame writes pkt, a frame as it is, into the batch's next slot,
// or, longer than a slot, through WritePackets after the batch so far. It
// returns the frames that went and whether pkt did; a frame over the link
// MTU is answered with mtuExceeded, a failed write counted.
func (e *Endpoint) writeSlotFrame(s *txScratch, pkt *stack.PacketBuffer, linkMTU int) (frames int, ok bool) {
	b := &s.batch
	size := pkt.Size()
	if size-header.EthernetMinimumSize > linkMTU {
		b.end()
		e.mtuExceeded(pkt, linkMTU)
		return 0, false
	}
	buf, ok := b.slot(size)
	if buf != nil {
		lowerlink.CopyPacket(buf, pkt)
		b.commit(size)
		return 1, true
	}
	if !ok {
		e.drop(DropLowerWriteError, -1, errString(b.err))
		return 0, false
	}
	// Longer than a slot: through WritePackets, in order.
	b.end()
	s.out.PushBack(pkt.IncRef())
	n, err := e.lower.WritePackets(s.out)
	s.out.Reset()
	if err != nil {
		e.drop(DropLowerWriteError, -1, errString(err))
		return n, false
	}
	return n, true
}

// writeGSOSlots is writeGSO writing each segment straight into a slot of
// the open batch, with one copy of the payload: the headers are copied
// once into the scratch buffer, and for each segment (gso.Cutter) the
// headers and the segment's payload chunk, read from the packet's views,
// go into its slot, where Finish writes lengths, sequence number, flags and
// checksums. It returns the frames it committed; a packet it could not
// finish is counted dropped.
func (e *Endpoint) writeGSOSlots(s *txScratch, pkt *stack.PacketBuffer, linkMTU int) (int, error) {
	b := &s.batch
	proto, mss, err := e.gsoShape(pkt, linkMTU)
	if err != nil {
		return 0, err
	}
	if mss <= 0 {
		b.end()
		e.mtuExceeded(pkt, linkMTU)
		return 0, errGSO
	}
	c, r, err := e.cutterFor(s, pkt, proto, mss)
	if err != nil {
		return 0, err
	}
	hdr := c.Header()
	nSegs := c.Segments()
	for i := 0; i < nSegs; i++ {
		n := c.SegmentLen(i)
		buf, ok := b.slot(n)
		if buf == nil {
			// No slot: the link failed, or a segment is longer than a
			// slot (a link MTU above what the ring was sized for).
			err := error(errGSO)
			if !ok {
				err = errString(b.err)
			}
			e.drop(DropLowerWriteError, -1, err)
			return i, err
		}
		copy(buf, hdr)
		r.read(buf[len(hdr):n])
		c.Finish(i, buf[:n])
		b.commit(n)
	}
	e.ctr.gsoPackets.Add(1)
	return nSegs, nil
}

// viewReader reads a packet's bytes in order, view by view, without
// gathering them.
type viewReader struct {
	v   *buffer.View
	off int // into v
}

// skip moves n bytes on.
func (r *viewReader) skip(n int) {
	for r.v != nil {
		rest := r.v.Size() - r.off
		if n < rest {
			r.off += n
			return
		}
		n -= rest
		r.v, r.off = r.v.Next(), 0
	}
}

// read fills dst with the next len(dst) bytes (the packet's data is long
// enough: Cutter checked its length).
func (r *viewReader) read(dst []byte) {
	for len(dst) > 0 && r.v != nil {
		n := copy(dst, r.v.AsSlice()[r.off:])
		dst = dst[n:]
		r.off += n
		if r.off == r.v.Size() {
			r.v, r.off = r.v.Next(), 0
		}
	}
}
