package mplstest

import (
	"encoding/binary"
	"net/netip"
)

// ScalePrefix returns the i-th prefix (i >= 0) of the route mix that the
// route-scaling target, its benchmarks and tests use: in turn a /24 from
// 11.0.0.0, a /32 from 100.64.0.0 seven addresses after the last, a /48
// from 2001:db8::, and a /64 from 2001:db9:: three /64s after the last, so
// a million routes are a quarter of each, and no two overlap.
func ScalePrefix(i int) netip.Prefix {
	j := uint32(i / 4)
	switch i % 4 {
	case 0:
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], 0x0b000000+j<<8)
		return netip.PrefixFrom(netip.AddrFrom4(a), 24)
	case 1:
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], 0x64400000+j*7)
		return netip.PrefixFrom(netip.AddrFrom4(a), 32)
	case 2:
		var a [16]byte
		binary.BigEndian.PutUint64(a[:], 0x20010db800000000+uint64(j)<<16)
		return netip.PrefixFrom(netip.AddrFrom16(a), 48)
	default:
		var a [16]byte
		binary.BigEndian.PutUint64(a[:], 0x20010db900000000+uint64(j)*3)
		return netip.PrefixFrom(netip.AddrFrom16(a), 64)
	}
}
