package mpls

import "strconv"

// Payload is the type of the packet under the bottom label. MPLS carries no
// payload type on the wire (RFC 3032 §2.2): it is known from the label
// binding, from the explicit null labels, or from the IP version nibble.
type Payload uint8

const (
	// PayloadNone means unknown, or for a table binding "not bound: infer".
	PayloadNone Payload = iota
	// PayloadIPv4 is an IPv4 packet.
	PayloadIPv4
	// PayloadIPv6 is an IPv6 packet.
	PayloadIPv6
)

// String returns "none", "ipv4" or "ipv6".
func (p Payload) String() string {
	switch p {
	case PayloadNone:
		return "none"
	case PayloadIPv4:
		return "ipv4"
	case PayloadIPv6:
		return "ipv6"
	}
	return "payload(" + strconv.Itoa(int(p)) + ")"
}

// Minimal IP header sizes accepted by InferPayload when it reads the version
// nibble.
const (
	// IPv4MinHeaderLen is the IPv4 header without options (RFC 791, IHL 5).
	IPv4MinHeaderLen = 20
	// IPv6HeaderLen is the fixed IPv6 header (RFC 8200 §3).
	IPv6HeaderLen = 40
	ipv4MinIHL    = 5 // IHL counts 32-bit words; 5 words = 20 bytes
)

// InferPayload returns the type of payload, the bytes under the bottom label
// bottom that was just popped, in this order of authority:
//
//  1. the explicit null labels: 0 is IPv4, 2 is IPv6 (RFC 3032 §2.1);
//  2. binding, the payload type the ILM entry binds to the label, if not
//     PayloadNone (RFC 3032 §2.2: the label determines the payload);
//  3. the IP version nibble.
//
// Whichever rule names the type, payload must then hold a whole header of
// it: the version nibble of that type, and for IPv4 at least 20 bytes, an
// IHL >= 5 and the whole IHL-sized header; for IPv6 at least 40 bytes. So
// a caller may read any fixed header field of the returned type without a
// further bounds check. A binding that contradicts an explicit null label,
// or a payload that fails these checks, is an *UnknownPayloadError: never a
// guess. InferPayload allocates nothing unless it returns an error.
func InferPayload(binding Payload, bottom Label, payload []byte) (Payload, error) {
	var null Payload
	switch bottom {
	case LabelIPv4ExplicitNull:
		null = PayloadIPv4
	case LabelIPv6ExplicitNull:
		null = PayloadIPv6
	}
	switch {
	case binding > PayloadIPv6:
		return PayloadNone, &UnknownPayloadError{Label: bottom, Len: len(payload), Reason: "invalid binding " + binding.String()}
	case null != PayloadNone && binding != PayloadNone && binding != null:
		return PayloadNone, &UnknownPayloadError{Label: bottom, Len: len(payload), Reason: "binding " + binding.String() + " contradicts the explicit null label"}
	case null != PayloadNone:
		return checkHeader(null, bottom, payload)
	case binding != PayloadNone:
		return checkHeader(binding, bottom, payload)
	}
	if len(payload) == 0 {
		return PayloadNone, &UnknownPayloadError{Label: bottom, Reason: "empty payload"}
	}
	switch payload[0] >> 4 {
	case 4:
		return checkHeader(PayloadIPv4, bottom, payload)
	case 6:
		return checkHeader(PayloadIPv6, bottom, payload)
	}
	return PayloadNone, &UnknownPayloadError{Label: bottom, Offset: 0, Version: payload[0] >> 4, Len: len(payload), Reason: "IP version nibble is neither 4 nor 6"}
}

// checkHeader returns p if payload starts with a whole header of type p,
// else an *UnknownPayloadError saying what is missing.
func checkHeader(p Payload, bottom Label, payload []byte) (Payload, error) {
	fail := func(off int, reason string) (Payload, error) {
		var v uint8
		if len(payload) > 0 {
			v = payload[0] >> 4
		}
		return PayloadNone, &UnknownPayloadError{Label: bottom, Offset: off, Version: v, Len: len(payload), Reason: reason}
	}
	if len(payload) == 0 {
		return fail(0, "empty payload, label says "+p.String())
	}
	v := payload[0] >> 4
	switch p {
	case PayloadIPv4:
		if v != 4 {
			return fail(0, "the label says ipv4 but the IP version nibble is "+strconv.Itoa(int(v)))
		}
		if len(payload) < IPv4MinHeaderLen {
			return fail(len(payload), "IPv4 header shorter than 20 bytes")
		}
		ihl := int(payload[0] & 0x0f)
		if ihl < ipv4MinIHL {
			return fail(0, "IPv4 IHL "+strconv.Itoa(ihl)+" below 5")
		}
		if len(payload) < 4*ihl {
			return fail(len(payload), "IPv4 header shorter than its IHL of "+strconv.Itoa(4*ihl)+" bytes")
		}
	case PayloadIPv6:
		if v != 6 {
			return fail(0, "the label says ipv6 but the IP version nibble is "+strconv.Itoa(int(v)))
		}
		if len(payload) < IPv6HeaderLen {
			return fail(len(payload), "IPv6 header shorter than 40 bytes")
		}
	}
	return p, nil
}
