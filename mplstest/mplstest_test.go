package mplstest_test

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

var (
	dstMAC = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0b")
	srcMAC = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a")
)

// TestFrameDecodes checks Frame.Bytes and the packet builders against
// gopacket's decoders, checksums included.
func TestFrameDecodes(t *testing.T) {
	v4 := mplstest.TCP{
		Src: netip.MustParseAddrPort("10.0.0.1:1000"), Dst: netip.MustParseAddrPort("10.0.0.2:2000"),
		Seq: 7, Flags: header.TCPFlagAck | header.TCPFlagPsh, TTL: 9, DF: true, ID: 5,
		Options: []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, Payload: []byte("hello"),
	}
	v6 := v4
	v6.Src, v6.Dst = netip.MustParseAddrPort("[fd00::a]:1000"), netip.MustParseAddrPort("[fd00::b]:2000")
	cases := []struct {
		name    string
		frame   mplstest.Frame
		labels  []uint32
		network gopacket.LayerType
	}{
		{"IPv4 1 label", mplstest.Frame{Dst: dstMAC, Src: srcMAC, Labels: mplstest.Stack(9, 100), Payload: mplstest.IPv4TCP(v4)}, []uint32{100}, layers.LayerTypeIPv4},
		{"IPv6 3 labels", mplstest.Frame{Dst: dstMAC, Src: srcMAC, Labels: mplstest.Stack(9, 100, 101, 102), Payload: mplstest.IPv6TCP(v6)}, []uint32{100, 101, 102}, layers.LayerTypeIPv6},
		{"IPv4 plain", mplstest.Frame{Dst: dstMAC, Src: srcMAC, Payload: mplstest.IPv4TCP(v4)}, nil, layers.LayerTypeIPv4},
		{"IPv6 plain", mplstest.Frame{Dst: dstMAC, Src: srcMAC, Payload: mplstest.IPv6TCP(v6)}, nil, layers.LayerTypeIPv6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.frame.Bytes()
			pk := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
			if el := pk.ErrorLayer(); el != nil {
				t.Fatalf("gopacket: %v", el.Error())
			}
			var got []uint32
			for i, l := range pk.Layers() {
				if m, ok := l.(*layers.MPLS); ok {
					got = append(got, m.Label)
					if m.TTL != 9 || m.StackBottom != (i == len(tc.labels)) {
						t.Errorf("got label %d TTL %d S %v, want TTL 9 S %v", m.Label, m.TTL, m.StackBottom, i == len(tc.labels))
					}
				}
			}
			if len(got) != len(tc.labels) {
				t.Fatalf("got labels %v, want %v", got, tc.labels)
			}
			for i := range got {
				if got[i] != tc.labels[i] {
					t.Errorf("got label[%d] %d, want %d", i, got[i], tc.labels[i])
				}
			}
			if pk.NetworkLayer() == nil || pk.NetworkLayer().LayerType() != tc.network {
				t.Fatalf("got network layer %v, want %v", pk.NetworkLayer(), tc.network)
			}
			tcp, _ := pk.Layer(layers.LayerTypeTCP).(*layers.TCP)
			if tcp == nil || string(tcp.Payload) != "hello" || tcp.Seq != 7 {
				t.Fatalf("got TCP %v, want seq 7 payload hello", tcp)
			}
			// Independent oracle: RFC 1071 sum over pseudo-header and segment.
			var pseudo uint32
			seg := append(append([]byte(nil), tcp.Contents...), tcp.Payload...)
			switch ip := pk.NetworkLayer().(type) {
			case *layers.IPv4:
				pseudo = gopacket.ComputeChecksum(ip.SrcIP.To4(), 0) + gopacket.ComputeChecksum(ip.DstIP.To4(), 0)
			case *layers.IPv6:
				pseudo = gopacket.ComputeChecksum(ip.SrcIP, 0) + gopacket.ComputeChecksum(ip.DstIP, 0)
			}
			pseudo += 6 + uint32(len(seg)) // protocol TCP
			if got := gopacket.FoldChecksum(pseudo + gopacket.ComputeChecksum(seg, 0)); got != 0 {
				t.Errorf("got TCP checksum sum complemented %#04x, want 0", got)
			}
		})
	}
}

func TestIPv4UDPChecksums(t *testing.T) {
	b := mplstest.IPv4UDP(netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:2"), true, []byte("abc"))
	ip := header.IPv4(b)
	if !ip.IsChecksumValid() {
		t.Error("got invalid IPv4 checksum, want valid")
	}
	u := ip.Payload()
	pseudo := gopacket.ComputeChecksum(b[12:20], 0) + 17 + uint32(len(u)) // addresses, protocol UDP, length
	if got := gopacket.FoldChecksum(pseudo + gopacket.ComputeChecksum(u, 0)); got != 0 {
		t.Errorf("got UDP checksum sum complemented %#04x, want 0", got)
	}
	if ip.Flags()&header.IPv4FlagDontFragment == 0 {
		t.Error("got DF clear, want set")
	}
}
