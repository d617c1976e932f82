package node

import (
	"cmp"
	"errors"
	"slices"
	"strings"

	"github.com/mplsnode/mplsnode/mpls"
)

// ILMEntry is one incoming label route as `mplsnode -f mpls route show`
// prints it.
type ILMEntry struct {
	Label     uint32   `json:"label"`
	Action    string   `json:"action"`
	OutLabels []uint32 `json:"out_labels,omitempty"`
	Via       string   `json:"via,omitempty"`
	Dev       string   `json:"dev,omitempty"`
	// NextHops are the hops of a multipath entry (action "multipath").
	NextHops []ILMHop `json:"nexthops,omitempty"`
	Protocol string   `json:"protocol"`
	// Packets and Bytes count the frames carried under the label in both
	// planes, their bytes from the label stack on (Node.LabelStats);
	// XDPPackets and XDPBytes are the XDP program's share.
	Packets    uint64 `json:"packets"`
	Bytes      uint64 `json:"bytes"`
	XDPPackets uint64 `json:"xdp_packets,omitempty"`
	XDPBytes   uint64 `json:"xdp_bytes,omitempty"`
}

// ILMHop is one next hop of a multipath label route.
type ILMHop struct {
	OutLabels []uint32 `json:"out_labels,omitempty"`
	Via       string   `json:"via"`
	Dev       string   `json:"dev,omitempty"`
	Weight    uint16   `json:"weight"`
}

// String returns e in iproute2's words.
func (e ILMEntry) String() string {
	var b strings.Builder
	b.WriteString(itoa(e.Label))
	writeHop(&b, e.OutLabels, e.Via, e.Dev)
	if e.Dev == "" && e.Action == mpls.ILMPopLocal.String() {
		b.WriteString(" dev lo")
	}
	for _, h := range e.NextHops {
		b.WriteString(" nexthop")
		writeHop(&b, h.OutLabels, h.Via, h.Dev)
		b.WriteString(" weight " + itoa(uint32(h.Weight)))
	}
	b.WriteString(" proto " + e.Protocol)
	return b.String()
}

func writeHop(b *strings.Builder, out []uint32, via, dev string) {
	if len(out) > 0 {
		b.WriteString(" as to ")
		for i, l := range out {
			if i > 0 {
				b.WriteByte('/')
			}
			b.WriteString(itoa(l))
		}
	}
	if via != "" {
		b.WriteString(" via " + via)
	}
	if dev != "" {
		b.WriteString(" dev " + dev)
	}
}

func itoa(v uint32) string {
	var buf [10]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(buf[i:])
		}
	}
}

// LabelRoutes returns the ILM in label order, marking the entries BGP
// bound.
func (n *Node) LabelRoutes() []ILMEntry {
	var fromBGP map[mpls.Label]bool
	if n.bgpTab != nil {
		n.bgpTab.mu.Lock()
		fromBGP = make(map[mpls.Label]bool, len(n.bgpTab.ilm))
		for l := range n.bgpTab.ilm {
			fromBGP[l] = true
		}
		n.bgpTab.mu.Unlock()
	}
	out := []ILMEntry{}
	for _, e := range n.stack.Tables().ILM().Entries() {
		r := ILMEntry{Label: uint32(e.Label), Action: e.Action.String(), Dev: e.Device, Protocol: "static"}
		if fromBGP[e.Label] {
			r.Protocol = "bgp"
		}
		if e.NextHop.IsValid() {
			r.Via = e.NextHop.String()
		}
		for _, l := range e.OutLabels {
			r.OutLabels = append(r.OutLabels, uint32(l))
		}
		for _, h := range e.NextHops {
			hop := ILMHop{Via: h.Via.String(), Dev: h.Device, Weight: max(h.Weight, 1)}
			for _, l := range h.Labels {
				hop.OutLabels = append(hop.OutLabels, uint32(l))
			}
			r.NextHops = append(r.NextHops, hop)
		}
		out = append(out, r)
	}
	sortByLabel(out)
	n.withLabelStats(out)
	return out
}

func sortByLabel(es []ILMEntry) {
	slices.SortFunc(es, func(a, b ILMEntry) int { return cmp.Compare(a.Label, b.Label) })
}

// errNoBGP answers bgp commands on a node without bgp lines.
var errNoBGP = errors.New("this node runs no BGP (its config has no bgp lines)")

// controlQuery answers the control socket's queries other than
// stats: `bgp summary`, `bgp neighbor`, `bgp routes`, `route show` and
// `mpls route show`. ok is false for an unknown command.
func controlQuery(n *Node, cmd string) (answer any, ok bool, err error) {
	switch cmd {
	case "route show":
		return n.Routes(), true, nil
	case "mpls route show":
		return n.LabelRoutes(), true, nil
	case "bgp summary", "bgp neighbor", "bgp routes":
		sp := n.BGP()
		if sp == nil {
			return nil, true, errNoBGP
		}
		switch cmd {
		case "bgp summary":
			return sp.Summary(), true, nil
		case "bgp neighbor":
			return sp.Neighbors(), true, nil
		default:
			return sp.Routes(), true, nil
		}
	}
	return nil, false, nil
}
