package bgp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/mpls"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// fakeTables resolves from a fixed map and records what was applied.
type fakeTables struct {
	res     map[netip.Addr]Resolution
	applied []Changes
}

func (f *fakeTables) Resolve(nh netip.Addr) (Resolution, bool) {
	r, ok := f.res[nh]
	return r, ok
}

func (f *fakeTables) Apply(ch Changes) error {
	f.applied = append(f.applied, ch)
	return nil
}

// TestRouteLabels checks which received label stacks become which FTN
// entries, and the reason given for those that do not. The expectations
// follow RFC 3032 §2.1 (reserved labels), RFC 8277 §2 (implicit null:
// push nothing) and RFC 4798 (6PE: an IPv6 prefix over an IPv4 next hop,
// under a label), not this package's code. Planting "l ==
// labelImplicitNull -> push it" fails the implicit null case; dropping
// the reserved check fails the router alert and entropy label indicator
// cases; the old family check (res.Via.Is4() != p.Addr().Is4() -> nil)
// fails the 6PE cases.
func TestRouteLabels(t *testing.T) {
	nh := netip.MustParseAddr("172.16.20.21")
	far := netip.MustParseAddr("192.0.2.1")
	nh6 := netip.MustParseAddr("2001:db8:20::21")
	tab := &fakeTables{res: map[netip.Addr]Resolution{
		nh:  {Via: nh, Device: "veth0"},
		far: {Via: nh, Device: "veth0", Labels: []mpls.Label{500}}, // behind a labelled route
		nh6: {Via: nh6, Device: "veth0"},
	}}
	s := &Speaker{tables: tab}
	p4 := netip.MustParsePrefix("10.99.0.0/16")
	p6 := netip.MustParsePrefix("2001:db8:99::/48")
	for _, tc := range []struct {
		name   string
		p      netip.Prefix
		nh     netip.Addr
		labels []uint32
		want   []mpls.Label // nil with ok false: not installed
		ok     bool
		why    Reason // when not installed
	}{
		{"one label", p4, nh, []uint32{100}, []mpls.Label{100}, true, 0},
		{"two labels", p4, nh, []uint32{200, 300}, []mpls.Label{200, 300}, true, 0},
		{"implicit null", p4, nh, []uint32{3}, nil, true, 0},
		{"IPv4 explicit null", p4, nh, []uint32{0}, []mpls.Label{0}, true, 0},
		{"IPv6 explicit null under IPv4", p4, nh, []uint32{2}, nil, false, ReasonReservedLabel},
		{"IPv6 explicit null", p6, nh6, []uint32{2}, []mpls.Label{2}, true, 0},
		{"router alert", p4, nh, []uint32{1}, nil, false, ReasonReservedLabel},
		{"entropy label indicator", p4, nh, []uint32{7}, nil, false, ReasonReservedLabel},
		{"past 20 bits", p4, nh, []uint32{1 << 20}, nil, false, ReasonInvalidLabel},
		{"explicit null on top", p4, nh, []uint32{0, 100}, nil, false, ReasonReservedLabel},
		{"recursive", p4, far, []uint32{100}, []mpls.Label{500, 100}, true, 0},
		{"unresolved", p4, netip.MustParseAddr("198.51.100.1"), []uint32{100}, nil, false, ReasonUnresolvedNextHop},
		{"next hop inside its own route", netip.MustParsePrefix("192.0.2.0/24"), far, []uint32{100}, nil, false, ReasonNextHopInOwnRoute},
		{"6PE", p6, nh, []uint32{100}, []mpls.Label{100}, true, 0},
		{"6PE, IPv6 explicit null", p6, nh, []uint32{2}, []mpls.Label{2}, true, 0},
		{"6PE over a labelled route", p6, far, []uint32{100}, []mpls.Label{500, 100}, true, 0},
		{"6PE, implicit null", p6, nh, []uint32{3}, nil, false, ReasonSixPEWithoutLabel},
		{"6PE, implicit null over a labelled route", p6, far, []uint32{3}, nil, false, ReasonSixPEWithoutLabel},
		{"IPv4 route via an IPv6 next hop", p4, nh6, []uint32{100}, nil, false, ReasonNextHopFamily},
		{"too deep", p4, far, []uint32{100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115}, nil, false, ReasonStackTooDeep},
		{"connected next hop inside its own route", netip.MustParsePrefix("172.16.20.21/32"), nh, []uint32{100}, []mpls.Label{100}, true, 0},
	} {
		e, why := s.route(tc.p, cand{labels: tc.labels, nh: tc.nh})
		if (e != nil) != tc.ok || !tc.ok && why != tc.why || tc.ok && why != ReasonNone {
			t.Errorf("%s: got %+v (%v), want installed %v (%v)", tc.name, e, why, tc.ok, tc.why)
			continue
		}
		if e != nil && !slices.Equal(e[0].Labels, tc.want) {
			t.Errorf("%s: push %v, want %v", tc.name, e[0].Labels, tc.want)
		}
	}
}

