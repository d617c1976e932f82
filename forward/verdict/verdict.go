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
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Reasons returns every reason but NoReason, in order.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := NoReason + 1; r < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

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

// Route is one transit route as the forwarding plane needs it.
type Route struct {
	// Prefix is the destination.
	Prefix netip.Prefix
	// Device is the egress link's name.
	Device string
	// Via is the next hop; the invalid Addr means on-link (the next hop is
	// the destination itself).
	Via netip.Addr
	// Labels are pushed, outermost first (an LER push); empty means plain
	// IP.
	Labels []mpls.Label
	// MTU caps the IP MTU of the route; 0 means the link MTU less the
	// labels.
	MTU uint32
	// TTL, when not zero, is the TTL of pushed labels regardless of the
	// TTL model.
	TTL uint8
}

// Router looks up transit routes by longest prefix match. The lookup is on
// every forwarded packet: it must not allocate and must be safe for
// concurrent use.
type Router interface {
	// Lookup returns the route for dst, or false when none matches. ip is
	// the packet from its IP header on, as much as is contiguous: a route
	// with several next hops picks one by its flow (5-tuple).
	Lookup(dst netip.Addr, ip []byte) (Route, bool)
}

// Node is what a verdict needs to know of the node beyond its label and
// route tables.
type Node interface {
	// LinkMTU returns the MTU of the link named dev (the IP MTU: bytes
	// after the Ethernet header), false if the node has no such link.
	LinkMTU(dev string) (uint32, bool)
	// IsLocal reports whether a is one of the node's addresses or the
	// network or broadcast address of a subnet it is on.
	IsLocal(a netip.Addr) bool
}

// Tables are the node's tables a decision reads. A Tables is read-only
// while decisions use it.
type Tables struct {
	// Model is the TTL model (RFC 3443).
	Model mpls.TTLModel
	// MaxDepth bounds the label stack received; 0 means
	// mpls.DefaultMaxDepth.
	MaxDepth int
	// ILM maps incoming labels; nil has no entries.
	ILM *mpls.ILM
	// Seed varies the flow hash that picks a multipath label route's hop.
	Seed uint32
	// Router holds the transit IP routes; nil routes nothing (IP goes to
	// the stack).
	Router Router
	// Node answers for the links and the node's own addresses; required.
	Node Node
}

// Decide is DecideLabelled or DecideIP by ethertype, for an Ethernet
// frame already addressed to the ingress link; other ethertypes are
// Local (the stack's: ARP, or nothing the planes forward).
func (t *Tables) Decide(etype uint16, pkt []byte, size int, v *Verdict) {
	switch etype {
	case 0x8847:
		t.DecideLabelled(pkt, size, v)
	case 0x0800:
		t.DecideIP(false, pkt, size, v)
	case 0x86dd:
		t.DecideIP(true, pkt, size, v)
	default:
		*v = Verdict{Action: Local, TTLOff: -1}
	}
}

// DecideLabelled decides a labelled frame: pkt is the frame after its
// Ethernet header (the label stack on), at least the label stack and the
// largest IP header under it where the frame has them; size is the
// frame's length after the Ethernet header (pkt may be a prefix of it). v
// is overwritten. DecideLabelled allocates nothing for a stack of up to
// mpls.DefaultMaxDepth entries.
func (t *Tables) DecideLabelled(pkt []byte, size int, v *Verdict) {
	*v = Verdict{TTLOff: -1}
	var scratch [maxScratch]mpls.Entry
	w := Walk(pkt, t.ILM, t.MaxDepth, scratch[:0])
	t.decideWalked(pkt, size, &w, v)
}

// DecideWalked is DecideLabelled for a frame whose stack Walk has walked
// already, w its result (with a forwarding Entry; the link endpoint's
// receive path walks every labelled frame, and the forwarding plane
// decides the rest from there). v is overwritten.
func (t *Tables) DecideWalked(pkt []byte, size int, w *Walked, v *Verdict) {
	*v = Verdict{TTLOff: -1}
	t.decideWalked(pkt, size, w, v)
}

