package lsrrate

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/link/pcap"
)

// testSpec is a frame like the generator's.
func testSpec(label uint32, size int) frameSpec {
	return frameSpec{
		dst: inMAC, src: genMAC, label: label,
		srcIP: genIP, dstIP: dstIP, srcPort: 10007, dstPort: dstPort, size: size,
	}
}

// TestBuildFrameDecoded decodes built frames with gopacket and checks every
// field the LSR and the counter depend on.
func TestBuildFrameDecoded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		label uint32
		size  int
	}{
		{"mpls/60", inLabel, MinFrameSize},
		{"mpls/64", inLabel, 64},
		{"mpls/1500", inLabel, 1500},
		{"mpls/1514", 1048575, MaxFrameSize},
		{"ipv4/60", 0, MinFrameSize},
		{"ipv4/64", 0, 64},
		{"ipv4/1514", 0, MaxFrameSize},
		{"ipv4/odd", 0, 1001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := buildFrame(testSpec(tc.label, tc.size))
			if err != nil {
				t.Fatal(err)
			}
			if len(f) != tc.size {
				t.Fatalf("got len = %d, want %d", len(f), tc.size)
			}
			p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
			if el := p.ErrorLayer(); el != nil {
				t.Fatalf("gopacket: %v", el.Error())
			}
			eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			if got, want := eth.DstMAC.String(), macString(inMAC); got != want {
				t.Errorf("got dst MAC = %s, want %s", got, want)
			}
			ipOff := ethLen
			if tc.label != 0 {
				ml, ok := p.Layer(layers.LayerTypeMPLS).(*layers.MPLS)
				if !ok {
					t.Fatalf("no MPLS layer in %v", p)
				}
				if ml.Label != tc.label || !ml.StackBottom || ml.TTL != 64 || ml.TrafficClass != 0 {
					t.Errorf("got label %d S %v TTL %d TC %d, want %d true 64 0", ml.Label, ml.StackBottom, ml.TTL, ml.TrafficClass, tc.label)
				}
				ipOff += labelLen
			} else if eth.EthernetType != layers.EthernetTypeIPv4 {
				t.Errorf("got ethertype = %v, want IPv4", eth.EthernetType)
			}
			ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			if !ok {
				t.Fatalf("no IPv4 layer in %v", p)
			}
			if ip.TTL != 64 || ip.Protocol != layers.IPProtocolUDP || ip.Flags != layers.IPv4DontFragment {
				t.Errorf("got TTL %d proto %v flags %v, want 64 UDP DF", ip.TTL, ip.Protocol, ip.Flags)
			}
			if got, want := int(ip.Length), tc.size-ipOff; got != want {
				t.Errorf("got IPv4 total length = %d, want %d", got, want)
			}
			if ip.SrcIP.String() != genIP.String() || ip.DstIP.String() != dstIP.String() {
				t.Errorf("got %v -> %v, want %v -> %v", ip.SrcIP, ip.DstIP, genIP, dstIP)
			}
			udp, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
			if !ok {
				t.Fatalf("no UDP layer in %v", p)
			}
			if udp.SrcPort != 10007 || udp.DstPort != dstPort || int(udp.Length) != tc.size-ipOff-ipv4Len {
				t.Errorf("got UDP %d -> %d len %d", udp.SrcPort, udp.DstPort, udp.Length)
			}
			// Checksums: gopacket recomputes them when serializing the
			// decoded layers; they must equal what we wrote.
			wantIP, wantUDP := ip.Checksum, udp.Checksum
			buf := gopacket.NewSerializeBuffer()
			if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
				t.Fatal(err)
			}
			if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true},
				ip, udp, gopacket.Payload(udp.Payload)); err != nil {
				t.Fatal(err)
			}
			re := gopacket.NewPacket(buf.Bytes(), layers.LayerTypeIPv4, gopacket.Default)
			if got := re.Layer(layers.LayerTypeIPv4).(*layers.IPv4).Checksum; got != wantIP {
				t.Errorf("IPv4 checksum: built %#04x, gopacket computes %#04x", wantIP, got)
			}
			if got := re.Layer(layers.LayerTypeUDP).(*layers.UDP).Checksum; got != wantUDP {
				t.Errorf("UDP checksum: built %#04x, gopacket computes %#04x", wantUDP, got)
			}
		})
	}
}

