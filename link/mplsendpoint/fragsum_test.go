package mplsendpoint_test

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// The tests here check that the endpoint, which tells gVisor it verified
// every receive checksum (CapabilityRXChecksumOffload), verifies those of
// fragmented datagrams and of IPv6 packets behind extension headers. The
// frames and their checksums are built by gopacket (the oracle); the
// datagrams are read back through a real gVisor stack's UDP socket.
//
// Planted bugs, each seen to fail these tests: deliverFragment passing
// fragments up at once without holding them (the behaviour before
// fragsum.go: TestFragmentChecksum/*/corrupt read the corrupted 3000-byte
// datagram instead of the marker); complete() delivering without
// verifyFragmentSum (the same); place() ignoring overlaps and duplicates
// (TestFragmentOverlap: fragment_overlap stayed 0, the set being dropped
// only because the doubly summed bytes broke its checksum); ipv6Transport
// returning the first next header without walking the chain
// (TestIPv6ExtensionHeaderChecksum: bad_checksum stayed 0, the corrupted
// datagram was read and the corrupted SYN answered). FuzzFragmentChecksum
// with fragments passed up at once found a received datagram whose
// checksum does not verify within seconds.

const fragPort = 9

// fragHost is a gVisor stack at addrA4/addrA6 on an mplsendpoint over a
// sink, with a UDP socket on port fragPort for each family.
type fragHost struct {
	lower  *mplstest.Sink
	ep     *mplsendpoint.Endpoint
	st     *stack.Stack
	udp4   *gonet.UDPConn
	udp6   *gonet.UDPConn
	nextID uint32
}

func newFragHost(tb testing.TB) *fragHost {
	tb.Helper()
	h := &fragHost{lower: mplstest.NewSink(1500, macA), nextID: 100}
	h.lower.Record = true
	var err error
	h.ep, err = mplsendpoint.New(h.lower, mplsendpoint.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	var connected []tcpip.Route
	h.st, connected = newHostStack(tb, h.ep, addrA4, addrA6, tcp.NewProtocol, udp.NewProtocol)
	tb.Cleanup(func() { // before the stack closes
		if h.udp4 != nil {
			h.udp4.Close()
		}
		if h.udp6 != nil {
			h.udp6.Close()
		}
	})
	h.st.SetRouteTable(connected)
	if err := h.st.AddStaticNeighbor(nicID, ipv4.ProtocolNumber, tcpip.AddrFromSlice(addrB4.AsSlice()), macB); err != nil {
		tb.Fatal(err)
	}
	if err := h.st.AddStaticNeighbor(nicID, ipv6.ProtocolNumber, tcpip.AddrFromSlice(addrB6.AsSlice()), macB); err != nil {
		tb.Fatal(err)
	}
	h.udp4, err = gonet.DialUDP(h.st, &tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFromSlice(addrA4.AsSlice()), Port: fragPort}, nil, ipv4.ProtocolNumber)
	if err != nil {
		tb.Fatal(err)
	}
	h.udp6, err = gonet.DialUDP(h.st, &tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFromSlice(addrA6.AsSlice()), Port: fragPort}, nil, ipv6.ProtocolNumber)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// inject hands frame to the endpoint as the lower link would.
func (h *fragHost) inject(frame []byte) {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	h.lower.InjectInbound(0, pkt)
	pkt.DecRef()
}

// read returns the next datagram on the v6 or v4 socket, failing after a
// deadline.
func (h *fragHost) read(tb testing.TB, v6 bool) []byte {
	tb.Helper()
	c := h.udp4
	if v6 {
		c = h.udp6
	}
	buf := make([]byte, 70000)
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	n, _, err := c.ReadFrom(buf)
	if err != nil {
		tb.Fatalf("no datagram received: %v (stats %+v)", err, h.ep.Stats())
	}
	return buf[:n]
}

func serialize(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	sb := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		tb.Fatal(err)
	}
	return sb.Bytes()
}

