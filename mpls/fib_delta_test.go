package mpls_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/mpls"
)

// refFIB is the naive model a FIB is held to: routes by prefix, their
// order as Entry gives it, and longest-prefix match by a linear scan.
type refFIB struct {
	routes map[netip.Prefix]mpls.Route
	order  []netip.Prefix
}

func newRefFIB(routes []mpls.Route) *refFIB {
	r := &refFIB{routes: map[netip.Prefix]mpls.Route{}}
	for _, rt := range routes {
		r.routes[rt.Prefix] = rt
		r.order = append(r.order, rt.Prefix)
	}
	return r
}

// update applies an Update's change: del, then add (replacing), a
// replaced or added prefix moving to the end.
func (r *refFIB) update(add []mpls.Route, del []netip.Prefix) *refFIB {
	n := &refFIB{routes: map[netip.Prefix]mpls.Route{}}
	gone := map[netip.Prefix]bool{}
	for _, p := range del {
		gone[p] = true
	}
	for _, rt := range add {
		gone[rt.Prefix] = true
	}
	for _, p := range r.order {
		if !gone[p] {
			n.order = append(n.order, p)
			n.routes[p] = r.routes[p]
		}
	}
	for _, rt := range add {
		n.order = append(n.order, rt.Prefix)
		n.routes[rt.Prefix] = rt
	}
	return n
}

// lookup is longest-prefix match over every route.
func (r *refFIB) lookup(a netip.Addr) (mpls.Route, bool) {
	a = a.Unmap()
	best, found := mpls.Route{}, false
	for p, rt := range r.routes {
		if p.Contains(a) && (!found || p.Bits() > best.Prefix.Bits()) {
			best, found = rt, true
		}
	}
	return best, found
}

func sameRoute(a, b mpls.Route) bool {
	return a.Prefix == b.Prefix && a.MTU == b.MTU && a.TTL == b.TTL &&
		slices.EqualFunc(a.NextHops, b.NextHops, func(x, y mpls.NextHop) bool {
			return x.Via == y.Via && x.Device == y.Device && x.Weight == y.Weight && slices.Equal(x.Labels, y.Labels)
		})
}

// fibPool is the prefixes a differential run draws from: nested chains in
// both families, default routes, host routes at the edges of the address
// space, and random prefixes inside a few covering ones.
func fibPool(rng *rand.Rand, n int) []netip.Prefix {
	fixed := []string{
		"0.0.0.0/0", "0.0.0.0/32", "255.255.255.255/32", "128.0.0.0/1", "10.0.0.0/8", "10.1.0.0/16",
		"10.1.2.0/24", "10.1.2.3/32", "10.1.2.128/25", "10.1.255.255/32", "10.255.0.0/16", "11.0.0.0/8",
		"::/0", "::/128", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128", "8000::/1", "2001:db8::/32",
		"2001:db8:1::/48", "2001:db8:1:2::/64", "2001:db8:1:2::3/128", "2001:db8:1:2:8000::/65",
		"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff/128",
	}
	seen := map[netip.Prefix]bool{}
	var out []netip.Prefix
	for _, s := range fixed {
		p := netip.MustParsePrefix(s)
		seen[p] = true
		out = append(out, p)
	}
	covers := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("11.0.0.0/8"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("2001:db8:1::/48")}
	for len(out) < n {
		c := covers[rng.IntN(len(covers))]
		bits := c.Addr().BitLen()
		l := c.Bits() + rng.IntN(bits-c.Bits()+1)
		if rng.IntN(3) == 0 { // host routes and /24s, /48s often
			l = []int{bits, bits - 8, c.Bits() + 8}[rng.IntN(3)]
		}
		p := netip.PrefixFrom(hostIn(rng, c), min(l, bits)).Masked()
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// randomRoute returns a route to p over a few shared next hops, some
// labelled, multipath, with an MTU or a label TTL.
func randomRoute(rng *rand.Rand, p netip.Prefix) mpls.Route {
	v6 := p.Addr().Is6()
	hop := func() mpls.NextHop {
		h := mpls.NextHop{Device: []string{"eth0", "eth1"}[rng.IntN(2)]}
		if v6 {
			h.Via = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(1 + rng.IntN(3))})
		} else {
			h.Via = netip.AddrFrom4([4]byte{172, 16, 0, byte(1 + rng.IntN(3))})
		}
		for range rng.IntN(4) {
			h.Labels = append(h.Labels, mpls.Label(16+rng.IntN(4)))
		}
		if rng.IntN(4) == 0 {
			h.Weight = uint16(1 + rng.IntN(3))
		}
		return h
	}
	r := mpls.Route{Prefix: p, NextHops: []mpls.NextHop{hop()}}
	if rng.IntN(5) == 0 {
		r.NextHops = append(r.NextHops, hop())
	}
	if rng.IntN(6) == 0 {
		r.MTU = []uint32{1280, 1400, 9000}[rng.IntN(3)]
	}
	if rng.IntN(6) == 0 {
		r.TTL = uint8(1 + rng.IntN(255))
	}
	return r
}

