package xdp

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/mpls"
)

// XDP return codes (linux/bpf.h).
const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
)

// xdpMd is the program's context for BPF_PROG_TEST_RUN (struct xdp_md).
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

var (
	ourMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	nhMAC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
	peerMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x03}
)

// loIndex is the loopback interface: the kernel wants a real device as the
// test run's ingress and in the egress device map.
const loIndex = 1

const testMTU = 1500

func skipUnlessBPF(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF, CAP_NET_ADMIN) to load an XDP program")
	}
}

// newFIBTestProgram loads the program with a FIB of capacity prefixes a
// family and lo registered as a healthy link (not attached: the tests run
// it with BPF_PROG_TEST_RUN).
func newFIBTestProgram(t testing.TB, capacity int) *Program {
	t.Helper()
	p, err := LoadFIB(mpls.TTLUniform, capacity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.addLink(Link{Name: "lo", Index: loIndex, MAC: ourMAC, MTU: testMTU, Ingress: true}, false); err != nil {
		t.Fatal(err)
	}
	if err := p.SetEgressOK(loIndex, true); err != nil {
		t.Fatal(err)
	}
	return p
}

// newTestProgram loads the program with the links registered (not
// attached: the tests run it with BPF_PROG_TEST_RUN) and entries synced.
func newTestProgram(t testing.TB, model mpls.TTLModel, egressOK bool, entries ...Entry) *Program {
	t.Helper()
	p := loadOnLo(t, model, testMTU, egressOK)
	t.Cleanup(func() { p.Close() })
	if err := p.Sync(entries); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadOnLo loads the program with lo registered as its one link of MTU
// mtu, an ingress and, if egressOK, a healthy egress (not attached: the
// tests run it with BPF_PROG_TEST_RUN). The caller closes it.
func loadOnLo(t testing.TB, model mpls.TTLModel, mtu uint32, egressOK bool) *Program {
	t.Helper()
	skipUnlessBPF(t)
	p, err := Load(model)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.addLink(Link{Name: "lo", Index: loIndex, MAC: ourMAC, MTU: mtu, Ingress: true}, false); err != nil {
		p.Close()
		t.Fatal(err)
	}
	if egressOK {
		if err := p.SetEgressOK(loIndex, true); err != nil {
			p.Close()
			t.Fatal(err)
		}
	}
	return p
}

// run runs the program once on frame and returns its action and the frame
// it left.
func run(t testing.TB, p *Program, frame []byte) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(frame)+256)
	opts := ebpfRunOptions(frame, out)
	ret, err := p.objs.MplsnodeLsr.Run(opts)
	if err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return ret, opts.DataOut
}

// frame builds Ethernet to dst, the label stack and payload.
func frame(dst net.HardwareAddr, labels []mpls.Entry, payload []byte) []byte {
	b := make([]byte, 14+4*len(labels), 14+4*len(labels)+len(payload))
	copy(b, dst)
	copy(b[6:], peerMAC)
	binary.BigEndian.PutUint16(b[12:], 0x8847)
	for i, e := range labels {
		e.Encode(b[14+4*i:])
	}
	return append(b, payload...)
}

