package afpacket_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/mplstest"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// TestGSOFrames writes a TCP GSO packet (3000 bytes of payload, MSS 1000)
// with GSOFrames on: it crosses the veth as one frame, which a packet
// socket in the peer namespace (the kernel's view) reads whole. A packet of
// one segment that still carries GSOOptions (as an upper endpoint's own
// segments do) goes out as a plain frame.
func TestGSOFrames(t *testing.T) {
	tp := newTopo(t)
	ep := openGSOFrames(t, tp)
	if !ep.GSOFrames() {
		t.Fatal("GSOFrames() = false with Options.GSOFrames")
	}
	fd := peerSocket(t, tp, false, 5*time.Second)

	send := func(payload int) []byte {
		ip := mplstest.IPv4TCP(mplstest.TCP{
			Src: netip.MustParseAddrPort("10.99.1.1:1000"), Dst: netip.MustParseAddrPort("10.99.1.2:2000"),
			Seq: 1, Flags: header.TCPFlagAck, DF: true, Payload: bytes.Repeat([]byte{0xab}, payload)})
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: header.EthernetMinimumSize, Payload: buffer.MakeWithData(ip)})
		defer pkt.DecRef()
		eth := header.Ethernet(pkt.LinkHeader().Push(header.EthernetMinimumSize))
		eth.Encode(&header.EthernetFields{SrcAddr: ep.LinkAddress(), DstAddr: "\xff\xff\xff\xff\xff\xff", Type: header.IPv4ProtocolNumber})
		pkt.GSOOptions = stack.GSO{Type: stack.GSOTCPv4, NeedsCsum: true, CsumOffset: 16, MSS: 1000, L3HdrLen: header.IPv4MinimumSize}
		var l stack.PacketBufferList
		l.PushBack(pkt)
		if n, err := ep.WritePackets(l); n != 1 || err != nil {
			t.Fatalf("WritePackets: %d, %v", n, err)
		}
		return append(append([]byte(nil), eth...), ip...)
	}
	recv := func() []byte {
		buf := make([]byte, 1<<16)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				t.Fatalf("recv in the peer namespace: %v", err)
			}
			if n > 20 && header.IPv4(buf[14:n]).Protocol() == uint8(header.TCPProtocolNumber) {
				return buf[:n]
			}
		}
		t.Fatal("no TCP frame arrived")
		return nil
	}

	want := send(3000)
	got := recv()
	if len(got) != len(want) {
		t.Fatalf("peer read a %d-byte frame, want the whole %d-byte GSO frame", len(got), len(want))
	}
	// The kernel may complete the partial checksum; everything else is as sent.
	cs := header.EthernetMinimumSize + header.IPv4MinimumSize + 16
	if !bytes.Equal(got[:cs], want[:cs]) || !bytes.Equal(got[cs+2:], want[cs+2:]) {
		t.Error("the GSO frame arrived changed")
	}

	want = send(1000) // one segment: a plain frame
	if got := recv(); !bytes.Equal(got, want) {
		t.Errorf("one-segment packet: peer read %d bytes, want the %d sent unchanged", len(got), len(want))
	}
	if st := ep.Stats(); st.TXPackets != 2 || st.TXErrors != 0 {
		t.Errorf("stats %+v; want 2 frames sent, no error", st)
	}
}
