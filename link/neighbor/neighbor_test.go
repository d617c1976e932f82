package neighbor_test

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/link/neighbor"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

const (
	macA = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a")
	macB = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0b")
)

var hopAddr = netip.MustParseAddr("192.0.2.2")

// event is one call of a recording handler.
type event struct {
	item   int
	mac    tcpip.LinkAddress // Write
	why    neighbor.Reason   // Drop
	drop   bool
	queued bool
}

// recorder is a Handler that records what the table does with items
// (ints), and a Resolver whose answers the test sets.
type recorder struct {
	mu     sync.Mutex
	events []event
	kept   int

	// answer is what the resolver does: call onResolve with mac and
	// return nil, or keep onResolve and return ErrWouldBlock, or return
	// err.
	mac     tcpip.LinkAddress
	block   bool
	err     tcpip.Error
	pending func(stack.LinkResolutionResult)
	asked   []tcpip.Address
	protos  []tcpip.NetworkProtocolNumber
}

func (e event) String() string {
	if e.drop {
		return fmt.Sprintf("{item %d dropped %s queued %v}", e.item, e.why, e.queued)
	}
	return fmt.Sprintf("{item %d to %s queued %v}", e.item, e.mac, e.queued)
}

func (r *recorder) resolve(_ tcpip.NICID, addr tcpip.Address, proto tcpip.NetworkProtocolNumber, onResolve func(stack.LinkResolutionResult)) tcpip.Error {
	r.mu.Lock()
	r.asked = append(r.asked, addr)
	r.protos = append(r.protos, proto)
	mac, block, err := r.mac, r.block, r.err
	if block {
		r.pending = onResolve
	}
	r.mu.Unlock()
	switch {
	case err != nil:
		return err
	case block:
		return &tcpip.ErrWouldBlock{}
	}
	onResolve(stack.LinkResolutionResult{LinkAddress: mac})
	return nil
}

func (r *recorder) table(maxEntries, maxQueued int) *neighbor.Table[string, int] {
	return neighbor.New(neighbor.Options[string, int]{
		Resolve: r.resolve,
		Handler: neighbor.Handler[string, int]{
			Write: func(_ *neighbor.Entry[string, int], item int, mac tcpip.LinkAddress, queued bool) {
				r.mu.Lock()
				r.events = append(r.events, event{item: item, mac: mac, queued: queued})
				r.mu.Unlock()
			},
			Drop: func(_ *neighbor.Entry[string, int], item int, why neighbor.Reason, queued bool) {
				r.mu.Lock()
				r.events = append(r.events, event{item: item, why: why, drop: true, queued: queued})
				r.mu.Unlock()
			},
			Keep: func(item int) int {
				r.mu.Lock()
				r.kept++
				r.mu.Unlock()
				return item + 1000
			},
		},
		MaxEntries: maxEntries,
		MaxQueued:  maxQueued,
	})
}

func (r *recorder) take() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// TestSendResolved: a cached answer sends the item at once, to that MAC,
// without queueing (nothing kept); an IPv6 neighbour is asked by NDP's
// protocol number, an IPv4 one by ARP's (IPv4).
func TestSendResolved(t *testing.T) {
	r := &recorder{mac: macA}
	tbl := r.table(0, 0)
	e := tbl.Add(neighbor.Key{Link: "a", Addr: hopAddr}, 1, "link a")
	if got := tbl.Send(e, 7); got != neighbor.Sent {
		t.Fatalf("Send = %d, want Sent", got)
	}
	if ev := r.take(); len(ev) != 1 || ev[0] != (event{item: 7, mac: macA}) {
		t.Fatalf("events %+v, want item 7 written to %s at once", ev, macA)
	}
	if r.kept != 0 {
		t.Errorf("Keep called %d times for a resolved neighbour", r.kept)
	}
	if mac, ok := e.MAC(); !ok || mac != macA {
		t.Errorf("MAC() = %s, %v; want %s", mac, ok, macA)
	}
	if e.Value != "link a" || e.NIC != 1 {
		t.Errorf("entry value %q NIC %d, want link a, 1", e.Value, e.NIC)
	}
	e6 := tbl.Add(neighbor.Key{Link: "a", Addr: netip.MustParseAddr("2001:db8::2")}, 1, "link a")
	tbl.Send(e6, 8)
	if r.protos[0] != 0x0800 || r.protos[1] != 0x86dd {
		t.Errorf("asked with protocols %#x, want IPv4 then IPv6", r.protos)
	}
	if r.asked[1] != tcpip.AddrFromSlice(netip.MustParseAddr("2001:db8::2").AsSlice()) {
		t.Errorf("asked for %s, want 2001:db8::2", r.asked[1])
	}
}