// decideWalked decides from w, Walk's result for pkt, into v (reset).
func (t *Tables) decideWalked(pkt []byte, size int, w *Walked, v *Verdict) {
	v.Label = w.Label
	v.StackEnd = w.StackEnd
	v.QuoteOff = w.StackEnd
	switch {
	case w.Reason != NoReason:
		v.drop(w.Reason, w.Label)
	case w.Entry == nil:
		t.popLocal(pkt, size, w.Labels, w.Label, w.Binding, v)
	default:
		t.transit(pkt, size, w.Labels, w.Top, w.Entry, v)
	}
}

// maxScratch is the label stack DecideLabelled reads without allocating
// (a deeper one, where Tables.MaxDepth allows it, is read on the heap).
const maxScratch = mpls.DefaultMaxDepth

// Walked is where the walk of a received label stack through the ILM ends
// (Walk).
type Walked struct {
	// Reason, when not NoReason, drops the frame: the stack is malformed
	// (truncated_label_stack, no_bottom_of_stack, label_stack_too_deep),
	// holds label 3 (implicit_null_label), a reserved label it does not
	// process (reserved_label), a TTL of 0 (ttl_expired) or a label with no
	// entry (no_ilm_entry).
	Reason Reason
	// Label names the frame: the label that decided it.
	Label mpls.Label
	// Labels is the stack as received, appended to the scratch given;
	// StackEnd its length in bytes.
	Labels   []mpls.Entry
	StackEnd int
	// Top is the index in Labels of the entry that decided: the first
	// label whose entry swaps or pops and forwards (Entry), or the bottom
	// one, popped for the node (Entry nil).
	Top   int
	Entry *mpls.ILMEntry
	// Binding is the payload type the bottom label's entry binds when
	// every label is popped for the node (none for an explicit null, which
	// names its payload itself: mpls.InferPayload).
	Binding mpls.Payload
	// Hits counts the labels found in the ILM.
	Hits int
}

// Walk parses the label stack at the start of pkt (RFC 3032: the S bit
// within maxDepth entries, 0 meaning mpls.DefaultMaxDepth, all of it
// present) and walks it through ilm: explicit nulls (RFC 4182) and labels
// popped for the node are popped, until the first label that swaps or
// pops and forwards, or the bottom of the stack. It is the first step of
// DecideLabelled, and the link endpoint's receive path, which delivers
// the frames popped for the node, takes it as is. Walk allocates nothing
// when scratch has room for the stack.
func Walk(pkt []byte, ilm *mpls.ILM, maxDepth int, scratch []mpls.Entry) Walked {
	if maxDepth <= 0 {
		maxDepth = mpls.DefaultMaxDepth
	}
	w := Walked{Labels: scratch[:0]}
	for off := 0; ; off += mpls.EntryLen {
		switch {
		case len(w.Labels) == maxDepth:
			w.Reason = LabelStackTooDeep
		case off == len(pkt) && off > 0:
			w.Reason = NoBottomOfStack
		case len(pkt)-off < mpls.EntryLen:
			w.Reason = TruncatedLabelStack
		}
		if w.Reason != NoReason {
			w.Label = topOf(w.Labels)
			return w
		}
		w.Labels = append(w.Labels, mpls.DecodeEntry(pkt[off:]))
		if w.Labels[len(w.Labels)-1].S {
			break
		}
	}
	labels := w.Labels
	w.StackEnd = len(labels) * mpls.EntryLen
	for _, e := range labels {
		if e.Label == mpls.LabelImplicitNull {
			w.Reason, w.Label = ImplicitNull, labels[0].Label
			return w
		}
	}
	for i, l := range labels {
		w.Top, w.Label = i, l.Label
		if l.TTL == 0 {
			w.Reason = TTLExpired
			return w
		}
		switch {
		case l.Label == mpls.LabelIPv4ExplicitNull || l.Label == mpls.LabelIPv6ExplicitNull:
			if l.S {
				return w // the null label names the payload (InferPayload)
			}
			continue
		case l.Label.IsReserved():
			w.Reason = ReservedLabel
			return w
		}
		var ent *mpls.ILMEntry
		found := false
		if ilm != nil {
			ent, found = ilm.Lookup(l.Label)
		}
		if !found {
			w.Reason = NoILMEntry
			return w
		}
		w.Hits++
		switch ent.Action {
		case mpls.ILMPopLocal, mpls.ILMPopContinue:
			if l.S {
				w.Binding = ent.Payload
				return w
			}
			continue
		}
		w.Entry = ent
		return w
	}
	return w // unreachable: the last label has S
}

