package node_test

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/mpls"
)

// TestBGPConvergence measures how long a change a neighbour sends takes to
// reach both planes of a node holding a full table: the FIB (which the
// userspace plane forwards by) and the XDP program's mirror of it. The
// receiver R (set forward xdp on) learns MPLSNODE_BGP_SCALE_ROUTES routes
// (default 1,000,000) from the bulk feeder A, and a few from feeder B,
// whose networks the test changes (bgp.Speaker.SetNetworks). It logs:
//   - one withdrawal (B withdraws its one prefix), median and maximum over
//     MPLSNODE_BGP_WITHDRAWS rounds (default 100), from B's SetNetworks
//     call until R's FIB no longer routes the prefix, and until R's mirror
//     no longer does;
//   - a 10,000-prefix flap: B withdraws 10,000 prefixes, then advertises
//     them again;
//   - a peer reset: A stops, and with its session every one of its routes
//     goes.
//
// Each step is checked against the FIB's own lookup (the prefix routed
// by none, or the shorter cover), not timed against a target: the
// figures are logged. It takes minutes, so it runs only with
// MPLSNODE_BGP_SCALE=1.
func TestBGPConvergence(t *testing.T) {
	skipUnlessScale(t, "measure convergence at a full table")
	routes := envInt(t, "MPLSNODE_BGP_SCALE_ROUTES", 1_000_000)
	rounds := envInt(t, "MPLSNODE_BGP_WITHDRAWS", 100)
	nsR, nsA, nsB := netns.New(t, "bsr"), netns.New(t, "bsa"), netns.New(t, "bsb")
	vRA, vAR := netns.VethPair(t, nsR, nsA)
	vRB, vBR := netns.VethPair(t, nsR, nsB)
	r := startNode(t, nsR, "r.conf", fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.50.1/24 dev %[1]s
addr add 172.16.51.1/24 dev %[2]s
sysctl -w net.ipv4.ip_forward=1
set forward xdp on
bgp as 65001 router-id 172.16.50.1
bgp neighbor 172.16.50.2 remote-as 65002 family ipv4-labeled-unicast
bgp neighbor 172.16.51.2 remote-as 65003 family ipv4-labeled-unicast
`, vRA, vRB))
	a := startNode(t, nsA, "a.conf", feederConf(vAR, "172.16.50.2", "172.16.50.1", 65002, 1048575, routes, 11))
	b := startNode(t, nsB, "b.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.51.2/24 dev %[1]s
bgp as 65003 router-id 172.16.51.2
bgp label-range 16 100000
bgp neighbor 172.16.51.1 remote-as 65001 family ipv4-labeled-unicast
`, vBR))
	fib := func() *mpls.FIB { return r.Stack().Tables().FIB() }
	routed := func(f *mpls.FIB, p netip.Prefix) bool {
		e, ok := f.Lookup(p.Addr())
		return ok && e.Prefix == p
	}
	start := time.Now()
	waitUntil(t, 15*time.Minute, fmt.Sprintf("%d routes from A in R's FIB and mirror", routes), func() bool {
		return fib().Len() >= routes && r.XDPMirroredFIB() == fib()
	})
	t.Logf("%d routes in R's FIB and XDP mirror %v after the nodes started", routes, time.Since(start).Round(time.Millisecond))

	// changed waits until R's FIB and then its mirror agree with want on
	// every prefix of ps, and returns how long each took from t0.
	changed := func(t0 time.Time, ps []netip.Prefix, want bool) (inFIB, inMirror time.Duration) {
		t.Helper()
		deadline := t0.Add(2 * time.Minute)
		agree := func(f *mpls.FIB) bool {
			if f == nil {
				return false
			}
			for _, p := range ps {
				if routed(f, p) != want {
					return false
				}
			}
			return true
		}
		for !agree(fib()) {
			if time.Now().After(deadline) {
				t.Fatalf("R's FIB: %d prefixes not %v within 2 min", len(ps), map[bool]string{true: "routed", false: "withdrawn"}[want])
			}
			time.Sleep(100 * time.Microsecond)
		}
		inFIB = time.Since(t0)
		for !agree(r.XDPMirroredFIB()) {
			if time.Now().After(deadline) {
				t.Fatalf("R's XDP mirror: %d prefixes not %v within 2 min", len(ps), map[bool]string{true: "routed", false: "withdrawn"}[want])
			}
			time.Sleep(100 * time.Microsecond)
		}
		return inFIB, time.Since(t0)
	}
	nets := func(ps []netip.Prefix) []bgp.Network {
		out := make([]bgp.Network, len(ps))
		for i, p := range ps {
			out[i] = bgp.Network{Prefix: p, Mode: bgp.LabelFromRange}
		}
		return out
	}

	// One withdrawal, rounds times.
	one := []netip.Prefix{netip.MustParsePrefix("10.200.0.0/24")}
	var fibT, mirT []time.Duration
	for range rounds {
		if err := b.BGP().SetNetworks(nets(one)); err != nil {
			t.Fatal(err)
		}
		changed(time.Now(), one, true)
		t0 := time.Now()
		if err := b.BGP().SetNetworks(nil); err != nil {
			t.Fatal(err)
		}
		f, m := changed(t0, one, false)
		fibT, mirT = append(fibT, f), append(mirT, m)
	}
	t.Logf("one withdrawal at %d routes, %d rounds: FIB median %v max %v; XDP mirror median %v max %v", routes, rounds,
		medianDuration(fibT), slices.Max(fibT), medianDuration(mirT), slices.Max(mirT))

	// A 10,000-prefix flap.
	flap := make([]netip.Prefix, 10_000)
	for i := range flap {
		flap[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 201 + byte(i>>8>>8), byte(i >> 8), byte(i)}), 32)
	}
	t0 := time.Now()
	if err := b.BGP().SetNetworks(nets(flap)); err != nil {
		t.Fatal(err)
	}
	f, m := changed(t0, flap, true)
	t.Logf("10,000 prefixes advertised at %d routes: in the FIB after %v, in the XDP mirror after %v", routes, f, m)
	t0 = time.Now()
	if err := b.BGP().SetNetworks(nil); err != nil {
		t.Fatal(err)
	}
	f, m = changed(t0, flap, false)
	t.Logf("10,000 prefixes withdrawn at %d routes: out of the FIB after %v, out of the XDP mirror after %v", routes, f, m)

	// A peer reset: A goes, with every route it sent.
	sample := []netip.Prefix{netip.MustParsePrefix("11.0.0.0/24"), netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(11 + (routes-1)>>16), byte((routes - 1) >> 8), byte(routes - 1), 0}), 24)}
	t0 = time.Now()
	a.Close()
	waitUntil(t, 5*time.Minute, "A's routes out of R's FIB", func() bool { return fib().Len() == 0 })
	f = time.Since(t0)
	_, m = changed(t0, sample, false)
	waitUntil(t, 5*time.Minute, "R's mirror of the empty FIB", func() bool { return r.XDPMirroredFIB() == fib() })
	t.Logf("peer reset at %d routes: FIB empty after %v, XDP mirror after %v (the empty FIB mirrored after %v)", routes, f, m, time.Since(t0))
}

func envInt(t *testing.T, name string, dflt int) int {
	s := os.Getenv(name)
	if s == "" {
		return dflt
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return v
}

func medianDuration(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
