package node_test

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
)

// TestMPLSInputDisabled: with net.mpls.conf.in0.input=0 a labelled frame on
// in0 is dropped and counted (mpls_input_disabled), as Linux does, while
// plain IP on in0 still reaches the stack.
func TestMPLSInputDisabled(t *testing.T) {
	l := newLSR(t, lsrConf+"sysctl net.mpls.conf.in0.input=0\n", true)
	inject(l.in, labelled([]uint32{100}, 64, ipv4UDP(t, 64, 100)))
	if f := readFrame(t, l.out); f != nil {
		t.Fatalf("a labelled frame on in0 was forwarded (%d bytes); want it dropped", len(f))
	}
	in := l.n.Stats().Links["in0"]
	if got := in.Drop(mplsendpoint.DropMPLSInputDisabled); got != 1 {
		t.Errorf("in0 mpls_input_disabled = %d, want 1; stats %+v", got, in)
	}
	if sw := l.n.Stats().Switch; sw.Forwarded != 0 || in.ILMHits != 0 {
		t.Errorf("forwarded %d, ILM hits %d; want 0, 0", sw.Forwarded, in.ILMHits)
	}

	// Plain IP is unaffected: an IPv4/UDP frame for in0's address is
	// delivered to the stack.
	eth := &layers.Ethernet{SrcMAC: []byte(macPrev), DstMAC: []byte(macIn), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: netip.MustParseAddr("10.1.0.2").AsSlice(), DstIP: netip.MustParseAddr("10.1.0.1").AsSlice()}
	udp := &layers.UDP{SrcPort: 1234, DstPort: 5678}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, udp, gopacket.Payload(make([]byte, 10))); err != nil {
		t.Fatal(err)
	}
	inject(l.in, buf.Bytes())
	if got := l.n.Stats().Links["in0"].RXDelivered; got != in.RXDelivered+1 {
		t.Errorf("plain IPv4 on in0: delivered %d -> %d, want one more", in.RXDelivered, got)
	}
}