// probeAddrs returns addresses to look up: random ones inside the pool's
// prefixes and each prefix's first and last address and their outer
// neighbours.
func probeAddrs(rng *rand.Rand, pool []netip.Prefix, random int) []netip.Addr {
	var out []netip.Addr
	for range random {
		out = append(out, hostIn(rng, pool[rng.IntN(len(pool))]))
	}
	for _, p := range pool {
		first := p.Addr()
		last := lastAddr(p)
		out = append(out, first, last)
		if prev := first.Prev(); prev.IsValid() {
			out = append(out, prev)
		}
		if next := last.Next(); next.IsValid() {
			out = append(out, next)
		}
	}
	return out
}

// checkFIBModel compares f with the model ref: Len, Entry and All in order,
// MaxLabels, MinMTU, and Lookup (all four forms) of addrs.
func checkFIBModel(t testing.TB, f *mpls.FIB, ref *refFIB, addrs []netip.Addr) {
	t.Helper()
	if f.Len() != len(ref.order) {
		t.Fatalf("Len() = %d, want %d", f.Len(), len(ref.order))
	}
	i := 0
	for e := range f.All() {
		if i >= len(ref.order) || e.Prefix != ref.order[i] {
			t.Fatalf("All()[%d] = %v, want %v", i, e.Prefix, ref.order[min(i, len(ref.order)-1)])
		}
		if got := f.Entry(i); got != e {
			t.Fatalf("Entry(%d) = %v, All gives %v", i, got.Prefix, e.Prefix)
		}
		if !sameRoute(e.Route(), ref.routes[e.Prefix]) {
			t.Fatalf("entry %v = %+v, want %+v", e.Prefix, e.Route(), ref.routes[e.Prefix])
		}
		i++
	}
	if i != len(ref.order) {
		t.Fatalf("All() yields %d routes, want %d", i, len(ref.order))
	}
	maxLabels, minMTU := 0, uint32(0)
	for _, r := range ref.routes {
		for _, h := range r.NextHops {
			maxLabels = max(maxLabels, len(h.Labels))
		}
		if r.MTU != 0 && (minMTU == 0 || r.MTU < minMTU) {
			minMTU = r.MTU
		}
	}
	if f.MaxLabels() != maxLabels || f.MinMTU() != minMTU {
		t.Fatalf("MaxLabels, MinMTU = %d, %d; want %d, %d", f.MaxLabels(), f.MinMTU(), maxLabels, minMTU)
	}
	for _, a := range addrs {
		want, wok := ref.lookup(a)
		got, ok := f.Lookup(a)
		if ok != wok || ok && !sameRoute(got.Route(), want) {
			t.Fatalf("Lookup(%v) = %v %v, want %v %v", a, entryPrefix(got), ok, want.Prefix, wok)
		}
		var alt *mpls.FIBEntry
		if a.Is4() {
			alt, ok = f.Lookup4(a.As4())
			if m, _ := f.Lookup(netip.AddrFrom16(a.As16())); m != got {
				t.Fatalf("Lookup(mapped %v) = %v, Lookup gives %v", a, entryPrefix(m), entryPrefix(got))
			}
		} else {
			alt, ok = f.Lookup6(a.As16())
		}
		if alt != got || ok != wok {
			t.Fatalf("Lookup4/6(%v) = %v, Lookup gives %v", a, entryPrefix(alt), entryPrefix(got))
		}
	}
}

