package xdp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
)

// FuzzProgram runs arbitrary frames through the XDP label switch (with
// BPF_PROG_TEST_RUN; root only) and checks its invariants: it never drops
// (a frame is carried or passed up), a frame passed up is untouched, a
// carried frame fits the egress MTU, goes to the next hop from the egress
// link's address; a carried labelled frame came with its bottom of stack
// within 16 entries (mpls.DefaultMaxDepth) and no label 3, and leaves with
// no reserved label on top, its bottom within 16 entries and no label 3;
// the label TTL it came with was above 1, and the TTL it leaves with is
// the label TTL - 1 (swap, uniform pop) or, pipe pop, the exposed
// packet's or label's own TTL - 1 (which was above 1). A popped IP packet
// came whole (IPv4 total length from its header up to the bytes there,
// IPv6 payload within them), with a valid IPv4 header checksum, and leaves
// valid, trimmed to its IP length. For IP transit (the FIB path): a
// carried packet came with TTL above 1 and a valid IPv4 header checksum
// and leaves with TTL - 1 and a valid checksum (under the pushed labels,
// if any, the bottom one alone with S), never to or from the local
// address.
// fuzzTTLModel is the TTL model a fuzz input's pipe flag picks, and its
// index in a target's per-model state.
func fuzzTTLModel(pipe bool) (model mpls.TTLModel, i int) {
	if pipe {
		return mpls.TTLPipe, 1
	}
	return mpls.TTLUniform, 0
}

