package mplsendpoint_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/internal/virtionet"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// TestGSOSlotsWholeIsTheLinksRule: on a ring lower link that takes GSO
// frames, the slot path hands a packet down whole exactly when
// virtionet.IsGSOFrame, the rule the link writes its virtio-net header by,
// says it may leave whole, so what goes down whole leaves as a
// GSO frame. An unlabelled GSO packet one byte over the MSS (as gVisor's
// TCP hands it: headers pushed) goes whole, and IsGSOFrame holds for what
// the link got; one of a single segment goes into a slot, its checksum
// finished (the slot path's own copy sent it down whole, where it took the
// one-segment path of writeGSO instead).
func TestGSOSlotsWholeIsTheLinksRule(t *testing.T) {
	g := newGSORing(t)
	g.Record = true
	ep := labelledEndpoint(t, 1, g)
	dst := netip.MustParseAddr("10.0.0.99") // no FIB route: unlabelled
	packet := func(n int) *stack.PacketBuffer {
		ip := mplstest.IPv4TCP(mplstest.TCP{Src: netip.AddrPortFrom(addrA4, 40000), Dst: netip.AddrPortFrom(dst, 80),
			Seq: 1000, Ack: 1, Window: 502, Flags: header.TCPFlagAck, Payload: make([]byte, n)})
		pkt := gsoPacketFromIP(ep, ip, 1460)
		addHeader(ep, pkt, dst)
		return pkt
	}
	var l stack.PacketBufferList
	l.PushBack(packet(1461))
	l.PushBack(packet(1000))
	if n, err := ep.WritePackets(l); n != 2 || err != nil {
		t.Fatalf("WritePackets = %d, %v; want 2, nil", n, err)
	}
	l.DecRef()
	if want := "[end whole slot end]"; fmt.Sprint(g.events) != want {
		t.Fatalf("events %v, want %s (the two-segment packet whole, the one-segment one in a slot)", g.events, want)
	}
	if p := g.whole[0]; !virtionet.IsGSOFrame(p) {
		t.Errorf("handed down whole, but the link would write it behind a zero header: GSO %+v, %d bytes", p.GSOOptions, p.Size())
	}
	if len(g.Frames) != 1 {
		t.Fatalf("%d frames in slots, want 1", len(g.Frames))
	}
	f := g.Frames[0]
	if len(f) != 14+20+20+1000 {
		t.Fatalf("slot frame of %d bytes, want %d", len(f), 14+20+20+1000)
	}
	ip := header.IPv4(f[14:])
	tcp := header.TCP(ip.Payload())
	if !tcp.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(tcp.Payload(), 0), uint16(len(tcp.Payload()))) {
		t.Error("the one-segment packet's TCP checksum is not finished")
	}
}
