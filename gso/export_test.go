package gso

// Sum exposes the internal checksum for the external test package: the
// folded, uncomplemented ones' complement sum of b in network byte order.
func Sum(b []byte) uint16 { return fold(sum(b)) }
