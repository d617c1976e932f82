//go:build linux

package udp

import (
	"encoding/binary"
	"unsafe"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// peekLen is how many bytes of a frame WritePackets looks at: the
// Ethernet header, a deep label stack and the inner IP and transport
// ports (FlowHash), or an ARP or NDP request.
const peekLen = 192

// segCmsgSpace is the control buffer of one UDP GSO send: the segment
// size (a uint16).
var segCmsgSpace = unix.CmsgSpace(2)

// txBatch is one WritePackets call's buffers (pooled).
type txBatch struct {
	msgs  []mmsghdr
	iovs  []unix.Iovec
	ctl   []byte
	nulls [][labelEntryLen]byte
	peek  [peekLen]byte
	// Per message: its first iovec, iovec count, packets, bytes, segment
	// size (0: one datagram).
	msgIov, msgNIov, msgPkts, msgBytes, msgSeg []int
	// closed says the last message takes no more segments (its last one
	// was shorter).
	closed bool
	sock   int
	// Per packet of the call: its socket (-1: answered or dropped), its
	// explicit null's index in nulls (-1: none), the next packet of its
	// socket (-1: the last). Per socket: its first and last packet (-1:
	// none yet), and the sockets in the order of their first packet.
	pktSock, pktNull, next []int32
	head, tail             [MaxFlows]int32
	order                  []int32
	// Send state of the RawConn.Write callback.
	done   int
	errnos []unix.Errno
	fn     func(fd uintptr) bool
}

func (e *Endpoint) getBatch() *txBatch {
	if b, ok := e.txPool.Get().(*txBatch); ok {
		return b
	}
	return newTxBatch()
}

func newTxBatch() *txBatch {
	b := &txBatch{}
	b.fn = b.send
	for i := range b.head {
		b.head[i], b.tail[i] = -1, -1
	}
	return b
}

func (b *txBatch) reset(n int) {
	b.msgs, b.iovs, b.ctl = b.msgs[:0], b.iovs[:0], b.ctl[:0]
	b.msgIov, b.msgNIov, b.msgPkts, b.msgBytes, b.msgSeg = b.msgIov[:0], b.msgNIov[:0], b.msgPkts[:0], b.msgBytes[:0], b.msgSeg[:0]
	if cap(b.nulls) < n {
		b.nulls = make([][labelEntryLen]byte, 0, n)
	}
	b.nulls = b.nulls[:0]
	b.pktSock, b.pktNull, b.next, b.order = b.pktSock[:0], b.pktNull[:0], b.next[:0], b.order[:0]
	b.closed, b.sock = true, -1
}

// WritePackets implements stack.LinkEndpoint: each frame's MPLS packet
// (see the package doc) leaves as one datagram from the source port its
// flow hash picks. The call's packets are taken socket by socket (each
// flow's in order): runs of equal-sized packets of one flow leave as one
// UDP GSO send, and the sends of one source port as one sendmmsg. ARP and
// NDP requests are answered, not sent. It returns the number of frames
// taken (sent, answered or dropped with a counter); a failed send is
// counted (tx_send_error) and reported.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	s := pkts.AsSlice()
	if len(s) == 0 {
		return 0, nil
	}
	b := e.getBatch()
	defer e.txPool.Put(b)
	b.reset(len(s))
	for i, pkt := range s {
		sock, withNull, ok := e.classify(b, pkt)
		null := int32(-1)
		if ok && withNull {
			null = int32(len(b.nulls) - 1)
		}
		b.pktNull = append(b.pktNull, null)
		b.place(int32(i), sock, ok)
	}
	gso := e.gso.Load()
	failed := 0
	var lastErr tcpip.Error
	for _, sock := range b.order {
		b.sock = int(sock)
		for i := b.head[sock]; i >= 0; i = b.next[i] {
			b.add(s[i], b.pktNull[i], gso)
		}
		b.head[sock], b.tail[sock] = -1, -1
		if n, err := e.flush(b); err != nil {
			failed += n
			lastErr = err
		}
	}
	return len(s) - failed, lastErr
}

// add appends pkt's datagram to b's messages for b.sock (see message).
// null is its explicit null's index in b.nulls, -1 for none.
func (b *txBatch) add(pkt *stack.PacketBuffer, null int32, gso bool) {
	plen := pkt.Size() - header.EthernetMinimumSize
	if null >= 0 {
		plen += labelEntryLen
	}
	m := b.message(plen, gso)
	nIov := len(b.iovs)
	if null >= 0 {
		b.iovs = append(b.iovs, iovec(b.nulls[null][:]))
	}
	for vb := range lowerlink.Slices(pkt, header.EthernetMinimumSize) {
		b.iovs = append(b.iovs, iovec(vb))
	}
	b.msgNIov[m] += len(b.iovs) - nIov
}

