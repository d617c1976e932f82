// Package neighbor owns next-hop resolution: the node's neighbours keyed
// by link and address (Key), each holding the MAC address the stack's
// neighbour table last answered (read without a lock on the hot path), a
// bounded queue of what waits while the address resolves, the callback the
// neighbour table calls with its answer, and the flush of that queue on
// the answer (each item sent, or dropped with its user's counter when the
// resolution failed). Table.Send is where the decision lives: send now,
// queue, or drop.
//
// The host path's FIB endpoint (link/mplsendpoint) and the label switch
// (forward) each keep a Table of their own items; the XDP mirror reads
// the stack's neighbour table through Known.
//
// It asks gVisor's neighbour table (ARP for IPv4, NDP for IPv6) and keeps
// no timers: the stack's table ages entries and follows changed answers,
// and every Send asks it again (answered at once from its cache), so a
// changed MAC reaches the next frame.
package neighbor

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Limits a Table applies unless its Options say otherwise.
const (
	// DefaultMaxQueued bounds the items waiting for one neighbour's MAC
	// address: a TCP initial window plus slack, as Linux bounds its
	// neighbour queue (unres_qlen_bytes).
	DefaultMaxQueued = 64
	// DefaultMaxEntries bounds the neighbours a table keeps: transit to
	// on-link destinations makes one per destination host, which a scan of
	// a large subnet must not grow without bound.
	DefaultMaxEntries = 4096
)

// Key names a neighbour: its address on a link (the link's device name).
type Key struct {
	Link string
	Addr netip.Addr
}

// Resolver resolves addr to a link address on NIC nic, as gVisor's
// stack.Stack.GetLinkAddress: nil when the answer is known (and onResolve
// was called with it, synchronously), ErrWouldBlock while resolution runs
// (onResolve is called later), another error otherwise.
type Resolver func(nic tcpip.NICID, addr tcpip.Address, proto tcpip.NetworkProtocolNumber, onResolve func(stack.LinkResolutionResult)) tcpip.Error

// StackResolver returns the Resolver of stack ns: its neighbour table.
func StackResolver(ns *stack.Stack) Resolver {
	return func(nic tcpip.NICID, addr tcpip.Address, proto tcpip.NetworkProtocolNumber, onResolve func(stack.LinkResolutionResult)) tcpip.Error {
		return ns.GetLinkAddress(nic, addr, tcpip.Address{}, proto, onResolve)
	}
}

// Reason says why an item was not sent.
type Reason uint8

const (
	// QueueFull: the neighbour was resolving and its queue was full.
	QueueFull Reason = iota
	// Unresolved: the neighbour's address did not resolve.
	Unresolved
	// Closed: the table was closed with the item queued (not a drop to
	// count: the links are gone).
	Closed
)

// String names the reason.
func (r Reason) String() string {
	switch r {
	case QueueFull:
		return "queue_full"
	case Unresolved:
		return "unresolved"
	case Closed:
		return "closed"
	}
	return "unknown"
}

// Result says what Send did with an item.
type Result uint8

const (
	// Sent: the MAC address was known and the item handed to Write.
	Sent Result = iota
	// Queued: the item waits in the neighbour's queue for the answer.
	Queued
	// Dropped: the item was handed to Drop.
	Dropped
)

// Handler is what a table's user does with its items: V is the user's
// state of a neighbour (its link), T one item (a frame or a packet with
// what its write needs).
type Handler[V, T any] struct {
	// Write sends item to mac on e's link. queued says item was waiting in
	// the queue (it is what Keep returned, handed over for good); else it
	// is the item given to Send, in Send's call.
	Write func(e *Entry[V, T], item T, mac tcpip.LinkAddress, queued bool)
	// Drop discards item, counted under why as its user counts drops
	// (Closed: not counted). queued as for Write.
	Drop func(e *Entry[V, T], item T, why Reason, queued bool)
	// Keep returns what the queue holds for an item Send was given while
	// the address resolves: the queue outlives Send's call (a clone of a
	// packet its caller still reads). Nil: the item itself.
	Keep func(item T) T
}

// Options configures a Table.
type Options[V, T any] struct {
	// Resolve asks the neighbour table; required.
	Resolve Resolver
	// Handler sends and drops items; Write and Drop are required.
	Handler Handler[V, T]
	// MaxEntries bounds the neighbours kept (Add returns nil beyond it);
	// 0: DefaultMaxEntries.
	MaxEntries int
	// MaxQueued bounds the items waiting per neighbour (beyond it Send
	// drops them as QueueFull); 0: DefaultMaxQueued.
	MaxQueued int
}

