//go:build !linux

package netperf

func readUname() uname { return uname{} }

func driverInfo(string) (ifDriver, bool) { return ifDriver{}, false }