// ipv4 returns an IPv4/UDP packet with TTL ttl, a valid header checksum
// (computed by gopacket) and size bytes in all.
func ipv4(t testing.TB, ttl uint8, size int) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: ttl, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 10, 10, 10}, Flags: layers.IPv4DontFragment}
	udp := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	pay := make([]byte, size-28)
	for i := range pay {
		pay[i] = byte(i)
	}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, udp, gopacket.Payload(pay)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ipv6(t testing.TB, hop uint8) []byte {
	t.Helper()
	ip := &layers.IPv6{Version: 6, HopLimit: hop, NextHeader: layers.IPProtocolUDP,
		SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
	udp := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, udp, gopacket.Payload([]byte("hello"))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ipv4ChecksumOK verifies an IPv4 header checksum independently of the
// code under test (RFC 1071 sum over the header is 0xffff).
func ipv4ChecksumOK(h []byte) bool {
	hl := int(h[0]&0xf) * 4
	var sum uint32
	for i := 0; i < hl; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

func swapEntry(in mpls.Label, out ...mpls.Label) Entry {
	return Entry{Label: in, Action: mpls.ILMSwap, OutLabels: out, Egress: loIndex, NextHopMAC: nhMAC}
}

func popEntry(in mpls.Label) Entry {
	return Entry{Label: in, Action: mpls.ILMPopForward, Egress: loIndex, NextHopMAC: nhMAC}
}

// wantEthernet checks the rewritten Ethernet header.
func wantEthernet(t *testing.T, out []byte, typ uint16) {
	t.Helper()
	if !bytes.Equal(out[0:6], nhMAC) || !bytes.Equal(out[6:12], ourMAC) || binary.BigEndian.Uint16(out[12:]) != typ {
		t.Fatalf("Ethernet header %x, want dst %s src %s type %#04x", out[:14], nhMAC, ourMAC, typ)
	}
}

func counter(t *testing.T, p *Program, r Reason) uint64 {
	t.Helper()
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c[r]
}

// TestSwap: label 100 TTL 64 swapped for 200 keeps TC and S, TTL 63, the
// payload byte for byte (RFC 3032 §2.4.1).
func TestSwap(t *testing.T) {
	p := newTestProgram(t, mpls.TTLUniform, true, swapEntry(100, 200))
	ip := ipv4(t, 64, 100)
	ret, out := run(t, p, frame(ourMAC, []mpls.Entry{{Label: 100, TC: 5, S: true, TTL: 64}}, ip))
	if ret != xdpRedirect {
		t.Fatalf("action %d, want redirect; counters %v", ret, mustCounters(t, p))
	}
	wantEthernet(t, out, 0x8847)
	want := mpls.Entry{Label: 200, TC: 5, S: true, TTL: 63}
	if got := mpls.DecodeEntry(out[14:]); got != want {
		t.Fatalf("label %+v, want %+v", got, want)
	}
	if !bytes.Equal(out[18:], ip) {
		t.Fatal("payload changed")
	}
	if counter(t, p, Swapped) != 1 {
		t.Fatal("swapped not counted")
	}
}

// TestSwapPush: a swap to two labels grows the frame by one label; only the
// bottom one of the new stack has S when the swapped label was the bottom.
func TestSwapPush(t *testing.T) {
	p := newTestProgram(t, mpls.TTLUniform, true, swapEntry(100, 300, 400), swapEntry(101, 300, 400))
	ip := ipv4(t, 64, 60)
	ret, out := run(t, p, frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 10}}, ip))
	if ret != xdpRedirect || len(out) != 14+8+len(ip) {
		t.Fatalf("action %d len %d, want redirect of %d bytes", ret, len(out), 14+8+len(ip))
	}
	wantEthernet(t, out, 0x8847)
	if a, b := mpls.DecodeEntry(out[14:]), mpls.DecodeEntry(out[18:]); a != (mpls.Entry{Label: 300, TTL: 9}) || b != (mpls.Entry{Label: 400, S: true, TTL: 9}) {
		t.Fatalf("labels %+v %+v", a, b)
	}
	if !bytes.Equal(out[22:], ip) {
		t.Fatal("payload changed")
	}
	// Not the bottom label: the labels below stay, no S on the new ones.
	ret, out = run(t, p, frame(ourMAC, []mpls.Entry{{Label: 101, TTL: 10}, {Label: 500, S: true, TTL: 33}}, ip))
	if ret != xdpRedirect {
		t.Fatalf("action %d", ret)
	}
	if a, b, c := mpls.DecodeEntry(out[14:]), mpls.DecodeEntry(out[18:]), mpls.DecodeEntry(out[22:]); a.S || b.S || c != (mpls.Entry{Label: 500, S: true, TTL: 33}) {
		t.Fatalf("labels %+v %+v %+v", a, b, c)
	}
}

// TestPopToIP: uniform writes the decremented label TTL into the IP
// header (IPv4 checksum still valid; IPv6 hop limit); pipe decrements the
// IP packet's own TTL for this hop.
func TestPopToIP(t *testing.T) {
	for _, model := range []mpls.TTLModel{mpls.TTLUniform, mpls.TTLPipe} {
		t.Run(model.String(), func(t *testing.T) {
			p := newTestProgram(t, model, true, popEntry(100))
			ip := ipv4(t, 200, 100)
			ret, out := run(t, p, frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 20}}, ip))
			if ret != xdpRedirect || len(out) != 14+len(ip) {
				t.Fatalf("action %d len %d", ret, len(out))
			}
			wantEthernet(t, out, 0x0800)
			wantTTL := uint8(19)
			if model == mpls.TTLPipe {
				wantTTL = 199
			}
			if out[14+8] != wantTTL || !ipv4ChecksumOK(out[14:]) {
				t.Fatalf("IPv4 TTL %d (want %d), checksum ok %v", out[14+8], wantTTL, ipv4ChecksumOK(out[14:]))
			}
			if !bytes.Equal(out[14+12:], ip[12:]) {
				t.Fatal("IPv4 packet changed beyond TTL and checksum")
			}
			ip6 := ipv6(t, 200)
			ret, out = run(t, p, frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 20}}, ip6))
			if ret != xdpRedirect {
				t.Fatalf("IPv6: action %d", ret)
			}
			wantEthernet(t, out, 0x86dd)
			if out[14+7] != wantTTL {
				t.Fatalf("IPv6 hop limit %d, want %d", out[14+7], wantTTL)
			}
			if counter(t, p, PoppedIP) != 2 {
				t.Fatal("popped_ip not counted twice")
			}
		})
	}
}

