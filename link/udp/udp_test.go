package udp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/mplsnode/mplsnode/internal/testkit/arpmsg"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// recorder is a dispatcher that keeps a copy of every frame delivered and
// counts EndBatch calls.
type recorder struct {
	mu      sync.Mutex
	frames  [][]byte
	batches int
	keep    bool
}

func (r *recorder) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	if !r.keep {
		return
	}
	b := pkt.ToView().AsSlice()
	r.mu.Lock()
	r.frames = append(r.frames, bytes.Clone(b))
	r.mu.Unlock()
}

func (*recorder) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

func (r *recorder) EndBatch() {
	r.mu.Lock()
	r.batches++
	r.mu.Unlock()
}

func (r *recorder) got() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.frames...)
}

// freePort returns a UDP port free on addr now.
func freePort(t testing.TB, addr string) uint16 {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(addr)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

// loopbackLink opens a link on 127.0.0.1 whose remote is 127.0.0.1:peer
// (a socket the test reads), attached to a recorder.
func loopbackLink(t testing.TB, opts Options) (*Endpoint, *net.UDPConn, *recorder) {
	t.Helper()
	peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	opts.Local = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), freePort(t, "127.0.0.1"))
	opts.Remote = peer.LocalAddr().(*net.UDPAddr).AddrPort()
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	r := &recorder{keep: true}
	e.Attach(r)
	return e, peer, r
}

// mplsPacket returns label 100 (S, TTL 64) over an IPv4/TCP header with
// the given ports, padded to size bytes.
func mplsPacket(sport, dport uint16, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint32(b, 100<<12|1<<8|64)
	ip := header.IPv4(b[4:])
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(size - 4), TTL: 64, Protocol: 6,
		SrcAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 1}), DstAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 2})})
	binary.BigEndian.PutUint16(b[24:], sport)
	binary.BigEndian.PutUint16(b[26:], dport)
	return b
}

// frame returns an Ethernet frame of type typ around payload, as the MPLS
// endpoint hands it over.
func frame(typ tcpip.NetworkProtocolNumber, payload []byte) *stack.PacketBuffer {
	b := make([]byte, header.EthernetMinimumSize+len(payload))
	header.Ethernet(b).Encode(&header.EthernetFields{SrcAddr: "\x02\x00\x00\x00\x00\x01", DstAddr: "\x02\x00\x00\x00\x00\x02", Type: typ})
	copy(b[header.EthernetMinimumSize:], payload)
	return stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(b)})
}

func TestFlowHash(t *testing.T) {
	a, b := mplsPacket(1000, 80, 64), mplsPacket(1001, 80, 64)
	if FlowHash(a) == FlowHash(b) {
		t.Errorf("two flows hash alike: %#x", FlowHash(a))
	}
	// The same flow's packets of any size hash alike.
	if FlowHash(a) != FlowHash(mplsPacket(1000, 80, 1400)) {
		t.Error("one flow, two hashes")
	}
	// An entropy label decides alone: ELI (7), EL, then the label.
	el := func(entropy uint32, inner []byte) []byte {
		p := make([]byte, 8, 8+len(inner))
		binary.BigEndian.PutUint32(p, labelEntropyIndicator<<12|64)
		binary.BigEndian.PutUint32(p[4:], entropy<<12|64)
		return append(p, inner...)
	}
	if FlowHash(el(5000, a)) != FlowHash(el(5000, b)) {
		t.Error("entropy label ignored: the inner flows changed the hash")
	}
	if FlowHash(el(5000, a)) == FlowHash(el(5001, a)) {
		t.Error("two entropy labels hash alike")
	}
	// Truncated stacks and empty input hash without panicking.
	for _, p := range [][]byte{nil, {1}, a[:3], a[:4], a[:8]} {
		_ = FlowHash(p)
	}
}

