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
	Protocol  string   `json:"protocol"`
}

// String returns e in iproute2's words.
func (e ILMEntry) String() string {
	var b strings.Builder
	b.WriteString(itoa(e.Label))
	if len(e.OutLabels) > 0 {
		b.WriteString(" as to ")
		for i, l := range e.OutLabels {
			if i > 0 {
				b.WriteByte('/')
			}
			b.WriteString(itoa(l))
		}
	}
	if e.Via != "" {
		b.WriteString(" via " + e.Via)
	}
	if e.Dev != "" {
		b.WriteString(" dev " + e.Dev)
	} else if e.Action == mpls.ILMPopLocal.String() {
		b.WriteString(" dev lo")
	}
	b.WriteString(" proto " + e.Protocol)
	return b.String()
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
	var out []ILMEntry
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
		out = append(out, r)
	}
	sortByLabel(out)
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