func FuzzProgram(f *testing.F) {
	ip := []byte{0x45, 0, 0, 20, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip, 0))
	f.Add(frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 64}}, ip), false)
	f.Add(frame(ourMAC, []mpls.Entry{{Label: 101, S: true, TTL: 2}}, ip), true)
	f.Add(frame(ourMAC, []mpls.Entry{{Label: 103, S: true, TTL: 2}}, ip), false)
	f.Add(frame(ourMAC, []mpls.Entry{{Label: 103, TTL: 2}, {Label: 3, S: true, TTL: 2}}, ip), false)
	f.Add(frame(ourMAC, []mpls.Entry{{Label: 103, TTL: 1}, {Label: 0, S: true, TTL: 64}}, []byte{0x45}), false)
	f.Add(frame(ourMAC, []mpls.Entry{{Label: 103, S: true, TTL: 9}}, []byte{0x60}), true)
	ip4 := func(dst byte) []byte {
		b := append([]byte{}, ip...)
		b[19] = dst
		b[18] = dst
		b[10], b[11] = 0, 0
		binary.BigEndian.PutUint16(b[10:], ^checksum.Checksum(b, 0))
		return append(append([]byte{}, ourMAC...), append([]byte{2, 0, 0, 0, 0, 3, 8, 0}, b...)...)
	}
	f.Add(ip4(2), false)
	f.Add(ip4(1), true) // 10.0.1.1: two labels pushed
	f.Add(ip4(9), false)
	f.Add(append(ip4(2), 0, 0, 0, 0), false) // padding
	f.Add(append(append([]byte{}, ourMAC...), []byte{2, 0, 0, 0, 0, 3, 0x86, 0xdd, 0x60, 0, 0, 0, 0, 0, 59, 9,
		0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}...), false)
	for _, s := range hostileSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	const mtu = 64
	var progs [2]*Program
	f.Fuzz(func(t *testing.T, in []byte, pipe bool) {
		if len(in) < 14 {
			return // the kernel's test run wants an Ethernet header
		}
		model, i := fuzzTTLModel(pipe)
		p := progs[i]
		if p == nil {
			p = newFuzzProgram(t, model, mtu)
			progs[i] = p
		}
		ret, out := run(t, p, in)
		switch ret {
		case xdpPass:
			if !bytes.Equal(out, in) {
				t.Fatalf("passed up a changed frame:\n in %x\nout %x", in, out)
			}
			return
		case xdpRedirect:
		default:
			t.Fatalf("action %d for %x", ret, in)
		}
		if len(out)-14 > mtu {
			t.Fatalf("carried %d bytes over a %d-byte MTU (in %d)", len(out)-14, mtu, len(in))
		}
		if !bytes.Equal(out[:6], nhMAC) || !bytes.Equal(out[6:12], ourMAC) {
			t.Fatalf("Ethernet header %x", out[:14])
		}
		if inType := binary.BigEndian.Uint16(in[12:]); inType == 0x0800 || inType == 0x86dd {
			checkIPTransit(t, in, out)
			return
		}
		checkStack(t, "received", in, in[14:])
		top := mpls.DecodeEntry(in[14:])
		if top.TTL <= 1 {
			t.Fatalf("carried a frame with label TTL %d: %x", top.TTL, in)
		}
		switch binary.BigEndian.Uint16(out[12:]) {
		case 0x8847:
			if len(out) < 18 || mpls.DecodeEntry(out[14:]).Label.IsReserved() {
				t.Fatalf("carried a reserved or missing top label: %x", out)
			}
			checkStack(t, "sent", out, out[14:])
			// Popped to a label (the frame shrank by one) or swapped.
			got := mpls.DecodeEntry(out[14:]).TTL
			want := top.TTL - 1
			if len(out) == len(in)-4 && pipe {
				exposed := mpls.DecodeEntry(in[18:]).TTL
				if exposed <= 1 {
					t.Fatalf("pipe pop exposed label TTL %d, carried: %x", exposed, in)
				}
				want = exposed - 1
			}
			if got != want {
				t.Fatalf("top label TTL %d, want %d:\n in %x\nout %x", got, want, in, out)
			}
		case 0x0800, 0x86dd:
			// Popped to IP: the packet is under the top label, which had S.
			inIP, outIP := in[18:], out[14:]
			v6 := binary.BigEndian.Uint16(out[12:]) == 0x86dd
			size, ok := wholeIP(v6, inIP)
			if !ok {
				t.Fatalf("carried a popped IP packet that is not whole: %x", in)
			}
			if len(outIP) != size {
				t.Fatalf("popped IP packet sent with %d bytes, its length is %d: %x", len(outIP), size, in)
			}
			ttlAt := 8
			if v6 {
				ttlAt = 7
			}
			want := top.TTL - 1
			if pipe {
				if inIP[ttlAt] <= 1 {
					t.Fatalf("pipe pop of an IP packet with TTL %d carried: %x", inIP[ttlAt], in)
				}
				want = inIP[ttlAt] - 1
			}
			if outIP[ttlAt] != want {
				t.Fatalf("popped IP TTL %d, want %d:\n in %x\nout %x", outIP[ttlAt], want, in, out)
			}
			if !v6 && !ipv4ChecksumOK(outIP[:int(outIP[0]&0xf)*4]) {
				t.Fatalf("popped IPv4 left with a bad header checksum:\n in %x\nout %x", in, out)
			}
		default:
			t.Fatalf("ethertype %x", out[12:14])
		}
	})
}

// checkStack fails unless the label stack at p (of the frame f) has its
// bottom within mpls.DefaultMaxDepth entries and no label 3.
func checkStack(t *testing.T, what string, f, p []byte) {
	t.Helper()
	for i := 0; ; i++ {
		if len(p) < 4 || i == mpls.DefaultMaxDepth {
			t.Fatalf("%s label stack without bottom within %d entries: %x", what, mpls.DefaultMaxDepth, f)
		}
		e := mpls.DecodeEntry(p)
		if e.Label == mpls.LabelImplicitNull {
			t.Fatalf("%s label stack holds label 3: %x", what, f)
		}
		if e.S {
			return
		}
		p = p[4:]
	}
}

// wholeIP reports whether ip starts with a whole IP packet (IPv4: valid
// header checksum, total length from its header up to len(ip); IPv6:
// payload within ip) and its length.
func wholeIP(v6 bool, ip []byte) (int, bool) {
	if v6 {
		if len(ip) < 40 || ip[0]>>4 != 6 {
			return 0, false
		}
		n := 40 + int(binary.BigEndian.Uint16(ip[4:]))
		return n, n <= len(ip)
	}
	if len(ip) < 20 || ip[0]>>4 != 4 {
		return 0, false
	}
	hl := int(ip[0]&0xf) * 4
	if hl < 20 || hl > len(ip) || !ipv4ChecksumOK(ip[:hl]) {
		return 0, false
	}
	n := int(binary.BigEndian.Uint16(ip[2:]))
	return n, n >= hl && n <= len(ip)
}