// TestPopToLabel: popping a label that is not the bottom leaves a labelled
// frame; uniform copies the decremented TTL into the new top label, pipe
// decrements the new top label's own.
func TestPopToLabel(t *testing.T) {
	for _, model := range []mpls.TTLModel{mpls.TTLUniform, mpls.TTLPipe} {
		t.Run(model.String(), func(t *testing.T) {
			p := newTestProgram(t, model, true, popEntry(100))
			ip := ipv4(t, 64, 60)
			ret, out := run(t, p, frame(ourMAC, []mpls.Entry{{Label: 100, TTL: 20}, {Label: 700, S: true, TTL: 99}}, ip))
			if ret != xdpRedirect || len(out) != 18+len(ip) {
				t.Fatalf("action %d len %d", ret, len(out))
			}
			wantEthernet(t, out, 0x8847)
			want := mpls.Entry{Label: 700, S: true, TTL: 98}
			if model == mpls.TTLUniform {
				want.TTL = 19
			}
			if got := mpls.DecodeEntry(out[14:]); got != want {
				t.Fatalf("label %+v, want %+v", got, want)
			}
			if counter(t, p, PoppedLabelled) != 1 {
				t.Fatal("popped_labelled not counted")
			}
		})
	}
}

// TestPassedUp: every frame the program does not carry leaves it untouched
// with XDP_PASS and its reason counted.
func TestPassedUp(t *testing.T) {
	ip := ipv4(t, 64, 100)
	full := make([]byte, testMTU-4) // a label + this = the MTU
	copy(full, ipv4(t, 64, testMTU-4))
	unresolved := swapEntry(102, 200)
	unresolved.NextHopMAC = nil
	cases := []struct {
		name     string
		egressOK bool
		frame    []byte
		reason   Reason
	}{
		{"ttl 1", true, frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 1}}, ip), PassTTLExpired},
		{"ttl 0", true, frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 0}}, ip), PassTTLExpired},
		{"unknown label", true, frame(ourMAC, []mpls.Entry{{Label: 999, S: true, TTL: 9}}, ip), PassNoILMEntry},
		{"multipath label", true, frame(ourMAC, []mpls.Entry{{Label: 105, S: true, TTL: 9}}, ip), PassECMP},
		{"multipath label, ttl 1", true, frame(ourMAC, []mpls.Entry{{Label: 105, S: true, TTL: 1}}, ip), PassECMP},
		{"pop-local not carried", true, frame(ourMAC, []mpls.Entry{{Label: 104, S: true, TTL: 9}}, ip), PassNoILMEntry},
		{"unresolved", true, frame(ourMAC, []mpls.Entry{{Label: 102, S: true, TTL: 9}}, ip), PassNoNeighbor},
		{"egress down", false, frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 9}}, ip), PassEgressDown},
		{"implicit null on top", true, frame(ourMAC, []mpls.Entry{{Label: 3, S: true, TTL: 9}}, ip), PassImplicitNull},
		{"explicit null on top", true, frame(ourMAC, []mpls.Entry{{Label: 0, S: true, TTL: 9}}, ip), PassReservedLabel},
		{"implicit null under a pop", true, frame(ourMAC, []mpls.Entry{{Label: 103, TTL: 9}, {Label: 3, S: true, TTL: 9}}, ip), PassImplicitNull},
		{"GAL under a pop", true, frame(ourMAC, []mpls.Entry{{Label: 103, TTL: 9}, {Label: 13, S: true, TTL: 9}}, ip), PassReservedLabel},
		{"not for us", true, frame(nhMAC, []mpls.Entry{{Label: 100, S: true, TTL: 9}}, ip), PassNotForUs},
		{"broadcast", true, frame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []mpls.Entry{{Label: 100, S: true, TTL: 9}}, ip), PassNotForUs},
		{"push over the MTU", true, frame(ourMAC, []mpls.Entry{{Label: 101, S: true, TTL: 9}}, full), PassMTUExceeded},
		{"pop to non-IP", true, frame(ourMAC, []mpls.Entry{{Label: 103, S: true, TTL: 9}}, []byte{0x50, 1, 2, 3}), PassUnknownPayload},
		{"pop to short IPv4", true, frame(ourMAC, []mpls.Entry{{Label: 103, S: true, TTL: 9}}, []byte{0x45, 1, 2, 3}), PassUnknownPayload},
		{"pop to short IPv6", true, frame(ourMAC, []mpls.Entry{{Label: 103, S: true, TTL: 9}}, []byte{0x60, 1, 2, 3}), PassUnknownPayload},
		{"pop, stack without bottom", true, frame(ourMAC, []mpls.Entry{{Label: 103, TTL: 9}}, nil), PassNoBottomOfStack},
		{"pop, stack cut short", true, frame(ourMAC, []mpls.Entry{{Label: 103, TTL: 9}}, []byte{0, 0x06}), PassTruncated},
		{"IPv4 without a FIB", true, append([]byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 3, 8, 0}, ip...), PassNoRoute},
		{"IPv4 to another MAC", true, append([]byte{2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 3, 8, 0}, ip...), PassNotMPLS},
		{"runt", true, []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 3, 0x88, 0x47, 0}, PassNotMPLS},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newTestProgram(t, mpls.TTLUniform, c.egressOK, swapEntry(100, 200), swapEntry(101, 300, 400),
				unresolved, popEntry(103), Entry{Label: 104, Action: mpls.ILMPopLocal, Egress: loIndex},
				Entry{Label: 105, Action: mpls.ILMMultipath})
			ret, out := run(t, p, c.frame)
			if ret != xdpPass {
				t.Fatalf("action %d, want pass", ret)
			}
			if !bytes.Equal(out, c.frame) {
				t.Fatalf("frame changed:\n got %s\nwant %s", hex.EncodeToString(out), hex.EncodeToString(c.frame))
			}
			cs, err := p.Counters()
			if err != nil {
				t.Fatal(err)
			}
			for r, n := range cs {
				want := uint64(0)
				if Reason(r) == c.reason {
					want = 1
				}
				if n != want {
					t.Fatalf("counter %s = %d, want %d (all: %v)", Reason(r), n, want, mustCounters(t, p))
				}
			}
		})
	}
}

