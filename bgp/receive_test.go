package bgp

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

var labeledFamilies = map[afiSafi]bool{{1, 4}: true, {2, 4}: true}

// reachAttrs are an advertisement's attributes: ORIGIN, a four-octet AS
// path and an MP_REACH_NLRI of nlri via nh.
func reachAttrs(t testing.TB, f gbgp.Family, nh string, asPath []uint32, nlri ...gbgp.PathNLRI) []gbgp.PathAttributeInterface {
	t.Helper()
	reach, err := gbgp.NewPathAttributeMpReachNLRI(f, nlri, netip.MustParseAddr(nh))
	if err != nil {
		t.Fatal(err)
	}
	return []gbgp.PathAttributeInterface{
		gbgp.NewPathAttributeOrigin(gbgp.BGP_ORIGIN_ATTR_TYPE_EGP),
		gbgp.NewPathAttributeAsPath([]gbgp.AsPathParamInterface{gbgp.NewAs4PathParam(gbgp.BGP_ASPATH_ATTR_TYPE_SEQ, asPath)}),
		reach,
	}
}

// TestUpdateEvents: the node reads an UPDATE's labelled advertisements
// and withdrawals itself (each prefix with the path's next hop, AS path,
// ORIGIN and its own label), and leaves to GoBGP what GoBGP must judge or
// merge: an UPDATE that does not validate, one with IPv4 unicast NLRI or
// an AS4_PATH, an End-of-RIB marker.
func TestUpdateEvents(t *testing.T) {
	adv := updateBody(t, nil, reachAttrs(t, gbgp.RF_IPv4_MPLS, "172.16.56.21", []uint32{65002, 65010},
		labeled(t, "10.81.0.0/16", 100), labeled(t, "10.82.0.0/24", 200)), nil)
	evs, tk := updateEvents(3, adv, true, labeledFamilies)
	if tk != tookUpdate || len(evs) != 2 {
		t.Fatalf("advertisement: %d events, %v; want 2, taken", len(evs), tk)
	}
	for i, want := range []struct {
		prefix string
		label  uint32
	}{{"10.81.0.0/16", 100}, {"10.82.0.0/24", 200}} {
		ev := evs[i]
		if ev.peer != 3 || ev.withdraw || ev.prefix != netip.MustParsePrefix(want.prefix) ||
			!slices.Equal(ev.cand.labels, []uint32{want.label}) || ev.cand.nh != netip.MustParseAddr("172.16.56.21") ||
			!slices.Equal(ev.cand.asPath, []uint32{65002, 65010}) || ev.cand.origin != gbgp.BGP_ORIGIN_ATTR_TYPE_EGP ||
			ev.cand.family != IPv4LabeledUnicast {
			t.Errorf("event %d: %+v, want %s label %d from neighbour 3", i, ev, want.prefix, want.label)
		}
	}

	// 6PE: an IPv6 prefix over an IPv4-mapped next hop, read as IPv4.
	adv6 := updateBody(t, nil, reachAttrs(t, gbgp.RF_IPv6_MPLS, "::ffff:172.16.56.21", []uint32{65002},
		labeled(t, "2001:db8:81::/48", 2)), nil)
	if evs, tk := updateEvents(0, adv6, true, labeledFamilies); tk != tookUpdate || len(evs) != 1 ||
		evs[0].cand.nh != netip.MustParseAddr("172.16.56.21") || evs[0].cand.family != IPv6LabeledUnicast {
		t.Errorf("6PE advertisement: %+v %v", evs, tk)
	}

	unreach, err := gbgp.NewPathAttributeMpUnreachNLRI(gbgp.RF_IPv4_MPLS, []gbgp.PathNLRI{labeled(t, "10.81.0.0/16", 100)})
	if err != nil {
		t.Fatal(err)
	}
	wd := updateBody(t, nil, []gbgp.PathAttributeInterface{unreach}, nil)
	if evs, tk := updateEvents(1, wd, true, labeledFamilies); tk != tookUpdate || len(evs) != 1 || !evs[0].withdraw ||
		evs[0].prefix != netip.MustParsePrefix("10.81.0.0/16") || evs[0].peer != 1 {
		t.Errorf("withdrawal: %+v %v, want 10.81.0.0/16 withdrawn by neighbour 1", evs, tk)
	}

	eor, err := gbgp.NewPathAttributeMpUnreachNLRI(gbgp.RF_IPv6_MPLS, nil)
	if err != nil {
		t.Fatal(err)
	}
	noOrigin := reachAttrs(t, gbgp.RF_IPv4_MPLS, "172.16.56.21", []uint32{65002}, labeled(t, "10.83.0.0/16", 300))[1:]
	withAS4 := append(reachAttrs(t, gbgp.RF_IPv4_MPLS, "172.16.56.21", []uint32{65002}, labeled(t, "10.84.0.0/16", 300)),
		gbgp.NewPathAttributeAs4Path([]*gbgp.As4PathParam{gbgp.NewAs4PathParam(gbgp.BGP_ASPATH_ATTR_TYPE_SEQ, []uint32{65002})}))
	for name, tc := range map[string]struct {
		body []byte
		want take
	}{
		"End-of-RIB":            {updateBody(t, nil, []gbgp.PathAttributeInterface{eor}, nil), noRoutes},
		"no ORIGIN":             {updateBody(t, nil, noOrigin, nil), leftToGoBGP},
		"AS4_PATH":              {updateBody(t, nil, withAS4, nil), leftToGoBGP},
		"IPv4 unicast NLRI":     {updateBody(t, nil, reachAttrs(t, gbgp.RF_IPv4_MPLS, "172.16.56.21", []uint32{65002}, labeled(t, "10.85.0.0/16", 300)), []netip.Prefix{netip.MustParsePrefix("10.86.0.0/16")}), leftToGoBGP},
		"not negotiated (6PE)":  {adv6, leftToGoBGP},
		"truncated":             {adv[:len(adv)-2], leftToGoBGP},
		"empty (IPv4 unicast)":  {updateBody(t, nil, nil, nil), noRoutes},
		"attribute list length": {append([]byte{0, 0, 0xff, 0xff}, adv[4:]...), leftToGoBGP},
	} {
		neg := labeledFamilies
		if name == "not negotiated (6PE)" {
			neg = map[afiSafi]bool{{1, 4}: true}
		}
		if evs, tk := updateEvents(0, tc.body, true, neg); tk != tc.want || len(evs) != 0 {
			t.Errorf("%s: %v, %d events; want %v, none", name, tk, len(evs), tc.want)
		}
	}
}

