package netperf

import "golang.org/x/sys/unix"

func readUname() uname {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return uname{}
	}
	return uname{unix.ByteSliceToString(u.Sysname[:]), unix.ByteSliceToString(u.Release[:]),
		unix.ByteSliceToString(u.Version[:]), unix.ByteSliceToString(u.Machine[:])}
}

// driverInfo asks the kernel for ifname's driver (ethtool's
// ETHTOOL_GDRVINFO); ok false when ifname is empty or has none.
func driverInfo(ifname string) (ifDriver, bool) {
	if ifname == "" {
		return ifDriver{}, false
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ifDriver{}, false
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, ifname)
	if err != nil {
		return ifDriver{}, false
	}
	return ifDriver{unix.ByteSliceToString(info.Driver[:]), unix.ByteSliceToString(info.Version[:]),
		unix.ByteSliceToString(info.Fw_version[:]), unix.ByteSliceToString(info.Bus_info[:])}, true
}
