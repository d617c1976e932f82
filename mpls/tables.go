package mpls

import (
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
)

// Tables holds the node's forwarding tables: the FIB (IP routes, plain and
// labelled, with ECMP) and the ILM (incoming labels).
//
// Readers (the packet path: the MPLS endpoint's egress, the forwarding
// plane) Load the current table and look up in it without locks; writers
// build a new immutable table and publish it (copy-on-write). Readers never
// block and always see a whole table, old or new.
//
// Tables is the one API that writes routes and labels: the config load and
// its reload, the control socket and BGP all call ReplaceRoutes,
// UpdateRoutes and SetILM. Writers are serialised; the owner of the links
// (package stack) installs a check that every route must pass (its devices
// exist, its next hops are reachable) and a hook that learns each new FIB;
// any number of others (the XDP plane's mirror) Subscribe to be woken
// after each one.
//
// The zero value holds empty tables and is ready to use; do not copy a
// Tables.
type Tables struct {
	ilm atomic.Pointer[ILM]
	fib atomic.Pointer[FIB]

	mu      sync.Mutex // serialises route writers
	check   func(*Route) error
	publish func(*FIB)
	// subs are the subscribers' channels (capacity 1), woken after each
	// FIB is published.
	subs []chan struct{}
	// compacting says a fold of the FIB's delta is being built (compact).
	compacting bool
	// compactBuilt, when set (a test seam), is called by compact once
	// the new base is built, before it takes the writers' lock.
	compactBuilt func()
}

// ILM returns the current ILM (nil, an empty table, if none was set).
func (t *Tables) ILM() *ILM { return t.ilm.Load() }

// FIB returns the current FIB (nil, an empty table, if none was set).
func (t *Tables) FIB() *FIB { return t.fib.Load() }

// SetILM publishes m as the current ILM.
func (t *Tables) SetILM(m *ILM) { t.ilm.Store(m) }

// SetRouteCheck installs check, which every route given to ReplaceRoutes or
// UpdateRoutes must pass before anything is published; it may fill in
// what the route leaves open (a next hop's Device). nil checks nothing.
func (t *Tables) SetRouteCheck(check func(*Route) error) {
	t.mu.Lock()
	t.check = check
	t.mu.Unlock()
}

// SetPublishHook installs hook, called with each new FIB just before it is
// published, under the writers' lock (the stack keeps the few routes its
// own traffic needs in step with it). nil calls nothing.
func (t *Tables) SetPublishHook(hook func(*FIB)) {
	t.mu.Lock()
	t.publish = hook
	t.mu.Unlock()
}

// Subscribe returns a channel that receives after each FIB published from
// now on (ReplaceRoutes, ReplaceRoutesFunc, UpdateRoutes, SetFIB), and a
// function that ends the subscription. Wake-ups coalesce: the channel
// holds at most one, so a subscriber that reads it and then loads FIB
// sees every change, however many were published meanwhile, and a slow
// subscriber never delays a writer. Lookups are not affected.
func (t *Tables) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	t.mu.Lock()
	t.subs = append(t.subs, ch)
	t.mu.Unlock()
	return ch, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if i := slices.Index(t.subs, ch); i >= 0 {
			t.subs = slices.Delete(t.subs, i, i+1)
		}
	}
}

// ReplaceRoutes replaces every route at once (a config load or reload).
// On error nothing changes; errors are *TableError, Index into routes.
func (t *Tables) ReplaceRoutes(routes []Route) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkAll(routes); err != nil {
		return err
	}
	f, err := NewFIB(routes)
	if err != nil {
		return err
	}
	t.setFIBLocked(f)
	return nil
}

// ReplaceRoutesFunc is ReplaceRoutes for n routes written one at a time
// into r by route (see NewFIBFunc): a million routes from a config file
// need no []Route of their own. Errors are *TableError, Index in [0, n).
func (t *Tables) ReplaceRoutesFunc(n int, route func(i int, r *Route)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := newFIBFunc(n, route, t.check)
	if err != nil {
		return err
	}
	t.setFIBLocked(f)
	return nil
}

// UpdateRoutes removes the routes to the prefixes in del, then adds those
// in add (replacing a route to the same prefix), as one change: readers
// see the table before or after, never between. A change costs about its
// own size (FIB.Update: a delta over the table's base, folded into a new
// base now and then). On error nothing changes; errors are *TableError,
// Index into add.
func (t *Tables) UpdateRoutes(add []Route, del []netip.Prefix) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkAll(add); err != nil {
		return err
	}
	f, err := t.fib.Load().Update(add, del)
	if err != nil {
		return err
	}
	t.setFIBLocked(f)
	if f.compactDue() && !t.compacting {
		t.compacting = true
		go t.compact(f)
	}
	return nil
}

// compact folds old's delta into a new base off the writers' lock, then
// publishes the current FIB's routes over it (rebased: the changes since
// old written into the new base's delta), the same routes in the same
// order. It gives up when the FIB was replaced meanwhile.
func (t *Tables) compact(old *FIB) {
	nb, err := old.compacted()
	if t.compactBuilt != nil {
		t.compactBuilt()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.compacting = false
	if err != nil {
		return
	}
	cur := t.fib.Load()
	if cur != old {
		var ok bool
		if nb, ok = rebased(nb, old, cur); !ok {
			return
		}
	}
	t.setFIBLocked(nb)
}

// SetFIB publishes f as it is, bypassing the route check (tests, and
// writers that built f from routes already checked).
func (t *Tables) SetFIB(f *FIB) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setFIBLocked(f)
}

func (t *Tables) setFIBLocked(f *FIB) {
	if t.publish != nil {
		t.publish(f)
	}
	t.fib.Store(f)
	for _, ch := range t.subs {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

func (t *Tables) checkAll(routes []Route) error {
	if t.check == nil {
		return nil
	}
	for i := range routes {
		if err := t.check(&routes[i]); err != nil {
			return &TableError{Table: "FIB", Index: i, Key: routes[i].Prefix.String(), Err: err}
		}
	}
	return nil
}
