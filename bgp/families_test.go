package bgp

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/netip"
	"slices"
	"testing"

	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// updateBody builds an UPDATE with GoBGP's encoder and returns its body
// (after the header).
func updateBody(t testing.TB, withdrawn []netip.Prefix, attrs []gbgp.PathAttributeInterface, nlri []netip.Prefix) []byte {
	t.Helper()
	pn := func(ps []netip.Prefix) (out []gbgp.PathNLRI) {
		for _, p := range ps {
			n, err := gbgp.NewIPAddrPrefix(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, gbgp.PathNLRI{NLRI: n})
		}
		return out
	}
	b, err := gbgp.NewBGPUpdateMessage(pn(withdrawn), attrs, pn(nlri)).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return b[bgpHeaderLen:]
}

func labeled(t testing.TB, p string, label uint32) gbgp.PathNLRI {
	t.Helper()
	n, err := gbgp.NewLabeledIPAddrPrefix(netip.MustParsePrefix(p), *gbgp.NewMPLSLabelStack(label))
	if err != nil {
		t.Fatal(err)
	}
	return gbgp.PathNLRI{NLRI: n}
}

func unicast(t testing.TB, p string) gbgp.PathNLRI {
	t.Helper()
	n, err := gbgp.NewIPAddrPrefix(netip.MustParsePrefix(p))
	if err != nil {
		t.Fatal(err)
	}
	return gbgp.PathNLRI{NLRI: n}
}

// validates reports GoBGP's verdict on an UPDATE body for a session that
// negotiated IPv4 labeled unicast only: what the splice passes on must
// not draw GoBGP's NOTIFICATION 0/0.
func validates(t *testing.T, body []byte) error {
	t.Helper()
	msg := make([]byte, bgpHeaderLen, bgpHeaderLen+len(body))
	for i := range 16 {
		msg[i] = 0xff
	}
	binary.BigEndian.PutUint16(msg[16:], uint16(bgpHeaderLen+len(body)))
	msg[18] = bgpUpdate
	m, err := gbgp.ParseBGPMessage(append(msg, body...))
	if err != nil {
		return err
	}
	_, err = gbgp.ValidateUpdateMsg(m.Body.(*gbgp.BGPUpdate), map[gbgp.Family]gbgp.BGPAddPathMode{gbgp.RF_IPv4_MPLS: gbgp.BGP_ADD_PATH_NONE}, true, false, false)
	return err
}