// TestBuildFrameTshark has tshark, an independent dissector, check the
// label entry and both checksums.
func TestBuildFrameTshark(t *testing.T) {
	var frames [][]byte
	for _, s := range []frameSpec{testSpec(inLabel, 64), testSpec(inLabel, 1500), testSpec(0, 60), testSpec(0, 1514)} {
		f, err := buildFrame(s)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	rows := tsharkRows(t, frames, "mpls.label", "mpls.bottom", "mpls.ttl", "ip.ttl", "ip.checksum.status", "udp.checksum.status", "frame.len")
	want := []string{
		"100\t1\t64\t64\t1\t1\t64",
		"100\t1\t64\t64\t1\t1\t1500",
		"\t\t\t64\t1\t1\t60",
		"\t\t\t64\t1\t1\t1514",
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("tshark frame %d: got %q, want %q (mpls.label mpls.bottom mpls.ttl ip.ttl ip.checksum.status udp.checksum.status frame.len; status 1 = good)", i, rows[i], want[i])
		}
	}
}

// tsharkRows writes frames to a pcap and returns tshark's field rows (one a
// frame, tab-separated), checksum verification on; skips without tshark.
func tsharkRows(t *testing.T, frames [][]byte, fields ...string) []string {
	t.Helper()
	tshark.Need(t)
	rows := tshark.Rows(t, tshark.WritePcap(t, pcap.LinkTypeEthernet, frames), fields...)
	if len(rows) != len(frames) {
		t.Fatalf("tshark: got %d rows %q, want %d", len(rows), rows, len(frames))
	}
	return rows
}

// TestBuildFrameErrors checks that bad specs are refused with the reason.
func TestBuildFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec frameSpec
		want string
	}{
		{"short", testSpec(inLabel, 59), "frame size 59"},
		{"long", testSpec(0, 1515), "frame size 1515"},
		{"label", testSpec(1<<20, 64), "label 1048576"},
		{"ipv6", func() frameSpec { s := testSpec(0, 64); s.dstIP = netip.MustParseAddr("2001:db8::1"); return s }(), "want IPv4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildFrame(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestCheckSample checks the counter's sample check against frames the
// LSR must and must not produce.
func TestCheckSample(t *testing.T) {
	good, err := buildFrame(testSpec(outLabel, 64))
	if err != nil {
		t.Fatal(err)
	}
	good[ethLen+3] = genTTL - 1 // one hop: label TTL 63
	if err := checkSample(good[:sampleLen], outLabel); err != nil {
		t.Errorf("forwarded frame refused: %v", err)
	}
	unswapped, _ := buildFrame(testSpec(inLabel, 64))
	unswapped[ethLen+3] = genTTL - 1
	if err := checkSample(unswapped, outLabel); err == nil {
		t.Error("frame still carrying label 100 accepted")
	}
	if err := checkSample(append([]byte(nil), good...)[:ethLen+3], outLabel); err == nil {
		t.Error("truncated frame accepted")
	}
	noTTL := append([]byte(nil), good...)
	noTTL[ethLen+3] = genTTL
	if err := checkSample(noTTL, outLabel); err == nil {
		t.Error("frame whose label TTL was not decremented accepted")
	}
	ip, _ := buildFrame(testSpec(0, 64))
	if err := checkSample(ip, 0); err == nil {
		t.Error("IPv4 frame with TTL 64 (not forwarded) accepted")
	}
	ip[ethLen+8] = genTTL - 1
	if err := checkSample(ip, 0); err != nil {
		t.Errorf("forwarded IPv4 frame refused: %v", err)
	}
}