// addDatagram appends the datagram d, one contiguous buffer, to b's
// messages for b.sock (see message).
func (b *txBatch) addDatagram(d []byte, gso bool) {
	m := b.message(len(d), gso)
	b.iovs = append(b.iovs, iovec(d))
	b.msgNIov[m]++
}

// message returns the message of b a datagram of plen bytes joins, and
// counts it there: the open UDP GSO run if it fits (gso, room for one
// more segment, no longer than the run's segments), else a new message.
// The caller appends the datagram's iovecs and adds their number to
// b.msgNIov.
func (b *txBatch) message(plen int, gso bool) int {
	m := len(b.msgs) - 1
	if gso && !b.closed && m >= 0 && b.msgPkts[m] < maxGSOSegments && plen <= b.msgSeg[m] && b.msgBytes[m]+plen <= maxGSOBytes {
		if plen < b.msgSeg[m] {
			b.closed = true
		}
	} else {
		b.msgs = append(b.msgs, mmsghdr{})
		b.msgIov = append(b.msgIov, len(b.iovs))
		b.msgNIov = append(b.msgNIov, 0)
		b.msgPkts = append(b.msgPkts, 0)
		b.msgBytes = append(b.msgBytes, 0)
		b.msgSeg = append(b.msgSeg, plen)
		b.closed = false
		m++
	}
	b.msgPkts[m]++
	b.msgBytes[m] += plen
	return m
}

func iovec(b []byte) unix.Iovec {
	var v unix.Iovec
	v.Base = &b[0]
	v.SetLen(len(b))
	return v
}

// classify looks at a frame's headers: it answers ARP and NDP requests,
// drops what the link does not carry, and otherwise returns the index of
// the socket its flow hash picks and whether it leaves under an explicit
// null (appended to b.nulls).
func (e *Endpoint) classify(b *txBatch, pkt *stack.PacketBuffer) (sock int, withNull, ok bool) {
	n := peekFrame(b.peek[:], pkt)
	sock, withNull, ok = e.classifyFrame(b.peek[:n])
	if withNull {
		b.nulls = append(b.nulls, [labelEntryLen]byte(b.peek[header.EthernetMinimumSize-labelEntryLen:header.EthernetMinimumSize]))
	}
	return sock, withNull, ok
}

// classifyFrame is classify on a frame's first bytes p (the whole frame,
// or as much of it as FlowHash and the neighbour answers read): with
// withNull, it has written the explicit null over p's Ethernet header's
// last 4 bytes, so the datagram is p[EthernetMinimumSize-labelEntryLen:].
func (e *Endpoint) classifyFrame(p []byte) (sock int, withNull, ok bool) {
	n := len(p)
	if n < header.EthernetMinimumSize {
		e.drop(DropUnsupported, 1)
		return 0, false, false
	}
	// The MPLS packet as FlowHash reads it starts at mp: the label stack
	// after the Ethernet header, or the explicit null written over the
	// Ethernet header's last 4 bytes of p.
	mp := header.EthernetMinimumSize
	switch typ := binary.BigEndian.Uint16(p[12:14]); typ {
	case ethertypeMPLS:
		if n < header.EthernetMinimumSize+labelEntryLen {
			e.drop(DropUnsupported, 1)
			return 0, false, false
		}
	case uint16(header.ARPProtocolNumber):
		e.answerARP(p[header.EthernetMinimumSize:])
		return 0, false, false
	case uint16(header.IPv4ProtocolNumber):
		ip := p[header.EthernetMinimumSize:]
		if len(ip) < header.IPv4MinimumSize {
			e.drop(DropUnsupported, 1)
			return 0, false, false
		}
		if dst := ip[16:20]; dst[0]&0xf0 == 0xe0 || [4]byte(dst) == [4]byte{255, 255, 255, 255} {
			e.drop(DropNotUnicast, 1)
			return 0, false, false
		}
		withNull = true
		null := explicitNull(false, ip[8])
		copy(p[header.EthernetMinimumSize-labelEntryLen:], null[:])
	case uint16(header.IPv6ProtocolNumber):
		ip := p[header.EthernetMinimumSize:]
		if len(ip) < header.IPv6MinimumSize {
			e.drop(DropUnsupported, 1)
			return 0, false, false
		}
		if ip[6] == uint8(header.ICMPv6ProtocolNumber) && len(ip) > header.IPv6MinimumSize {
			if t := header.ICMPv6Type(ip[header.IPv6MinimumSize]); t >= header.ICMPv6RouterSolicit && t <= header.ICMPv6RedirectMsg {
				if t == header.ICMPv6NeighborSolicit {
					e.answerNS(ip)
					return 0, false, false
				}
				e.drop(DropNotUnicast, 1)
				return 0, false, false
			}
		}
		if ip[24] == 0xff {
			e.drop(DropNotUnicast, 1)
			return 0, false, false
		}
		withNull = true
		null := explicitNull(true, ip[7])
		copy(p[header.EthernetMinimumSize-labelEntryLen:], null[:])
	default:
		e.drop(DropUnsupported, 1)
		return 0, false, false
	}
	if withNull {
		mp -= labelEntryLen
	}
	return int(FlowHash(p[mp:]) % uint32(len(e.tx))), withNull, true
}

