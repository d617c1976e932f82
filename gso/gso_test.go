package gso_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/mplsnode/mplsnode/gso"
)

// decoded is what gopacket, the independent oracle, reads from one segment.
type decoded struct {
	ipLen   int // IPv4 total length or IPv6 payload length
	id      uint16
	seq     uint32
	flags   byte
	payload []byte
}

// gopacketCheck decodes seg after its prefix with gopacket and verifies the
// IPv4 header checksum and the TCP checksum with gopacket's own code.
func gopacketCheck(seg []byte, prefixLen int, v6 bool) (decoded, error) {
	first := layers.LayerTypeIPv4
	if v6 {
		first = layers.LayerTypeIPv6
	}
	pkt := gopacket.NewPacket(seg[prefixLen:], first, gopacket.Default)
	if el := pkt.ErrorLayer(); el != nil {
		return decoded{}, fmt.Errorf("gopacket: %v", el.Error())
	}
	var d decoded
	if v6 {
		ip, ok := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		if !ok {
			return d, errors.New("gopacket found no IPv6 layer")
		}
		d.ipLen = int(ip.Length)
	} else {
		ip, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if !ok {
			return d, errors.New("gopacket found no IPv4 layer")
		}
		_, res := ip.VerifyChecksum()
		if !res.Valid {
			return d, fmt.Errorf("gopacket: IPv4 checksum got %#04x, want %#04x", res.Actual, res.Correct)
		}
		d.ipLen, d.id = int(ip.Length), ip.Id
	}
	tcp, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok {
		return d, errors.New("gopacket found no TCP layer")
	}
	if err := tcp.SetNetworkLayerForChecksum(pkt.NetworkLayer()); err != nil {
		return d, err
	}
	err, res := tcp.VerifyChecksum()
	if err != nil {
		return d, err
	}
	if !res.Valid {
		return d, fmt.Errorf("gopacket: TCP checksum got %#04x, want %#04x", res.Actual, res.Correct)
	}
	d.seq = tcp.Seq
	d.flags = seg[len(seg)-len(tcp.Payload)-len(tcp.Contents)+13]
	d.payload = tcp.Payload
	return d, nil
}

