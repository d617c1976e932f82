package forward_test

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// fuzzLinkMTU is the link MTU of both fuzzed links.
const fuzzLinkMTU = 1500

// FuzzForward feeds whole Ethernet frames to an LSR (lsrFuzz: swap, swap and
// push, pop to IP, label 110 spread over a swap and a pop (ECMP: the flow
// hash reads the label stack and the payload), and IP transit plain or
// with labels pushed; the egress
// link takes GSO frames, so popped and routed TCP may coalesce) through its
// ingress link, each twice in one receive batch, and
// checks every frame the switch writes, forwarded on out0 or an ICMP error
// back on in0:
//   - nothing panics (a panic fails the fuzz run);
//   - no frame is longer than the link MTU (a GSO frame's segments: its
//     headers plus MSS);
//   - no label 3 (implicit null) is on the wire, and no reserved label
//     other than an explicit null is on top;
//   - when the received IP packet's checksums were valid (IPv4 header,
//     TCP/UDP/ICMP), those of the packet sent are too (a fragment's header
//     checksum; a GSO packet's header checksum and partial TCP checksum);
//     ICMP errors always carry valid checksums.
//
// The seed corpus holds issue 12's hostile frames (testdata/fuzz/
// FuzzForward/scapy-*, made by cmd/mplsnode/testdata/issue12.py --corpus
// with the LSR's MACs) and good frames of each action.
func FuzzForward(f *testing.F) {
	data := make([]byte, 1400)
	f.Add(labelled([]uint32{100}, 64, ipv4UDPFuzz(64, 100)))
	f.Add(labelled([]uint32{101, 500}, 9, ipv4UDPFuzz(64, 100)))
	f.Add(labelled([]uint32{102}, 64, seg(data, 0, 1400, 0)))
	f.Add(labelled([]uint32{102, 7, 4242}, 64, seg(data, 0, 1400, header.TCPFlagPsh)))
	f.Add(labelled([]uint32{100}, 1, ipv4UDPFuzz(64, 20)))
	f.Add(labelled([]uint32{101}, 64, ipv4UDPFuzz(64, 1480)))
	f.Add(labelled([]uint32{0, 102}, 64, seg(data, 0, 100, 0)))
	badHdr := ipv4UDPFuzz(64, 1480) // fragmented once labelled, header checksum wrong
	badHdr[10] ^= 0x5a
	f.Add(labelled([]uint32{101}, 64, badHdr))
	badTCP := seg(data, 0, 1400, 0) // coalescable, TCP checksum wrong
	badTCP[header.IPv4MinimumSize+16] ^= 0x5a
	f.Add(labelled([]uint32{102}, 64, badTCP))

	f.Add(labelled([]uint32{110}, 64, ipv4UDPFuzz(64, 100)))
	f.Add(labelled([]uint32{110, 7, 4242}, 64, ipv4UDPFuzz(64, 100)))
	f.Add(labelled([]uint32{110}, 64, seg(data, 0, 1400, 0)))

	f.Add(ipFrame(udpTo("10.9.9.9", 64, 100, false)))
	f.Add(ipFrame(udpTo("10.8.1.1", 64, 1480, false)))
	f.Add(ipFrame(udpTo("10.8.1.1", 64, 1480, true)))
	f.Add(ipFrame(udpTo("10.9.9.9", 1, 100, false)))
	f.Add(ipFrame(seg(data, 0, 1400, 0)))
	// Larger than the link MTU (a veth peer's GSO frame): forwarded whole
	// (gsoout.go); with its header checksum wrong, dropped whole.
	big := make([]byte, 5000)
	f.Add(ipFrame(seg(big, 0, 5000, 0)))
	badBig := seg(big, 0, 5000, 0)
	badBig[10] ^= 0x5a
	f.Add(ipFrame(badBig))

	lsrFuzz := lsrIP
	lsrFuzz.ilm = append(slices.Clone(lsrIP.ilm), mpls.ILMEntry{Label: 110, Action: mpls.ILMMultipath, NextHops: []mpls.NextHop{
		{Via: hop2, Device: "out0", Labels: []mpls.Label{200}},
		{Via: hop2, Device: "out0", Weight: 3},
	}})
	p, in, out := groLSR(f, lsrFuzz, hop2)
	p.neighbor(f, "in0", netip.MustParseAddr("10.1.0.2"), macPrev)
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) > 9000 {
			return
		}
		defer func() {
			out.release()
			out.Drain()
			in.Drain()
		}()
		validIn, known := inputChecksumsValid(frame)
		inject(in.Endpoint, frame)
		// The segment that continues it (a TCP segment's next in
		// sequence, its checksum adjusted so that it stays as valid or
		// invalid as the first), so that GRO may coalesce them; else the
		// same frame again.
		inject(in.Endpoint, continuation(frame))
		in.endBatch(t)
		for _, pkt := range out.pkts {
			checkOut(t, pkt, validIn, known, frame)
		}
		for {
			pkt := in.Read()
			if pkt == nil {
				break
			}
			checkICMP(t, pkt)
			pkt.DecRef()
		}
	})
}

