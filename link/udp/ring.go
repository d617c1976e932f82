//go:build linux

package udp

import (
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/mplsnode/mplsnode/link/lowerlink"
)

// The transmit queues of the TXRing path. The MPLS endpoint writes the
// frames of one WritePackets call (the segments of its TCP GSO packets,
// cut straight into the queue's buffer) into one queue and ends it with
// TXEnd, which sends them as WritePackets would (each frame from its
// flow's source port, runs of equal-sized segments as one UDP GSO send,
// one sendmmsg per source port), with iovecs into the buffer: the frames
// are never copied again in user space, and no packet buffer is made per
// segment. A frame needing an explicit null gets it written over its
// Ethernet header's last 4 bytes, in place.
const (
	// txQueues is the number of queues: concurrent writers (several
	// TCP connections' goroutines) spread over them by the call's hash.
	txQueues = 4
	// txQueueBytes is one queue's buffer, allocated on its first use:
	// a few 64 KiB TCP GSO packets cut into frames. A batch that fills
	// it is sent and the buffer reused.
	txQueueBytes = 256 << 10
)

var _ lowerlink.TXRing = (*Endpoint)(nil)

// txQueue is one transmit queue, locked from TXBegin to TXEnd.
type txQueue struct {
	mu   sync.Mutex
	buf  []byte
	used int
	// off and n are the committed frames' offsets and lengths in buf;
	// start is where each one's datagram begins (set by sendQueue).
	off, n, start []int32
	batch         *txBatch
	// failed counts the frames sends withdrew since TXBegin; err is the
	// first send error.
	failed int
	err    tcpip.Error
}

// TXBegin implements lowerlink.TXRing: it locks the queue hash picks.
// The source port of each frame is still its own flow's (FlowHash), not
// the call's hash.
func (e *Endpoint) TXBegin(hash uint32) (int, bool) {
	select {
	case <-e.closed:
		return 0, false // WritePackets reports the closed link
	default:
	}
	qi := int(hash % txQueues)
	q := &e.txq[qi]
	q.mu.Lock()
	if q.buf == nil {
		q.buf = make([]byte, txQueueBytes)
		q.batch = newTxBatch()
	}
	q.failed, q.err = 0, nil
	return qi, true
}

// TXSlot implements lowerlink.TXRing: room for a frame of size bytes in
// the queue's buffer, after sending the frames committed so far when the
// buffer is full. It returns nil and no error for a frame larger than the
// buffer, nil and an error once the link is closed.
func (e *Endpoint) TXSlot(qi, size int) ([]byte, tcpip.Error) {
	select {
	case <-e.closed:
		return nil, &tcpip.ErrClosedForSend{}
	default:
	}
	q := &e.txq[qi]
	if size > len(q.buf) || size <= 0 {
		return nil, nil
	}
	if q.used+size > len(q.buf) {
		e.sendQueue(q)
	}
	return q.buf[q.used : q.used+size : q.used+size], nil
}

// TXCommit implements lowerlink.TXRing: the slot TXSlot returned holds a
// frame of n bytes.
func (e *Endpoint) TXCommit(qi, n int) {
	q := &e.txq[qi]
	q.off = append(q.off, int32(q.used))
	q.n = append(q.n, int32(n))
	q.used += n
}

// TXEnd implements lowerlink.TXRing: it sends the committed frames and
// unlocks the queue, returning the frames the kernel refused since
// TXBegin and the first error.
func (e *Endpoint) TXEnd(qi int) (int, tcpip.Error) {
	q := &e.txq[qi]
	e.sendQueue(q)
	failed, err := q.failed, q.err
	q.failed, q.err = 0, nil
	q.mu.Unlock()
	return failed, err
}

// sendQueue sends q's committed frames, as WritePackets sends its
// packets, and empties q's buffer.
func (e *Endpoint) sendQueue(q *txQueue) {
	if len(q.off) == 0 {
		q.used = 0
		return
	}
	b := q.batch
	b.reset(len(q.off))
	if cap(q.start) < len(q.off) {
		q.start = make([]int32, len(q.off), 2*len(q.off))
	}
	q.start = q.start[:len(q.off)]
	for i := range q.off {
		f := q.buf[q.off[i] : q.off[i]+q.n[i]]
		sock, withNull, ok := e.classifyFrame(f)
		q.start[i] = header.EthernetMinimumSize
		if withNull {
			q.start[i] -= labelEntryLen
		}
		b.place(int32(i), sock, ok)
	}
	gso := e.gso.Load()
	for _, sock := range b.order {
		b.sock = int(sock)
		for i := b.head[sock]; i >= 0; i = b.next[i] {
			b.addDatagram(q.buf[q.off[i]+q.start[i]:q.off[i]+q.n[i]], gso)
		}
		b.head[sock], b.tail[sock] = -1, -1
		if n, err := e.flush(b); err != nil {
			q.failed += n
			if q.err == nil {
				q.err = err
			}
		}
	}
	q.off, q.n, q.used = q.off[:0], q.n[:0], 0
}

// place records packet i of a batch as leaving from socket sock (ok), or
// as answered or dropped (!ok), keeping each socket's packets in order.
func (b *txBatch) place(i int32, sock int, ok bool) {
	b.next = append(b.next, -1)
	if !ok {
		b.pktSock = append(b.pktSock, -1)
		return
	}
	b.pktSock = append(b.pktSock, int32(sock))
	if b.head[sock] < 0 {
		b.head[sock] = i
		b.order = append(b.order, int32(sock))
	} else {
		b.next[b.tail[sock]] = i
	}
	b.tail[sock] = i
}