// TestCopyFromNeighborTakes: once the session is established on the
// wire (the neighbour's OPEN with four-octet AS numbers and its
// KEEPALIVE, GoBGP's KEEPALIVE after its OPEN, no NOTIFICATION), the
// UPDATEs the speaker takes do not reach GoBGP (a KEEPALIVE stands in for
// them when GoBGP heard nothing for a while); one it leaves reaches GoBGP
// as it came, and so does every later one, unoffered; before the session
// is up, on a session without four-octet AS numbers and after a
// NOTIFICATION, nothing is offered.
func TestCopyFromNeighborTakes(t *testing.T) {
	open4 := openMsg(t, 65002, "172.16.56.21", gbgp.NewCapMultiProtocol(gbgp.RF_IPv4_MPLS), gbgp.NewCapFourOctetASNumber(65002))
	open2 := openMsg(t, 65002, "172.16.56.21", gbgp.NewCapMultiProtocol(gbgp.RF_IPv4_MPLS))
	keep := bgpMsg(bgpKeepaliveType, nil)
	update := func(p string) []byte {
		return bgpMsg(bgpUpdate, updateBody(t, nil, reachAttrs(t, gbgp.RF_IPv4_MPLS, "172.16.56.21", []uint32{65002}, labeled(t, p, 100)), nil))
	}
	taken, left, later := update("10.87.0.0/16"), update("10.88.0.0/16"), update("10.89.0.0/16")
	run := func(name string, gw *gobgpWire, in, want []byte, wantOffered int) {
		t.Helper()
		var out bytes.Buffer
		offered := 0
		offer := func(body []byte, negotiated map[afiSafi]bool) take {
			offered++
			if !negotiated[afiSafi{1, 4}] || negotiated[afiSafi{2, 4}] {
				t.Errorf("%s: offered with families %v, want 1/4 only", name, negotiated)
			}
			if bytes.Equal(body, taken[bgpHeaderLen:]) {
				return tookUpdate
			}
			return leftToGoBGP
		}
		copyFromNeighbor(&out, bytes.NewReader(in), Neighbor{}, func(unnegotiated) {}, gw, offer)
		if !bytes.Equal(out.Bytes(), want) || offered != wantOffered {
			t.Errorf("%s: GoBGP got %x, %d offered\nwant %x, %d offered", name, out.Bytes(), offered, want, wantOffered)
		}
	}
	up := &gobgpWire{}
	up.accepted.Store(true)
	run("established", up, slices.Concat(open4, keep, taken, left, later, taken), slices.Concat(open4, keep, left, later, taken), 2)
	run("GoBGP not past OpenSent", &gobgpWire{}, slices.Concat(open4, keep, taken, taken), slices.Concat(open4, keep, taken, taken), 0)
	run("no KEEPALIVE from the neighbour", up, slices.Concat(open4, taken, keep, taken), slices.Concat(open4, taken, keep, taken), 0)
	run("two-octet AS numbers", up, slices.Concat(open2, keep, taken), slices.Concat(open2, keep, taken), 0)
	gone := &gobgpWire{}
	gone.accepted.Store(true)
	gone.notified.Store(true)
	run("after a NOTIFICATION", gone, slices.Concat(open4, keep, taken), slices.Concat(open4, keep, taken), 0)
	// GoBGP heard nothing for the interval: a KEEPALIVE for the taken
	// UPDATE.
	defer func(d time.Duration) { takenKeepaliveInterval = d }(takenKeepaliveInterval)
	takenKeepaliveInterval = 0
	run("established, GoBGP idle", up, slices.Concat(open4, keep, taken, left), slices.Concat(open4, keep, keep, left), 2)
}

