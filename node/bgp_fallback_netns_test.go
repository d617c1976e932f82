package node_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/mpls"
)

// labeledNLRI is IPv4 labeled unicast NLRI (RFC 8277) for prefix p with
// one label (bottom of stack).
func labeledNLRI(p netip.Prefix, label uint32) []byte {
	a := p.Addr().As4()
	out := []byte{byte(24 + p.Bits()), byte(label >> 12), byte(label >> 4), byte(label<<4) | 1}
	return append(out, a[:(p.Bits()+7)/8]...)
}

// mpUnreachUpdate is an UPDATE withdrawing IPv4 labeled unicast nlri
// (MP_UNREACH_NLRI only).
func mpUnreachUpdate(nlri []byte) []byte {
	mp := append([]byte{0, 1, 4}, nlri...)
	attrs := append([]byte{0x80, 15, byte(len(mp))}, mp...)
	upd := []byte{0, 0, byte(len(attrs) >> 8), byte(len(attrs))}
	return bgpMessage(2, append(upd, attrs...))
}

// withAS4Path returns an UPDATE built by mpReachUpdate (AS_PATH 65002)
// with an AS4_PATH of AS 65002 added after its attributes.
func withAS4Path(upd []byte) []byte {
	body := slices.Clone(upd[19:])
	as4 := []byte{0xc0, 17, 6, 2, 1, 0, 0, 0xfd, 0xea}
	al := binary.BigEndian.Uint16(body[2:])
	body = append(body[:4+int(al)], as4...)
	binary.BigEndian.PutUint16(body[2:], al+uint16(len(as4)))
	return bgpMessage(2, body)
}

// withASPath returns an UPDATE built by mpReachUpdate with its AS_PATH
// (65002) replaced by one AS_SEQUENCE of asns.
func withASPath(upd []byte, asns ...uint32) []byte {
	old := []byte{0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xea}
	seg := []byte{0x40, 2, byte(2 + 4*len(asns)), 2, byte(len(asns))}
	for _, a := range asns {
		seg = binary.BigEndian.AppendUint32(seg, a)
	}
	body := bytes.Replace(upd[19:], old, seg, 1)
	binary.BigEndian.PutUint16(body[2:], binary.BigEndian.Uint16(body[2:])+uint16(len(seg)-len(old)))
	return bgpMessage(2, body)
}

// labeledPrefixes returns the IPv4 labeled unicast prefixes of an UPDATE
// body's MP_REACH_NLRI (reach) and MP_UNREACH_NLRI (unreach) attributes.
func labeledPrefixes(body []byte) (reach, unreach []string, err error) {
	if len(body) < 4 {
		return nil, nil, fmt.Errorf("UPDATE of %d bytes", len(body))
	}
	wl := int(binary.BigEndian.Uint16(body))
	if 4+wl > len(body) {
		return nil, nil, fmt.Errorf("withdrawn routes length %d", wl)
	}
	al := int(binary.BigEndian.Uint16(body[2+wl:]))
	attrs := body[4+wl:]
	if al > len(attrs) {
		return nil, nil, fmt.Errorf("attributes length %d", al)
	}
	attrs = attrs[:al]
	for len(attrs) > 0 {
		if len(attrs) < 3 {
			return nil, nil, fmt.Errorf("attribute header of %d bytes", len(attrs))
		}
		hl, l := 3, int(attrs[2])
		if attrs[0]&0x10 != 0 {
			if len(attrs) < 4 {
				return nil, nil, fmt.Errorf("extended attribute header of %d bytes", len(attrs))
			}
			hl, l = 4, int(binary.BigEndian.Uint16(attrs[2:]))
		}
		if hl+l > len(attrs) {
			return nil, nil, fmt.Errorf("attribute %d of %d bytes, %d left", attrs[1], l, len(attrs)-hl)
		}
		typ, v := attrs[1], attrs[hl:hl+l]
		attrs = attrs[hl+l:]
		var nlri []byte
		switch {
		case typ == 14 && len(v) >= 5 && len(v) >= 5+int(v[3]):
			nlri = v[5+int(v[3]):]
		case typ == 15 && len(v) >= 3:
			nlri = v[3:]
		default:
			continue
		}
		if binary.BigEndian.Uint16(v) != 1 || v[2] != 4 {
			return nil, nil, fmt.Errorf("attribute %d of AFI %d SAFI %d", typ, binary.BigEndian.Uint16(v), v[2])
		}
		ps, err := decodeLabeled(nlri)
		if err != nil {
			return nil, nil, err
		}
		if typ == 14 {
			reach = append(reach, ps...)
		} else {
			unreach = append(unreach, ps...)
		}
	}
	return reach, unreach, nil
}