// Table is a set of neighbours with their queues. Lookup and Send take no
// lock once a neighbour resolved; Add copies the map (copy-on-write).
type Table[V, T any] struct {
	resolve    Resolver
	h          Handler[V, T]
	maxEntries int
	maxQueued  int

	mu      sync.Mutex // serialises Add
	entries atomic.Pointer[map[Key]*Entry[V, T]]
}

// New returns an empty table.
func New[V, T any](o Options[V, T]) *Table[V, T] {
	t := &Table[V, T]{resolve: o.Resolve, h: o.Handler, maxEntries: o.MaxEntries, maxQueued: o.MaxQueued}
	if t.maxEntries <= 0 {
		t.maxEntries = DefaultMaxEntries
	}
	if t.maxQueued <= 0 {
		t.maxQueued = DefaultMaxQueued
	}
	if t.h.Keep == nil {
		t.h.Keep = func(item T) T { return item }
	}
	empty := map[Key]*Entry[V, T]{}
	t.entries.Store(&empty)
	return t
}

// Entry is one neighbour: its key, the NIC its link is in the stack, the
// user's state of it, the last MAC address the neighbour table answered
// and the items waiting for the next answer.
type Entry[V, T any] struct {
	// Key names the neighbour.
	Key Key
	// NIC is the stack NIC of Key.Link (where resolution runs).
	NIC tcpip.NICID
	// Value is the user's state of the neighbour (given to Add).
	Value V

	t     *Table[V, T]
	addr  tcpip.Address
	proto tcpip.NetworkProtocolNumber

	mac       atomic.Pointer[tcpip.LinkAddress]
	onResolve func(stack.LinkResolutionResult) // resolved, made once

	mu      sync.Mutex
	queue   []T
	nQueued atomic.Int32 // len(queue), read without mu
}

// Lookup returns the neighbour k, nil if the table has none.
func (t *Table[V, T]) Lookup(k Key) *Entry[V, T] {
	return (*t.entries.Load())[k]
}

// Add returns the neighbour k, creating it with v on link NIC nic if the
// table has none; nil if k's address is not valid or the table holds
// MaxEntries neighbours.
func (t *Table[V, T]) Add(k Key, nic tcpip.NICID, v V) *Entry[V, T] {
	if e := t.Lookup(k); e != nil {
		return e
	}
	if !k.Addr.IsValid() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.entries.Load()
	if e, ok := old[k]; ok {
		return e
	}
	if len(old) >= t.maxEntries {
		return nil
	}
	e := &Entry[V, T]{Key: k, NIC: nic, Value: v, t: t, addr: tcpip.AddrFromSlice(k.Addr.AsSlice()), proto: header.IPv4ProtocolNumber}
	if k.Addr.Is6() {
		e.proto = header.IPv6ProtocolNumber
	}
	e.onResolve = e.resolved
	m := make(map[Key]*Entry[V, T], len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[k] = e
	t.entries.Store(&m)
	return e
}

// Len returns the number of neighbours.
func (t *Table[V, T]) Len() int { return len(*t.entries.Load()) }

// Send asks the neighbour table for e's MAC address (answered at once
// when it is cached) and hands item to Write with it; while the address
// resolves it queues what Keep returns for item, to be written or dropped
// when the answer comes; when the queue is full or resolution failed it
// hands item to Drop (QueueFull, Unresolved). It returns which it did:
// Sent and Dropped, Write or Drop had item within this call; Queued, the
// queue holds Keep(item), which Write or Drop get later, with queued set.
func (t *Table[V, T]) Send(e *Entry[V, T], item T) Result {
	terr := t.resolve(e.NIC, e.addr, e.proto, e.onResolve)
	switch terr.(type) {
	case nil:
		if mac := e.mac.Load(); mac != nil {
			t.h.Write(e, item, *mac, false)
			return Sent
		}
		// A nil error means onResolve ran: a resolver breaking that
		// promise leaves the item unresolved.
	case *tcpip.ErrWouldBlock:
		if e.enqueue(item) {
			return Queued
		}
		t.h.Drop(e, item, QueueFull, false)
		return Dropped
	}
	t.h.Drop(e, item, Unresolved, false)
	return Dropped
}

// enqueue adds Keep(item) to e's queue unless it is full.
func (e *Entry[V, T]) enqueue(item T) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queue) >= e.t.maxQueued {
		return false
	}
	e.queue = append(e.queue, e.t.h.Keep(item))
	e.nQueued.Add(1)
	return true
}