func ipAddrs(v6 bool) (src, dst net.IP) {
	if v6 {
		return addrB6.AsSlice(), addrA6.AsSlice()
	}
	return addrB4.AsSlice(), addrA4.AsSlice()
}

// udpDatagram returns the UDP header and payload B:srcPort -> A:fragPort
// with the checksum gopacket computes.
func udpDatagram(tb testing.TB, v6 bool, srcPort uint16, payload []byte) []byte {
	tb.Helper()
	src, dst := ipAddrs(v6)
	u := &layers.UDP{SrcPort: layers.UDPPort(srcPort), DstPort: fragPort}
	var ip gopacket.SerializableLayer
	hl := 20
	if v6 {
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: src, DstIP: dst}
		_ = u.SetNetworkLayerForChecksum(ip6)
		ip, hl = ip6, 40
	} else {
		ip4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src, DstIP: dst}
		_ = u.SetNetworkLayerForChecksum(ip4)
		ip = ip4
	}
	return serialize(tb, ip, u, gopacket.Payload(payload))[hl:]
}

// fragPiece is one fragment to build: bytes [off, off+len(data)) of the
// fragmentable part, more fragments after it or not.
type fragPiece struct {
	off  int
	data []byte
	more bool
}

// split cuts l4 into pieces of at most size bytes (a multiple of 8).
func split(l4 []byte, size int) []fragPiece {
	var ps []fragPiece
	for off := 0; off < len(l4); off += size {
		end := min(off+size, len(l4))
		ps = append(ps, fragPiece{off: off, data: l4[off:end], more: end < len(l4)})
	}
	return ps
}

// fragFrame returns the Ethernet frame of fragment p of datagram id
// (protocol next: UDP or TCP) from B to A.
func fragFrame(tb testing.TB, v6 bool, id uint32, next layers.IPProtocol, p fragPiece) []byte {
	tb.Helper()
	src, dst := ipAddrs(v6)
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(macB), DstMAC: net.HardwareAddr(macA), EthernetType: layers.EthernetTypeIPv4}
	if v6 {
		eth.EthernetType = layers.EthernetTypeIPv6
		return serialize(tb, eth,
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6Fragment, SrcIP: src, DstIP: dst},
			&layers.IPv6Fragment{NextHeader: next, FragmentOffset: uint16(p.off / 8), MoreFragments: p.more, Identification: id},
			gopacket.Payload(p.data))
	}
	var flags layers.IPv4Flag
	if p.more {
		flags = layers.IPv4MoreFragments
	}
	return serialize(tb, eth,
		&layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: next, SrcIP: src, DstIP: dst, Id: uint16(id), Flags: flags, FragOffset: uint16(p.off / 8)},
		gopacket.Payload(p.data))
}

func (h *fragHost) sendPieces(tb testing.TB, v6 bool, ps []fragPiece) {
	tb.Helper()
	h.nextID++
	for _, p := range ps {
		h.inject(fragFrame(tb, v6, h.nextID, layers.IPProtocolUDP, p))
	}
}

// sendMarker sends an unfragmented datagram with payload "marker": read
// back, it shows that nothing sent before it is still to come.
func (h *fragHost) sendMarker(tb testing.TB, v6 bool) {
	tb.Helper()
	h.sendPieces(tb, v6, split(udpDatagram(tb, v6, 7, []byte("marker")), 2000))
}

func (h *fragHost) expectMarker(tb testing.TB, v6 bool) {
	tb.Helper()
	if got := h.read(tb, v6); string(got) != "marker" {
		tb.Fatalf("got a datagram of %d bytes (%.20q...), want only the marker", len(got), got)
	}
}

func payload3000() []byte {
	p := make([]byte, 3000)
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return p
}

func family(v6 bool) string {
	if v6 {
		return "ipv6"
	}
	return "ipv4"
}

