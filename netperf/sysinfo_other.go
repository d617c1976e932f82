//go:build !linux

package netperf

func readUname() uname { return uname{} }
