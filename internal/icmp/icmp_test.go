package icmp_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/internal/icmp"
)

// TestSourceNamesOneHost checks the RFC 1812 §4.3.2.7 / RFC 4443 §2.4 (e)
// address classes that never get an ICMP error.
func TestSourceNamesOneHost(t *testing.T) {
	for s, want := range map[string]bool{
		"10.1.0.2": true, "172.16.20.20": true, "2001:db8::1": true, "::ffff:10.1.0.2": true,
		"0.0.0.0": false, "0.1.2.3": false, "127.0.0.1": false, "224.0.0.1": false, "239.255.0.1": false,
		"240.0.0.1": false, "255.255.255.255": false, "::": false, "::1": false, "ff02::1": false, "::ffff:224.0.0.1": false,
	} {
		if got := icmp.SourceNamesOneHost(netip.MustParseAddr(s)); got != want {
			t.Errorf("SourceNamesOneHost(%s) = %v, want %v", s, got, want)
		}
	}
}

// TestIsErrorShort: a packet too short for its fixed header never panics
// and counts as one that gets no error (issue 12's 1-byte payloads).
func TestIsErrorShort(t *testing.T) {
	for _, b := range [][]byte{nil, {0x45}, make([]byte, 19), {0x60}, make([]byte, 39)} {
		v6 := len(b) > 0 && b[0]>>4 == 6 || len(b) == 39
		if !icmp.IsError(v6, b) {
			t.Errorf("IsError(%v, %d bytes) = false, want true", v6, len(b))
		}
	}
}

// FuzzIsError: no input panics IsError or the builders.
func FuzzIsError(f *testing.F) {
	f.Add([]byte{0x45}, false)
	f.Add([]byte{0x60}, true)
	f.Fuzz(func(t *testing.T, b []byte, v6 bool) {
		icmp.IsError(v6, b)
		src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
		if v6 {
			src, dst = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
		}
		icmp.TimeExceeded(v6, b, nil, src, dst)
		icmp.TimeExceeded(v6, b, []byte{0, 0, 0x64, 0x01}, src, dst)
		icmp.FragmentationNeeded(v6, b, nil, 1400, src, dst)
		icmp.FragmentationNeeded(v6, b, []byte{0, 0, 0x64, 0x01}, 1400, src, dst)
		icmp.NoRoute(v6, b, src, dst)
	})
}

// TestQuoteFillsIPv4Minimum: an ICMPv4 error without extensions quotes as
// much of the offending datagram as fits in 576 bytes with its own 20-byte
// IP header (RFC 1812 §4.3.2.3), not only the header and 64 bits; a
// shorter datagram is quoted whole.
func TestQuoteFillsIPv4Minimum(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	for _, size := range []int{100, 548, 1000} {
		orig := make([]byte, size)
		orig[0] = 0x45
		for i := 20; i < size; i++ {
			orig[i] = byte(i)
		}
		want := min(size, 576-20-8)
		for name, msg := range map[string][]byte{
			"time exceeded":        icmp.TimeExceeded(false, orig, nil, src, dst),
			"fragmentation needed": icmp.FragmentationNeeded(false, orig, nil, 1400, src, dst),
			"unreachable":          icmp.NoRoute(false, orig, src, dst),
		} {
			if got := len(msg) - 8; got != want || !bytes.Equal(msg[8:], orig[:want]) {
				t.Errorf("%s for a %d-byte datagram quotes %d bytes, want its first %d", name, size, got, want)
			}
		}
	}
}
