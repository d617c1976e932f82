package config

import "testing"

// TestWords checks the config words of the enumerations both ways: each
// word names its value, and a value without a word prints as Go would
// name it.
func TestWords(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{LinkAFPacket.String(), "afpacket"}, {LinkUDP.String(), "udp"}, {LinkType(0).String(), "LinkType(0)"}, {LinkType(9).String(), "LinkType(9)"},
		{LinkModeAuto.String(), "auto"}, {LinkModeRing.String(), "ring"}, {LinkMode(3).String(), "LinkMode(3)"},
		{LabelPopForward.String(), "pop-forward"}, {LabelMultipath.String(), "multipath"}, {LabelAction(0).String(), "LabelAction(0)"},
		{XDPDefault.String(), "default"}, {XDPAuto.String(), "auto"}, {XDPMode(200).String(), "XDPMode(200)"},
	} {
		if c.got != c.want {
			t.Errorf("String() = %q, want %q", c.got, c.want)
		}
	}
	for v := LinkAFPacket; v <= LinkUDP; v++ {
		if got, ok := wordValue[LinkType](linkTypeWords, v.String()); !ok || got != v {
			t.Errorf("wordValue(%q) = %v, %v; want %v", v.String(), got, ok, v)
		}
	}
	if v, ok := wordValue[LinkType](linkTypeWords, ""); ok {
		t.Errorf("wordValue(\"\") = %v, true; want no value", v)
	}
}