// popLocal decides a frame whose whole stack is popped for the node: it is
// the node's stack's to take (the stack then routes the IP packet, or
// delivers it); the payload's header must be whole.
func (t *Tables) popLocal(pkt []byte, size int, labels []mpls.Entry, bottom mpls.Label, binding mpls.Payload, v *Verdict) {
	ip := pkt[v.StackEnd:]
	p, err := mpls.InferPayload(binding, bottom, ip)
	if err != nil {
		v.drop(UnknownPayload, bottom)
		return
	}
	v.Payload = p
	// A packet the node forwards as IP has made a hop on its labels: a
	// label TTL that runs out here expires it, with the label stack in the
	// time exceeded (RFC 4950), in either TTL model (the outermost label's
	// TTL in the uniform model, the bottom one's in the pipe model).
	ttl := labels[0].TTL
	if t.Model != mpls.TTLUniform {
		ttl = labels[len(labels)-1].TTL
	}
	if ttl <= 1 && t.Router != nil && t.transitDst(dstOf(p, ip)) {
		v.drop(TTLExpired, bottom)
		v.icmp(TimeExceeded, 0, t, pkt)
		return
	}
	v.Action = Local
	v.PayloadOff = v.StackEnd
	v.PayloadEnd = size
}

// dstOf returns the destination of the IP packet ip of type p (a whole
// fixed header).
func dstOf(p mpls.Payload, ip []byte) netip.Addr {
	if p == mpls.PayloadIPv6 {
		return netip.AddrFrom16([16]byte(ip[24:40]))
	}
	return netip.AddrFrom4([4]byte(ip[16:20]))
}

// transit decides a frame whose label labels[top] (entry ent) swaps or
// pops and forwards.
func (t *Tables) transit(pkt []byte, size int, labels []mpls.Entry, top int, ent *mpls.ILMEntry, v *Verdict) {
	l := labels[top]
	// The TTL that arrived: in the uniform model every label above the
	// matched one counted the same hops, so the outermost one is the
	// packet's TTL; in the pipe model the matched label's own.
	inTTL := l.TTL
	if t.Model == mpls.TTLUniform {
		inTTL = labels[0].TTL
	}
	if inTTL <= 1 {
		v.drop(TTLExpired, l.Label)
		v.icmp(TimeExceeded, 0, t, pkt)
		return
	}
	outTTL := inTTL - 1
	swap, out, dev, via := ent.Action == mpls.ILMSwap, ent.OutLabels, ent.Device, ent.NextHop
	if ent.Action == mpls.ILMMultipath {
		h := ent.Group().Select(mpls.LabelStackHash(t.Seed, labels, pkt[v.StackEnd:]))
		swap, out, dev, via = len(h.Labels) > 0, h.Labels, h.Device, h.Via
	}
	rest := labels[top+1:]
	if !swap {
		var ok bool
		if rest, ok = exposedLabels(rest); !ok {
			v.drop(ReservedLabel, l.Label)
			return
		}
	}
	mtu, ok := t.Node.LinkMTU(dev)
	if !ok || !via.IsValid() {
		v.drop(NoEgressLink, l.Label)
		return
	}
	v.Device, v.Via = dev, via
	v.PayloadOff, v.PayloadEnd = v.StackEnd, size
	if len(out)+len(rest) > MaxOut {
		v.drop(LabelStackTooDeep, l.Label)
		return
	}
	switch {
	case swap:
		v.Did = Swapped
		for i, o := range out {
			v.Out[i] = mpls.Entry{Label: o, TC: l.TC, TTL: outTTL}
		}
		v.NOut = len(out)
		for _, e := range rest {
			v.Out[v.NOut] = e
			v.NOut++
		}
	case len(rest) > 0:
		// Pop to a label: uniform copies the TTL down; in the pipe model
		// the exposed label counts this hop itself.
		v.Did = PoppedLabelled
		e := rest[0]
		if t.Model == mpls.TTLUniform {
			e.TTL = outTTL
		} else {
			if e.TTL <= 1 {
				v.drop(TTLExpired, l.Label)
				v.icmp(TimeExceeded, 0, t, pkt)
				return
			}
			e.TTL--
		}
		v.Out[0] = e
		v.NOut = 1
		for _, e := range rest[1:] {
			v.Out[v.NOut] = e
			v.NOut++
		}
	default:
		v.Did = PoppedIP
		if !t.poppedIP(pkt, size, l, ent, outTTL, v) {
			return
		}
	}
	if v.NOut > 0 {
		v.Type = 0x8847
		for i := 0; i < v.NOut; i++ {
			v.Out[i].S = i == v.NOut-1
		}
	}
	// RFC 3032 §3: the frame must fit the egress link.
	if v.NOut*mpls.EntryLen+v.PayloadEnd-v.PayloadOff > int(mtu) {
		ipMTU := int(mtu) - v.NOut*mpls.EntryLen
		t.tooBig(pkt, size, ipMTU, v)
	}
	v.Action = Forward
	if v.Reason != NoReason {
		v.Action = Drop
	}
}

