package xdp

import (
	"fmt"

	"github.com/mplsnode/mplsnode/forward/labelstats"
	"github.com/mplsnode/mplsnode/mpls"
)

// LabelStats returns the packets and bytes of the frames the program
// carried (swapped, or popped and forwarded), per incoming label and summed
// over CPUs; the bytes are each frame's from the label stack on, as
// received, as the userspace plane counts them (package labelstats). The
// frames it passed up are the userspace plane's to count. The counts live
// in a map apart from the ILM map, so Sync keeps them; a label unbound and
// bound again counts on.
func (p *Program) LabelStats() (labelstats.Snapshot, error) {
	out := labelstats.Snapshot{}
	var (
		label uint32
		per   []lsrLabelCount
	)
	it := p.objs.LabelStats.Iterate()
	for it.Next(&label, &per) {
		var n labelstats.Count
		for _, c := range per {
			n.Packets += c.Packets
			n.Bytes += c.Bytes
		}
		out.Add(mpls.Label(label), n)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("XDP label counters: %w", err)
	}
	return out, nil
}
