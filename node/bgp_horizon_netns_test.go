package node_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/node"
)

// gobgpdPeerConf is a gobgpd config (AS as, router-id id) with one
// neighbour, the node at nodeAddr in AS peerAS, hold time 9 s, for the
// given families (gobgpd's names; IPv4 labeled unicast when none).
func gobgpdPeerConf(as uint32, id, nodeAddr string, peerAS uint32, families ...string) string {
	if len(families) == 0 {
		families = []string{"ipv4-labelled-unicast"}
	}
	var afiSafis strings.Builder
	for _, f := range families {
		fmt.Fprintf(&afiSafis, "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = %q\n", f)
	}
	return fmt.Sprintf(`[global.config]
  as = %d
  router-id = %q
  port = 179
[[neighbors]]
  [neighbors.config]
    neighbor-address = %q
    peer-as = %d
  [neighbors.timers.config]
    connect-retry = 1
    hold-time = 9
    keepalive-interval = 3
`, as, id, nodeAddr, peerAS) + afiSafis.String()
}

// adjPath is a path of `gobgp neighbor ADDR adj-in -j` (gobgpd 3.x): what
// the neighbour ADDR sent, as gobgpd decoded it.
type adjPath struct {
	Nlri struct {
		Prefix string   `json:"prefix"`
		Labels []uint32 `json:"labels"`
	} `json:"nlri"`
	Attrs []json.RawMessage `json:"attrs"`
}

// adjIn returns what the node (at nodeAddr) sent gobgpd, prefix -> path.
func (g *gobgpd) adjIn(nodeAddr string) map[string]adjPath {
	g.t.Helper()
	out := g.cli("neighbor", nodeAddr, "adj-in", "-a", "ipv4-mpls", "-j")
	var rib map[string][]adjPath
	if s := strings.TrimSpace(out); s == "" || s == "null" {
		return map[string]adjPath{}
	}
	if err := json.Unmarshal([]byte(out), &rib); err != nil {
		g.t.Fatalf("adj-in JSON: %v\n%s", err, out)
	}
	m := map[string]adjPath{}
	for p, ps := range rib {
		if len(ps) > 0 {
			m[p] = ps[0]
		}
	}
	return m
}

// attr returns the path's attribute of the given type code as JSON, or
// "" without one.
func (p adjPath) attr(code int) string {
	for _, a := range p.Attrs {
		var h struct {
			Type int `json:"type"`
		}
		if json.Unmarshal(a, &h) == nil && h.Type == code {
			return string(a)
		}
	}
	return ""
}

