package node_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/node"
)

// TestBGPLabelledPath builds host A (ours) - LSR 1 (ours) - LSR 2 (ours) -
// host B (the Linux kernel) with no label route in any file: every label
// comes from BGP labeled unicast.
//
//   - LSR 2 originates B's subnet 172.16.12.0/24 with a label from its
//     range (pop-local: its stack forwards the IP packet to B); A
//     originates its own address.
//   - LSR 1 speaks to both (next-hop-self): it binds a local label for each
//     route it learned, swaps it to the learned one, and re-advertises.
//   - A pushes LSR 1's label; LSR 1 swaps it to LSR 2's; LSR 2 pops. The
//     way back is the same through LSR 1's label for A.
//
// A TCP transfer from A's stack to B's kernel arrives intact; withdrawing
// B's subnet on LSR 2 (a reload without the network line) removes the
// routes along the path and A's packets are dropped with a named counter;
// re-advertising it restores the path; closing LSR 2 takes its routes away
// at LSR 1 and A within the hold time.
//
// Bugs planted to check the test: re-advertising with the received label
// instead of a local one (readvertise using c.labels) makes A push LSR 2's
// label and fails the label check; not removing the ILM swap when the
// route goes (readvertise's DelILM) leaves LSR 1's entry and fails the
// withdrawal check.
func TestBGPLabelledPath(t *testing.T) {
	netns.SkipUnlessRoot(t)
	nsA, ns1, ns2, nsB := netns.New(t, "la"), netns.New(t, "l1"), netns.New(t, "l2"), netns.New(t, "lb")
	a1, l1a := netns.VethPair(t, nsA, ns1)
	l1b, l2a := netns.VethPair(t, ns1, ns2)
	l2b, b2 := netns.VethPair(t, ns2, nsB)
	nsB.MustExec("ip", "addr", "add", "172.16.12.13/24", "dev", b2)
	nsB.MustExec("ip", "route", "add", "172.16.10.0/24", "via", "172.16.12.12")

	confA := fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.10.10/24 dev %[1]s
bgp as 65001 router-id 172.16.10.10
bgp neighbor 172.16.10.11 remote-as 65010 family ipv4-labeled-unicast hold-time 9
bgp network 172.16.10.10/32
`, a1)
	conf1 := fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.10.11/24 dev %[1]s
addr add 172.16.11.11/24 dev %[2]s
bgp as 65010 router-id 172.16.11.11
bgp label-range 17000 17999
bgp neighbor 172.16.10.10 remote-as 65001 family ipv4-labeled-unicast next-hop-self hold-time 9
bgp neighbor 172.16.11.12 remote-as 65020 family ipv4-labeled-unicast next-hop-self hold-time 9
`, l1a, l1b)
	conf2 := fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.11.12/24 dev %[1]s