// TestStripUnnegotiated: on a session that negotiated IPv4 labeled
// unicast only, an UPDATE's MP_REACH_NLRI or MP_UNREACH_NLRI of another
// family and its IPv4 unicast NLRI and withdrawn routes are taken out,
// the rest kept; GoBGP's own decoder and validator accept what is left
// (and refuse the input with code 0, which is why). Planting "keep every
// MP attribute" fails the unicast MP_REACH cases; "keep the NLRI field"
// the plain NLRI case.
func TestStripUnnegotiated(t *testing.T) {
	lu := map[afiSafi]bool{{1, 4}: true}
	origin := gbgp.NewPathAttributeOrigin(0)
	asPath := gbgp.NewPathAttributeAsPath([]gbgp.AsPathParamInterface{gbgp.NewAs4PathParam(gbgp.BGP_ASPATH_ATTR_TYPE_SEQ, []uint32{65002})})
	nh, _ := gbgp.NewPathAttributeNextHop(netip.MustParseAddr("172.16.56.21"))
	reach := func(f gbgp.Family, n gbgp.PathNLRI) gbgp.PathAttributeInterface {
		a, err := gbgp.NewPathAttributeMpReachNLRI(f, []gbgp.PathNLRI{n}, netip.MustParseAddr("172.16.56.21"))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	unreach := func(f gbgp.Family, n gbgp.PathNLRI) gbgp.PathAttributeInterface {
		a, err := gbgp.NewPathAttributeMpUnreachNLRI(f, []gbgp.PathNLRI{n})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	p := func(s string) []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix(s)} }
	for _, tc := range []struct {
		name    string
		body    []byte
		changed bool
		drop    bool
		family  afiSafi
		keep    []uint8 // attribute types left, when changed and not dropped
	}{
		{"IPv4 unicast MP_REACH", updateBody(t, nil, []gbgp.PathAttributeInterface{origin, asPath, reach(gbgp.RF_IPv4_UC, unicast(t, "10.70.0.0/16"))}, nil), true, true, ipv4Unicast, nil},
		{"IPv4 unicast MP_REACH and labeled MP_UNREACH", updateBody(t, nil, []gbgp.PathAttributeInterface{origin, asPath,
			reach(gbgp.RF_IPv4_UC, unicast(t, "10.70.0.0/16")), unreach(gbgp.RF_IPv4_MPLS, labeled(t, "10.71.0.0/16", 100))}, nil), true, false, ipv4Unicast, []uint8{1, 2, 15}},
		{"IPv6 labeled MP_UNREACH", updateBody(t, nil, []gbgp.PathAttributeInterface{unreach(gbgp.RF_IPv6_MPLS, labeled(t, "2001:db8::/32", 100))}, nil), true, true, afiSafi{2, 4}, nil},
		{"plain NLRI", updateBody(t, nil, []gbgp.PathAttributeInterface{origin, asPath, nh}, p("10.72.0.0/16")), true, true, ipv4Unicast, nil},
		{"plain withdrawn routes", updateBody(t, p("10.72.0.0/16"), nil, nil), true, true, ipv4Unicast, nil},
		{"labeled MP_REACH", updateBody(t, nil, []gbgp.PathAttributeInterface{origin, asPath, reach(gbgp.RF_IPv4_MPLS, labeled(t, "10.73.0.0/16", 100))}, nil), false, false, afiSafi{}, nil},
		{"End-of-RIB", updateBody(t, nil, nil, nil), false, false, afiSafi{}, nil},
		{"attribute length past the end", []byte{0, 0, 0, 4, 0x80, 14, 200, 0}, false, false, afiSafi{}, nil},
		{"path attribute length past the end", []byte{0, 0, 0, 9, 0x40, 1, 1, 0}, false, false, afiSafi{}, nil},
	} {
		out, u, changed := stripUnnegotiated(tc.body, lu)
		if changed != tc.changed || u.drop != tc.drop || changed && u.family != tc.family {
			t.Errorf("%s: changed %v drop %v family %v; want %v %v %v", tc.name, changed, u.drop, u.family, tc.changed, tc.drop, tc.family)
			continue
		}
		if tc.changed && validates(t, tc.body) == nil {
			t.Errorf("%s: GoBGP accepts the input; the case tests nothing", tc.name)
		}
		if !changed || u.drop {
			if out != nil {
				t.Errorf("%s: out %x, want nil", tc.name, out)
			}
			continue
		}
		if err := validates(t, out); err != nil {
			t.Errorf("%s: GoBGP refuses what is left: %v", tc.name, err)
		}
		var types []uint8
		m, _ := gbgp.ParseBGPMessage(append(append(bytes.Repeat([]byte{0xff}, 16), byte((bgpHeaderLen+len(out))>>8), byte(bgpHeaderLen+len(out)), bgpUpdate), out...))
		for _, a := range m.Body.(*gbgp.BGPUpdate).PathAttributes {
			types = append(types, uint8(a.GetType()))
		}
		if !slices.Equal(types, tc.keep) {
			t.Errorf("%s: attributes left %v, want %v", tc.name, types, tc.keep)
		}
		if _, _, again := stripUnnegotiated(out, lu); again {
			t.Errorf("%s: a second pass changes it again", tc.name)
		}
	}
}

