package mpls_test

import (
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

// BenchmarkFIBUpdate measures one BGP-sized batch (100 routes replaced,
// each with a label of its own, as a labeled-unicast feed binds them)
// against a FIB of a million routes with per-prefix labels: the cost of
// Update, which rebuilds the table from the old one, per batch.
func BenchmarkFIBUpdate(b *testing.B) {
	const n = 1_000_000
	via := netip.MustParseAddr("172.16.20.21")
	routes := make([]mpls.Route, n)
	for i := range routes {
		routes[i] = mpls.Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(11 + i>>16), byte(i >> 8), byte(i), 0}), 24),
			NextHops: []mpls.NextHop{{Via: via, Device: "eth0", Labels: []mpls.Label{mpls.Label(16 + i)}}}}
	}
	f, err := mpls.NewFIB(routes)
	if err != nil {
		b.Fatal(err)
	}
	batch := routes[:100]
	b.ReportAllocs()
	for b.Loop() {
		if f, err = f.Update(batch, nil); err != nil {
			b.Fatal(err)
		}
	}
}