addr add 172.16.12.12/24 dev %[2]s
bgp as 65020 router-id 172.16.12.12
bgp label-range 18000 18999
bgp neighbor 172.16.11.11 remote-as 65010 family ipv4-labeled-unicast hold-time 9
bgp network 172.16.12.0/24
`, l2a, l2b)
	nA := startNode(t, nsA, "a.conf", confA)
	n1 := startNode(t, ns1, "lsr1.conf", conf1)
	n2 := startNode(t, ns2, "lsr2.conf", conf2)

	waitUntil(t, 90*time.Second, "the labelled path both ways", func() bool {
		_, _, there := ftnLabels(nA, "172.16.12.13")
		_, _, back := ftnLabels(n2, "172.16.10.10")
		return there && back
	})
	// A pushes LSR 1's label, LSR 1 swaps it to LSR 2's, LSR 2 pops.
	pushA, nhA, _ := ftnLabels(nA, "172.16.12.13")
	if len(pushA) != 1 || pushA[0] < 17000 || pushA[0] > 17999 || nhA.String() != "172.16.10.11" {
		t.Fatalf("A pushes %v via %s towards B; want one label of LSR 1's range via 172.16.10.11", pushA, nhA)
	}
	swap, ok := n1.Stack().Tables().ILM().Lookup(pushA[0])
	if !ok || swap.Action != mpls.ILMSwap || len(swap.OutLabels) != 1 || swap.OutLabels[0] < 18000 || swap.OutLabels[0] > 18999 || swap.NextHop.String() != "172.16.11.12" {
		t.Fatalf("LSR 1's ILM for %d: %+v %v; want a swap to one of LSR 2's labels via 172.16.11.12", pushA[0], swap, ok)
	}
	if pop, ok := n2.Stack().Tables().ILM().Lookup(swap.OutLabels[0]); !ok || pop.Action != mpls.ILMPopLocal {
		t.Fatalf("LSR 2's ILM for %d: %+v %v; want pop-local", swap.OutLabels[0], pop, ok)
	}

	// transfer sends size bytes from A to B's kernel over the LSP, mid
	// (when not nil) running halfway, within two minutes.
	transfer := func(size int64, mid func()) {
		t.Helper()
		addr, sums := kernelSink(t, nsB, "172.16.12.13:0")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, err := nA.Stack().DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("dial B: %v", err)
		}
		c.SetDeadline(time.Now().Add(2 * time.Minute))
		want := send(t, c, size, mid)
		select {
		case r := <-sums:
			if r.err != nil || r.n != size || r.sum != want {
				t.Fatalf("B received %d bytes (err %v), SHA-256 equal %v; want %d", r.n, r.err, r.sum == want, size)
			}
		case <-ctx.Done():
			t.Fatalf("the transfer did not finish; LSR 1 %+v", n1.Report().LabelSwitch)
		}
	}
	const size = 64 << 20
	start := time.Now()
	transfer(size, nil)
	t.Logf("%d MiB A -> B over BGP-learned labels in %v", size>>20, time.Since(start).Round(time.Millisecond))
	// Swapped by either plane: a forwarding node runs the XDP program
	// where it attaches (the default).
	r1 := n1.Report()
	swapped := r1.LabelSwitch.Swapped
	if r1.XDP != nil {
		swapped += r1.XDP.Swapped
	}
	if swapped < size/1500 {
		t.Errorf("LSR 1 swapped %d frames (userspace %d); want at least %d", swapped, r1.LabelSwitch.Swapped, size/1500)
	}

	reload := func(n *node.Node, name, conf string) {
		t.Helper()
		cfg, err := config.Parse(name, strings.NewReader(conf))
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	// Halfway through a second transfer, withdraw B's subnet at LSR 2:
	// the routes go along the path and the connection's segments are
	// dropped, counted by name; re-advertise it and the same connection
	// finishes intact.
	// A's packets without a route are dropped by A's FIB (no_route),
	// labelled ones in flight by LSR 1 (no_ilm_entry), plain ones that
	// reach LSR 1 by its forwarding plane.
	drops := func() uint64 {
		r := n1.Report()
		var d uint64
		for _, l := range r.Links {
			d += l.Drops["no_ilm_entry"]
		}
		for _, l := range nA.Report().Links {
			d += l.Drops["no_route"]
		}
		return d + r.IP.Drops["forward_unroutable"] + r.LabelSwitch.Drops["no_route"]
	}
	transfer(size, func() {
		before := drops()
		reload(n2, "lsr2.conf", strings.Replace(conf2, "bgp network 172.16.12.0/24\n", "", 1))
		waitUntil(t, 30*time.Second, "the withdrawal to reach A", func() bool {
			_, _, ok := ftnLabels(nA, "172.16.12.13")
			return !ok
		})
		if _, ok := n1.Stack().Tables().ILM().Lookup(pushA[0]); ok {
			t.Errorf("LSR 1 still swaps label %d after the withdrawal", pushA[0])
		}
		// A has no route to B: its FIB drops the retransmissions;
		// labelled ones in flight find no ILM entry at LSR 1.
		waitUntil(t, 20*time.Second, "LSR 1 to count the dropped segments", func() bool { return drops() > before })
		r := n1.Report()
		t.Logf("withdrawn: A and LSR 1 dropped %d (forward_unroutable %d)", drops()-before, r.IP.Drops["forward_unroutable"])
		reload(n2, "lsr2.conf", conf2)
		waitUntil(t, 30*time.Second, "the path to come back", func() bool {
			_, _, ok := ftnLabels(nA, "172.16.12.13")
			return ok
		})
	})

	// Lose LSR 2: its routes go at LSR 1 and A within the hold time (9 s).
	lost := time.Now()
	n2.Close()
	waitUntil(t, 20*time.Second, "LSR 2's routes to go", func() bool {
		_, _, ok := ftnLabels(nA, "172.16.12.13")
		return !ok
	})
	t.Logf("routes gone %v after LSR 2 closed", time.Since(lost).Round(time.Millisecond))
	if n := slices.IndexFunc(n1.BGP().Neighbors(), func(s bgp.NeighborStatus) bool { return s.State == "established" }); n != 0 {
		t.Errorf("LSR 1's established neighbour is %d, want only A (0)", n)
	}
}
