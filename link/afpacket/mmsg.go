//go:build linux

package afpacket

import (
	"encoding/binary"
	"unsafe"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

func (q *queue) initRX(batch, frameSize int) {
	q.rxMsgs = make([]mmsghdr, batch)
	q.rxIovs = make([]unix.Iovec, batch)
	q.rxBufs = make([][]byte, batch)
	q.rxCtl = make([]byte, batch*auxSpace)
	for i := range q.rxMsgs {
		q.rxBufs[i] = make([]byte, vlanRoom+frameSize)
		q.rxIovs[i].Base = &q.rxBufs[i][vlanRoom]
		q.rxIovs[i].SetLen(frameSize)
		h := &q.rxMsgs[i].hdr
		h.Iov = &q.rxIovs[i]
		h.SetIovlen(1)
		h.Control = &q.rxCtl[i*auxSpace]
	}
}

// recv is the RawConn.Read callback: one recvmmsg. It returns false to wait
// for the socket to become readable.
func (q *queue) recv(fd uintptr) bool {
	for i := range q.rxMsgs {
		h := &q.rxMsgs[i].hdr
		h.SetControllen(auxSpace)
		h.Flags = 0
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd,
			uintptr(unsafe.Pointer(&q.rxMsgs[0])), uintptr(len(q.rxMsgs)), 0, 0, 0)
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		q.rxN, q.rxErr = int(n), errno
		return true
	}
}

// rxLoop reads batches until the socket is closed.
func (q *queue) rxLoop() {
	for {
		if err := q.rc.Read(q.recvFn); err != nil {
			return // closed
		}
		if q.rxErr != 0 {
			q.rxErrors.Add(1)
			continue
		}
		q.deliver(q.rxN)
	}
}

// deliver hands the first n received frames to the dispatcher.
func (q *queue) deliver(n int) {
	d := q.ep.Dispatcher()
	var t rxTally
	var trunc uint64
	for i := 0; i < n; i++ {
		m := &q.rxMsgs[i]
		if m.hdr.Flags&unix.MSG_TRUNC != 0 {
			trunc++
			continue
		}
		buf := q.rxBufs[i]
		frame := buf[vlanRoom : vlanRoom+int(m.len)]
		status, tci, tpid := q.aux(i, &m.hdr)
		if status&unix.TP_STATUS_VLAN_VALID != 0 && len(frame) >= 2*header.EthernetAddressSize {
			// Put the offloaded 802.1Q tag back after the MAC addresses.
			if status&unix.TP_STATUS_VLAN_TPID_VALID == 0 {
				tpid = unix.ETH_P_8021Q
			}
			copy(buf, buf[vlanRoom:vlanRoom+2*header.EthernetAddressSize])
			binary.BigEndian.PutUint16(buf[12:], tpid)
			binary.BigEndian.PutUint16(buf[14:], tci)
			frame = buf[:vlanRoom+int(m.len)]
		}
		if d == nil {
			continue
		}
		q.deliverFrame(d, frame, status, &t)
	}
	if d == nil {
		q.rxNoDisp.Add(uint64(n) - trunc)
	} else if t.pkts > 0 {
		lowerlink.EndBatch(d)
	}
	q.add(&t)
	if trunc != 0 {
		q.rxTrunc.Add(trunc)
	}
}

// rxTally counts what one receive batch delivered, whatever path read it
// (recvmmsg, a block ring or a frame ring).
type rxTally struct{ pkts, bytes, csum, bad uint64 }

// deliverFrame hands frame to d, flagged checksum-validated when the kernel
// said so (TP_STATUS_CSUMNOTREADY or CSUM_VALID in status) or, with
// Options.RXChecksumOffload, when its checksums verify; a frame that fails
// that check is counted bad (lower_rx_bad_checksum) and not delivered. The
// frame is copied once, into a pooled chunk: the ring slot or receive
// buffer is reused while upper layers may keep the packet.
func (q *queue) deliverFrame(d stack.NetworkDispatcher, frame []byte, status uint32, t *rxTally) {
	validated := status&(unix.TP_STATUS_CSUMNOTREADY|unix.TP_STATUS_CSUM_VALID) != 0
	if !validated && q.ep.rxCsum {
		if !checksumOK(frame) {
			t.bad++
			return
		}
		validated = true
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	pkt.RXChecksumValidated = validated
	d.DeliverNetworkPacket(0, pkt)
	pkt.DecRef()
	t.pkts++
	t.bytes += uint64(len(frame))
	if validated {
		t.csum++
	}
}

// add adds a batch's tally to the queue's counters.
func (q *queue) add(t *rxTally) {
	q.rxPackets.Add(t.pkts)
	q.rxBytes.Add(t.bytes)
	q.rxCsum.Add(t.csum)
	if t.bad != 0 {
		q.rxBad.Add(t.bad)
	}
}

// aux returns tp_status, tp_vlan_tci and tp_vlan_tpid from message i's
// PACKET_AUXDATA control message, or zeros if there is none.
func (q *queue) aux(i int, h *unix.Msghdr) (status uint32, tci, tpid uint16) {
	ctl := q.rxCtl[i*auxSpace : i*auxSpace+int(h.Controllen)]
	for len(ctl) >= unix.SizeofCmsghdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
		clen := int(c.Len)
		if clen < unix.SizeofCmsghdr || clen > len(ctl) {
			return 0, 0, 0
		}
		if c.Level == unix.SOL_PACKET && c.Type == unix.PACKET_AUXDATA &&
			clen >= unix.CmsgLen(sizeofAuxdata) {
			a := (*unix.TpacketAuxdata)(unsafe.Pointer(&ctl[unix.CmsgLen(0)]))
			return a.Status, a.Vlan_tci, a.Vlan_tpid
		}
		next := unix.CmsgSpace(clen - unix.CmsgLen(0))
		if next > len(ctl) {
			break
		}
		ctl = ctl[next:]
	}
	return 0, 0, 0
}

