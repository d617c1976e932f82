// Package verdict is the reference forwarding decision: one pure function
// per kind of received frame (labelled, or plain IP for another host) that
// takes the frame's bytes and the node's tables and says what becomes of
// it: dropped, and why; an ICMP error to send back; handed to the node's
// own stack; or the exact frame to send, and to which next hop.
//
// Every transit rule lives here once: RFC 3032 (the S bit, the stack depth,
// reserved labels, implicit null never on the wire, the per-hop TTL rule,
// the link MTU), RFC 3443 (the uniform and pipe TTL models on swap and
// pop), RFC 4182 (explicit nulls anywhere in the stack), RFC 6790 (an
// entropy label indicator popped with its label), RFC 1812 (the IPv4
// header checksum and length fields, TTL, which sources may get an ICMP
// error and which may be forwarded at all, the route MTU). The userspace
// plane (package forward) decides through it; the XDP program
// (forward/xdp) is a second implementation held to it by a differential
// fuzz target: for every frame the program does what Decide says or passes
// the frame up.
//
// The package does no I/O, holds no state and imports no gVisor: the
// neighbour's MAC, the ICMP rate limit and the writing of frames are the
// planes' own.
package verdict

import (
	"encoding/binary"
	"net/netip"

	"github.com/mplsnode/mplsnode/internal/enum"
	"github.com/mplsnode/mplsnode/internal/icmp"
	"github.com/mplsnode/mplsnode/mpls"
)

// Action is what becomes of a frame.
type Action uint8

const (
	// Drop: the frame is discarded, counted as Verdict.Reason; an ICMP
	// error may go back (Verdict.ICMP).
	Drop Action = iota
	// Forward: the frame leaves on Verdict.Device towards Verdict.Via, as
	// Verdict.Frame describes it (or as fragments: Verdict.FragmentMTU).
	Forward
	// Local: the frame is the node's own (an address of the node, a local
	// label, multicast or broadcast): the node's stack takes it.
	Local
)

// String returns "drop", "forward" or "local".
func (a Action) String() string {
	switch a {
	case Drop:
		return "drop"
	case Forward:
		return "forward"
	case Local:
		return "local"
	}
	return "action?"
}

// Reason names why a frame was dropped; String is the counter name both
// planes use.
type Reason uint8

// Drop reasons.
const (
	// NoReason: the frame was not dropped.
	NoReason Reason = iota
	// TruncatedLabelStack: the frame ends inside the label stack.
	TruncatedLabelStack
	// NoBottomOfStack: the frame ends on an entry boundary with no S bit.
	NoBottomOfStack
	// LabelStackTooDeep: no S bit within the maximum depth.
	LabelStackTooDeep
	// ImplicitNull: label 3 is on the wire (RFC 3032 §2.1: signalled,
	// never sent).
	ImplicitNull
	// ReservedLabel: a reserved label the node does not process is on top,
	// or a pop would expose one.
	ReservedLabel
	// NoILMEntry: a label the node has no entry for.
	NoILMEntry
	// TTLExpired: the label TTL, or the IP TTL of a packet the node
	// forwards as IP, would reach 0.
	TTLExpired
	// NoEgressLink: the route names a link the node does not have.
	NoEgressLink
	// MTUExceeded: the packet does not fit the egress path and may not be
	// fragmented.
	MTUExceeded
	// UnknownPayload: a popped payload is neither bound nor IP, or its IP
	// header is cut short.
	UnknownPayload
	// BadChecksum: an IPv4 header whose checksum does not verify (RFC 1812
	// §5.2.2: a router discards it).
	BadChecksum
	// MalformedIP: an IP length field that contradicts the packet: an
	// IPv4 total length below its header or beyond the bytes received, an
	// IPv6 payload length beyond them (RFC 1812 §5.2.2).
	MalformedIP
	// NoRoute: no route covers the destination.
	NoRoute
	// MartianSource: a source no packet may be forwarded from (RFC 1812
	// §5.3.7, RFC 4291 §2.5.6).
	MartianSource

	numReasons
)