// TestCopyFromGoBGP: GoBGP's messages reach the neighbour byte for byte;
// its KEEPALIVE after its OPEN marks the neighbour's OPEN accepted (one
// before the OPEN does not), its NOTIFICATION the session going.
func TestCopyFromGoBGP(t *testing.T) {
	open := openMsg(t, 65001, "172.16.56.20")
	keep := bgpMsg(bgpKeepaliveType, nil)
	notify := bgpMsg(bgpNotification, []byte{6, 2})
	for _, tc := range []struct {
		name               string
		in                 []byte
		accepted, notified bool
	}{
		{"OPEN, KEEPALIVE", slices.Concat(open, keep), true, false},
		{"KEEPALIVE, OPEN", slices.Concat(keep, open), false, false},
		{"OPEN, NOTIFICATION", slices.Concat(open, notify), false, true},
		{"cut short", slices.Concat(open, keep[:10]), false, false},
	} {
		var w gobgpWire
		var out bytes.Buffer
		copyFromGoBGP(&out, bytes.NewReader(tc.in), &w)
		if !bytes.Equal(out.Bytes(), tc.in) || w.accepted.Load() != tc.accepted || w.notified.Load() != tc.notified {
			t.Errorf("%s: copied %x, accepted %v, notified %v; want %x, %v, %v", tc.name, out.Bytes(), w.accepted.Load(), w.notified.Load(), tc.in, tc.accepted, tc.notified)
		}
	}
}

// bgpMsg frames a BGP message of type typ.
func bgpMsg(typ byte, body []byte) []byte {
	h := bytes.Repeat([]byte{0xff}, 16)
	h = binary.BigEndian.AppendUint16(h, uint16(bgpHeaderLen+len(body)))
	return append(append(h, typ), body...)
}