func TestExplicitNull(t *testing.T) {
	for _, tc := range []struct {
		v6   bool
		ttl  uint8
		want uint32
	}{{false, 64, 0<<12 | 1<<8 | 64}, {true, 7, 2<<12 | 1<<8 | 7}} {
		n := explicitNull(tc.v6, tc.ttl)
		if got := binary.BigEndian.Uint32(n[:]); got != tc.want {
			t.Errorf("explicitNull(%v, %d) = %#x, want %#x", tc.v6, tc.ttl, got, tc.want)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	l4 := netip.MustParseAddrPort("127.0.0.1:16635")
	r4 := netip.MustParseAddrPort("127.0.0.1:26635")
	r6 := netip.MustParseAddrPort("[::1]:26635")
	for _, o := range []Options{
		{Local: l4},
		{Remote: r4},
		{Local: l4, Remote: r6},
		{Local: netip.MustParseAddrPort("[::1]:16635"), Remote: r6, ZeroChecksum: true},
		{Local: l4, Remote: r4, MTU: 1000},
		{Local: l4, Remote: r4, DSCP: 64},
		{Local: l4, Remote: r4, SourcePortMin: 50000, SourcePortMax: 50003},
	} {
		if e, err := New(o); err == nil {
			e.Close()
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

// TestSendReceive checks the wire form both ways against a plain UDP
// socket as the peer: an MPLS frame leaves as its bytes after the
// Ethernet header, an IPv4 frame under label 0 with its TTL, and a
// datagram from the peer comes up behind an Ethernet header with
// ethertype 0x8847, the link's address as destination.
func TestSendReceive(t *testing.T) {
	e, peer, r := loopbackLink(t, Options{})
	if got, want := e.MTU(), uint32(1500-20-8-4); got != want {
		t.Errorf("MTU %d, want %d", got, want)
	}
	mp := mplsPacket(1000, 80, 200)
	ip := mp[4:]
	var l stack.PacketBufferList
	l.PushBack(frame(ethertypeMPLS, mp))
	l.PushBack(frame(header.IPv4ProtocolNumber, ip))
	if n, err := e.WritePackets(l); n != 2 || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	l.Reset()
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2000)
	wantNull := append([]byte{0, 0, 1, 64}, ip...)
	for i, want := range [][]byte{mp, wantNull} {
		n, from, err := peer.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], want) {
			t.Errorf("datagram %d: % x\nwant % x", i, buf[:n], want)
		}
		if p := from.Port(); p < DefaultSourcePortMin || p != e.SourcePortFor(want) {
			t.Errorf("datagram %d from port %d, want %d (in %d-%d)", i, p, e.SourcePortFor(want), DefaultSourcePortMin, DefaultSourcePortMax)
		}
	}
	if _, err := peer.WriteToUDPAddrPort(mp, e.Local()); err != nil {
		t.Fatal(err)
	}
	f := waitFrames(t, r, 1)[0]
	eth := header.Ethernet(f)
	if eth.Type() != ethertypeMPLS || eth.DestinationAddress() != e.LinkAddress() || eth.SourceAddress() != e.PeerLinkAddress() ||
		!bytes.Equal(f[header.EthernetMinimumSize:], mp) {
		t.Errorf("delivered % x", f)
	}
}

func waitFrames(t *testing.T, r *recorder, n int) [][]byte {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if f := r.got(); len(f) >= n {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d frames, want %d", len(r.got()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitDrop(t *testing.T, e *Endpoint, reason DropReason, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.Stats().Dropped(reason) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d (stats %+v)", reason, e.Stats().Dropped(reason), n, e.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPeerFilter: a datagram from an address that is not the remote's is
// dropped (rx_unknown_peer), as are, from the remote, one too short for a
// label stack entry (rx_truncated) and one longer than the link carries
// (rx_oversized); none is delivered.
func TestPeerFilter(t *testing.T) {
	e, peer, r := loopbackLink(t, Options{})
	stranger, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}, net.UDPAddrFromAddrPort(e.Local()))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	mp := mplsPacket(1, 2, 100)
	if _, err := stranger.Write(mp); err != nil {
		t.Fatal(err)
	}
	waitDrop(t, e, DropUnknownPeer, 1)
	peer.WriteToUDPAddrPort(mp[:3], e.Local())
	waitDrop(t, e, DropTruncated, 1)
	peer.WriteToUDPAddrPort(mplsPacket(1, 2, int(e.MTU())+labelEntryLen+1), e.Local())
	waitDrop(t, e, DropOversized, 1)
	// The largest that fits is taken.
	peer.WriteToUDPAddrPort(mplsPacket(1, 2, int(e.MTU())+labelEntryLen), e.Local())
	if f := waitFrames(t, r, 1); len(f) != 1 || len(f[0]) != header.EthernetMinimumSize+int(e.MTU())+labelEntryLen {
		t.Errorf("delivered %d frames", len(f))
	}
}

// TestGSOSend: the segments of one flow handed over together leave as
// one UDP GSO send that the peer reads as separate datagrams, a shorter
// last one included.
func TestGSOSend(t *testing.T) {
	e, peer, _ := loopbackLink(t, Options{})
	if !e.Stats().GSO {
		t.Skip("no UDP GSO in this kernel")
	}
	var l stack.PacketBufferList
	sizes := []int{1400, 1400, 1400, 1400, 700}
	for i, n := range sizes {
		p := mplsPacket(1000, 80, n)
		p[len(p)-1] = byte(i)
		l.PushBack(frame(ethertypeMPLS, p))
	}
	if n, err := e.WritePackets(l); n != len(sizes) || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	l.Reset()
	if st := e.Stats(); st.TXSegmented != 1 || st.TXCalls != 1 || st.TXPackets != uint64(len(sizes)) {
		t.Errorf("stats %+v: want one GSO send of %d packets in one call", st, len(sizes))
	}
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 65536)
	for i, want := range sizes {
		n, err := peer.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if n != want || buf[n-1] != byte(i) {
			t.Errorf("datagram %d: %d bytes ending %d, want %d ending %d", i, n, buf[n-1], want, i)
		}
	}
}

// TestNeighborAnswers: an ARP request and an NDP neighbour solicitation
// are answered with the peer's link address and not sent; a duplicate
// address detection probe (from ::) gets no answer.
func TestNeighborAnswers(t *testing.T) {
	e, peer, r := loopbackLink(t, Options{})
	arp := arpmsg.Request(e.LinkAddress(), netip.MustParseAddr("172.16.20.20"), netip.MustParseAddr("172.16.20.21"))
	ns := func(src tcpip.Address) []byte {
		target := tcpip.AddrFrom16([16]byte{0xfd, 0, 0x20, 15: 0x21})
		b := make([]byte, header.IPv6MinimumSize+header.ICMPv6NeighborSolicitMinimumSize)
		header.IPv6(b).Encode(&header.IPv6Fields{PayloadLength: header.ICMPv6NeighborSolicitMinimumSize, TransportProtocol: header.ICMPv6ProtocolNumber,
			HopLimit: 255, SrcAddr: src, DstAddr: header.SolicitedNodeAddr(target)})
		icmp := header.ICMPv6(b[header.IPv6MinimumSize:])
		icmp.SetType(header.ICMPv6NeighborSolicit)
		header.NDPNeighborSolicit(icmp.MessageBody()).SetTargetAddress(target)
		icmp.SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: icmp, Src: src, Dst: header.SolicitedNodeAddr(target)}))
		return b
	}
	var l stack.PacketBufferList
	l.PushBack(frame(header.ARPProtocolNumber, arp))
	l.PushBack(frame(header.IPv6ProtocolNumber, ns(tcpip.AddrFrom16([16]byte{0xfd, 0, 0x20, 15: 0x20}))))
	l.PushBack(frame(header.IPv6ProtocolNumber, ns(header.IPv6Any)))
	if n, err := e.WritePackets(l); n != 3 || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	l.Reset()
	f := waitFrames(t, r, 2)
	rep := header.ARP(f[0][header.EthernetMinimumSize:])
	if !rep.IsValid() || rep.Op() != header.ARPReply || tcpip.LinkAddress(rep.HardwareAddressSender()) != e.PeerLinkAddress() ||
		!bytes.Equal(rep.ProtocolAddressSender(), []byte{172, 16, 20, 21}) {
		t.Errorf("ARP answer % x", f[0])
	}
	ip := header.IPv6(f[1][header.EthernetMinimumSize:])
	na := header.ICMPv6(ip.Payload())
	if !ip.IsValid(len(ip)) || na.Type() != header.ICMPv6NeighborAdvert || ip.HopLimit() != 255 ||
		na.Checksum() != header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: setZeroChecksum(na), Src: ip.SourceAddress(), Dst: ip.DestinationAddress()}) {
		t.Errorf("NDP answer % x", f[1])
	}
	adv := header.NDPNeighborAdvert(na.MessageBody())
	if !adv.SolicitedFlag() || adv.TargetAddress() != ip.SourceAddress() || tcpip.LinkAddress(na[header.ICMPv6NeighborAdvertMinimumSize+2:][:6]) != e.PeerLinkAddress() {
		t.Errorf("NDP answer % x", f[1])
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(r.got()); n != 2 {
		t.Errorf("%d answers, want 2 (none to duplicate address detection)", n)
	}
	peer.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := peer.Read(make([]byte, 100)); err == nil {
		t.Errorf("the peer got a %d-byte datagram: neighbour requests must not be sent", n)
	}
}

