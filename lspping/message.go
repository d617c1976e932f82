package lspping

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/mplsnode/mplsnode/internal/enum"
	"github.com/mplsnode/mplsnode/mpls"
)

// Port is the UDP port of MPLS echo requests (RFC 8029 §4.3).
const Port = 3503

// Version is the only version of the message format (RFC 8029 §3).
const Version = 1

// HeaderLen is the fixed header's length: version to the received
// timestamp.
const HeaderLen = 32

// Global flags (RFC 8029 §3, RFC 6426 §7.4).
const (
	// FlagValidateFEC (V): the sender asks the responder to validate the
	// Target FEC Stack.
	FlagValidateFEC uint16 = 1 << 0
	// FlagTTLExpiredOnly (T): answer only where the TTL ran out.
	FlagTTLExpiredOnly uint16 = 1 << 1
	// FlagReversePath (R): validate the reverse path (RFC 6426).
	FlagReversePath uint16 = 1 << 2
)

// MessageType says request or reply.
type MessageType uint8

// Message types.
const (
	// Request is an MPLS echo request.
	Request MessageType = 1
	// Reply is an MPLS echo reply.
	Reply MessageType = 2
)

// messageTypeNames names the message types.
var messageTypeNames = []string{Request: "request", Reply: "reply"}

// String returns "request", "reply" or the number.
func (t MessageType) String() string { return nameOf(messageTypeNames, t, "type %d") }

// ReplyMode says how the sender wants the reply (RFC 8029 §3).
type ReplyMode uint8

// Reply modes.
const (
	// NoReply (1): do not reply (one-way checks).
	NoReply ReplyMode = 1
	// ReplyUDP (2): reply in an IPv4/IPv6 UDP packet.
	ReplyUDP ReplyMode = 2
	// ReplyUDPRouterAlert (3): reply in a UDP packet with the IP router
	// alert option.
	ReplyUDPRouterAlert ReplyMode = 3
	// ReplyControlChannel (4): reply through an application-level control
	// channel.
	ReplyControlChannel ReplyMode = 4
)

// replyModeNames names the reply modes in the RFC's words.
var replyModeNames = []string{
	NoReply:             "do not reply",
	ReplyUDP:            "reply via an IPv4/IPv6 UDP packet",
	ReplyUDPRouterAlert: "reply via an IPv4/IPv6 UDP packet with router alert",
	ReplyControlChannel: "reply via application level control channel",
}

// String returns the mode in the RFC's words.
func (m ReplyMode) String() string { return nameOf(replyModeNames, m, "reply mode %d") }

// nameOf returns v's name in names (indexed by value), or unknown
// formatted with v's number for a value without one.
func nameOf[T enum.Integer](names []string, v T, unknown string) string {
	if s := enum.At(names, v); s != "" {
		return s
	}
	return fmt.Sprintf(unknown, uint64(v))
}

// TLV types (RFC 8029 §3, IANA "TLVs").
const (
	TLVTargetFECStack      uint16 = 1
	TLVDownstreamMapping   uint16 = 2 // deprecated by DDMAP; not understood
	TLVPad                 uint16 = 3
	TLVVendorEnterprise    uint16 = 5
	TLVInterfaceLabelStack uint16 = 7
	TLVErrored             uint16 = 9
	TLVReplyTOS            uint16 = 10
	TLVDDMAP               uint16 = 20
)

// Mandatory reports whether a TLV or sub-TLV of type t must be understood:
// types below 32768 (RFC 8029 §3).
func Mandatory(t uint16) bool { return t < 0x8000 }

// TLV is a TLV (or sub-TLV) kept as bytes: its type and value, the value
// without padding.
type TLV struct {
	Type  uint16
	Value []byte
}

// Timestamp is an NTP timestamp: seconds since 1900 in the high 32 bits,
// the fraction in the low 32 (RFC 5905).
type Timestamp uint64

// NTPTime returns t as an NTP timestamp.
func NTPTime(t time.Time) Timestamp {
	const unixToNTP = 2208988800 // seconds from 1900 to 1970
	sec := uint64(t.Unix()) + unixToNTP
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	return Timestamp(sec<<32 | frac)
}

// Pad actions: the first byte of a Pad TLV (RFC 8029 §3.3).
const (
	// PadDrop: the responder drops the Pad TLV from its reply.
	PadDrop uint8 = 1
	// PadCopy: the responder copies the Pad TLV into its reply.
	PadCopy uint8 = 2
)

// Pad is the Pad TLV: an action and its length (the padding is zeros).
type Pad struct {
	// Action is PadDrop or PadCopy (others are kept as they are).
	Action uint8
	// Len is the value's length, the action byte included (at least 1).
	Len int
}

