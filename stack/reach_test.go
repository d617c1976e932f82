package stack

import (
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/link/pipe"
)

// BenchmarkReachable measures the route check every UDP write makes
// (reachable), for a destination behind a FIB route, on a connected
// subnet, and with no route.
func BenchmarkReachable(b *testing.B) {
	la, _ := pipe.New("\x02\x00\x00\x00\x00\x01", "\x02\x00\x00\x00\x00\x02", 1500)
	s, err := New(Config{
		Links:     []Link{{Name: "a0", Kind: LinkEndpoint, Endpoint: la}},
		Addresses: []Address{{Link: "a0", Prefix: netip.MustParsePrefix("172.16.20.20/24")}},
		Routes:    []Route{{Prefix: netip.MustParsePrefix("10.10.10.10/32"), Via: netip.MustParseAddr("172.16.20.21")}},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, bc := range []struct {
		name string
		dst  netip.Addr
		want bool
	}{
		{"fib", netip.MustParseAddr("10.10.10.10"), true},
		{"connected", netip.MustParseAddr("172.16.20.21"), true},
		{"none", netip.MustParseAddr("192.0.2.1"), false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if s.reachable(bc.dst) != bc.want {
					b.Fatalf("reachable(%s) != %v", bc.dst, bc.want)
				}
			}
		})
	}
}