// setZeroChecksum returns a copy of an ICMPv6 message with its checksum
// field zero (to recompute it).
func setZeroChecksum(m header.ICMPv6) header.ICMPv6 {
	c := header.ICMPv6(bytes.Clone(m))
	c.SetChecksum(0)
	return c
}

// TestNotSent: multicast IP and unknown ethertypes are dropped, counted.
func TestNotSent(t *testing.T) {
	e, _, _ := loopbackLink(t, Options{})
	mc := make([]byte, header.IPv4MinimumSize)
	header.IPv4(mc).Encode(&header.IPv4Fields{TotalLength: 20, TTL: 1, Protocol: 17,
		SrcAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 1}), DstAddr: tcpip.AddrFrom4([4]byte{224, 0, 0, 1})})
	var l stack.PacketBufferList
	l.PushBack(frame(header.IPv4ProtocolNumber, mc))
	l.PushBack(frame(0x88cc, make([]byte, 40)))
	e.WritePackets(l)
	l.Reset()
	if st := e.Stats(); st.Dropped(DropNotUnicast) != 1 || st.Dropped(DropUnsupported) != 1 || st.TXPackets != 0 {
		t.Errorf("stats %+v", st)
	}
}

// groCmsg returns a UDP_GRO control message with segment size seg.
func groCmsg(seg int) []byte {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_GRO
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(b[unix.CmsgLen(0):], uint32(seg))
	return b
}

