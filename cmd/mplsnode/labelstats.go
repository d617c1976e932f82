package main

import (
	"fmt"

	"github.com/mplsnode/mplsnode/node"
)

// labelStatsLine is the line `mplsnode -f mpls route show -s` prints under
// the label route e: its packets and bytes, both planes summed, the XDP
// program's share in parentheses when it carried any.
func labelStatsLine(e node.ILMEntry) string {
	s := fmt.Sprintf("    packets %d bytes %d", e.Packets, e.Bytes)
	if e.XDPPackets > 0 {
		s += fmt.Sprintf(" (xdp packets %d bytes %d)", e.XDPPackets, e.XDPBytes)
	}
	return s
}
