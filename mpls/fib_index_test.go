package mpls_test

import (
	"encoding/binary"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

// lpmOracle is longest-prefix match done the obvious way: one map of the
// prefixes, probed from the longest length down.
type lpmOracle map[netip.Prefix]bool

func newOracle(routes []mpls.Route) lpmOracle {
	o := lpmOracle{}
	for _, r := range routes {
		o[r.Prefix] = true
	}
	return o
}

func (o lpmOracle) lookup(a netip.Addr) (netip.Prefix, bool) {
	for bits := a.BitLen(); bits >= 0; bits-- {
		if p, _ := a.Prefix(bits); o[p] {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// addrAdd returns a+d (d may be negative), wrapping within the family.
func addrAdd(a netip.Addr, d int64) netip.Addr {
	x := new(big.Int).SetBytes(a.AsSlice())
	x.Add(x, big.NewInt(d))
	mod := new(big.Int).Lsh(big.NewInt(1), uint(a.BitLen()))
	x.Mod(x, mod)
	b := make([]byte, a.BitLen()/8)
	x.FillBytes(b)
	out, _ := netip.AddrFromSlice(b)
	return out
}

// probes returns the addresses where the answer of a lookup can change
// around the routes' prefixes: each prefix's first and last address and
// their neighbours (two each way: the address after a table's last range
// start is one of them), and random addresses inside the prefixes.
func probes(rng *rand.Rand, routes []mpls.Route, random int) []netip.Addr {
	var out []netip.Addr
	for _, r := range routes {
		first, last := r.Prefix.Addr(), lastAddr(r.Prefix)
		out = append(out, first, addrAdd(first, -1), addrAdd(first, -2), addrAdd(first, 1),
			last, addrAdd(last, 1), addrAdd(last, 2), addrAdd(last, -1))
	}
	for range random {
		if len(routes) == 0 {
			break
		}
		out = append(out, hostIn(rng, routes[rng.IntN(len(routes))].Prefix))
	}
	return out
}

// checkFIB compares every lookup form (Lookup, Lookup4/6, LookupBatch,
// in batches of several sizes, families mixed) with the oracle at addrs.
func checkFIB(t *testing.T, name string, routes []mpls.Route, addrs []netip.Addr) {
	t.Helper()
	fib, err := mpls.NewFIB(routes)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	o := newOracle(routes)
	got := func(e *mpls.FIBEntry, ok bool) netip.Prefix {
		if !ok {
			return netip.Prefix{}
		}
		return e.Prefix
	}
	single := make([]*mpls.FIBEntry, len(addrs))
	for i, a := range addrs {
		want, wok := o.lookup(a)
		e, ok := fib.Lookup(a)
		if ok != wok || got(e, ok) != want {
			t.Fatalf("%s: Lookup(%s) = %s, %v; want %s, %v", name, a, got(e, ok), ok, want, wok)
		}
		single[i] = e
		var e2 *mpls.FIBEntry
		var ok2 bool
		if a.Is4() {
			e2, ok2 = fib.Lookup4(a.As4())
		} else {
			e2, ok2 = fib.Lookup6(a.As16())
		}
		if ok2 != ok || e2 != e {
			t.Fatalf("%s: Lookup4/6(%s) = %s; want %s", name, a, got(e2, ok2), want)
		}
	}
	batch := make([]*mpls.FIBEntry, len(addrs))
	for _, size := range []int{1, 7, 16, 33, len(addrs)} {
		clear(batch)
		for i := 0; i < len(addrs); i += size {
			fib.LookupBatch(addrs[i:min(i+size, len(addrs))], batch[i:])
		}
		for i, a := range addrs {
			if batch[i] != single[i] {
				t.Fatalf("%s: LookupBatch (batches of %d) at %s = %s; want %s", name, size, a, got(batch[i], batch[i] != nil), got(single[i], single[i] != nil))
			}
		}
	}
}

// clusteredRoutes returns n distinct routes drawn from shapes that make
// the index use every kind of bucket: runs of adjacent IPv4 /24s and
// spaced /32s (leaves, aligned children), nested IPv4 prefixes, IPv6 /48s
// and /64s (wide leaves keeping only high offset bits), IPv6 host routes
// crowded in one /120 far from the rest (path-compressed nodes), and
// default routes.
func clusteredRoutes(rng *rand.Rand, n int) []mpls.Route {
	seen := map[netip.Prefix]bool{}
	var out []mpls.Route
	base4 := 0x0b000000 + rng.Uint32N(1<<20)<<8
	base6 := uint64(0x20010db8)<<32 | uint64(rng.Uint32N(1<<16))<<16
	cluster := base6 + 1<<40
	for len(out) < n {
		var p netip.Prefix
		var a4 [4]byte
		var a6 [16]byte
		switch rng.IntN(8) {
		case 0: // a run of /24s
			binary.BigEndian.PutUint32(a4[:], base4+rng.Uint32N(uint32(n))<<8)
			p = netip.PrefixFrom(netip.AddrFrom4(a4), 24)
		case 1: // spaced /32s
			binary.BigEndian.PutUint32(a4[:], 0x64400000+rng.Uint32N(uint32(n))*7)
			p = netip.PrefixFrom(netip.AddrFrom4(a4), 32)
		case 2: // anything in 10/8
			binary.BigEndian.PutUint32(a4[:], 0x0a000000|rng.Uint32()&0xffffff)
			p = netip.PrefixFrom(netip.AddrFrom4(a4), rng.IntN(33))
		case 3: // /48s
			binary.BigEndian.PutUint64(a6[:], base6+uint64(rng.IntN(n))<<16)
			p = netip.PrefixFrom(netip.AddrFrom16(a6), 48)
		case 4: // /64s
			binary.BigEndian.PutUint64(a6[:], base6+1<<32+uint64(rng.IntN(n))*3)
			p = netip.PrefixFrom(netip.AddrFrom16(a6), 64)
		case 5: // host routes (and a few wider) crowded in one /120
			binary.BigEndian.PutUint64(a6[:], cluster)
			a6[15] = byte(rng.IntN(256))
			p = netip.PrefixFrom(netip.AddrFrom16(a6), 120+rng.IntN(9))
		case 6: // anything in 2001:db8::/32
			binary.BigEndian.PutUint64(a6[:], base6&^(1<<32-1)|uint64(rng.Uint32()))
			binary.BigEndian.PutUint64(a6[8:], rng.Uint64())
			p = netip.PrefixFrom(netip.AddrFrom16(a6), 32+rng.IntN(97))
		case 7: // short prefixes anywhere, defaults included
			if rng.IntN(2) == 0 {
				binary.BigEndian.PutUint32(a4[:], rng.Uint32())
				p = netip.PrefixFrom(netip.AddrFrom4(a4), rng.IntN(9))
			} else {
				binary.BigEndian.PutUint64(a6[:], rng.Uint64())
				p = netip.PrefixFrom(netip.AddrFrom16(a6), rng.IntN(17))
			}
		}
		p = p.Masked()
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, mpls.Route{Prefix: p, NextHops: hop("10.0.0.1", mpls.Label(16+len(out)%1000))})
		if p.Addr().Is6() {
			out[len(out)-1].NextHops = hop("2001:db8::1")
		}
	}
	return out
}

// TestFIBIndexMatchesOracle compares the FIB's lookups with the oracle
// over route sets that exercise every kind of index bucket, at every
// boundary of every prefix (planted bugs: counting leaf starts with < for
// <=, or a bucket taking the starts up to its end inclusive, fail here at
// once; so does computing bucket ends as addresses, which wrap at the top
// of the address space).
func TestFIBIndexMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 2, 5, 50, 500, 5000, 40000} {
		routes := clusteredRoutes(rng, n)
		checkFIB(t, "clustered/"+itoa1(n), routes, probes(rng, routes, 2000))
		if n == 40000 { // every kind of bucket was there to check
			fib, _ := mpls.NewFIB(routes)
			kinds := mpls.FIBIndexKinds(fib)
			for _, k := range []string{"direct", "leaf1", "leaf3", "leaf7", "child", "fat", "line", "inline", "node"} {
				if kinds[k] == 0 {
					t.Errorf("clustered/%d: no %s bucket (%v)", n, k, kinds)
				}
			}
		}
		routes = randomRoutes(rng, n)
		checkFIB(t, "random/"+itoa1(n), routes, probes(rng, routes, 2000))
	}
	// Prefixes high in the address space, where a node's buckets run
	// past its top (found by FuzzFIBLookup: bucket ends computed as
	// addresses wrapped to 0 and put every start in the last bucket).
	var top []mpls.Route
	for i, p := range []string{"2001:db8::/48", "e430:3030::/48", "f330:3030::/48", "ffff:ffff::/32", "ffff:ffff:ffff::/64", "255.255.255.255/32", "240.0.0.0/4", "255.0.0.0/8"} {
		via := "2001:db8::1"
		if netip.MustParsePrefix(p).Addr().Is4() {
			via = "10.0.0.1"
		}
		top = append(top, mpls.Route{Prefix: netip.MustParsePrefix(p), NextHops: hop(via, mpls.Label(16+i))})
	}
	checkFIB(t, "top", top, probes(rng, top, 1000))
	routes := scaleRoutes(100_000)
	checkFIB(t, "scale/100k", routes, probes(rng, routes[:20000], 20000))
	// No routes; the zero Addr in a batch.
	checkFIB(t, "empty", nil, []netip.Addr{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("::1")})
	fib, _ := mpls.NewFIB(scaleRoutes(10))
	out := []*mpls.FIBEntry{{}}
	if fib.LookupBatch([]netip.Addr{{}}, out); out[0] != nil {
		t.Errorf("LookupBatch(zero Addr) = %v, want nil", out[0])
	}
}

// TestFIBLookupFastPaths checks, against the oracle, the tables where
// Lookup's 64-bit first steps (lookup4, lookup6) must give way to the
// general walk: an IPv6 root node whose base has low bits (a first route
// longer than /64: an address with the same high 64 bits below it is
// before every range), whose buckets are exactly 2^64 wide with a child
// splitting one below bit 64, and addresses just past the last range
// start of either family (planted bugs: ignoring the base's low bits, or
// taking a child that splits below bit 64 from the high bits alone, each
// fail here; letting an IPv4 address just past the limit into the slots
// fails TestFIBIndexMatchesOracle, whose probes reach two addresses past
// each prefix for it).
func TestFIBLookupFastPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	route := func(p string) mpls.Route {
		pp := netip.MustParsePrefix(p)
		if pp.Addr().Is4() {
			return mpls.Route{Prefix: pp, NextHops: hop("10.0.0.1")}
		}
		return mpls.Route{Prefix: pp, NextHops: hop("2001:db8::1")}
	}
	// A first route longer than /64, then /64s.
	var low []mpls.Route
	low = append(low, route("2001:db8:0:1:0:1::/96"), route("2001:db8:0:1:8000::/65"))
	for i := range 300 {
		low = append(low, route(netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, byte((i + 2) >> 8), byte(i + 2)}), 64).String()))
	}
	checkFIB(t, "low base", low, append(probes(rng, low, 500), netip.MustParseAddr("2001:db8:0:1::"), netip.MustParseAddr("2001:db8:0:1::ffff")))
	// Adjacent /64s (buckets of 2^64), one of them holding spread /96s
	// and /128s (a child below bit 64).
	var wide []mpls.Route
	for i := range 300 {
		a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, byte(i >> 8), byte(i)}
		wide = append(wide, route(netip.PrefixFrom(netip.AddrFrom16(a), 64).String()))
	}
	for i := range 400 {
		a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 7}
		a[8], a[9] = byte(i>>2), byte(i<<6)
		bits := 96
		if i%3 == 0 {
			a[15] = byte(i)
			bits = 128
		}
		wide = append(wide, route(netip.PrefixFrom(netip.AddrFrom16(a), bits).Masked().String()))
	}
	wide = slices.CompactFunc(wide, func(a, b mpls.Route) bool { return a.Prefix == b.Prefix })
	checkFIB(t, "2^64 buckets", wide, probes(rng, wide, 2000))
	// Host routes at the top of IPv4 and IPv6 (nothing after the last
	// range start) and just below.
	top := []mpls.Route{route("255.255.255.254/32"), route("255.255.255.251/32"), route("11.0.0.0/24"), route("ffff:ffff:ffff:ffff::/64"), route("ffff:ffff:ffff:fff0::/64"), route("2001:db8::/48")}
	checkFIB(t, "top hosts", top, probes(rng, top, 200))
}

