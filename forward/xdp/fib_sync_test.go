package xdp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
)

// largeFIB returns n routes like a BGP-fed node's (the mix of
// cmd/mplsnode's TestRunManyRoutes: IPv4 /24 and /32, IPv6 /48 and /64),
// route i pushing label 1000+i so that a frame shows which route took it.
func largeFIB(n int) []Route {
	routes := make([]Route, 0, n)
	for i := range n {
		p := mplstest.ScalePrefix(i)
		routes = append(routes, Route{Prefix: p, Kind: RouteForward, Labels: []mpls.Label{mpls.Label(1000 + i)},
			Egress: loIndex, NextHopMAC: nhMAC})
	}
	return routes
}

// fibMemlock returns what the kernel accounts to the FIB maps (fdinfo's
// memlock: the entries' nodes).
func fibMemlock(t *testing.T, p *Program) int64 {
	var sum int64
	for _, m := range []int{p.objs.Fib4.FD(), p.objs.Fib6.FD()} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", m))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "memlock:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				sum += n
			}
		}
	}
	return sum
}

// slabUnreclaimable returns /proc/meminfo's SUnreclaim in bytes (where
// the trie's nodes live; other processes move it too).
func slabUnreclaimable() int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "SUnreclaim:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

// TestSyncFIBLarge: a FIB far over the old ceiling (65536 prefixes a
// family, over which a family was not carried at all) is carried whole:
// a frame to the last IPv4 and the last IPv6 route (both beyond the old
// ceiling) leaves with that route's label. A second sync of the same
// routes writes nothing; a change of one route and the removal of
// another write one entry and delete one. It logs the sync times, the
// kernel's memory for the maps and the Go heap the program's mirror
// state takes. MPLSNODE_XDP_FIB_ROUTES=1000000 runs it at a BGP-fed
// node's million routes (default 200,000); MPLSNODE_XDP_FIB_NOBATCH=1
// writes one entry a system call, as without batch support. Planted bug: FIBCapacity back
// at 65536: the frames are passed up (fib_not_carried), and the test
// fails.
func TestSyncFIBLarge(t *testing.T) {
	n := 200_000
	if v := os.Getenv("MPLSNODE_XDP_FIB_ROUTES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 8 {
			t.Fatalf("MPLSNODE_XDP_FIB_ROUTES=%q: want a count of 8 or more", v)
		}
	}
	p := newTestProgram(t, mpls.TTLUniform, true)
	p.noBatch = os.Getenv("MPLSNODE_XDP_FIB_NOBATCH") != "" // to compare with one system call an entry
	routes := largeFIB(n)
	routes = append(routes, SpecialRoutes()...)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0, slab0 := ms.HeapAlloc, slabUnreclaimable()
	start := time.Now()
	st, err := p.SyncFIB(routes)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("%d routes: first sync %v (%d written, batched %v), map entries %d+%d, kernel memlock %d MiB, SUnreclaim +%d MiB, Go heap +%d MiB",
		n, took.Round(time.Millisecond), st.Written, !p.noBatch, st.Entries4, st.Entries6, fibMemlock(t, p)>>20,
		(slabUnreclaimable()-slab0)>>20, (int64(ms.HeapAlloc)-int64(heap0))>>20)
	if st.Carried != n || st.Dropped4 != 0 || st.Dropped6 != 0 {
		t.Fatalf("sync of %d routes: %+v, want all carried", n, st)
	}
	lastOf := func(fam int) int {
		for i := n - 1; i >= 0; i-- {
			if family(routes[i].Prefix.Addr()) == fam {
				return i
			}
		}
		return -1
	}
	probe := func(i int) {
		t.Helper()
		var ip []byte
		if routes[i].Prefix.Addr().Is4() {
			ip = ipv4(t, 64, 100)
			dst := routes[i].Prefix.Addr().As4()
			copy(ip[16:], dst[:])
			ip[10], ip[11] = 0, 0
			binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:20], 0))
		} else {
			ip = ipv6(t, 9)
			dst := routes[i].Prefix.Addr().As16()
			copy(ip[24:], dst[:])
		}
		ret, out := run(t, p, ipFrame(ourMAC, ip))
		if ret != xdpRedirect || len(out) < 18 {
			t.Fatalf("frame to %s (route %d of %d): action %d; counters %v", routes[i].Prefix, i, n, ret, mustCounters(t, p))
		}
		if got := mpls.DecodeEntry(out[14:]).Label; got != routes[i].Labels[0] {
			t.Fatalf("frame to %s left with label %d, want %d (its route's)", routes[i].Prefix, got, routes[i].Labels[0])
		}
	}
	probe(lastOf(0))
	probe(lastOf(1))

	start = time.Now()
	st, err = p.SyncFIB(routes)
	if err != nil || st.Written != 0 || st.Deleted != 0 {
		t.Fatalf("sync of the same routes: %+v, %v; want nothing written or deleted", st, err)
	}
	t.Logf("unchanged sync %v", time.Since(start).Round(time.Millisecond))
	i4 := lastOf(0)
	routes[i4].Labels = []mpls.Label{999}
	gone := routes[0].Prefix
	routes = routes[1:]
	i4--
	start = time.Now()
	st, err = p.SyncFIB(routes)
	if err != nil || st.Written != 1 || st.Deleted != 1 {
		t.Fatalf("sync of one changed and one removed route: %+v, %v; want 1 written, 1 deleted", st, err)
	}
	t.Logf("one change, one removal: %v", time.Since(start).Round(time.Millisecond))
	probe(i4)
	ip := ipv4(t, 64, 100)
	dst := gone.Addr().As4()
	copy(ip[16:], dst[:])
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:20], 0))
	before := counter(t, p, PassNoRoute)
	if ret, _ := run(t, p, ipFrame(ourMAC, ip)); ret != xdpPass || counter(t, p, PassNoRoute) != before+1 {
		t.Fatalf("frame to the removed %s: action %d; counters %v", gone, ret, mustCounters(t, p))
	}
}

