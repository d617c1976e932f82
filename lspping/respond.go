package lspping

import (
	"net/netip"

	"github.com/mplsnode/mplsnode/internal/enum"
	"github.com/mplsnode/mplsnode/mpls"
)

// Where says where the data plane stopped an echo request and handed it
// to the responder.
type Where uint8

const (
	// AtEgress: every label was popped here (or the request came as IP,
	// its last label popped upstream): the request is for this node.
	AtEgress Where = iota + 1
	// TTLExpired: the top label's TTL ran out here, on a label the node
	// switches.
	TTLExpired
	// NoLabelEntry: the node has no entry for the top label.
	NoLabelEntry
)

// Arrival is how a request reached the responder.
type Arrival struct {
	// Where is where the data plane stopped it.
	Where Where
	// Labels is the label stack it arrived with, outermost first; empty
	// for a request that came as IP.
	Labels []mpls.Entry
	// IP is the request's IP packet (the multipath hash reads it).
	IP []byte
	// Link is the link it arrived on.
	Link string
	// Received is when it arrived.
	Received Timestamp
}

// Tables is the node as the responder sees it: its label and IP routes,
// links and addresses.
type Tables interface {
	// ILM returns the incoming label map (nil: none).
	ILM() *mpls.ILM
	// FIB returns the IP routes (nil: none).
	FIB() *mpls.FIB
	// Egress reports whether the node is the egress for prefix p: one of
	// its addresses is in p.
	Egress(p netip.Prefix) bool
	// IsLocal reports whether a is one of the node's addresses.
	IsLocal(a netip.Addr) bool
	// LinkMTU returns the IP MTU of the link dev (0 if unknown).
	LinkMTU(dev string) uint32
	// LinkAddr returns the node's address on link dev of the family of
	// like (the invalid Addr if none).
	LinkAddr(dev string, like netip.Addr) netip.Addr
	// Seed is the multipath hash seed of the label switch.
	Seed() uint32
}

// NoReplyReason says why no reply is sent.
type NoReplyReason uint8

// Reasons for no reply; String gives the counter name.
const (
	// Replied: a reply is due.
	Replied NoReplyReason = iota
	// DropTruncated: shorter than the header: nothing to answer.
	DropTruncated
	// DropNotRequest: the message is not a request.
	DropNotRequest
	// DropNoReplyMode: the sender asked for no reply (reply mode 1).
	DropNoReplyMode
	// DropReplyModeUnsupported: a reply mode this node cannot reply in
	// (4, or unknown).
	DropReplyModeUnsupported
	// DropNotExpired: the T flag asks for replies only where the TTL ran
	// out, and it did not here.
	DropNotExpired
)

var noReplyNames = []string{
	Replied:                  "replied",
	DropTruncated:            "truncated",
	DropNotRequest:           "not_request",
	DropNoReplyMode:          "reply_mode_none",
	DropReplyModeUnsupported: "reply_mode_unsupported",
	DropNotExpired:           "ttl_not_expired",
}

// String returns the counter name.
func (r NoReplyReason) String() string {
	return enum.Name(noReplyNames, r)
}

// NoReplyReasons returns every reason but Replied, in order.
func NoReplyReasons() []NoReplyReason {
	return []NoReplyReason{DropTruncated, DropNotRequest, DropNoReplyMode, DropReplyModeUnsupported, DropNotExpired}
}

