package forward_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/ip4defrag"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/forward"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// ipv4Big returns an IPv4/UDP packet 10.1.0.2 -> 10.9.9.9 of total length
// size, with DF as given and the IP options opts (a multiple of 4 bytes),
// serialized by gopacket.
func ipv4Big(t *testing.T, size int, df bool, opts []layers.IPv4Option) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, Id: 0x4242, Options: opts,
		SrcIP: netip.MustParseAddr("10.1.0.2").AsSlice(), DstIP: netip.MustParseAddr("10.9.9.9").AsSlice()}
	if df {
		ip.Flags = layers.IPv4DontFragment
	}
	optLen := 0
	for _, o := range opts {
		optLen += int(o.OptionLength)
	}
	udp := &layers.UDP{SrcPort: 1234, DstPort: 5678}
	udp.SetNetworkLayerForChecksum(ip)
	payload := make([]byte, size-20-optLen-8)
	for i := range payload {
		payload[i] = byte(i)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		ip, udp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	if len(buf.Bytes()) != size {
		t.Fatalf("built %d bytes, want %d", len(buf.Bytes()), size)
	}
	return buf.Bytes()
}

// TestLabelSwitchFragments swaps label 101 for 300/301 (4 bytes more) on
// IPv4 packets without DF that filled the ingress link: each is split into
// fragments that fit out0's 1500-byte MTU with both labels, and gopacket's
// defragmenter (not ours) rebuilds the original packet from them. Options
// without the copied flag stay in the first fragment only.
func TestLabelSwitchFragments(t *testing.T) {
	tests := []struct {
		name       string
		opts       []layers.IPv4Option
		wantLaterL int // IHL*4 of the later fragments
	}{
		{"no options", nil, 20},
		{"copied and uncopied options", []layers.IPv4Option{
			{OptionType: 0x83, OptionLength: 7, OptionData: []byte{4, 10, 0, 0, 1}}, // loose source route: copied
			{OptionType: 0x07, OptionLength: 7, OptionData: []byte{4, 0, 0, 0, 0}},  // record route: not copied
			{OptionType: 0x01, OptionLength: 1},                                     // no-op
			{OptionType: 0x00, OptionLength: 1},                                     // end of list
		}, 28},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLSR(t, lsrV4, true)
			orig := ipv4Big(t, 1496, false, tc.opts) // 1496 + one label = the ingress MTU
			inject(l.in, labelled([]uint32{101}, 64, orig))
			d := ip4defrag.NewIPv4Defragmenter()
			var whole *layers.IPv4
			for i := 0; whole == nil; i++ {
				f := readFrame(t, l.out)
				if f == nil {
					t.Fatalf("fragment %d missing; stats %+v", i, l.sw.Stats())
				}
				if len(f) > 14+1500 {
					t.Errorf("fragment %d: frame of %d bytes exceeds the 1500-byte link MTU", i, len(f))
				}
				p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
				var labels []uint32
				for _, ly := range p.Layers() {
					if m, ok := ly.(*layers.MPLS); ok {
						labels = append(labels, m.Label)
					}
				}
				if len(labels) != 2 || labels[0] != 300 || labels[1] != 301 {
					t.Errorf("fragment %d: labels %v, want [300 301]", i, labels)
				}
				ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
				if !ok {
					t.Fatalf("fragment %d: no IPv4: %v", i, p)
				}
				if ipChecksum(ip.Contents) != 0xffff {
					t.Errorf("fragment %d: bad IPv4 header checksum", i)
				}
				if i > 0 && int(ip.IHL)*4 != tc.wantLaterL {
					t.Errorf("fragment %d: header of %d bytes, want %d (copied options only)", i, ip.IHL*4, tc.wantLaterL)
				}
				if whole, err := d.DefragIPv4(ip); err != nil {
					t.Fatalf("defragment: %v", err)
				} else if whole != nil {
					// gopacket rebuilds the header from a fragment's
					// (its length counts the last fragment's header);
					// compare the data and the identification.
					origHL := int(orig[0]&0xf) * 4
					if !bytes.Equal(whole.Payload, orig[origHL:]) || whole.Id != 0x4242 {
						t.Fatalf("reassembled %d data bytes (id %#x); want the original's %d", len(whole.Payload), whole.Id, len(orig)-origHL)
					}
					break
				}
				if i > 4 {
					t.Fatal("more than 5 fragments for a 1496-byte packet")
				}
			}
			st := l.sw.Stats()
			if st.Fragmented != 1 || st.Swapped != 1 || st.Drop(forward.DropMTUExceeded) != 0 {
				t.Errorf("fragmented %d swapped %d mtu_exceeded %d; want 1 1 0", st.Fragmented, st.Swapped, st.Drop(forward.DropMTUExceeded))
			}
		})
	}
}