// TestBestOf: the shortest AS path wins, then the first neighbour.
func TestBestOf(t *testing.T) {
	// In arrival order, not the neighbours' order: the tie between 1 and
	// 2 goes to the first configured whichever came first.
	c := candSet{
		{peer: 2, asPath: []uint32{6, 7}},
		{peer: 0, asPath: []uint32{1, 2, 3}},
		{peer: 1, asPath: []uint32{4, 5}},
	}
	if got := bestOf(c); got != 1 {
		t.Errorf("best %d, want 1", got)
	}
	c.del(1)
	if got := bestOf(c); got != 2 {
		t.Errorf("best %d after 1 withdrew, want 2", got)
	}
	c.set(2, cand{asPath: []uint32{6, 7, 8, 9}})
	if got := bestOf(c); got != 0 {
		t.Errorf("best %d after 2 lengthened its path, want 0", got)
	}
	if c.del(1) || !c.del(0) || !c.del(2) || c != nil {
		t.Errorf("deletions: left %v, want none and a nil set", c)
	}
	if got := bestOf(candSet{}); got != -1 {
		t.Errorf("best of none %d, want -1", got)
	}
}

// TestLabelPool hands out the whole range, refuses more, gives a prefix
// back the label it held, keeps a held label from other prefixes until
// its hold ends or nothing else is left. Planting "release = put" (no
// hold) fails the flap's labels; planting "getFor ignores held" fails
// the same.
func TestLabelPool(t *testing.T) {
	now := time.Unix(1e9, 0)
	p := newLabelPool(16000, 16005)
	p.now = func() time.Time { return now }
	pfx := func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16) }
	for i, want := 0, mpls.Label(16000); want <= 16003; i, want = i+1, want+1 {
		if l, err := p.getFor(pfx(i)); err != nil || l != want {
			t.Fatalf("getFor %d: %d, %v; want %d", i, l, err, want)
		}
	}
	// A flap of four, released and bound again in the same order
	// (last-in first-out reuse would give each another's label, fresh
	// labels first would give 16004 and on): each prefix gets its own
	// label back.
	for i := range 4 {
		p.release(pfx(i), mpls.Label(16000+i))
	}
	if p.used != 4 {
		t.Errorf("used %d while held, want 4", p.used)
	}
	for i := range 4 {
		if l, err := p.getFor(pfx(i)); err != nil || l != mpls.Label(16000+i) {
			t.Errorf("after the flap, %s got %d %v; want %d", pfx(i), l, err, 16000+i)
		}
	}
	for i, want := 4, mpls.Label(16004); want <= 16005; i, want = i+1, want+1 {
		if l, err := p.getFor(pfx(i)); err != nil || l != want {
			t.Fatalf("getFor %d: %d, %v; want %d", i, l, err, want)
		}
	}
	if _, err := p.getFor(pfx(9)); err != errLabelsExhausted {
		t.Fatalf("getFor past the range: %v", err)
	}
	// Held for 10.1/16: a new prefix takes it only when nothing else is
	// left, and a free one first once the hold ends.
	p.release(pfx(1), 16001)
	if l, err := p.getFor(pfx(7)); err != nil || l != 16001 {
		t.Errorf("with the range full, a new prefix got %d %v; want the held 16001", l, err)
	}
	p.release(pfx(7), 16001)
	p.release(pfx(2), 16002)
	now = now.Add(labelHoldDown)
	p.expire(now)
	if p.used != 4 || len(p.held) != 0 {
		t.Errorf("after the hold: used %d, held %v; want 4 and none", p.used, p.held)
	}
	if l, err := p.getFor(pfx(8)); err != nil || (l != 16001 && l != 16002) || p.used != 5 || p.size() != 6 {
		t.Errorf("after the hold: %d %v used %d size %d", l, err, p.used, p.size())
	}
}

