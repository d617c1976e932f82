package forward_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip"
)

var (
	hop3    = netip.MustParseAddr("10.2.0.3")
	macHop3 = tcpip.LinkAddress("\x02\x00\x00\x00\x02\x03") // 10.2.0.3
	// lsrECMP: label 110 spreads 1:1 over a swap to 200 via 10.2.0.2 and
	// a swap to 300 via 10.2.0.3; label 111 spreads 1:3 over a pop via
	// 10.2.0.2 and a swap to 400 via 10.2.0.3 (both hops on out0, told
	// apart by the neighbour's MAC).
	lsrECMP = lsrSpec{
		addrs: lsrV4.addrs,
		ilm: []mpls.ILMEntry{
			{Label: 110, Action: mpls.ILMMultipath, NextHops: []mpls.NextHop{
				{Via: hop2, Device: "out0", Labels: []mpls.Label{200}},
				{Via: hop3, Device: "out0", Labels: []mpls.Label{300}},
			}},
			{Label: 111, Action: mpls.ILMMultipath, NextHops: []mpls.NextHop{
				{Via: hop2, Device: "out0", Weight: 1},
				{Via: hop3, Device: "out0", Labels: []mpls.Label{400}, Weight: 3},
			}},
		},
	}
)

// udpFlow is an IPv4 UDP packet of the flow 10.1.0.2:sport -> 10.9.9.9:5678.
func udpFlow(sport uint16) []byte {
	return mplstest.UDP{Src: netip.AddrPortFrom(netip.MustParseAddr("10.1.0.2"), sport),
		Dst: netip.MustParseAddrPort("10.9.9.9:5678"), TTL: 64, Payload: make([]byte, 32)}.IPv4()
}

// sendHop injects frame and returns which hop the switch sent it to ("2"
// for 10.2.0.2, "3" for 10.2.0.3) and the labels it left with.
func sendHop(t *testing.T, l *lsr, frame []byte) (string, []uint32) {
	t.Helper()
	inject(l.in, frame)
	f := readFrame(t, l.out)
	if f == nil {
		t.Fatalf("no frame on out0; stats %+v", l.sw.Stats())
	}
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	var labels []uint32
	for _, ly := range p.Layers() {
		if m, ok := ly.(*layers.MPLS); ok {
			labels = append(labels, m.Label)
		}
	}
	if _, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); !ok {
		t.Fatalf("no UDP in the frame sent: %v", p)
	}
	switch string(eth.DstMAC) {
	case string(macNext):
		return "2", labels
	case string(macHop3):
		return "3", labels
	}
	t.Fatalf("frame to unknown MAC %x", eth.DstMAC)
	return "", nil
}

// TestLabelSwitchMultipath sends 64 UDP flows (inner source ports 1000 to
// 1063) three times each through a 1:1 and a 1:3 multipath label route:
// every frame of a flow leaves by the same hop with that hop's labels, and
// the flows spread within 10 points of the weights (seed fixed, so the
// outcome is fixed). With an entropy label (ELI 7, EL) under the route's
// label the entropy label alone picks the hop: one EL keeps all 64 inner
// flows on one hop, 64 ELs over one inner flow spread over both.
//
// Planted bugs, each seen failing: hashing without the payload (the inner
// ports) puts every flow of a route on one hop; Group.Select ignoring the
// weights (h % len) makes the 1:3 route about 1:1; hashing only the
// matched label (the entropy label ignored) spreads one EL's flows over
// both hops.
func TestLabelSwitchMultipath(t *testing.T) {
	l := newLSR(t, lsrECMP, true)
	l.neighbor(t, "out0", hop3, macHop3)
	l.sw.SetMultipathSeed(0x5eed)
	want := map[string][]uint32{"110/2": {200}, "110/3": {300}, "111/2": nil, "111/3": {400}}
	const flows = 64
	for _, tc := range []struct {
		label uint32
		share float64 // of hop 10.2.0.2
	}{{110, 0.5}, {111, 0.25}} {
		t.Run(fmt.Sprint(tc.label), func(t *testing.T) {
			n := 0
			for i := range flows {
				ip := udpFlow(uint16(1000 + i))
				var first string
				for ttl := uint8(60); ttl < 63; ttl++ {
					hop, labels := sendHop(t, l, labelled([]uint32{tc.label}, ttl, ip))
					if first == "" {
						first = hop
					} else if hop != first {
						t.Fatalf("flow %d: frame left by 10.2.0.%s, an earlier one by 10.2.0.%s", i, hop, first)
					}
					if w := want[fmt.Sprintf("%d/%s", tc.label, hop)]; fmt.Sprint(labels) != fmt.Sprint(w) {
						t.Fatalf("flow %d via 10.2.0.%s left with labels %v, want %v", i, hop, labels, w)
					}
				}
				if first == "2" {
					n++
				}
			}
			if share := float64(n) / flows; share < tc.share-0.1 || share > tc.share+0.1 {
				t.Errorf("hop 10.2.0.2 took %d of %d flows (%.0f%%), want %.0f%% +- 10", n, flows, 100*share, 100*tc.share)
			}
		})
	}
	t.Run("entropy label", func(t *testing.T) {
		const el = 12345
		var first string
		for i := range flows {
			hop, labels := sendHop(t, l, labelled([]uint32{110, uint32(mpls.LabelEntropyIndicator), el}, 64, udpFlow(uint16(1000+i))))
			if first == "" {
				first = hop
			} else if hop != first {
				t.Fatalf("flow %d under EL %d left by 10.2.0.%s, flow 0 by 10.2.0.%s: the entropy label must decide", i, el, hop, first)
			}
			if len(labels) != 3 || labels[1] != 7 || labels[2] != el {
				t.Fatalf("flow %d left with labels %v, want the ELI and EL kept under the swapped label", i, labels)
			}
		}
		seen := map[string]int{}
		ip := udpFlow(1000)
		for i := range flows {
			hop, _ := sendHop(t, l, labelled([]uint32{110, 7, uint32(el + 1 + i)}, 64, ip))
			seen[hop]++
		}
		if seen["2"] == 0 || seen["3"] == 0 {
			t.Errorf("%d entropy labels over one inner flow took hops %v, want both", flows, seen)
		}
	})
}