// FuzzReceive feeds one read (its bytes, a UDP_GRO segment size or none,
// the source) through the receive path: every delivered frame is an
// Ethernet header of type 0x8847 to the link's address followed by one
// segment of the read, at least one label entry and at most the link's
// limit long, and every segment is delivered or counted as dropped.
func FuzzReceive(f *testing.F) {
	f.Add(mplsPacket(1, 2, 100), uint16(0), true)
	f.Add(bytes.Repeat(mplsPacket(1, 2, 1400), 3), uint16(1400), true)
	f.Add([]byte{1, 2, 3, 4, 5}, uint16(2), true)
	f.Add(mplsPacket(1, 2, 100), uint16(0), false)
	e, _, _ := loopbackLink(f, Options{})
	// Buffers of the test's own: the link's receive goroutine uses e.rx.
	r := &rxState{}
	r.init(e, 1)
	f.Fuzz(func(t *testing.T, data []byte, seg uint16, fromPeer bool) {
		if len(data) > rxBufSize {
			data = data[:rxBufSize]
		}
		rec := &recorder{keep: true}
		copy(r.bufs[0], data)
		r.msgs[0].len = uint32(len(data))
		h := &r.msgs[0].hdr
		h.Flags = 0
		ctl := r.ctl[:groCmsgSpace]
		clear(ctl)
		h.Controllen = 0
		if seg != 0 {
			copy(ctl, groCmsg(int(seg)))
			h.SetControllen(groCmsgSpace)
		}
		src := e.remoteIP
		if !fromPeer {
			src = netip.MustParseAddr("127.0.0.9")
		}
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&r.names[0]))
		*sa = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: src.As4()}
		h.Namelen = unix.SizeofSockaddrInet4
		before := e.Stats()
		n := e.deliverRead(rec, r, 0)
		after := e.Stats()
		frames := rec.got()
		if n != len(frames) {
			t.Fatalf("deliverRead says %d, delivered %d", n, len(frames))
		}
		maxLen := int(e.MTU()) + labelEntryLen
		off := 0
		for _, fr := range frames {
			eth := header.Ethernet(fr)
			p := fr[header.EthernetMinimumSize:]
			if eth.Type() != ethertypeMPLS || eth.DestinationAddress() != e.LinkAddress() || len(p) < labelEntryLen || len(p) > maxLen {
				t.Fatalf("bad frame % x", fr)
			}
			i := bytes.Index(data[off:], p)
			if i < 0 {
				t.Fatalf("frame payload not from the read")
			}
			off += i + len(p)
		}
		var dropped uint64
		for i := range after.Drops {
			dropped += after.Drops[i] - before.Drops[i]
		}
		if segs := after.RXDatagrams - before.RXDatagrams; uint64(n)+dropped != segs {
			t.Fatalf("%d datagrams: %d delivered, %d dropped", segs, n, dropped)
		}
		if !fromPeer && n != 0 {
			t.Fatal("a stranger's datagram delivered")
		}
	})
}