// TestSendQueuesBounded: while the address resolves, MaxQueued items wait
// (what Keep made of them), the next is dropped as queue_full (the item
// itself, not queued), and the answer writes the waiting ones in order to
// the answered MAC (planted bug: a bound off by one fails).
func TestSendQueuesBounded(t *testing.T) {
	const max = 4
	r := &recorder{block: true}
	tbl := r.table(0, max)
	e := tbl.Add(neighbor.Key{Link: "a", Addr: hopAddr}, 1, "")
	for i := range max {
		if got := tbl.Send(e, i); got != neighbor.Queued {
			t.Fatalf("Send %d = %d, want Queued", i, got)
		}
	}
	if got := tbl.Send(e, max); got != neighbor.Dropped {
		t.Fatalf("Send beyond the bound = %d, want Dropped", got)
	}
	if ev := r.take(); len(ev) != 1 || ev[0] != (event{item: max, why: neighbor.QueueFull, drop: true}) {
		t.Fatalf("events %+v, want item %d dropped queue_full, not queued", ev, max)
	}
	if e.Queued() != max || r.kept != max {
		t.Fatalf("%d queued, %d kept; want %d", e.Queued(), r.kept, max)
	}
	r.pending(stack.LinkResolutionResult{LinkAddress: macB})
	ev := r.take()
	if len(ev) != max {
		t.Fatalf("answer flushed %d items (%+v), want %d", len(ev), ev, max)
	}
	for i, x := range ev {
		if x != (event{item: 1000 + i, mac: macB, queued: true}) {
			t.Errorf("flushed %d: %+v, want the kept item %d written to %s", i, x, 1000+i, macB)
		}
	}
	if e.Queued() != 0 {
		t.Errorf("%d still queued after the answer", e.Queued())
	}
	if mac, _ := e.MAC(); mac != macB {
		t.Errorf("MAC() = %s after the answer, want %s", mac, macB)
	}
}

// TestResolutionFails: a failed answer drops every waiting item as
// unresolved; an error from the resolver (or a nil one without an answer)
// drops the item at once.
func TestResolutionFails(t *testing.T) {
	r := &recorder{block: true}
	tbl := r.table(0, 0)
	e := tbl.Add(neighbor.Key{Link: "a", Addr: hopAddr}, 1, "")
	tbl.Send(e, 1)
	tbl.Send(e, 2)
	r.pending(stack.LinkResolutionResult{Err: &tcpip.ErrTimeout{}})
	ev := r.take()
	want := []event{{item: 1001, why: neighbor.Unresolved, drop: true, queued: true}, {item: 1002, why: neighbor.Unresolved, drop: true, queued: true}}
	if len(ev) != 2 || ev[0] != want[0] || ev[1] != want[1] {
		t.Fatalf("events %+v, want %+v", ev, want)
	}
	if _, ok := e.MAC(); ok {
		t.Error("a failed answer recorded a MAC")
	}

	r.block, r.err = false, &tcpip.ErrNetworkUnreachable{}
	if got := tbl.Send(e, 3); got != neighbor.Dropped {
		t.Fatalf("Send with a resolver error = %d, want Dropped", got)
	}
	if ev := r.take(); len(ev) != 1 || ev[0] != (event{item: 3, why: neighbor.Unresolved, drop: true}) {
		t.Fatalf("events %+v, want item 3 dropped unresolved", ev)
	}

	silent := neighbor.New(neighbor.Options[string, int]{
		Resolve: func(tcpip.NICID, tcpip.Address, tcpip.NetworkProtocolNumber, func(stack.LinkResolutionResult)) tcpip.Error {
			return nil // no answer given
		},
		Handler: neighbor.Handler[string, int]{
			Write: func(*neighbor.Entry[string, int], int, tcpip.LinkAddress, bool) { t.Error("written without an answer") },
			Drop:  func(*neighbor.Entry[string, int], int, neighbor.Reason, bool) {},
		},
	})
	if got := silent.Send(silent.Add(neighbor.Key{Link: "a", Addr: hopAddr}, 1, ""), 4); got != neighbor.Dropped {
		t.Errorf("Send without an answer = %d, want Dropped", got)
	}
}