// checkIPTransit checks a carried IP packet: in's IP packet, TTL
// decremented, under the labels pushed.
func checkIPTransit(t *testing.T, in, out []byte) {
	t.Helper()
	p := out[14:]
	if binary.BigEndian.Uint16(out[12:]) == 0x8847 {
		checkStack(t, "pushed", out, p)
		for i := 0; ; i++ {
			if len(p) < 4 || i == MaxOutLabels {
				t.Fatalf("label stack without bottom: %x", out)
			}
			e := mpls.DecodeEntry(p)
			p = p[4:]
			if e.S {
				break
			}
		}
	} else if binary.BigEndian.Uint16(out[12:]) != binary.BigEndian.Uint16(in[12:]) {
		t.Fatalf("ethertype %x for %x", out[12:14], in[12:14])
	}
	inIP := in[14:]
	if len(p) > len(inIP) || len(p) < 20 {
		t.Fatalf("carried %d IP bytes of %d", len(p), len(inIP))
	}
	ttlAt := 8
	if inIP[0]>>4 == 6 {
		ttlAt = 7
	} else {
		if bytes.Equal(inIP[16:20], []byte{10, 0, 0, 9}) || bytes.Equal(inIP[12:16], []byte{10, 0, 0, 9}) {
			t.Fatalf("carried a packet to or from the local address: %x", in)
		}
		hl := int(inIP[0]&0xf) * 4
		if !ipv4ChecksumOK(inIP[:hl]) || !ipv4ChecksumOK(p[:hl]) {
			t.Fatalf("IPv4 header checksum not valid in (%v) or out (%v):\n in %x\nout %x", ipv4ChecksumOK(inIP[:hl]), ipv4ChecksumOK(p[:hl]), inIP[:hl], p[:hl])
		}
	}
	if size, ok := wholeIP(inIP[0]>>4 == 6, inIP); !ok || len(p) != size {
		t.Fatalf("carried %d bytes of an IP packet of %d (whole: %v): %x", len(p), size, ok, in)
	}
	if inIP[ttlAt] <= 1 || p[ttlAt] != inIP[ttlAt]-1 {
		t.Fatalf("TTL %d in, %d out", inIP[ttlAt], p[ttlAt])
	}
}

// newFuzzProgram is newTestProgram with a small MTU, kept for the whole
// fuzz run (loading a program per input would be slow).
func newFuzzProgram(t *testing.T, model mpls.TTLModel, mtu uint32) *Program {
	p := loadOnLo(t, model, mtu, true)
	if err := p.Sync([]Entry{swapEntry(100, 200), swapEntry(101, 300, 400, 500, 600), swapEntry(102, 300, 400), swapEntry(200, 300), popEntry(103),
		{Label: 105, Action: mpls.ILMPopForward, Payload: mpls.PayloadIPv6, Egress: loIndex, NextHopMAC: nhMAC}}); err != nil {
		t.Fatal(err)
	}
	routes := append(SpecialRoutes(), fwdRoute("10.0.0.0/8"), fwdRoute("10.0.1.0/24", 300, 400), fwdRoute("2001:db8::/32", 500),
		Route{Prefix: netip.MustParsePrefix("10.0.0.9/32"), Kind: RouteLocal})
	if _, err := p.SyncFIB(routes); err != nil {
		t.Fatal(err)
	}
	return p
}

