// Package hashedstream writes the pseudorandom byte streams of the
// transfer tests of node and cmd/mplsnode and returns their SHA-256, for
// the receiver's hash to be compared with. It is for tests only.
package hashedstream

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net"
)

// Send writes size pseudorandom bytes (ChaCha8 keyed with key) to c in
// 64 KiB writes, calls at (when not nil) with the bytes sent so far after
// each write, closes c and returns the bytes' SHA-256. A failed write
// closes c too; its error says after how many bytes.
func Send(c net.Conn, size int64, key [32]byte, at func(sent int64)) ([32]byte, error) {
	var sum [32]byte
	r := rand.NewChaCha8(key)
	h := sha256.New()
	buf := make([]byte, 64<<10)
	var sent int64
	for sent < size {
		n := int(min(int64(len(buf)), size-sent))
		r.Read(buf[:n])
		h.Write(buf[:n])
		if _, err := c.Write(buf[:n]); err != nil {
			c.Close()
			return sum, fmt.Errorf("write after %d bytes: %w", sent, err)
		}
		sent += int64(n)
		if at != nil {
			at(sent)
		}
	}
	if err := c.Close(); err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}
