package mpls_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strconv"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
)

// naiveLPM is the oracle: a linear scan for the longest prefix holding a.
func naiveRouteLPM(routes []mpls.Route, a netip.Addr) (netip.Prefix, bool) {
	best, ok := netip.Prefix{}, false
	for _, r := range routes {
		if r.Prefix.Contains(a) && (!ok || r.Prefix.Bits() > best.Bits()) {
			best, ok = r.Prefix, true
		}
	}
	return best, ok
}

func hop(via string, labels ...mpls.Label) []mpls.NextHop {
	return []mpls.NextHop{{Via: netip.MustParseAddr(via), Device: "eth0", Labels: labels}}
}

// familyVia is the next hop of a test route to p: 10.0.0.1, or
// 2001:db8::1 for an IPv6 prefix.
func familyVia(p netip.Prefix) string {
	if p.Addr().Is6() {
		return "2001:db8::1"
	}
	return "10.0.0.1"
}

// randomRoutes returns n distinct routes clustered in a few address
// blocks, so that prefixes nest deeply.
func randomRoutes(rng *rand.Rand, n int) []mpls.Route {
	seen := map[netip.Prefix]bool{}
	var out []mpls.Route
	for len(out) < n {
		var p netip.Prefix
		if rng.IntN(2) == 0 {
			var a [4]byte
			binary.BigEndian.PutUint32(a[:], 0x0a000000|rng.Uint32()&0x00ffffff)
			p = netip.PrefixFrom(netip.AddrFrom4(a), rng.IntN(25)+8).Masked()
		} else {
			var a [16]byte
			a[0], a[1], a[2], a[3] = 0x20, 0x01, 0x0d, 0xb8
			binary.BigEndian.PutUint64(a[4:], rng.Uint64())
			p = netip.PrefixFrom(netip.AddrFrom16(a), rng.IntN(100)+28).Masked()
		}
		if rng.IntN(40) == 0 {
			p = netip.PrefixFrom(p.Addr(), 0).Masked()
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, mpls.Route{Prefix: p, NextHops: hop(familyVia(p), mpls.Label(16+len(out)))})
	}
	return out
}

func randomAddr(rng *rand.Rand, routes []mpls.Route) netip.Addr {
	r := routes[rng.IntN(len(routes))].Prefix
	b := r.Addr().AsSlice()
	for i := r.Bits(); i < len(b)*8; i++ {
		if rng.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	if rng.IntN(10) == 0 { // sometimes anywhere at all
		if a.Is4() {
			var x [4]byte
			binary.BigEndian.PutUint32(x[:], rng.Uint32())
			return netip.AddrFrom4(x)
		}
		var x [16]byte
		binary.BigEndian.PutUint64(x[:], rng.Uint64())
		return netip.AddrFrom16(x)
	}
	return a
}

// TestFIBLookupMatchesNaive checks the range/bucket lookup against a
// linear scan (planted bug: dropping the "- 1" in ranges4.lookup's answer
// makes it fail at the first lookup).
func TestFIBLookupMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 10, 300, 3000} {
		routes := randomRoutes(rng, n)
		fib, err := mpls.NewFIB(routes)
		if err != nil {
			t.Fatal(err)
		}
		for range 5000 {
			var a netip.Addr
			if n == 0 {
				a = netip.AddrFrom4([4]byte{10, 1, 2, 3})
			} else {
				a = randomAddr(rng, routes)
			}
			want, wok := naiveRouteLPM(routes, a)
			e, ok := fib.Lookup(a)
			if ok != wok || ok && e.Prefix != want {
				got := netip.Prefix{}
				if ok {
					got = e.Prefix
				}
				t.Fatalf("n=%d: Lookup(%s) = %s, %v; want %s, %v", n, a, got, ok, want, wok)
			}
			if a.Is4() {
				e4, ok4 := fib.Lookup4(a.As4())
				if ok4 != ok || ok && e4 != e {
					t.Fatalf("Lookup4(%s) differs from Lookup", a)
				}
			} else {
				e6, ok6 := fib.Lookup6(a.As16())
				if ok6 != ok || ok && e6 != e {
					t.Fatalf("Lookup6(%s) differs from Lookup", a)
				}
			}
		}
	}
}

