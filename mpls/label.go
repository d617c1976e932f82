package mpls

import (
	"encoding/binary"
	"strconv"
)

// Label is a 20-bit MPLS label value (RFC 3032 §2.1). Values above MaxLabel
// cannot be carried on the wire.
type Label uint32

// Reserved (special-purpose) label values, RFC 3032 §2.1, RFC 5586 (GAL),
// RFC 3429 (OAM alert), RFC 6790 (entropy label indicator). Labels 0-15 are
// never allocated to routes.
const (
	// LabelIPv4ExplicitNull (0) must be popped; the payload is IPv4.
	LabelIPv4ExplicitNull Label = 0
	// LabelRouterAlert (1) delivers the packet to the local control plane.
	LabelRouterAlert Label = 1
	// LabelIPv6ExplicitNull (2) must be popped; the payload is IPv6.
	LabelIPv6ExplicitNull Label = 2
	// LabelImplicitNull (3) is only signalled, never sent: a router asked to
	// "push" it pops instead (penultimate hop popping).
	LabelImplicitNull Label = 3
	// LabelEntropyIndicator (7) says the next label is an entropy label.
	LabelEntropyIndicator Label = 7
	// LabelGAL (13) is the generic associated channel label (MPLS-TP).
	LabelGAL Label = 13
	// LabelOAMAlert (14) marks an OAM packet.
	LabelOAMAlert Label = 14
	// MaxReservedLabel is the highest label of the reserved range 0-15.
	MaxReservedLabel Label = 15
	// MaxLabel is the highest label value that fits the 20-bit field.
	MaxLabel Label = 1<<20 - 1
)

// EntryLen is the size in bytes of one label stack entry on the wire.
const EntryLen = 4

// DefaultMaxDepth is the default limit on the number of label stack entries
// ParseStack accepts (and the most labels a table entry may push). Real
// deployments use a handful; 16 bounds the work per frame.
const DefaultMaxDepth = 16

// IsReserved reports whether l is in the reserved range 0-15, which is never
// allocated to a route.
func (l Label) IsReserved() bool { return l <= MaxReservedLabel }

// Valid reports whether l fits in the 20-bit label field.
func (l Label) Valid() bool { return l <= MaxLabel }

// String returns the decimal label value, with the name of the reserved
// labels that have one, e.g. "3 (implicit-null)".
func (l Label) String() string {
	name := l.name()
	if name == "" {
		return strconv.FormatUint(uint64(l), 10)
	}
	return strconv.FormatUint(uint64(l), 10) + " (" + name + ")"
}

func (l Label) name() string {
	switch l {
	case LabelIPv4ExplicitNull:
		return "ipv4-explicit-null"
	case LabelRouterAlert:
		return "router-alert"
	case LabelIPv6ExplicitNull:
		return "ipv6-explicit-null"
	case LabelImplicitNull:
		return "implicit-null"
	case LabelEntropyIndicator:
		return "entropy-label-indicator"
	case LabelGAL:
		return "gal"
	case LabelOAMAlert:
		return "oam-alert"
	}
	return ""
}

// Entry is one label stack entry (RFC 3032 §2.1, TC renamed by RFC 5462):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Label                  | TC  |S|       TTL     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type Entry struct {
	// Label is the 20-bit label value.
	Label Label
	// TC is the 3-bit traffic class (RFC 5462); only the low 3 bits are sent.
	TC uint8
	// S is the bottom-of-stack bit: set on the last entry of the stack.
	S bool
	// TTL is the time to live of this entry.
	TTL uint8
}

// Field positions inside the 32-bit entry (RFC 3032 §2.1).
const (
	labelShift = 12  // label occupies bits 31..12
	tcShift    = 9   // TC occupies bits 11..9
	tcMask     = 0x7 // TC is 3 bits wide
	sBit       = 1 << 8
	ttlMask    = 0xff
)

// Encode writes e into b[0:4] in network byte order. It panics if len(b) < 4.
// Only the low 20 bits of Label and the low 3 bits of TC are written: callers
// validate labels first (tables are validated when built; Stack.Push and
// EncodeLabels check), so Encode stays a branch-free primitive.
func (e Entry) Encode(b []byte) {
	v := uint32(e.Label&MaxLabel)<<labelShift | uint32(e.TC&tcMask)<<tcShift | uint32(e.TTL)
	if e.S {
		v |= sBit
	}
	binary.BigEndian.PutUint32(b[:EntryLen], v)
}

// DecodeEntry reads one label stack entry from b[0:4]. It panics if
// len(b) < 4; use ParseStack for untrusted input.
func DecodeEntry(b []byte) Entry {
	v := binary.BigEndian.Uint32(b[:EntryLen])
	return Entry{
		Label: Label(v >> labelShift),
		TC:    uint8(v>>tcShift) & tcMask,
		S:     v&sBit != 0,
		TTL:   uint8(v & ttlMask),
	}
}

// EncodeLabels writes labels (outermost first) as a label stack into b, with
// the given TC and TTL on every entry and S set on the last one, and returns
// the number of bytes written (EntryLen*len(labels)). It panics if b is too
// short. It returns *ReservedLabelError for the implicit null label (which is
// never sent) and *LabelRangeError for a label over 20 bits, in which case
// the content of b is unspecified. It allocates nothing on success.
func EncodeLabels(b []byte, labels []Label, tc, ttl uint8) (int, error) {
	_ = b[:EntryLen*len(labels)] // one bounds check, panics early if short
	for i, l := range labels {
		if err := checkPushLabel(l, i*EntryLen); err != nil {
			return 0, err
		}
		Entry{Label: l, TC: tc, S: i == len(labels)-1, TTL: ttl}.Encode(b[i*EntryLen:])
	}
	return EntryLen * len(labels), nil
}

// checkPushLabel reports whether l may be pushed onto a packet; off is the
// byte offset of the entry in the stack being built, for the error.
func checkPushLabel(l Label, off int) error {
	if l > MaxLabel {
		return &LabelRangeError{Label: l, Offset: off}
	}
	if l == LabelImplicitNull {
		return &ReservedLabelError{Label: l, Offset: off, Reason: "implicit null is signalled, never pushed: leave the label out (penultimate hop popping)"}
	}
	return nil
}

// TCFromDSCP returns the MPLS traffic class for an IP packet with the given
// IPv4 TOS / IPv6 traffic class byte: the top 3 bits of the DSCP, i.e. the
// class selector (RFC 5462 §3 and RFC 2474 §4.2.2.1 class selector mapping).
func TCFromDSCP(tos uint8) uint8 { return tos >> 5 }
