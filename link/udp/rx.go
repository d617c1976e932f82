//go:build linux

package udp

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/link/lowerlink"
)

// ethertypeMPLS is the MPLS unicast ethertype of the frames delivered.
const ethertypeMPLS = 0x8847

// groCmsgSpace is the control buffer of one read: the UDP_GRO segment
// size (an int).
var groCmsgSpace = unix.CmsgSpace(4)

// rxState is the receive goroutine's buffers.
type rxState struct {
	e     *Endpoint
	msgs  []mmsghdr
	iovs  []unix.Iovec
	bufs  [][]byte
	names []unix.RawSockaddrInet6
	ctl   []byte
	n     int
	errno unix.Errno
	fn    func(fd uintptr) bool
}

func (r *rxState) init(e *Endpoint, batch int) {
	r.e = e
	r.msgs = make([]mmsghdr, batch)
	r.iovs = make([]unix.Iovec, batch)
	r.bufs = make([][]byte, batch)
	r.names = make([]unix.RawSockaddrInet6, batch)
	r.ctl = make([]byte, batch*groCmsgSpace)
	for i := range r.msgs {
		r.bufs[i] = make([]byte, rxBufSize)
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(rxBufSize)
		h := &r.msgs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
		h.Control = &r.ctl[i*groCmsgSpace]
	}
	r.fn = r.recv
}

// recv is the RawConn.Read callback: one recvmmsg; false waits for the
// socket to become readable.
func (r *rxState) recv(fd uintptr) bool {
	for i := range r.msgs {
		h := &r.msgs[i].hdr
		h.Namelen = uint32(unsafe.Sizeof(r.names[i]))
		h.SetControllen(groCmsgSpace)
		h.Flags = 0
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd,
			uintptr(unsafe.Pointer(&r.msgs[0])), uintptr(len(r.msgs)), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.n, r.errno = int(n), errno
		return true
	}
}

// rxLoop reads until the socket is closed.
func (e *Endpoint) rxLoop() {
	r := &e.rx
	for {
		if err := e.rxRC.Read(r.fn); err != nil {
			return // closed
		}
		if r.errno != 0 {
			e.ctr.rxErrors.Add(1)
			continue
		}
		e.ctr.rxReads.Add(1)
		d := e.Dispatcher()
		delivered := 0
		for i := 0; i < r.n; i++ {
			delivered += e.deliverRead(d, r, i)
		}
		if delivered > 0 {
			lowerlink.EndBatch(d)
		}
	}
}

// deliverRead checks and delivers the datagrams of read i; it returns the
// number delivered.
func (e *Endpoint) deliverRead(d stack.NetworkDispatcher, r *rxState, i int) int {
	h := &r.msgs[i].hdr
	n := int(r.msgs[i].len)
	buf := r.bufs[i][:n]
	seg := n
	if e.gro {
		if s := groSize(r.ctl[i*groCmsgSpace : i*groCmsgSpace+int(h.Controllen)]); s > 0 {
			seg = s
		}
	}
	nSegs := 1
	if seg > 0 && n > seg {
		nSegs = (n + seg - 1) / seg
		e.ctr.rxCoalesced.Add(1)
	}
	e.ctr.rxDatagrams.Add(uint64(nSegs))
	if h.Flags&unix.MSG_TRUNC != 0 {
		e.drop(DropOversized, uint64(nSegs))
		return 0
	}
	if src, ok := sockaddrAddr(&r.names[i], h.Namelen); !ok || src != e.remoteIP {
		e.drop(DropUnknownPeer, uint64(nSegs))
		return 0
	}
	if d == nil {
		e.drop(DropNotAttached, uint64(nSegs))
		return 0
	}
	if n == 0 {
		e.drop(DropTruncated, 1)
		return 0
	}
	maxLen := int(e.MTU()) + labelEntryLen
	delivered := 0
	for off := 0; off < n; off += seg {
		b := buf[off:min(off+seg, n)]
		if r := CheckDatagram(b, maxLen); r != DropNone {
			e.drop(r, 1)
			continue
		}
		pkt := newFrame(e.LinkAddress(), e.peerAddr, ethertypeMPLS, b)
		d.DeliverNetworkPacket(0, pkt)
		pkt.DecRef()
		e.ctr.rxPackets.Add(1)
		e.ctr.rxBytes.Add(uint64(len(b)))
		delivered++
	}
	return delivered
}

// groSize returns the segment size of a coalesced read from its control
// messages (UDP_GRO), 0 without one.
func groSize(ctl []byte) int {
	for len(ctl) >= unix.SizeofCmsghdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
		l := int(c.Len)
		if l < unix.SizeofCmsghdr || l > len(ctl) {
			return 0
		}
		if c.Level == unix.SOL_UDP && c.Type == unix.UDP_GRO && l >= unix.CmsgLen(2) {
			data := ctl[unix.CmsgLen(0):l]
			if len(data) >= 4 {
				return int(*(*int32)(unsafe.Pointer(&data[0])))
			}
			return int(binary.NativeEndian.Uint16(data))
		}
		sp := unix.CmsgSpace(l - unix.CmsgLen(0))
		if sp > len(ctl) {
			return 0
		}
		ctl = ctl[sp:]
	}
	return 0
}

// sockaddrAddr returns the IP address of a received source address.
func sockaddrAddr(sa *unix.RawSockaddrInet6, n uint32) (netip.Addr, bool) {
	switch sa.Family {
	case unix.AF_INET:
		if n < unix.SizeofSockaddrInet4 {
			return netip.Addr{}, false
		}
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrFrom4(sa4.Addr), true
	case unix.AF_INET6:
		if n < unix.SizeofSockaddrInet6 {
			return netip.Addr{}, false
		}
		return netip.AddrFrom16(sa.Addr).Unmap(), true
	}
	return netip.Addr{}, false
}
