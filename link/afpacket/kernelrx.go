//go:build linux

package afpacket

import (
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The interface's own kernel stack sees every frame this endpoint receives
// too: on an interface the node owns (the kernel holds no address there)
// it routes each unlabelled IP frame only to drop it (ip_route_input_slow
// per frame, charged to whoever delivered it: the veth peer's sender).
// Options.DropKernelRX stops that with a two-instruction BPF program on the
// interface's TCX ingress hook that drops every frame. The hook runs after
// the packet taps, so this endpoint's sockets (bound to ETH_P_ALL) still
// get every frame, and packet captures (tshark) still see them. The
// program is attached through a BPF link held by a file descriptor:
// closing it, or the process ending, detaches it; nothing stays behind.

// BPF constants (linux/bpf.h); golang.org/x/sys/unix has the syscall
// number but not these.
const (
	bpfProgLoad         = 5  // BPF_PROG_LOAD
	bpfLinkCreate       = 28 // BPF_LINK_CREATE
	bpfProgTypeSchedCLS = 3  // BPF_PROG_TYPE_SCHED_CLS
	bpfTCXIngress       = 46 // BPF_TCX_INGRESS
	tcxDrop             = 2  // TCX_DROP
	bpfAttrSize         = 128
)

// dropKernelRX attaches the drop-all program to ifindex's TCX ingress and
// returns the BPF link's file (close it to detach).
func dropKernelRX(ifindex int) (*os.File, error) {
	insns := [2]uint64{
		0xb7 | tcxDrop<<32, // r0 = TCX_DROP (BPF_ALU64|BPF_MOV|BPF_K)
		0x95,               // exit (BPF_JMP|BPF_EXIT)
	}
	license := []byte("GPL\x00")
	var load [bpfAttrSize]byte
	*(*uint32)(unsafe.Pointer(&load[0])) = bpfProgTypeSchedCLS
	*(*uint32)(unsafe.Pointer(&load[4])) = uint32(len(insns))
	*(*uint64)(unsafe.Pointer(&load[8])) = uint64(uintptr(unsafe.Pointer(&insns[0])))
	*(*uint64)(unsafe.Pointer(&load[16])) = uint64(uintptr(unsafe.Pointer(&license[0])))
	prog, _, errno := unix.Syscall(unix.SYS_BPF, bpfProgLoad, uintptr(unsafe.Pointer(&load[0])), bpfAttrSize)
	runtime.KeepAlive(&insns)
	runtime.KeepAlive(license)
	if errno != 0 {
		return nil, os.NewSyscallError("bpf BPF_PROG_LOAD", errno)
	}
	defer unix.Close(int(prog)) // the link holds the program
	var link [bpfAttrSize]byte
	*(*uint32)(unsafe.Pointer(&link[0])) = uint32(prog)
	*(*uint32)(unsafe.Pointer(&link[4])) = uint32(ifindex)
	*(*uint32)(unsafe.Pointer(&link[8])) = bpfTCXIngress
	fd, _, errno := unix.Syscall(unix.SYS_BPF, bpfLinkCreate, uintptr(unsafe.Pointer(&link[0])), bpfAttrSize)
	if errno != 0 {
		return nil, os.NewSyscallError("bpf BPF_LINK_CREATE tcx ingress", errno)
	}
	unix.CloseOnExec(int(fd))
	return os.NewFile(fd, "tcx-drop"), nil
}
