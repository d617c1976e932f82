package xdp

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
)

// Hostile frames: crafted frames the program must pass up untouched (or
// carry exactly as userspace would), each replayed with BPF_PROG_TEST_RUN.
// Every "guards:" line names the program defect the test fails on (checked
// by running the test against the program with that defect).

// hostileEntries is the ILM of the hostile tests: swaps to 1, 2 and 4
// labels, a swap for the label under an implicit null, a pop.
func hostileEntries() []Entry {
	return []Entry{swapEntry(100, 200), swapEntry(101, 300, 400), swapEntry(102, 300, 400, 500, 600),
		swapEntry(200, 300), popEntry(103)}
}

// rawFrame is Ethernet to dst of type typ carrying the parts.
func rawFrame(dst net.HardwareAddr, typ uint16, parts ...[]byte) []byte {
	b := make([]byte, 14)
	copy(b, dst)
	copy(b[6:], peerMAC)
	binary.BigEndian.PutUint16(b[12:], typ)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixIPv4Checksum recomputes ip's header checksum (over its IHL).
func fixIPv4Checksum(ip []byte) []byte {
	hl := int(ip[0]&0xf) * 4
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:hl], 0))
	return ip
}

// ipv4Options returns ipv4(ttl, size) with n 4-byte words of options
// (NOPs) after the fixed header: IHL 5 + n, size + 4n bytes in all, a
// valid header checksum.
func ipv4Options(t testing.TB, ttl uint8, size, n int) []byte {
	t.Helper()
	ip := ipv4(t, ttl, size)
	out := append(append(bytes.Clone(ip[:20]), bytes.Repeat([]byte{1}, 4*n)...), ip[20:]...)
	out[0] = 0x40 | byte(5+n)
	binary.BigEndian.PutUint16(out[2:], uint16(len(out)))
	return fixIPv4Checksum(out)
}

// ipv6Payload is an IPv6 header with hop limit hop, payload length plen
// and n payload bytes after it (no next header: 59).
func ipv6Payload(hop uint8, plen uint16, n int) []byte {
	b := make([]byte, 40+n)
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], plen)
	b[6], b[7] = 59, hop
	copy(b[8:], net.ParseIP("2001:db8::1"))
	copy(b[24:], net.ParseIP("2001:db8::2"))
	for i := 40; i < len(b); i++ {
		b[i] = byte(i)
	}
	return b
}

// wantPassedUp runs in through a fresh program (model, entries) and wants
// it passed up untouched with r, and r alone, counted once.
func wantPassedUp(t *testing.T, p *Program, in []byte, r Reason) {
	t.Helper()
	ret, out := run(t, p, in)
	if ret != xdpPass {
		t.Fatalf("action %d, want pass (%s) for %s", ret, r, head(in))
	}
	if !bytes.Equal(out, in) {
		t.Fatalf("frame changed:\n got %x\nwant %x", out, in)
	}
	cs, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range cs {
		want := uint64(0)
		if Reason(i) == r {
			want = 1
		}
		if n != want {
			t.Fatalf("counter %s = %d, want %d (all: %v)", Reason(i), n, want, mustCounters(t, p))
		}
	}
}

// wantCarried runs in and wants it redirected; it returns the frame sent.
func wantCarried(t *testing.T, p *Program, in []byte) []byte {
	t.Helper()
	ret, out := run(t, p, in)
	if ret != xdpRedirect {
		t.Fatalf("action %d, want redirect for %s; counters %v", ret, head(in), mustCounters(t, p))
	}
	return out
}

// head is a frame's first bytes in hex, for failure messages.
func head(b []byte) string {
	if len(b) > 80 {
		return fmt.Sprintf("%x... (%d bytes)", b[:80], len(b))
	}
	return fmt.Sprintf("%x", b)
}

type hostileCase struct {
	name  string
	model mpls.TTLModel
	in    []byte
	r     Reason
}