// TestFragmentChecksum: a 3000-byte UDP datagram in three fragments is
// received whole when its checksum is right, in order and last first, and
// is not received, with its three fragments counted bad_checksum, when
// one payload byte changed after the checksum was computed.
func TestFragmentChecksum(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(family(v6), func(t *testing.T) {
			h := newFragHost(t)
			want := payload3000()
			l4 := udpDatagram(t, v6, 5000, want)
			ps := split(l4, 1232) // 3 fragments
			if len(ps) != 3 {
				t.Fatalf("%d fragments", len(ps))
			}
			t.Run("good", func(t *testing.T) {
				h.sendPieces(t, v6, ps)
				if got := h.read(t, v6); !bytes.Equal(got, want) {
					t.Fatalf("got %d bytes, want the %d sent", len(got), len(want))
				}
			})
			t.Run("last_first", func(t *testing.T) {
				h.sendPieces(t, v6, []fragPiece{ps[2], ps[1], ps[0]})
				if got := h.read(t, v6); !bytes.Equal(got, want) {
					t.Fatalf("got %d bytes, want the %d sent", len(got), len(want))
				}
			})
			for _, order := range [][]int{{0, 1, 2}, {2, 0, 1}} {
				t.Run("corrupt", func(t *testing.T) {
					bad := bytes.Clone(l4)
					bad[1500] ^= 0x20 // in the second fragment
					bps := split(bad, 1232)
					h.expectDropped(t, v6, []fragPiece{bps[order[0]], bps[order[1]], bps[order[2]]}, mplsendpoint.DropBadChecksum, 3, "one per fragment")
				})
			}
			t.Run("ipv4_no_checksum", func(t *testing.T) {
				if v6 {
					t.Skip("IPv6 UDP must have a checksum")
				}
				nc := bytes.Clone(l4)
				nc[6], nc[7] = 0, 0
				h.sendPieces(t, v6, split(nc, 1232))
				if got := h.read(t, v6); !bytes.Equal(got, want) {
					t.Fatalf("got %d bytes, want the %d sent", len(got), len(want))
				}
			})
		})
	}
}

// expectDropped sends pieces as one datagram's fragments, then a marker
// datagram, and checks, once the marker is delivered, that the drop
// counter reason moved by want (why says what they are) and that no
// fragment is still held.
func (h *fragHost) expectDropped(t *testing.T, v6 bool, pieces []fragPiece, reason mplsendpoint.DropReason, want uint64, why string) {
	t.Helper()
	before := statDrop(h.ep, reason)
	h.sendPieces(t, v6, pieces)
	h.sendMarker(t, v6)
	h.expectMarker(t, v6)
	st := h.ep.Stats()
	if got := st.Drop(reason) - before; got != want {
		t.Errorf("%s moved by %d, want %d (%s)", reason, got, want, why)
	}
	if st.RXFragmentsHeld != 0 {
		t.Errorf("%d fragments still held", st.RXFragmentsHeld)
	}
}

// TestFragmentOverlap: a set whose second fragment overlaps the first (and
// one with a duplicate) is dropped whole and counted fragment_overlap,
// even when the fragments after it complete the datagram.
func TestFragmentOverlap(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(family(v6), func(t *testing.T) {
			h := newFragHost(t)
			l4 := udpDatagram(t, v6, 5000, payload3000())
			ps := split(l4, 1232)
			overlap := fragPiece{off: ps[1].off - 8, data: l4[ps[1].off-8 : ps[2].off], more: true}
			for name, set := range map[string][]fragPiece{
				"overlap":   {ps[0], overlap, ps[1], ps[2]},
				"duplicate": {ps[0], ps[0], ps[1], ps[2]},
			} {
				t.Run(name, func(t *testing.T) {
					h.expectDropped(t, v6, set, mplsendpoint.DropFragmentOverlap, 4, "every fragment of the set")
				})
			}
		})
	}
}