// decision is what a packet to an address gets from a FIB: the value of
// the longest match if it is carried, else "pass" (passed up to
// userspace, which always decides right).
func decision(fib map[fibKey]lsrFibValue, a netip.Addr) string {
	for bits := a.BitLen(); bits >= 0; bits-- {
		if v, ok := fib[keyOf(netip.PrefixFrom(a, bits).Masked())]; ok {
			if v.Kind != uint8(RouteForward) || v.Flags&flagResolved == 0 {
				return "pass"
			}
			return fmt.Sprint(v.Out[0])
		}
	}
	return "pass"
}

// TestSyncFIBOrder: while SyncFIB moves the maps from one table to
// another, every packet meets the old table's decision, the new one's or
// is passed up, never a mix (a new /8 applied to a /24 that is not yet
// written, a stale /24 after its /8 changed): each write and delete is
// replayed on a model LPM (a map searched longest first), and after each
// one every address of interest is checked. Random nested tables, small
// enough for the capacity, over it (the family is not carried: marker
// first, then deletions), and from over it back. The maps then hold
// exactly the new table (read back from the kernel). Planted bugs, each
// fails with the address and the three decisions: writes shortest first
// (a new /22 carries an address whose new /2x is not in yet), deletes
// longest first (a stale /29 under a deleted shorter prefix), the default
// marker not written first when a family goes over capacity (the old
// default route carries an address whose longer prefix was deleted).
func TestSyncFIBOrder(t *testing.T) {
	skipUnlessBPF(t)
	const capacity = 128
	p := newFIBTestProgram(t, capacity)
	rng := rand.New(rand.NewPCG(1, 2))
	// table returns n random nested IPv4 prefixes inside 10.0.0.0/16 (and
	// sometimes a default route), each with a random label.
	table := func(n int) []Route {
		var out []Route
		seen := map[netip.Prefix]bool{}
		for len(out) < n {
			bits := 8 + rng.IntN(25)
			if rng.IntN(20) == 0 {
				bits = 0
			}
			a := netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(4)), byte(rng.IntN(256))})
			pfx := netip.PrefixFrom(a, bits).Masked()
			if seen[pfx] {
				continue
			}
			seen[pfx] = true
			r := fwdRoute(pfx.String(), mpls.Label(16+rng.IntN(1000)))
			if rng.IntN(8) == 0 {
				r.Kind = RouteECMP
			}
			out = append(out, r)
		}
		return out
	}
	var probes []netip.Addr
	for i := range 4 * 256 {
		probes = append(probes, netip.AddrFrom4([4]byte{10, 0, byte(i / 256), byte(i)}))
	}
	probes = append(probes, netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("192.0.2.1"))
	model := map[fibKey]lsrFibValue{}
	var old, cur map[fibKey]lsrFibValue
	var oldDecision map[netip.Addr]string
	var newDecision map[netip.Addr]string
	steps := 0
	p.fibTrace = func(k fibKey, v lsrFibValue, deleted bool) {
		if deleted {
			delete(model, k)
		} else {
			model[k] = v
		}
		steps++
		if oldDecision == nil {
			return
		}
		for _, a := range probes {
			if d := decision(model, a); d != "pass" && d != oldDecision[a] && d != newDecision[a] {
				t.Fatalf("after %d map changes (%s %s): %s gets %s, the old table says %s, the new %s",
					steps, map[bool]string{true: "delete", false: "write"}[deleted], k, a, d, oldDecision[a], newDecision[a])
			}
		}
	}
	decisions := func(fib map[fibKey]lsrFibValue) map[netip.Addr]string {
		m := map[netip.Addr]string{}
		for _, a := range probes {
			m[a] = decision(fib, a)
		}
		return m
	}
	// wantOf returns the map contents SyncFIB should leave for routes.
	wantOf := func(routes []Route) map[fibKey]lsrFibValue {
		m := map[fibKey]lsrFibValue{}
		if len(routes) > capacity {
			m[defaultKey(0)] = lsrFibValue{Kind: uint8(RouteNotCarried)}
			return m
		}
		for i := range routes {
			m[keyOf(routes[i].Prefix)] = p.fibValue(&routes[i])
		}
		return m
	}
	sizes := []int{40, 40, 20, capacity + 10, 40, capacity + 5, capacity + 10, 10, 60, 60, 30} // two tables that fit fit together
	for round := range 60 {
		n := sizes[round%len(sizes)]
		routes := table(n)
		want := wantOf(routes)
		if cur != nil {
			old = cur
			oldDecision, newDecision = decisions(old), decisions(want)
		}
		st, err := p.SyncFIB(routes)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if over := n > capacity; over != (st.Dropped4 > 0) {
			t.Fatalf("round %d, %d routes (capacity %d): %+v", round, n, capacity, st)
		}
		// The kernel's maps hold exactly the new table.
		got := map[fibKey]lsrFibValue{}
		var k lsrFib4Key
		var v lsrFibValue
		it := p.objs.Fib4.Iterate()
		for it.Next(&k, &v) {
			got[keyOf(netip.PrefixFrom(netip.AddrFrom4(k.Addr), int(k.Prefixlen)))] = v
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(model) != fmt.Sprint(want) {
			t.Fatalf("round %d: the map holds %d entries (model %d), want %d", round, len(got), len(model), len(want))
		}
		cur = want
	}
	t.Logf("%d map changes checked", steps)
}