func TestFIBUpdate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	routes := randomRoutes(rng, 2000)
	fib, err := mpls.NewFIB(routes[:1500])
	if err != nil {
		t.Fatal(err)
	}
	var del []netip.Prefix
	for _, r := range routes[:500] {
		del = append(del, r.Prefix)
	}
	replaced := routes[600]
	replaced.NextHops = hop("10.9.9.9", 999)
	add := append([]mpls.Route{replaced}, routes[1500:]...)
	next, err := fib.Update(add, del)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]mpls.Route{}, routes[500:600]...), routes[601:]...)
	want = append(want, replaced)
	if next.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", next.Len(), len(want))
	}
	if fib.Len() != 1500 {
		t.Fatalf("old FIB changed: Len = %d", fib.Len())
	}
	for range 5000 {
		a := randomAddr(rng, routes)
		wp, wok := naiveRouteLPM(want, a)
		e, ok := next.Lookup(a)
		if ok != wok || ok && e.Prefix != wp {
			t.Fatalf("after Update, Lookup(%s) = %v, %v; want %s", a, e, ok, wp)
		}
	}
	e, _ := next.Lookup(replaced.Prefix.Addr())
	if e.Prefix == replaced.Prefix && e.Group.Hops[0].Labels[0] != 999 {
		t.Fatalf("replaced route has labels %v, want [999]", e.Group.Hops[0].Labels)
	}
}

func TestFIBErrors(t *testing.T) {
	v4 := netip.MustParsePrefix("10.0.0.0/8")
	v6 := netip.MustParsePrefix("2001:db8::/48")
	for _, tc := range []struct {
		name   string
		routes []mpls.Route
	}{
		{"host bits", []mpls.Route{{Prefix: netip.MustParsePrefix("10.0.0.1/8"), NextHops: hop("10.0.0.1")}}},
		{"duplicate", []mpls.Route{{Prefix: v4, NextHops: hop("10.0.0.1")}, {Prefix: v4, NextHops: hop("10.0.0.2")}}},
		{"no hop", []mpls.Route{{Prefix: v4}}},
		{"implicit null", []mpls.Route{{Prefix: v4, NextHops: hop("10.0.0.1", 3)}}},
		{"unlabelled 6PE", []mpls.Route{{Prefix: v6, NextHops: hop("172.16.20.21")}}},
		{"v6 mtu", []mpls.Route{{Prefix: v6, NextHops: hop("2001:db8::1"), MTU: 1000}}},
		{"weight", []mpls.Route{{Prefix: v4, NextHops: []mpls.NextHop{{Via: netip.MustParseAddr("10.0.0.1"), Weight: 300}}}}},
	} {
		if _, err := mpls.NewFIB(tc.routes); err == nil {
			t.Errorf("%s: NewFIB accepted %v", tc.name, tc.routes)
		}
	}
	// 6PE: an IPv6 prefix over a labelled IPv4 next hop is valid.
	if _, err := mpls.NewFIB([]mpls.Route{{Prefix: v6, NextHops: hop("172.16.20.21", 300)}}); err != nil {
		t.Errorf("6PE route refused: %v", err)
	}
}

// flowPacket returns an IPv4 TCP packet header of flow i.
func flowPacket(i int) []byte {
	b := make([]byte, 40)
	b[0] = 0x45
	b[9] = 6
	copy(b[12:16], []byte{172, 16, 20, 20})
	copy(b[16:20], []byte{10, 10, 10, 10})
	binary.BigEndian.PutUint16(b[20:], uint16(40000+i))
	b[15] = byte(20 + i>>12) // beyond 4096 flows, another source
	binary.BigEndian.PutUint16(b[22:], 12865)
	return b
}

