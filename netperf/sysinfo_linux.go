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