// Message is an MPLS echo request or reply.
type Message struct {
	// Version is 1.
	Version uint16
	// Flags are the global flags (FlagValidateFEC, ...).
	Flags uint16
	// Type is Request or Reply.
	Type MessageType
	// ReplyMode is how the reply is asked for.
	ReplyMode ReplyMode
	// Code and Subcode are the return code and subcode (0 in a request).
	Code    ReturnCode
	Subcode uint8
	// Handle and Seq identify the request; a reply carries them back.
	Handle, Seq uint32
	// Sent is the sender's timestamp; Received the responder's.
	Sent, Received Timestamp

	// HasFECStack says a Target FEC Stack TLV is present; FECs are its
	// sub-TLVs, top of the stack first.
	HasFECStack bool
	FECs        []FEC
	// DDMaps are the Downstream Detailed Mapping TLVs, in order.
	DDMaps []DDMap
	// Interface is the Interface and Label Stack TLV, nil if absent.
	Interface *InterfaceLabelStack
	// Errored holds the TLVs of an Errored TLVs TLV (nil if absent).
	Errored []TLV
	// HasErrored says an Errored TLVs TLV is present (it may be empty).
	HasErrored bool
	// Pad is the Pad TLV, nil if absent.
	Pad *Pad
	// ReplyTOS is the Reply TOS Byte TLV's TOS; HasReplyTOS says it is
	// present.
	ReplyTOS    uint8
	HasReplyTOS bool
	// Other holds every other TLV, in order: the optional ones (type
	// 32768 and up) and the mandatory ones this package does not
	// understand (Unknown lists those).
	Other []TLV
}

// Unknown returns the mandatory TLVs of m that are not understood, and a
// Target FEC Stack holding only the sub-TLVs not understood when it has
// any (RFC 8029 §3.8: what a reply's Errored TLVs carries).
func (m *Message) Unknown() []TLV {
	var out []TLV
	var subs []byte
	for _, f := range m.FECs {
		if f.Type.known() || !Mandatory(uint16(f.Type)) {
			continue
		}
		subs = appendTLV(subs, uint16(f.Type), f.Raw)
	}
	if subs != nil {
		out = append(out, TLV{Type: TLVTargetFECStack, Value: subs})
	}
	for _, t := range m.Other {
		if Mandatory(t.Type) {
			out = append(out, t)
		}
	}
	return out
}

// ErrMalformed is matched (errors.Is) by every *DecodeError.
var ErrMalformed = errors.New("lspping: malformed message")

// DecodeError is a malformed message: what was wrong and at which byte
// offset of the message.
type DecodeError struct {
	// Off is the offset of the offending field.
	Off int
	// What says what was wrong.
	What string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("lspping: malformed message at byte %d: %s", e.Off, e.What)
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }

func malformed(off int, format string, args ...any) error {
	return &DecodeError{Off: off, What: fmt.Sprintf(format, args...)}
}

// pad4 is n rounded up to a multiple of 4.
func pad4(n int) int { return (n + 3) &^ 3 }

// appendTLV appends a TLV with value v, zero padded to 4 bytes.
func appendTLV(b []byte, typ uint16, v []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
	b = append(b, v...)
	for i := len(v); i%4 != 0; i++ {
		b = append(b, 0)
	}
	return b
}

// tlvs walks the TLVs in b (off: b's offset in the message, for errors),
// calling f with each one's type, value (without padding) and offset.
// Values are zero padded to 4 bytes; the padding of the last one may be
// missing (senders differ).
func tlvs(b []byte, off int, f func(typ uint16, v []byte, off int) error) error {
	for i := 0; i < len(b); {
		if len(b)-i < 4 {
			return malformed(off+i, "%d bytes left, a TLV header needs 4", len(b)-i)
		}
		typ := binary.BigEndian.Uint16(b[i:])
		n := int(binary.BigEndian.Uint16(b[i+2:]))
		if n > len(b)-i-4 {
			return malformed(off+i+2, "TLV type %d length %d, %d bytes left", typ, n, len(b)-i-4)
		}
		if err := f(typ, b[i+4:i+4+n], off+i+4); err != nil {
			return err
		}
		i += 4 + min(pad4(n), len(b)-i-4)
	}
	return nil
}

// Decode decodes the message in b (the UDP payload). A malformed message
// is a *DecodeError; TLVs it does not understand are kept in Other.
func Decode(b []byte) (*Message, error) {
	if len(b) < HeaderLen {
		return nil, malformed(len(b), "%d bytes, the header needs %d", len(b), HeaderLen)
	}
	m := decodeHeader(b)
	if m.Version != Version {
		return m, malformed(0, "version %d, want %d", m.Version, Version)
	}
	if err := tlvs(b[HeaderLen:], HeaderLen, m.decodeTLV); err != nil {
		return m, err
	}
	return m, nil
}

// decodeHeader reads the fixed header of b, which holds at least
// HeaderLen bytes.
func decodeHeader(b []byte) *Message {
	return &Message{
		Version:   binary.BigEndian.Uint16(b[0:]),
		Flags:     binary.BigEndian.Uint16(b[2:]),
		Type:      MessageType(b[4]),
		ReplyMode: ReplyMode(b[5]),
		Code:      ReturnCode(b[6]),
		Subcode:   b[7],
		Handle:    binary.BigEndian.Uint32(b[8:]),
		Seq:       binary.BigEndian.Uint32(b[12:]),
		Sent:      Timestamp(binary.BigEndian.Uint64(b[16:])),
		Received:  Timestamp(binary.BigEndian.Uint64(b[24:])),
	}
}