// TestMACChange: a changed answer is followed at once: the next item goes
// to the new MAC (planted bug: keeping the first answer fails).
func TestMACChange(t *testing.T) {
	r := &recorder{mac: macA}
	tbl := r.table(0, 0)
	e := tbl.Add(neighbor.Key{Link: "a", Addr: hopAddr}, 1, "")
	tbl.Send(e, 1)
	r.mac = macB
	tbl.Send(e, 2)
	r.mac = macA
	tbl.Send(e, 3)
	ev := r.take()
	want := []tcpip.LinkAddress{macA, macB, macA}
	for i, x := range ev {
		if x.mac != want[i] {
			t.Errorf("item %d written to %s, want %s", x.item, x.mac, want[i])
		}
	}
	if len(ev) != 3 {
		t.Fatalf("%d items written, want 3", len(ev))
	}
}

// TestAddBounded: Add returns the neighbour it has (with its first value),
// nil for an invalid address or beyond MaxEntries; Lookup finds only what
// was added.
func TestAddBounded(t *testing.T) {
	r := &recorder{}
	tbl := r.table(2, 0)
	k1 := neighbor.Key{Link: "a", Addr: hopAddr}
	e1 := tbl.Add(k1, 1, "first")
	if again := tbl.Add(k1, 2, "second"); again != e1 || again.Value != "first" || again.NIC != 1 {
		t.Fatalf("Add of an existing key returned %p, want %p with its first value and NIC", again, e1)
	}
	if tbl.Add(neighbor.Key{Link: "a"}, 1, "") != nil {
		t.Error("Add of an invalid address returned an entry")
	}
	if tbl.Lookup(neighbor.Key{Link: "b", Addr: hopAddr}) != nil {
		t.Error("Lookup found a key never added (same address, other link)")
	}
	if tbl.Add(neighbor.Key{Link: "b", Addr: hopAddr}, 2, "") == nil {
		t.Fatal("second entry refused under MaxEntries 2")
	}
	if tbl.Add(neighbor.Key{Link: "c", Addr: hopAddr}, 3, "") != nil {
		t.Error("third entry accepted beyond MaxEntries 2")
	}
	if tbl.Len() != 2 || tbl.Lookup(k1) != e1 {
		t.Errorf("Len %d, Lookup(k1) %p; want 2, %p", tbl.Len(), tbl.Lookup(k1), e1)
	}
	if d := neighbor.New(neighbor.Options[string, int]{}); d == nil {
		t.Fatal("New with defaults returned nil")
	}
}

// TestClose: closing drops every waiting item as closed, and leaves the
// neighbours.
func TestClose(t *testing.T) {
	r := &recorder{block: true}
	tbl := r.table(0, 0)
	e := tbl.Add(neighbor.Key{Link: "a", Addr: hopAddr}, 1, "")
	tbl.Send(e, 1)
	tbl.Close()
	if ev := r.take(); len(ev) != 1 || ev[0] != (event{item: 1001, why: neighbor.Closed, drop: true, queued: true}) {
		t.Fatalf("events %+v, want the kept item dropped closed", ev)
	}
	if e.Queued() != 0 || tbl.Len() != 1 {
		t.Errorf("after Close: %d queued, %d entries; want 0, 1", e.Queued(), tbl.Len())
	}
	for _, w := range []neighbor.Reason{neighbor.QueueFull, neighbor.Unresolved, neighbor.Closed, 9} {
		if w.String() == "" {
			t.Errorf("reason %d has no name", w)
		}
	}
}

