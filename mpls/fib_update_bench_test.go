package mpls_test

import "testing"

// BenchmarkFIBUpdate measures one BGP-sized batch (100 routes replaced,
// each with a label of its own, as a labeled-unicast feed binds them)
// against a FIB of a million routes with per-prefix labels, each batch
// into the table the last one made: the cost of Update per batch, the
// delta's and, amortised, its folds into a new base.
func BenchmarkFIBUpdate(b *testing.B) {
	routes, f := labeledTable(b, 1_000_000)
	batch := routes[:100]
	var err error
	b.ReportAllocs()
	for b.Loop() {
		if f, err = f.Update(batch, nil); err != nil {
			b.Fatal(err)
		}
	}
}
