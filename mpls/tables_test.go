package mpls_test

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/mpls"
)

func TestTablesZeroValue(t *testing.T) {
	var tb mpls.Tables
	if _, ok := tb.FIB().Lookup(netip.MustParseAddr("10.0.0.1")); ok {
		t.Error("zero Tables: FIB lookup matched, want empty")
	}
	if _, ok := tb.ILM().Lookup(100); ok {
		t.Error("zero Tables: ILM lookup matched, want empty")
	}
}

// TestTablesConcurrentSwap has readers look up while a writer publishes new
// tables. Each generation g maps 10.0.0.0/8 to labels g/g and label 100 to
// a swap to g/g: a reader must never see a mix of generations within one
// entry, and generations it sees must never go backwards. Run with -race.
func TestTablesConcurrentSwap(t *testing.T) {
	const generations = 200
	build := func(g int) (*mpls.FIB, *mpls.ILM) {
		l := mpls.Label(16 + g)
		fib, err := mpls.NewFIB([]mpls.Route{
			{Prefix: netip.MustParsePrefix("10.0.0.0/8"), NextHops: []mpls.NextHop{{Labels: []mpls.Label{l, l}}}},
			{Prefix: netip.MustParsePrefix("2001:db8::/32"), NextHops: []mpls.NextHop{{Labels: []mpls.Label{l, l}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ilm, err := mpls.NewILM([]mpls.ILMEntry{{Label: 100, Action: mpls.ILMSwap, OutLabels: []mpls.Label{l, l}, NextHop: nh}})
		if err != nil {
			t.Fatal(err)
		}
		return fib, ilm
	}
	var tb mpls.Tables
	f, m := build(0)
	tb.SetFIB(f)
	tb.SetILM(m)

	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	dst4, dst6 := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("2001:db8::1")
	for range 4 {
		wg.Go(func() {
			lastF, lastI := mpls.Label(0), mpls.Label(0)
			for !done.Load() {
				for _, dst := range []netip.Addr{dst4, dst6} {
					e, ok := tb.FIB().Lookup(dst)
					if !ok {
						errs <- "FIB entry missing"
						return
					}
					if l := e.Group.Hops[0].Labels; l[0] != l[1] || l[0] < lastF {
						errs <- "FIB entry torn or went backwards"
						return
					}
					lastF = e.Group.Hops[0].Labels[0]
				}
				e, ok := tb.ILM().Lookup(100)
				if !ok || e.OutLabels[0] != e.OutLabels[1] || e.OutLabels[0] < lastI {
					errs <- "ILM entry torn or went backwards"
					return
				}
				lastI = e.OutLabels[0]
			}
		})
	}
	for g := 1; g <= generations; g++ {
		f, m := build(g)
		tb.SetFIB(f)
		tb.SetILM(m)
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if e, _ := tb.FIB().Lookup(dst4); e.Group.Hops[0].Labels[0] != 16+generations {
		t.Errorf("final FIB label = %d, want %d", e.Group.Hops[0].Labels[0], 16+generations)
	}
}

// TestTablesSubscribe: every subscriber is woken after each published FIB
// (however it was written), sees that FIB when it loads after the wake-up,
// and many publishes while it is busy coalesce into one pending wake-up
// (a writer never blocks on a subscriber). After the subscription ends it
// is no longer woken. Planted bugs: notifying before the store (the
// subscriber loads the old FIB: fails "saw the old FIB"); one hook only
// (the second subscriber is never woken: fails "not woken").
func TestTablesSubscribe(t *testing.T) {
	var tb mpls.Tables
	tb.SetPublishHook(func(*mpls.FIB) {}) // the stack's hook stays
	a, stopA := tb.Subscribe()
	b, stopB := tb.Subscribe()
	defer stopB()
	route := func(p string) mpls.Route {
		return mpls.Route{Prefix: netip.MustParsePrefix(p), NextHops: []mpls.NextHop{{Via: netip.MustParseAddr("10.0.0.1"), Device: "e0"}}}
	}
	woken := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not woken", what)
		}
	}
	quiet := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
			t.Fatalf("%s: woken with nothing published", what)
		default:
		}
	}
	// A subscriber already waiting (as the XDP plane's loop is) loads the
	// new FIB after its wake-up.
	saw := make(chan int, 1)
	go func() {
		<-a
		saw <- tb.FIB().Len()
	}()
	if err := tb.ReplaceRoutes([]mpls.Route{route("10.1.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-saw:
		if n != 1 {
			t.Fatalf("woken, but saw the old FIB (%d routes)", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replace: waiting subscriber not woken")
	}
	woken(b, "replace")
	// A burst while nobody reads: one pending wake-up each, no block.
	for i := range 100 {
		if err := tb.UpdateRoutes([]mpls.Route{route(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 2, byte(i), 0}), 24).String())}, nil); err != nil {
			t.Fatal(err)
		}
	}
	woken(a, "update burst")
	quiet(a, "after the burst's one wake-up")
	woken(b, "update burst")
	if got := tb.FIB().Len(); got != 101 {
		t.Fatalf("FIB after the burst holds %d routes, want 101", got)
	}
	stopA()
	tb.SetFIB(nil)
	woken(b, "SetFIB")
	quiet(a, "unsubscribed")
}
