package xdp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

// FuzzProgram runs arbitrary frames through the XDP label switch (with
// BPF_PROG_TEST_RUN; root only) and checks its invariants: it never drops
// (a frame is carried or passed up), a frame passed up is untouched, a
// carried frame fits the egress MTU, goes to the next hop from the egress
// link's address, has no reserved label on top, and a popped IPv4 packet
// leaves with a valid header checksum exactly when it came with one. For
// IP transit (the FIB path): a carried packet came with TTL above 1 and
// leaves with TTL - 1 (under the pushed labels, if any, the bottom one
// alone with S), its IPv4 checksum valid exactly when it came valid, never
// to or from the local address.
func FuzzProgram(f *testing.F) {
	ip := []byte{0x45, 0, 0, 20, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	binary.BigEndian.PutUint16(ip[10:], ^sum16(ip))
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
		binary.BigEndian.PutUint16(b[10:], ^sum16(b))
		return append(append([]byte{}, ourMAC...), append([]byte{2, 0, 0, 0, 0, 3, 8, 0}, b...)...)
	}
	f.Add(ip4(2), false)
	f.Add(ip4(1), true) // 10.0.1.1: two labels pushed
	f.Add(ip4(9), false)
	f.Add(append(ip4(2), 0, 0, 0, 0), false) // padding
	f.Add(append(append([]byte{}, ourMAC...), []byte{2, 0, 0, 0, 0, 3, 0x86, 0xdd, 0x60, 0, 0, 0, 0, 0, 59, 9,
		0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}...), false)
	const mtu = 64
	var progs [2]*Program
	f.Fuzz(func(t *testing.T, in []byte, pipe bool) {
		if len(in) < 14 {
			return // the kernel's test run wants an Ethernet header
		}
		model, i := mpls.TTLUniform, 0
		if pipe {
			model, i = mpls.TTLPipe, 1
		}
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
		switch binary.BigEndian.Uint16(out[12:]) {
		case 0x8847:
			if len(out) < 18 || mpls.DecodeEntry(out[14:]).Label.IsReserved() {
				t.Fatalf("carried a reserved or missing top label: %x", out)
			}
		case 0x0800:
			// The IPv4 header sits under the last label of the input.
			inIP := in[len(in)-(len(out)-14):]
			hl := int(inIP[0]&0xf) * 4
			if ipv4ChecksumOK(inIP[:hl]) != ipv4ChecksumOK(out[14:14+hl]) {
				t.Fatalf("IPv4 header checksum validity changed:\n in %x\nout %x", inIP[:hl], out[14:14+hl])
			}
		case 0x86dd:
		default:
			t.Fatalf("ethertype %x", out[12:14])
		}
	})
}

// checkIPTransit checks a carried IP packet: in's IP packet, TTL
// decremented, under the labels pushed.
func checkIPTransit(t *testing.T, in, out []byte) {
	t.Helper()
	p := out[14:]
	if binary.BigEndian.Uint16(out[12:]) == 0x8847 {
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
		if ipv4ChecksumOK(inIP[:hl]) != ipv4ChecksumOK(p[:hl]) {
			t.Fatalf("IPv4 header checksum validity changed:\n in %x\nout %x", inIP[:hl], p[:hl])
		}
	}
	if inIP[ttlAt] <= 1 || p[ttlAt] != inIP[ttlAt]-1 {
		t.Fatalf("TTL %d in, %d out", inIP[ttlAt], p[ttlAt])
	}
}

// newFuzzProgram is newTestProgram with a small MTU, kept for the whole
// fuzz run (loading a program per input would be slow).
func newFuzzProgram(t *testing.T, model mpls.TTLModel, mtu uint32) *Program {
	skipUnlessBPF(t)
	p, err := Load(model)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.addLink(Link{Name: "lo", Index: loIndex, MAC: ourMAC, MTU: mtu, Ingress: true}, false); err != nil {
		t.Fatal(err)
	}
	if err := p.SetEgressOK(loIndex, true); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync([]Entry{swapEntry(100, 200), swapEntry(101, 300, 400, 500, 600), popEntry(103),
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

func sum16(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
