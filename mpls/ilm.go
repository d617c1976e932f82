package mpls

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
)

// ILMAction is what an LSR does with a packet whose top label matches an
// ILM entry.
type ILMAction uint8

const (
	// ILMSwap replaces the top label with OutLabels and sends the packet to
	// NextHop (iproute2: `-f mpls route add 100 as 200 via ...`).
	ILMSwap ILMAction = iota
	// ILMPopForward pops the label (the bottom one) and forwards the
	// payload as IP to NextHop (iproute2: `-f mpls route add 100 via ...`).
	ILMPopForward
	// ILMPopContinue pops the label and looks up the next one in the ILM.
	ILMPopContinue
	// ILMPopLocal pops the label and delivers the payload to this node.
	ILMPopLocal
	// ILMMultipath spreads the flows under the label over NextHops (ECMP
	// on a label route, iproute2: `-f mpls route add 100 nexthop as 200
	// via ... nexthop via ...`): each hop swaps the label for its Labels,
	// or, with none, pops it and forwards the payload (as ILMPopForward).
	// The hop of a packet is chosen by Group().Select over LabelStackHash,
	// so a flow keeps one hop.
	ILMMultipath
)

// String returns "swap", "pop-forward", "pop-continue" or "pop-local".
func (a ILMAction) String() string {
	switch a {
	case ILMSwap:
		return "swap"
	case ILMPopForward:
		return "pop-forward"
	case ILMPopContinue:
		return "pop-continue"
	case ILMPopLocal:
		return "pop-local"
	case ILMMultipath:
		return "multipath"
	}
	return "ilmaction(" + strconv.Itoa(int(a)) + ")"
}

// ILMEntry is one incoming label map entry (RFC 3031 ILM: label to NHLFE).
type ILMEntry struct {
	// Label is the incoming top label: 16 to MaxLabel, or one of the
	// explicit nulls 0 and 2 (which only pop actions may use).
	Label Label
	// Action is what to do with the packet.
	Action ILMAction
	// OutLabels replaces Label for ILMSwap, outermost first: 1 to
	// DefaultMaxDepth labels, never implicit null (swapping to implicit null
	// is ILMPopForward). Empty for the pop actions.
	OutLabels []Label
	// NextHop is where ILMSwap and ILMPopForward send the packet; required
	// for them, ignored by the other actions. IPv4-mapped is stored as IPv4.
	NextHop netip.Addr
	// Device names the egress link; "" lets the node choose.
	Device string
	// Payload binds the payload type under this label when it is the bottom
	// one (PayloadNone: infer it, see InferPayload). Must agree with an
	// explicit null label.
	Payload Payload
	// NextHops are the hops of ILMMultipath, 1 to MaxNextHops: each with a
	// Via (required), Device, Weight (1 to 256, 0 means 1) and Labels (the
	// swap's out labels as OutLabels, or none to pop and forward). Empty
	// for the other actions, which use OutLabels, NextHop and Device.
	NextHops []NextHop
	// group is NextHops with their weights summed (NewILM builds it).
	group *Group
}

// Group returns the hops of an ILMMultipath entry of a table built by
// NewILM, nil for the other actions. Pick a packet's hop with
// Group().Select(LabelStackHash(...)).
func (e *ILMEntry) Group() *Group { return e.group }

// denseLabels bounds the labels kept in the ILM's direct-indexed slice: an
// int32 per label up to the highest one present, at most 256 KiB. Higher
// labels go to a map.
const denseLabels = 1 << 16

// ILM is an immutable incoming label map with exact match on the top label.
// Build it with NewILM; replace it wholesale (see Tables). The nil *ILM is
// an empty table. Lookups are safe for concurrent use.
type ILM struct {
	entries []ILMEntry
	dense   []int32         // label -> entry index + 1, 0 = none
	sparse  map[Label]int32 // labels >= denseLabels -> entry index + 1
}

// NewILM validates entries and builds a table from a copy of them. Errors
// are *TableError wrapping what is wrong: a label over 20 bits
// (*LabelRangeError), a reserved incoming label other than the explicit
// nulls or an explicit null not popped (*ReservedLabelError), a duplicate
// label, an invalid action or payload, a swap without OutLabels or with too
// many (*TooDeepError) or with implicit null or out-of-range labels among
// them, OutLabels on a pop action, no NextHop for swap or pop-forward, a
// payload binding contradicting an explicit null; for ILMMultipath, no
// NextHops or more than MaxNextHops, a hop without Via, with a weight over
// 256 or with bad Labels (as for swap), a hop that swaps an explicit null,
// or OutLabels, NextHop or Device set on the entry itself.
func NewILM(entries []ILMEntry) (*ILM, error) {
	t := &ILM{entries: make([]ILMEntry, len(entries))}
	maxDense := -1
	for i, e := range entries {
		if err := checkILMEntry(&e); err != nil {
			return nil, &TableError{Table: "ILM", Index: i, Key: "label " + e.Label.String(), Err: err}
		}
		e.OutLabels = slices.Clone(e.OutLabels)
		e.NextHop = e.NextHop.Unmap()
		e.group = nil
		if e.Action == ILMMultipath {
			e.group = newGroup(e.NextHops)
			e.NextHops = e.group.Hops
		}
		t.entries[i] = e
		if e.Label < denseLabels {
			maxDense = max(maxDense, int(e.Label))
		}
	}
	t.dense = make([]int32, maxDense+1)
	for i, e := range t.entries {
		if _, dup := t.Lookup(e.Label); dup {
			j := slices.IndexFunc(t.entries, func(o ILMEntry) bool { return o.Label == e.Label })
			return nil, &TableError{Table: "ILM", Index: i, Key: "label " + e.Label.String(), Err: fmt.Errorf("duplicate of entry %d", j)}
		}
		if e.Label < denseLabels {
			t.dense[e.Label] = int32(i + 1)
			continue
		}
		if t.sparse == nil {
			t.sparse = make(map[Label]int32)
		}
		t.sparse[e.Label] = int32(i + 1)
	}
	return t, nil
}

