package forward

import (
	"github.com/mplsnode/mplsnode/forward/labelstats"
	"github.com/mplsnode/mplsnode/mpls"
)

// countLabel counts one frame the switch carries out (it leaves for its
// next hop, whole or in fragments) under l, the label whose ILM entry
// decided it; size is its length from the label stack on, as received.
// off is the length of the link header before the stack: 0 is a transit
// IP packet (a GSO packet among them), which has no incoming label and is
// not counted here. Frames dropped are counted by reason instead.
func (ls *Switch) countLabel(off int, l mpls.Label, size int) {
	if off > 0 {
		ls.ctr.labels.Add(l, 1, uint64(max(size, 0)))
	}
}

// LabelStats returns the switch's per-label counters: the labelled frames
// it forwarded, by the label that decided them (package labelstats). The
// link endpoints count the frames popped for the node
// (mplsendpoint.Endpoint.LabelStats).
func (ls *Switch) LabelStats() *labelstats.Table { return &ls.ctr.labels }