// TestECMPStickyAndSpread: the same flow always takes the same hop, and 64
// flows (TCP, one source port each) spread over two hops within 10% of the
// weights; four hops, whose random spread over 64 flows is wider than
// that, are checked over 4096 flows (planted bug: Select ignoring the
// weights, returning Hops[h%len], gives 32/32 for weights 1:3 and fails).
func TestECMPStickyAndSpread(t *testing.T) {
	for _, tc := range []struct {
		weights []uint16
		flows   int
	}{{[]uint16{1, 1}, 64}, {[]uint16{1, 3}, 64}, {[]uint16{1, 1, 1, 1}, 4096}, {[]uint16{10, 20, 30, 40}, 4096}} {
		weights, flows := tc.weights, tc.flows
		var hops []mpls.NextHop
		for i, w := range weights {
			hops = append(hops, mpls.NextHop{Via: netip.AddrFrom4([4]byte{172, 16, 20, byte(21 + i)}), Weight: w, Labels: []mpls.Label{mpls.Label(100 + i)}})
		}
		fib, err := mpls.NewFIB([]mpls.Route{{Prefix: netip.MustParsePrefix("10.10.10.0/24"), NextHops: hops}})
		if err != nil {
			t.Fatal(err)
		}
		e, _ := fib.Lookup(netip.MustParseAddr("10.10.10.10"))
		counts := make(map[netip.Addr]int)
		for i := range flows {
			pkt := flowPacket(i)
			first := e.Group.Select(mpls.FlowHash(7, pkt))
			for range 10 {
				if h := e.Group.Select(mpls.FlowHash(7, pkt)); h != first {
					t.Fatalf("flow %d moved from %s to %s", i, first.Via, h.Via)
				}
			}
			counts[first.Via]++
		}
		var total int
		for _, w := range weights {
			total += int(w)
		}
		for i, w := range weights {
			want := float64(flows) * float64(w) / float64(total)
			got := float64(counts[hops[i].Via])
			if got < want*0.9 || got > want*1.1 {
				t.Errorf("weights %v: hop %d got %v of %d flows, want %.1f ±10%%", weights, i, got, flows, want)
			}
		}
	}
}

func TestLabelStackHashEntropy(t *testing.T) {
	payload := flowPacket(1)
	a := []mpls.Entry{{Label: 100}, {Label: mpls.LabelEntropyIndicator}, {Label: 5000, S: true}}
	b := []mpls.Entry{{Label: 200}, {Label: mpls.LabelEntropyIndicator}, {Label: 5000, S: true}}
	if mpls.LabelStackHash(1, a, payload) != mpls.LabelStackHash(1, b, flowPacket(2)) {
		t.Error("same entropy label hashed differently")
	}
	c := []mpls.Entry{{Label: 100, S: true}}
	if mpls.LabelStackHash(1, c, flowPacket(1)) == mpls.LabelStackHash(1, c, flowPacket(2)) {
		t.Error("inner 5-tuple ignored without an entropy label")
	}
}

// scaleRoutes returns n routes as the route-scaling target describes them:
// half IPv4 (/24 and /32), half IPv6 (/48 and /64), a quarter labelled.
func scaleRoutes(n int) []mpls.Route {
	out := make([]mpls.Route, 0, n)
	plain4 := hop("172.16.20.21")
	plain6 := hop("2001:db8:ffff::1")
	for i := 0; len(out) < n; i++ {
		p := mplstest.ScalePrefix(i)
		r := mpls.Route{Prefix: p, NextHops: plain4}
		if p.Addr().Is6() {
			r.NextHops = plain6
		}
		if i%4 == 0 || i%4 == 3 && i%8 == 3 { // a quarter labelled
			r.NextHops = hop(r.NextHops[0].Via.String(), mpls.Label(16+i%1000))
		}
		out = append(out, r)
	}
	return out
}