// openMsg is the OPEN GoBGP encodes for AS as, hold time 90 and router ID
// id, with one capabilities parameter holding caps when there are any.
func openMsg(t *testing.T, as uint16, id string, caps ...gbgp.ParameterCapabilityInterface) []byte {
	t.Helper()
	var params []gbgp.OptionParameterInterface
	if len(caps) > 0 {
		params = []gbgp.OptionParameterInterface{gbgp.NewOptionParameterCapability(caps)}
	}
	m, err := gbgp.NewBGPOpenMessage(as, 90, netip.MustParseAddr(id), params)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenFamilies reads the Multiprotocol capabilities of OPENs GoBGP
// encodes, and of one in RFC 9072's extended form.
func TestOpenFamilies(t *testing.T) {
	caps := []gbgp.ParameterCapabilityInterface{
		gbgp.NewCapMultiProtocol(gbgp.RF_IPv4_MPLS), gbgp.NewCapRouteRefresh(),
		gbgp.NewCapMultiProtocol(gbgp.RF_IPv6_MPLS), gbgp.NewCapFourOctetASNumber(65002),
	}
	b := openMsg(t, 65002, "172.16.56.21", caps...)
	got, ok := openFamilies(b[bgpHeaderLen:])
	if !ok || len(got) != 2 || !got[afiSafi{1, 4}] || !got[afiSafi{2, 4}] {
		t.Errorf("GoBGP's OPEN: %v %v, want 1/4 and 2/4", got, ok)
	}
	// RFC 9072: length 255, type 255, two-octet length, parameters with
	// two-octet lengths.
	param := []byte{2, 0, 6, 1, 4, 0, 2, 0, 4}
	ext := append([]byte{4, 0xfd, 0xea, 0, 90, 172, 16, 56, 21, 255, 255, 0, byte(len(param))}, param...)
	if got, ok := openFamilies(ext); !ok || len(got) != 1 || !got[afiSafi{2, 4}] {
		t.Errorf("extended OPEN: %v %v, want 2/4", got, ok)
	}
	if _, ok := openFamilies([]byte{4, 0, 1, 0, 90, 1, 2, 3, 4, 8, 2, 6, 1, 4}); ok {
		t.Error("a truncated capability read as fine")
	}
}

// TestCopyFromNeighbor: a stream of messages as a neighbour sends them
// (OPEN, KEEPALIVE, an UPDATE of a family the neighbour's OPEN does not
// list, a labeled UPDATE, a message cut short) reaches GoBGP message for
// message, the unnegotiated UPDATE left out and reported, the rest
// byte for byte.
func TestCopyFromNeighbor(t *testing.T) {
	msg := func(typ byte, body []byte) []byte {
		h := bytes.Repeat([]byte{0xff}, 16)
		h = binary.BigEndian.AppendUint16(h, uint16(bgpHeaderLen+len(body)))
		return append(append(h, typ), body...)
	}
	ob := openMsg(t, 65002, "172.16.56.21", gbgp.NewCapMultiProtocol(gbgp.RF_IPv4_MPLS))
	v6, _ := gbgp.NewPathAttributeMpUnreachNLRI(gbgp.RF_IPv6_MPLS, []gbgp.PathNLRI{labeled(t, "2001:db8::/32", 100)})
	bad := msg(bgpUpdate, updateBody(t, nil, []gbgp.PathAttributeInterface{v6}, nil))
	v4, _ := gbgp.NewPathAttributeMpUnreachNLRI(gbgp.RF_IPv4_MPLS, []gbgp.PathNLRI{labeled(t, "10.71.0.0/16", 100)})
	good := msg(bgpUpdate, updateBody(t, nil, []gbgp.PathAttributeInterface{v4}, nil))
	keep := msg(4, nil)
	short := msg(bgpUpdate, []byte{0, 0, 0, 0})[:20]
	var in bytes.Buffer
	for _, m := range [][]byte{ob, keep, bad, good, short} {
		in.Write(m)
	}
	var out bytes.Buffer
	var reports []unnegotiated
	// Both families are GoBGP's; the neighbour's OPEN lists IPv4 only.
	copyFromNeighbor(&out, &in, Neighbor{}, func(u unnegotiated) { reports = append(reports, u) }, nil, nil)
	want := slices.Concat(ob, keep, good, short)
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("GoBGP got %x\nwant %x", out.Bytes(), want)
	}
	if len(reports) != 1 || reports[0].family != (afiSafi{2, 4}) || !reports[0].drop {
		t.Errorf("reports %+v, want one: 2/4, whole update", reports)
	}
}

