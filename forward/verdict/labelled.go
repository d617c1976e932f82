package verdict

import (
	"encoding/binary"
	"net/netip"

	"github.com/mplsnode/mplsnode/mpls"
)

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
		v.NOut += copy(v.Out[v.NOut:], rest)
	case len(rest) > 0:
		v.Did = PoppedLabelled
		if !t.popToLabel(pkt, l, rest, outTTL, v) {
			return
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

// popToLabel pops l, exposing the labels rest: uniform copies the TTL
// down; in the pipe model the exposed label counts this hop itself, and
// expires at 1. It returns false when the verdict is a drop.
func (t *Tables) popToLabel(pkt []byte, l mpls.Entry, rest []mpls.Entry, outTTL uint8, v *Verdict) bool {
	e := rest[0]
	if t.Model == mpls.TTLUniform {
		e.TTL = outTTL
	} else {
		if e.TTL <= 1 {
			v.drop(TTLExpired, l.Label)
			v.icmp(TimeExceeded, 0, t, pkt)
			return false
		}
		e.TTL--
	}
	v.Out[0] = e
	v.NOut = 1 + copy(v.Out[1:], rest[1:])
	return true
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

func topOf(labels []mpls.Entry) mpls.Label {
	if len(labels) == 0 {
		return 0
	}
	return labels[0].Label
}