// ipv4UDPFuzz is ipv4UDP without a testing.TB.
func ipv4UDPFuzz(ttl uint8, size int) []byte {
	ip := mplstest.IPv4UDP(netip.MustParseAddrPort("10.1.0.2:1234"), netip.MustParseAddrPort("10.9.9.9:5678"), false, make([]byte, size))
	h := header.IPv4(ip)
	h.SetTTL(ttl)
	h.SetChecksum(0)
	h.SetChecksum(^h.CalculateChecksum())
	return ip
}

// patterned returns n bytes of a pattern (byte i is i*step) that shows
// where a byte was taken from.
func patterned(n, step int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * step)
	}
	return b
}

// frameBytes returns pkt's bytes as on the wire.
func frameBytes(pkt *gstack.PacketBuffer) []byte {
	var b []byte
	for _, v := range pkt.AsSlices() {
		b = append(b, v...)
	}
	return b
}

// labelsAndPayload splits an Ethernet frame into its label stack (none
// for IP) and the payload after it; ok is false for a malformed stack.
func labelsAndPayload(frame []byte) (labels []uint32, payload []byte, ok bool) {
	if len(frame) < 14 {
		return nil, nil, false
	}
	off := 14
	if binary.BigEndian.Uint16(frame[12:]) != 0x8847 {
		return nil, frame[off:], true
	}
	for {
		if len(frame) < off+4 || len(labels) > 16 {
			return labels, nil, false
		}
		v := binary.BigEndian.Uint32(frame[off:])
		labels = append(labels, v>>12)
		off += 4
		if v&(1<<8) != 0 {
			return labels, frame[off:], true
		}
	}
}

// inputChecksumsValid reports whether the IP packet a frame carries under
// its labels (if any) has valid checksums: IPv4 header, and TCP/UDP/ICMP
// over the whole datagram (not for fragments); known is false when the
// frame has no IP packet to judge.
func inputChecksumsValid(frame []byte) (valid, known bool) {
	_, ip, ok := labelsAndPayload(frame)
	if !ok || len(ip) == 0 || (ip[0]>>4 != 4 && ip[0]>>4 != 6) {
		return false, false
	}
	return ipChecksumsValid(ip, false), true
}

// continuation returns a copy of frame whose IPv4 TCP segment (under its
// labels, if any) follows the original's in sequence, with the TCP
// checksum updated incrementally (RFC 1624) so that a valid one stays
// valid and a wrong one stays wrong by as much; any other frame is
// returned as it is.
func continuation(frame []byte) []byte {
	_, ip, ok := labelsAndPayload(frame)
	if !ok || len(ip) < 40 || ip[0]>>4 != 4 || ip[9] != uint8(header.TCPProtocolNumber) {
		return frame
	}
	h := header.IPv4(ip)
	hl, tot := int(h.HeaderLength()), int(h.TotalLength())
	if hl < 20 || tot > len(ip) || tot < hl+20 {
		return frame
	}
	tcp := header.TCP(ip[hl:tot])
	n := tot - hl - int(tcp.DataOffset())
	if n <= 0 || int(tcp.DataOffset()) < 20 {
		return frame
	}
	c := append([]byte(nil), frame...)
	off := len(frame) - len(ip) + hl // the TCP header in c
	ct := header.TCP(c[off:])
	old := ct.SequenceNumber()
	seq := old + uint32(n)
	ct.SetSequenceNumber(seq)
	sum := ^ct.Checksum()
	for _, w := range [][2]uint16{{uint16(old >> 16), uint16(seq >> 16)}, {uint16(old), uint16(seq)}} {
		sum = checksum.Combine(checksum.Combine(sum, ^w[0]), w[1])
	}
	ct.SetChecksum(^sum)
	return c
}

// ipChecksumsValid checks the IP packet ip as the fuzz oracle: IPv4 header
// checksum; TCP/UDP/ICMP checksum over the datagram unless it is a
// fragment; with partialTCP, the TCP checksum field must hold the
// pseudo-header sum (a GSO packet's partial checksum) instead.
func ipChecksumsValid(ip []byte, partialTCP bool) bool {
	if len(ip) == 0 {
		return false
	}
	var (
		l4       []byte
		proto    uint8
		src, dst tcpip.Address
	)
	switch ip[0] >> 4 {
	case 4:
		if len(ip) < 20 {
			return false
		}
		h := header.IPv4(ip)
		hl, tot := int(h.HeaderLength()), int(h.TotalLength())
		if hl < 20 || tot < hl || tot > len(ip) || checksum.Checksum(ip[:hl], 0) != 0xffff {
			return false
		}
		if h.More() || h.FragmentOffset() != 0 {
			return true
		}
		l4, proto, src, dst = ip[hl:tot], h.Protocol(), h.SourceAddress(), h.DestinationAddress()
	case 6:
		if len(ip) < 40 {
			return false
		}
		h := header.IPv6(ip)
		if 40+int(h.PayloadLength()) > len(ip) {
			return false
		}
		l4, proto, src, dst = ip[40:40+int(h.PayloadLength())], h.NextHeader(), h.SourceAddress(), h.DestinationAddress()
	default:
		return false
	}
	switch tcpip.TransportProtocolNumber(proto) {
	case header.TCPProtocolNumber, header.UDPProtocolNumber, header.ICMPv6ProtocolNumber:
		if len(l4) < 8 || (proto == uint8(header.TCPProtocolNumber) && len(l4) < 20) {
			return false
		}
		if proto == uint8(header.UDPProtocolNumber) && ip[0]>>4 == 4 && l4[6] == 0 && l4[7] == 0 {
			return true // no UDP checksum
		}
		pseudo := header.PseudoHeaderChecksum(tcpip.TransportProtocolNumber(proto), src, dst, uint16(len(l4)))
		if partialTCP && proto == uint8(header.TCPProtocolNumber) {
			return binary.BigEndian.Uint16(l4[16:]) == pseudo
		}
		return checksum.Checksum(l4, pseudo) == 0xffff
	case header.ICMPv4ProtocolNumber:
		return len(l4) >= 8 && checksum.Checksum(l4, 0) == 0xffff
	}
	return true
}

