package mpls

import (
	"errors"
	"fmt"
)

// Sentinel errors, for errors.Is. Every error this package returns wraps one
// of them; the typed errors below carry the details (what and where).
var (
	// ErrTruncated: the input ended in the middle of a label stack entry or
	// of an IP header.
	ErrTruncated = errors.New("mpls: truncated")
	// ErrNoBottomOfStack: no entry with the bottom-of-stack bit before the
	// end of the frame.
	ErrNoBottomOfStack = errors.New("mpls: no bottom-of-stack entry")
	// ErrTooDeep: more label stack entries than the configured maximum.
	ErrTooDeep = errors.New("mpls: label stack too deep")
	// ErrLabelRange: a label value does not fit in 20 bits.
	ErrLabelRange = errors.New("mpls: label out of range")
	// ErrUnknownPayload: the payload under the bottom label is neither bound
	// by the table nor recognisable as IPv4 or IPv6.
	ErrUnknownPayload = errors.New("mpls: unknown payload")
	// ErrTTLExpired: the packet's TTL does not allow another hop.
	ErrTTLExpired = errors.New("mpls: TTL expired")
	// ErrReservedLabel: a reserved label (0-15) used where it is not allowed.
	ErrReservedLabel = errors.New("mpls: reserved label")
)

// TruncatedError reports input that ends inside a label stack entry or an IP
// header. It matches ErrTruncated.
type TruncatedError struct {
	// What was being read: "label stack entry", "IPv4 header", "IPv6 header".
	What string
	// Offset is the byte offset (from the start of the input) at which the
	// truncated item starts.
	Offset int
	// Have is the number of bytes available from Offset.
	Have int
	// Need is the number of bytes the item needs.
	Need int
}

// Error implements error.
func (e *TruncatedError) Error() string {
	return fmt.Sprintf("mpls: truncated %s at offset %d: have %d bytes, need %d", e.What, e.Offset, e.Have, e.Need)
}

// Unwrap returns ErrTruncated.
func (e *TruncatedError) Unwrap() error { return ErrTruncated }

// NoBottomOfStackError reports a label stack whose entries all have S=0 up to
// the end of the input. It matches ErrNoBottomOfStack.
type NoBottomOfStackError struct {
	// Offset is where the input ended (where another entry was expected).
	Offset int
	// Entries is the number of entries read, none with the S bit.
	Entries int
}

// Error implements error.
func (e *NoBottomOfStackError) Error() string {
	return fmt.Sprintf("mpls: no bottom-of-stack bit: %d entries with S=0, input ends at offset %d", e.Entries, e.Offset)
}

// Unwrap returns ErrNoBottomOfStack.
func (e *NoBottomOfStackError) Unwrap() error { return ErrNoBottomOfStack }

// TooDeepError reports a label stack with more entries than allowed. It
// matches ErrTooDeep.
type TooDeepError struct {
	// Offset is the byte offset of the first entry beyond the limit (or, for
	// a table entry, of the first label beyond it).
	Offset int
	// Max is the limit in entries.
	Max int
}

// Error implements error.
func (e *TooDeepError) Error() string {
	return fmt.Sprintf("mpls: label stack deeper than %d entries: entry %d at offset %d", e.Max, e.Max+1, e.Offset)
}

// Unwrap returns ErrTooDeep.
func (e *TooDeepError) Unwrap() error { return ErrTooDeep }

// LabelRangeError reports a label value over 20 bits. It matches
// ErrLabelRange.
type LabelRangeError struct {
	// Label is the offending value.
	Label Label
	// Offset is the byte offset of its entry in the label stack it belongs
	// to (EntryLen * its position, outermost first).
	Offset int
}

// Error implements error.
func (e *LabelRangeError) Error() string {
	return fmt.Sprintf("mpls: label %d at stack offset %d does not fit in 20 bits (max %d)", uint32(e.Label), e.Offset, uint32(MaxLabel))
}

// Unwrap returns ErrLabelRange.
func (e *LabelRangeError) Unwrap() error { return ErrLabelRange }

// ReservedLabelError reports a reserved label (0-15) used where it is not
// allowed: pushing implicit null, or an ILM entry for a reserved label other
// than the explicit nulls. It matches ErrReservedLabel.
type ReservedLabelError struct {
	// Label is the offending label.
	Label Label
	// Offset is the byte offset of its entry in the label stack it belongs
	// to (0 for an ILM entry's incoming label).
	Offset int
	// Reason says why the label is not allowed there and what to do.
	Reason string
}

// Error implements error.
func (e *ReservedLabelError) Error() string {
	return fmt.Sprintf("mpls: reserved label %s at stack offset %d: %s", e.Label, e.Offset, e.Reason)
}

// Unwrap returns ErrReservedLabel.
func (e *ReservedLabelError) Unwrap() error { return ErrReservedLabel }

// UnknownPayloadError reports a payload under the bottom label whose type
// cannot be determined without guessing. It matches ErrUnknownPayload.
type UnknownPayloadError struct {
	// Label is the bottom label that was popped.
	Label Label
	// Offset is the byte offset in the payload of the problem: 0 for the
	// version nibble, the payload length for a too-short header.
	Offset int
	// Version is the IP version nibble found (0 for an empty payload).
	Version uint8
	// Len is the payload length in bytes.
	Len int
	// Reason describes what was found.
	Reason string
}

// Error implements error.
func (e *UnknownPayloadError) Error() string {
	return fmt.Sprintf("mpls: unknown payload under bottom label %s: %s (version nibble %d, %d bytes, offset %d)", e.Label, e.Reason, e.Version, e.Len, e.Offset)
}

// Unwrap returns ErrUnknownPayload.
func (e *UnknownPayloadError) Unwrap() error { return ErrUnknownPayload }

// TTLExpiredError reports a TTL that does not allow forwarding. It matches
// ErrTTLExpired.
type TTLExpiredError struct {
	// TTL is the incoming TTL (0 or 1).
	TTL uint8
}

// Error implements error.
func (e *TTLExpiredError) Error() string {
	return fmt.Sprintf("mpls: TTL expired: incoming TTL %d, forwarding needs at least 2", e.TTL)
}

// Unwrap returns ErrTTLExpired.
func (e *TTLExpiredError) Unwrap() error { return ErrTTLExpired }

// TableError reports an invalid entry given to NewFIB or NewILM. Its Err is
// one of the typed errors above or a plain description; errors.Is and
// errors.As see through it.
type TableError struct {
	// Table is "FIB" or "ILM".
	Table string
	// Index is the position of the entry in the slice given to the
	// constructor.
	Index int
	// Key is the entry's key as text: the prefix or the incoming label.
	Key string
	// Err is what is wrong.
	Err error
}

// Error implements error.
func (e *TableError) Error() string {
	return fmt.Sprintf("mpls: %s entry %d (%s): %v", e.Table, e.Index, e.Key, e.Err)
}

// Unwrap returns Err.
func (e *TableError) Unwrap() error { return e.Err }