func entryPrefix(e *mpls.FIBEntry) string {
	if e == nil {
		return "none"
	}
	return e.Prefix.String()
}

// checkWithin holds f.Within of each of ps to the model: the routes
// whose prefix lies inside it, each once.
func checkWithin(t testing.TB, f *mpls.FIB, ref *refFIB, ps ...netip.Prefix) {
	t.Helper()
	for _, p := range ps {
		got := map[netip.Prefix]bool{}
		for e := range f.Within(p) {
			if got[e.Prefix] || e.Prefix.Bits() < p.Bits() || !p.Contains(e.Prefix.Addr()) || !sameRoute(e.Route(), ref.routes[e.Prefix]) {
				t.Fatalf("Within(%v) yields %+v (twice: %v), model %+v", p, e.Route(), got[e.Prefix], ref.routes[e.Prefix])
			}
			got[e.Prefix] = true
		}
		for q := range ref.routes {
			if q.Bits() >= p.Bits() && p.Contains(q.Addr()) && !got[q] {
				t.Fatalf("Within(%v) misses %v", p, q)
			}
		}
	}
}

// checkChanges holds cur.Changes(prev) to the models: when it answers,
// removed is exactly the prefixes prev routes and cur does not, changed
// holds cur's entry of every prefix cur routes otherwise than prev (and
// only prefixes cur routes).
func checkChanges(t testing.TB, prev, cur *mpls.FIB, pr, cr *refFIB) bool {
	t.Helper()
	changed, removed, ok := cur.Changes(prev, 1<<30)
	if !ok {
		return false
	}
	ch := map[netip.Prefix]*mpls.FIBEntry{}
	for _, e := range changed {
		if _, dup := ch[e.Prefix]; dup {
			t.Fatalf("Changes: %v changed twice", e.Prefix)
		}
		ch[e.Prefix] = e
		want, in := cr.routes[e.Prefix]
		if !in || !sameRoute(e.Route(), want) {
			t.Fatalf("Changes: changed %v = %+v, cur holds %+v (%v)", e.Prefix, e.Route(), want, in)
		}
	}
	rm := map[netip.Prefix]bool{}
	for _, p := range removed {
		rm[p] = true
		if _, in := cr.routes[p]; in {
			t.Fatalf("Changes: removed %v, which cur routes", p)
		}
		if _, was := pr.routes[p]; !was {
			t.Fatalf("Changes: removed %v, which prev did not route", p)
		}
	}
	for p, r := range cr.routes {
		if o, was := pr.routes[p]; (!was || !sameRoute(o, r)) && ch[p] == nil {
			t.Fatalf("Changes: %v routed otherwise in cur, not reported", p)
		}
	}
	for p := range pr.routes {
		if _, in := cr.routes[p]; !in && !rm[p] {
			t.Fatalf("Changes: %v gone from cur, not reported", p)
		}
	}
	return true
}

