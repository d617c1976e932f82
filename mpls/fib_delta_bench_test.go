package mpls_test

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

// labeledTable returns n /24 routes from 11.0.0.0 on, each with a label
// of its own (a labeled-unicast feed's per-prefix labels), and their FIB.
func labeledTable(b testing.TB, n int) ([]mpls.Route, *mpls.FIB) {
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
	return routes, f
}

// BenchmarkFIBWithdrawOne measures one withdrawal (a BGP withdraw of one
// prefix) from a FIB of a million labelled routes: each op deletes
// another prefix from the same table, so every op is the first change
// of its base.
func BenchmarkFIBWithdrawOne(b *testing.B) {
	routes, f := labeledTable(b, 1_000_000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		nf, err := f.Update(nil, []netip.Prefix{routes[i%len(routes)].Prefix})
		if err != nil || nf.Len() != len(routes)-1 {
			b.Fatalf("Update: %v, %d routes", err, nf.Len())
		}
		i += 7919
	}
}

// BenchmarkFIBLookupDelta measures Lookup in a FIB of a million routes
// as built (base) and after 100 single-route updates (delta100: its
// delta touches 100 of the table's 3,907 /16s), on the same cold addresses
// spread over all the routes (as BenchmarkFIB's IPv4/1M/cold), with
// cpu-ns/op beside ns/op.
func BenchmarkFIBLookupDelta(b *testing.B) {
	routes, base := labeledTable(b, 1_000_000)
	f := base
	var err error
	for i := range 100 {
		r := routes[i*9973]
		r.NextHops = []mpls.NextHop{{Via: netip.MustParseAddr("172.16.20.22"), Device: "eth0"}}
		if f, err = f.Update([]mpls.Route{r}, nil); err != nil {
			b.Fatal(err)
		}
	}
	addrs := make([]netip.Addr, 1<<20)
	for i := range addrs {
		p := routes[(i*104729)%len(routes)].Prefix.Addr().As4()
		p[3] = byte(i)
		addrs[i] = netip.AddrFrom4(p)
	}
	for _, c := range []struct {
		name string
		fib  *mpls.FIB
	}{{"base", base}, {"delta100", f}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			i := 0
			t := threadCPU()
			for b.Loop() {
				if _, ok := c.fib.Lookup(addrs[i&(len(addrs)-1)]); !ok {
					b.Fatal("no route")
				}
				i++
			}
			reportCPU(b, t, i)
		})
	}
}