// Respond decides the answer to the request in payload (a UDP payload to
// port 3503) that arrived as a says, against the node's tables t (RFC
// 8029 §4.4, the checks this node can make): the reply to send, or nil
// and why none is. A request that does not decode gets return code 1
// (malformed) when its header does; one with mandatory TLVs not
// understood gets 2 with them in an Errored TLVs TLV; otherwise the Target
// FEC Stack entry for the top label is validated:
//
//   - no entry for the top label: 11 (no label entry at stack-depth 1);
//   - at the egress: 3 (egress) if one of the node's addresses is in the
//     FEC's prefix (a Nil FEC always), 4 (no mapping) if not;
//   - where the top label's TTL ran out: 5 (downstream mapping mismatch)
//     if the request's DDMAP names another router or another label than
//     the one received; else 8 (label switched at stack-depth 1: a static
//     label route binds no FEC, so the label is taken to be the FEC's)
//     with a DDMAP for each next
//     hop of the label (its address, link MTU and the labels it leaves
//     with; the implicit null for a pop), and for a multipath label the
//     addresses of the request's multipath information that hash to each
//     hop, as the label switch would send them.
//
// The reply carries back the handle, sequence number and sent timestamp,
// the Pad TLV if asked to copy it, and an Interface and Label Stack TLV
// when the request's DDMAP sets the I flag.
func Respond(payload []byte, a *Arrival, t Tables) (*Message, NoReplyReason) {
	req, err := Decode(payload)
	if req == nil {
		return nil, DropTruncated
	}
	if req.Type != Request {
		return nil, DropNotRequest
	}
	switch req.ReplyMode {
	case NoReply:
		return nil, DropNoReplyMode
	case ReplyUDP, ReplyUDPRouterAlert:
	default:
		return nil, DropReplyModeUnsupported
	}
	rep := &Message{Version: Version, Flags: req.Flags, Type: Reply, ReplyMode: req.ReplyMode,
		Handle: req.Handle, Seq: req.Seq, Sent: req.Sent, Received: a.Received}
	if err != nil {
		rep.Code = CodeMalformed
		return rep, Replied
	}
	if req.Flags&FlagTTLExpiredOnly != 0 && a.Where != TTLExpired {
		return nil, DropNotExpired
	}
	if req.Pad != nil && req.Pad.Action == PadCopy {
		p := *req.Pad
		rep.Pad = &p
	}
	if u := req.Unknown(); len(u) > 0 {
		rep.Code, rep.Errored, rep.HasErrored = CodeTLVNotUnderstood, u, true
		return rep, Replied
	}
	if len(req.FECs) == 0 {
		rep.Code = CodeMalformed // RFC 8029 §3: a request names the FEC it tests
		return rep, Replied
	}
	var ds *DDMap
	if len(req.DDMaps) > 0 {
		ds = &req.DDMaps[0]
		if ds.Flags&DSFlagInterface != 0 && len(a.Labels) > 0 {
			rep.Interface = interfaceTLV(a, t)
		}
	}
	// The FEC stack is aligned with the label stack at its bottom: the
	// entry for the top label is as deep as the labels received.
	depth := max(len(a.Labels), 1)
	fi := max(len(req.FECs)-depth, 0)
	fec := req.FECs[fi]
	sub := uint8(fi + 1)
	switch a.Where {
	case NoLabelEntry:
		rep.Code, rep.Subcode = CodeNoLabelEntry, 1
	case AtEgress:
		if fec.Type == FECNil || fec.Type.IsPrefix() && t.Egress(fec.Prefix) {
			rep.Code, rep.Subcode = CodeEgress, sub
		} else {
			rep.Code, rep.Subcode = CodeNoMapping, sub
		}
	default:
		transit(rep, ds, fec, a, t)
	}
	return rep, Replied
}

// transit answers a request whose top label's TTL ran out on a label the
// node switches.
func transit(rep *Message, ds *DDMap, fec FEC, a *Arrival, t Tables) {
	if len(a.Labels) == 0 {
		rep.Code, rep.Subcode = CodeNoLabelEntry, 1
		return
	}
	top := a.Labels[0]
	if ds != nil && mismatch(ds, top, t) {
		rep.Code, rep.Subcode = CodeDownstreamMismatch, 0
		return
	}
	e, ok := t.ILM().Lookup(top.Label)
	if !ok {
		rep.Code, rep.Subcode = CodeNoLabelEntry, 1
		return
	}
	rep.Code, rep.Subcode = CodeLabelSwitched, 1
	if ds == nil {
		return // RFC 8029 §4.5: DDMAPs answer a request that carries one
	}
	rest := a.Labels[1:]
	hops := []mpls.NextHop{{Via: e.NextHop, Device: e.Device, Labels: e.OutLabels}}
	switch e.Action {
	case mpls.ILMMultipath:
		hops = e.NextHops
	case mpls.ILMPopForward:
		hops[0].Labels = nil
	case mpls.ILMPopLocal:
		hops = nil
	}
	var addrs []netip.Addr
	var v6 bool
	if ds.Multipath != nil && e.Action == mpls.ILMMultipath {
		v6 = fec.Type.IPv6()
		mp := *ds.Multipath
		// The first maxMultipathAddrs destinations are answered for: the
		// work a request costs stays bounded whatever its length.
		if n := addrLenOf(v6) + maxMultipathAddrs/8; len(mp.Info) > n {
			mp.Info = mp.Info[:n]
		}
		addrs, _ = mp.Addresses(v6)
	}
	for i, h := range hops {
		d := NewDDMap(uint16(min(t.LinkMTU(h.Device), 0xffff)), h.Via, dsLabels(h.Labels, rest))
		if addrs != nil {
			d.Multipath = multipathFor(addrs, v6, i, e, a, t.Seed())
		}
		rep.DDMaps = append(rep.DDMaps, d)
	}
}

