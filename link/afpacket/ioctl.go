package afpacket

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ifreq is struct ifreq from <net/if.h> with the union viewed as a
// sockaddr (family, 14 data bytes) followed by padding to its full 40 bytes.
type ifreq struct {
	name   [unix.IFNAMSIZ]byte
	family uint16
	data   [14]byte
	_      [8]byte
}

// ifaceInfo is what New learns about the interface before binding to it.
type ifaceInfo struct {
	index  int
	flags  uint16
	mtu    uint32
	hwType uint16
	mac    [6]byte
}

// ioctlIfreq runs one SIOCGIF* ioctl on fd for the interface in r.
func ioctlIfreq(fd int, req uintptr, r *ifreq) unix.Errno {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(r)))
	return errno
}

// lookupIface reads the index, flags, MTU and hardware address of the
// interface named name, using fd (any socket in the right network namespace).
// On failure it returns the ioctl's name and errno.
func lookupIface(fd int, name string) (ifaceInfo, string, unix.Errno) {
	var info ifaceInfo
	var r ifreq
	copy(r.name[:unix.IFNAMSIZ-1], name)
	if e := ioctlIfreq(fd, unix.SIOCGIFINDEX, &r); e != 0 {
		return info, "ioctl SIOCGIFINDEX", e
	}
	info.index = int(*(*int32)(unsafe.Pointer(&r.family)))
	if e := ioctlIfreq(fd, unix.SIOCGIFFLAGS, &r); e != 0 {
		return info, "ioctl SIOCGIFFLAGS", e
	}
	info.flags = r.family // ifr_flags is a short at the union's start
	if e := ioctlIfreq(fd, unix.SIOCGIFMTU, &r); e != 0 {
		return info, "ioctl SIOCGIFMTU", e
	}
	info.mtu = uint32(*(*int32)(unsafe.Pointer(&r.family)))
	if e := ioctlIfreq(fd, unix.SIOCGIFHWADDR, &r); e != 0 {
		return info, "ioctl SIOCGIFHWADDR", e
	}
	info.hwType = r.family
	copy(info.mac[:], r.data[:6])
	return info, "", 0
}
