package netperf

// bufferSizer is a socket that is not a kernel socket but has buffer sizes
// and Nagle's algorithm to set, as mplsnode's userspace stack's TCP
// connections and listeners do (stack.TCPConn, stack.TCPListener).
type bufferSizer interface {
	SetReadBuffer(bytes int) error
	SetWriteBuffer(bytes int) error
	BufferSizes() (send, recv int)
}

// congestionSetter is a socket that is not a kernel socket but has a TCP
// congestion control algorithm to set (stack.TCPConn).
type congestionSetter interface {
	SetCongestionControl(name string) error
}

// setBufSizes sets the send and receive buffer sizes of a socket for each
// value >= 0 (netperf's rule: 0 is honoured as "minimum", -1 means the
// default), on kernel sockets (SO_SNDBUF / SO_RCVBUF) and on the userspace
// stack's.
func setBufSizes(s any, snd, rcv int32) {
	if b, ok := s.(bufferSizer); ok {
		if snd >= 0 {
			_ = b.SetWriteBuffer(int(snd))
		}
		if rcv >= 0 {
			_ = b.SetReadBuffer(int(rcv))
		}
		return
	}
	kernelSetBufSizes(s, snd, rcv)
}

// bufSizes reads a socket's send and receive buffer sizes; ok is false when
// the socket has none to tell.
func bufSizes(s any) (snd, rcv int32, ok bool) {
	if b, isB := s.(bufferSizer); isB {
		a, c := b.BufferSizes()
		return int32(a), int32(c), true
	}
	return kernelBufSizes(s)
}

// Stock netperf's default per-call sizes are its sockets' buffer sizes as
// Linux reports them before a connection: tcp_wmem's and tcp_rmem's
// defaults. These are used where the buffer size says nothing about a good
// call size (the userspace stack's buffers are 1 MiB and grow).
const (
	linuxDefaultSendBuf = 16384
	linuxDefaultRecvBuf = 131072
)

// defaultCallSizes returns the send and receive sizes netperf picks when the
// user gives none: the kernel's default socket buffer sizes, as stock
// netperf and netserver print them.
func defaultCallSizes() (snd, rcv int32) {
	if s, r, ok := kernelDefaultBufSizes(); ok && s > 0 && r > 0 {
		return s, r
	}
	return linuxDefaultSendBuf, linuxDefaultRecvBuf
}

// Linux's default UDP socket buffer (net.core.wmem_default/rmem_default),
// which stock netperf prints for UDP tests.
const linuxDefaultUDPBuf = 212992

// defaultUDPBufSizes returns the kernel's default UDP socket buffer sizes.
func defaultUDPBufSizes() (snd, rcv int32) {
	snd, ok1 := procValue("/proc/sys/net/core/wmem_default")
	rcv, ok2 := procValue("/proc/sys/net/core/rmem_default")
	if !ok1 || !ok2 || snd <= 0 || rcv <= 0 {
		return linuxDefaultUDPBuf, linuxDefaultUDPBuf
	}
	return snd, rcv
}