// decodeLabeled reads IPv4 labeled unicast NLRI: labels up to the bottom
// of the stack (or a withdrawal's 0x800000 or 0), then the prefix.
func decodeLabeled(nlri []byte) ([]string, error) {
	var out []string
	for len(nlri) > 0 {
		bits := int(nlri[0])
		nlri = nlri[1:]
		for {
			if bits < 24 || len(nlri) < 3 {
				return nil, fmt.Errorf("labeled NLRI of %d bits", bits)
			}
			l := nlri[:3]
			nlri, bits = nlri[3:], bits-24
			if l[2]&1 != 0 || (l[0] == 0x80 && l[1] == 0 && l[2] == 0) || (l[0] == 0 && l[1] == 0 && l[2] == 0) {
				break
			}
		}
		n := (bits + 7) / 8
		if bits > 32 || n > len(nlri) {
			return nil, fmt.Errorf("prefix of %d bits", bits)
		}
		var a [4]byte
		copy(a[:], nlri[:n])
		nlri = nlri[n:]
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(a), bits).String())
	}
	return out, nil
}

// TestBGPFallbackNoEcho runs the node (AS 65001) with a neighbour spoken
// by the test over a real TCP session (AS 65002, next-hop-self on the
// node's side, a session of IPv4 labeled unicast and four-octet AS
// numbers). Its first UPDATE, sent once the session is up, the node's
// splice reads itself; its second carries an AS4_PATH, which the splice
// leaves, with every later UPDATE of the session, to GoBGP, whose watch
// hands the routes to the node. All three routes are installed and
// counted; a withdrawal through GoBGP takes both the route the node read
// and one GoBGP read; the last, sent again with the node's AS in its
// path, is treated as withdrawn (RFC 4271 §9.1.2: an AS loop), though
// still counted as received, and the end of the session takes it. The
// node's network reaches the neighbour, while none of the neighbour's own
// routes is re-advertised to it (split horizon) nor withdrawn towards it
// (no MP_UNREACH at all: it never got them from the node).
//
// Bug planted to check the test: received paths accepted into GoBGP's
// RIB (the import policy's "-received" statement ACCEPT, scripts/mutants
// h06) makes GoBGP send the neighbour an MP_UNREACH of its own routes as
// soon as the node's re-advertisements become best.
func TestBGPFallbackNoEcho(t *testing.T) {
	netns.SkipUnlessRoot(t)
	peer, target := netip.MustParseAddr("172.16.57.21"), netip.MustParseAddr("172.16.57.20")
	ns0, nsP := netns.New(t, "blg0"), netns.New(t, "blgp")
	v0, vP := netns.VethPair(t, ns0, nsP)
	nsP.MustExec("ip", "addr", "add", peer.String()+"/24", "dev", vP)
	n := startNode(t, ns0, "fallback.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add %[2]s/24 dev %[1]s
bgp as 65001 router-id %[2]s
bgp neighbor %[3]s remote-as 65002 family ipv4-labeled-unicast next-hop-self hold-time 9
bgp network 10.10.10.10/32
`, v0, target, peer))
	var c net.Conn
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The node may not listen yet.
		var err error
		if c, err = bgpSession(nsP, peer, target); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(90 * time.Second))

	// What the node sends, read until the connection closes; KEEPALIVEs
	// every 3 s for the hold time of 9 s.
	var mu sync.Mutex
	var reached, withdrawn []string
	var readErr error
	readDone, keptAlive := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readDone)
		sawKeepalive := false
		for {
			typ, body, err := readBGP(c)
			if err != nil {
				mu.Lock()
				readErr = err
				mu.Unlock()
				return
			}
			if typ == 3 && len(body) >= 2 {
				mu.Lock()
				readErr = fmt.Errorf("NOTIFICATION %d/%d", body[0], body[1])
				mu.Unlock()
				return
			}
			if typ == 4 && !sawKeepalive {
				close(keptAlive) // the node took the OPEN
				sawKeepalive = true
			}
			if typ != 2 {
				continue
			}
			r, u, err := labeledPrefixes(body)
			mu.Lock()
			if err != nil && readErr == nil {
				readErr = err
			}
			reached, withdrawn = append(reached, r...), append(withdrawn, u...)
			mu.Unlock()
		}
	}()
	var wmu sync.Mutex
	send := func(m []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_, err := c.Write(m)
		return err
	}
	stopKeepalive := make(chan struct{})
	keepaliveDone := make(chan struct{})
	go func() {
		defer close(keepaliveDone)
		tk := time.NewTicker(3 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stopKeepalive:
				return
			case <-tk.C:
				if send(bgpMessage(4, nil)) != nil {
					return
				}
			}
		}
	}()
	defer func() {
		close(stopKeepalive)
		<-keepaliveDone
		c.Close()
		<-readDone
	}()

	// The splice reads UPDATEs itself only once the session is up on the
	// wire: the node's KEEPALIVE after its OPEN.
	select {
	case <-keptAlive:
	case <-time.After(10 * time.Second):
		t.Fatal("no KEEPALIVE from the node within 10 s of its OPEN")
	}
	takenRoute := netip.MustParsePrefix("10.76.0.0/16")
	as4Route, plainRoute := netip.MustParsePrefix("10.78.0.0/16"), netip.MustParsePrefix("10.77.0.0/16")
	for _, m := range [][]byte{
		mpReachUpdate(4, peer, labeledNLRI(takenRoute, 300)),
		withAS4Path(mpReachUpdate(4, peer, labeledNLRI(as4Route, 200))),
		mpReachUpdate(4, peer, labeledNLRI(plainRoute, 100)),
	} {
		if err := send(m); err != nil {
			t.Fatal(err)
		}
	}
	families := func() bgp.FamilyStatus {
		nb := n.BGP().Neighbors()
		if len(nb) != 1 || len(nb[0].Families) != 1 {
			t.Fatalf("neighbours %+v, want one of one family", nb)
		}
		return nb[0].Families[0]
	}
	counted := func(routes int) func() bool {
		return func() bool {
			f := families()
			return f.Received == routes && f.Accepted == routes && f.Installed == routes
		}
	}
	installed := func(dst string, label mpls.Label) bool {
		l, _, ok := ftnLabels(n, dst)
		return ok && slices.Equal(l, []mpls.Label{label})
	}
	waitUntil(t, 20*time.Second, "the three routes installed", func() bool {
		return installed("10.76.1.1", 300) && installed("10.78.1.1", 200) && installed("10.77.1.1", 100)
	})
	waitUntil(t, 5*time.Second, "three routes counted", counted(3))
	// Two keepalive intervals for whatever the node would send.
	time.Sleep(7 * time.Second)
	mu.Lock()
	gotReached, gotWithdrawn, err := slices.Clone(reached), slices.Clone(withdrawn), readErr
	mu.Unlock()
	if err != nil {
		t.Fatalf("reading what the node sent: %v", err)
	}
	if len(gotWithdrawn) > 0 {
		t.Errorf("the node sent the neighbour an MP_UNREACH for %v", gotWithdrawn)
	}
	for _, p := range []netip.Prefix{takenRoute, as4Route, plainRoute} {
		if slices.Contains(gotReached, p.String()) {
			t.Errorf("the node re-advertised the neighbour's own %s to it", p)
		}
	}
	if !slices.Contains(gotReached, "10.10.10.10/32") {
		t.Errorf("the node advertised %v, not its network 10.10.10.10/32", gotReached)
	}

	// The withdrawals go through GoBGP too, of the route the node read
	// as of the one GoBGP read.
	if err := send(mpUnreachUpdate(append(labeledNLRI(takenRoute, 0x80000), labeledNLRI(plainRoute, 0x80000)...))); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "10.76.0.0/16 and 10.77.0.0/16 withdrawn", func() bool {
		_, _, okT := ftnLabels(n, "10.76.1.1")
		_, _, okP := ftnLabels(n, "10.77.1.1")
		return !okT && !okP
	})
	waitUntil(t, 5*time.Second, "one route counted", counted(1))
	if !installed("10.78.1.1", 200) {
		t.Error("10.78.0.0/16 not installed with push [200] after the others' withdrawal")
	}
	if s := n.BGP().Summary(); s.Neighbors[0].State != "established" {
		t.Errorf("the session is %s, want established", s.Neighbors[0].State)
	}

	// The same route with the node's AS in its path replaces the one
	// installed: an AS loop, treated as withdrawn.
	if err := send(withASPath(mpReachUpdate(4, peer, labeledNLRI(as4Route, 201)), 65002, 65001)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "10.78.0.0/16 treated as withdrawn for the AS loop", func() bool {
		_, _, ok := ftnLabels(n, "10.78.1.1")
		return !ok
	})
	waitUntil(t, 5*time.Second, "the AS-loop route received, not accepted", func() bool {
		f := families()
		return f.Received == 1 && f.Accepted == 0 && f.Installed == 0 && n.BGP().Summary().Refused["as_loop"] == 1
	})

	// The end of the session takes it.
	c.Close()
	waitUntil(t, 10*time.Second, "no route counted after the session", func() bool {
		f := families()
		return f.Received == 0 && f.Accepted == 0 && f.Installed == 0
	})
}