var reasonNames = [numReasons]string{
	NoReason:            "none",
	TruncatedLabelStack: "truncated_label_stack",
	NoBottomOfStack:     "no_bottom_of_stack",
	LabelStackTooDeep:   "label_stack_too_deep",
	ImplicitNull:        "implicit_null_label",
	ReservedLabel:       "reserved_label",
	NoILMEntry:          "no_ilm_entry",
	TTLExpired:          "ttl_expired",
	NoEgressLink:        "no_egress_link",
	MTUExceeded:         "mtu_exceeded",
	UnknownPayload:      "unknown_payload",
	BadChecksum:         "bad_checksum",
	MalformedIP:         "malformed_ip",
	NoRoute:             "no_route",
	MartianSource:       "martian_source",
}

// String returns the counter name, e.g. "implicit_null_label".
func (r Reason) String() string { return enum.Name(reasonNames[:], r) }

// Reasons returns every reason but NoReason, in order.
func Reasons() []Reason { return enum.Range(NoReason+1, numReasons) }

// ICMPKind is the ICMP error a verdict sends back.
type ICMPKind uint8

const (
	// NoICMP: none.
	NoICMP ICMPKind = iota
	// TimeExceeded: ICMP time exceeded (RFC 792) or ICMPv6 time exceeded
	// (RFC 4443 §3.3), with the received label stack (RFC 4950).
	TimeExceeded
	// TooBig: ICMP fragmentation needed (RFC 1191) or ICMPv6 Packet Too
	// Big (RFC 4443 §3.2) naming Verdict.ICMPMTU.
	TooBig
	// Unreachable: ICMP network unreachable or ICMPv6 no route (RFC 1812
	// §5.2.7.1, RFC 4443 §3.1).
	Unreachable
)

// String returns the kind's name.
func (k ICMPKind) String() string {
	switch k {
	case NoICMP:
		return "none"
	case TimeExceeded:
		return "time_exceeded"
	case TooBig:
		return "too_big"
	case Unreachable:
		return "unreachable"
	}
	return "icmp?"
}

// Did names what a forwarded frame had done to it, for the counters.
type Did uint8

const (
	// Swapped: the top label was swapped (and more pushed, maybe).
	Swapped Did = iota + 1
	// PoppedLabelled: the top label was popped, the frame left labelled.
	PoppedLabelled
	// PoppedIP: the last label was popped, the frame left as IP.
	PoppedIP
	// IPForwarded: an IP packet was routed, without labels.
	IPForwarded
	// Pushed: an IP packet was routed with a label stack pushed (LER).
	Pushed
)

// MaxOut bounds the label stack of a frame the verdict sends: the labels
// a swap pushes plus those kept below.
const MaxOut = 2 * mpls.DefaultMaxDepth

// Verdict is what becomes of one frame. Offsets count from the start of
// the bytes given to Decide (after the Ethernet header).
type Verdict struct {
	// Action is the outcome.
	Action Action
	// Reason is why a dropped frame was dropped.
	Reason Reason
	// Label names the frame in drop warnings: the label that decided it
	// (the top one looked up, or the bottom one popped); 0 for IP.
	Label mpls.Label

	// ICMP is the error to send back to the source of the IP packet at
	// QuoteOff, unless ICMPRefused: TimeExceeded, TooBig (reporting
	// ICMPMTU) or Unreachable. The label stack received, bytes [0,
	// StackEnd), is quoted as the RFC 4950 extension.
	ICMP ICMPKind
	// ICMPMTU is the path MTU a TooBig error reports.
	ICMPMTU uint32
	// ICMPRefused: an ICMP error is due but this source gets none (RFC
	// 1812 §4.3.2.7, RFC 4443 §2.4: it names no single host, is
	// link-local, is a subnet's network or broadcast address, or is the
	// node's own); the planes count it as icmp_bad_source. ICMP stays set.
	ICMPRefused bool
	// ICMPSilent: the packet is an ICMP error or a non-first fragment,
	// which never gets an ICMP error; ICMP is NoICMP.
	ICMPSilent bool
	// QuoteOff is where the IP packet starts (the ICMP error quotes it).
	QuoteOff int
	// StackEnd is the end of the received label stack (0 for IP).
	StackEnd int
	// Payload is the IP type at QuoteOff (for the ICMP error), or
	// PayloadNone when there is no whole IP header there (an ICMP error
	// is then due to no one: the planes count it as icmp_failed).
	Payload mpls.Payload

	// Device and Via are the egress link and the next hop (the
	// destination itself for an on-link route). Via may be of another
	// family than the packet when labels are pushed.
	Device string
	Via    netip.Addr
	// Type is the ethertype of the frame sent: 0x8847, 0x0800 or 0x86dd.
	Type uint16
	// Out is the label stack the frame leaves with, outermost first, as
	// encoded on the wire (S on the last one only); NOut entries.
	Out  [MaxOut]mpls.Entry
	NOut int
	// PayloadOff and PayloadEnd are the bytes of the frame received that
	// follow Out on the wire; PayloadEnd may be beyond the bytes given to
	// Decide (the rest of the frame), and before the frame's end (an IP
	// packet's padding is cut).
	PayloadOff, PayloadEnd int
	// TTLOff, when not negative, is the offset of the IP header whose TTL
	// (hop limit) becomes IPTTL, the IPv4 header checksum updated
	// incrementally (RFC 1624, so a wrong one stays wrong).
	TTLOff int
	IPTTL  uint8
	// IPv6 says the IP header at TTLOff is IPv6.
	IPv6 bool
	// FragmentMTU, when not 0, says the IPv4 packet (without DF, its
	// header checksum verified) does not fit and leaves as fragments of at
	// most FragmentMTU bytes each (RFC 791), each labelled alike.
	FragmentMTU int
	// Did says what was done, for the counters.
	Did Did
}

