package labelstats_test

import (
	"sync"
	"testing"

	"github.com/mplsnode/mplsnode/forward/labelstats"
	"github.com/mplsnode/mplsnode/mpls"
)

// TestTable: counts per label, across chunks and from several goroutines,
// at the ends of the label space; a value that is no label is ignored.
func TestTable(t *testing.T) {
	var tb labelstats.Table
	labels := []mpls.Label{0, 16, 1023, 1024, 100000, mpls.MaxLabel}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				tb.Add(labels[(g+i)%len(labels)], 1, 100)
			}
		}()
	}
	wg.Wait()
	tb.Add(mpls.MaxLabel+1, 1, 1)
	s := tb.AddTo(nil)
	var sum labelstats.Count
	for _, l := range labels {
		c := tb.Load(l)
		if c != s[l] {
			t.Errorf("label %d: Load %+v, AddTo %+v", l, c, s[l])
		}
		sum.Packets += c.Packets
		sum.Bytes += c.Bytes
	}
	if want := (labelstats.Count{Packets: 4000, Bytes: 400000}); sum != want || len(s) != len(labels) {
		t.Errorf("got %d labels summing to %+v, want %d summing to %+v", len(s), sum, len(labels), want)
	}
	if c := tb.Load(17); c != (labelstats.Count{}) {
		t.Errorf("got label 17 = %+v, want nothing", c)
	}
}

// BenchmarkAdd is the per-packet cost in steady state: no allocation, no
// lock.
func BenchmarkAdd(b *testing.B) {
	var tb labelstats.Table
	tb.Add(100, 1, 1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tb.Add(100, 1, 1500)
		}
	})
}
