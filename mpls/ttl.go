package mpls

import (
	"encoding/binary"
	"fmt"
)

// TTLModel selects how TTLs pass between the IP header and the label stack
// (RFC 3443).
type TTLModel uint8

const (
	// TTLUniform (the default, zero value) makes the LSP count every LSR as
	// a hop: pushed labels take the IP TTL, and on the last pop the MPLS TTL
	// is written back into the IP header (RFC 3443 §2.1).
	TTLUniform TTLModel = iota
	// TTLPipe hides the LSP: pushed labels get a configured TTL (default
	// DefaultPipeTTL) and the IP header is not touched on pop (RFC 3443
	// §2.2/§2.3; the IP hop count is whatever IP forwarding did around it).
	TTLPipe
)

// String returns "uniform" or "pipe".
func (m TTLModel) String() string {
	switch m {
	case TTLUniform:
		return "uniform"
	case TTLPipe:
		return "pipe"
	}
	return "ttlmodel(invalid)"
}

// DefaultPipeTTL is the TTL of pushed labels in the pipe model when none is
// configured: the maximum, as Linux (sysctl net.mpls.ip_ttl_propagate=0) and
// most routers use.
const DefaultPipeTTL = 255

// PushTTL returns the TTL for labels pushed on an IP packet. ipTTL is the
// TTL the IP packet leaves with (already decremented by IP forwarding if this
// node forwarded it; as originated if this node is the source). Uniform:
// ipTTL. Pipe: pipeTTL, or DefaultPipeTTL if pipeTTL is 0.
func PushTTL(model TTLModel, ipTTL, pipeTTL uint8) uint8 {
	if model == TTLPipe {
		if pipeTTL == 0 {
			return DefaultPipeTTL
		}
		return pipeTTL
	}
	return ipTTL
}

// ForwardTTL is the per-hop TTL rule for a labelled packet this node
// forwards (swap, or pop and forward): the outgoing TTL is the incoming TTL
// minus one (RFC 3032 §2.4.1). An incoming TTL of 0 or 1 cannot be forwarded:
// the error wraps ErrTTLExpired (and is a *TTLExpiredError). ForwardTTL never
// allocates.
func ForwardTTL(ttl uint8) (uint8, error) {
	switch ttl {
	case 0:
		return 0, errTTLExpired0
	case 1:
		return 0, errTTLExpired1
	}
	return ttl - 1, nil
}

// Preallocated so that dropping expired packets allocates nothing.
var (
	errTTLExpired0 error = &TTLExpiredError{TTL: 0}
	errTTLExpired1 error = &TTLExpiredError{TTL: 1}
)

// IP header fields PopTTL touches.
const (
	ipv4TTLOffset      = 8  // RFC 791: TTL byte, followed by protocol
	ipv4ChecksumOffset = 10 // RFC 791: header checksum
	ipv6HopLimitOffset = 7  // RFC 8200: hop limit byte
)

// PopTTL applies the TTL model to the IP packet pkt (of type p) when the
// bottom label is popped. ttl is the MPLS TTL after this node's hop:
//   - for a packet this node forwards as IP (ILMPopForward), the outgoing
//     TTL, ForwardTTL(incoming) — the egress LSR decrements once for its
//     hop and that value goes into the IP header (RFC 3032 §2.4.1, Linux's
//     mpls_egress does the same);
//   - for a packet delivered locally (ILMPopLocal), the incoming TTL
//     unchanged, as a host does not decrement the TTL of packets it
//     receives.
//
// Uniform: the IPv4 TTL is set to ttl and the IPv4 header checksum fixed
// incrementally (RFC 1624 eqn. 3); the IPv6 hop limit is set to ttl. Pipe:
// pkt is not touched. Errors: one wrapping ErrUnknownPayload for PayloadNone
// (or an invalid value), *TruncatedError when pkt is shorter than the fixed IP
// header. PopTTL allocates nothing on success.
func PopTTL(model TTLModel, ttl uint8, p Payload, pkt []byte) error {
	switch p {
	case PayloadIPv4:
		if len(pkt) < IPv4MinHeaderLen {
			return &TruncatedError{What: "IPv4 header", Offset: 0, Have: len(pkt), Need: IPv4MinHeaderLen}
		}
		if model != TTLUniform || pkt[ipv4TTLOffset] == ttl {
			return nil
		}
		old := binary.BigEndian.Uint16(pkt[ipv4TTLOffset:])
		pkt[ipv4TTLOffset] = ttl
		updated := binary.BigEndian.Uint16(pkt[ipv4TTLOffset:])
		hc := binary.BigEndian.Uint16(pkt[ipv4ChecksumOffset:])
		binary.BigEndian.PutUint16(pkt[ipv4ChecksumOffset:], checksumUpdate(hc, old, updated))
		return nil
	case PayloadIPv6:
		if len(pkt) < IPv6HeaderLen {
			return &TruncatedError{What: "IPv6 header", Offset: 0, Have: len(pkt), Need: IPv6HeaderLen}
		}
		if model == TTLUniform {
			pkt[ipv6HopLimitOffset] = ttl
		}
		return nil
	}
	return errPopTTLPayload
}

// errPopTTLPayload is a caller error, not malformed input: it needs no
// details beyond the message.
var errPopTTLPayload = fmt.Errorf("%w: PopTTL needs PayloadIPv4 or PayloadIPv6", ErrUnknownPayload)

// checksumUpdate returns the Internet checksum hc updated for one 16-bit
// word changing from old to updated, by RFC 1624 equation 3:
// HC' = ~(~HC + ~m + m'), which never produces the -0 that eqn. 2 can.
func checksumUpdate(hc, old, updated uint16) uint16 {
	sum := uint32(^hc) + uint32(^old) + uint32(updated)
	sum = sum&0xffff + sum>>16 // fold the carries twice: the first fold
	sum = sum&0xffff + sum>>16 // can itself carry once
	return ^uint16(sum)
}