// hostileSeeds are the fuzz seeds from the hostile tests (hostile_test.go)
// and the boundaries of the fuzz program's tables: each crafted frame that
// found a defect, the MTU's edge for every action, the martian ranges'
// edges.
func hostileSeeds(t testing.TB) [][]byte {
	u := ipv4(t, 64, 40)
	lab := func(p []byte, es ...mpls.Entry) []byte { return frame(ourMAC, es, p) }
	l := func(label mpls.Label, s bool, ttl uint8) mpls.Entry { return mpls.Entry{Label: label, S: s, TTL: ttl} }
	withTot := func(size int, tot uint16) []byte {
		ip := ipv4(t, 64, size)
		binary.BigEndian.PutUint16(ip[2:], tot)
		return fixIPv4Checksum(ip)
	}
	bad := ipv4(t, 64, 40)
	bad[10] ^= 0x55
	seeds := [][]byte{
		// Label stacks without bottom, cut short, too deep.
		rawFrame(ourMAC, 0x8847, mustHex(t, strings.Repeat("00064040", 11)+"0000")),
		rawFrame(ourMAC, 0x8847, mustHex(t, strings.Repeat("00064040", 16)+"00064140"), u),
		rawFrame(ourMAC, 0x8847, mustHex(t, strings.Repeat("00064040", 15)+"00064140"), u),
		rawFrame(ourMAC, 0x8847, mustHex(t, strings.Repeat("00064040", 3))),
		// Label 3 under a swap, in the middle, under a pop; other
		// reserved labels under a swap.
		lab(u, l(200, false, 64), l(3, true, 64)),
		lab(u, l(200, false, 64), l(3, false, 64), l(100, true, 64)),
		lab(u, l(103, false, 64), l(3, true, 64)),
		lab(u, l(100, false, 64), l(0, true, 64)),
		lab(u, l(100, false, 64), l(13, true, 64)),
		// Bad IPv4 header checksums, popped and in transit.
		lab(bad, l(103, true, 64)),
		ipFrame(ourMAC, bad),
		lab(ipv4Options(t, 64, 28, 2), l(103, true, 64)),
		// Popped IP whose lengths contradict the packet, or padded.
		lab(withTot(44, 10), l(103, true, 64)),
		lab(withTot(44, 19), l(103, true, 64)),
		lab(withTot(44, 200), l(103, true, 64)),
		lab(withTot(44, 30), l(103, true, 64)),
		lab(ipv6Payload(64, 500, 25), l(103, true, 64)),
		lab(ipv6Payload(64, 0, 12), l(103, true, 64)),
		lab(append(ipv4(t, 64, 30), make([]byte, 10)...), l(103, true, 64)),
		// Inner TTLs 0, 1, 2 under a pop (pipe expires 0 and 1).
		lab(ipv4(t, 0, 40), l(103, true, 64)),
		lab(ipv4(t, 1, 40), l(103, true, 64)),
		lab(ipv4(t, 2, 40), l(103, true, 64)),
		lab(ipv6Payload(1, 8, 8), l(105, true, 64)),
		lab(u, l(103, false, 64), l(700, true, 1)),
		lab(u, l(103, false, 64), l(700, true, 2)),
		// The fuzz MTU's edge (64 bytes after Ethernet): at it and a byte
		// over, for swaps to 1, 2 and 4 labels and pops to IP and to a label.
		lab(ipv4(t, 64, 60), l(100, true, 9)), lab(ipv4(t, 64, 61), l(100, true, 9)),
		lab(ipv4(t, 64, 56), l(102, true, 9)), lab(ipv4(t, 64, 57), l(102, true, 9)),
		lab(ipv4(t, 64, 48), l(101, true, 9)), lab(ipv4(t, 64, 49), l(101, true, 9)),
		lab(ipv4(t, 64, 64), l(103, true, 9)), lab(ipv4(t, 64, 65), l(103, true, 9)),
		lab(ipv4(t, 64, 60), l(103, false, 9), l(700, true, 9)), lab(ipv4(t, 64, 61), l(103, false, 9), l(700, true, 9)),
	}
	// The martian ranges' edges, in transit to 10.0.0.2.
	for _, src := range [][4]byte{{0, 0, 0, 0}, {0, 255, 255, 255}, {1, 0, 0, 0}, {126, 255, 255, 255}, {127, 0, 0, 0},
		{169, 253, 255, 255}, {169, 254, 0, 0}, {169, 255, 0, 0}, {223, 255, 255, 255}, {224, 0, 0, 0}} {
		ip := ipv4(t, 64, 40)
		copy(ip[12:], src[:])
		copy(ip[16:], []byte{10, 0, 0, 2})
		seeds = append(seeds, ipFrame(ourMAC, fixIPv4Checksum(ip)))
	}
	return seeds
}
