package xdp

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
)

// mirrorFIB returns a FIB of n routes like a BGP-fed node's (IPv4 and
// IPv6), each via 10.0.0.1 on lo pushing its own label.
func mirrorFIB(t testing.TB, n int) *mpls.FIB {
	t.Helper()
	fib, err := mpls.NewFIBFunc(n, func(i int, r *mpls.Route) {
		*r = mirrorRoute(mplstest.ScalePrefix(i), mpls.Label(1000+i))
	})
	if err != nil {
		t.Fatal(err)
	}
	return fib
}

func mirrorRoute(p netip.Prefix, l mpls.Label) mpls.Route {
	return mpls.Route{Prefix: p, NextHops: []mpls.NextHop{{Via: netip.MustParseAddr("10.0.0.1"), Device: "lo", Labels: []mpls.Label{l}}}}
}

// newTestMirror returns a mirror into a program on lo, with the
// connected subnet 10.99.0.0/24 on lo.
func newTestMirror(t testing.TB) (*Mirror, *Program) {
	t.Helper()
	p := newTestProgram(t, mpls.TTLUniform, true)
	m := NewMirror(p, MirrorConfig{Forward: true, Links: map[string]Link{"lo": {Name: "lo", Index: loIndex}},
		Connected: []forward.Route{{Prefix: netip.MustParsePrefix("10.99.0.0/24"), Device: "lo"}}})
	return m, p
}

func nhMACOf(string, netip.Addr) net.HardwareAddr { return nhMAC }

// traceFIB records every FIB map write and delete of p, by prefix.
func traceFIB(p *Program) (writes, deletes map[string]int) {
	writes, deletes = map[string]int{}, map[string]int{}
	p.fibTrace = func(k fibKey, _ lsrFibValue, deleted bool) {
		if deleted {
			deletes[k.String()]++
		} else {
			writes[k.String()]++
		}
	}
	return writes, deletes
}

// TestMirrorUpdateWritesOnlyTheChange: in a table of 100,000 routes, a
// withdraw and an add (one Update), then a changed label, write exactly
// the entries of those prefixes (counted through the map-write seam)
// without walking the table, and leave the program's FIB as a whole sync
// would make it (the oracle: a whole sync afterwards writes and deletes
// nothing). Planted bug: the incremental path skipping its deletes (the
// withdrawn prefix stays in the map; the whole sync then deletes it).
func TestMirrorUpdateWritesOnlyTheChange(t *testing.T) {
	skipUnlessBPF(t)
	const n = 100_000
	m, p := newTestMirror(t)
	fib := mirrorFIB(t, n)
	in := MirrorInput{FIB: fib, MAC: nhMACOf}
	res, err := m.Sync(in)
	if err != nil || !res.Walked || res.State.Carried != n {
		t.Fatalf("first sync: %+v, %v; want a walk carrying all %d routes", res, err, n)
	}
	gone, added := mplstest.ScalePrefix(17), mplstest.ScalePrefix(n+1)
	steps := []struct {
		name       string
		add        []mpls.Route
		del        []netip.Prefix
		want       string
		wantDelete string
	}{
		{"withdraw and add", []mpls.Route{mirrorRoute(added, 7)}, []netip.Prefix{gone}, added.String(), gone.String()},
		{"new label", []mpls.Route{mirrorRoute(mplstest.ScalePrefix(n-1), 9)}, nil, mplstest.ScalePrefix(n - 1).String(), ""},
	}
	for _, s := range steps {
		if in.FIB, err = in.FIB.Update(s.add, s.del); err != nil {
			t.Fatal(err)
		}
		writes, deletes := traceFIB(p)
		res, err := m.Sync(in)
		if err != nil || res.Walked {
			t.Fatalf("%s: %+v, %v; want no walk", s.name, res, err)
		}
		wantDeletes := map[string]int{}
		if s.wantDelete != "" {
			wantDeletes[s.wantDelete] = 1
		}
		if fmt.Sprint(writes) != fmt.Sprint(map[string]int{s.want: 1}) || fmt.Sprint(deletes) != fmt.Sprint(wantDeletes) {
			t.Fatalf("%s: wrote %v, deleted %v; want %s written, %v deleted", s.name, writes, deletes, s.want, wantDeletes)
		}
		if res.State.Written != 1 || res.State.Written+res.State.Deleted != 1+len(wantDeletes) || res.State.Carried != n {
			t.Fatalf("%s: state %+v", s.name, res.State)
		}
	}
	p.fibTrace = nil
	st, err := p.SyncFIBSeq(m.Routes(in))
	if err != nil || st.Written != 0 || st.Deleted != 0 {
		t.Fatalf("whole sync after the updates: %+v, %v; want nothing to write or delete", st, err)
	}
}