func itoa1(n int) string { return big.NewInt(int64(n)).String() }

// FuzzFIBLookup builds a FIB from routes the input describes and compares
// every lookup form with the oracle at each prefix's boundaries. Each
// route takes 6 bytes: family and where 4 address bytes go (so that IPv6
// routes may crowd or spread), prefix length, the 4 bytes.
func FuzzFIBLookup(f *testing.F) {
	f.Add([]byte{0, 24, 11, 0, 0, 0, 0, 32, 11, 0, 0, 5, 1, 64, 0x20, 1, 0xd, 0xb8, 25, 128, 0, 0, 0, 1})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 8, 10, 0, 0, 0, 0, 31, 10, 0, 0, 2})
	// A run of /32s three addresses apart under a /8, and /24s: line
	// buckets.
	var run []byte
	for i := range 190 {
		run = append(run, 0, 32, 10, 0, byte(i*3>>8), byte(i*3))
	}
	run = append(run, 0, 8, 10, 0, 0, 0)
	for i := range 8 {
		run = append(run, 0, 24, 10, byte(1+i), 0, 0)
	}
	f.Add(run)
	f.Fuzz(func(t *testing.T, b []byte) {
		seen := map[netip.Prefix]bool{}
		var routes []mpls.Route
		for ; len(b) >= 6 && len(routes) < 200; b = b[6:] {
			var p netip.Prefix
			if b[0]&1 == 0 {
				p = netip.PrefixFrom(netip.AddrFrom4([4]byte(b[2:6])), int(b[1])%33)
			} else {
				a := [16]byte{0x20, 0x01, 0x0d, 0xb8}
				at := int(b[0]>>1) % 13
				copy(a[at:], b[2:6])
				p = netip.PrefixFrom(netip.AddrFrom16(a), int(b[1])%129)
			}
			p = p.Masked()
			if seen[p] {
				continue
			}
			seen[p] = true
			routes = append(routes, mpls.Route{Prefix: p, NextHops: hop(familyVia(p))})
		}
		checkFIB(t, "fuzz", routes, probes(rand.New(rand.NewPCG(1, 1)), routes, 0))
	})
}

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