// inferPayload sets v.Payload, when no binding set it, to the IP type of
// the payload under the received stack of pkt, by its bottom label
// (explicit null) or the version nibble: what an ICMP error quotes and
// fragmentation splits. Only those need it, so it is not done per frame.
func (v *Verdict) inferPayload(pkt []byte) {
	if v.Payload != mpls.PayloadNone || v.StackEnd < mpls.EntryLen || v.StackEnd > len(pkt) {
		return
	}
	bottom := mpls.DecodeEntry(pkt[v.StackEnd-mpls.EntryLen:]).Label
	if p, err := mpls.InferPayload(mpls.PayloadNone, bottom, pkt[v.StackEnd:]); err == nil {
		v.Payload = p
	}
}

// poppedIP checks the IP packet under the last label popped and sets the
// TTL it leaves with: the RFC 1812 header checks (a router forwards it as
// IP), the uniform model's TTL copied from the label, or in the pipe model
// its own TTL decremented (RFC 3443 §3.3: the egress LSR is an IP hop).
// It reports false when it dropped the frame.
func (t *Tables) poppedIP(pkt []byte, size int, l mpls.Entry, ent *mpls.ILMEntry, outTTL uint8, v *Verdict) bool {
	ip := pkt[v.StackEnd:]
	p, err := mpls.InferPayload(ent.Payload, l.Label, ip)
	if err != nil {
		v.drop(UnknownPayload, l.Label)
		return false
	}
	v.Payload = p
	tot, r := ipLength(p == mpls.PayloadIPv6, ip, size-v.StackEnd)
	if r != NoReason {
		v.drop(r, l.Label)
		return false
	}
	v.PayloadEnd = v.StackEnd + tot
	v.TTLOff = v.StackEnd
	v.IPv6 = p == mpls.PayloadIPv6
	v.Type = 0x0800
	if v.IPv6 {
		v.Type = 0x86dd
	}
	v.IPTTL = outTTL
	if t.Model != mpls.TTLUniform {
		in := ipTTL(v.IPv6, ip)
		if in <= 1 {
			v.drop(TTLExpired, l.Label)
			v.icmp(TimeExceeded, 0, t, pkt)
			return false
		}
		v.IPTTL = in - 1
	}
	return true
}