// TestExactlyMTU: a frame whose labelled packet is exactly the egress MTU
// is carried; one byte more is passed up (guards a >= for > in the check).
func TestExactlyMTU(t *testing.T) {
	p := newTestProgram(t, mpls.TTLUniform, true, swapEntry(100, 200))
	ret, _ := run(t, p, frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 9}}, ipv4(t, 64, testMTU-4)))
	if ret != xdpRedirect {
		t.Fatalf("frame of exactly the MTU: action %d, want redirect", ret)
	}
	ret, _ = run(t, p, frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 9}}, ipv4(t, 64, testMTU-3)))
	if ret != xdpPass {
		t.Fatalf("frame one byte over the MTU: action %d, want pass", ret)
	}
}

// TestSyncReplacesAndDeletes: Sync writes changed entries and removes the
// ones that went away.
func TestSyncReplacesAndDeletes(t *testing.T) {
	p := newTestProgram(t, mpls.TTLUniform, true, swapEntry(100, 200), swapEntry(101, 201))
	if err := p.Sync([]Entry{swapEntry(100, 250)}); err != nil {
		t.Fatal(err)
	}
	ip := ipv4(t, 64, 60)
	ret, out := run(t, p, frame(ourMAC, []mpls.Entry{{Label: 100, S: true, TTL: 9}}, ip))
	if ret != xdpRedirect || mpls.DecodeEntry(out[14:]).Label != 250 {
		t.Fatalf("after Sync: action %d label %d, want redirect with 250", ret, mpls.DecodeEntry(out[14:]).Label)
	}
	if ret, _ := run(t, p, frame(ourMAC, []mpls.Entry{{Label: 101, S: true, TTL: 9}}, ip)); ret != xdpPass {
		t.Fatalf("removed label 101: action %d, want pass", ret)
	}
	if p.VerifiedInstructions() == 0 {
		t.Log("kernel did not report the verified instruction count")
	} else {
		t.Logf("verifier processed %d instructions", p.VerifiedInstructions())
	}
}

func mustCounters(t testing.TB, p *Program) map[string]uint64 {
	t.Helper()
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for r, n := range c {
		if n != 0 {
			m[Reason(r).String()] = n
		}
	}
	return m
}

func ebpfRunOptions(in, out []byte) *ebpf.RunOptions {
	return &ebpf.RunOptions{Data: in, DataOut: out, Context: xdpMd{DataEnd: uint32(len(in)), IngressIfindex: loIndex}}
}
