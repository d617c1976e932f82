package gso

import (
	"errors"
	"strconv"
)

// Sentinel errors. Every error returned by this package is an [*Error] that
// wraps exactly one of these, so callers can test the reason with
// [errors.Is] and count drops by it.
var (
	// ErrTruncated: a header runs past the end of Packet.Buf.
	ErrTruncated = errors.New("gso: packet truncated")
	// ErrBadPrefix: Packet.PrefixLen is negative or beyond the buffer.
	ErrBadPrefix = errors.New("gso: bad prefix length")
	// ErrBadProto: Packet.Proto is neither ProtoIPv4 nor ProtoIPv6.
	ErrBadProto = errors.New("gso: unknown protocol")
	// ErrVersionMismatch: the IP version nibble disagrees with Packet.Proto.
	ErrVersionMismatch = errors.New("gso: IP version does not match protocol")
	// ErrBadHeaderLength: IPv4 IHL or TCP data offset below 5 words.
	ErrBadHeaderLength = errors.New("gso: header length field too small")
	// ErrBadL4Offset: Packet.L4Offset is not where the IP headers end.
	ErrBadL4Offset = errors.New("gso: L4 offset does not match IP headers")
	// ErrNotTCP: the IP headers do not announce TCP.
	ErrNotTCP = errors.New("gso: not TCP")
	// ErrFragment: the packet is an IPv4 or IPv6 fragment.
	ErrFragment = errors.New("gso: cannot segment an IP fragment")
	// ErrUnsupportedHeader: an IPv6 extension header this package does not
	// carry (AH, ESP, mobility, HIP, shim6, experimental, ...).
	ErrUnsupportedHeader = errors.New("gso: unsupported IPv6 extension header")
	// ErrBadMSS: Packet.MSS is below 1.
	ErrBadMSS = errors.New("gso: MSS must be at least 1")
	// ErrTooLarge: a segment would not fit the 16-bit IP length field.
	ErrTooLarge = errors.New("gso: segment too large for the IP length field")
	// ErrFlags: SYN, RST or URG on a packet that needs several segments.
	ErrFlags = errors.New("gso: TCP flags forbid segmentation")
	// ErrShortDst: the destination buffer is smaller than SegmentedLen.
	ErrShortDst = errors.New("gso: destination buffer too short")
)

// Error describes why a packet cannot be segmented.
type Error struct {
	// Err is the reason: one of the Err* sentinels of this package.
	Err error
	// Field names what was wrong, for example "IPv4 IHL" or "TCP data offset".
	Field string
	// Value is the offending value as found (a length, offset or field value).
	Value int
	// Offset is the byte offset in Packet.Buf of the offending header or
	// field, or -1 when the error concerns a Packet field or dst.
	Offset int
}

// Error implements error. The message is built only when asked for, so
// returning an *Error costs one small allocation and no formatting.
func (e *Error) Error() string {
	s := e.Err.Error() + ": " + e.Field + " = " + strconv.Itoa(e.Value)
	if e.Offset >= 0 {
		s += " at offset " + strconv.Itoa(e.Offset)
	}
	return s
}

// Unwrap returns the sentinel, for errors.Is.
func (e *Error) Unwrap() error { return e.Err }

func newError(err error, field string, value, offset int) *Error {
	return &Error{Err: err, Field: field, Value: value, Offset: offset}
}