// CheckIPHeader checks the header of the IP packet pkt (v6: IPv6; its
// first bytes, size in all) as a router does before it forwards it (RFC
// 1812 §5.2.2): the version, a whole header (an IPv4 IHL of at least 5
// words, all present), the IPv4 header checksum, length fields within the
// packet. It returns the packet's length without padding, or the reason
// to drop it: unknown_payload, bad_checksum or malformed_ip.
func CheckIPHeader(v6 bool, pkt []byte, size int) (int, Reason) {
	null := mpls.LabelIPv4ExplicitNull
	if v6 {
		null = mpls.LabelIPv6ExplicitNull
	}
	if _, err := mpls.InferPayload(mpls.PayloadNone, null, pkt); err != nil {
		return 0, UnknownPayload
	}
	return ipLength(v6, pkt, size)
}

// ipLength checks the length fields of the IP packet ip (a whole fixed
// header, checked by InferPayload; have bytes of it in the frame) and
// returns its length: an IPv4 header checksum that verifies, a total
// length from its header to the bytes present; an IPv6 payload length
// within them (0, a jumbogram's, counts as none: the fixed header alone).
func ipLength(v6 bool, ip []byte, have int) (int, Reason) {
	if v6 {
		tot := 40 + int(binary.BigEndian.Uint16(ip[4:]))
		if tot > have {
			return 0, MalformedIP
		}
		return tot, NoReason
	}
	hl := int(ip[0]&0xf) * 4
	if !ipv4ChecksumOK(ip[:hl]) {
		return 0, BadChecksum
	}
	tot := int(binary.BigEndian.Uint16(ip[2:]))
	if tot < hl || tot > have {
		return 0, MalformedIP
	}
	return tot, NoReason
}

// ipv4ChecksumOK reports whether the IPv4 header h verifies (RFC 1071).
func ipv4ChecksumOK(h []byte) bool {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return s == 0xffff
}

func ipTTL(v6 bool, ip []byte) uint8 {
	if v6 {
		return ip[7]
	}
	return ip[8]
}

// tooBig decides a frame that does not fit its egress link, whose IP MTU
// (after the labels it leaves with) is ipMTU (RFC 3032 §3): an IPv4 packet
// without DF whose header checksum verifies leaves as fragments; any
// other packet is dropped and its sender told the MTU, so that path MTU
// discovery converges.
func (t *Tables) tooBig(pkt []byte, size, ipMTU int, v *Verdict) {
	v.inferPayload(pkt)
	ip := pkt[min(v.PayloadOff, len(pkt)):]
	if ipMTU >= 68 && v.Payload == mpls.PayloadIPv4 && len(ip) >= 20 && ip[0]>>4 == 4 &&
		binary.BigEndian.Uint16(ip[6:])&0x4000 == 0 {
		hl := int(ip[0]&0xf) * 4
		if hl < 20 || hl > len(ip) || !ipv4ChecksumOK(ip[:hl]) {
			// Each fragment gets a new header checksum: a corrupt header
			// must not leave with valid ones.
			v.drop(BadChecksum, v.Label)
			return
		}
		v.FragmentMTU = ipMTU
		return
	}
	v.drop(MTUExceeded, v.Label)
	if ipMTU > 0 {
		v.icmp(TooBig, uint32(ipMTU), t, pkt)
	}
}

// exposedLabels returns the labels a pop leaves on the frame, rest, once
// reserved labels the pop exposes are dealt with: an entropy label
// indicator and its entropy label are popped too (RFC 6790 §4.3: whoever
// pops the label above the ELI pops the ELI and EL); explicit nulls stay
// (the next hop pops them); any other reserved label (router alert, GAL,
// OAM alert, 4-15) or an ELI at the bottom of the stack makes ok false: the
// frame must not leave with it on top.
func exposedLabels(rest []mpls.Entry) (out []mpls.Entry, ok bool) {
	for len(rest) > 0 {
		switch l := rest[0].Label; {
		case l == mpls.LabelIPv4ExplicitNull || l == mpls.LabelIPv6ExplicitNull || !l.IsReserved():
			return rest, true
		case l == mpls.LabelEntropyIndicator && !rest[0].S && len(rest) >= 2:
			rest = rest[2:]
		default:
			return nil, false
		}
	}
	return rest, true
}