func runPassedUp(t *testing.T, cases []hostileCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantPassedUp(t, newTestProgram(t, c.model, true, hostileEntries()...), c.in, c.r)
		})
	}
}

// TestHostileLabelStack: a label stack without its bottom within 16
// entries (mpls.DefaultMaxDepth, userspace's MaxLabels default) is passed
// up, counted as userspace counts it; 16 entries are carried; a swap whose
// pushed labels would take the stack sent past 16 is passed up.
// guards: no walk of the stack below the top label (the frames of 11
// entries without S then 2 bytes, of 17 entries, and of 3 entries
// without S were swapped and redirected).
func TestHostileLabelStack(t *testing.T) {
	ip := ipv4(t, 64, 100)
	noS := strings.Repeat("00064040", 11) + "0000" // label 100 TTL 64, no S, 11 times, 2 bytes
	deep := strings.Repeat("00064040", 16) + "00064140"
	runPassedUp(t, []hostileCase{
		{"11 entries without S, then 2 bytes", mpls.TTLUniform, rawFrame(ourMAC, 0x8847, mustHex(t, noS)), PassTruncated},
		{"17 entries", mpls.TTLUniform, rawFrame(ourMAC, 0x8847, mustHex(t, deep), ip), PassLabelStackTooDeep},
		{"17 entries, pipe", mpls.TTLPipe, rawFrame(ourMAC, 0x8847, mustHex(t, deep), ip), PassLabelStackTooDeep},
		{"3 entries without S, frame ends", mpls.TTLUniform, rawFrame(ourMAC, 0x8847, mustHex(t, strings.Repeat("00064040", 3))), PassNoBottomOfStack},
		{"16 entries without S, frame ends", mpls.TTLUniform, rawFrame(ourMAC, 0x8847, mustHex(t, strings.Repeat("00064040", 16))), PassNoBottomOfStack},
		{"pop, 17 entries", mpls.TTLUniform, rawFrame(ourMAC, 0x8847, mustHex(t, strings.Repeat("00067040", 16)+"00067140"), ip), PassLabelStackTooDeep},
		{"16 entries, swap pushing one more", mpls.TTLUniform, rawFrame(ourMAC, 0x8847, mustHex(t, strings.Repeat("00065040", 15)+"00065140"), ip), PassLabelStackTooDeep},
	})
	t.Run("16 entries carried", func(t *testing.T) {
		p := newTestProgram(t, mpls.TTLUniform, true, hostileEntries()...)
		in := rawFrame(ourMAC, 0x8847, mustHex(t, strings.Repeat("00064040", 15)+"00064140"), ip)
		out := wantCarried(t, p, in)
		if got := mpls.DecodeEntry(out[14:]); got != (mpls.Entry{Label: 200, TTL: 63}) {
			t.Fatalf("top label %+v", got)
		}
		if !bytes.Equal(out[18:], in[18:]) {
			t.Fatal("stack below the top or payload changed")
		}
	})
	t.Run("15 entries, swap pushing one more, carried", func(t *testing.T) {
		p := newTestProgram(t, mpls.TTLUniform, true, hostileEntries()...)
		in := rawFrame(ourMAC, 0x8847, mustHex(t, strings.Repeat("00065040", 14)+"00065140"), ip)
		if out := wantCarried(t, p, in); len(out) != len(in)+4 {
			t.Fatalf("sent %d bytes, want %d", len(out), len(in)+4)
		}
	})
}

