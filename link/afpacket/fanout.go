//go:build linux

package afpacket

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// The fanout group picks a queue with our own flow hash, a classic BPF
// program (PACKET_FANOUT_CBPF), rather than PACKET_FANOUT_HASH: the
// kernel's hash is skb->hash, which a local TCP sender sets from its
// socket and changes after a timeout (sk_rethink_txhash), moving a flow to
// another queue mid-stream, where two goroutines may then reorder it; and
// it puts every frame of an LSP on one queue. Ours hashes the addresses
// and ports of IPv4 and IPv6 (ports of TCP and UDP, unfragmented), and of
// an MPLS frame the top label plus, below a single label, the IP flow.

// Classic BPF ancillary load of skb->protocol (linux/filter.h).
const (
	skfAdOff      = 0xfffff000 // SKF_AD_OFF, -0x1000
	skfAdProtocol = 0          // SKF_AD_PROTOCOL
)

// asmInsn is one instruction of a small classic BPF assembler: jumps name
// their targets by label.
type asmInsn struct {
	label  string // this instruction's label, if any
	code   uint16
	jt, jf string // jump targets ("" = next instruction)
	k      uint32
}

// assemble resolves labels into jump offsets.
func assemble(prog []asmInsn) ([]unix.SockFilter, error) {
	at := map[string]int{}
	for i, in := range prog {
		if in.label != "" {
			at[in.label] = i
		}
	}
	out := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		f := unix.SockFilter{Code: in.code, K: in.k}
		for _, j := range []struct {
			name string
			dst  *uint8
		}{{in.jt, &f.Jt}, {in.jf, &f.Jf}} {
			if j.name == "" {
				continue
			}
			t, ok := at[j.name]
			if !ok || t <= i || t-i-1 > 255 {
				return nil, fmt.Errorf("bpf: bad jump from %d to %q", i, j.name)
			}
			*j.dst = uint8(t - i - 1)
		}
		out[i] = f
	}
	return out, nil
}

// Opcodes used below.
const (
	ldW    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	ldH    = unix.BPF_LD | unix.BPF_H | unix.BPF_ABS
	ldB    = unix.BPF_LD | unix.BPF_B | unix.BPF_ABS
	ldWInd = unix.BPF_LD | unix.BPF_W | unix.BPF_IND
	ldMem  = unix.BPF_LD | unix.BPF_MEM
	ldxMSH = unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH
	st     = unix.BPF_ST
	tax    = unix.BPF_MISC | unix.BPF_TAX
	xorX   = unix.BPF_ALU | unix.BPF_XOR | unix.BPF_X
	andK   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	rshK   = unix.BPF_ALU | unix.BPF_RSH | unix.BPF_K
	jeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	ja     = unix.BPF_JMP | unix.BPF_JA
	retA   = unix.BPF_RET | unix.BPF_A
	retK   = unix.BPF_RET | unix.BPF_K
)

// ipv4Hash is the program's IPv4 part for a header at offset b of the
// network data: M[0] = src ^ dst, ^ the port word of TCP and UDP when the
// packet is not a fragment; then on to "fold".
func ipv4Hash(label string, b uint32) []asmInsn {
	p := label + "-ports"
	return []asmInsn{
		{label: label, code: ldW, k: b + 12},
		{code: tax},
		{code: ldW, k: b + 16},
		{code: xorX},
		{code: st, k: 0},
		{code: ldH, k: b + 6}, // flags and fragment offset
		{code: andK, k: 0x3fff},
		{code: jeqK, k: 0, jf: "fold"}, // a fragment: no ports in every piece
		{code: ldB, k: b + 9},
		{code: jeqK, k: unix.IPPROTO_TCP, jt: p},
		{code: jeqK, k: unix.IPPROTO_UDP, jt: p, jf: "fold"},
		{label: p, code: ldxMSH, k: b}, // X = 4 * IHL
		{code: ldWInd, k: b},           // source and destination port
		{code: tax},
		{code: ldMem, k: 0},
		{code: xorX},
		{code: st, k: 0},
		{code: ja, k: 0, jt: "", jf: ""}, // patched to fold below
	}
}