// TestSyncFIBRefused: when the map refuses an entry (here: full, as when
// an old table and a new, disjoint one of nearly the capacity do not fit
// together while one replaces the other), the family is not carried
// (passed up, counted fib_not_carried, Dropped4) rather than carried in
// part, until the retry; then it is carried again. Planted bug: going on
// writing after a refused entry (fails: no error, 2 of the routes carried
// beside holes).
func TestSyncFIBRefused(t *testing.T) {
	skipUnlessBPF(t)
	const capacity = 8
	p := newFIBTestProgram(t, capacity)
	var a, b []Route
	for i := range 6 {
		a = append(a, fwdRoute(fmt.Sprintf("10.20.%d.0/24", i)))
		b = append(b, fwdRoute(fmt.Sprintf("10.10.%d.0/24", 10+i)))
	}
	b = append(b, fwdRoute("10.10.0.0/16"))
	if _, err := p.SyncFIB(a); err != nil {
		t.Fatal(err)
	}
	st, err := p.SyncFIB(b)
	if err == nil || st.Dropped4 != len(b) || st.Carried != 0 {
		t.Fatalf("sync that does not fit beside the old table: %+v, %v; want an error and all %d routes dropped", st, err, len(b))
	}
	t.Logf("refused: %v", err)
	frame := ipFrame(ourMAC, ipv4(t, 64, 100)) // to 10.10.10.10: b's first /24
	if ret, _ := run(t, p, frame); ret != xdpPass || counter(t, p, PassFIBNotCarried) != 1 {
		t.Fatalf("frame to a refused family: action %d (forwarded: %v); counters %v", ret, ret == xdpRedirect, mustCounters(t, p))
	}
	// Within the retry time it stays off; after it, carried.
	if st, err := p.SyncFIB(b); err != nil || st.Dropped4 != len(b) || time.Until(st.Retry) <= 0 || time.Until(st.Retry) > fibRetry {
		t.Fatalf("sync within the retry time: %+v, %v; want the retry time a minute on at most", st, err)
	}
	p.fibFailed[0] = time.Now().Add(-fibRetry)
	if st, err := p.SyncFIB(b); err != nil || st.Dropped4 != 0 || st.Carried != len(b) || !st.Retry.IsZero() {
		t.Fatalf("sync after the retry time: %+v, %v", st, err)
	}
	ret, out := run(t, p, frame)
	if ret != xdpRedirect || !bytes.Equal(out[:6], nhMAC) {
		t.Fatalf("frame after the retry: action %d; counters %v", ret, mustCounters(t, p))
	}
}

// BenchmarkSyncFIBOneChange: a sync of 100,000 routes of which one
// changed (a BGP update's usual size): the routes walked, one entry
// written.
func BenchmarkSyncFIBOneChange(b *testing.B) {
	p := newTestProgram(b, mpls.TTLUniform, true)
	routes := largeFIB(100_000)
	if _, err := p.SyncFIB(routes); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		routes[0].Labels[0] = mpls.Label(16 + i%2)
		st, err := p.SyncFIB(routes)
		if err != nil || st.Written != 1 {
			b.Fatalf("%+v, %v", st, err)
		}
	}
}
