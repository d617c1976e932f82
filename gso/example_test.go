package gso_test

import (
	"encoding/binary"
	"fmt"

	"github.com/mplsnode/mplsnode/gso"
)

// Segment a 3000-byte TCP payload below Ethernet and one MPLS label into
// MSS 1448 segments, reusing dst and segs from packet to packet.
func ExampleSegment() {
	buf := []byte{
		0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x88, 0x47, // Ethernet, MPLS unicast
		0x00, 0x06, 0x41, 0x40, // label 100, TC 0, bottom of stack, TTL 64
		0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 6, 0, 0, // IPv4: ID 1, DF, TTL 64, TCP; length and checksum left for gso
		192, 0, 2, 1, 198, 51, 100, 2, // 192.0.2.1 -> 198.51.100.2
		0x30, 0x39, 0, 80, 0, 0, 0x03, 0xe8, 0, 0, 0, 1, // ports 12345 -> 80, seq 1000, ack 1
		0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0, // data offset 5, ACK|PSH, window, checksum left for gso
	}
	buf = append(buf, make([]byte, 3000)...) // payload
	p := gso.Packet{Buf: buf, PrefixLen: 18, Proto: gso.ProtoIPv4, L4Offset: 18 + 20, MSS: 1448}

	n, err := gso.SegmentedLen(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	dst := make([]byte, n)        // keep and reuse: 0 allocations per packet
	segs := make([][]byte, 0, 64) // likewise
	segs, err = gso.Segment(p, dst, segs[:0])
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range segs {
		ip, tcp := s[p.PrefixLen:], s[p.L4Offset:]
		fmt.Printf("frame %4d bytes: IP length %4d, ID %d, seq %d, PSH %v\n",
			len(s), binary.BigEndian.Uint16(ip[2:]), binary.BigEndian.Uint16(ip[4:]),
			binary.BigEndian.Uint32(tcp[4:]), tcp[13]&0x08 != 0)
	}
	// Output:
	// frame 1506 bytes: IP length 1488, ID 1, seq 1000, PSH false
	// frame 1506 bytes: IP length 1488, ID 2, seq 2448, PSH false
	// frame  162 bytes: IP length  144, ID 3, seq 3896, PSH true
}