func checkILMEntry(e *ILMEntry) error {
	l := e.Label
	explicitNull := l == LabelIPv4ExplicitNull || l == LabelIPv6ExplicitNull
	switch {
	case l > MaxLabel:
		return &LabelRangeError{Label: l}
	case l.IsReserved() && !explicitNull:
		return &ReservedLabelError{Label: l, Reason: "labels 0-15 are never allocated to routes; only the explicit nulls 0 and 2 may have ILM entries"}
	case e.Action > ILMMultipath:
		return fmt.Errorf("invalid action %s", e.Action)
	case e.Payload > PayloadIPv6:
		return fmt.Errorf("invalid payload binding %s", e.Payload)
	case explicitNull && e.Action == ILMSwap:
		return &ReservedLabelError{Label: l, Reason: "an explicit null label can only be popped"}
	case l == LabelIPv4ExplicitNull && e.Payload == PayloadIPv6,
		l == LabelIPv6ExplicitNull && e.Payload == PayloadIPv4:
		return fmt.Errorf("payload binding %s contradicts the explicit null label", e.Payload)
	}
	if e.Action == ILMMultipath {
		return checkILMMultipath(e, explicitNull)
	}
	if len(e.NextHops) != 0 {
		return fmt.Errorf("%s takes no NextHops (several hops are multipath)", e.Action)
	}
	if e.Action != ILMSwap {
		if len(e.OutLabels) != 0 {
			return fmt.Errorf("%s takes no OutLabels (use swap to replace the label)", e.Action)
		}
		if e.Action == ILMPopForward && !e.NextHop.IsValid() {
			return errors.New("pop-forward needs a NextHop")
		}
		return nil
	}
	switch {
	case len(e.OutLabels) == 0:
		return errors.New("swap needs OutLabels (to pop, use pop-forward, pop-continue or pop-local)")
	case len(e.OutLabels) > DefaultMaxDepth:
		return &TooDeepError{Offset: EntryLen * DefaultMaxDepth, Max: DefaultMaxDepth}
	case !e.NextHop.IsValid():
		return errors.New("swap needs a NextHop")
	}
	for j, out := range e.OutLabels {
		if err := checkPushLabel(out, EntryLen*j); err != nil {
			return err
		}
	}
	return nil
}

func checkILMMultipath(e *ILMEntry, explicitNull bool) error {
	switch {
	case len(e.NextHops) == 0:
		return errors.New("multipath needs NextHops")
	case len(e.NextHops) > MaxNextHops:
		return fmt.Errorf("%d next hops; at most %d", len(e.NextHops), MaxNextHops)
	case len(e.OutLabels) != 0 || e.NextHop.IsValid() || e.Device != "":
		return errors.New("multipath takes its OutLabels, NextHop and Device per hop (NextHops), not on the entry")
	}
	for i := range e.NextHops {
		h := &e.NextHops[i]
		switch {
		case !h.Via.IsValid():
			return fmt.Errorf("next hop %d: no Via (a label route's hop needs a neighbour)", i+1)
		case h.Weight > 256:
			return fmt.Errorf("next hop %d: weight %d; at most 256", i+1, h.Weight)
		case len(h.Labels) > DefaultMaxDepth:
			return &TooDeepError{Offset: EntryLen * DefaultMaxDepth, Max: DefaultMaxDepth}
		case explicitNull && len(h.Labels) != 0:
			return &ReservedLabelError{Label: e.Label, Reason: "an explicit null label can only be popped"}
		}
		for j, out := range h.Labels {
			if err := checkPushLabel(out, EntryLen*j); err != nil {
				return err
			}
		}
	}
	return nil
}

// Lookup returns the entry for incoming label l. The entry belongs to the
// table and must not be modified. Lookup allocates nothing and is safe for
// concurrent use.
func (t *ILM) Lookup(l Label) (*ILMEntry, bool) {
	if t == nil {
		return nil, false
	}
	var i int32
	if uint64(l) < uint64(len(t.dense)) {
		i = t.dense[l]
	} else if t.sparse != nil {
		i = t.sparse[l]
	}
	if i == 0 {
		return nil, false
	}
	return &t.entries[i-1], true
}

// Len returns the number of entries.
func (t *ILM) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Entries returns the entries in the order given to NewILM. The slice is a
// copy; the OutLabels and NextHops slices are shared with the table and
// must not be modified.
func (t *ILM) Entries() []ILMEntry {
	if t == nil {
		return nil
	}
	return slices.Clone(t.entries)
}