// BenchmarkWritePackets sends the 46 segments of a 64 KiB TCP GSO packet
// (1424-byte payloads under one label) to a loopback peer, as one
// WritePackets call.
func BenchmarkWritePackets(b *testing.B) {
	for _, gso := range []bool{true, false} {
		name := "gso"
		if !gso {
			name = "mmsg"
		}
		b.Run(name, func(b *testing.B) {
			e, peer, _ := loopbackLink(b, Options{NoGSO: !gso})
			peer.SetReadBuffer(64 << 20)
			const segs = 46
			pkts := make([]*stack.PacketBuffer, segs)
			for i := range pkts {
				pkts[i] = frame(ethertypeMPLS, mplsPacket(1000, 80, 4+40+1424))
			}
			var l stack.PacketBufferList
			for _, p := range pkts {
				l.PushBack(p)
			}
			go func() {
				buf := make([]byte, 65536)
				for {
					if _, err := peer.Read(buf); err != nil {
						return
					}
				}
			}()
			b.ReportAllocs()
			b.SetBytes(segs * (4 + 40 + 1424))
			b.ResetTimer()
			for range b.N {
				e.WritePackets(l)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*segs), "ns/packet")
		})
	}
}

// BenchmarkDeliver delivers a coalesced read of 45 datagrams.
func BenchmarkDeliver(b *testing.B) {
	e, _, _ := loopbackLink(b, Options{})
	r := &rxState{}
	r.init(e, 1)
	data := bytes.Repeat(mplsPacket(1, 2, 1428), 45)
	copy(r.bufs[0], data)
	r.msgs[0].len = uint32(len(data))
	h := &r.msgs[0].hdr
	copy(r.ctl, groCmsg(1428))
	h.SetControllen(groCmsgSpace)
	sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&r.names[0]))
	*sa = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: e.remoteIP.As4()}
	h.Namelen = unix.SizeofSockaddrInet4
	d := &recorder{}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for range b.N {
		if n := e.deliverRead(d, r, 0); n != 45 {
			b.Fatalf("delivered %d", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*45), "ns/packet")
}