// checkOut checks one frame written to out0.
func checkOut(t *testing.T, pkt *gstack.PacketBuffer, validIn, known bool, in []byte) {
	t.Helper()
	b := frameBytes(pkt)
	labels, ip, ok := labelsAndPayload(b)
	if !ok {
		t.Fatalf("malformed frame out %.80x (in %.80x)", b, in)
	}
	for i, l := range labels {
		if l == 3 {
			t.Fatalf("label 3 on the wire at %d: %v (in %.80x)", i, labels, in)
		}
	}
	if len(labels) > 0 && labels[0] != 0 && labels[0] != 2 && labels[0] <= 15 {
		t.Fatalf("reserved label %d on top: %v (in %.80x)", labels[0], labels, in)
	}
	gso := pkt.GSOOptions.Type != gstack.GSONone && len(labels) == 0
	if gso {
		seg := int(pkt.GSOOptions.L3HdrLen) + int(header.TCP(ip[pkt.GSOOptions.L3HdrLen:]).DataOffset()) + int(pkt.GSOOptions.MSS)
		if seg > fuzzLinkMTU {
			t.Fatalf("GSO segments of %d bytes > link MTU %d (in %.80x)", seg, fuzzLinkMTU, in)
		}
	} else if len(b)-14 > fuzzLinkMTU {
		t.Fatalf("frame of %d bytes > link MTU %d + 14 (in %.80x)", len(b), fuzzLinkMTU, in)
	}
	if validIn && !ipChecksumsValid(ip, gso) {
		t.Fatalf("input checksums valid, output's not (gso %v): out %.80x in %.80x", gso, b, in)
	}
	// Nothing turns a corrupt packet into a valid one: a coalesced GSO
	// packet (whose partial checksum the peer completes, or trusts) or a
	// packet whose header was rewritten must not come from one whose
	// checksums failed.
	if known && !validIn && len(ip) >= 20 && ip[0]>>4 == 4 {
		frag := header.IPv4(ip).More() || header.IPv4(ip).FragmentOffset() != 0
		outHeaderValid := checksum.Checksum(ip[:min(len(ip), int(header.IPv4(ip).HeaderLength()))], 0) == 0xffff
		if gso || (frag && outHeaderValid && !inHeaderValid(in)) || (!frag && ipChecksumsValid(ip, false)) {
			t.Fatalf("input checksums wrong, output's valid (gso %v, fragment %v): out %.80x in %.80x", gso, frag, b, in)
		}
	}
}

// checkICMP checks a frame the switch sent back on in0: an ICMP error no
// longer than the link MTU with valid checksums (or an ARP request for the
// address it goes to).
func checkICMP(t *testing.T, pkt *gstack.PacketBuffer) {
	t.Helper()
	b := frameBytes(pkt)
	if len(b) >= 14 && binary.BigEndian.Uint16(b[12:]) == uint16(header.ARPProtocolNumber) {
		return // the stack resolving the ICMP error's next hop
	}
	if len(b)-14 > fuzzLinkMTU {
		t.Fatalf("ICMP frame of %d bytes > link MTU", len(b))
	}
	_, ip, ok := labelsAndPayload(b)
	if !ok || !ipChecksumsValid(ip, false) {
		t.Fatalf("ICMP error with bad checksums: %.80x", b)
	}
}

// inHeaderValid reports whether the input frame's IPv4 header checksum is
// valid: a fragment made of a packet whose header checksum was wrong must
// not get a valid one (a wrong transport checksum no fragment shows).
func inHeaderValid(in []byte) bool {
	_, ip, ok := labelsAndPayload(in)
	if !ok || len(ip) < 20 {
		return false
	}
	hl := int(header.IPv4(ip).HeaderLength())
	return hl >= 20 && hl <= len(ip) && checksum.Checksum(ip[:hl], 0) == 0xffff
}
