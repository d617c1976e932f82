//go:build linux

package xdp

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// xdpPass is the XDP_PASS action: the frame goes on to the kernel.
const xdpPass = 2

// rxQueueIndexOff is the offset of rx_queue_index in struct xdp_md (data,
// data_end, data_meta, ingress_ifindex, rx_queue_index: __u32 each).
const rxQueueIndexOff = 16

// redirectProgram is the whole XDP program, in cilium/ebpf's assembler (no
// compiler needed):
//
//	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//
// Every frame that arrives on an RX queue with a socket in xsks goes to
// that socket: the link claims all of the interface's frames (ARP and
// every ethertype included), because the node owns the link's addresses
// and answers ARP itself. A frame on a queue with no socket (a queue the
// link does not serve, or while a socket is being set up or torn down)
// passes to the kernel: the low bits of bpf_redirect_map's flags are the
// action when the key has no entry (Linux 5.3 and later).
func redirectProgram(xsks *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, rxQueueIndexOff, asm.Word),
		asm.LoadMapPtr(asm.R1, xsks.FD()),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	}
}

// program is the loaded XSKMAP, the redirect program, and its attachment
// to the interface (a BPF link: closing it, or the process ending, detaches
// the program and leaves the interface as it was found).
type program struct {
	xsks *ebpf.Map
	prog *ebpf.Program
	link link.Link
	mode string // "native" or "generic"
}

// loadProgram creates the XSKMAP with nq entries and loads the program.
func loadProgram(nq int) (*program, error) {
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK.
	_ = rlimit.RemoveMemlock()
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "mplsnode_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(nq),
	})
	if err != nil {
		return nil, fmt.Errorf("create XSKMAP: %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "mplsnode_xsk",
		Type:         ebpf.XDP,
		License:      "Dual MIT/GPL",
		Instructions: redirectProgram(xsks),
	})
	if err != nil {
		xsks.Close()
		return nil, fmt.Errorf("load XDP program: %w", err)
	}
	return &program{xsks: xsks, prog: prog}, nil
}

// attach attaches the program to the interface: native (driver) mode, the
// veth's, else generic (SKB) mode for a driver without XDP.
func (p *program) attach(ifindex int) error {
	l, err := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: ifindex, Flags: link.XDPDriverMode})
	if err == nil {
		p.link, p.mode = l, "native"
		return nil
	}
	l, gerr := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: ifindex, Flags: link.XDPGenericMode})
	if gerr != nil {
		return fmt.Errorf("attach XDP program (native: %w; generic: %w); is another XDP program attached? ip link show shows it", err, gerr)
	}
	p.link, p.mode = l, "generic"
	return nil
}

// setSocket points queue q of the map at the AF_XDP socket fd.
func (p *program) setSocket(q int, fd int) error {
	return p.xsks.Put(uint32(q), uint32(fd))
}

// close detaches the program and releases the map and program.
func (p *program) close() error {
	var errs []error
	if p.link != nil {
		errs = append(errs, p.link.Close())
	}
	errs = append(errs, p.prog.Close(), p.xsks.Close())
	return errors.Join(errs...)
}