// TestLabelSwitchFragmentationNeeded sends a DF packet that does not fit
// once the swap pushes a second label: it is dropped and the sender gets an
// ICMP fragmentation needed with the path's IP MTU (1500 less 8 bytes of
// labels) and the received label stack (RFC 4950).
func TestLabelSwitchFragmentationNeeded(t *testing.T) {
	l := newLSR(t, lsrV4, true)
	orig := ipv4Big(t, 1496, true, nil)
	inject(l.in, labelled([]uint32{101}, 64, orig))
	p := l.icmpBack(t)
	ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ok || ip.DstIP.String() != "10.1.0.2" || ip.SrcIP.String() != "10.1.0.1" {
		t.Fatalf("want IPv4 10.1.0.1 -> 10.1.0.2: %v", p)
	}
	icmp, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if !ok || icmp.TypeCode != layers.CreateICMPv4TypeCode(3, 4) {
		t.Fatalf("want ICMP destination unreachable, fragmentation needed: %v", p)
	}
	msg := ip.Payload
	if ipChecksum(msg) != 0xffff {
		t.Error("ICMP checksum does not verify")
	}
	if mtu := binary.BigEndian.Uint16(msg[6:]); mtu != 1492 {
		t.Errorf("next-hop MTU %d, want 1492", mtu)
	}
	if msg[5] != 32 || !bytes.Equal(msg[8:8+128], orig[:128]) {
		t.Errorf("RFC 4884 length %d words (want 32) or original datagram not quoted", msg[5])
	}
	obj := msg[8+128+4:]
	if len(obj) != 8 || obj[2] != 1 || obj[3] != 1 || binary.BigEndian.Uint32(obj[4:]) != 101<<12|1<<8|64 {
		t.Errorf("label stack object %x, want class 1 c-type 1 with label 101 S=1 TTL 64", obj)
	}
	st := l.sw.Stats()
	if st.Drop(forward.DropMTUExceeded) != 1 || st.ICMPSent != 1 || st.Fragmented != 0 {
		t.Errorf("mtu_exceeded %d icmp %d fragmented %d; want 1 1 0", st.Drop(forward.DropMTUExceeded), st.ICMPSent, st.Fragmented)
	}

	// An ICMP error that does not fit is dropped without an answer
	// (RFC 1812 §4.3.2.7: no ICMP error about an ICMP error).
	icmpErr := append([]byte(nil), orig...)
	icmpErr[9] = 1                  // protocol ICMP
	icmpErr[20], icmpErr[21] = 3, 4 // destination unreachable
	binary.BigEndian.PutUint16(icmpErr[10:], 0)
	binary.BigEndian.PutUint16(icmpErr[10:], ^ipChecksum(icmpErr[:20]))
	inject(l.in, labelled([]uint32{101}, 64, icmpErr))
	if f := readFrame(t, l.in); f != nil {
		t.Errorf("an ICMP error was answered with %d bytes", len(f))
	}
	st = l.sw.Stats()
	if st.Drop(forward.DropMTUExceeded) != 2 || st.ICMPSent != 1 {
		t.Errorf("after the ICMP error: mtu_exceeded %d icmp %d; want 2 1", st.Drop(forward.DropMTUExceeded), st.ICMPSent)
	}
}

// TestLabelSwitchPacketTooBig is TestLabelSwitchFragmentationNeeded for
// IPv6, which never fragments in transit: a Packet Too Big with MTU 1492
// goes back to the sender, quoting as much of the packet as fits in 1280.
func TestLabelSwitchPacketTooBig(t *testing.T) {
	l := newLSR(t, lsrV6, false)
	src := netip.MustParseAddr("2001:db8:1::2")
	l.neighbor(t, "in0", src, macPrev)
	l.neighbor(t, "out0", netip.MustParseAddr("2001:db8:2::2"), macNext)

	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
		SrcIP: src.AsSlice(), DstIP: netip.MustParseAddr("2001:db8:9::9").AsSlice()}
	udp := &layers.UDP{SrcPort: 1234, DstPort: 5678}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		ip, udp, gopacket.Payload(make([]byte, 1496-40-8))); err != nil {
		t.Fatal(err)
	}
	orig := buf.Bytes()
	inject(l.in, labelled([]uint32{103}, 64, orig))
	p := l.icmpBack(t)
	ip6, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	if !ok || ip6.DstIP.String() != "2001:db8:1::2" || ip6.SrcIP.String() != "2001:db8:1::1" {
		t.Fatalf("want IPv6 2001:db8:1::1 -> 2001:db8:1::2: %v", p)
	}
	msg := ip6.Payload
	if msg[0] != 2 || msg[1] != 0 {
		t.Fatalf("type %d code %d, want 2 0 (Packet Too Big)", msg[0], msg[1])
	}
	if mtu := binary.BigEndian.Uint32(msg[4:]); mtu != 1492 {
		t.Errorf("MTU %d, want 1492", mtu)
	}
	if len(ip6.Contents)+len(msg) != 1280 || !bytes.Equal(msg[8:], orig[:len(msg)-8]) {
		t.Errorf("packet of %d bytes quoting %d; want 1280 bytes quoting the start of the original", len(ip6.Contents)+len(msg), len(msg)-8)
	}
	sum := header.PseudoHeaderChecksum(header.ICMPv6ProtocolNumber, tcpip.AddrFromSlice(ip6.SrcIP), tcpip.AddrFromSlice(ip6.DstIP), uint16(len(msg)))
	if checksum.Checksum(msg, sum) != 0xffff {
		t.Error("ICMPv6 checksum does not verify")
	}
	st := l.sw.Stats()
	if st.Drop(forward.DropMTUExceeded) != 1 || st.ICMPSent != 1 {
		t.Errorf("mtu_exceeded %d icmp %d; want 1 1", st.Drop(forward.DropMTUExceeded), st.ICMPSent)
	}
}