// failingTransport refuses to listen.
type failingTransport struct{}

func (failingTransport) ListenTCP(netip.AddrPort) (net.Listener, error) {
	return nil, errors.New("no stack")
}

func (failingTransport) DialTCPFrom(context.Context, netip.AddrPort, netip.AddrPort) (net.Conn, error) {
	return nil, errors.New("no stack")
}

// TestNewFailsCleanly: when the sessions cannot listen, New returns the
// error (naming the address) and stops GoBGP, within a deadline.
func TestNewFailsCleanly(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		_, err := New(Config{AS: 65001, RouterID: netip.MustParseAddr("10.0.0.1"), LabelLow: 16000, LabelHigh: 16999,
			Neighbors: []Neighbor{{Address: netip.MustParseAddr("10.0.0.2"), RemoteAS: 65002, Local: netip.MustParseAddr("10.0.0.1")}},
		}, &fakeTables{}, failingTransport{}, slog.New(slog.DiscardHandler))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "10.0.0.1 port 179") {
			t.Errorf("got %v, want the listen error naming 10.0.0.1 port 179", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("New did not return")
	}
}

// refusingTables refuses any batch that adds a route to refuse.
type refusingTables struct {
	fakeTables
	refuse netip.Prefix
}

func (f *refusingTables) Apply(ch Changes) error {
	for _, e := range ch.AddRoutes {
		if e.Prefix == f.refuse {
			return errors.New("refused")
		}
	}
	return f.fakeTables.Apply(ch)
}

// TestProcessRefusedRoute: one route the tables refuse does not keep the
// others of its batch out, and is not counted as installed. Planting
// "apply = one Apply" leaves 10.98.0.0/16 out.
func TestProcessRefusedRoute(t *testing.T) {
	nh := netip.MustParseAddr("172.16.20.21")
	bad := netip.MustParsePrefix("10.99.0.0/16")
	tab := &refusingTables{fakeTables: fakeTables{res: map[netip.Addr]Resolution{nh: {Via: nh, Device: "veth0"}}}, refuse: bad}
	s := &Speaker{tables: tab, rib: map[netip.Prefix]*dest{}, peers: make([]peerState, 1), log: slog.New(slog.DiscardHandler),
		cfg: Config{Neighbors: []Neighbor{{Address: nh}}}}
	good := netip.MustParsePrefix("10.98.0.0/16")
	s.process([]event{
		{peer: 0, prefix: bad, cand: cand{labels: []uint32{100}, nh: nh, family: IPv4LabeledUnicast}},
		{peer: 0, prefix: good, cand: cand{labels: []uint32{200}, nh: nh, family: IPv4LabeledUnicast}},
	})
	var written []netip.Prefix
	for _, ch := range tab.applied {
		for _, e := range ch.AddRoutes {
			written = append(written, e.Prefix)
		}
	}
	if !slices.Contains(written, good) || slices.Contains(written, bad) {
		t.Errorf("written %v; want %s and not %s", written, good, bad)
	}
	if s.rib[bad].installed != nil || s.rib[good].installed == nil || s.peers[0].installed[0] != 1 {
		t.Errorf("installed: bad %v, good %v, count %d; want nil, set, 1", s.rib[bad].installed, s.rib[good].installed, s.peers[0].installed[0])
	}
}