// decodeTLV decodes one top-level TLV of type typ and value v (at offset
// off of the message) into m; a TLV that may stand once and stands again
// is malformed.
func (m *Message) decodeTLV(typ uint16, v []byte, off int) error {
	switch typ {
	case TLVTargetFECStack:
		if m.HasFECStack {
			return malformed(off-4, "a second Target FEC Stack TLV")
		}
		m.HasFECStack = true
		return tlvs(v, off, func(st uint16, sv []byte, soff int) error {
			f, err := decodeFEC(st, sv, soff)
			if err != nil {
				return err
			}
			m.FECs = append(m.FECs, f)
			return nil
		})
	case TLVDDMAP:
		d, err := decodeDDMap(v, off)
		if err != nil {
			return err
		}
		m.DDMaps = append(m.DDMaps, d)
	case TLVPad:
		if m.Pad != nil {
			return malformed(off-4, "a second Pad TLV")
		}
		if len(v) < 1 {
			return malformed(off, "Pad TLV without its action byte")
		}
		m.Pad = &Pad{Action: v[0], Len: len(v)}
	case TLVInterfaceLabelStack:
		if m.Interface != nil {
			return malformed(off-4, "a second Interface and Label Stack TLV")
		}
		il, err := decodeInterface(v, off)
		if err != nil {
			return err
		}
		m.Interface = il
	case TLVErrored:
		if m.HasErrored {
			return malformed(off-4, "a second Errored TLVs TLV")
		}
		m.HasErrored = true
		return tlvs(v, off, func(et uint16, ev []byte, _ int) error {
			m.Errored = append(m.Errored, TLV{Type: et, Value: clone(ev)})
			return nil
		})
	case TLVReplyTOS:
		if m.HasReplyTOS {
			return malformed(off-4, "a second Reply TOS Byte TLV")
		}
		if len(v) != 4 {
			return malformed(off-2, "Reply TOS Byte TLV length %d, want 4", len(v))
		}
		m.ReplyTOS, m.HasReplyTOS = v[0], true
	default:
		m.Other = append(m.Other, TLV{Type: typ, Value: clone(v)})
	}
	return nil
}

func clone(b []byte) []byte { return append([]byte{}, b...) }

// Append appends m's encoding to b and returns it. TLVs go in this order:
// Target FEC Stack, Downstream Detailed Mappings, Interface and Label
// Stack, Errored TLVs, Reply TOS, the others, Pad.
func (m *Message) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, m.Version)
	b = binary.BigEndian.AppendUint16(b, m.Flags)
	b = append(b, byte(m.Type), byte(m.ReplyMode), byte(m.Code), m.Subcode)
	b = binary.BigEndian.AppendUint32(b, m.Handle)
	b = binary.BigEndian.AppendUint32(b, m.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(m.Sent))
	b = binary.BigEndian.AppendUint64(b, uint64(m.Received))
	if m.HasFECStack || len(m.FECs) > 0 {
		var v []byte
		for _, f := range m.FECs {
			v = f.append(v)
		}
		b = appendTLV(b, TLVTargetFECStack, v)
	}
	for i := range m.DDMaps {
		b = appendTLV(b, TLVDDMAP, m.DDMaps[i].value(nil))
	}
	if m.Interface != nil {
		b = appendTLV(b, TLVInterfaceLabelStack, m.Interface.value(nil))
	}
	if m.HasErrored || len(m.Errored) > 0 {
		var v []byte
		for _, t := range m.Errored {
			v = appendTLV(v, t.Type, t.Value)
		}
		b = appendTLV(b, TLVErrored, v)
	}
	if m.HasReplyTOS {
		b = appendTLV(b, TLVReplyTOS, []byte{m.ReplyTOS, 0, 0, 0})
	}
	for _, t := range m.Other {
		b = appendTLV(b, t.Type, t.Value)
	}
	if m.Pad != nil {
		v := make([]byte, max(m.Pad.Len, 1))
		v[0] = m.Pad.Action
		b = appendTLV(b, TLVPad, v)
	}
	return b
}

// Marshal returns m's encoding.
func (m *Message) Marshal() []byte { return m.Append(nil) }

// appendAddr appends a's bytes (4 or 16); the invalid Addr as v6 zeros is
// never asked for: callers pick the family first.
func appendAddr(b []byte, a netip.Addr) []byte {
	if a.Is4() {
		v := a.As4()
		return append(b, v[:]...)
	}
	v := a.As16()
	return append(b, v[:]...)
}

// labelEntry is a label stack entry without its TTL byte, as the DDMAP's
// label stack sub-TLV carries it: label, TC, S in 24 bits.
func appendLabel24(b []byte, e mpls.Entry) []byte {
	v := uint32(e.Label&mpls.MaxLabel)<<4 | uint32(e.TC&7)<<1
	if e.S {
		v |= 1
	}
	return append(b, byte(v>>16), byte(v>>8), byte(v))
}

func label24(b []byte) mpls.Entry {
	v := uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
	return mpls.Entry{Label: mpls.Label(v >> 4), TC: uint8(v>>1) & 7, S: v&1 != 0}
}
