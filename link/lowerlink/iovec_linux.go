package lowerlink

import (
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Iovec returns the iovec that describes b, which must not be empty.
func Iovec(b []byte) unix.Iovec {
	var v unix.Iovec
	v.Base = &b[0]
	v.SetLen(len(b))
	return v
}

// AppendIovecs appends to iovs one iovec for each of the slices that
// Slices(pkt, skip) yields and returns the grown iovs and the bytes they
// describe: a packet gathered into a sendmsg without being copied. The
// iovecs point into pkt's views, which pkt keeps alive until the write.
func AppendIovecs(iovs []unix.Iovec, pkt *stack.PacketBuffer, skip int) ([]unix.Iovec, int) {
	n := 0
	for b := range Slices(pkt, skip) {
		iovs = append(iovs, Iovec(b))
		n += len(b)
	}
	return iovs, n
}