// fibSlots returns what p's FIB maps hold, by prefix.
func fibSlots(p *Program) map[string]lsrFibValue {
	out := map[string]lsrFibValue{}
	for i := range p.fibSlots {
		if s := &p.fibSlots[i]; s.gen != 0 && !s.unknown {
			out[s.key.String()] = s.v
		}
	}
	return out
}

// TestMirrorUpdateMatchesWalk: rounds of random changes (routes added,
// withdrawn, changed, some to the connected subnet's prefix or to a
// connected host's or a local address's /32; connected hosts and local
// addresses appearing and going) each leave the program's FIB exactly as
// a whole sync of the same inputs makes it (a whole sync after it changes
// no entry: it rewrites a prefix two layers hold, with the same value),
// most of them without a walk.
func TestMirrorUpdateMatchesWalk(t *testing.T) {
	skipUnlessBPF(t)
	m, p := newTestMirror(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 2000
	pfx := func(i int) netip.Prefix {
		switch i % 50 {
		case 0:
			return netip.MustParsePrefix("10.99.0.0/24") // the connected subnet
		case 1:
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, 0, byte(rng.IntN(8))}), 32) // a host's
		case 2:
			return netip.MustParsePrefix("10.99.0.0/25") // shadows hosts
		}
		return mplstest.ScalePrefix(i % n)
	}
	in := MirrorInput{FIB: mirrorFIB(t, n), MAC: nhMACOf}
	var hosts []Host
	in.Hosts = func(string, bool) []Host { return hosts }
	walks := 0
	for round := range 200 {
		add, del := randomChange(rng, 3*n, pfx)
		if rng.IntN(4) == 0 {
			hosts = append(hosts[:0:0], Host{Addr: netip.AddrFrom4([4]byte{10, 99, 0, byte(rng.IntN(8))}), MAC: peerMAC})
		}
		if rng.IntN(4) == 0 {
			in.Locals = []netip.Addr{netip.AddrFrom4([4]byte{10, 99, 0, byte(rng.IntN(8))})}
		}
		var err error
		if in.FIB, err = in.FIB.Update(add, del); err != nil {
			t.Fatal(err)
		}
		res, err := m.Sync(in)
		if err != nil {
			t.Fatal(err)
		}
		if res.Walked && round > 0 {
			walks++
		}
		before := fibSlots(p)
		st, err := p.SyncFIBSeq(m.Routes(in))
		if after := fibSlots(p); err != nil || st.Deleted != 0 || fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("round %d (add %v, del %v): a whole sync after the update changed the FIB: %d written, %d deleted (%v);\nbefore %v\nafter  %v",
				round, add, del, st.Written, st.Deleted, err, before, after)
		}
	}
	if walks > 20 {
		t.Errorf("%d of 200 small changes walked the table", walks)
	}
}

// BenchmarkMirrorOneRoute: one route's label changed in a table of
// 100,000, mirrored by the incremental path and by the whole sync side
// by side.
func BenchmarkMirrorOneRoute(b *testing.B) {
	skipUnlessBPF(b)
	const n = 100_000
	for _, whole := range []bool{false, true} {
		name := "incremental"
		if whole {
			name = "whole"
		}
		b.Run(name, func(b *testing.B) {
			m, _ := newTestMirror(b)
			fibs := [2]*mpls.FIB{mirrorFIB(b, n)}
			var err error
			if fibs[1], err = fibs[0].Update([]mpls.Route{mirrorRoute(mplstest.ScalePrefix(n/2), 7)}, nil); err != nil {
				b.Fatal(err)
			}
			in := MirrorInput{FIB: fibs[0], MAC: nhMACOf}
			if _, err := m.Sync(in); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				in.FIB = fibs[(i+1)%2]
				var res SyncResult
				if whole {
					res, err = m.syncAll(in, m.aboveRoutes(in))
				} else {
					res, err = m.Sync(in)
				}
				if err != nil || res.State.Written != 1 || res.Walked != whole {
					b.Fatalf("%+v, %v", res, err)
				}
			}
		})
	}
}

// randomChange draws one to five distinct prefixes, each pick(rng.IntN(span)),
// and withdraws or announces (with a label of 16..19) each at even odds:
// one BGP update's worth of change to a mirrored FIB.
func randomChange(rng *rand.Rand, span int, pick func(int) netip.Prefix) (add []mpls.Route, del []netip.Prefix) {
	seen := map[netip.Prefix]bool{}
	for range 1 + rng.IntN(5) {
		q := pick(rng.IntN(span))
		if seen[q] {
			continue
		}
		seen[q] = true
		if rng.IntN(2) == 0 {
			del = append(del, q)
		} else {
			add = append(add, mirrorRoute(q, mpls.Label(16+rng.IntN(4))))
		}
	}
	return add, del
}
