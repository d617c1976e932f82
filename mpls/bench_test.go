package mpls_test

import (
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

// benchRoutes returns n/2 IPv4 and n/2 IPv6 routes of mixed, overlapping
// lengths (/8, /16, /24, /32 and /32, /48, /64, /128), plus default routes.
func benchRoutes(n int) []mpls.Route {
	v4Bits := []int{8, 16, 24, 32}
	v6Bits := []int{32, 48, 64, 128}
	seen := map[netip.Prefix]bool{}
	add := func(out []mpls.Route, p netip.Prefix) []mpls.Route {
		p = p.Masked()
		if seen[p] {
			return out
		}
		seen[p] = true
		return append(out, mpls.Route{Prefix: p, NextHops: []mpls.NextHop{{Labels: []mpls.Label{mpls.Label(16 + len(out)), 100}}}})
	}
	out := add(nil, netip.MustParsePrefix("0.0.0.0/0"))
	out = add(out, netip.MustParsePrefix("::/0"))
	for i := 0; len(out) < n; i++ {
		a4 := netip.AddrFrom4([4]byte{10, byte(i % 7), byte(i), byte(i * 13)})
		out = add(out, netip.PrefixFrom(a4, v4Bits[i%4]))
		a6 := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i % 7), byte(i >> 8), byte(i), 0, 0, 0, 0, 0, 0, 0, byte(i * 13)})
		out = add(out, netip.PrefixFrom(a6, v6Bits[i%4]))
	}
	return out[:n]
}

func BenchmarkParseStack(b *testing.B) {
	frame := make([]byte, 3*mpls.EntryLen+20)
	if _, err := mpls.EncodeLabels(frame, []mpls.Label{100, 200, 300}, 0, 64); err != nil {
		b.Fatal(err)
	}
	frame[12] = 0x45
	dst := make([]mpls.Entry, 0, mpls.DefaultMaxDepth)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		entries, n, err := mpls.ParseStack(frame, 0, dst)
		if err != nil || n != 12 || len(entries) != 3 {
			b.Fatalf("ParseStack = %d entries, %d, %v", len(entries), n, err)
		}
	}
}

// BenchmarkFIBLookupMixed looks up in a FIB of overlapping prefixes of
// mixed lengths, labelled, with default routes.
func BenchmarkFIBLookupMixed(b *testing.B) {
	fib, err := mpls.NewFIB(benchRoutes(1000))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		dsts []netip.Addr
	}{
		{"IPv4", []netip.Addr{
			netip.MustParseAddr("10.3.7.9"), netip.MustParseAddr("10.1.200.8"),
			netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("10.6.6.6"),
		}},
		{"IPv6", []netip.Addr{
			netip.MustParseAddr("2001:db8:3:7::9"), netip.MustParseAddr("2001:db8:1:c8::8"),
			netip.MustParseAddr("2001:db9::1"), netip.MustParseAddr("2001:db8:6:6::6"),
		}},
	} {
		b.Run(bc.name+"/1000routes", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok := fib.Lookup(bc.dsts[i&3]); !ok {
					b.Fatalf("Lookup(%v) found nothing (default routes exist)", bc.dsts[i&3])
				}
				i++
			}
		})
	}
}

func BenchmarkILMLookup(b *testing.B) {
	entries := make([]mpls.ILMEntry, 0, 1000)
	for i := range 1000 {
		l := mpls.Label(16 + i*7)
		if i%2 == 1 {
			l = mpls.Label(300000 + i) // Junos-style high labels: the map path
		}
		entries = append(entries, mpls.ILMEntry{Label: l, Action: mpls.ILMPopLocal})
	}
	ilm, err := mpls.NewILM(entries)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		label mpls.Label
	}{
		{"dense", 16 + 100*7},
		{"sparse", 300001},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := ilm.Lookup(bc.label); !ok {
					b.Fatalf("Lookup(%d) missed", bc.label)
				}
			}
		})
	}
}
