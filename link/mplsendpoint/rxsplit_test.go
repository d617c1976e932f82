package mplsendpoint_test

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mplstest"
)

// recordingDispatcher keeps a copy of every packet delivered up.
type recordingDispatcher struct {
	mu   sync.Mutex
	pkts [][]byte
}

func (d *recordingDispatcher) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := pkt.ToView()
	d.pkts = append(d.pkts, append([]byte(nil), v.AsSlice()...))
	v.Release()
}

func (*recordingDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// TestForwardingSplitsOversizeRX: a 20000-byte TCP payload arriving in one frame (a
// veth peer's GSO frame) is delivered as link-MTU packets whose payloads
// join back to the original, each with valid checksums (checked by
// gopacket); without the option it goes up whole.
func TestForwardingSplitsOversizeRX(t *testing.T) {
	const mtu = 1500
	payload := patterned(20000, 7)
	mac := tcpip.LinkAddress("\x02\x00\x00\x00\x00\x01")
	for _, tc := range []struct {
		name string
		ip   []byte
	}{
		{"IPv4", mplstest.IPv4TCP(mplstest.TCP{
			Src: netip.MustParseAddrPort("172.16.21.22:5001"), Dst: netip.MustParseAddrPort("172.16.20.20:40000"),
			Seq: 1000, Ack: 1, Flags: header.TCPFlagAck | header.TCPFlagPsh, DF: true, Payload: payload,
		})},
		{"IPv6", mplstest.IPv6TCP(mplstest.TCP{
			Src: netip.MustParseAddrPort("[fd00::2]:5001"), Dst: netip.MustParseAddrPort("[fd00::1]:40000"),
			Seq: 1000, Ack: 1, Flags: header.TCPFlagAck | header.TCPFlagPsh, Payload: payload,
		})},
	} {
		for _, split := range []bool{false, true} {
			name := tc.name + map[bool]string{false: "/whole", true: "/split"}[split]
			t.Run(name, func(t *testing.T) {
				lower := mplstest.NewSink(mtu, mac)
				ep, err := mplsendpoint.New(lower, mplsendpoint.Options{Forwarding: split})
				if err != nil {
					t.Fatal(err)
				}
				var d recordingDispatcher
				ep.Attach(&d)
				frame := mplstest.Frame{Dst: mac, Src: "\x02\x00\x00\x00\x00\x02", Payload: tc.ip}.Bytes()
				pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
				lower.InjectInbound(0, pkt)
				pkt.DecRef()

				if !split {
					// The delivered buffer still holds the consumed
					// Ethernet header in front of the IP packet.
					if len(d.pkts) != 1 || !bytes.HasSuffix(d.pkts[0], tc.ip) {
						t.Fatalf("delivered %d packets, want the 1 whole packet", len(d.pkts))
					}
					return
				}
				var joined []byte
				for i, p := range d.pkts {
					if len(p) > mtu {
						t.Errorf("packet %d: %d bytes, over the link MTU %d", i, len(p), mtu)
					}
					first := layers.LayerTypeIPv4
					if tc.name == "IPv6" {
						first = layers.LayerTypeIPv6
					}
					g := gopacket.NewPacket(p, first, gopacket.Default)
					tl, ok := g.Layer(layers.LayerTypeTCP).(*layers.TCP)
					if !ok {
						t.Fatalf("packet %d: no TCP layer: %v", i, g.ErrorLayer())
					}
					if want := uint32(1000 + len(joined)); tl.Seq != want {
						t.Errorf("packet %d: seq %d, want %d", i, tl.Seq, want)
					}
					var nl gopacket.NetworkLayer = g.NetworkLayer()
					tl.SetNetworkLayerForChecksum(nl)
					if err, v := tl.VerifyChecksum(); err != nil || !v.Valid {
						t.Errorf("packet %d: TCP checksum not valid (%v, %v)", i, v, err)
					}
					if ip4, ok := nl.(*layers.IPv4); ok && header.IPv4(p[:ip4.IHL*4]).CalculateChecksum() != 0xffff {
						t.Errorf("packet %d: IPv4 header checksum not valid", i)
					}
					joined = append(joined, tl.Payload...)
				}
				if len(d.pkts) < 2 {
					t.Fatalf("delivered %d packets, want the payload split", len(d.pkts))
				}
				if !bytes.Equal(joined, payload) {
					t.Fatalf("joined payload of %d bytes differs from the %d sent", len(joined), len(payload))
				}
				if st := ep.Stats(); st.RXSplit != 1 || st.RXDelivered != uint64(len(d.pkts)) {
					t.Errorf("Stats RXSplit = %d, RXDelivered = %d; want 1, %d", st.RXSplit, st.RXDelivered, len(d.pkts))
				}
			})
		}
	}
}

// gsoForwarder is an IPForwarder that records what it is offered and
// takes the whole GSO packets (GSOMSS not 0) when take is set.
type gsoForwarder struct {
	take   bool
	offers []mplsendpoint.IPForwardRequest
	sizes  []int
}

func (f *gsoForwarder) ForwardIP(_ *mplsendpoint.Endpoint, req *mplsendpoint.IPForwardRequest) bool {
	f.offers = append(f.offers, *req)
	f.sizes = append(f.sizes, req.Packet.Data().Size())
	return f.take && req.GSOMSS != 0
}

// offerWhole attaches a recordingDispatcher to ep, has lower deliver ip
// in one frame, and checks that f's first offer is the whole packet with
// GSOMSS the payload of a maxLen-byte segment (maxLen less the IPv4 and
// TCP headers); it returns the dispatcher.
func offerWhole(t *testing.T, ep *mplsendpoint.Endpoint, lower *mplstest.Sink, ip []byte, f *gsoForwarder, maxLen int) *recordingDispatcher {
	t.Helper()
	var d recordingDispatcher
	ep.Attach(&d)
	frame := mplstest.Frame{Dst: lower.LinkAddress(), Src: "\x02\x00\x00\x00\x00\x02", Payload: ip}.Bytes()
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	lower.InjectInbound(0, pkt)
	pkt.DecRef()
	if len(f.offers) == 0 || f.sizes[0] != len(ip) {
		t.Fatalf("offers of %v bytes, want the whole %d-byte packet first", f.sizes, len(ip))
	}
	if want := maxLen - header.IPv4MinimumSize - header.TCPMinimumSize; f.offers[0].GSOMSS != want {
		t.Errorf("GSOMSS %d, want %d (%d less the headers)", f.offers[0].GSOMSS, want, maxLen)
	}
	return &d
}

// TestForwardingOffersGSOWhole: on a forwarding node, a TCP packet larger
// than the link's MTU is offered to the IP forwarder whole, once, with the
// payload size of the segments the endpoint would cut it into
// (IPForwardRequest.GSOMSS: MTU() less the IP and TCP headers); taken, it
// is neither split nor delivered. Declined, it is split and each segment
// offered on its own (GSOMSS 0), then delivered. Planted: the endpoint
// splitting before the offer fails both.
func TestForwardingOffersGSOWhole(t *testing.T) {
	const mtu = 1500
	payload := make([]byte, 20000)
	ip := mplstest.IPv4TCP(mplstest.TCP{
		Src: netip.MustParseAddrPort("172.16.20.20:40000"), Dst: netip.MustParseAddrPort("172.16.21.22:5001"),
		Seq: 1000, Ack: 1, Flags: header.TCPFlagAck, DF: true, Payload: payload,
	})
	mac := tcpip.LinkAddress("\x02\x00\x00\x00\x00\x01")
	for _, take := range []bool{true, false} {
		t.Run(map[bool]string{true: "taken", false: "declined"}[take], func(t *testing.T) {
			lower := mplstest.NewSink(mtu, mac)
			f := &gsoForwarder{take: take}
			ep, err := mplsendpoint.New(lower, mplsendpoint.Options{Forwarding: true, IPForwarder: f})
			if err != nil {
				t.Fatal(err)
			}
			d := offerWhole(t, ep, lower, ip, f, int(ep.MTU()))
			st := ep.Stats()
			if take {
				if len(f.offers) != 1 || len(d.pkts) != 0 || st.RXSplit != 0 || st.RXForwarded != 1 {
					t.Errorf("%d offers, %d delivered, RXSplit %d, RXForwarded %d; want 1, 0, 0, 1", len(f.offers), len(d.pkts), st.RXSplit, st.RXForwarded)
				}
				return
			}
			segs := len(f.offers) - 1
			if segs < 2 || st.RXSplit != 1 || len(d.pkts) != segs {
				t.Fatalf("%d segments offered, %d delivered, RXSplit %d; want the packet split, each segment delivered", segs, len(d.pkts), st.RXSplit)
			}
			for i, o := range f.offers[1:] {
				if o.GSOMSS != 0 || f.sizes[i+1] > int(ep.MTU()) {
					t.Errorf("segment %d offered with GSOMSS %d, %d bytes; want 0, at most %d", i, o.GSOMSS, f.sizes[i+1], ep.MTU())
				}
			}
		})
	}
}
