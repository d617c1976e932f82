package forward

import (
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/mplsnode/mplsnode/forward/labelstats"
	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/internal/drops"
	"github.com/mplsnode/mplsnode/internal/enum"
	"github.com/mplsnode/mplsnode/internal/icmp"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/link/neighbor"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Label switch limits.
const (
	// maxQueuedPerNextHop bounds the frames held per next hop while its MAC
	// address is being resolved: enough for a TCP initial window plus
	// slack; beyond it frames are dropped as queue_full, as Linux bounds its
	// neighbour queue (unres_qlen_bytes).
	maxQueuedPerNextHop = neighbor.DefaultMaxQueued
	// maxHeldPerLink bounds the frames held for one egress link within a
	// receive batch before they are written anyway: one sendmmsg's worth.
	maxHeldPerLink = 64
	// maxNextHops bounds the next hops the switch keeps state for (each
	// with its queue): transit to on-link destinations makes one per
	// destination host, which a scan of a large subnet must not grow
	// without bound. Beyond it frames are dropped as no_neighbor.
	maxNextHops = neighbor.DefaultMaxEntries
	// ipPeek is how much of the payload under the labels must be contiguous
	// to read its IP header: the largest IPv4 header (60 bytes), which
	// covers the 40-byte IPv6 header too.
	ipPeek = header.IPv4MaximumHeaderSize
)

// Drop names why the label switch discarded a frame.
type Drop uint8

// Label switch drop reasons; String is the counter name.
const (
	// DropNotReady: a frame arrived before the node finished starting.
	DropNotReady Drop = iota
	// DropTTLExpired: the label TTL reached 0 at this hop (an ICMP time
	// exceeded was sent back unless rate-limited).
	DropTTLExpired
	// DropNoEgressLink: the ILM entry names a link the node does not have.
	DropNoEgressLink
	// DropNoNeighbor: the next hop's MAC address could not be resolved.
	DropNoNeighbor
	// DropQueueFull: too many frames were waiting for the next hop's MAC.
	DropQueueFull
	// DropMTUExceeded: the outgoing frame is larger than the egress link
	// MTU (a swap that pushes labels) and its packet may not be fragmented
	// (IPv4 with DF, IPv6): the sender gets an ICMP fragmentation needed or
	// Packet Too Big with the path MTU, unless rate-limited.
	DropMTUExceeded
	// DropUnknownPayload: a popped payload is neither bound nor IP.
	DropUnknownPayload
	// DropWriteError: the egress link refused the frame.
	DropWriteError
	// DropICMPRateLimited: an ICMP error was suppressed by the rate limit
	// (the frame itself is counted as ttl_expired or mtu_exceeded).
	DropICMPRateLimited
	// DropICMPFailed: an ICMP error could not be sent (no
	// route back, no source address, not an IP payload).
	DropICMPFailed
	// DropImplicitNull: the received label stack holds label 3
	// (implicit null), which is signalled, never sent (RFC 3032 §2.1).
	DropImplicitNull
	// DropReservedLabel: popping the top label would expose a reserved
	// label (1, 4-15: router alert, GAL, OAM alert, an entropy label
	// indicator at the bottom, ...) that the node does not process; it is
	// never forwarded on.
	DropReservedLabel
	// DropICMPBadSource: an ICMP error was not sent because the
	// offending packet's source is not one host (unspecified, loopback,
	// multicast, broadcast, a connected subnet's broadcast, class E) or is
	// the node's own address (RFC 1812 §4.3.2.7, RFC 4443 §2.4). The frame
	// itself is counted as ttl_expired or mtu_exceeded.
	DropICMPBadSource
	// DropNoRoute: a transit IP packet for a destination no route covers.
	DropNoRoute
	// DropMartianSource: a transit IP packet whose source names no single
	// host (unspecified, loopback, multicast, broadcast, class E), is
	// link-local, or is one of the node's own addresses: never forwarded
	// (RFC 1812 §5.3.7, RFC 4291 §2.5.6).
	DropMartianSource
	// DropBadChecksum: an IPv4 header whose checksum does not verify: a
	// router discards it (RFC 1812 §5.2.2), so that a corrupt header never
	// leaves, least of all with a valid checksum.
	DropBadChecksum
	// DropTruncatedLabelStack: the frame ends inside its label stack, or
	// with no bottom-of-stack entry.
	DropTruncatedLabelStack
	// DropLabelStackTooDeep: no bottom-of-stack entry within the maximum
	// depth.
	DropLabelStackTooDeep
	// DropNoILMEntry: a label below one the node pops has no entry.
	DropNoILMEntry
	// DropMalformedIP: an IP length field contradicts the packet (an IPv4
	// total length below its header or beyond the bytes received, an IPv6
	// payload length beyond them): never forwarded (RFC 1812 §5.2.2).
	DropMalformedIP

	numDrops
)

var dropNames = [numDrops]string{
	DropNotReady:        "not_ready",
	DropTTLExpired:      "ttl_expired",
	DropNoEgressLink:    "no_egress_link",
	DropNoNeighbor:      "no_neighbor",
	DropQueueFull:       "queue_full",
	DropMTUExceeded:     "mtu_exceeded",
	DropUnknownPayload:  "unknown_payload",
	DropWriteError:      "write_error",
	DropICMPRateLimited: "icmp_rate_limited",
	DropICMPFailed:      "icmp_failed",
	DropImplicitNull:    "implicit_null_label",
	DropReservedLabel:   "reserved_label",
	DropICMPBadSource:   "icmp_bad_source",
	DropBadChecksum:     "bad_checksum",
	DropNoRoute:         "no_route",
	DropMartianSource:   "martian_source",

	DropTruncatedLabelStack: "truncated_label_stack",
	DropLabelStackTooDeep:   "label_stack_too_deep",
	DropNoILMEntry:          "no_ilm_entry",
	DropMalformedIP:         "malformed_ip",
}

var remedies = [numDrops]string{
	DropNotReady:        "none: transient while the node starts",
	DropTTLExpired:      "look for a forwarding loop or a too-small TTL at the ingress LER",
	DropNoEgressLink:    "name an existing link in the label route (dev NAME)",
	DropNoNeighbor:      "check that the next hop is up and answers ARP/NDP on the egress link",
	DropQueueFull:       "the next hop answers ARP/NDP too slowly; check it",
	DropMTUExceeded:     "none if the sender does path MTU discovery (it was told the MTU); else raise the egress link MTU or push fewer labels",
	DropUnknownPayload:  "the payload under the popped label is not IP; bind the label or fix the sender",
	DropWriteError:      "check the egress link (interface down, buffer full)",
	DropICMPRateLimited: "none: ICMP errors are rate-limited on purpose",
	DropICMPFailed:      "give the ingress link an address and a route back to the sender",
	DropImplicitNull:    "the upstream LSR sends label 3 (implicit null), which must never be on the wire; fix its label bindings",
	DropReservedLabel:   "the label under the popped one is reserved (router alert, GAL, OAM, ...) and not processed here; fix the upstream label stack",
	DropICMPBadSource:   "none: ICMP errors are never sent to broadcast, multicast, loopback, unspecified or own source addresses",
	DropBadChecksum:     "the packet was corrupted on the way (IPv4 header checksum); capture on the ingress link",
	DropNoRoute:         "add a route to the destination (route add PREFIX via ADDR)",
	DropMartianSource:   "a sender uses a source address no one may use, or spoofs the node's own; find it",

	DropTruncatedLabelStack: "the sender emits malformed MPLS frames; capture on the ingress link",
	DropLabelStackTooDeep:   "shorten the label stacks upstream",
	DropNoILMEntry:          "add an ILM entry for the label (mpls route add <label> ...) or fix the upstream LSR's label",
	DropMalformedIP:         "a sender emits IP packets whose length fields are wrong; capture on the ingress link",
}

// String returns the counter name, e.g. "no_neighbor".
func (r Drop) String() string { return enum.Name(dropNames[:], r) }

// Drops returns every label switch drop reason, in counter order.
func Drops() []Drop { return enum.Range(0, numDrops) }

// Stats is a snapshot of the label switch counters.
type Stats struct {
	// Forwarded counts frames written to an egress link.
	Forwarded uint64
	// Swapped counts frames whose top label was swapped (with or without
	// pushing more).
	Swapped uint64
	// PoppedIP counts frames popped to IP and forwarded.
	PoppedIP uint64
	// PoppedLabelled counts frames popped and forwarded still labelled.
	PoppedLabelled uint64
	// Queued counts frames that waited for a next hop's MAC address.
	Queued uint64
	// ICMPSent counts ICMP errors sent: time exceeded, fragmentation
	// needed and Packet Too Big.
	ICMPSent uint64
	// ICMPViaLSP counts the ICMP errors among ICMPSent that went down the
	// LSP the offending packet was on, for want of an IP route back to its
	// source (RFC 3032 §2.3.2); Swapped or the pop counters count them too.
	ICMPViaLSP uint64
	// Fragmented counts IPv4 packets (without DF) fragmented because they
	// did not fit the egress link once labelled.
	Fragmented uint64
	// Coalesced counts popped TCP segments merged into the GSO packet of the
	// segment before them (gro.go); Forwarded counts them too.
	Coalesced uint64
	// IPForwarded counts transit IP packets routed (ip.go), plain or
	// labelled.
	IPForwarded uint64
	// Pushed counts transit IP packets that left labelled (the LER push).
	Pushed uint64
	// Drops counts discards by reason, indexed by Drop.
	Drops [numDrops]uint64
}

// Drop returns the counter for reason r.
func (s *Stats) Drop(r Drop) uint64 { return enum.At(s.Drops[:], r) }

// Switch is the node's transit data path: it implements
// mplsendpoint.Forwarder and forwards labelled frames from link to link
// without entering the TCP/IP stack (swap, swap and push, pop and forward
// as IP or still labelled), with the next hop's MAC from the stack's
// neighbour table. Create it with New, give it to
// stack.Config.Forwarder, then Attach the stack.
type Switch struct {
	ttlModel mpls.TTLModel
	log      *slog.Logger
	// seed varies the flow hash that picks a multipath label route's hop
	// (net.ipv4.fib_multipath_hash_seed).
	seed atomic.Uint32

	st     atomic.Pointer[attached]
	router atomic.Pointer[Router] // transit IP routes (ip.go)

	nhs  *neighbor.Table[hopLink, hopFrame] // next hops and the frames waiting for their MAC
	txMu sync.Mutex                         // serialises heldFor
	txs  atomic.Pointer[[]*heldTx]          // one per egress link; copy-on-write under txMu

	listPool sync.Pool // *gstack.PacketBufferList

	echo atomic.Pointer[echoHolder] // SetEchoHandler

	ctr struct {
		forwarded, swapped, poppedIP, poppedLabelled, queued, icmpSent, fragmented, coalesced atomic.Uint64
		ipForwarded, pushed, icmpViaLSP                                                       atomic.Uint64
		// drops counts discards by reason, one warning a second per reason.
		drops *drops.Counters[Drop]
		// labels counts the frames carried out per incoming label (labelstats.go).
		labels labelstats.Table
	}
}

var _ mplsendpoint.BatchForwarder = (*Switch)(nil)

// attached is what the switch needs from the running stack.
// attached is the gVisor stack the switch forwards for: its NICs whose
// link endpoints are MPLS endpoints, by name and by endpoint.
type attached struct {
	ns     *gstack.Stack
	byName map[string]attachedLink
	nics   map[*mplsendpoint.Endpoint]tcpip.NICID
	// names and eps are byName's links in two slices, searched by LinkMTU
	// on every frame: faster than hashing the name for a node's few links.
	names []string
	eps   []*mplsendpoint.Endpoint
	// local holds the node's addresses and its IPv4 subnets' network and
	// broadcast addresses: IP packets to them are the stack's, never
	// transit, and packets from them get no ICMP error.
	local map[tcpip.Address]struct{}
}

// attachedLink is one of the stack's links.
type attachedLink struct {
	ep  *mplsendpoint.Endpoint
	nic tcpip.NICID
}

// nextHop is one (egress link, next hop address) pair with its resolution
// state and its queue of frames waiting for the MAC address.
type nextHop = neighbor.Entry[hopLink, hopFrame]

// hopLink is a next hop's egress link.
type hopLink struct {
	ep *mplsendpoint.Endpoint
	tx *heldTx // the egress link's frames held for the end of the batch
}

// hopFrame is a frame for a next hop, its link header built but for
// the destination MAC address.
type hopFrame struct {
	out   *gstack.PacketBuffer
	label mpls.Label // names the frame in drop warnings
	// batched: written with the receive batch (hold) when sent at once;
	// groOK: later segments may join it there.
	batched, groOK bool
	// segs is the received frames out stands for (more than 1 for a
	// labelled GRO packet sent whole, lgro.go): what its write, queueing
	// or drop counts.
	segs int
}

// heldTx holds the frames built for one egress link during a receive batch,
// written together (one sendmmsg) at the batch's end.
type heldTx struct {
	ep   *mplsendpoint.Endpoint
	gro  bool // ep's lower link takes TCP GSO frames: coalesce (gro.go)
	mu   sync.Mutex
	list gstack.PacketBufferList
	segs []int        // received frames in each held packet (more than 1 once coalesced)
	flow groFlow      // the held packet later segments may join
	n    atomic.Int32 // list.Len(), read without mu
}

// hold adds out, resolved for nh and standing for segs received frames,
// to the egress link's held list; a full list is written at once. Later
// segments may join out (GRO) only if groOK: its checksums verified. It
// consumes out's reference.
func (ls *Switch) hold(nh *nextHop, out *gstack.PacketBuffer, groOK bool, segs int) {
	tx := nh.Value.tx
	tx.mu.Lock()
	tx.list.PushBack(out)
	tx.segs = append(tx.segs, segs)
	switch {
	case tx.gro && groOK:
		tx.flow.start(nh, out)
	case tx.gro:
		tx.flow.pkt = nil // nothing may join a packet whose checksums fail
	}
	if tx.n.Add(1) >= maxHeldPerLink {
		ls.writeHeld(tx)
	}
	tx.mu.Unlock()
}

// coalesce merges payload, a popped IP packet for eg.nh whose checksums
// verified (groOK), into the packet held for the egress link when it
// continues that packet's TCP flow (gro.go), and reports whether it did
// (then it owns payload).
func (ls *Switch) coalesce(eg *egress, payload *buffer.Buffer, groOK bool) bool {
	tx := eg.nh.Value.tx
	if !groOK || !eg.batched || !tx.gro || (eg.typ != header.IPv4ProtocolNumber && eg.typ != header.IPv6ProtocolNumber) {
		return false
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if !tx.flow.coalesce(eg.nh, eg.typ == header.IPv6ProtocolNumber, payload) {
		return false
	}
	tx.segs[len(tx.segs)-1]++
	ls.ctr.coalesced.Add(1)
	return true
}

// writeHeld writes tx's frames and releases them. Callers hold tx.mu.
func (ls *Switch) writeHeld(tx *heldTx) {
	held := tx.list.Len()
	if held == 0 {
		return
	}
	n, _ := tx.ep.WriteRawFrames(tx.list)
	tx.list.Reset() // releases the frames
	tx.n.Store(0)
	tx.flow.pkt = nil
	var sent, lost uint64
	for i, k := range tx.segs {
		if i < n {
			sent += uint64(k)
		} else {
			lost += uint64(k)
		}
	}
	tx.segs = tx.segs[:0]
	ls.ctr.forwarded.Add(sent)
	if lost != 0 {
		ls.drop(DropWriteError, lost, 0)
	}
}

// EndBatch implements mplsendpoint.BatchForwarder: the ingress link has
// delivered a receive batch, so the frames held for every egress link are
// written, one batch per link.
func (ls *Switch) EndBatch(*mplsendpoint.Endpoint) {
	for _, tx := range *ls.txs.Load() {
		if tx.n.Load() == 0 {
			continue
		}
		tx.mu.Lock()
		ls.writeHeld(tx)
		tx.mu.Unlock()
	}
}

// New returns a label switch applying the TTL model on pop.
// logger receives rate-limited drop warnings (nil: slog.Default()).
func New(model mpls.TTLModel, logger *slog.Logger) *Switch {
	if logger == nil {
		logger = slog.Default()
	}
	ls := &Switch{ttlModel: model, log: logger}
	ls.ctr.drops = drops.New[Drop]("label switch: drop", dropNames[:], remedies[:], logger)
	ls.nhs = neighbor.New(neighbor.Options[hopLink, hopFrame]{
		Resolve:    ls.resolve,
		Handler:    neighbor.Handler[hopLink, hopFrame]{Write: ls.writeFrame, Drop: ls.dropFrame},
		MaxEntries: maxNextHops,
		MaxQueued:  maxQueuedPerNextHop,
	})
	ls.txs.Store(&[]*heldTx{})
	ls.listPool.New = func() any { return new(gstack.PacketBufferList) }
	return ls
}

// SetMultipathSeed sets the seed of the flow hash (mpls.LabelStackHash)
// that picks the hop of a multipath label route (mpls.ILMMultipath): the
// node's net.ipv4.fib_multipath_hash_seed, as for IP multipath. The seed
// is 0 until set.
func (ls *Switch) SetMultipathSeed(seed uint32) { ls.seed.Store(seed) }

// Attach gives the switch the running gVisor stack whose links it forwards
// between: every NIC whose link endpoint is an *mplsendpoint.Endpoint, by
// its NIC name (the device an ILM entry names). The stack's neighbour
// table resolves next hops and its routes carry the ICMP errors the switch
// sends. Frames arriving before Attach are dropped as not_ready.
func (ls *Switch) Attach(ns *gstack.Stack) {
	st := &attached{ns: ns, byName: map[string]attachedLink{}, nics: map[*mplsendpoint.Endpoint]tcpip.NICID{},
		local: map[tcpip.Address]struct{}{}}
	for _, a := range LocalAddrs(ns) {
		st.local[tcpip.AddrFromSlice(a.AsSlice())] = struct{}{}
	}
	for id, info := range ns.NICInfo() {
		if info.Name == "" {
			continue
		}
		ep, ok := ns.GetLinkEndpointByName(info.Name).(*mplsendpoint.Endpoint)
		if !ok {
			continue // the loopback, or a link that is not an MPLS endpoint
		}
		st.byName[info.Name] = attachedLink{ep: ep, nic: id}
		st.names = append(st.names, info.Name)
		st.eps = append(st.eps, ep)
		st.nics[ep] = id
	}
	ls.st.Store(st)
}

// Stats returns a snapshot of the counters.
func (ls *Switch) Stats() Stats {
	c := &ls.ctr
	s := Stats{
		Forwarded:      c.forwarded.Load(),
		Swapped:        c.swapped.Load(),
		PoppedIP:       c.poppedIP.Load(),
		PoppedLabelled: c.poppedLabelled.Load(),
		Queued:         c.queued.Load(),
		ICMPSent:       c.icmpSent.Load(),
		ICMPViaLSP:     c.icmpViaLSP.Load(),
		Fragmented:     c.fragmented.Load(),
		Coalesced:      c.coalesced.Load(),
		IPForwarded:    c.ipForwarded.Load(),
		Pushed:         c.pushed.Load(),
	}
	c.drops.Snapshot(s.Drops[:])
	return s
}

// drop counts n discards for r and logs at most one warning a second per
// reason.
func (ls *Switch) drop(r Drop, n uint64, label mpls.Label) {
	ls.ctr.drops.Add(r, n, int64(label), nil)
}

// Forward implements mplsendpoint.Forwarder: the frame is decided by the
// reference (verdict.Tables.DecideLabelled: swap or pop, the TTL rules of
// RFC 3032 §2.4 and RFC 3443, the checks of the IP packet a pop exposes,
// the egress MTU) and the verdict carried out: the new frame written to
// its next hop, or the drop counted and its ICMP error (RFC 4950) sent.
func (ls *Switch) Forward(in *mplsendpoint.Endpoint, req *mplsendpoint.ForwardRequest) {
	st := ls.st.Load()
	if st == nil {
		ls.drop(DropNotReady, 1, req.Labels[req.Top].Label)
		return
	}
	data := req.Packet.Data()
	b, ok := data.PullUp(min(data.Size(), len(req.Frame)+ipPeek))
	if !ok {
		ls.drop(DropTruncatedLabelStack, 1, req.Labels[req.Top].Label)
		return
	}
	t := ls.tables(st, req.ILM, len(req.Labels))
	var v verdict.Verdict
	const eth = header.EthernetMinimumSize
	if req.Entry != nil {
		// The endpoint walked the stack (verdict.Walk) to this entry.
		w := verdict.Walked{Label: req.Labels[req.Top].Label, Labels: req.Labels, StackEnd: len(req.Frame) - eth,
			Top: req.Top, Entry: req.Entry}
		t.DecideWalked(b[eth:], data.Size()-eth, &w, &v)
	} else {
		t.DecideLabelled(b[eth:], data.Size()-eth, &v)
	}
	ls.carryOut(st, in, req.Packet, eth, b, &v, req.Batched)
}

// egress is where and how the label switch sends one received frame: the
// next hop, the new link header's ethertype and length, and the labels
// that go in it.
type egress struct {
	nh     *nextHop
	typ    tcpip.NetworkProtocolNumber
	hdrLen int
	// labels[:nLabels] are the label stack entries the frame leaves
	// with, as encoded on the wire (held by value: the verdict they come
	// from lives on its caller's stack).
	labels  [verdict.MaxOut]mpls.Entry
	nLabels int
	hash    uint32
	// batched: the ingress link ends its receive batches with EndBatch,
	// so the frame may be held and written with the batch.
	batched bool
	// csumValid: the receive path validated the frame's checksums (the
	// kernel's TP_STATUS_CSUM_VALID, or a partial checksum it will finish).
	csumValid bool
}

// emit puts eg's link header and labels in front of payload and transmits
// the frame to eg's next hop. It takes ownership of payload.
func (ls *Switch) emit(eg *egress, payload buffer.Buffer, label mpls.Label) {
	// GRO rewrites the headers and leaves the TCP checksum for the peer's
	// kernel to complete, which would make a corrupt segment valid: only
	// segments whose checksums verify (or that the receive path validated)
	// may coalesce; the others leave as they came.
	groOK := false
	if eg.batched && eg.nh.Value.tx.gro {
		groOK = eg.csumValid || checksumsValid(eg.typ, &payload)
	}
	if ls.coalesce(eg, &payload, groOK) {
		return
	}
	ls.transmit(eg.nh, ls.linkFrame(eg, payload), label, eg.batched, groOK)
}

// nextHop returns the next hop state for (dev, addr), creating it on first
// use; nil if dev is not one of the stack's links or the switch keeps
// maxNextHops next hops.
func (ls *Switch) nextHop(st *attached, dev string, addr netip.Addr) *nextHop {
	key := neighbor.Key{Link: dev, Addr: addr}
	if nh := ls.nhs.Lookup(key); nh != nil {
		return nh
	}
	l, ok := st.byName[dev]
	if !ok {
		return nil
	}
	return ls.nhs.Add(key, l.nic, hopLink{ep: l.ep, tx: ls.heldFor(l.ep)})
}

// heldFor returns the held-frames list of egress link ep, creating it on
// first use.
func (ls *Switch) heldFor(ep *mplsendpoint.Endpoint) *heldTx {
	ls.txMu.Lock()
	defer ls.txMu.Unlock()
	old := *ls.txs.Load()
	for _, tx := range old {
		if tx.ep == ep {
			return tx
		}
	}
	tx := &heldTx{ep: ep, gro: ep.LowerGSOFrames()}
	txs := append(append(make([]*heldTx, 0, len(old)+1), old...), tx)
	ls.txs.Store(&txs)
	return tx
}

// resolve asks the attached stack's neighbour table (neighbor.Resolver).
func (ls *Switch) resolve(nic tcpip.NICID, addr tcpip.Address, proto tcpip.NetworkProtocolNumber, onResolve func(gstack.LinkResolutionResult)) tcpip.Error {
	st := ls.st.Load()
	if st == nil {
		return &tcpip.ErrNotConnected{}
	}
	return st.ns.GetLinkAddress(nic, addr, tcpip.Address{}, proto, onResolve)
}

// transmit sends out to nh once its MAC address is known (neighbor.Table.Send:
// at once when the stack's neighbour table has it cached, else queued while
// resolution runs). It consumes out's reference.
func (ls *Switch) transmit(nh *nextHop, out *gstack.PacketBuffer, label mpls.Label, batched, groOK bool) {
	ls.transmitSegs(nh, out, label, batched, groOK, 1)
}

// transmitSegs is transmit for out standing for segs received frames (a
// labelled GRO packet sent whole): its write, queueing or drop counts
// each of them, as it would count them sent one by one.
func (ls *Switch) transmitSegs(nh *nextHop, out *gstack.PacketBuffer, label mpls.Label, batched, groOK bool, segs int) {
	if ls.nhs.Send(nh, hopFrame{out: out, label: label, batched: batched, groOK: groOK, segs: segs}) == neighbor.Queued {
		ls.ctr.queued.Add(uint64(segs))
	}
}

// writeFrame puts mac in q's link header and sends it on nh's link: held
// for the end of the receive batch when it came with one, else written at
// once (a frame that waited for mac is written by the goroutine that
// handles the neighbour's answer, outside any batch).
func (ls *Switch) writeFrame(nh *nextHop, q hopFrame, mac tcpip.LinkAddress, queued bool) {
	copy(q.out.LinkHeader().Slice(), mac)
	if q.batched && !queued {
		ls.hold(nh, q.out, q.groOK, q.segs)
		return
	}
	ls.write(nh, q.out, q.label, q.segs)
}

// dropFrame counts q as queue_full or no_neighbor (none when the switch is
// flushed) and releases it.
func (ls *Switch) dropFrame(_ *nextHop, q hopFrame, why neighbor.Reason, _ bool) {
	switch why {
	case neighbor.QueueFull:
		ls.drop(DropQueueFull, uint64(q.segs), q.label)
	case neighbor.Unresolved:
		ls.drop(DropNoNeighbor, uint64(q.segs), q.label)
	}
	q.out.DecRef()
}

// write sends one frame, standing for segs received frames, on nh's link
// and releases it.
func (ls *Switch) write(nh *nextHop, out *gstack.PacketBuffer, label mpls.Label, segs int) {
	l := ls.listPool.Get().(*gstack.PacketBufferList)
	l.PushBack(out)
	n, _ := nh.Value.ep.WriteRawFrames(*l)
	l.Reset() // releases out
	ls.listPool.Put(l)
	if n == 1 {
		ls.ctr.forwarded.Add(uint64(segs))
	} else {
		ls.drop(DropWriteError, uint64(segs), label)
	}
}

// Flush drops every queued and held frame: call it when the stack has
// closed its links.
func (ls *Switch) Flush() {
	for _, tx := range *ls.txs.Load() {
		tx.mu.Lock()
		tx.list.Reset()
		tx.n.Store(0)
		tx.flow.pkt = nil
		tx.segs = tx.segs[:0]
		tx.mu.Unlock()
	}
	ls.nhs.Close()
}

// quoteLen is how much of an offending packet the ICMP errors are given
// to quote: a Packet Too Big carries up to the IPv6 minimum MTU, an ICMPv4
// error as much as fits in 576 bytes (RFC 1812 §4.3.2.3).
func quoteLen(*verdict.Verdict) int { return header.IPv6MinimumMTU }

// icmpError sends an ICMP error of kind for orig, the start of an IP
// packet (v6: IPv6; a whole fixed header) received on in, back to its
// source, sourced from in's address, with labels (the received label
// stack, nil for none) as an RFC 4950 extension; mtu is what a TooBig
// reports. The verdict decided that this source may get one (RFC 1812
// §4.3.2.7); the IP packet is routed by the stack (and labelled if the
// route back is) and rate-limited by the stack's node-wide bucket. With no
// route back, an error for a labelled packet goes down the LSP it was on
// (icmpViaLSP). label names the frame in drop warnings.
func (ls *Switch) icmpError(st *attached, in *mplsendpoint.Endpoint, v6 bool, orig, labels []byte, kind verdict.ICMPKind, mtu uint32, label mpls.Label) {
	if !st.ns.AllowICMPMessage() { // the stack's node-wide ICMP bucket (stack.ICMPRateLimit)
		ls.drop(DropICMPRateLimited, 1, label)
		return
	}
	var origSrc tcpip.Address
	proto := header.IPv4ProtocolNumber
	tproto := header.ICMPv4ProtocolNumber
	if v6 {
		proto, tproto = header.IPv6ProtocolNumber, header.ICMPv6ProtocolNumber
		origSrc = header.IPv6(orig).SourceAddress()
	} else {
		origSrc = header.IPv4(orig).SourceAddress()
	}
	dst, _ := netip.AddrFromSlice(origSrc.AsSlice())
	msgFor := func(src netip.Addr) []byte {
		switch kind {
		case verdict.TooBig:
			return icmp.FragmentationNeeded(v6, orig, labels, mtu, src, dst)
		case verdict.Unreachable:
			return icmp.NoRoute(v6, orig, src, dst)
		}
		return icmp.TimeExceeded(v6, orig, labels, src, dst)
	}
	if labels != nil && !ls.routesTo(dst) {
		// No IP route back (the node's routes and connected subnets,
		// which the stack's own traffic follows too): down the LSP.
		if ls.icmpViaLSP(st, in, v6, labels, dst, msgFor) {
			ls.ctr.icmpSent.Add(1)
			return
		}
		ls.drop(DropICMPFailed, 1, label)
		return
	}
	var local tcpip.Address
	if nic, ok := st.nics[in]; ok {
		if a, terr := st.ns.GetMainNICAddress(nic, proto); terr == nil {
			local = a.Address
		}
	}
	r, terr := st.ns.FindRoute(0, local, origSrc, proto, false)
	if terr != nil {
		r, terr = st.ns.FindRoute(0, tcpip.Address{}, origSrc, proto, false)
	}
	if terr != nil {
		ls.drop(DropICMPFailed, 1, label)
		return
	}
	defer r.Release()
	localAddr := r.LocalAddress()
	src, _ := netip.AddrFromSlice(localAddr.AsSlice())
	msg := msgFor(src)
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{ReserveHeaderBytes: int(r.MaxHeaderLength()) + len(msg)})
	defer pkt.DecRef()
	copy(pkt.TransportHeader().Push(len(msg)), msg)
	pkt.TransportProtocolNumber = tproto
	if terr := r.WritePacket(gstack.NetworkHeaderParams{Protocol: tproto, TTL: icmp.ErrorTTL}, pkt); terr != nil {
		ls.drop(DropICMPFailed, 1, label)
		return
	}
	ls.ctr.icmpSent.Add(1)
}