// DecideIP decides an IP packet (v6: IPv6) addressed to the ingress link's
// MAC: pkt is the packet from its IP header on, at least its whole header
// and as much more as is contiguous (the route lookup hashes the flow);
// size is its length with any Ethernet padding. v is overwritten. DecideIP
// allocates nothing.
func (t *Tables) DecideIP(v6 bool, pkt []byte, size int, v *Verdict) {
	*v = Verdict{TTLOff: -1, Payload: mpls.PayloadIPv4}
	if v6 {
		v.Payload = mpls.PayloadIPv6
	}
	tot, r := CheckIPHeader(v6, pkt, size)
	if r != NoReason {
		v.drop(r, 0)
		return
	}
	var src, dst netip.Addr
	if v6 {
		src, dst = netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40]))
	} else {
		src, dst = netip.AddrFrom4([4]byte(pkt[12:16])), netip.AddrFrom4([4]byte(pkt[16:20]))
	}
	if t.Router == nil || !t.transitDst(dst) {
		v.Action = Local
		v.PayloadEnd = tot
		return
	}
	if t.Node.IsLocal(src) || !icmp.SourceNamesOneHost(src) || src.IsLinkLocalUnicast() {
		v.drop(MartianSource, 0)
		return
	}
	rt, ok := t.Router.Lookup(dst, pkt)
	if !ok {
		v.drop(NoRoute, 0)
		v.icmp(Unreachable, 0, t, pkt)
		return
	}
	ttl := ipTTL(v6, pkt)
	if ttl <= 1 {
		v.drop(TTLExpired, 0)
		v.icmp(TimeExceeded, 0, t, pkt)
		return
	}
	via := rt.Via
	if !via.IsValid() {
		via = dst
	}
	mtu, ok := t.Node.LinkMTU(rt.Device)
	if !ok {
		v.drop(NoEgressLink, 0)
		return
	}
	if len(rt.Labels) > MaxOut {
		v.drop(LabelStackTooDeep, 0)
		return
	}
	v.Device, v.Via = rt.Device, via
	v.PayloadEnd = tot
	outTTL := ttl - 1
	v.TTLOff, v.IPTTL, v.IPv6 = 0, outTTL, v6
	v.Type = 0x0800
	if v6 {
		v.Type = 0x86dd
	}
	v.Did = IPForwarded
	if len(rt.Labels) > 0 {
		v.Did = Pushed
		v.Type = 0x8847
		lttl := rt.TTL
		if lttl == 0 {
			lttl = mpls.PushTTL(t.Model, outTTL, 0)
		}
		for i, l := range rt.Labels {
			v.Out[i] = mpls.Entry{Label: l, TTL: lttl, S: i == len(rt.Labels)-1}
		}
		v.NOut = len(rt.Labels)
	}
	ipMTU := int(mtu) - v.NOut*mpls.EntryLen
	if rt.MTU != 0 && int(rt.MTU) < ipMTU {
		ipMTU = int(rt.MTU)
	}
	v.Action = Forward
	if tot > ipMTU {
		t.tooBig(pkt, size, ipMTU, v)
		if v.Reason != NoReason {
			v.Action = Drop
		}
	}
}

// transitDst reports whether dst is a unicast address of another host:
// not one of the node's, not multicast, broadcast, loopback or
// unspecified, not IPv6 link-local (which is never forwarded).
func (t *Tables) transitDst(dst netip.Addr) bool {
	return dst.IsValid() && !dst.IsUnspecified() && !dst.IsMulticast() && !dst.IsLinkLocalUnicast() &&
		!dst.IsLoopback() && dst != netip.AddrFrom4([4]byte{255, 255, 255, 255}) && !t.Node.IsLocal(dst)
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

func topOf(labels []mpls.Entry) mpls.Label {
	if len(labels) == 0 {
		return 0
	}
	return labels[0].Label
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