// TestHostileImplicitNull: label 3 under the top label is never carried
// (userspace drops it as implicit_null_label): not under a swap, not
// deeper; other reserved labels under a swapped one are carried as they
// are (explicit nulls, GAL).
// guards: the stack below a swapped label not looked at ([200, 3] left as
// [300, 3]; [200, 3, 100] as [300, 3, 100]).
func TestHostileImplicitNull(t *testing.T) {
	ip := ipv4(t, 64, 100)
	runPassedUp(t, []hostileCase{
		{"swap over 3", mpls.TTLUniform, frame(ourMAC, []mpls.Entry{{Label: 200, TTL: 64}, {Label: 3, S: true, TTL: 64}}, ip), PassImplicitNull},
		{"swap over 3 over 100", mpls.TTLUniform, frame(ourMAC, []mpls.Entry{{Label: 200, TTL: 64}, {Label: 3, TTL: 64}, {Label: 100, S: true, TTL: 64}}, ip), PassImplicitNull},
		{"swap over 100 over 3", mpls.TTLPipe, frame(ourMAC, []mpls.Entry{{Label: 200, TTL: 64}, {Label: 100, TTL: 64}, {Label: 3, S: true, TTL: 64}}, ip), PassImplicitNull},
		{"pop over 100 over 3", mpls.TTLUniform, frame(ourMAC, []mpls.Entry{{Label: 103, TTL: 64}, {Label: 100, TTL: 64}, {Label: 3, S: true, TTL: 64}}, ip), PassImplicitNull},
	})
	for _, under := range []mpls.Label{0, 2, 13} {
		t.Run(fmt.Sprintf("swap over %d", under), func(t *testing.T) {
			p := newTestProgram(t, mpls.TTLUniform, true, hostileEntries()...)
			in := frame(ourMAC, []mpls.Entry{{Label: 200, TTL: 64}, {Label: under, S: true, TTL: 64}}, ip)
			out := wantCarried(t, p, in)
			if a, b := mpls.DecodeEntry(out[14:]), mpls.DecodeEntry(out[18:]); a != (mpls.Entry{Label: 300, TTL: 63}) || b != (mpls.Entry{Label: under, S: true, TTL: 64}) {
				t.Fatalf("labels %+v %+v", a, b)
			}
		})
	}
}

// TestHostileChecksum: an IPv4 header whose checksum does not verify is
// passed up (bad_checksum) under a popped label and in IP transit, also
// when the bad word is in the options; a header with options that
// verifies is carried, its checksum still valid.
// guards: no IPv4 header checksum check on pop and in forward_ip (the
// frames were redirected), and a check summing the fixed 20 bytes only
// (the IHL 15 frame with a corrupt last option word was redirected).
func TestHostileChecksum(t *testing.T) {
	bad := ipv4(t, 64, 100)
	bad[10] ^= 0x55
	badOpt := ipv4Options(t, 64, 100, 10)
	badOpt[59] ^= 0x01
	pop := func(ip []byte) []byte { return frame(ourMAC, []mpls.Entry{{Label: 103, S: true, TTL: 20}}, ip) }
	runPassedUp(t, []hostileCase{
		{"pop", mpls.TTLUniform, pop(bad), PassBadChecksum},
		{"pop, pipe", mpls.TTLPipe, pop(bad), PassBadChecksum},
		{"pop, bad option word", mpls.TTLUniform, pop(badOpt), PassBadChecksum},
	})
	t.Run("transit", func(t *testing.T) {
		p := fibProgram(t, fwdRoute("10.10.0.0/16"))
		wantPassedUp(t, p, ipFrame(ourMAC, bad), PassBadChecksum)
	})
	t.Run("transit, bad option word", func(t *testing.T) {
		p := fibProgram(t, fwdRoute("10.10.0.0/16"))
		wantPassedUp(t, p, ipFrame(ourMAC, badOpt), PassBadChecksum)
	})
	for _, n := range []int{1, 10} {
		good := ipv4Options(t, 64, 100, n)
		t.Run(fmt.Sprintf("IHL %d carried", 5+n), func(t *testing.T) {
			p := newTestProgram(t, mpls.TTLUniform, true, hostileEntries()...)
			out := wantCarried(t, p, pop(good))
			if !ipv4ChecksumOK(out[14:]) || out[14+8] != 19 {
				t.Fatalf("IHL %d: TTL %d checksum ok %v", 5+n, out[14+8], ipv4ChecksumOK(out[14:]))
			}
			p = fibProgram(t, fwdRoute("10.10.0.0/16"))
			out = wantCarried(t, p, ipFrame(ourMAC, good))
			if !ipv4ChecksumOK(out[14:]) || out[14+8] != 63 {
				t.Fatalf("transit IHL %d: TTL %d checksum ok %v", 5+n, out[14+8], ipv4ChecksumOK(out[14:]))
			}
		})
	}
}

