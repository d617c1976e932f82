package node_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/node"
)

// bgpMessage frames a BGP message (RFC 4271 §4.1).
func bgpMessage(typ byte, body []byte) []byte {
	m := make([]byte, 19, 19+len(body))
	for i := range 16 {
		m[i] = 0xff
	}
	binary.BigEndian.PutUint16(m[16:], uint16(19+len(body)))
	m[18] = typ
	return append(m, body...)
}

// readBGP reads one BGP message: its type and body.
func readBGP(c net.Conn) (byte, []byte, error) {
	var h [19]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint16(h[16:]))
	if n < 19 || n > 4096 {
		return 0, nil, fmt.Errorf("BGP message length %d", n)
	}
	body := make([]byte, n-19)
	_, err := io.ReadFull(c, body)
	return h[18], body, err
}

// bgpSession opens a session from local (AS 65002, IPv4 labeled unicast
// only: multiprotocol and 4-octet AS capabilities) to remote and returns
// it once the OPENs and a KEEPALIVE are exchanged.
func bgpSession(ns *netns.NS, local, remote netip.Addr) (net.Conn, error) {
	var c net.Conn
	if err := ns.Run(func() (err error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: local.AsSlice()}, Timeout: 5 * time.Second}
		c, err = d.Dial("tcp", netip.AddrPortFrom(remote, 179).String())
		return err
	}); err != nil {
		return nil, fmt.Errorf("dial %s: %w", remote, err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	id := local.As4()
	caps := []byte{
		1, 4, 0, 1, 0, 4, // multiprotocol: AFI 1, SAFI 4
		65, 4, 0, 0, 0xfd, 0xea, // 4-octet AS 65002
	}
	open := []byte{4, 0xfd, 0xea, 0, 9, id[0], id[1], id[2], id[3], byte(2 + len(caps)), 2, byte(len(caps))}
	open = append(open, caps...)
	if _, err := c.Write(bgpMessage(1, open)); err != nil {
		c.Close()
		return nil, err
	}
	for {
		typ, body, err := readBGP(c)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("waiting for the OPEN: %w", err)
		}
		if typ == 3 && len(body) >= 2 {
			c.Close()
			return nil, fmt.Errorf("NOTIFICATION %d/%d in reply to the OPEN", body[0], body[1])
		}
		if typ == 1 {
			break
		}
	}
	if _, err := c.Write(bgpMessage(4, nil)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// mpReachUpdate is an UPDATE from AS 65002 with an MP_REACH_NLRI of AFI 1
// and safi, next hop nh, for nlri (encoded as the SAFI wants).
func mpReachUpdate(safi byte, nh netip.Addr, nlri []byte) []byte {
	n := nh.As4()
	mp := append([]byte{0, 1, safi, 4, n[0], n[1], n[2], n[3], 0}, nlri...)
	attrs := []byte{
		0x40, 1, 1, 0, // ORIGIN IGP
		0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xea, // AS_PATH 65002
		0x80, 14, byte(len(mp)),
	}
	attrs = append(attrs, mp...)
	upd := []byte{0, 0, byte(len(attrs) >> 8), byte(len(attrs))}
	return bgpMessage(2, append(upd, attrs...))
}

// notification reads messages until a NOTIFICATION (its code and
// subcode) or the deadline.
func notification(c net.Conn, d time.Duration) (code, sub byte, err error) {
	c.SetReadDeadline(time.Now().Add(d))
	for {
		typ, body, err := readBGP(c)
		if err != nil {
			return 0, 0, err
		}
		if typ == 3 {
			if len(body) < 2 {
				return 0, 0, fmt.Errorf("NOTIFICATION of %d bytes", len(body))
			}
			return body[0], body[1], nil
		}
	}
}

// TestBGPUnnegotiatedSAFI: a neighbour sends an UPDATE with an
// MP_REACH_NLRI of an AFI/SAFI the session did not negotiate (IPv4
// unicast, on a session of IPv4 labeled unicast only), then a labeled
// route. Debian's gobgpd closes the session with NOTIFICATION 0/0, which
// RFC 4271 §4.5 does not define (tshark decodes it on the wire), and so
// would the GoBGP the node embeds; the node's splice keeps that family
// from GoBGP instead (RFC 4760 §7: ignored for the session), counts it,
// and the session stays up: the labeled route is installed.
//
// Bug planted to check the test: the splice copying the neighbour's bytes
// unfiltered (io.Copy) gives the node's NOTIFICATION 0/0 too.
func TestBGPUnnegotiatedSAFI(t *testing.T) {
	netns.SkipUnlessRoot(t)
	wiretest.Need(t)
	peer := netip.MustParseAddr("172.16.56.21")
	unicast := []byte{16, 10, 70}             // 10.70.0.0/16
	labeled := []byte{40, 0, 6, 0x41, 10, 71} // 10.71.0.0/16, label 100 (bottom of stack)
	for _, tc := range []struct{ name, target string }{{"node", "172.16.56.20"}, {"gobgpd", "172.16.56.22"}} {
		t.Run(tc.name, func(t *testing.T) {
			nsT, nsP := netns.New(t, "blst"), netns.New(t, "blsp")
			vT, vP := netns.VethPair(t, nsT, nsP)
			nsP.MustExec("ip", "addr", "add", peer.String()+"/24", "dev", vP)
			var n *node.Node
			if tc.name == "node" {
				n = startNode(t, nsT, "safi.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add %[2]s/24 dev %[1]s
bgp as 65001 router-id %[2]s
bgp neighbor %[3]s remote-as 65002 family ipv4-labeled-unicast hold-time 9
`, vT, tc.target, peer))
			} else {
				nsT.MustExec("ip", "addr", "add", tc.target+"/24", "dev", vT)
				startGoBGPd(t, nsT, gobgpdPeerConf(65001, tc.target, peer.String(), 65002))
			}
			tap := wiretest.NewTap(t, nsP, vP, bgpSegment) // what the peer receives
			var c net.Conn
			deadline := time.Now().Add(30 * time.Second)
			for {
				// The target may not listen yet.
				var err error
				if c, err = bgpSession(nsP, peer, netip.MustParseAddr(tc.target)); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
				time.Sleep(time.Second)
			}
			defer c.Close()
			for _, m := range [][]byte{mpReachUpdate(1, peer, unicast), mpReachUpdate(4, peer, labeled)} {
				if _, err := c.Write(m); err != nil {
					t.Fatal(err)
				}
			}
			code, sub, err := notification(c, 3*time.Second)
			time.Sleep(500 * time.Millisecond)
			rows := wiretest.Decode(t, tap.Wait(tap.Count()), "bgp.type", "bgp.notify.major_error", "bgp.notify.minor_error_unknown")
			var decoded []string
			for _, r := range rows {
				if r[1] != "" {
					decoded = append(decoded, r[1]+"/"+r[2])
				}
			}
			if err != nil {
				t.Logf("%s: no NOTIFICATION within 3 s (%v); tshark: %v", tc.name, err, decoded)
			} else {
				t.Logf("%s: NOTIFICATION %d/%d; tshark: %v", tc.name, code, sub, decoded)
			}
			if tc.name == "gobgpd" {
				if err != nil || code != 0 || sub != 0 || len(decoded) != 1 || decoded[0] != "0/0" {
					t.Errorf("gobgpd answered NOTIFICATION %d/%d (%v; tshark %v), not the 0/0 docs/CONFIG.md describes", code, sub, err, decoded)
				}
				return
			}
			if err == nil || len(decoded) > 0 {
				t.Fatalf("the node closed the session: NOTIFICATION %d/%d (tshark %v)", code, sub, decoded)
			}
			waitUntil(t, 10*time.Second, "the labeled route after the unnegotiated one", func() bool {
				l, _, ok := ftnLabels(n, "10.71.1.1")
				return ok && slices.Equal(l, []mpls.Label{100})
			})
			// The node reads the labeled route off the wire; GoBGP's word
			// that the session is up may come after it.
			waitUntil(t, 5*time.Second, "the session established", func() bool {
				return n.BGP().Summary().Neighbors[0].State == "established"
			})
			if s := n.BGP().Summary(); s.Unnegotiated != 1 || s.Neighbors[0].State != "established" {
				t.Errorf("summary: %d unnegotiated-family updates, state %s; want 1, established", s.Unnegotiated, s.Neighbors[0].State)
			}
			if _, _, ok := ftnLabels(n, "10.70.1.1"); ok {
				t.Error("the unnegotiated IPv4 unicast route was installed")
			}
		})
	}
}