// destOpts returns an IPv6 destination options header (PadN to 8 bytes)
// with next header next.
func destOpts(next layers.IPProtocol) gopacket.Payload {
	return gopacket.Payload{byte(next), 0, 1, 4, 0, 0, 0, 0}
}

// ipv6WithDestOpts returns the frame of an IPv6 packet B -> A whose
// transport header (l4, checksummed for the IPv6 pseudo-header) follows a
// destination options header.
func ipv6WithDestOpts(tb testing.TB, next layers.IPProtocol, l4 []byte) []byte {
	tb.Helper()
	src, dst := ipAddrs(true)
	return serialize(tb,
		&layers.Ethernet{SrcMAC: net.HardwareAddr(macB), DstMAC: net.HardwareAddr(macA), EthernetType: layers.EthernetTypeIPv6},
		&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6Destination, SrcIP: src, DstIP: dst},
		destOpts(next), gopacket.Payload(l4))
}

// tcpSYN returns a TCP SYN B:srcPort -> A:dstPort for the IPv6
// pseudo-header, checksummed by gopacket.
func tcpSYN(tb testing.TB, srcPort, dstPort uint16) []byte {
	tb.Helper()
	src, dst := ipAddrs(true)
	ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: src, DstIP: dst}
	tc := &layers.TCP{SrcPort: layers.TCPPort(srcPort), DstPort: layers.TCPPort(dstPort), Seq: 1000, SYN: true, Window: 65535}
	_ = tc.SetNetworkLayerForChecksum(ip6)
	return serialize(tb, ip6, tc)[40:]
}