// drop marks v dropped for r.
func (v *Verdict) drop(r Reason, label mpls.Label) {
	v.Action = Drop
	v.Reason = r
	v.Label = label
}

// icmp sets the ICMP error of kind for the IP packet at v.QuoteOff, or
// says why there is none: the packet is an ICMP error or a non-first
// fragment (silently), or its source may get none (ICMPRefused).
func (v *Verdict) icmp(kind ICMPKind, mtu uint32, t *Tables, pkt []byte) {
	ip := pkt[min(v.QuoteOff, len(pkt)):]
	v.ICMP, v.ICMPMTU = kind, mtu
	v.inferPayload(pkt)
	if v.Payload == mpls.PayloadNone {
		// Not IP (or cut short): there is no one to tell, which the
		// planes count as icmp_failed.
		return
	}
	v6 := v.Payload == mpls.PayloadIPv6
	if icmp.IsError(v6, ip) {
		v.ICMP, v.ICMPMTU, v.ICMPSilent = NoICMP, 0, true
		return
	}
	var src netip.Addr
	if v6 {
		src = netip.AddrFrom16([16]byte(ip[8:24]))
	} else {
		src = netip.AddrFrom4([4]byte(ip[12:16]))
	}
	if !icmp.SourceNamesOneHost(src) || src.IsLinkLocalUnicast() || t.Node.IsLocal(src) {
		v.ICMPRefused = true
	}
}

// Apply writes the frame v sends for the contiguous frame received, frame
// (its Ethernet header and all), with the next hop's MAC dst and the
// egress link's src, to out (grown as needed) and returns it. It is the
// reference for the bytes on the wire; the planes build the same frame
// without copying the payload. v must be a Forward verdict without
// FragmentMTU, from the bytes frame[14:].
func (v *Verdict) Apply(frame []byte, dst, src [6]byte, out []byte) []byte {
	const eth = 14
	out = append(out[:0], dst[:]...)
	out = append(out, src[:]...)
	out = binary.BigEndian.AppendUint16(out, v.Type)
	for i := 0; i < v.NOut; i++ {
		var b [4]byte
		v.Out[i].Encode(b[:])
		out = append(out, b[:]...)
	}
	ipAt := len(out)
	out = append(out, frame[eth+v.PayloadOff:eth+v.PayloadEnd]...)
	if v.TTLOff >= 0 {
		v.RewriteTTL(out[ipAt+v.TTLOff-v.PayloadOff:])
	}
	return out
}

// RewriteTTL sets the TTL (hop limit) of the IP header ip to v.IPTTL,
// updating an IPv4 header checksum incrementally (RFC 1624: a wrong one
// stays wrong).
func (v *Verdict) RewriteTTL(ip []byte) {
	p := mpls.PayloadIPv4
	if v.IPv6 {
		p = mpls.PayloadIPv6
	}
	_ = mpls.PopTTL(mpls.TTLUniform, v.IPTTL, p, ip)
}