// TestFIBUpdateDifferential applies thousands of random batches of adds,
// replacements and deletions (IPv4 and IPv6, nested prefixes, default
// and host routes, deletions of prefixes not routed) to a FIB and to the
// naive model, and after each compares Len, the entries in order, the
// counts, the lookups of random and boundary addresses and the routes
// Within two of the prefixes, and holds
// Changes between consecutive FIBs to the models. The batches cross the
// delta's bound, so that deltas fold into new bases on the way; a few
// large ones rebuild at once.
func TestFIBUpdateDifferential(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 27))
			pool := fibPool(rng, 400)
			var initial []mpls.Route
			for _, p := range pool {
				if rng.IntN(2) == 0 {
					initial = append(initial, randomRoute(rng, p))
				}
			}
			f, err := mpls.NewFIB(initial)
			if err != nil {
				t.Fatal(err)
			}
			ref := newRefFIB(initial)
			checkFIBModel(t, f, ref, probeAddrs(rng, pool, 64))
			batches, diffs := 3000, 0
			if testing.Short() {
				batches = 600
			}
			for b := range batches {
				n := 1 + rng.IntN(8)
				if rng.IntN(200) == 0 {
					n = 100 + rng.IntN(200)
				}
				var add []mpls.Route
				var del []netip.Prefix
				inAdd := map[netip.Prefix]bool{}
				for range n {
					p := pool[rng.IntN(len(pool))]
					if rng.IntN(2) == 0 && !inAdd[p] {
						inAdd[p] = true
						add = append(add, randomRoute(rng, p))
					} else {
						del = append(del, p)
					}
				}
				nf, err := f.Update(add, del)
				if err != nil {
					t.Fatalf("batch %d: %v", b, err)
				}
				nref := ref.update(add, del)
				var addrs []netip.Addr
				for range 48 {
					addrs = append(addrs, hostIn(rng, pool[rng.IntN(len(pool))]))
				}
				for _, r := range add {
					addrs = append(addrs, r.Prefix.Addr(), lastAddr(r.Prefix))
				}
				for _, p := range del {
					addrs = append(addrs, p.Addr(), lastAddr(p))
				}
				if b%50 == 0 {
					addrs = append(addrs, probeAddrs(rng, pool, 0)...)
				}
				checkFIBModel(t, nf, nref, addrs)
				checkWithin(t, nf, nref, pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))])
				if checkChanges(t, f, nf, ref, nref) {
					diffs++
				}
				// The FIB updated is unchanged.
				if b%100 == 0 {
					checkFIBModel(t, f, ref, addrs)
				}
				f, ref = nf, nref
			}
			if diffs < batches/2 {
				t.Fatalf("Changes answered for %d of %d updates: the delta is not used", diffs, batches)
			}
		})
	}
}

// FuzzFIBUpdate is the differential test driven by the fuzzer: each byte
// of the input adds (top bit clear) or deletes a route of a pool of 128
// prefixes (the low 7 bits), a zero byte ends a batch; after each batch
// the FIB is held to the model as in TestFIBUpdateDifferential.
func FuzzFIBUpdate(f *testing.F) {
	f.Add([]byte{1, 2, 3, 0, 0x81, 0x82, 0, 5, 0x85, 5})
	f.Add([]byte{10, 11, 12, 13, 14, 15, 0, 0x8a, 0x8c, 0, 0x8b, 12})
	f.Fuzz(func(t *testing.T, data []byte) {
		rng := rand.New(rand.NewPCG(27, 1))
		pool := fibPool(rng, 128)
		var initial []mpls.Route
		for i, p := range pool {
			if i%3 == 0 {
				initial = append(initial, randomRoute(rng, p))
			}
		}
		fib, err := mpls.NewFIB(initial)
		if err != nil {
			t.Fatal(err)
		}
		ref := newRefFIB(initial)
		probes := probeAddrs(rng, pool, 32)
		var add []mpls.Route
		var del []netip.Prefix
		inAdd := map[netip.Prefix]bool{}
		for i, b := range append(data, 0) {
			if b != 0 {
				p := pool[b&127]
				if b&128 != 0 {
					del = append(del, p)
				} else if !inAdd[p] {
					inAdd[p] = true
					add = append(add, randomRoute(rng, p))
				}
				if i < len(data) {
					continue
				}
			}
			nf, err := fib.Update(add, del)
			if err != nil {
				t.Fatal(err)
			}
			nref := ref.update(add, del)
			checkFIBModel(t, nf, nref, probes)
			checkWithin(t, nf, nref, pool[len(data)%len(pool)], pool[0], pool[4])
			checkChanges(t, fib, nf, ref, nref)
			fib, ref = nf, nref
			add, del, inAdd = nil, nil, map[netip.Prefix]bool{}
		}
	})
}