// resolved is the callback the neighbour table calls with its answer: it
// records the MAC address (a changed answer replaces the old one) and
// hands the waiting items to Write with it, or to Drop (Unresolved) when
// resolution failed.
func (e *Entry[V, T]) resolved(r stack.LinkResolutionResult) {
	if r.Err == nil {
		if cur := e.mac.Load(); cur == nil || *cur != r.LinkAddress {
			mac := r.LinkAddress
			e.mac.Store(&mac)
		}
	}
	if e.nQueued.Load() == 0 {
		return
	}
	q := e.take()
	for _, item := range q {
		if r.Err != nil {
			e.t.h.Drop(e, item, Unresolved, true)
		} else {
			e.t.h.Write(e, item, r.LinkAddress, true)
		}
	}
}

// take empties e's queue and returns what it held.
func (e *Entry[V, T]) take() []T {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queue
	e.queue = nil
	e.nQueued.Store(0)
	return q
}

// MAC returns the MAC address the neighbour table last answered for e;
// false before any answer. (It may be stale: Send asks again.)
func (e *Entry[V, T]) MAC() (tcpip.LinkAddress, bool) {
	if mac := e.mac.Load(); mac != nil {
		return *mac, true
	}
	return "", false
}

// Queued returns the number of items waiting for e's answer.
func (e *Entry[V, T]) Queued() int { return int(e.nQueued.Load()) }

// Close drops every queued item (Closed): call it when the links the
// items would leave by are gone. The neighbours stay.
func (t *Table[V, T]) Close() {
	for _, e := range *t.entries.Load() {
		for _, item := range e.take() {
			t.h.Drop(e, item, Closed, true)
		}
	}
}

// Usable reports whether n, an entry of the stack's neighbour table, has a
// MAC address frames may be sent to: known and neither being resolved
// (Incomplete) nor found gone (Unreachable). A Stale entry is usable, as
// in Linux, while its reachability is checked (ConfirmStale).
func Usable(n stack.NeighborEntry) bool {
	return n.LinkAddr != "" && n.State != stack.Unreachable && n.State != stack.Incomplete
}

// ConfirmStale starts the reachability check of n, an entry of the
// neighbour table of ns's NIC nic, if it is stale, as a frame sent to it
// through the stack would (RFC 4861 section 7.3.3: frames keep its MAC
// meanwhile). Frames that bypass the stack (the XDP program's) never start
// it; without it a stale entry would keep its MAC however long the
// neighbour has been gone or has answered from another MAC.
func ConfirmStale(ns *stack.Stack, nic tcpip.NICID, proto tcpip.NetworkProtocolNumber, n stack.NeighborEntry) {
	if n.State == stack.Stale {
		ns.GetLinkAddress(nic, n.Addr, tcpip.Address{}, proto, nil) // Stale -> Delay: never blocks
	}
}

// Known returns addr's MAC address on ns's NIC nic from the stack's
// neighbour table when it is Usable (confirming a stale one:
// ConfirmStale); otherwise it starts the address's resolution, calls
// onResolve (if not nil) with the answer when it comes, and returns
// false. For planes that send without a Table (the XDP mirror).
func Known(ns *stack.Stack, nic tcpip.NICID, addr netip.Addr, onResolve func(stack.LinkResolutionResult)) (tcpip.LinkAddress, bool) {
	if !addr.IsValid() {
		return "", false
	}
	proto := header.IPv4ProtocolNumber
	if addr.Is6() {
		proto = header.IPv6ProtocolNumber
	}
	want := tcpip.AddrFromSlice(addr.AsSlice())
	if nbrs, err := ns.Neighbors(nic, proto); err == nil {
		for _, n := range nbrs {
			if n.Addr == want && Usable(n) {
				ConfirmStale(ns, nic, proto, n)
				return n.LinkAddr, true
			}
		}
	}
	ns.GetLinkAddress(nic, want, tcpip.Address{}, proto, onResolve)
	return "", false
}