func TestSegmentHeaderFields(t *testing.T) {
	type want struct {
		ipLen int
		id    uint16
		seq   uint32
		flags byte
	}
	tests := []struct {
		name string
		spec spec
		want []want
	}{{
		name: "IPv4 3 labels, timestamps, ID and seq wrap",
		spec: spec{
			prefix: prefixN(3), tcpOpts: tsOpt, payload: payloadN(3000), mss: 1448,
			flags: fACK | fPSH | fFIN | fCWR | fECE, seq: 0xfffff000, id: 0xfffe, csum: 1,
		},
		want: []want{
			{ipLen: 20 + 32 + 1448, id: 0xfffe, seq: 0xfffff000, flags: fACK | fCWR | fECE},
			{ipLen: 20 + 32 + 1448, id: 0xffff, seq: 0xfffff5a8, flags: fACK | fECE},
			{ipLen: 20 + 32 + 104, id: 0x0000, seq: 0xfffffb50, flags: fACK | fECE | fPSH | fFIN},
		},
	}, {
		name: "IPv4 options IHL 6, 1 label, exact multiple",
		spec: spec{
			prefix: prefixN(1), ipOpts: []byte{0x94, 4, 0, 0}, payload: payloadN(3 * 1000), mss: 1000,
			flags: fACK | fPSH, seq: 7, id: 100, csum: 2,
		},
		want: []want{
			{ipLen: 24 + 20 + 1000, id: 100, seq: 7, flags: fACK},
			{ipLen: 24 + 20 + 1000, id: 101, seq: 1007, flags: fACK},
			{ipLen: 24 + 20 + 1000, id: 102, seq: 2007, flags: fACK | fPSH},
		},
	}, {
		name: "IPv6 3 labels, timestamps",
		spec: spec{
			v6: true, prefix: prefixN(3), tcpOpts: tsOpt, payload: payloadN(2000), mss: 1428,
			flags: fACK | fPSH | fCWR, seq: 1 << 31, csum: 1,
		},
		want: []want{
			{ipLen: 32 + 1428, seq: 1 << 31, flags: fACK | fCWR},
			{ipLen: 32 + 572, seq: 1<<31 + 1428, flags: fACK | fPSH},
		},
	}, {
		name: "IPv6 hop-by-hop and destination options",
		spec: spec{
			v6: true, prefix: prefixN(1),
			exts: []ext{
				{typ: 0, body: []byte{1, 4, 0, 0, 0, 0}},                           // PadN
				{typ: 60, body: []byte{1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, // PadN, 16 bytes
			},
			payload: payloadN(2500), mss: 1200, flags: fACK | fFIN, seq: 99,
		},
		want: []want{
			{ipLen: 8 + 16 + 20 + 1200, seq: 99, flags: fACK},
			{ipLen: 8 + 16 + 20 + 1200, seq: 1299, flags: fACK},
			{ipLen: 8 + 16 + 20 + 100, seq: 2499, flags: fACK | fFIN},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(tt.spec)
			segs, err := segment(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(segs) != len(tt.want) {
				t.Fatalf("got %d segments, want %d", len(segs), len(tt.want))
			}
			off := 0
			for i, seg := range segs {
				d, err := gopacketCheck(seg, p.PrefixLen, tt.spec.v6)
				if err != nil {
					t.Fatalf("segment %d: %v", i, err)
				}
				w := tt.want[i]
				if d.ipLen != w.ipLen {
					t.Errorf("segment %d: got IP length %d, want %d", i, d.ipLen, w.ipLen)
				}
				if !tt.spec.v6 && d.id != w.id {
					t.Errorf("segment %d: got IPv4 ID %#04x, want %#04x", i, d.id, w.id)
				}
				if d.seq != w.seq {
					t.Errorf("segment %d: got seq %#08x, want %#08x", i, d.seq, w.seq)
				}
				if d.flags != w.flags {
					t.Errorf("segment %d: got flags %#02x, want %#02x", i, d.flags, w.flags)
				}
				if !bytes.Equal(d.payload, tt.spec.payload[off:off+len(d.payload)]) {
					t.Errorf("segment %d: payload differs from input at %d", i, off)
				}
				off += len(d.payload)
			}
			if err := checkSegments(p, segs); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestSegmentMatchesGopacketSerialization builds each expected segment with
// gopacket's serializer (which computes lengths and checksums itself) and
// compares it byte for byte with ours.
func TestSegmentMatchesGopacketSerialization(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v", v6), func(t *testing.T) {
			payload := payloadN(4000)
			const mss, seq = 1448, 0xfffffff0
			prefix := prefixN(2)
			p := build(spec{v6: v6, prefix: prefix, tcpOpts: tsOpt, payload: payload, mss: mss,
				flags: fACK | fPSH | fFIN | fCWR, seq: seq, id: 0x1234})
			segs, err := segment(p)
			if err != nil {
				t.Fatal(err)
			}
			for i, seg := range segs {
				chunk := payload[i*mss : min((i+1)*mss, len(payload))]
				tcp := &layers.TCP{
					SrcPort: 12345, DstPort: 80, Seq: seq + uint32(i*mss), Ack: 0x01020304,
					ACK: true, CWR: i == 0, PSH: i == len(segs)-1, FIN: i == len(segs)-1,
					Window: 0xffff,
					Options: []layers.TCPOption{
						{OptionType: layers.TCPOptionKindNop},
						{OptionType: layers.TCPOptionKindNop},
						{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: tsOpt[4:]},
					},
				}
				var ip gopacket.SerializableLayer
				if v6 {
					l := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolTCP, HopLimit: 64, SrcIP: src6, DstIP: dst6}
					tcp.SetNetworkLayerForChecksum(l)
					ip = l
				} else {
					l := &layers.IPv4{Version: 4, Id: 0x1234 + uint16(i), Flags: layers.IPv4DontFragment, TTL: 64,
						Protocol: layers.IPProtocolTCP, SrcIP: src4, DstIP: dst4}
					tcp.SetNetworkLayerForChecksum(l)
					ip = l
				}
				buf := gopacket.NewSerializeBuffer()
				opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
				if err := gopacket.SerializeLayers(buf, opts, gopacket.Payload(prefix), ip, tcp, gopacket.Payload(chunk)); err != nil {
					t.Fatal(err)
				}
				if want := buf.Bytes(); !bytes.Equal(seg, want) {
					t.Errorf("segment %d:\n got %x\nwant %x", i, seg[:p.L4Offset+32], want[:min(len(want), p.L4Offset+32)])
				}
			}
		})
	}
}

func TestSegmentEdgeCases(t *testing.T) {
	hbh := ext{typ: 0, body: []byte{1, 4, 0, 0, 0, 0}}
	dopt := ext{typ: 60, body: []byte{1, 4, 0, 0, 0, 0}}
	rt := ext{typ: 43, body: append([]byte{4, 0, 0, 0, 0, 0}, src6...)} // SRH-like routing header, segments left 0
	tests := []struct {
		name  string
		spec  spec
		count int
	}{
		{"payload exactly 3 x MSS", spec{prefix: prefixN(1), payload: payloadN(3 * 1448), flags: fACK | fPSH}, 3},
		{"payload < MSS", spec{prefix: prefixN(1), tcpOpts: tsOpt, payload: payloadN(100), flags: fACK | fPSH | fFIN | fCWR}, 1},
		{"payload == MSS", spec{prefix: prefixN(1), payload: payloadN(1448), flags: fACK}, 1},
		{"payload MSS + 1", spec{prefix: prefixN(1), payload: payloadN(1449), flags: fACK}, 2},
		{"no payload (pure ACK)", spec{prefix: prefixN(1), flags: fACK}, 1},
		{"SYN alone", spec{prefix: prefixN(1), tcpOpts: tsOpt, flags: fSYN}, 1},
		{"MSS 1", spec{prefix: prefixN(1), payload: payloadN(37), mss: 1, flags: fACK | fFIN | fCWR}, 37},
		{"MSS 1 IPv6", spec{v6: true, prefix: prefixN(1), payload: payloadN(9), mss: 1, flags: fACK | fPSH}, 9},
		{"odd MSS", spec{prefix: prefixN(1), payload: payloadN(1000), mss: 333, flags: fACK}, 4},
		{"prefix 0 IPv4", spec{payload: payloadN(5000), flags: fACK}, 4},
		{"prefix 0 IPv6", spec{v6: true, payload: payloadN(5000), flags: fACK}, 4},
		{"prefix 14 + 64", spec{prefix: prefixN(16), payload: payloadN(5000), flags: fACK}, 4},
		{"prefix 14 + 64 IPv6", spec{v6: true, prefix: prefixN(16), tcpOpts: tsOpt, payload: payloadN(5000), flags: fACK}, 4},
		{"odd prefix", spec{prefix: []byte{1, 2, 3}, payload: payloadN(3000), flags: fACK}, 3},
		{"IPv4 options IHL 15", spec{prefix: prefixN(1), ipOpts: bytes.Repeat([]byte{1}, 40), payload: payloadN(3000), flags: fACK}, 3},
		{"TCP options 40 bytes", spec{prefix: prefixN(1), tcpOpts: append(bytes.Repeat(tsOpt, 3), 1, 1, 1, 0), payload: payloadN(3000), flags: fACK}, 3},
		{"IPv6 hop-by-hop", spec{v6: true, prefix: prefixN(1), exts: []ext{hbh}, payload: payloadN(3000), flags: fACK}, 3},
		{"IPv6 destination options", spec{v6: true, prefix: prefixN(1), exts: []ext{dopt}, payload: payloadN(3000), flags: fACK}, 3},
		{"IPv6 three extension headers", spec{v6: true, prefix: prefixN(1), exts: []ext{hbh, dopt, rt}, payload: payloadN(3000), flags: fACK}, 3},
		{"incoming checksum partial", spec{prefix: prefixN(1), payload: payloadN(3000), flags: fACK, csum: 1}, 3},
		{"incoming checksum garbage", spec{v6: true, prefix: prefixN(1), payload: payloadN(3000), flags: fACK, csum: 2}, 3},
		{"64 KiB IPv4", spec{prefix: prefixN(3), tcpOpts: tsOpt, payload: payloadN(65535 - 52), flags: fACK}, 46},
		{"64 KiB IPv6", spec{v6: true, prefix: prefixN(3), tcpOpts: tsOpt, payload: payloadN(65535 - 32), flags: fACK}, 46},
		{"MSS beyond payload, near IP length limit", spec{payload: payloadN(65535 - 40), mss: 1 << 30, flags: fACK}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(tt.spec)
			orig := bytes.Clone(p.Buf)
			segs, err := segment(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(segs) != tt.count {
				t.Errorf("got %d segments, want %d", len(segs), tt.count)
			}
			if err := checkSegments(p, segs); err != nil {
				t.Error(err)
			}
			for i, seg := range segs {
				if _, err := gopacketCheck(seg, p.PrefixLen, tt.spec.v6); err != nil {
					t.Errorf("segment %d: %v", i, err)
				}
			}
			if !bytes.Equal(p.Buf, orig) {
				t.Error("Segment modified the input buffer")
			}
		})
	}
}

// TestSegmentSingleUntouched checks that a packet within one MSS comes out
// identical to the input except for the IP length field, the IPv4 header
// checksum and the TCP checksum.
func TestSegmentSingleUntouched(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		p := build(spec{v6: v6, prefix: prefixN(2), tcpOpts: tsOpt, payload: payloadN(999),
			flags: fACK | fPSH | fFIN | fCWR | fECE, seq: 5, id: 77, csum: 2})
		segs, err := segment(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(segs) != 1 {
			t.Fatalf("v6=%v: got %d segments, want 1", v6, len(segs))
		}
		got, want := bytes.Clone(segs[0]), bytes.Clone(p.Buf)
		ip, l4 := p.PrefixLen, p.L4Offset
		rewritten := []int{ip + 2, ip + 3, ip + 10, ip + 11, l4 + 16, l4 + 17} // IPv4 total length and checksum, TCP checksum
		if v6 {
			rewritten = []int{ip + 4, ip + 5, l4 + 16, l4 + 17} // IPv6 payload length, TCP checksum
		}
		for _, j := range rewritten {
			got[j], want[j] = 0, 0
		}
		if !bytes.Equal(got, want) {
			t.Errorf("v6=%v: single segment differs from input beyond the rewritten fields", v6)
		}
		if err := checkSegments(p, segs); err != nil {
			t.Errorf("v6=%v: %v", v6, err)
		}
	}
}

// TestSegmentRoundTrip segments random packets, shuffles the segments and
// reassembles them by sequence number: the result must be the input payload
// and every checksum must verify with gopacket.
func TestSegmentRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		s := spec{
			v6:      r.IntN(2) == 1,
			prefix:  payloadN(r.IntN(80)),
			payload: make([]byte, r.IntN(20000)),
			mss:     1 + r.IntN(3000),
			flags:   fACK | byte(r.IntN(2))*fPSH | byte(r.IntN(2))*fFIN | byte(r.IntN(2))*fCWR,
			seq:     r.Uint32(),
			id:      uint16(r.Uint32()),
			csum:    r.IntN(3),
		}
		if r.IntN(2) == 1 {
			s.tcpOpts = tsOpt
		}
		if !s.v6 && r.IntN(3) == 0 {
			s.ipOpts = bytes.Repeat([]byte{1}, 4*r.IntN(11))
		}
		if s.v6 && r.IntN(3) == 0 {
			s.exts = []ext{{typ: 60, body: make([]byte, 6+8*r.IntN(3))}}
		}
		for i := range s.payload {
			s.payload[i] = byte(r.Uint32())
		}
		p := build(s)
		segs, err := segment(p)
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		r.Shuffle(len(segs), func(i, j int) { segs[i], segs[j] = segs[j], segs[i] })
		got := make([]byte, len(s.payload))
		seen := 0
		for _, seg := range segs {
			d, err := gopacketCheck(seg, p.PrefixLen, s.v6)
			if err != nil {
				t.Fatalf("iteration %d: %v", iter, err)
			}
			at := int(d.seq - s.seq)
			if at < 0 || at+len(d.payload) > len(got) {
				t.Fatalf("iteration %d: segment seq %d out of range", iter, d.seq)
			}
			copy(got[at:], d.payload)
			seen += len(d.payload)
		}
		if seen != len(s.payload) || !bytes.Equal(got, s.payload) {
			t.Fatalf("iteration %d: reassembled %d bytes, differs from the %d-byte input payload", iter, seen, len(s.payload))
		}
	}
}

func TestSegmentErrors(t *testing.T) {
	good4 := build(spec{prefix: prefixN(1), tcpOpts: tsOpt, payload: payloadN(3000), flags: fACK})
	good6 := build(spec{v6: true, prefix: prefixN(1), payload: payloadN(3000), flags: fACK})
	ip4, l4 := good4.PrefixLen, good4.L4Offset
	ip6 := good6.PrefixLen
	// with returns a copy of p with buffer bytes set and Packet fields edited.
	with := func(p gso.Packet, edit func(p *gso.Packet)) gso.Packet {
		p.Buf = bytes.Clone(p.Buf)
		edit(&p)
		return p
	}
	tests := []struct {
		name string
		p    gso.Packet
		want error
	}{
		{"prefix negative", with(good4, func(p *gso.Packet) { p.PrefixLen = -1 }), gso.ErrBadPrefix},
		{"prefix beyond buffer", with(good4, func(p *gso.Packet) { p.PrefixLen = len(p.Buf) + 1 }), gso.ErrBadPrefix},
		{"MSS 0", with(good4, func(p *gso.Packet) { p.MSS = 0 }), gso.ErrBadMSS},
		{"MSS negative", with(good4, func(p *gso.Packet) { p.MSS = -5 }), gso.ErrBadMSS},
		{"proto zero", with(good4, func(p *gso.Packet) { p.Proto = 0 }), gso.ErrBadProto},
		{"proto 9", with(good4, func(p *gso.Packet) { p.Proto = 9 }), gso.ErrBadProto},
		{"empty buffer", gso.Packet{Proto: gso.ProtoIPv4, MSS: 1}, gso.ErrTruncated},
		{"IPv4 header truncated", with(good4, func(p *gso.Packet) { p.Buf = p.Buf[:ip4+19] }), gso.ErrTruncated},
		{"IPv6 header truncated", with(good6, func(p *gso.Packet) { p.Buf = p.Buf[:ip6+39] }), gso.ErrTruncated},
		{"IPv6 packet as IPv4", with(good6, func(p *gso.Packet) { p.Proto = gso.ProtoIPv4 }), gso.ErrVersionMismatch},
		{"IPv4 packet as IPv6", with(good4, func(p *gso.Packet) { p.Proto = gso.ProtoIPv6 }), gso.ErrVersionMismatch},
		{"IHL 4", with(good4, func(p *gso.Packet) { p.Buf[ip4] = 0x44 }), gso.ErrBadHeaderLength},
		{"IHL 0", with(good4, func(p *gso.Packet) { p.Buf[ip4] = 0x40 }), gso.ErrBadHeaderLength},
		{"IHL beyond buffer", with(good4, func(p *gso.Packet) { p.Buf[ip4] = 0x4f; p.Buf = p.Buf[:ip4+40] }), gso.ErrTruncated},
		{"IHL 6, L4Offset for 5", with(good4, func(p *gso.Packet) { p.Buf[ip4] = 0x46 }), gso.ErrBadL4Offset},
		{"L4Offset off by 4", with(good4, func(p *gso.Packet) { p.L4Offset += 4 }), gso.ErrBadL4Offset},
		{"L4Offset zero", with(good4, func(p *gso.Packet) { p.L4Offset = 0 }), gso.ErrBadL4Offset},
		{"IPv4 UDP", with(good4, func(p *gso.Packet) { p.Buf[ip4+9] = 17 }), gso.ErrNotTCP},
		{"IPv4 MF", with(good4, func(p *gso.Packet) { p.Buf[ip4+6] = 0x20 }), gso.ErrFragment},
		{"IPv4 fragment offset", with(good4, func(p *gso.Packet) { p.Buf[ip4+7] = 1 }), gso.ErrFragment},
		{"IPv6 UDP", with(good6, func(p *gso.Packet) { p.Buf[ip6+6] = 17 }), gso.ErrNotTCP},
		{"IPv6 no next header", with(good6, func(p *gso.Packet) { p.Buf[ip6+6] = 59 }), gso.ErrNotTCP},
		{"IPv6 fragment", with(good6, func(p *gso.Packet) { p.Buf[ip6+6] = 44 }), gso.ErrFragment},
		{"IPv6 ESP", with(good6, func(p *gso.Packet) { p.Buf[ip6+6] = 50 }), gso.ErrUnsupportedHeader},
		{"IPv6 AH", with(good6, func(p *gso.Packet) { p.Buf[ip6+6] = 51 }), gso.ErrUnsupportedHeader},
		{"IPv6 ext header length beyond buffer", with(good6, func(p *gso.Packet) {
			p.Buf[ip6+6] = 60
			p.Buf[ip6+40], p.Buf[ip6+41] = 6, 255 // TCP next, 2048 bytes long
			p.Buf = p.Buf[:ip6+40+2000]
		}), gso.ErrTruncated},
		{"IPv6 ext header truncated", with(good6, func(p *gso.Packet) {
			p.Buf[ip6+6] = 60
			p.Buf = p.Buf[:ip6+44]
		}), gso.ErrTruncated},
		{"IPv6 ext header, L4Offset not moved", with(good6, func(p *gso.Packet) {
			p.Buf[ip6+6] = 60
			p.Buf[ip6+40], p.Buf[ip6+41] = 6, 0 // TCP next, 8 bytes long
		}), gso.ErrBadL4Offset},
		{"TCP header truncated", with(good4, func(p *gso.Packet) { p.Buf = p.Buf[:l4+19] }), gso.ErrTruncated},
		{"TCP data offset 4", with(good4, func(p *gso.Packet) { p.Buf[l4+12] = 0x40 }), gso.ErrBadHeaderLength},
		{"TCP data offset beyond buffer", with(good4, func(p *gso.Packet) { p.Buf = p.Buf[:l4+24] }), gso.ErrTruncated},
		{"SYN needing 3 segments", with(good4, func(p *gso.Packet) { p.Buf[l4+13] |= fSYN }), gso.ErrFlags},
		{"RST needing 3 segments", with(good4, func(p *gso.Packet) { p.Buf[l4+13] |= fRST }), gso.ErrFlags},
		{"URG needing 3 segments", with(good4, func(p *gso.Packet) { p.Buf[l4+13] |= fURG }), gso.ErrFlags},
		{"IPv4 segment over 65535", func() gso.Packet {
			p := build(spec{payload: payloadN(65535 - 39), flags: fACK})
			p.MSS = 1 << 20
			return p
		}(), gso.ErrTooLarge},
		{"IPv6 segment over 65535", func() gso.Packet {
			p := build(spec{v6: true, payload: payloadN(65535 - 19), flags: fACK})
			p.MSS = 1 << 20
			return p
		}(), gso.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := gso.SegmentedLen(tt.p)
			if !errors.Is(err, tt.want) {
				t.Fatalf("SegmentedLen: got (%d, %v), want error %v", n, err, tt.want)
			}
			var ge *gso.Error
			if !errors.As(err, &ge) {
				t.Errorf("got error type %T, want *gso.Error", err)
			}
			in := make([][]byte, 1, 4)
			segs, err := gso.Segment(tt.p, make([]byte, 1<<18), in)
			if !errors.Is(err, tt.want) {
				t.Errorf("Segment: got %v, want %v", err, tt.want)
			}
			if len(segs) != 1 {
				t.Errorf("Segment: got %d segs on error, want the 1 passed in", len(segs))
			}
			if c := gso.Count(tt.p); c != 0 {
				t.Errorf("Count: got %d, want 0", c)
			}
			if err.Error() == "" {
				t.Error("empty error message")
			}
		})
	}
}