// BenchmarkFIB measures Lookup at 10k, 100k and 1M routes (scaleRoutes),
// IPv4 and IPv6, over two sets of destinations inside the routes: "hot",
// 1024 addresses (a node's active flows: the walk stays in cache), and
// "cold", 1<<20 addresses spread over all the routes (nearly every lookup
// misses the caches: a lower bound on a full-table scan), each one
// address at a time (Lookup) and in batches (LookupBatch). Besides ns/op
// it reports cpu-ns/op, the benchmark thread's CPU time a lookup.
func BenchmarkFIB(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		routes := scaleRoutes(n)
		fib, err := mpls.NewFIB(routes)
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		var v4, v6 []netip.Addr
		for len(v4) < 1<<20 || len(v6) < 1<<20 {
			a := hostIn(rng, routes[rng.IntN(len(routes))].Prefix)
			if a.Is4() && len(v4) < 1<<20 {
				v4 = append(v4, a)
			} else if a.Is6() && len(v6) < 1<<20 {
				v6 = append(v6, a)
			}
		}
		for _, fam := range []struct {
			name  string
			addrs []netip.Addr
		}{{"IPv4", v4}, {"IPv6", v6}} {
			for _, set := range []struct {
				name string
				size int
			}{{"hot", 1024}, {"cold", 1 << 20}} {
				addrs := fam.addrs[:set.size]
				b.Run(fam.name+"/"+itoa(n)+"/"+set.name, func(b *testing.B) {
					b.ReportAllocs()
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					i, hits := 0, 0
					t := threadCPU()
					for b.Loop() {
						if _, ok := fib.Lookup(addrs[i&(set.size-1)]); ok {
							hits++
						}
						i++
					}
					reportCPU(b, t, i)
					if hits == 0 {
						b.Fatal("no lookup matched")
					}
				})
				// The same addresses through LookupBatch, 32 at a time (a
				// receive batch); ns/op is per address.
				b.Run(fam.name+"/"+itoa(n)+"/"+set.name+"-batch", func(b *testing.B) {
					b.ReportAllocs()
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					const batch = 32
					out := make([]*mpls.FIBEntry, batch)
					hits := 0
					t := threadCPU()
					for i := 0; i < b.N; i += batch {
						j := i & (set.size - 1)
						fib.LookupBatch(addrs[j:j+batch], out)
						if out[0] != nil {
							hits++
						}
					}
					reportCPU(b, t, b.N)
					if hits == 0 && b.N > 0 {
						b.Fatal("no lookup matched")
					}
				})
			}
		}
	}
}

// reportCPU reports the thread's CPU time since t over n lookups as
// cpu-ns/op (steadier than ns/op on a loaded machine).
func reportCPU(b *testing.B, t int64, n int) {
	if d := threadCPU() - t; t != 0 && n > 0 {
		b.ReportMetric(float64(d)/float64(n), "cpu-ns/op")
	}
}