// TestHostilePoppedIPLength: a popped IP packet is judged whole, as IP
// transit is: IPv4 total length below its header or beyond the bytes
// there, IPv6 payload beyond the bytes there, are passed up
// (malformed_ip); bytes after the packet (Ethernet padding, an IPv6
// payload length of 0 with bytes after the header) are trimmed.
// guards: no length check after a pop (total length 10, 19 and 200 in 44
// bytes, IPv6 payload length 500 over 25 bytes were redirected) and no
// trim (the padded frames left with their padding).
func TestHostilePoppedIPLength(t *testing.T) {
	withTot := func(size int, tot uint16) []byte {
		ip := ipv4(t, 64, size)
		binary.BigEndian.PutUint16(ip[2:], tot)
		return fixIPv4Checksum(ip)
	}
	pop := func(ip []byte) []byte { return frame(ourMAC, []mpls.Entry{{Label: 103, S: true, TTL: 20}}, ip) }
	runPassedUp(t, []hostileCase{
		{"IPv4 total length 10", mpls.TTLUniform, pop(withTot(44, 10)), PassMalformedIP},
		{"IPv4 total length 19", mpls.TTLUniform, pop(withTot(44, 19)), PassMalformedIP},
		{"IPv4 total length 200 in 44 bytes", mpls.TTLUniform, pop(withTot(44, 200)), PassMalformedIP},
		{"IPv4 total length 23 under IHL 6", mpls.TTLPipe, pop(func() []byte {
			ip := ipv4Options(t, 64, 40, 1)
			binary.BigEndian.PutUint16(ip[2:], 23)
			return fixIPv4Checksum(ip)
		}()), PassMalformedIP},
		{"IPv6 payload length 500 over 25 bytes", mpls.TTLUniform, pop(ipv6Payload(64, 500, 25)), PassMalformedIP},
		{"IPv6 payload length 26 over 25 bytes", mpls.TTLPipe, pop(ipv6Payload(64, 26, 25)), PassMalformedIP},
	})
	t.Run("IPv4 padding trimmed", func(t *testing.T) {
		p := newTestProgram(t, mpls.TTLUniform, true, hostileEntries()...)
		ip := ipv4(t, 64, 30)
		out := wantCarried(t, p, pop(append(bytes.Clone(ip), make([]byte, 16)...)))
		if len(out) != 14+len(ip) || !ipv4ChecksumOK(out[14:]) || !bytes.Equal(out[14+12:], ip[12:]) {
			t.Fatalf("sent %x, want the %d-byte IP packet alone", out, len(ip))
		}
	})
	t.Run("IPv4 total length below the bytes there trimmed", func(t *testing.T) {
		p := newTestProgram(t, mpls.TTLPipe, true, hostileEntries()...)
		out := wantCarried(t, p, pop(withTot(44, 30)))
		if len(out) != 14+30 || !ipv4ChecksumOK(out[14:]) {
			t.Fatalf("sent %d bytes, want %d", len(out), 14+30)
		}
	})
	t.Run("IPv6 payload length 0 trimmed", func(t *testing.T) {
		p := newTestProgram(t, mpls.TTLUniform, true, hostileEntries()...)
		ip := ipv6Payload(64, 0, 12)
		out := wantCarried(t, p, pop(ip))
		if len(out) != 14+40 || !bytes.Equal(out[14+8:], ip[8:40]) || out[14+7] != 19 {
			t.Fatalf("sent %x, want the 40-byte header alone, hop limit 19", out)
		}
	})
}

