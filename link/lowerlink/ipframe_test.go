package lowerlink_test

import (
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/link/lowerlink"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// frame serializes ls behind an Ethernet header of type et, with lengths
// and checksums computed by gopacket (an independent oracle), and pad
// bytes of Ethernet padding after the packet.
func frame(t *testing.T, et layers.EthernetType, pad int, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: et}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, append([]gopacket.SerializableLayer{eth}, ls...)...); err != nil {
		t.Fatal(err)
	}
	return append(buf.Bytes(), make([]byte, pad)...)
}

func TestParseIPFrame(t *testing.T) {
	ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	udp := &layers.UDP{SrcPort: 9, DstPort: 9}
	if err := udp.SetNetworkLayerForChecksum(ip4); err != nil {
		t.Fatal(err)
	}
	payload := gopacket.Payload("checksum me")
	tagged := frame(t, layers.EthernetTypeDot1Q, 0,
		&layers.Dot1Q{VLANIdentifier: 7, Type: layers.EthernetTypeIPv4}, ip4, udp, payload)

	f, ok := lowerlink.ParseIPFrame(tagged, true)
	if !ok || f.Net != header.IPv4ProtocolNumber || f.IPv4 == nil || f.Fragment ||
		f.Proto != header.UDPProtocolNumber || f.Src != tcpip.AddrFrom4([4]byte{10, 0, 0, 1}) ||
		f.Dst != tcpip.AddrFrom4([4]byte{10, 0, 0, 2}) || len(f.Segment) != header.UDPMinimumSize+len(payload) {
		t.Fatalf("tagged IPv4 UDP, vlan: got %+v ok %v", f, ok)
	}
	sum, ok := f.PseudoHeaderSum()
	if !ok || checksum.Checksum(f.Segment, sum) != 0xffff {
		t.Errorf("tagged IPv4 UDP: pseudo-header sum %#x (ok %v) does not complete gopacket's checksum", sum, ok)
	}

	if f, ok := lowerlink.ParseIPFrame(tagged, false); !ok || f.Net != 0x8100 || f.IPv4 != nil || f.Proto != 0 || f.Segment != nil {
		t.Errorf("tagged frame, no vlan: got %+v ok %v, want only Net 0x8100", f, ok)
	}

	ip4.Flags = layers.IPv4MoreFragments
	frag := frame(t, layers.EthernetTypeIPv4, 0, ip4, udp, payload)
	ip4.Flags = 0
	if f, ok := lowerlink.ParseIPFrame(frag, true); !ok || !f.Fragment || f.IPv4 == nil || f.Proto != 0 || f.Segment != nil {
		t.Errorf("IPv4 fragment: got %+v ok %v, want Fragment with the header only", f, ok)
	}

	plain := frame(t, layers.EthernetTypeIPv4, 0, ip4, udp, payload)
	if _, ok := lowerlink.ParseIPFrame(plain[:header.EthernetMinimumSize+header.IPv4MinimumSize-1], true); ok {
		t.Error("truncated IPv4 header: ok")
	}
	if _, ok := lowerlink.ParseIPFrame(plain[:header.EthernetMinimumSize-1], true); ok {
		t.Error("frame shorter than an Ethernet header: ok")
	}

	ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
		SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
	tcp := &layers.TCP{SrcPort: 1, DstPort: 2, SYN: true, Window: 1000}
	if err := tcp.SetNetworkLayerForChecksum(ip6); err != nil {
		t.Fatal(err)
	}
	padded := frame(t, layers.EthernetTypeIPv6, 10, ip6, tcp)
	f, ok = lowerlink.ParseIPFrame(padded, true)
	if !ok || f.Net != header.IPv6ProtocolNumber || f.IPv4 != nil || f.Proto != header.TCPProtocolNumber ||
		f.Dst != tcpip.AddrFrom16Slice(net.ParseIP("2001:db8::2")) || len(f.Segment) != header.TCPMinimumSize {
		t.Fatalf("padded IPv6 TCP: got %+v ok %v, want the TCP header alone as Segment", f, ok)
	}
	if sum, ok := f.PseudoHeaderSum(); !ok || checksum.Checksum(f.Segment, sum) != 0xffff {
		t.Errorf("IPv6 TCP: pseudo-header sum %#x (ok %v) does not complete gopacket's checksum", sum, ok)
	}

	big := lowerlink.IPFrame{Proto: header.UDPProtocolNumber, Segment: make([]byte, 0x10000)}
	if _, ok := big.PseudoHeaderSum(); ok {
		t.Error("segment longer than 0xffff: PseudoHeaderSum ok")
	}
}
