package mpls_test

import (
	"fmt"

	"github.com/mplsnode/mplsnode/mpls"
)

// ExampleParseStack parses two labels (100 on top of 200) followed by the
// first bytes of an IPv4 header, and infers the payload type.
func ExampleParseStack() {
	frame := []byte{
		0x00, 0x06, 0x40, 0x40, // label 100, TC 0, S 0, TTL 64
		0x00, 0x0c, 0x81, 0x3f, // label 200, TC 0, S 1, TTL 63
		0x45, 0x00, 0x00, 0x14, // IPv4, IHL 5, total length 20 ...
		0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
	}
	var buf [mpls.DefaultMaxDepth]mpls.Entry
	entries, n, err := mpls.ParseStack(frame, 0, buf[:0])
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range entries {
		fmt.Printf("label %v tc %d s %v ttl %d\n", e.Label, e.TC, e.S, e.TTL)
	}
	bottom := entries[len(entries)-1]
	p, err := mpls.InferPayload(mpls.PayloadNone, bottom.Label, frame[n:])
	fmt.Println(n, p, err)

	// A frame cut inside the second entry.
	_, _, err = mpls.ParseStack(frame[:6], 0, buf[:0])
	fmt.Println(err)
	// Output:
	// label 100 tc 0 s false ttl 64
	// label 200 tc 0 s true ttl 63
	// 8 ipv4 <nil>
	// mpls: truncated label stack entry at offset 4: have 2 bytes, need 4
}