// WritePackets implements stack.LinkWriter.WritePackets. Each packet is sent
// as one frame; the batch goes out in sendmmsg calls on the queue the first
// packet's hash selects. Frames the device queue refuses (ENOBUFS) count as
// sent (and in Stats.TXDropped), as a loss on the wire would.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	s := pkts.AsSlice()
	if len(s) == 0 {
		return 0, nil
	}
	q := e.queues[s[0].Hash%uint32(len(e.queues))]
	if e.gsoq != nil && hasGSO(s) {
		q = e.gsoq
	}
	q.txMu.Lock()
	defer q.txMu.Unlock()
	if q.tx != nil {
		return q.writeRing(s)
	}
	sent := 0
	for sent < len(s) {
		chunk := s[sent:]
		if len(chunk) > maxSendBatch {
			chunk = chunk[:maxSendBatch]
		}
		n, err := q.write(chunk)
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// write sends pkts with sendmmsg; called with txMu held.
func (q *queue) write(pkts []*stack.PacketBuffer) (int, tcpip.Error) {
	q.txMsgs = q.txMsgs[:0]
	q.txIovs = q.txIovs[:0]
	q.txFirst = q.txFirst[:0]
	q.txLens = q.txLens[:0]
	for i, pkt := range pkts {
		first := len(q.txIovs)
		if q.vnetHdrs != nil {
			h := &q.vnetHdrs[i]
			putVirtioNetHdr(h, pkt)
			q.txIovs = append(q.txIovs, lowerlink.Iovec(h[:]))
		}
		var size int
		q.txIovs, size = lowerlink.AppendIovecs(q.txIovs, pkt, 0)
		q.txFirst = append(q.txFirst, first)
		q.txLens = append(q.txLens, size)
		q.txMsgs = append(q.txMsgs, mmsghdr{})
	}
	// txIovs has stopped growing: point each message at its iovecs.
	for i := range q.txMsgs {
		h := &q.txMsgs[i].hdr
		end := len(q.txIovs)
		if i+1 < len(q.txFirst) {
			end = q.txFirst[i+1]
		}
		if end > q.txFirst[i] {
			h.Iov = &q.txIovs[q.txFirst[i]]
		}
		h.SetIovlen(end - q.txFirst[i])
	}
	q.txCount, q.txDone, q.txDropped, q.txErr = len(pkts), 0, 0, 0
	err := q.rc.Write(q.sendFn)
	var bytes uint64
	for _, l := range q.txLens[:q.txDone] {
		bytes += uint64(l)
	}
	q.txPackets.Add(uint64(q.txDone - q.txDropped))
	q.txBytes.Add(bytes)
	if q.txDropped != 0 {
		q.txDrops.Add(uint64(q.txDropped))
	}
	// Views referenced by the iovecs stay alive through pkts until here.
	clear(q.txIovs)
	if err != nil {
		return q.txDone, &tcpip.ErrClosedForSend{}
	}
	if q.txErr != 0 {
		q.txErrors.Add(1)
		return q.txDone, tcpip.TranslateErrno(q.txErr)
	}
	return q.txDone, nil
}

// send is the RawConn.Write callback: sendmmsg until every message is out,
// an error stops it, or the socket buffer is full (false: wait for room).
func (q *queue) send(fd uintptr) bool {
	for q.txDone < q.txCount {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd,
			uintptr(unsafe.Pointer(&q.txMsgs[q.txDone])), uintptr(q.txCount-q.txDone), 0, 0, 0)
		switch errno {
		case 0:
			q.txDone += int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		case unix.ENOBUFS:
			q.txDone++
			q.txDropped++
		default:
			q.txErr = errno
			return true
		}
	}
	return true
}
