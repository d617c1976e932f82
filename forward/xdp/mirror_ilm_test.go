package xdp

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

// TestXDPILMEntries checks what the XDP plane mirrors of the ILM: a swap
// and a pop-and-forward on an attached link with their next hop's MAC, a
// multipath label as ecmp alone (no egress, no MAC: the program passes it
// up, so userspace's flow hash keeps each flow on one hop), nothing for a
// local pop or a link the program does not run on. Planting "mirror a
// multipath entry's first hop as a swap" (or skipping multipath entries,
// which the program would count as no_ilm_entry) fails it.
func TestXDPILMEntries(t *testing.T) {
	a := netip.MustParseAddr
	ilm, err := mpls.NewILM([]mpls.ILMEntry{
		{Label: 100, Action: mpls.ILMSwap, OutLabels: []mpls.Label{200}, NextHop: a("10.1.0.1"), Device: "e1"},
		{Label: 101, Action: mpls.ILMPopForward, NextHop: a("10.1.0.2"), Device: "e1"},
		{Label: 102, Action: mpls.ILMMultipath, NextHops: []mpls.NextHop{
			{Via: a("10.1.0.1"), Device: "e1", Labels: []mpls.Label{300}},
			{Via: a("10.2.0.1"), Device: "e2", Weight: 3},
		}},
		{Label: 103, Action: mpls.ILMPopLocal},
		{Label: 104, Action: mpls.ILMSwap, OutLabels: []mpls.Label{400}, NextHop: a("10.3.0.1"), Device: "e3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	x := NewMirror(nil, MirrorConfig{Links: map[string]Link{"e1": {Name: "e1", Index: 11}, "e2": {Name: "e2", Index: 12}}})
	mac1 := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	mac := func(dev string, addr netip.Addr) net.HardwareAddr {
		if addr == a("10.1.0.1") {
			return mac1
		}
		return nil
	}
	entries, resolved := x.ILMEntries(ilm.Entries(), mac)
	got := map[mpls.Label]string{}
	for _, e := range entries {
		got[e.Label] = fmt.Sprintf("%v %v %d %s", e.Action, e.OutLabels, e.Egress, e.NextHopMAC)
	}
	want := map[mpls.Label]string{
		100: "swap [200] 11 02:00:00:00:00:01",
		101: "pop-forward [] 11 ",
		102: "multipath [] 0 ",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || resolved != 1 {
		t.Errorf("mirrored %v, %d resolved;\nwant %v, 1 resolved", got, resolved, want)
	}
}
