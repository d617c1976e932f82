// Package mpls owns the MPLS data-plane vocabulary of mplsnode, with no I/O
// and no gVisor:
//
//   - the label stack wire format: Entry (label, TC, S, TTL; RFC 3032 §2.1
//     with TC per RFC 5462), Entry.Encode / DecodeEntry, ParseStack for
//     untrusted frames, EncodeLabels and Stack for building stacks;
//   - the reserved labels 0-15 (explicit nulls usable anywhere in the stack
//     per RFC 4182, implicit null never on the wire, none allocated to
//     routes);
//   - the TTL models of RFC 3443 (uniform and pipe): PushTTL, ForwardTTL,
//     PopTTL (with the RFC 1624 incremental IPv4 checksum update);
//   - payload inference under the bottom label (InferPayload): explicit
//     null label, table binding, or IP version nibble, never a guess;
//   - the FIB (NewFIB: IP routes with one or more next hops, each plain or
//     labelled, longest-prefix match over IPv4 and IPv6, any size, built in
//     O(n log n), changed by Update at about the change's cost: a delta
//     over the shared base, folded into a new base now and then) and the
//     ILM (exact match), immutable and published through Tables for lock-free
//     readers; Tables is also the one API that writes routes
//     (ReplaceRoutes, UpdateRoutes: the config, its reload, later the
//     control socket and BGP);
//   - the flow hashes that pick a multipath route's hop (Group.Select):
//     FlowHash (IP 5-tuple) and LabelStackHash (labels and the inner
//     5-tuple, or the entropy label of RFC 6790).
//
// Every malformed input gives a typed error carrying what was found and the
// byte offset, matching a sentinel for errors.Is (ErrTruncated,
// ErrNoBottomOfStack, ErrTooDeep, ErrLabelRange, ErrUnknownPayload,
// ErrTTLExpired, ErrReservedLabel). Offsets from ParseStack are relative to
// the start of the label stack, not of the frame.
//
// The per-packet functions (ParseStack, EncodeLabels, InferPayload,
// ForwardTTL, PopTTL, ILM.Lookup, FIB.Lookup, FIB.LookupBatch,
// Group.Select, FlowHash, LabelStackHash) allocate nothing on success.
//
// Receiving a labelled frame, after the Ethernet header:
//
//	var buf [mpls.DefaultMaxDepth]mpls.Entry
//	entries, n, err := mpls.ParseStack(frame, 0, buf[:0])
//	if err != nil {
//		return err // count it: truncated_label_stack, ...
//	}
//	e, ok := tables.ILM().Lookup(entries[0].Label)
//	if !ok {
//		return errNoILMEntry
//	}
//	if e.Action == mpls.ILMPopLocal && len(entries) == 1 {
//		p, err := mpls.InferPayload(e.Payload, entries[0].Label, frame[n:])
//		if err != nil {
//			return err
//		}
//		err = mpls.PopTTL(mpls.TTLUniform, entries[0].TTL, p, frame[n:])
//		...
//	}
package mpls
