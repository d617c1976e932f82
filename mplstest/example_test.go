package mplstest_test

import (
	"fmt"
	"net/netip"

	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// A TCP SYN under labels 100/200 (TTL 64), as an LSR would receive it.
func ExampleFrame() {
	syn := mplstest.IPv4TCP(mplstest.TCP{
		Src:   netip.MustParseAddrPort("10.0.0.1:40000"),
		Dst:   netip.MustParseAddrPort("10.10.10.10:80"),
		Seq:   1000,
		Flags: header.TCPFlagSyn,
	})
	f := mplstest.Frame{
		Dst:     tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0b"),
		Src:     tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a"),
		Labels:  mplstest.Stack(64, 100, 200),
		Payload: syn,
	}
	b := f.Bytes()
	fmt.Printf("%d bytes, ethertype %x, first label entry %x\n", len(b), b[12:14], b[14:18])
	// Output: 62 bytes, ethertype 8847, first label entry 00064040
}