// maxMultipathAddrs bounds the destinations of a request's multipath
// information the responder sorts by next hop.
const maxMultipathAddrs = 256

func addrLenOf(v6 bool) int {
	if v6 {
		return 16
	}
	return 4
}

// mismatch reports whether the upstream's DDMAP ds names a router that
// is not this node or a top label other than top (RFC 8029 §4.4: return
// code 5).
func mismatch(ds *DDMap, top mpls.Entry, t Tables) bool {
	d := ds.Downstream
	if d.IsValid() && d != AllRouters4 && d != AllRouters6 && !t.IsLocal(d) {
		return true
	}
	return len(ds.Labels) > 0 && ds.Labels[0].Entry.Label != top.Label
}

// dsLabels is the label stack a packet leaves with: out, then the labels
// below the top one received; the implicit null alone for a pop that
// leaves none.
func dsLabels(out []mpls.Label, rest []mpls.Entry) []DSLabel {
	var l []DSLabel
	for _, o := range out {
		l = append(l, DSLabel{Entry: mpls.Entry{Label: o}, Protocol: ProtoStatic})
	}
	for _, r := range rest {
		l = append(l, DSLabel{Entry: mpls.Entry{Label: r.Label, TC: r.TC}, Protocol: ProtoUnknown})
	}
	if len(l) == 0 {
		l = append(l, DSLabel{Entry: mpls.Entry{Label: mpls.LabelImplicitNull}, Protocol: ProtoStatic})
	}
	l[len(l)-1].Entry.S = true
	return l
}

// multipathFor returns the multipath information naming the addresses
// of addrs that the label switch would send to hop i of the multipath
// label e: the request's IP packet with each address as its destination,
// hashed as the switch hashes it (mpls.LabelStackHash).
func multipathFor(addrs []netip.Addr, v6 bool, i int, e *mpls.ILMEntry, a *Arrival, seed uint32) *Multipath {
	g := e.Group()
	ip := append([]byte{}, a.IP...)
	off, n := 16, 4
	if v6 {
		off, n = 24, 16
	}
	if g == nil || len(ip) < off+n || len(addrs) == 0 {
		return &Multipath{Type: MultipathNone}
	}
	base := addrs[0]
	span := 0
	for a := base; span < 256 && a.IsValid(); a = a.Next() {
		span++
		if a == addrs[len(addrs)-1] {
			break
		}
	}
	want := g.Hops[i]
	in := map[netip.Addr]bool{}
	for _, x := range addrs {
		copy(ip[off:off+n], x.AsSlice())
		h := g.Select(mpls.LabelStackHash(seed, a.Labels, ip))
		if h.Via == want.Via && h.Device == want.Device && equalLabels(h.Labels, want.Labels) {
			in[x] = true
		}
	}
	words := (span + 31) / 32
	mp := Bitmask(base, words*32, func(k int) bool {
		x := base
		for range k {
			x = x.Next()
		}
		return in[x]
	})
	return &mp
}

func equalLabels(a, b []mpls.Label) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// interfaceTLV is the Interface and Label Stack TLV for a: the link's
// address and the labels received.
func interfaceTLV(a *Arrival, t Tables) *InterfaceLabelStack {
	addr := t.LinkAddr(a.Link, netip.AddrFrom4([4]byte{}))
	typ := AddrIPv4Numbered
	if !addr.IsValid() {
		addr = t.LinkAddr(a.Link, netip.IPv6Unspecified())
		typ = AddrIPv6Numbered
	}
	if !addr.IsValid() {
		return nil
	}
	return &InterfaceLabelStack{AddrType: typ, Addr: addr, Interface: addr, Labels: append([]mpls.Entry{}, a.Labels...)}
}