// FuzzStripUnnegotiated: any UPDATE body: no panic; what is left, when
// something was taken out, has consistent lengths and is left as it is
// by a second pass.
func FuzzStripUnnegotiated(f *testing.F) {
	f.Add([]byte{0, 0, 0, 4, 0x80, 14, 1, 0})
	f.Add([]byte{0, 0, 0, 9, 0x80, 14, 6, 0, 1, 1, 4, 1, 2, 3, 4, 24, 10, 0, 0})
	f.Add([]byte{0, 3, 24, 10, 0, 0, 0, 0x90, 15, 0, 3, 0, 2, 4})
	lu := map[afiSafi]bool{{1, 4}: true, {2, 4}: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, u, changed := stripUnnegotiated(body, lu)
		if !changed || u.drop {
			if out != nil {
				t.Fatalf("out %x without a change", out)
			}
			return
		}
		wl := int(binary.BigEndian.Uint16(out))
		if 4+wl > len(out) || 4+wl+int(binary.BigEndian.Uint16(out[2+wl:])) > len(out) {
			t.Fatalf("lengths of %x do not add up", out)
		}
		if _, _, again := stripUnnegotiated(out, lu); again {
			t.Fatalf("a second pass changes %x", out)
		}
	})
}

// FuzzOpenFamilies: any OPEN body: no panic.
func FuzzOpenFamilies(f *testing.F) {
	f.Add([]byte{4, 0xfd, 0xea, 0, 90, 172, 16, 56, 21, 8, 2, 6, 1, 4, 0, 1, 0, 4})
	f.Add([]byte{4, 0xfd, 0xea, 0, 90, 172, 16, 56, 21, 255, 255, 0, 9, 2, 0, 6, 1, 4, 0, 2, 0, 4})
	f.Fuzz(func(t *testing.T, body []byte) {
		openFamilies(body)
	})
}

// BenchmarkCopyFromNeighbor: a neighbour's stream of labeled UPDATEs (one
// route each) through the splice's filter; bytes per second and
// allocations per UPDATE.
func BenchmarkCopyFromNeighbor(b *testing.B) {
	reach, err := gbgp.NewPathAttributeMpReachNLRI(gbgp.RF_IPv4_MPLS, []gbgp.PathNLRI{labeled(b, "10.73.0.0/16", 100)}, netip.MustParseAddr("172.16.56.21"))
	if err != nil {
		b.Fatal(err)
	}
	attrs := []gbgp.PathAttributeInterface{gbgp.NewPathAttributeOrigin(0),
		gbgp.NewPathAttributeAsPath([]gbgp.AsPathParamInterface{gbgp.NewAs4PathParam(gbgp.BGP_ASPATH_ATTR_TYPE_SEQ, []uint32{65002})}), reach}
	body := updateBody(b, nil, attrs, nil)
	msg := append(bytes.Repeat([]byte{0xff}, 16), byte((bgpHeaderLen+len(body))>>8), byte(bgpHeaderLen+len(body)), bgpUpdate)
	msg = append(msg, body...)
	const perStream = 1000
	stream := bytes.Repeat(msg, perStream)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	r := bytes.NewReader(stream)
	for b.Loop() {
		r.Reset(stream)
		copyFromNeighbor(io.Discard, r, Neighbor{}, func(unnegotiated) {}, nil, nil)
	}
}