// TestHostilePipeTTL: in the pipe model a pop forwards the exposed packet,
// so its own TTL (IPv4 TTL, IPv6 hop limit, the exposed label's TTL) is
// decremented, and a TTL of 0 or 1 there is passed up (ttl_expired:
// userspace sends the time exceeded); the label TTL must be above 1 in
// both models; uniform sets the label TTL - 1 whatever the inner TTL.
// guards: pipe leaving the exposed TTL untouched (inner TTL 0 and 1 were
// redirected as they came).
func TestHostilePipeTTL(t *testing.T) {
	pop := func(ttl uint8, ip []byte) []byte {
		return frame(ourMAC, []mpls.Entry{{Label: 103, S: true, TTL: ttl}}, ip)
	}
	popLabel := func(inner uint8) []byte {
		return frame(ourMAC, []mpls.Entry{{Label: 103, TTL: 20}, {Label: 700, S: true, TTL: inner}}, ipv4(t, 64, 60))
	}
	runPassedUp(t, []hostileCase{
		{"IPv4 TTL 1", mpls.TTLPipe, pop(20, ipv4(t, 1, 60)), PassTTLExpired},
		{"IPv4 TTL 0", mpls.TTLPipe, pop(20, ipv4(t, 0, 60)), PassTTLExpired},
		{"IPv6 hop limit 1", mpls.TTLPipe, pop(20, ipv6(t, 1)), PassTTLExpired},
		{"IPv6 hop limit 0", mpls.TTLPipe, pop(20, ipv6(t, 0)), PassTTLExpired},
		{"exposed label TTL 1", mpls.TTLPipe, popLabel(1), PassTTLExpired},
		{"exposed label TTL 0", mpls.TTLPipe, popLabel(0), PassTTLExpired},
		{"label TTL 1", mpls.TTLPipe, pop(1, ipv4(t, 64, 60)), PassTTLExpired},
	})
	t.Run("pipe decrements", func(t *testing.T) {
		p := newTestProgram(t, mpls.TTLPipe, true, hostileEntries()...)
		if out := wantCarried(t, p, pop(20, ipv4(t, 2, 60))); out[14+8] != 1 || !ipv4ChecksumOK(out[14:]) {
			t.Fatalf("IPv4 TTL %d, checksum ok %v; want 1, valid", out[14+8], ipv4ChecksumOK(out[14:]))
		}
		if out := wantCarried(t, p, pop(20, ipv6(t, 2))); out[14+7] != 1 {
			t.Fatalf("IPv6 hop limit %d, want 1", out[14+7])
		}
		if out := wantCarried(t, p, popLabel(2)); mpls.DecodeEntry(out[14:]) != (mpls.Entry{Label: 700, S: true, TTL: 1}) {
			t.Fatalf("exposed label %+v, want TTL 1", mpls.DecodeEntry(out[14:]))
		}
	})
	t.Run("uniform ignores the inner TTL", func(t *testing.T) {
		p := newTestProgram(t, mpls.TTLUniform, true, hostileEntries()...)
		if out := wantCarried(t, p, pop(20, ipv4(t, 1, 60))); out[14+8] != 19 || !ipv4ChecksumOK(out[14:]) {
			t.Fatalf("IPv4 TTL %d, want 19", out[14+8])
		}
		if out := wantCarried(t, p, popLabel(1)); mpls.DecodeEntry(out[14:]).TTL != 19 {
			t.Fatalf("exposed label %+v, want TTL 19", mpls.DecodeEntry(out[14:]))
		}
	})
}