// TestTablesCompactsTheDelta: single-route updates through Tables grow
// the FIB's delta until Tables folds it into a new base off the writers'
// path; each time, the new base waits (a test seam) while the writers
// delete and add routes, and the FIB it then publishes holds the routes
// the updates made, in their order (the model's), over a new base; every
// FIB on the way matches the model, and Changes from each of the last
// FIBs to the current one holds to the models, across a compaction too.
func TestTablesCompactsTheDelta(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 27))
	pool := fibPool(rng, 3000)
	initial := make([]mpls.Route, 0, len(pool))
	for _, p := range pool[:2000] {
		initial = append(initial, randomRoute(rng, p))
	}
	var tables mpls.Tables
	built, resume := make(chan struct{}), make(chan struct{})
	mpls.SetCompactBuilt(&tables, func() { built <- struct{}{}; <-resume })
	if err := tables.ReplaceRoutes(initial); err != nil {
		t.Fatal(err)
	}
	ref := newRefFIB(initial)
	probes := probeAddrs(rng, pool[:64], 64)
	type version struct {
		fib *mpls.FIB
		ref *refFIB
	}
	history := []version{{tables.FIB(), ref}}
	update := func(deleteRouted bool) {
		t.Helper()
		p := pool[rng.IntN(len(pool))]
		if deleteRouted && len(ref.order) > 0 {
			p = ref.order[rng.IntN(len(ref.order))]
		}
		var add []mpls.Route
		var del []netip.Prefix
		if !deleteRouted && rng.IntN(2) == 0 {
			add = []mpls.Route{randomRoute(rng, p)}
		} else {
			del = []netip.Prefix{p}
		}
		if err := tables.UpdateRoutes(add, del); err != nil {
			t.Fatal(err)
		}
		ref = ref.update(add, del)
	}
	// check holds the current FIB to the model and Changes from the last
	// versions to it.
	across := 0
	check := func(full bool) {
		t.Helper()
		cur := tables.FIB()
		if full {
			checkFIBModel(t, cur, ref, probes)
		}
		for _, k := range []int{1, 4, 16, 64} {
			if k <= len(history) {
				v := history[len(history)-k]
				if checkChanges(t, v.fib, cur, v.ref, ref) && mpls.FIBBase(v.fib) != mpls.FIBBase(cur) {
					across++
				}
			}
		}
		history = append(history, version{cur, ref})
		if len(history) > 64 {
			history = history[1:]
		}
	}
	compactions := 0
	for i := range 3000 {
		update(false)
		check(i%100 == 0)
		select {
		case <-built:
			// The writers go on while the new base waits: deletions of
			// routes the compacted FIB holds, and more changes.
			before := mpls.FIBBase(tables.FIB())
			for j := range 40 {
				update(j%2 == 0)
				check(false)
			}
			resume <- struct{}{}
			deadline := time.Now().Add(time.Minute)
			for mpls.FIBBase(tables.FIB()) == before {
				if time.Now().After(deadline) {
					t.Fatal("the compaction was not published within a minute")
				}
				time.Sleep(time.Millisecond)
			}
			compactions++
			check(true)
		default:
		}
	}
	if compactions == 0 || across == 0 {
		t.Fatalf("%d compactions, Changes answered across one %d times", compactions, across)
	}
	if mpls.FIBDeltaLen(tables.FIB()) >= 1024 { // a compaction is on its way: let it finish
		before := mpls.FIBBase(tables.FIB())
		select {
		case <-built:
			resume <- struct{}{}
		case <-time.After(time.Minute):
			t.Fatal("no compaction of a delta past its bound within a minute")
		}
		for deadline := time.Now().Add(time.Minute); mpls.FIBBase(tables.FIB()) == before; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the compaction was not published within a minute")
			}
		}
	}
	if n := mpls.FIBDeltaLen(tables.FIB()); n >= 1024 {
		t.Fatalf("the FIB's delta holds %d entries", n)
	}
	checkFIBModel(t, tables.FIB(), ref, probeAddrs(rng, pool, 256))
}
