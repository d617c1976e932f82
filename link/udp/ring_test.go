//go:build linux

package udp

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/arpmsg"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// putFrame writes a frame of type typ around payload into the slot of
// queue q, as the MPLS endpoint's segmentation does, and commits it.
func putFrame(t testing.TB, e *Endpoint, q int, typ uint16, payload []byte) {
	t.Helper()
	n := header.EthernetMinimumSize + len(payload)
	buf, err := e.TXSlot(q, n)
	if buf == nil || err != nil {
		t.Fatalf("TXSlot(%d, %d) = %d bytes, %v", q, n, len(buf), err)
	}
	header.Ethernet(buf).Encode(&header.EthernetFields{SrcAddr: "\x02\x00\x00\x00\x00\x01", DstAddr: "\x02\x00\x00\x00\x00\x02", Type: 0})
	buf[12], buf[13] = byte(typ>>8), byte(typ)
	copy(buf[header.EthernetMinimumSize:], payload)
	e.TXCommit(q, n)
}

// TestTXRing: frames written into the transmit queue leave as the
// datagrams WritePackets would send (label stack and payload, an IPv4
// packet under its explicit null, an ARP request answered, not sent), in
// order, the equal-sized MPLS ones as one UDP GSO send, and a batch larger
// than the queue's buffer is sent in parts, nothing lost.
func TestTXRing(t *testing.T) {
	e, peer, rec := loopbackLink(t, Options{Flows: 1})
	peer.SetReadBuffer(8 << 20)
	var want [][]byte
	q, ok := e.TXBegin(7)
	if !ok {
		t.Fatal("TXBegin refused")
	}
	for i := range 4 {
		p := mplsPacket(1000, 80, 1400)
		p[len(p)-1] = byte(i)
		putFrame(t, e, q, ethertypeMPLS, p)
		want = append(want, p)
	}
	ip := mplsPacket(1000, 80, 600)[labelEntryLen:] // an IPv4 packet, TTL 64
	putFrame(t, e, q, uint16(header.IPv4ProtocolNumber), ip)
	null := explicitNull(false, 64)
	want = append(want, append(null[:], ip...))
	arp := arpmsg.Request("\x02\x00\x00\x00\x00\x01", netip.MustParseAddr("172.16.20.20"), netip.MustParseAddr("172.16.20.21"))
	putFrame(t, e, q, uint16(header.ARPProtocolNumber), arp)
	// More than the buffer holds: the queue sends what it has and goes on.
	for i := 0; i < 2*txQueueBytes/1500; i++ {
		p := mplsPacket(1000, 80, 1480)
		p[len(p)-1], p[len(p)-2] = byte(i), byte(i>>8)
		putFrame(t, e, q, ethertypeMPLS, p)
		want = append(want, p)
	}
	if failed, err := e.TXEnd(q); failed != 0 || err != nil {
		t.Fatalf("TXEnd = %d, %v", failed, err)
	}
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 65536)
	for i, w := range want {
		n, err := peer.Read(buf)
		if err != nil {
			t.Fatalf("datagram %d of %d: %v", i, len(want), err)
		}
		if !bytes.Equal(buf[:n], w) {
			t.Fatalf("datagram %d: %d bytes % x..., want %d bytes % x...", i, n, buf[:min(n, 8)], len(w), w[:8])
		}
	}
	st := e.Stats()
	if st.TXPackets != uint64(len(want)) || st.NeighborAnswers != 1 {
		t.Errorf("stats %+v: want %d packets sent, 1 neighbour answer", st, len(want))
	}
	if st.GSO && st.TXSegmented == 0 {
		t.Errorf("stats %+v: want UDP GSO sends", st)
	}
	// The ARP answer reaches the stack side.
	if f := waitFrames(t, rec, 1); header.Ethernet(f[0]).Type() != header.ARPProtocolNumber {
		t.Errorf("delivered % x, want an ARP reply", f[0][:14])
	}
	// A closed link takes no more frames.
	e.Close()
	if _, ok := e.TXBegin(7); ok {
		t.Error("TXBegin on a closed link succeeded")
	}
}

// BenchmarkTXRing sends the 46 segments of a 64 KiB TCP GSO packet
// through the transmit queue, as the MPLS endpoint writes them (compare
// BenchmarkWritePackets, one packet buffer per segment).
func BenchmarkTXRing(b *testing.B) {
	e, peer, _ := loopbackLink(b, Options{})
	peer.SetReadBuffer(64 << 20)
	go func() {
		buf := make([]byte, 65536)
		for {
			if _, err := peer.Read(buf); err != nil {
				return
			}
		}
	}()
	const segs = 46
	p := mplsPacket(1000, 80, 4+40+1424)
	b.ReportAllocs()
	b.SetBytes(segs * int64(len(p)))
	b.ResetTimer()
	for range b.N {
		q, _ := e.TXBegin(1)
		for range segs {
			putFrame(b, e, q, ethertypeMPLS, p)
		}
		e.TXEnd(q)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*segs), "ns/packet")
}