func TestSegmentShortDst(t *testing.T) {
	p := build(spec{prefix: prefixN(1), payload: payloadN(3000), flags: fACK})
	n, err := gso.SegmentedLen(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gso.Segment(p, make([]byte, n-1), nil); !errors.Is(err, gso.ErrShortDst) {
		t.Errorf("got %v, want %v", err, gso.ErrShortDst)
	}
	// A larger dst is fine, and segments do not alias past their end.
	segs, err := gso.Segment(p, make([]byte, n+100), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range segs {
		if cap(s) != len(s) {
			t.Errorf("segment %d: got cap %d, want len %d", i, cap(s), len(s))
		}
	}
}

func TestSegmentZeroAllocs(t *testing.T) {
	p := build(spec{v6: true, prefix: prefixN(3), tcpOpts: tsOpt, payload: payloadN(65000), flags: fACK})
	n, err := gso.SegmentedLen(p)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, n)
	segs := make([][]byte, 0, 64)
	allocs := testing.AllocsPerRun(20, func() {
		segs, err = gso.Segment(p, dst, segs[:0])
		if err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocations per Segment, want 0", allocs)
	}
}

// TestSum compares the unrolled checksum with the naive reference on every
// length up to 300 at several alignments, and on large random buffers
// including ones made of 0xff bytes (the carry-heavy case).
func TestSum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 70000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for start := range 9 {
		for n := range 301 {
			b := buf[start : start+n]
			if got, want := gso.Sum(b), refSum(b); got != want {
				t.Fatalf("Sum(len %d at %d) = %#04x, want %#04x", n, start, got, want)
			}
		}
	}
	ones := bytes.Repeat([]byte{0xff}, 70000)
	for _, b := range [][]byte{buf, buf[1:], ones, ones[3:], make([]byte, 1000)} {
		if got, want := gso.Sum(b), refSum(b); got != want {
			t.Errorf("Sum(len %d) = %#04x, want %#04x", len(b), got, want)
		}
	}
	// RFC 1071 section 3 worked example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
	if got, want := gso.Sum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}), uint16(0xddf2); got != want {
		t.Errorf("Sum(RFC 1071 example) = %#04x, want %#04x", got, want)
	}
}

func TestProtoString(t *testing.T) {
	for _, tt := range []struct {
		p    gso.Proto
		want string
	}{{gso.ProtoIPv4, "IPv4"}, {gso.ProtoIPv6, "IPv6"}, {0, "Proto(0)"}} {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// TestErrorOffset checks that an *Error names the field, value and offset.
func TestErrorOffset(t *testing.T) {
	p := build(spec{prefix: prefixN(1), payload: payloadN(10), flags: fACK})
	p.Buf[p.PrefixLen] = 0x43 // IHL 3
	_, err := gso.SegmentedLen(p)
	var ge *gso.Error
	if !errors.As(err, &ge) {
		t.Fatalf("got %v, want *gso.Error", err)
	}
	if ge.Offset != p.PrefixLen || ge.Value != 3 || ge.Field != "IPv4 IHL" {
		t.Errorf("got %+v, want Field IPv4 IHL, Value 3, Offset %d", *ge, p.PrefixLen)
	}
}