// TestCopyFromNeighborFlushes: what copyFromNeighbor wrote reaches GoBGP
// before it waits for the neighbour's next message, also when the last
// message read was not copied (a taken UPDATE): the neighbour's KEEPALIVE
// before it brings GoBGP's session up. The KEEPALIVE standing in for
// taken UPDATEs reaches GoBGP at once, also while the neighbour's stream
// does not pause at a message's end. Planting a flush only after a copied
// message leaves GoBGP without the first; planting no flush of its own
// for the stand-in leaves it without the second.
func TestCopyFromNeighborFlushes(t *testing.T) {
	open := openMsg(t, 65002, "172.16.56.21", gbgp.NewCapMultiProtocol(gbgp.RF_IPv4_MPLS), gbgp.NewCapFourOctetASNumber(65002))
	keep := bgpMsg(bgpKeepaliveType, nil)
	taken := bgpMsg(bgpUpdate, updateBody(t, nil, reachAttrs(t, gbgp.RF_IPv4_MPLS, "172.16.56.21", []uint32{65002}, labeled(t, "10.87.0.0/16", 100)), nil))
	run := func(name string, in, want []byte) {
		t.Helper()
		var gw gobgpWire
		gw.accepted.Store(true)
		nr, nw := io.Pipe()  // the neighbour's side: open until the case ends
		gr, gwr := io.Pipe() // GoBGP's side
		defer nw.Close()
		defer gr.Close()
		go copyFromNeighbor(gwr, nr, Neighbor{}, func(unnegotiated) {}, &gw, func([]byte, map[afiSafi]bool) take { return tookUpdate })
		go nw.Write(in) // one read
		got := make(chan []byte, 1)
		go func() {
			b := make([]byte, len(want))
			if _, err := io.ReadFull(gr, b); err != nil {
				b = nil
			}
			got <- b
		}()
		select {
		case b := <-got:
			if !bytes.Equal(b, want) {
				t.Errorf("%s: GoBGP got %x, want %x", name, b, want)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("%s: %x did not reach GoBGP within 2 s", name, want)
		}
	}
	run("the KEEPALIVE before a taken UPDATE", slices.Concat(open, keep, taken), slices.Concat(open, keep))
	defer func(d time.Duration) { takenKeepaliveInterval = d }(takenKeepaliveInterval)
	takenKeepaliveInterval = 0
	run("the stand-in, the stream past it", slices.Concat(open, keep, taken, taken[:10]), slices.Concat(open, keep, keep))
}

// TestProcessSessionEvents: routes the splice read before GoBGP's watch
// said the session is up stay when the watch reports the session's last
// steps up (OpenConfirm, Established); they go when the session leaves
// Established, and when the splice says their connection ended (no
// state). The received and accepted counts follow, those treated as
// withdrawn (an AS loop) counted received only. Planting "drop on every
// down event" loses the routes at OpenConfirm.
func TestProcessSessionEvents(t *testing.T) {
	nh := netip.MustParseAddr("172.16.20.21")
	tab := &fakeTables{res: map[netip.Addr]Resolution{nh: {Via: nh, Device: "veth0"}}}
	s := &Speaker{tables: tab, rib: map[netip.Prefix]*dest{}, peers: make([]peerState, 1), log: slog.New(slog.DiscardHandler),
		cfg: Config{AS: 65001, Neighbors: []Neighbor{{Address: nh, RemoteAS: 65002}}}}
	p, loop := netip.MustParsePrefix("10.91.0.0/16"), netip.MustParsePrefix("10.92.0.0/16")
	routes := []event{
		{peer: 0, prefix: p, cand: cand{labels: []uint32{100}, nh: nh, asPath: []uint32{65002}, family: IPv4LabeledUnicast}},
		{peer: 0, prefix: loop, cand: cand{labels: []uint32{200}, nh: nh, asPath: []uint32{65002, 65001}, family: IPv4LabeledUnicast}},
	}
	held := func(what string, want bool, wantReceived, wantAccepted int) {
		t.Helper()
		d := s.rib[p]
		if got := d != nil && d.installed != nil; got != want {
			t.Errorf("%s: %s installed %v, want %v", what, p, got, want)
		}
		ps := &s.peers[0]
		if r, a := ps.receivedCount(IPv4LabeledUnicast), ps.received[0]; r != wantReceived || a != wantAccepted {
			t.Errorf("%s: received %d, accepted %d; want %d, %d", what, r, a, wantReceived, wantAccepted)
		}
	}
	s.process([]event{{peer: 0, state: "opensent", down: true}})
	s.process(routes)
	held("read before the session is up", true, 2, 1)
	s.process([]event{{peer: 0, state: "openconfirm", down: true}, {peer: 0, state: "established"}})
	held("GoBGP's OpenConfirm and Established after the routes", true, 2, 1)
	s.process([]event{{peer: 0, state: "idle", down: true}})
	held("the session left Established", false, 0, 0)

	s.process(routes)
	s.process([]event{{peer: 0, down: true}})
	held("the splice's end of the connection", false, 0, 0)

	s.process(routes)
	s.process([]event{{peer: 0, prefix: loop, withdraw: true, cand: cand{family: IPv4LabeledUnicast}}})
	held("the looped route withdrawn", true, 1, 1)
}