// TestRace: senders on many goroutines, Adds of new neighbours and
// answers that come and go while they send (run under -race): every item
// is written or dropped exactly once, and none is left behind once a last
// answer flushes the queues.
func TestRace(t *testing.T) {
	var written, dropped atomic.Int64
	var pendingMu sync.Mutex
	var pending []func(stack.LinkResolutionResult)
	var blocking atomic.Bool
	tbl := neighbor.New(neighbor.Options[int, int]{
		Resolve: func(_ tcpip.NICID, _ tcpip.Address, _ tcpip.NetworkProtocolNumber, onResolve func(stack.LinkResolutionResult)) tcpip.Error {
			if blocking.Load() {
				pendingMu.Lock()
				pending = append(pending, onResolve)
				pendingMu.Unlock()
				return &tcpip.ErrWouldBlock{}
			}
			onResolve(stack.LinkResolutionResult{LinkAddress: macA})
			return nil
		},
		Handler: neighbor.Handler[int, int]{
			Write: func(*neighbor.Entry[int, int], int, tcpip.LinkAddress, bool) { written.Add(1) },
			Drop:  func(*neighbor.Entry[int, int], int, neighbor.Reason, bool) { dropped.Add(1) },
		},
		MaxQueued: 8,
	})
	const senders, perSender, hops = 4, 2000, 16
	stop := make(chan struct{})
	var answerer sync.WaitGroup
	answerer.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			blocking.Store(!blocking.Load())
			pendingMu.Lock()
			p := pending
			pending = nil
			pendingMu.Unlock()
			for _, f := range p {
				f(stack.LinkResolutionResult{LinkAddress: macB})
			}
			time.Sleep(50 * time.Microsecond)
		}
	})
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range perSender {
				h := (s + i) % hops
				k := neighbor.Key{Link: "a", Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(h + 1)})}
				e := tbl.Lookup(k)
				if e == nil {
					e = tbl.Add(k, 1, h)
				}
				tbl.Send(e, i)
			}
		})
	}
	wg.Wait()
	close(stop)
	answerer.Wait()
	// The last answers, and one cached answer per neighbour: an item
	// queued after its neighbour's callback ran waits for the next one.
	blocking.Store(false)
	for _, f := range pending {
		f(stack.LinkResolutionResult{LinkAddress: macB})
	}
	var flushed int64
	for h := range hops {
		e := tbl.Lookup(neighbor.Key{Link: "a", Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(h + 1)})})
		before := written.Load()
		tbl.Send(e, -1)
		flushed += written.Load() - before - 1
		if e.Queued() != 0 {
			t.Errorf("neighbour %d: %d left queued", h, e.Queued())
		}
	}
	if got, want := written.Load()+dropped.Load(), int64(senders*perSender+hops); got != want {
		t.Errorf("%d written + %d dropped = %d, want every item once: %d", written.Load(), dropped.Load(), got, want)
	}
	if tbl.Len() != hops {
		t.Errorf("%d neighbours, want %d", tbl.Len(), hops)
	}
	t.Logf("%d written (%d by the final answers), %d dropped", written.Load(), flushed, dropped.Load())
}

// BenchmarkSendResolved measures Send to a neighbour whose answer is
// cached: the per-frame cost of the engine on the forwarding path.
func BenchmarkSendResolved(b *testing.B) {
	var n int
	tbl := neighbor.New(neighbor.Options[string, int]{
		Resolve: func(_ tcpip.NICID, _ tcpip.Address, _ tcpip.NetworkProtocolNumber, onResolve func(stack.LinkResolutionResult)) tcpip.Error {
			onResolve(stack.LinkResolutionResult{LinkAddress: macA})
			return nil
		},
		Handler: neighbor.Handler[string, int]{
			Write: func(*neighbor.Entry[string, int], int, tcpip.LinkAddress, bool) { n++ },
			Drop:  func(*neighbor.Entry[string, int], int, neighbor.Reason, bool) {},
		},
	})
	k := neighbor.Key{Link: "a", Addr: hopAddr}
	tbl.Add(k, 1, "")
	b.ReportAllocs()
	for b.Loop() {
		tbl.Send(tbl.Lookup(k), 1)
	}
	if n == 0 {
		b.Fatal("nothing written")
	}
}
