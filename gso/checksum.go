package gso

import (
	"encoding/binary"
	"math/bits"
)

// sum returns the ones' complement sum (RFC 1071) of b, with a zero byte
// appended when len(b) is odd, folded to 16 bits and in network byte order
// (the value one would get by adding the big-endian 16-bit words of b with
// end-around carry). It is not complemented: callers add partial sums with
// add and complement the final one.
//
// The loop loads 8 bytes at a time in little-endian order (a plain load on
// the machines we run on, no byte swap) into a 64-bit accumulator with the
// carry chained through bits.Add64 (ADC on amd64 and arm64). The ones'
// complement sum does not depend on byte order except for one swap of the
// folded result (RFC 1071 section 2(B)), and it is invariant under folding
// 64-bit words into 16-bit ones, since 2^16 = 1 mod 2^16-1 divides
// 2^64 = 1 mod 2^64-1.
func sum(b []byte) uint32 {
	var acc, c uint64
	// 64 bytes per iteration: eight loads feeding one carry chain, which
	// keeps the loop overhead under the cost of the additions.
	for len(b) >= 64 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), 0)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:16]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[16:24]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[24:32]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[32:40]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[40:48]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[48:56]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[56:64]), c)
		acc += c // end-around carry; cannot overflow, see below
		b = b[64:]
	}
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b), 0)
		// End-around carry. It cannot overflow: an addition that carries
		// out leaves acc <= 2^64-2, because x + y + carry-in reaches
		// 2^65-1 only when x is 2^64-1 with a carry pending, which the
		// same argument excludes inductively from a zero start.
		acc += c
		b = b[8:]
	}
	// At most 7 bytes left: pad them with zeros to one 8-byte word, exactly
	// as RFC 1071 pads an odd final byte.
	var t [8]byte
	copy(t[:], b)
	tail := binary.LittleEndian.Uint64(t[:])
	acc, c = bits.Add64(acc, tail, 0)
	acc += c
	return uint32(bits.ReverseBytes16(fold64(acc)))
}

// fold64 folds a 64-bit ones' complement accumulator to 16 bits.
func fold64(acc uint64) uint16 {
	s := acc>>32 + acc&0xffffffff // <= 2^33 - 2
	s = s>>32 + s&0xffffffff      // <= 2^32 - 1
	s = s>>16 + s&0xffff          // <= 2^17 - 2
	s = s>>16 + s&0xffff          // <= 2^16 - 1
	return uint16(s)
}

// fold folds a sum of up to 2^16 16-bit partial sums to 16 bits.
func fold(s uint32) uint16 {
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}
