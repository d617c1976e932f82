package mpls_test

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

func TestTablesZeroValue(t *testing.T) {
	var tb mpls.Tables
	if _, ok := tb.FTN().Lookup(netip.MustParseAddr("10.0.0.1")); ok {
		t.Error("zero Tables: FTN lookup matched, want empty")
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
	build := func(g int) (*mpls.FTN, *mpls.ILM) {
		l := mpls.Label(16 + g)
		ftn, err := mpls.NewFTN([]mpls.FTNEntry{
			{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Labels: []mpls.Label{l, l}},
			{Prefix: netip.MustParsePrefix("2001:db8::/32"), Labels: []mpls.Label{l, l}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ilm, err := mpls.NewILM([]mpls.ILMEntry{{Label: 100, Action: mpls.ILMSwap, OutLabels: []mpls.Label{l, l}, NextHop: nh}})
		if err != nil {
			t.Fatal(err)
		}
		return ftn, ilm
	}
	var tb mpls.Tables
	f, m := build(0)
	tb.SetFTN(f)
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
					e, ok := tb.FTN().Lookup(dst)
					if !ok || e.Labels[0] != e.Labels[1] || e.Labels[0] < lastF {
						errs <- "FTN entry torn or went backwards"
						return
					}
					lastF = e.Labels[0]
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
		tb.SetFTN(f)
		tb.SetILM(m)
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if e, _ := tb.FTN().Lookup(dst4); e.Labels[0] != 16+generations {
		t.Errorf("final FTN label = %d, want %d", e.Labels[0], 16+generations)
	}
}