// TestIPv6ExtensionHeaderChecksum: UDP and TCP behind a destination
// options header are verified: a wrong checksum is dropped (bad_checksum),
// a right one received (the datagram read, the SYN answered).
func TestIPv6ExtensionHeaderChecksum(t *testing.T) {
	h := newFragHost(t)
	t.Run("udp", func(t *testing.T) {
		l4 := udpDatagram(t, true, 5000, []byte("behind destination options"))
		bad := bytes.Clone(l4)
		bad[len(bad)-1] ^= 1
		before := statDrop(h.ep, mplsendpoint.DropBadChecksum)
		h.inject(ipv6WithDestOpts(t, layers.IPProtocolUDP, bad))
		if got := statDrop(h.ep, mplsendpoint.DropBadChecksum) - before; got != 1 {
			t.Errorf("bad_checksum moved by %d, want 1", got)
		}
		h.inject(ipv6WithDestOpts(t, layers.IPProtocolUDP, l4))
		if got := h.read(t, true); string(got) != "behind destination options" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("tcp", func(t *testing.T) {
		ln, err := gonet.ListenTCP(h.st, tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFromSlice(addrA6.AsSlice()), Port: 80}, ipv6.ProtocolNumber)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		const badPort, goodPort = 40001, 40002
		bad := tcpSYN(t, badPort, 80)
		bad[len(bad)-1] ^= 1 // in the options: only the checksum breaks
		before := statDrop(h.ep, mplsendpoint.DropBadChecksum)
		h.inject(ipv6WithDestOpts(t, layers.IPProtocolTCP, bad))
		if got := statDrop(h.ep, mplsendpoint.DropBadChecksum) - before; got != 1 {
			t.Errorf("bad_checksum moved by %d, want 1", got)
		}
		h.inject(ipv6WithDestOpts(t, layers.IPProtocolTCP, tcpSYN(t, goodPort, 80)))
		deadline := time.Now().Add(10 * time.Second)
		for {
			ports := synAckPorts(h.lower.Frames())
			if ports[badPort] {
				t.Fatal("the SYN with a wrong checksum was answered")
			}
			if ports[goodPort] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no SYN-ACK to the good SYN within 10 s (stats %+v)", h.ep.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// synAckPorts returns the destination ports of the IPv6 TCP SYN-ACKs in
// frames.
func synAckPorts(frames [][]byte) map[uint16]bool {
	ports := map[uint16]bool{}
	for _, f := range frames {
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		if tc, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && tc.SYN && tc.ACK {
			ports[uint16(tc.DstPort)] = true
		}
	}
	return ports
}

// FuzzFragmentChecksum sends a UDP datagram (payload from the input) cut
// into fragments of a fuzzed size, in a fuzzed order, with fuzzed
// duplicates, overlaps and byte flips, IPv4 or IPv6, to a real stack: a
// datagram the socket receives must have a transport checksum that
// verifies over what it received (nothing turns a corrupt datagram into a
// valid one), nothing panics and no packet buffer leaks (TestMain).
func FuzzFragmentChecksum(f *testing.F) {
	f.Add([]byte("hello fragments"), uint8(1), []byte{2, 1, 0}, []byte{}, uint16(0), uint8(0), false)
	f.Add(payload3000()[:2000], uint8(60), []byte{0, 1, 2}, []byte{}, uint16(1500), uint8(0x20), true)
	f.Add(payload3000()[:2000], uint8(60), []byte{9, 4}, []byte{}, uint16(700), uint8(0x01), false)
	f.Add(payload3000()[:900], uint8(8), []byte{3, 3, 0}, []byte{1, 130}, uint16(5), uint8(1), false)
	h := newFragHost(f)
	// Raw endpoints in place of the sockets: their Read does not block.
	h.udp4.Close()
	h.udp6.Close()
	h.udp4, h.udp6 = nil, nil
	raw := map[bool]tcpip.Endpoint{}
	for _, v6 := range []bool{false, true} {
		proto, a := ipv4.ProtocolNumber, addrA4
		if v6 {
			proto, a = ipv6.ProtocolNumber, addrA6
		}
		var wq waiter.Queue
		ep, terr := h.st.NewEndpoint(udp.ProtocolNumber, proto, &wq)
		if terr != nil {
			f.Fatal(terr)
		}
		f.Cleanup(ep.Close)
		if terr := ep.Bind(tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFromSlice(a.AsSlice()), Port: fragPort}); terr != nil {
			f.Fatal(terr)
		}
		raw[v6] = ep
	}
	f.Fuzz(func(t *testing.T, data []byte, unit uint8, order, extra []byte, flipAt uint16, flip uint8, v6 bool) {
		if len(data) > 8000 || len(order) > 64 || len(extra) > 8 {
			return
		}
		l4 := udpDatagram(t, v6, 5000, data)
		size := 8 * (int(unit)%128 + 1)
		sent := l4
		if flip != 0 {
			sent = bytes.Clone(l4)
			sent[int(flipAt)%len(sent)] ^= flip
		}
		ps := split(sent, size)
		// Every piece once, in an order the input shuffles, then the
		// extra pieces: duplicates, or (extra byte >= 128) pieces that
		// overlap the one before, each at a place the input says.
		seq := append([]fragPiece(nil), ps...)
		for i := len(seq) - 1; i > 0 && len(order) > 0; i-- {
			j := int(order[i%len(order)]) % (i + 1)
			seq[i], seq[j] = seq[j], seq[i]
		}
		for k, o := range extra {
			p := ps[int(o)%len(ps)]
			if o >= 128 && p.off >= 8 {
				p = fragPiece{off: p.off - 8, data: sent[p.off-8 : p.off+len(p.data)], more: p.more}
			}
			at := (int(o) + k) % (len(seq) + 1)
			seq = append(seq[:at], append([]fragPiece{p}, seq[at:]...)...)
		}
		h.nextID++
		for _, p := range seq {
			h.inject(fragFrame(t, v6, h.nextID, layers.IPProtocolUDP, p))
		}
		src, dst := addrB4, addrA4
		if v6 {
			src, dst = addrB6, addrA6
		}
		// Everything the stack accepted is queued by now: delivery is
		// synchronous.
		for {
			var got bytes.Buffer
			if _, err := raw[v6].Read(&got, tcpip.ReadOptions{}); err != nil {
				break
			}
			if !udpChecksumOK(src, dst, sent[:8], got.Bytes(), v6) {
				t.Fatalf("received a %d-byte datagram whose checksum does not verify", got.Len())
			}
		}
	})
}

// udpChecksumOK reports whether the UDP datagram with header hdr (as
// sent) and payload p (as received) has a transport checksum that
// verifies, or (IPv4) none.
func udpChecksumOK(src, dst netip.Addr, hdr, p []byte, v6 bool) bool {
	d := append(bytes.Clone(hdr), p...)
	if int(binary.BigEndian.Uint16(d[4:])) != len(d) {
		return false
	}
	if !v6 && d[6] == 0 && d[7] == 0 {
		return true
	}
	pseudo := header.PseudoHeaderChecksum(header.UDPProtocolNumber,
		tcpip.AddrFromSlice(src.AsSlice()), tcpip.AddrFromSlice(dst.AsSlice()), uint16(len(d)))
	return checksum.Combine(pseudo, checksum.Checksum(d, 0)) == 0xffff
}

func statDrop(ep *mplsendpoint.Endpoint, r mplsendpoint.DropReason) uint64 {
	st := ep.Stats()
	return st.Drop(r)
}

// BenchmarkReceiveFragments measures the host's receive path for a
// 3000-byte UDP datagram in three IPv4 or IPv6 fragments, each copied into
// a packet buffer (as the lower link does): two held, the third
// completing the datagram, whose checksum is verified before all three go
// up. Reported per datagram.
func BenchmarkReceiveFragments(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		b.Run(family(v6), func(b *testing.B) {
			ep, _ := groEndpoint(b, func(o *mplsendpoint.Options) { o.DisableGRO = true })
			d := &discard{}
			ep.Attach(d)
			b.Cleanup(ep.Close)
			var frames [][]byte
			for _, p := range split(udpDatagram(b, v6, 5000, payload3000()), 1232) {
				frames = append(frames, fragFrame(b, v6, 7, layers.IPProtocolUDP, p))
			}
			for _, f := range frames { // the table is allocated on the first fragment
				inject(ep, f, false)
			}
			d.n = 0
			benchInject(b, ep, frames, false)
			if st := ep.Stats(); st.Drop(mplsendpoint.DropBadChecksum) != 0 || d.n != 3*b.N {
				b.Fatalf("bad_checksum %d, %d packets delivered for %d datagrams", st.Drop(mplsendpoint.DropBadChecksum), d.n, b.N)
			}
		})
	}
}

// countingUp counts deliveries from several goroutines.
type countingUp struct{ n atomic.Int64 }

func (c *countingUp) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	c.n.Add(1)
}
func (*countingUp) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// TestFragmentsConcurrentQueues: two receive queues deliver fragments of
// their own datagrams at once (run with -race): every fragment goes up
// once and none stays held.
func TestFragmentsConcurrentQueues(t *testing.T) {
	ep, _ := groEndpoint(t, func(o *mplsendpoint.Options) { o.DisableGRO = true })
	up := &countingUp{}
	ep.Attach(up)
	t.Cleanup(ep.Close)
	const datagrams = 200
	l4 := udpDatagram(t, false, 5000, payload3000())
	frames := make([][][]byte, 2*datagrams)
	for id := range frames {
		for _, p := range split(l4, 1232) {
			frames[id] = append(frames[id], fragFrame(t, false, uint32(id), layers.IPProtocolUDP, p))
		}
	}
	var wg sync.WaitGroup
	for q := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := q; id < len(frames); id += 2 {
				for _, f := range frames[id] {
					inject(ep, f, false)
				}
			}
		}()
	}
	wg.Wait()
	st := ep.Stats()
	if got, want := up.n.Load(), int64(3*len(frames)); got != want || st.RXFragmentsHeld != 0 {
		t.Errorf("%d fragments delivered, %d held, want %d and 0 (stats %+v)", got, st.RXFragmentsHeld, want, st)
	}
}
