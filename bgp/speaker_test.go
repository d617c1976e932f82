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
// entries. The expectations follow RFC 3032 §2.1 (reserved labels) and
// RFC 8277 §2 (implicit null: push nothing), not this package's code.
// Planting "l == labelImplicitNull -> push it" fails the implicit null
// case; dropping the reserved check fails the router alert case.
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
	}{
		{"one label", p4, nh, []uint32{100}, []mpls.Label{100}, true},
		{"two labels", p4, nh, []uint32{200, 300}, []mpls.Label{200, 300}, true},
		{"implicit null", p4, nh, []uint32{3}, nil, true},
		{"IPv4 explicit null", p4, nh, []uint32{0}, []mpls.Label{0}, true},
		{"IPv6 explicit null under IPv4", p4, nh, []uint32{2}, nil, false},
		{"IPv6 explicit null", p6, nh6, []uint32{2}, []mpls.Label{2}, true},
		{"router alert", p4, nh, []uint32{1}, nil, false},
		{"explicit null on top", p4, nh, []uint32{0, 100}, nil, false},
		{"recursive", p4, far, []uint32{100}, []mpls.Label{500, 100}, true},
		{"unresolved", p4, netip.MustParseAddr("198.51.100.1"), []uint32{100}, nil, false},
		{"next hop inside its own route", netip.MustParsePrefix("192.0.2.0/24"), far, []uint32{100}, nil, false},
		{"IPv6 route via an IPv4 next hop", p6, nh, []uint32{100}, nil, false},
		{"connected next hop inside its own route", netip.MustParsePrefix("172.16.20.21/32"), nh, []uint32{100}, []mpls.Label{100}, true},
	} {
		e := s.route(tc.p, cand{labels: tc.labels, nh: tc.nh})
		if (e != nil) != tc.ok {
			t.Errorf("%s: got %+v, want installed %v", tc.name, e, tc.ok)
			continue
		}
		if e != nil && !slices.Equal(e.Labels, tc.want) {
			t.Errorf("%s: push %v, want %v", tc.name, e.Labels, tc.want)
		}
	}
}

// TestBestOf: the shortest AS path wins, then the first neighbour.
func TestBestOf(t *testing.T) {
	c := map[int]cand{
		0: {asPath: []uint32{1, 2, 3}},
		1: {asPath: []uint32{4, 5}},
		2: {asPath: []uint32{6, 7}},
	}
	if got := bestOf(c); got != 1 {
		t.Errorf("best %d, want 1", got)
	}
	if got := bestOf(map[int]cand{}); got != -1 {
		t.Errorf("best of none %d, want -1", got)
	}
}

// TestLabelPool hands out the whole range, refuses more, reuses freed.
func TestLabelPool(t *testing.T) {
	p := newLabelPool(16000, 16002)
	for want := mpls.Label(16000); want <= 16002; want++ {
		if l, err := p.get(); err != nil || l != want {
			t.Fatalf("get %d, %v; want %d", l, err, want)
		}
	}
	if _, err := p.get(); err != errLabelsExhausted {
		t.Fatalf("get past the range: %v", err)
	}
	p.put(16001)
	if l, err := p.get(); err != nil || l != 16001 || p.used != 3 || p.size() != 3 {
		t.Fatalf("get after put: %d %v used %d size %d", l, err, p.used, p.size())
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
