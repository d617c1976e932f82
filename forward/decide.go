package forward

import (
	"net/netip"

	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// The userspace plane decides every transit frame through package
// verdict (the reference the XDP program is held to) and carries out the
// verdict here: it counts the drop, sends the ICMP error, or builds the
// frame the verdict describes (without copying the payload) and writes it
// to the next hop.

// reasonDrops maps the reference's drop reasons to the switch's counters.
var reasonDrops = [...]Drop{
	verdict.TruncatedLabelStack: DropTruncatedLabelStack,
	verdict.NoBottomOfStack:     DropTruncatedLabelStack,
	verdict.LabelStackTooDeep:   DropLabelStackTooDeep,
	verdict.ImplicitNull:        DropImplicitNull,
	verdict.ReservedLabel:       DropReservedLabel,
	verdict.NoILMEntry:          DropNoILMEntry,
	verdict.TTLExpired:          DropTTLExpired,
	verdict.NoEgressLink:        DropNoEgressLink,
	verdict.MTUExceeded:         DropMTUExceeded,
	verdict.UnknownPayload:      DropUnknownPayload,
	verdict.BadChecksum:         DropBadChecksum,
	verdict.MalformedIP:         DropMalformedIP,
	verdict.NoRoute:             DropNoRoute,
	verdict.MartianSource:       DropMartianSource,
}

// dropFor returns the switch's counter for a reference drop reason.
func dropFor(r verdict.Reason) Drop {
	if int(r) < len(reasonDrops) && r != verdict.NoReason {
		return reasonDrops[r]
	}
	return DropNotReady
}

// LinkMTU implements verdict.Node: the IP MTU of the stack's link dev.
func (st *attached) LinkMTU(dev string) (uint32, bool) {
	for i, n := range st.names {
		if n == dev {
			return st.eps[i].LinkMTU(), true
		}
	}
	return 0, false
}

// IsLocal implements verdict.Node: a is one of the node's addresses or a
// connected IPv4 subnet's network or broadcast address.
func (st *attached) IsLocal(a netip.Addr) bool {
	var k tcpip.Address
	switch a = a.Unmap(); {
	case a.Is4():
		k = tcpip.AddrFrom4(a.As4())
	case a.Is6():
		k = tcpip.AddrFrom16(a.As16())
	default:
		return false
	}
	_, ok := st.local[k]
	return ok
}

// tables returns the reference's view of the node for one decision.
func (ls *Switch) tables(st *attached, ilm *mpls.ILM, depth int) verdict.Tables {
	t := verdict.Tables{Model: ls.ttlModel, MaxDepth: max(depth, mpls.DefaultMaxDepth), ILM: ilm,
		Seed: ls.seed.Load(), Node: st}
	if rp := ls.router.Load(); rp != nil {
		t.Router = *rp
	}
	return t
}

// carryOut carries out the verdict v on the frame or packet in pkt, whose
// first off bytes (the Ethernet header of a labelled frame; 0 for an IP
// packet) precede what v's offsets count from; head is pkt's first bytes,
// contiguous, as v was decided from. in is the ingress link and batched
// says whether frames may be held for the batch's end.
func (ls *Switch) carryOut(st *attached, in *mplsendpoint.Endpoint, pkt *gstack.PacketBuffer, off int, head []byte, v *verdict.Verdict, batched bool) {
	switch v.Action {
	case verdict.Drop:
		if off > 0 && ls.echoExpired(in, pkt, head, off, v) {
			return // an MPLS echo request: the responder answers it
		}
		ls.drop(dropFor(v.Reason), 1, v.Label)
		ls.verdictICMP(st, in, pkt, off, v)
		return
	case verdict.Local:
		// The endpoint hands the switch only frames it found in transit: a
		// table changed in between.
		ls.drop(DropNotReady, 1, v.Label)
		return
	}
	eg, ok := ls.egressFor(st, pkt, v, batched)
	if !ok {
		return
	}
	data := pkt.Data()
	size := data.Size() - off // counted under the label, from the stack on
	if v.FragmentMTU != 0 {
		b, ok := data.PullUp(data.Size())
		if !ok || off+v.PayloadEnd > len(b) {
			ls.drop(DropMTUExceeded, 1, v.Label)
			return
		}
		ip := b[off+v.PayloadOff : off+v.PayloadEnd]
		if v.TTLOff >= 0 {
			v.RewriteTTL(b[off+v.TTLOff:])
		}
		frags, ok := fragmentIPv4(ip, v.FragmentMTU)
		if !ok {
			ls.drop(DropMTUExceeded, 1, v.Label)
			return
		}
		ls.count(v.Did)
		ls.countLabel(off, v.Label, size)
		ls.ctr.fragmented.Add(1)
		for _, f := range frags {
			ls.emit(&eg, buffer.MakeWithData(f), v.Label)
		}
		return
	}
	if v.TTLOff >= 0 {
		v.RewriteTTL(head[off+v.TTLOff:])
	}
	buf := data.ToBuffer()
	buf.TrimFront(int64(off + v.PayloadOff))
	if n := int64(v.PayloadEnd - v.PayloadOff); buf.Size() > n {
		buf.Truncate(n)
	}
	ls.count(v.Did)
	ls.countLabel(off, v.Label, size)
	ls.emit(&eg, buf, v.Label)
}

// egressFor returns where and how the forward verdict v on pkt leaves:
// its next hop (created on first use), ethertype and labels. Without a
// next hop (no such link, or too many next hops) the drop is counted and
// ok is false.
func (ls *Switch) egressFor(st *attached, pkt *gstack.PacketBuffer, v *verdict.Verdict, batched bool) (eg egress, ok bool) {
	nh := ls.nextHop(st, v.Device, v.Via)
	if nh == nil {
		if _, ok := st.byName[v.Device]; ok {
			ls.drop(DropNoNeighbor, 1, v.Label) // too many next hops
		} else {
			ls.drop(DropNoEgressLink, 1, v.Label)
		}
		return eg, false
	}
	eg = egress{nh: nh, typ: tcpip.NetworkProtocolNumber(v.Type), hdrLen: header.EthernetMinimumSize + v.NOut*mpls.EntryLen,
		nLabels: v.NOut, hash: pkt.Hash, batched: batched, csumValid: pkt.RXChecksumValidated}
	copy(eg.labels[:], v.Out[:v.NOut])
	return eg, true
}

// verdictICMP sends the ICMP error the verdict v asks for, if any: to the
// source of the IP packet at v.QuoteOff (after off bytes of pkt), with the
// received label stack as the RFC 4950 extension.
func (ls *Switch) verdictICMP(st *attached, in *mplsendpoint.Endpoint, pkt *gstack.PacketBuffer, off int, v *verdict.Verdict) {
	if v.ICMP == verdict.NoICMP {
		return
	}
	if v.ICMPRefused {
		ls.drop(DropICMPBadSource, 1, v.Label)
		return
	}
	if v.Payload == mpls.PayloadNone {
		ls.drop(DropICMPFailed, 1, v.Label)
		return
	}
	data := pkt.Data()
	want := quoteLen(v)
	b, ok := data.PullUp(min(data.Size(), off+v.QuoteOff+want))
	if !ok || len(b) < off+v.QuoteOff+header.IPv4MinimumSize {
		ls.drop(DropICMPFailed, 1, v.Label)
		return
	}
	var labels []byte
	if v.StackEnd > 0 {
		labels = b[off : off+v.StackEnd]
	}
	ls.icmpError(st, in, v.Payload == mpls.PayloadIPv6, b[off+v.QuoteOff:], labels, v.ICMP, v.ICMPMTU, v.Label)
}

// count counts what the switch did to one received frame.
func (ls *Switch) count(d verdict.Did) { ls.countN(d, 1) }

// countN counts what the switch did to n received packets: a transit GSO
// packet counts as the n segments it stands for (gsoout.go).
func (ls *Switch) countN(d verdict.Did, n uint64) {
	switch d {
	case verdict.IPForwarded:
		ls.ctr.ipForwarded.Add(n)
	case verdict.Pushed:
		ls.ctr.ipForwarded.Add(n)
		ls.ctr.pushed.Add(n)
	case verdict.Swapped:
		ls.ctr.swapped.Add(n)
	case verdict.PoppedLabelled:
		ls.ctr.poppedLabelled.Add(n)
	case verdict.PoppedIP:
		ls.ctr.poppedIP.Add(n)
	}
}
