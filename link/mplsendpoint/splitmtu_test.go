package mplsendpoint_test

import (
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mplstest"
)

// TestSplitFitsSmallestLink: a GSO frame received on a 1500-byte link of
// a node whose other link carries 1468 (a udp link's MTU) is offered
// whole with segments that fit the smaller link (GSOMSS: 1468 less the
// headers), and, declined, is cut into packets of at most 1468 bytes, so
// the pieces can leave on either link with no "mtu" on the larger one.
// Alone (no FIB NIC), the same frame is cut at its own link's MTU.
// Planted: splitPacket cutting at MTU() alone fails the first two.
func TestSplitFitsSmallestLink(t *testing.T) {
	const bigMTU, smallMTU = 1500, 1468
	ip := mplstest.IPv4TCP(mplstest.TCP{
		Src: netip.MustParseAddrPort("172.16.21.22:5001"), Dst: netip.MustParseAddrPort("172.16.20.20:40000"),
		Seq: 1000, Ack: 1, Flags: header.TCPFlagAck, DF: true, Payload: make([]byte, 20000),
	})
	mac := tcpip.LinkAddress("\x02\x00\x00\x00\x00\x01")
	for _, tc := range []struct {
		name       string
		take, fib  bool
		wantMaxLen int
	}{
		{"taken", true, true, smallMTU},
		{"declined", false, true, smallMTU},
		{"alone", false, false, bigMTU},
	} {
		t.Run(tc.name, func(t *testing.T) {
			big := mplstest.NewSink(bigMTU, mac)
			f := &gsoForwarder{take: tc.take}
			ep, err := mplsendpoint.New(big, mplsendpoint.Options{Forwarding: true, IPForwarder: f})
			if err != nil {
				t.Fatal(err)
			}
			small, err := mplsendpoint.New(mplstest.NewSink(smallMTU, "\x02\x00\x00\x00\x00\x03"), mplsendpoint.Options{Forwarding: true})
			if err != nil {
				t.Fatal(err)
			}
			if tc.fib {
				fib := mplsendpoint.NewFIB(mplsendpoint.FIBOptions{Resolve: func(tcpip.NICID, tcpip.Address, tcpip.NetworkProtocolNumber, func(stack.LinkResolutionResult)) tcpip.Error {
					return &tcpip.ErrWouldBlock{}
				}})
				fib.SetLinks(map[string]*mplsendpoint.FIBLink{"big": {Endpoint: ep, NIC: 1}, "small": {Endpoint: small, NIC: 2}}, ep)
			}
			d := offerWhole(t, ep, big, ip, f, tc.wantMaxLen)
			if tc.take {
				if len(d.pkts) != 0 {
					t.Errorf("%d packets delivered, want none: the forwarder took it", len(d.pkts))
				}
				return
			}
			if len(d.pkts) < 2 {
				t.Fatalf("%d packets delivered, want the packet split", len(d.pkts))
			}
			longest := 0
			for _, p := range d.pkts {
				longest = max(longest, len(p))
			}
			if longest != tc.wantMaxLen {
				t.Errorf("longest piece %d bytes, want %d", longest, tc.wantMaxLen)
			}
		})
	}
}