// TestProcessMultipleLabels: without the Multiple Labels capability (RFC
// 8277 §2.1) a route with a label stack is treated as withdrawn (RFC 7606
// §2): not held, and a single-label route it replaces goes; it is counted
// under multiple_labels. Planting "no check in process" installs the
// stack.
func TestProcessMultipleLabels(t *testing.T) {
	nh := netip.MustParseAddr("172.16.20.21")
	tab := &fakeTables{res: map[netip.Addr]Resolution{nh: {Via: nh, Device: "veth0"}}}
	s := &Speaker{tables: tab, rib: map[netip.Prefix]*dest{}, peers: make([]peerState, 1), log: slog.New(slog.DiscardHandler),
		cfg: Config{AS: 65001, Neighbors: []Neighbor{{Address: nh, RemoteAS: 65002}}}}
	p := netip.MustParsePrefix("10.98.0.0/16")
	s.process([]event{{peer: 0, prefix: p, cand: cand{labels: []uint32{200}, nh: nh, family: IPv4LabeledUnicast}}})
	if d := s.rib[p]; d == nil || d.installed == nil {
		t.Fatalf("one label: not installed")
	}
	s.process([]event{{peer: 0, prefix: p, cand: cand{labels: []uint32{200, 300, 400}, nh: nh, family: IPv4LabeledUnicast}}})
	if d := s.rib[p]; d != nil {
		t.Errorf("three labels: still held %+v", d)
	}
	if n := s.refused.count[ReasonMultipleLabels]; n != 1 {
		t.Errorf("refused multiple_labels %d, want 1", n)
	}
	if s.peers[0].received[0] != 0 {
		t.Errorf("accepted count %d, want 0", s.peers[0].received[0])
	}
	last := tab.applied[len(tab.applied)-1]
	if !slices.Equal(last.DelRoutes, []netip.Prefix{p}) {
		t.Errorf("last batch %+v, want the route deleted", last)
	}
}

// TestReadvertiseTags: a re-advertised path keeps the received ORIGIN and
// AS path, carries the split-horizon tags of the neighbour it came from
// (and of iBGP when that one is internal), keeps its label, and is not
// handed to GoBGP again when nothing changed. Planting "origin IGP" or
// "no tags" fails it.
func TestReadvertiseTags(t *testing.T) {
	nh := netip.MustParseAddr("172.16.20.21")
	tab := &fakeTables{res: map[netip.Addr]Resolution{nh: {Via: nh, Device: "veth0"}}}
	s := &Speaker{tables: tab, rib: map[netip.Prefix]*dest{}, peers: make([]peerState, 2), log: slog.New(slog.DiscardHandler),
		nhs: true, pool: newLabelPool(16000, 16099),
		cfg: Config{AS: 65001, Neighbors: []Neighbor{{Address: netip.MustParseAddr("172.16.30.21"), RemoteAS: 65002}, {Address: nh, RemoteAS: 65001}}}}
	p := netip.MustParsePrefix("10.98.0.0/16")
	s.rib[p] = &dest{best: -1, cands: candSet{{peer: 1, labels: []uint32{200}, nh: nh, family: IPv4LabeledUnicast,
		origin: gbgp.BGP_ORIGIN_ATTR_TYPE_INCOMPLETE, asPath: []uint32{65003}}}}
	var ch Changes
	var adds, dels []*apiutil.Path
	s.update(p, &ch, &adds, &dels)
	if len(adds) != 1 || len(dels) != 0 {
		t.Fatalf("adds %d dels %d, want 1 and 0", len(adds), len(dels))
	}
	var origin uint8 = 255
	var tags []string
	var asPath []uint32
	for _, a := range adds[0].Attrs {
		switch a := a.(type) {
		case *gbgp.PathAttributeOrigin:
			origin = a.Value
		case *gbgp.PathAttributeLargeCommunities:
			for _, c := range a.Values {
				tags = append(tags, c.String())
			}
		case *gbgp.PathAttributeAsPath:
			for _, seg := range a.Value {
				asPath = append(asPath, seg.GetAS()...)
			}
		}
	}
	if origin != gbgp.BGP_ORIGIN_ATTR_TYPE_INCOMPLETE || !slices.Equal(tags, []string{"65001:1:2", "65001:2:0"}) || !slices.Equal(asPath, []uint32{65003}) {
		t.Errorf("origin %d, tags %v, AS path %v; want 2 (incomplete), [65001:1:2 65001:2:0], [65003]", origin, tags, asPath)
	}
	local := s.rib[p].local
	adds = nil
	s.update(p, &ch, &adds, &dels)
	if len(adds) != 0 || s.rib[p].local != local {
		t.Errorf("unchanged route: %d adds, label %d (was %d); want none, the same", len(adds), s.rib[p].local, local)
	}
}
