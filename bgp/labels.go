package bgp

import (
	"errors"
	"net/netip"
	"time"

	"github.com/mplsnode/mplsnode/mpls"
)

// errLabelsExhausted is returned when every label of the range is bound.
var errLabelsExhausted = errors.New("bgp: label range exhausted")

// labelHoldDown is how long a label freed from a prefix stays reserved
// for that prefix: a prefix that comes back within it (its neighbour's
// session restarted, the route flapped) gets the same local label again,
// so the neighbours' bindings stay valid; and no other prefix takes the
// label while upstream routers may still push it for the old one.
const labelHoldDown = 5 * time.Minute

// labelPool hands out the labels of [low, high], bound per prefix. A
// label freed from a prefix is held for that prefix for labelHoldDown;
// after that it is free again. Fresh labels go in increasing order, freed
// ones last-in first-out; a held label is taken for another prefix only
// when no other is left (the oldest hold first).
type labelPool struct {
	low, high mpls.Label
	next      mpls.Label // lowest never-used label
	free      []mpls.Label
	// used counts the labels bound or held: not free to take.
	used int
	// held maps a prefix to the label it had; holds lists them in the
	// order they were made (their expiry order).
	held  map[netip.Prefix]heldLabel
	holds []hold
	// now is the clock (time.Now; tests set their own).
	now func() time.Time
}

type heldLabel struct {
	label mpls.Label
	until time.Time
}

type hold struct {
	prefix netip.Prefix
	heldLabel
}

func newLabelPool(low, high mpls.Label) *labelPool {
	return &labelPool{low: low, high: high, next: low, held: map[netip.Prefix]heldLabel{}, now: time.Now}
}

// getFor binds a label to prefix p: the one it held, if any, else a free
// one.
func (p *labelPool) getFor(pfx netip.Prefix) (mpls.Label, error) {
	now := p.now()
	if h, ok := p.held[pfx]; ok {
		delete(p.held, pfx) // its entry in holds is now stale
		p.expire(now)
		return h.label, nil
	}
	p.expire(now)
	if l, ok := p.take(); ok {
		return l, nil
	}
	// Everything is bound or held: take the oldest hold.
	for len(p.holds) > 0 {
		h := p.holds[0]
		p.holds = p.holds[1:]
		if cur, ok := p.held[h.prefix]; ok && cur == h.heldLabel {
			delete(p.held, h.prefix)
			return h.label, nil
		}
	}
	return 0, errLabelsExhausted
}

// take binds a free or fresh label.
func (p *labelPool) take() (mpls.Label, bool) {
	if n := len(p.free); n > 0 {
		l := p.free[n-1]
		p.free = p.free[:n-1]
		p.used++
		return l, true
	}
	if p.high < p.low || p.next > p.high {
		return 0, false
	}
	l := p.next
	p.next++
	p.used++
	return l, true
}

// release unbinds prefix p's label l and holds it for p.
func (p *labelPool) release(pfx netip.Prefix, l mpls.Label) {
	now := p.now()
	if old, ok := p.held[pfx]; ok && old.label != l {
		p.put(old.label) // a second label for p: the older one goes free
	}
	h := heldLabel{label: l, until: now.Add(labelHoldDown)}
	p.held[pfx] = h
	p.holds = append(p.holds, hold{prefix: pfx, heldLabel: h})
	p.expire(now)
	if len(p.holds) > 2*len(p.held)+64 {
		// Drop the entries of holds taken back early (a flapping prefix
		// leaves one per flap), so that holds stays in step with held.
		live := p.holds[:0]
		for _, h := range p.holds {
			if cur, ok := p.held[h.prefix]; ok && cur == h.heldLabel {
				live = append(live, h)
			}
		}
		clear(p.holds[len(live):])
		p.holds = live
	}
}

// expire frees the labels whose hold has ended.
func (p *labelPool) expire(now time.Time) {
	i := 0
	for ; i < len(p.holds) && !now.Before(p.holds[i].until); i++ {
		h := p.holds[i]
		if cur, ok := p.held[h.prefix]; ok && cur == h.heldLabel {
			delete(p.held, h.prefix)
			p.put(h.label)
		}
	}
	if i > 0 {
		p.holds = append(p.holds[:0], p.holds[i:]...)
	}
}

// put frees a label at once.
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
