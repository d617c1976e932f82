package config

import "strconv"

// Config words of the enumerations, indexed by value ("" for a value
// without a word); String and the parser both read them.
var (
	linkTypeWords    = []string{LinkAFPacket: "afpacket", LinkTAP: "tap", LinkXDP: "xdp", LinkUDP: "udp"}
	linkModes        = []string{LinkModeAuto: "auto", LinkModeMMsg: "mmsg", LinkModeRing: "ring"}
	labelActionNames = []string{LabelPopForward: "pop-forward", LabelSwap: "swap", LabelPopLocal: "pop-local", LabelMultipath: "multipath"}
	xdpModeWords     = []string{XDPDefault: "default", XDPOff: "off", XDPOn: "on", XDPAuto: "auto"}
)

// word returns the word of v in words, or typ(v), such as LinkType(9),
// for a value without one.
func word[T ~uint8](words []string, v T, typ string) string {
	if int(v) < len(words) && words[v] != "" {
		return words[v]
	}
	return typ + "(" + strconv.Itoa(int(v)) + ")"
}

// wordValue returns the value whose word in words is s; false if none is.
func wordValue[T ~uint8](words []string, s string) (T, bool) {
	for i, w := range words {
		if w != "" && w == s {
			return T(i), true
		}
	}
	return 0, false
}
