//go:build linux

package netperf

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawConner is implemented by kernel sockets (*net.TCPConn, *net.TCPListener).
type rawConner interface {
	SyscallConn() (syscall.RawConn, error)
}

// kernelSetBufSizes sets SO_SNDBUF / SO_RCVBUF on a kernel socket for each
// value >= 0. Sockets that are not kernel sockets are left alone.
func kernelSetBufSizes(s any, snd, rcv int32) {
	rc, ok := s.(rawConner)
	if !ok || (snd < 0 && rcv < 0) {
		return
	}
	raw, err := rc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		if snd >= 0 {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, int(snd))
		}
		if rcv >= 0 {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, int(rcv))
		}
	})
}

// kernelBufSizes reads SO_SNDBUF / SO_RCVBUF of a kernel socket.
func kernelBufSizes(s any) (snd, rcv int32, ok bool) {
	rc, isRaw := s.(rawConner)
	if !isRaw {
		return 0, 0, false
	}
	raw, err := rc.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var e1, e2 error
	var a, b int
	if err := raw.Control(func(fd uintptr) {
		a, e1 = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		b, e2 = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	}); err != nil || e1 != nil || e2 != nil {
		return 0, 0, false
	}
	return int32(a), int32(b), true
}

// congestionControl returns the TCP congestion-control algorithm of a
// kernel socket, or "".
func congestionControl(s any) string {
	rc, ok := s.(rawConner)
	if !ok {
		return ""
	}
	raw, err := rc.SyscallConn()
	if err != nil {
		return ""
	}
	var name string
	_ = raw.Control(func(fd uintptr) {
		name, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	return name
}

// retransmits returns tcpi_total_retrans of a kernel socket, or 0.
func retransmits(s any) int32 {
	rc, ok := s.(rawConner)
	if !ok {
		return 0
	}
	raw, err := rc.SyscallConn()
	if err != nil {
		return 0
	}
	var n int32
	_ = raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n = int32(info.Total_retrans)
		}
	})
	return n
}

// kernelDefaultBufSizes returns the SO_SNDBUF / SO_RCVBUF a fresh,
// unconnected kernel TCP socket reports: the middle values of tcp_wmem and
// tcp_rmem. Stock netperf prints these as its local socket sizes because it
// reads them before connecting (16384 / 131072 on a default Linux).
func kernelDefaultBufSizes() (snd, rcv int32, ok bool) {
	w, ok1 := procMiddle("/proc/sys/net/ipv4/tcp_wmem")
	r, ok2 := procMiddle("/proc/sys/net/ipv4/tcp_rmem")
	return w, r, ok1 && ok2
}

func procMiddle(path string) (int32, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0, false
	}
	v, err := strconv.ParseInt(f[1], 10, 32)
	return int32(v), err == nil
}

// procValue reads a single-number /proc file.
func procValue(path string) (int32, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 32)
	return int32(v), err == nil
}

// transportInfo returns a kernel TCP socket's retransmissions, MSS and
// congestion control, or -1, -1, "" for a socket that cannot tell.
func transportInfo(s any) (retrans, mss int32, cong string) {
	retrans, mss = -1, -1
	rc, ok := s.(rawConner)
	if !ok {
		return
	}
	raw, err := rc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			retrans = int32(info.Total_retrans)
		}
		if v, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG); err == nil {
			mss = int32(v)
		}
		cong, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	return
}

// setCongestionControl sets TCP_CONGESTION on a kernel socket (-K), or
// the algorithm of a userspace stack's connection; a name the kernel (or
// stack) does not offer leaves its default, as stock goes on with it.
func setCongestionControl(s any, name string) {
	if cs, ok := s.(congestionSetter); ok {
		_ = cs.SetCongestionControl(name)
		return
	}
	rc, ok := s.(rawConner)
	if !ok {
		return
	}
	if raw, err := rc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			_ = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, name)
		})
	}
}

// setTOS sets IP_TOS and IPV6_TCLASS on a kernel socket (-Y); the one of
// the other family fails and is ignored. Other sockets are left alone.
func setTOS(s any, tos uint8) {
	rc, ok := s.(rawConner)
	if !ok {
		return
	}
	if raw, err := rc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, int(tos))
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(tos))
		})
	}
}

// setDontRoute sets SO_DONTROUTE on a kernel socket: it sends only to
// hosts on a link (netperf's routing not allowed).
func setDontRoute(s any) {
	rc, ok := s.(rawConner)
	if !ok {
		return
	}
	if raw, err := rc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DONTROUTE, 1)
		})
	}
}