// hostIn returns a random address inside p.
func hostIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := len(b) - 1; i >= 0 && (i+1)*8 > p.Bits(); i-- {
		r := byte(rng.Uint32())
		if i*8 < p.Bits() {
			r &= 0xff >> (p.Bits() - i*8)
		}
		b[i] |= r
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func itoa(n int) string {
	if n >= 1_000_000 {
		return strconv.Itoa(n/1_000_000) + "M"
	}
	return strconv.Itoa(n/1000) + "k"
}

func BenchmarkFIBBuild(b *testing.B) {
	routes := scaleRoutes(1_000_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := mpls.NewFIB(routes); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTablesRouteWriters: writers go through the route check (which may
// fill a hop's device) and the publish hook, a refused batch changes
// nothing, and UpdateRoutes adds, replaces and deletes in one step
// (planted bug: publishing before the check makes the refused batch
// visible and fails).
func TestTablesRouteWriters(t *testing.T) {
	var tables mpls.Tables
	published := 0
	tables.SetRouteCheck(func(r *mpls.Route) error {
		for i := range r.NextHops {
			if r.NextHops[i].Device == "" {
				r.NextHops[i].Device = "eth0"
			}
			if r.NextHops[i].Device == "bad" {
				return errors.New("no link named bad")
			}
		}
		return nil
	})
	tables.SetPublishHook(func(*mpls.FIB) { published++ })
	a := netip.MustParsePrefix("10.0.0.0/8")
	b := netip.MustParsePrefix("10.1.0.0/16")
	if err := tables.ReplaceRoutes([]mpls.Route{{Prefix: a, NextHops: []mpls.NextHop{{Via: netip.MustParseAddr("172.16.0.1")}}}}); err != nil {
		t.Fatal(err)
	}
	if e, ok := tables.FIB().Lookup(netip.MustParseAddr("10.1.2.3")); !ok || e.Group.Hops[0].Device != "eth0" {
		t.Fatalf("after ReplaceRoutes: %v %v, want 10.0.0.0/8 via eth0", e, ok)
	}
	err := tables.UpdateRoutes([]mpls.Route{{Prefix: b, NextHops: []mpls.NextHop{{Device: "bad"}}}}, []netip.Prefix{a})
	var te *mpls.TableError
	if !errors.As(err, &te) || te.Index != 0 {
		t.Fatalf("UpdateRoutes with a bad device = %v, want a TableError for entry 0", err)
	}
	if tables.FIB().Len() != 1 || published != 1 {
		t.Fatalf("a refused update changed the table: %d routes, %d publications", tables.FIB().Len(), published)
	}
	if err := tables.UpdateRoutes([]mpls.Route{{Prefix: b, NextHops: []mpls.NextHop{{Device: "eth1"}}}}, []netip.Prefix{a}); err != nil {
		t.Fatal(err)
	}
	if _, ok := tables.FIB().Lookup(netip.MustParseAddr("10.2.0.1")); ok {
		t.Error("10.0.0.0/8 still routes after its deletion")
	}
	if e, ok := tables.FIB().Lookup(netip.MustParseAddr("10.1.0.1")); !ok || e.Prefix != b || published != 2 {
		t.Errorf("after UpdateRoutes: %v %v (%d publications), want 10.1.0.0/16", e, ok, published)
	}
}

// TestFIBIndexSize checks that the lookup index of the 1M routes of the
// route-scaling target stays small: what a cold lookup reads must stay in
// the caches and the TLB's reach (8.5 MiB with line buckets for the runs
// of /32s; the index before, with 24-byte keys and 8-byte slots, took 80
// MiB). go test -v shows its parts. (Planted bugs: taking the
// average-fill width without weighing others gives 17.9 MiB, and
// building no line buckets 11.9 MiB: both fail.) On Linux such an index has its own
// mapping: lookups in it must agree with the oracle, while FIBs dropped
// before it are unmapped by the garbage collector.
func TestFIBIndexSize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1M-route FIB")
	}
	routes := scaleRoutes(1_000_000)
	for range 3 {
		if _, err := mpls.NewFIB(routes[:400_000]); err != nil {
			t.Fatal(err)
		}
		runtime.GC() // unmaps the dropped FIB's index
	}
	fib, err := mpls.NewFIB(routes)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	t.Log(mpls.FIBIndexSize(fib))
	if got := mpls.FIBIndexBytes(fib); got > 10<<20 {
		t.Errorf("index of 1M routes: %.1f MiB, want <= 10 MiB", float64(got)/(1<<20))
	}
	if runtime.GOOS == "linux" && !mpls.FIBIndexMapped(fib) {
		t.Error("the index of 1M routes is on the Go heap, want its own mapping")
	}
	o := newOracle(routes)
	rng := rand.New(rand.NewPCG(9, 10))
	sample := make([]mpls.Route, 5000)
	for i := range sample {
		sample[i] = routes[rng.IntN(len(routes))]
	}
	for _, a := range probes(rng, sample, 20000) {
		want, wok := o.lookup(a)
		if e, ok := fib.Lookup(a); ok != wok || ok && e.Prefix != want {
			t.Fatalf("Lookup(%s) = %v, %v; want %s, %v", a, e, ok, want, wok)
		}
	}
}