// TestBGPSplitHorizon runs the node (AS 65001) with three gobgpd peers
// from Debian, each with next-hop-self on the node's side: A and C
// internal (AS 65001), B external (AS 65002). What each peer received
// from the node is read from its own Adj-RIB-In (gobgpd's decoding, not
// ours). RFC 4271 §9.2: a route learned from internal A reaches external
// B (with the node as next hop and its local label, A's ORIGIN kept, the
// node's AS prepended, no community of the node's) but neither A itself
// nor internal C; a route learned from B reaches A and C but not B.
//
// Bugs planted to check the test: no split-horizon statements in the
// export policy sends 10.51.0.0/16 back to A and to C; ORIGIN IGP on
// every re-advertised path fails B's ORIGIN; no community removal shows
// the node's tags at B.
func TestBGPSplitHorizon(t *testing.T) {
	netns.SkipUnlessRoot(t)
	ns0 := netns.New(t, "bl0")
	type peer struct {
		name, addr, node string
		as               uint32
		ns               *netns.NS
		dev              string
		g                *gobgpd
	}
	peers := []*peer{
		{name: "A", addr: "172.16.51.21", node: "172.16.51.20", as: 65001},
		{name: "B", addr: "172.16.52.21", node: "172.16.52.20", as: 65002},
		{name: "C", addr: "172.16.53.21", node: "172.16.53.20", as: 65001},
	}
	var conf strings.Builder
	for _, p := range peers {
		p.ns = netns.New(t, "bl"+p.name)
		var v0 string
		v0, p.dev = netns.VethPair(t, ns0, p.ns)
		p.ns.MustExec("ip", "addr", "add", p.addr+"/24", "dev", p.dev)
		fmt.Fprintf(&conf, "link add %[1]s type afpacket\naddr add %[2]s/24 dev %[1]s\n", v0, p.node)
	}
	conf.WriteString("bgp as 65001 router-id 172.16.51.20\nbgp label-range 16000 16999\n")
	for _, p := range peers {
		fmt.Fprintf(&conf, "bgp neighbor %s remote-as %d family ipv4-labeled-unicast next-hop-self hold-time 9\n", p.addr, p.as)
	}
	for _, p := range peers {
		p.g = startGoBGPd(t, p.ns, gobgpdPeerConf(p.as, p.addr, p.node, 65001))
	}
	n := startNode(t, ns0, "horizon.conf", conf.String())
	waitUntil(t, 60*time.Second, "the three sessions", func() bool {
		for _, nb := range n.BGP().Neighbors() {
			if nb.State != "established" {
				return false
			}
		}
		return true
	})
	a, b, c := peers[0], peers[1], peers[2]
	a.g.cli("global", "rib", "-a", "ipv4-mpls", "add", "10.51.0.0/16", "100", "nexthop", a.addr, "origin", "incomplete")
	b.g.cli("global", "rib", "-a", "ipv4-mpls", "add", "10.52.0.0/16", "200", "nexthop", b.addr)

	// B gets A's route, re-advertised by the node.
	var atB adjPath
	waitUntil(t, 20*time.Second, "10.51.0.0/16 at B", func() bool {
		var ok bool
		atB, ok = b.g.adjIn(b.node)["10.51.0.0/16"]
		return ok
	})
	local := uint32(0)
	for _, r := range n.BGP().Routes() {
		if r.Prefix == "10.51.0.0/16" {
			local = r.LocalLabel
		}
	}
	if !slices.Equal(atB.Nlri.Labels, []uint32{local}) || local < 16000 {
		t.Errorf("B has 10.51.0.0/16 with labels %v, want the node's local label [%d]", atB.Nlri.Labels, local)
	}
	if o := atB.attr(1); !strings.Contains(o, `"value":2`) {
		t.Errorf("B has ORIGIN %s, want A's incomplete (2)", o)
	}
	if as := atB.attr(2); !strings.Contains(as, "65001") {
		t.Errorf("B has AS_PATH %s, want the node's 65001", as)
	}
	if lc := atB.attr(32); lc != "" {
		t.Errorf("B has the node's large communities %s", lc)
	}
	if mp := atB.attr(14); !strings.Contains(mp, b.node) {
		t.Errorf("B has MP_REACH %s, want next hop %s", mp, b.node)
	}
	// A and C get B's route.
	for _, p := range []*peer{a, c} {
		waitUntil(t, 20*time.Second, "10.52.0.0/16 at "+p.name, func() bool {
			_, ok := p.g.adjIn(p.node)["10.52.0.0/16"]
			return ok
		})
	}
	// Once both have gone out (and a keepalive interval more), A's route
	// went neither back to A nor to C, and B's not back to B.
	time.Sleep(4 * time.Second)
	if ps := a.g.adjIn(a.node); len(ps) != 1 {
		t.Errorf("A received %v from the node, want 10.52.0.0/16 only", keys(ps))
	}
	if ps := c.g.adjIn(c.node); len(ps) != 1 {
		t.Errorf("C (internal) received %v from the node, want 10.52.0.0/16 only", keys(ps))
	}
	if ps := b.g.adjIn(b.node); len(ps) != 1 {
		t.Errorf("B received %v from the node, want 10.51.0.0/16 only", keys(ps))
	}
	if l, _, ok := ftnLabels(n, "10.51.1.1"); !ok || !slices.Equal(l, []mpls.Label{100}) {
		t.Errorf("10.51.0.0/16 installed %v (%v), want push [100]", l, ok)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// bgpSegment reports whether an Ethernet frame is an IPv4 TCP segment to
// or from port 179 with a payload.
func bgpSegment(f []byte) bool {
	if len(f) < 14+20+20 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[14+9] != 6 {
		return false
	}
	ihl := int(f[14]&0xf) * 4
	tot := int(binary.BigEndian.Uint16(f[16:]))
	tcp := 14 + ihl
	if len(f) < tcp+20 {
		return false
	}
	sp, dp := binary.BigEndian.Uint16(f[tcp:]), binary.BigEndian.Uint16(f[tcp+2:])
	off := int(f[tcp+12]>>4) * 4
	return (sp == 179 || dp == 179) && tot > ihl+off
}

// TestBGPFRRNoEcho runs the node with FRR's bgpd (8.4, external) as a
// next-hop-self neighbour and decodes with tshark every BGP message the
// node sends FRR. FRR's own route 10.77.0.0/16 is installed, but neither
// re-advertised to FRR (split horizon) nor withdrawn towards it (no
// MP_UNREACH at all: FRR never got it from the node), while the node's
// network goes out.
//
// Bug planted to check the test: received paths accepted into GoBGP's RIB
// (no import policy) makes GoBGP send FRR an MP_UNREACH for 10.77.0.0/16
// as soon as the node's re-advertisement becomes best.
func TestBGPFRRNoEcho(t *testing.T) {
	netns.SkipUnlessRoot(t)
	wiretest.Need(t)
	ns0, nsF := netns.New(t, "blf0"), netns.New(t, "blff")
	v0, vF := netns.VethPair(t, ns0, nsF)
	nsF.MustExec("ip", "addr", "add", "172.16.54.21/24", "dev", vF)
	startFRR(t, nsF, "172.16.54")
	tap := wiretest.NewTap(t, nsF, vF, bgpSegment) // what FRR receives
	n := startNode(t, ns0, "frr-echo.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.54.20/24 dev %[1]s
bgp as 65001 router-id 172.16.54.20
bgp neighbor 172.16.54.21 remote-as 65002 family ipv4-labeled-unicast next-hop-self hold-time 9
bgp network 10.10.10.10/32
`, v0))
	waitUntil(t, 60*time.Second, "the session with bgpd", func() bool {
		return n.BGP().Neighbors()[0].State == "established"
	})
	want := "10.77.0.0/16 via 172.16.54.21 dev " + v0 + " proto bgp metric 20"
	waitUntil(t, 20*time.Second, "FRR's 10.77.0.0/16 installed", func() bool {
		return slices.ContainsFunc(n.Routes(), func(r node.RouteEntry) bool { return r.String() == want })
	})
	// Two keepalive intervals for whatever the node would send.
	time.Sleep(7 * time.Second)
	rows := wiretest.Decode(t, tap.Wait(tap.Count()), "bgp.type", "bgp.mp_reach_nlri_ipv4_prefix", "bgp.mp_unreach_nlri_ipv4_prefix")
	reached := false
	for _, r := range rows {
		if strings.Contains(r[1], "10.10.10.10") {
			reached = true
		}
		if r[2] != "" {
			t.Errorf("the node sent FRR an MP_UNREACH for %s (message types %s)", r[2], r[0])
		}
		if strings.Contains(r[1], "10.77.0.0") {
			t.Errorf("the node re-advertised FRR's own 10.77.0.0/16 to FRR")
		}
	}
	if !reached {
		t.Errorf("tshark saw no MP_REACH of the node's 10.10.10.10/32 in %d segments: %v", len(rows), rows)
	}
}