// TestOuterTTLDSCP: the outer header carries the configured TTL and DSCP,
// as the receiving kernel reports them (IP_RECVTTL, IP_RECVTOS).
func TestOuterTTLDSCP(t *testing.T) {
	e, peer, _ := loopbackLink(t, Options{TTL: 9, DSCP: 46})
	rc, err := peer.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTTL, 1)
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
	})
	var l stack.PacketBufferList
	l.PushBack(frame(ethertypeMPLS, mplsPacket(1, 2, 100)))
	if n, err := e.WritePackets(l); n != 1 || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	l.Reset()
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf, oob := make([]byte, 2000), make([]byte, 256)
	_, oobn, _, _, err := peer.ReadMsgUDP(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		t.Fatal(err)
	}
	ttl, tos := -1, -1
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TTL && len(m.Data) >= 4:
			ttl = int(binary.NativeEndian.Uint32(m.Data))
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TOS && len(m.Data) >= 1:
			tos = int(m.Data[0])
		}
	}
	if ttl != 9 || tos != 46<<2 {
		t.Errorf("outer TTL %d, TOS %#x; want 9, %#x", ttl, tos, 46<<2)
	}
}

// FuzzFlowHash: the hash reads transit bytes (an LSR's forwarded frames),
// so any input must hash without a panic and the same input the same way;
// and it reads no further than the label stack and 64 bytes under it (an
// IPv4 header with options and the ports), so the bytes WritePackets peeks
// at give every packet whose stack fits them its full hash.
func FuzzFlowHash(f *testing.F) {
	f.Add(mplsPacket(1000, 80, 64))
	f.Add(append([]byte{0, 0, 0x70, 64, 0, 0x13, 0x81, 64}, mplsPacket(1, 2, 60)...))
	f.Add([]byte{0, 0, 1, 64, 0x60, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h := FlowHash(b)
		if FlowHash(bytes.Clone(b)) != h {
			t.Fatal("one input, two hashes")
		}
		// The end of the stack: past the bottom entry, or past an entropy
		// label.
		end := -1
		for i := 0; i+labelEntryLen <= len(b); i += labelEntryLen {
			e := binary.BigEndian.Uint32(b[i:])
			if e>>12 == labelEntropyIndicator && i+2*labelEntryLen <= len(b) {
				end = i + 2*labelEntryLen
				break
			}
			if e&(1<<8) != 0 {
				end = i + labelEntryLen + 64
				break
			}
		}
		if end >= 0 && end <= len(b) && FlowHash(b[:end]) != h {
			t.Fatalf("bytes past %d changed the hash", end)
		}
	})
}

// TestInterleavedFlows: the packets of two flows handed over alternately
// leave as one UDP GSO send per flow, one sendmmsg per source port, each
// flow's datagrams in their order.
func TestInterleavedFlows(t *testing.T) {
	e, peer, _ := loopbackLink(t, Options{})
	if !e.Stats().GSO {
		t.Skip("no UDP GSO in this kernel")
	}
	a := mplsPacket(1000, 80, 1000)
	var b []byte
	for sport := uint16(1001); ; sport++ {
		if b = mplsPacket(sport, 80, 1000); e.SourcePortFor(b) != e.SourcePortFor(a) {
			break
		}
	}
	var l stack.PacketBufferList
	const each = 4
	for i := range 2 * each {
		p := bytes.Clone(a)
		if i%2 == 1 {
			p = bytes.Clone(b)
		}
		p[len(p)-1] = byte(i)
		l.PushBack(frame(ethertypeMPLS, p))
	}
	if n, err := e.WritePackets(l); n != 2*each || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	l.Reset()
	if st := e.Stats(); st.TXCalls != 2 || st.TXSegmented != 2 || st.TXPackets != 2*each {
		t.Errorf("stats %+v: want 2 calls, 2 GSO sends, %d packets", st, 2*each)
	}
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	last := map[uint16]int{}
	buf := make([]byte, 2000)
	for range 2 * each {
		n, from, err := peer.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		seq := int(buf[n-1])
		if p, ok := last[from.Port()]; ok && seq != p+2 {
			t.Errorf("from port %d: datagram %d after %d", from.Port(), seq, p)
		}
		last[from.Port()] = seq
	}
	if len(last) != 2 {
		t.Errorf("datagrams from %d ports, want 2", len(last))
	}
}