// peekFrame copies the first len(dst) bytes of pkt (fewer if it is
// shorter) into dst and returns their number.
func peekFrame(dst []byte, pkt *stack.PacketBuffer) int {
	return lowerlink.CopyPacket(dst, pkt)
}

// flush sends b's messages on b.sock with one sendmmsg (more if the
// kernel takes fewer) and starts a new run; it returns the packets of the
// messages the kernel refused and the error.
func (e *Endpoint) flush(b *txBatch) (int, tcpip.Error) {
	if len(b.msgs) == 0 {
		return 0, nil
	}
	if cap(b.ctl) < len(b.msgs)*segCmsgSpace {
		b.ctl = make([]byte, 0, 2*len(b.msgs)*segCmsgSpace)
	}
	b.ctl = b.ctl[:len(b.msgs)*segCmsgSpace]
	for m := range b.msgs {
		h := &b.msgs[m].hdr
		h.Iov = &b.iovs[b.msgIov[m]]
		h.SetIovlen(b.msgNIov[m])
		if b.msgPkts[m] > 1 {
			c := b.ctl[m*segCmsgSpace : (m+1)*segCmsgSpace]
			clear(c)
			ch := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
			ch.Level, ch.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			ch.SetLen(unix.CmsgLen(2))
			binary.NativeEndian.PutUint16(c[unix.CmsgLen(0):], uint16(b.msgSeg[m]))
			h.Control = &c[0]
			h.SetControllen(segCmsgSpace)
		}
	}
	b.done = 0
	b.errnos = b.errnos[:0]
	for range b.msgs {
		b.errnos = append(b.errnos, 0)
	}
	sock := &e.tx[b.sock]
	werr := sock.rc.Write(b.fn)
	e.ctr.txCalls.Add(1)
	failed := 0
	var terr tcpip.Error
	for m := range b.msgs {
		switch {
		case werr != nil && m >= b.done:
			failed += b.msgPkts[m]
			e.drop(DropSendError, uint64(b.msgPkts[m]))
			terr = &tcpip.ErrClosedForSend{}
		case b.errnos[m] != 0:
			failed += b.msgPkts[m]
			e.drop(DropSendError, uint64(b.msgPkts[m]))
			terr = tcpip.TranslateErrno(b.errnos[m])
			if b.msgPkts[m] > 1 && (b.errnos[m] == unix.EIO || b.errnos[m] == unix.EINVAL) {
				// The kernel refuses to segment on this path (an
				// xfrm route, a device without checksum offload):
				// single datagrams from now on.
				e.gso.Store(false)
			}
		default:
			e.ctr.txPackets.Add(uint64(b.msgPkts[m]))
			e.ctr.txBytes.Add(uint64(b.msgBytes[m]))
			if b.msgPkts[m] > 1 {
				e.ctr.txSegmented.Add(1)
			}
		}
	}
	// The iovecs point into the packets' views, alive until the caller
	// returns; clear them so the pool holds no references.
	clear(b.iovs)
	clear(b.msgs)
	b.msgs, b.iovs = b.msgs[:0], b.iovs[:0]
	b.msgIov, b.msgNIov, b.msgPkts, b.msgBytes, b.msgSeg = b.msgIov[:0], b.msgNIov[:0], b.msgPkts[:0], b.msgBytes[:0], b.msgSeg[:0]
	b.closed, b.sock = true, -1
	return failed, terr
}

// send is the RawConn.Write callback: sendmmsg from b.done until every
// message is sent or refused; false waits for the socket to be writable.
func (b *txBatch) send(fd uintptr) bool {
	for b.done < len(b.msgs) {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd,
			uintptr(unsafe.Pointer(&b.msgs[b.done])), uintptr(len(b.msgs)-b.done), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			b.done += int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			// The first message of the rest was refused: count it,
			// go on with the next.
			b.errnos[b.done] = errno
			b.done++
		}
	}
	return true
}
