package xdp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// eth puts an Ethernet header of type et before p.
func eth(et uint16, p []byte) []byte {
	f := make([]byte, 14, 14+len(p))
	binary.BigEndian.PutUint16(f[12:], et)
	return append(f, p...)
}

// partialForm overwrites the checksum at off (from the L4 start l4) with
// the folded pseudo-header sum, as Linux leaves a CHECKSUM_PARTIAL packet.
func partialForm(f []byte, l4, off int, proto tcpip.TransportProtocolNumber, src, dst tcpip.Address) {
	sum := header.PseudoHeaderChecksum(proto, src, dst, uint16(len(f)-l4))
	binary.BigEndian.PutUint16(f[l4+off:], sum)
}

// TestPartialChecksum: frames with full checksums (built by mplstest, which
// tshark verifies in its own tests) are not taken for partial ones; the
// same frames with the partial form are, for TCP and UDP over IPv4 and
// IPv6; a partial form with a corrupted field or on a fragment is not.
// Planted bug: comparing against the complemented sum (the full-checksum
// form) fails the partial cases.
func TestPartialChecksum(t *testing.T) {
	a4, b4 := netip.MustParseAddrPort("10.0.0.1:1000"), netip.MustParseAddrPort("10.0.0.2:2000")
	a6, b6 := netip.MustParseAddrPort("[fd00::1]:1000"), netip.MustParseAddrPort("[fd00::2]:2000")
	pay := bytes.Repeat([]byte{0x5a}, 333)
	v4 := eth(0x0800, mplstest.IPv4TCP(mplstest.TCP{Src: a4, Dst: b4, Seq: 7, Flags: header.TCPFlagAck, Payload: pay}))
	v6 := eth(0x86dd, mplstest.IPv6TCP(mplstest.TCP{Src: a6, Dst: b6, Seq: 7, Flags: header.TCPFlagAck, Payload: pay}))
	u4 := eth(0x0800, mplstest.IPv4UDP(a4, b4, true, pay))
	s4, d4 := tcpip.AddrFrom4(a4.Addr().As4()), tcpip.AddrFrom4(b4.Addr().As4())
	s6, d6 := tcpip.AddrFrom16(a6.Addr().As16()), tcpip.AddrFrom16(b6.Addr().As16())
	for _, c := range []struct {
		name     string
		frame    []byte
		l4, off  int
		proto    tcpip.TransportProtocolNumber
		src, dst tcpip.Address
	}{
		{"tcp4", v4, 14 + 20, 16, header.TCPProtocolNumber, s4, d4},
		{"tcp6", v6, 14 + 40, 16, header.TCPProtocolNumber, s6, d6},
		{"udp4", u4, 14 + 20, 6, header.UDPProtocolNumber, s4, d4},
	} {
		if partialChecksum(c.frame) {
			t.Errorf("%s with a full checksum: taken for a partial one", c.name)
		}
		f := bytes.Clone(c.frame)
		partialForm(f, c.l4, c.off, c.proto, c.src, c.dst)
		if !partialChecksum(f) {
			t.Errorf("%s in the partial form: not recognised", c.name)
		}
		f[c.l4+c.off] ^= 0x40
		if partialChecksum(f) {
			t.Errorf("%s with a corrupted partial field: taken for a partial one", c.name)
		}
	}
	frag := bytes.Clone(v4)
	partialForm(frag, 34, 16, header.TCPProtocolNumber, s4, d4)
	ip := header.IPv4(frag[14:])
	ip.SetFlagsFragmentOffset(header.IPv4FlagMoreFragments, 0)
	ip.SetChecksum(0)
	ip.SetChecksum(^ip.CalculateChecksum())
	if partialChecksum(frag) {
		t.Error("an IPv4 fragment: taken for a partial checksum")
	}
}

// FuzzPartialChecksum feeds arbitrary frames: no panic, and a frame
// judged partial is IPv4 or IPv6.
func FuzzPartialChecksum(f *testing.F) {
	f.Add(eth(0x0800, mplstest.IPv4TCP(mplstest.TCP{Src: netip.MustParseAddrPort("10.0.0.1:1"), Dst: netip.MustParseAddrPort("10.0.0.2:2"), Payload: []byte("x")})))
	f.Add(eth(0x86dd, mplstest.IPv6TCP(mplstest.TCP{Src: netip.MustParseAddrPort("[fd00::1]:1"), Dst: netip.MustParseAddrPort("[fd00::2]:2")})))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		if partialChecksum(frame) {
			if et := binary.BigEndian.Uint16(frame[12:]); et != 0x0800 && et != 0x86dd {
				t.Errorf("ethertype %#x judged partial", et)
			}
		}
	})
}