// TestMTUBoundaries: for a swap to 1, 2 and 4 labels, a pop to IP and a
// pop to a label, the frame whose labelled packet is exactly the egress
// MTU is carried and one a byte longer is passed up (mtu_exceeded).
// guards: the egress MTU check off by one label (4 bytes) either way on
// swap-and-push (l2len + n*4, l2len + (n-2)*4) and on pop (size + 4,
// size - 4).
func TestMTUBoundaries(t *testing.T) {
	cases := []struct {
		name   string
		labels []mpls.Entry
		over   int // bytes the labels sent add to the payload
	}{
		{"swap to 1", []mpls.Entry{{Label: 100, S: true, TTL: 9}}, 4},
		{"swap to 2", []mpls.Entry{{Label: 101, S: true, TTL: 9}}, 8},
		{"swap to 4", []mpls.Entry{{Label: 102, S: true, TTL: 9}}, 16},
		{"swap to 2 over a label", []mpls.Entry{{Label: 101, TTL: 9}, {Label: 700, S: true, TTL: 9}}, 12},
		{"pop to IP", []mpls.Entry{{Label: 103, S: true, TTL: 9}}, 0},
		{"pop to a label", []mpls.Entry{{Label: 103, TTL: 9}, {Label: 700, S: true, TTL: 9}}, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newTestProgram(t, mpls.TTLUniform, true, hostileEntries()...)
			at := frame(ourMAC, c.labels, ipv4(t, 64, testMTU-c.over))
			if out := wantCarried(t, p, at); len(out)-14 != testMTU {
				t.Fatalf("sent %d bytes after Ethernet, want the MTU %d", len(out)-14, testMTU)
			}
			wantPassedUp(t, newTestProgram(t, mpls.TTLUniform, true, hostileEntries()...),
				frame(ourMAC, c.labels, ipv4(t, 64, testMTU-c.over+1)), PassMTUExceeded)
		})
	}
}

// TestMartianBoundaries: IPv4 transit sources at the edges of the ranges
// never forwarded (0/8, 127/8, 169.254/16, 224/4 and up) are passed up
// inside them (martian_source) and carried just outside.
// guards: the 224/4 test as sa[0] > 224 (224.0.0.0 was carried), and the
// other ranges' edges moved by one.
func TestMartianBoundaries(t *testing.T) {
	p := fibProgram(t, fwdRoute("10.10.0.0/16"))
	from := func(src [4]byte) []byte {
		ip := ipv4(t, 64, 100)
		copy(ip[12:], src[:])
		return ipFrame(ourMAC, fixIPv4Checksum(ip))
	}
	for _, c := range []struct {
		src     [4]byte
		martian bool
	}{
		{[4]byte{0, 0, 0, 0}, true}, {[4]byte{0, 255, 255, 255}, true}, {[4]byte{1, 0, 0, 0}, false},
		{[4]byte{126, 255, 255, 255}, false}, {[4]byte{127, 0, 0, 0}, true}, {[4]byte{127, 255, 255, 255}, true}, {[4]byte{128, 0, 0, 0}, false},
		{[4]byte{169, 253, 255, 255}, false}, {[4]byte{169, 254, 0, 0}, true}, {[4]byte{169, 254, 255, 255}, true}, {[4]byte{169, 255, 0, 0}, false},
		{[4]byte{168, 254, 0, 1}, false}, {[4]byte{170, 254, 0, 1}, false},
		{[4]byte{223, 255, 255, 255}, false}, {[4]byte{224, 0, 0, 0}, true}, {[4]byte{239, 255, 255, 255}, true},
		{[4]byte{240, 0, 0, 1}, true}, {[4]byte{255, 255, 255, 255}, true},
	} {
		in := from(c.src)
		before := counter(t, p, PassMartianSource)
		ret, out := run(t, p, in)
		switch {
		case c.martian && (ret != xdpPass || !bytes.Equal(out, in) || counter(t, p, PassMartianSource) != before+1):
			t.Errorf("source %v: action %d, want pass as martian_source; counters %v", net.IP(c.src[:]), ret, mustCounters(t, p))
		case !c.martian && ret != xdpRedirect:
			t.Errorf("source %v: action %d, want redirect; counters %v", net.IP(c.src[:]), ret, mustCounters(t, p))
		}
	}
}