// ipv6Hash is the IPv6 part: M[0] = the xor of the address words, ^ the
// port word when the first next header is TCP or UDP.
func ipv6Hash(label string, b uint32) []asmInsn {
	p := label + "-ports"
	prog := []asmInsn{{label: label, code: ldW, k: b + 8}, {code: tax}}
	for off := uint32(12); off < 40; off += 4 {
		prog = append(prog, asmInsn{code: ldW, k: b + off}, asmInsn{code: xorX}, asmInsn{code: tax})
	}
	prog = append(prog,
		asmInsn{code: st, k: 0}, // A == X here
		asmInsn{code: ldB, k: b + 6},
		asmInsn{code: jeqK, k: unix.IPPROTO_TCP, jt: p},
		asmInsn{code: jeqK, k: unix.IPPROTO_UDP, jt: p, jf: "fold"},
		asmInsn{label: p, code: ldW, k: b + 40},
		asmInsn{code: tax},
		asmInsn{code: ldMem, k: 0},
		asmInsn{code: xorX},
		asmInsn{code: st, k: 0},
		asmInsn{code: ja},
	)
	return prog
}

// flowHashProgram returns the fanout program. It returns the folded hash;
// the kernel takes it modulo the number of queues.
func flowHashProgram() ([]unix.SockFilter, error) {
	prog := []asmInsn{
		{code: ldH, k: skfAdOff + skfAdProtocol},
		{code: jeqK, k: unix.ETH_P_IP, jt: "v4"},
		{code: jeqK, k: unix.ETH_P_IPV6, jt: "v6"},
		{code: jeqK, k: unix.ETH_P_MPLS_UC, jt: "mpls"},
		{code: retK, k: 0}, // ARP and the rest: queue 0
		// MPLS: the top entry's label, TC and S; below a single label,
		// the IP flow (version nibble) instead.
		{label: "mpls", code: ldW, k: 0},
		{code: rshK, k: 8},
		{code: st, k: 0},
		{code: ldB, k: 2},
		{code: andK, k: 1},
		{code: jeqK, k: 0, jt: "fold"},
		{code: ldB, k: 4},
		{code: rshK, k: 4},
		{code: jeqK, k: 4, jt: "m4"},
		{code: jeqK, k: 6, jt: "m6", jf: "fold"},
	}
	prog = append(prog, ipv4Hash("v4", 0)...)
	prog = append(prog, ipv6Hash("v6", 0)...)
	prog = append(prog, ipv4Hash("m4", 4)...)
	prog = append(prog, ipv6Hash("m6", 4)...)
	prog = append(prog,
		asmInsn{label: "fold", code: ldMem, k: 0},
		asmInsn{code: tax},
		asmInsn{code: rshK, k: 16},
		asmInsn{code: xorX},
		asmInsn{code: retA},
	)
	// The parts end in an unconditional jump to fold.
	fold := len(prog) - 5
	for i := range prog {
		if prog[i].code == ja {
			prog[i].k = uint32(fold - i - 1)
		}
	}
	return assemble(prog)
}

// FlowHash is the hash the fanout program computes for a frame's network
// data (after the Ethernet header) of the given ethertype; a frame goes to
// queue FlowHash % Queues. As in the program, data too short for a field it
// reads gives 0. It is the program's reference, for tests.
func FlowHash(ethertype uint16, b []byte) uint32 {
	short := false
	be32 := func(o int) uint32 {
		if o+4 > len(b) {
			short = true
			return 0
		}
		return uint32(b[o])<<24 | uint32(b[o+1])<<16 | uint32(b[o+2])<<8 | uint32(b[o+3])
	}
	byteAt := func(o int) uint32 {
		if o >= len(b) {
			short = true
			return 0
		}
		return uint32(b[o])
	}
	var m uint32
	v4 := func(o int) {
		m = be32(o+12) ^ be32(o+16)
		if (byteAt(o+6)<<8|byteAt(o+7))&0x3fff != 0 {
			return
		}
		if p := byteAt(o + 9); p == unix.IPPROTO_TCP || p == unix.IPPROTO_UDP {
			m ^= be32(o + 4*int(byteAt(o)&0xf))
		}
	}
	v6 := func(o int) {
		m = be32(o + 8)
		for off := 12; off < 40; off += 4 {
			m ^= be32(o + off)
		}
		if p := byteAt(o + 6); p == unix.IPPROTO_TCP || p == unix.IPPROTO_UDP {
			m ^= be32(o + 40)
		}
	}
	switch ethertype {
	case unix.ETH_P_IP:
		v4(0)
	case unix.ETH_P_IPV6:
		v6(0)
	case unix.ETH_P_MPLS_UC:
		m = be32(0) >> 8
		if byteAt(2)&1 != 0 {
			switch byteAt(4) >> 4 {
			case 4:
				v4(4)
			case 6:
				v6(4)
			}
		}
	default:
		return 0
	}
	if short {
		return 0
	}
	return m ^ m>>16
}
