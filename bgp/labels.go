package bgp

import (
	"errors"

	"github.com/mplsnode/mplsnode/mpls"
)

// errLabelsExhausted is returned when every label of the range is bound.
var errLabelsExhausted = errors.New("bgp: label range exhausted")

// labelPool hands out the labels of [low, high]. Freed labels are reused
// last-in first-out; fresh ones in increasing order.
type labelPool struct {
	low, high mpls.Label
	next      mpls.Label // lowest never-used label
	free      []mpls.Label
	used      int
}

func newLabelPool(low, high mpls.Label) *labelPool {
	return &labelPool{low: low, high: high, next: low}
}

// get binds a label.
func (p *labelPool) get() (mpls.Label, error) {
	if n := len(p.free); n > 0 {
		l := p.free[n-1]
		p.free = p.free[:n-1]
		p.used++
		return l, nil
	}
	if p.high < p.low || p.next > p.high {
		return 0, errLabelsExhausted
	}
	l := p.next
	p.next++
	p.used++
	return l, nil
}

// put frees a label get returned.
func (p *labelPool) put(l mpls.Label) {
	p.free = append(p.free, l)
	p.used--
}

// size is the number of labels in the range.
func (p *labelPool) size() int {
	if p.high < p.low {
		return 0
	}
	return int(p.high-p.low) + 1
}
