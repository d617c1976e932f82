package node_test

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/mpls"
)

// TestBGP6PE runs 6PE (RFC 4798) from BGP between two nodes on a link
// with IPv4 addresses only, each originating an IPv6 /48 (an address of
// it on lo): each advertises its network with the IPv4-mapped address of
// its end of the link as next hop (tshark decodes the UPDATE: AFI 2 SAFI
// 4, next hop ::ffff:172.16.58.x, the label), each installs the other's
// as a labelled route via the IPv4 next hop, and 1 MiB of TCP over IPv6
// crosses under the label (tshark: label over IPv6 on the link) and
// arrives whole.
//
// Bugs planted to check the test: no mapped next hop in bgpConfig (the
// IPv6 network is not advertised at all); the old family check in
// route() (the route is received, not installed).
func TestBGP6PE(t *testing.T) {
	netns.SkipUnlessRoot(t)
	wiretest.Need(t)
	ns1, ns2 := netns.New(t, "bl61"), netns.New(t, "bl62")
	wiretest.DisableIPv6(t, ns1)
	wiretest.DisableIPv6(t, ns2)
	v1, v2 := netns.VethPair(t, ns1, ns2)
	conf := func(dev, self, peer, lo, nw string, as, peerAS int) string {
		return fmt.Sprintf(`link add %[1]s type afpacket
addr add %[2]s/24 dev %[1]s
addr add %[4]s/128 dev lo
bgp as %[6]d router-id %[2]s
bgp neighbor %[3]s remote-as %[7]d hold-time 9
bgp network %[5]s
`, dev, self, peer, lo, nw, as, peerAS)
	}
	updates := wiretest.NewTap(t, ns2, v2, bgpSegment) // what ns2's end receives
	n1 := startNode(t, ns1, "6pe1.conf", conf(v1, "172.16.58.20", "172.16.58.21", "2001:db8:91::1", "2001:db8:91::/48", 65001, 65002))
	n2 := startNode(t, ns2, "6pe2.conf", conf(v2, "172.16.58.21", "172.16.58.20", "2001:db8:92::1", "2001:db8:92::/48", 65002, 65001))
	waitUntil(t, 60*time.Second, "the session", func() bool { return n1.BGP().Neighbors()[0].State == "established" })
	var l1 uint32
	for _, r := range n1.BGP().Routes() {
		if r.Prefix == "2001:db8:91::/48" {
			l1 = r.Labels[0]
		}
	}
	waitUntil(t, 20*time.Second, "the 6PE routes installed", func() bool {
		_, _, ok1 := ftnLabels(n1, "2001:db8:92::1")
		_, _, ok2 := ftnLabels(n2, "2001:db8:91::1")
		return ok1 && ok2
	})
	if l, nh, _ := ftnLabels(n2, "2001:db8:91::1"); !slices.Equal(l, []mpls.Label{mpls.Label(l1)}) || nh.String() != "172.16.58.20" {
		t.Errorf("ns2's route to 2001:db8:91::/48 pushes %v via %s, want [%d] via 172.16.58.20", l, nh, l1)
	}

	// The UPDATE, as tshark reads it.
	time.Sleep(time.Second)
	rows := wiretest.Decode(t, updates.Wait(updates.Count()), "bgp.update.path_attribute.mp_reach_nlri.afi",
		"bgp.update.path_attribute.mp_reach_nlri.safi", "bgp.update.path_attribute.mp_reach_nlri.next_hop.ipv6",
		"bgp.mp_reach_nlri_ipv6_prefix", "bgp.label_stack")
	seen := false
	for _, r := range rows {
		if strings.Contains(r[3], "2001:db8:91::") {
			seen = true
			if r[0] != "2" || r[1] != "4" || r[2] != "::ffff:172.16.58.20" || !strings.Contains(r[4], fmt.Sprint(l1)) {
				t.Errorf("tshark reads the UPDATE of 2001:db8:91::/48 as AFI %s SAFI %s next hop %s labels %s; want 2, 4, ::ffff:172.16.58.20, %d",
					r[0], r[1], r[2], r[4], l1)
			}
		}
	}
	if !seen {
		t.Errorf("tshark saw no MP_REACH of 2001:db8:91::/48 in %d segments: %v", len(rows), rows)
	}

	// TCP over IPv6 from ns2's node to ns1's, under the label.
	ln, err := n1.Stack().ListenTCP(netip.MustParseAddrPort("[2001:db8:91::1]:5001"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan [32]byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- [32]byte{}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(transferTimeout))
		h := sha256.New()
		io.Copy(h, c)
		got <- [32]byte(h.Sum(nil))
	}()
	frames := wiretest.NewTap(t, ns1, v1, wiretest.FirstN(20, func(f []byte) bool { return len(f) > 14 && f[12] == 0x88 && f[13] == 0x47 }))
	c := dialFrom(t, n2, "[2001:db8:91::1]:5001", 20*time.Second)
	want := send(t, c, 1<<20, nil)
	c.Close()
	select {
	case sum := <-got:
		if sum != want {
			t.Errorf("1 MiB over 6PE arrived with another SHA-256")
		}
	case <-time.After(time.Minute):
		t.Fatal("the transfer did not end")
	}
	for _, r := range wiretest.Decode(t, frames.Wait(20), "mpls.label", "mpls.bottom", "ipv6.dst") {
		if r[0] != fmt.Sprint(l1) || r[1] != "1" || r[2] != "2001:db8:91::1" {
			t.Errorf("tshark reads a frame to ns1 as label %s bottom %s IPv6 to %s; want %d, 1, 2001:db8:91::1", r[0], r[1], r[2], l1)
			break
		}
	}
}
