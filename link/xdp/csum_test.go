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

// FuzzPartialChecksum feeds arbitrary frames to the diagnosis (it reads
// every received frame's headers): no panic; a frame judged partial is
// IPv4 or IPv6 TCP or UDP whose checksum field is the one the judgement
// rests on (changing that field alone undoes it; a parser that read the
// wrong offset, or judged by anything but the field, fails here). Seeds
// include the partial form of each kind.
func FuzzPartialChecksum(f *testing.F) {
	a4, b4 := netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:2")
	a6, b6 := netip.MustParseAddrPort("[fd00::1]:1"), netip.MustParseAddrPort("[fd00::2]:2")
	s4, d4 := tcpip.AddrFrom4(a4.Addr().As4()), tcpip.AddrFrom4(b4.Addr().As4())
	s6, d6 := tcpip.AddrFrom16(a6.Addr().As16()), tcpip.AddrFrom16(b6.Addr().As16())
	t4 := eth(0x0800, mplstest.IPv4TCP(mplstest.TCP{Src: a4, Dst: b4, Payload: []byte("x")}))
	t6 := eth(0x86dd, mplstest.IPv6TCP(mplstest.TCP{Src: a6, Dst: b6}))
	u4 := eth(0x0800, mplstest.IPv4UDP(a4, b4, true, []byte("yy")))
	f.Add(t4)
	f.Add(t6)
	f.Add(u4)
	for _, c := range []struct {
		frame    []byte
		l4, off  int
		proto    tcpip.TransportProtocolNumber
		src, dst tcpip.Address
	}{
		{t4, 34, 16, header.TCPProtocolNumber, s4, d4},
		{t6, 54, 16, header.TCPProtocolNumber, s6, d6},
		{u4, 34, 6, header.UDPProtocolNumber, s4, d4},
	} {
		p := bytes.Clone(c.frame)
		partialForm(p, c.l4, c.off, c.proto, c.src, c.dst)
		f.Add(p)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		if !partialChecksum(frame) {
			return
		}
		et := binary.BigEndian.Uint16(frame[12:])
		var l4 int
		var proto uint8
		switch et {
		case 0x0800:
			ip := header.IPv4(frame[14:])
			l4, proto = 14+int(ip.HeaderLength()), ip.Protocol()
		case 0x86dd:
			l4, proto = 14+header.IPv6MinimumSize, header.IPv6(frame[14:]).NextHeader()
		default:
			t.Fatalf("ethertype %#x judged partial", et)
		}
		off := 16
		switch tcpip.TransportProtocolNumber(proto) {
		case header.TCPProtocolNumber:
		case header.UDPProtocolNumber:
			off = 6
		default:
			t.Fatalf("protocol %d judged partial", proto)
		}
		g := bytes.Clone(frame)
		g[l4+off] ^= 0x01
		g[l4+off+1] ^= 0x01
		if partialChecksum(g) {
			t.Errorf("still judged partial with the checksum field at %d changed", l4+off)
		}
	})
}
