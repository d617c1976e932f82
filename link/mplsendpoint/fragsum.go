package mplsendpoint

import (
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Receive checksums of fragmented datagrams.
//
// The endpoint advertises CapabilityRXChecksumOffload, so gVisor marks
// every packet from it checksum-validated and its TCP and UDP never check
// a transport checksum. A fragment carries only a piece of the transport
// datagram, so its checksum can be checked only over the whole datagram;
// gVisor reassembles after the endpoint, and the reassembled packet is a
// clone of the first fragment, validated flag included. The endpoint
// therefore checks fragmented datagrams itself: it holds the fragments of
// each datagram addressed to the host (a reference, no copy), sums their
// transport bytes as they come (fragment offsets are multiples of 8
// bytes, so every piece starts on an even byte of the datagram and the
// ones' complement sums of the pieces add up), and when the datagram is
// complete it verifies the transport checksum and hands all its fragments
// up at once, or drops them all (bad_checksum, one count per fragment).
//
// Holding rather than passing fragments on as they come keeps gVisor's
// reassembler in step with the sum: gVisor only ever sees whole, verified,
// non-overlapping fragment sets, in one go, so it completes each on its
// last fragment and never keeps a partial set the next datagram with the
// same identification could mix with (its duplicate-fragment rule keeps
// the old copy of a range; its memory limit evicts partial sets the
// endpoint cannot see). For the same reason every fragment gVisor might
// reject on its own (IPv4 options, IPv6 extension headers before the
// fragment header, a first fragment without the whole upper-layer header)
// is dropped here (unverifiable_checksum) with every fragment of its
// datagram: a set gVisor accepts in part is a set it could complete
// with pieces the endpoint never summed.
//
// Overlapping or duplicate fragments, and final fragments that disagree on
// the length, poison the datagram (RFC 5722; gVisor discards such sets
// too): its held fragments and any that follow until the reassembly
// timeout are dropped (fragment_overlap). A datagram not complete within
// gVisor's reassembly timeout (30 s IPv4, 60 s IPv6), or evicted when the
// table (fragTableSize datagrams, fragMaxHeld bytes) is full, is dropped
// (fragment_timeout, one count per fragment held).
//
// Expiry needs no further traffic: one timer, armed for the earliest
// deadline in the table and re-armed when it fires, discards what is past
// its deadline (no goroutine or allocation per datagram; a fragment also
// discards what is past its deadline before it is looked up). Eviction
// takes the "oldest" datagram, meaning the one nearest its deadline, the
// one the timer would discard first: a deadline is the first fragment's
// arrival plus its family's timeout, so the table keeps each family's
// datagrams in a list in arrival order, which is deadline order, and the
// oldest is the earlier of the two lists' heads (an IPv6 datagram that
// arrived 40 s ago, 20 s left, goes before an IPv4 one that arrived 5 s
// ago, 25 s left). Finding it, a free entry, or the next deadline is
// O(1). A full table (fragTableSize) evicts the oldest datagram; too many
// bytes held (fragMaxHeld) evict the oldest that holds fragments (a
// poisoned datagram holds none), through a second pair of lists that
// leave poisoned datagrams out. Close drops what is held
// (endpoint_closed, one count per fragment) and stops the timer; a
// fragment delivered after Close is dropped (endpoint_closed).

const (
	// fragTableSize bounds the datagrams in reassembly at once.
	fragTableSize = 1024
	// fragMaxPieces bounds the fragments of one datagram (64 KiB in
	// 1280-byte IPv6 packets is 54; in 576-byte IPv4 ones 120).
	fragMaxPieces = 128
	// fragMaxHeld bounds the bytes held, as gVisor's HighFragThreshold.
	fragMaxHeld = 4 << 20
	// fragTimeout4 and fragTimeout6 are gVisor's ipv4 and ipv6
	// ReassembleTimeout.
	fragTimeout4 = 30 * time.Second
	fragTimeout6 = 60 * time.Second
	// fragMaxExtHeaders bounds the IPv6 extension headers walked.
	fragMaxExtHeaders = 8
	// ipv4MaxPayload is gVisor's header.IPv4MaximumPayloadSize bound on a
	// reassembled IPv4 payload.
	ipv4MaxPayload = 65535 - header.IPv4MinimumSize
)

// IPv6 extension header numbers (RFC 8200 §4).
const (
	nhHopByHop uint8 = 0
	nhRouting  uint8 = 43
	nhFragment uint8 = 44
	nhDestOpts uint8 = 60
)

// fragKey identifies a datagram: RFC 791's (src, dst, ID, protocol) for
// IPv4, RFC 8200's (src, dst, ID) for IPv6.
type fragKey struct {
	src, dst [16]byte
	id       uint32
	proto    uint8
	v6       bool
}

// fragPiece is one held fragment: payload bytes [first, end) of the
// fragmentable part.
type fragPiece struct {
	first, end uint32
	pkt        *stack.PacketBuffer
}

// Lists of entries (fragEntry.links[k], fragTable.lists[k]), one per
// family each, in arrival order, which is deadline order.
const (
	// listAge holds every datagram in reassembly that is not being
	// released.
	listAge = iota
	// listHolding holds those of listAge that are not poisoned: at rest,
	// the ones that hold fragments.
	listHolding
	numFragLists
)

// noEntry ends a list of entries.
const noEntry int32 = -1

// fragLink is an entry's place in one list (indexes into the table).
type fragLink struct {
	prev, next int32
	in         bool
}

// fragList is one list of entries, by index.
type fragList struct{ head, tail int32 }

// fragEntry is the state of one datagram in reassembly.
type fragEntry struct {
	key  fragKey
	used bool
	// links are the entry's places in the lists; nextFree chains the
	// free entries.
	links    [numFragLists]fragLink
	nextFree int32
	// releasing: a goroutine is handing the verified fragments up, the
	// table unlocked; the entry is its own until it frees it.
	releasing bool
	poison    DropReason // numDropReasons: not poisoned
	deadline  int64      // monotonic ns
	n         int
	pieces    [fragMaxPieces]fragPiece
	total     int64  // fragmentable length, -1 until the final fragment
	covered   int64  // bytes of the pieces held
	sum       uint16 // ones' complement sum of the transport bytes held
	held      int    // bytes held (whole packets)
	// Known from the first fragment (offset 0).
	haveFirst bool
	tp        tcpip.TransportProtocolNumber
	l4Start   uint32 // transport offset in the fragmentable part
	udpNoSum  bool   // IPv4 UDP with checksum 0
}

// fragTable is the endpoint's reassembly-checksum state. A lower link with
// several queues delivers from several goroutines, so mu guards it. It is
// not held while a verified datagram's fragments go up (gVisor may answer
// at once, through a lower link that delivers synchronously to a peer that
// answers back): the entry stays in the table, marked releasing, and a
// fragment with the same key that arrives meanwhile is dropped
// (fragment_overlap), so that no other fragment of that key reaches
// gVisor's reassembler among them.
//
// The timer's function runs on its own goroutine and takes mu; Close
// stops the timer under mu and marks the table closed, so a run that was
// already waiting for mu does nothing.
type fragTable struct {
	mu      sync.Mutex
	entries []fragEntry
	index   map[fragKey]int32
	// lists[k][f] is list k of family f (0 IPv4, 1 IPv6).
	lists [numFragLists][2]fragList
	free  int32 // first free entry
	held  int   // bytes held in all entries
	nheld int   // fragments held in all entries
	epoch time.Time
	// timeout is the reassembly timeout of each family (fragTimeout4,
	// fragTimeout6); tests set it shorter before the first fragment.
	timeout [2]time.Duration
	// timer discards expired datagrams (fire); when armed, it fires at
	// armedAt (ns since epoch) or earlier.
	timer   *time.Timer
	armed   bool
	armedAt int64
	closed  bool
}

// init sets the table up on the first fragment: 2 MiB a link never needs
// otherwise.
func (t *fragTable) init(e *Endpoint) {
	t.entries = make([]fragEntry, fragTableSize)
	for i := range t.entries {
		ent := &t.entries[i]
		for k := range ent.links {
			ent.links[k] = fragLink{prev: noEntry, next: noEntry}
		}
		ent.nextFree = int32(i + 1)
	}
	t.entries[len(t.entries)-1].nextFree = noEntry
	t.free = 0
	for k := range t.lists {
		for f := range t.lists[k] {
			t.lists[k][f] = fragList{head: noEntry, tail: noEntry}
		}
	}
	t.index = make(map[fragKey]int32, fragTableSize)
	t.epoch = time.Now()
	if t.timeout[0] == 0 {
		t.timeout[0] = fragTimeout4
	}
	if t.timeout[1] == 0 {
		t.timeout[1] = fragTimeout6
	}
	t.timer = time.AfterFunc(time.Hour, func() { t.fire(e) })
	t.timer.Stop()
}

// now returns the monotonic time deadlines are measured in.
func (t *fragTable) now() int64 { return int64(time.Since(t.epoch)) }

// familyIndex returns the index of a family in fragTable.lists and
// fragTable.timeout.
func familyIndex(v6 bool) int {
	if v6 {
		return 1
	}
	return 0
}

// push appends entry i to the tail of list k of its family.
func (t *fragTable) push(k int, i int32) {
	ent := &t.entries[i]
	l := &t.lists[k][familyIndex(ent.key.v6)]
	ent.links[k] = fragLink{prev: l.tail, next: noEntry, in: true}
	if l.tail != noEntry {
		t.entries[l.tail].links[k].next = i
	} else {
		l.head = i
	}
	l.tail = i
}

// unlink takes entry i out of list k, if it is in it.
func (t *fragTable) unlink(k int, i int32) {
	ent := &t.entries[i]
	ln := &ent.links[k]
	if !ln.in {
		return
	}
	l := &t.lists[k][familyIndex(ent.key.v6)]
	if ln.prev != noEntry {
		t.entries[ln.prev].links[k].next = ln.next
	} else {
		l.head = ln.next
	}
	if ln.next != noEntry {
		t.entries[ln.next].links[k].prev = ln.prev
	} else {
		l.tail = ln.prev
	}
	*ln = fragLink{prev: noEntry, next: noEntry}
}

// oldest returns the entry of list k nearest its deadline, other than
// skip, or noEntry: the earlier of the two families' heads (or of a
// head's successor, where the head is skip).
func (t *fragTable) oldest(k int, skip int32) int32 {
	best := noEntry
	for f := range t.lists[k] {
		c := t.lists[k][f].head
		if c != noEntry && c == skip {
			c = t.entries[c].links[k].next
		}
		if c != noEntry && (best == noEntry || t.entries[c].deadline < t.entries[best].deadline) {
			best = c
		}
	}
	return best
}

// Fragment kinds (fragmentKind).
const (
	notFragment  = iota
	fragment     // IPv4 fragment, or IPv6 fragment header right after the fixed header
	deepFragment // IPv6 fragment header after other extension headers
)

// deliverFragment takes a fragment addressed to the host: held until its
// datagram is whole, then handed up with its other fragments if the
// transport checksum verifies, else dropped with them.
func (e *Endpoint) deliverFragment(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	var f fragInfo
	parseFragment(proto, pkt, &f)
	if f.badHeader {
		e.drop(DropBadChecksum, -1, nil) // as for unfragmented packets
		return
	}
	if e.forwarding && e.localAddr != nil && !e.localAddr(proto, f.dst) && !isMulticastOrBroadcast(f.dst) {
		// Transit for gVisor's forwarding: not reassembled here.
		e.up(proto, pkt)
		return
	}
	t := &e.frag
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		e.drop(DropEndpointClosed, -1, nil)
		return
	}
	if t.entries == nil {
		t.init(e)
	}
	i, ok := t.entryFor(e, &f)
	if !ok {
		e.drop(DropFragmentTimeout, -1, nil) // every entry is being released
		return
	}
	ent := &t.entries[i]
	if ent.releasing {
		e.drop(DropFragmentOverlap, -1, nil)
		return
	}
	if ent.poison != numDropReasons {
		e.drop(ent.poison, -1, nil)
		return
	}
	if f.malformed || f.unverif {
		// gVisor would drop this fragment alone and keep the rest.
		t.poison(e, i, DropUnverifiableChecksum)
		return
	}
	first, end := f.first, f.first+uint32(f.payLen)
	if r := t.place(ent, first, end, f.more); r != numDropReasons {
		t.poison(e, i, r)
		return
	}
	p, ok := pkt.Data().PullUp(f.payOff + f.payLen)
	if !ok {
		t.poison(e, i, DropBadChecksum)
		return
	}
	p = p[f.payOff:]
	if first == 0 {
		if p, ok = firstPiece(pkt, &f, p, ent); !ok {
			t.poison(e, i, DropUnverifiableChecksum)
			return
		}
	}
	ent.sum = checksum.Combine(ent.sum, checksum.Checksum(p, 0))
	ent.covered += int64(end - first)
	if !f.more {
		ent.total = int64(end)
	}
	if ent.total >= 0 && ent.covered == ent.total {
		t.complete(e, i, proto, pkt, &f)
		return
	}
	t.hold(e, i, pkt, first, end)
}

// hold keeps pkt, the fragment [first, end) of entry i, until its datagram
// completes, evicting the oldest entries while the table holds too much;
// an entry with too many pieces is poisoned instead.
func (t *fragTable) hold(e *Endpoint, i int32, pkt *stack.PacketBuffer, first, end uint32) {
	ent := &t.entries[i]
	if ent.n == fragMaxPieces {
		t.poison(e, i, DropUnverifiableChecksum)
		return
	}
	size := pkt.Data().Size()
	for t.held+size > fragMaxHeld && t.evictOldest(e, i) {
	}
	pkt.IncRef()
	ent.pieces[ent.n] = fragPiece{first: first, end: end, pkt: pkt}
	ent.n++
	ent.held += size
	t.held += size
	t.nheld++
}

// entryFor returns the reassembly entry of f's datagram, expiring what is
// due first and starting a new entry for a datagram not seen yet; ok is
// false when no entry is free (every one is being released). Called with
// t.mu held.
func (t *fragTable) entryFor(e *Endpoint, f *fragInfo) (int32, bool) {
	now := t.now()
	t.expireDue(e, now)
	if i, ok := t.index[f.key]; ok {
		return i, true
	}
	i := t.alloc(e)
	if i == noEntry {
		return 0, false
	}
	ent := &t.entries[i]
	ent.key, ent.used, ent.poison, ent.total = f.key, true, numDropReasons, -1
	ent.n, ent.covered, ent.sum, ent.held = 0, 0, 0, 0
	ent.haveFirst, ent.tp, ent.l4Start, ent.udpNoSum = false, 0, 0, false
	ent.deadline = now + int64(t.timeout[familyIndex(f.key.v6)])
	t.index[f.key] = i
	t.push(listAge, i)
	t.push(listHolding, i)
	t.arm(now, ent.deadline)
	return i, true
}

// place checks the range [first, end) of a new fragment against the
// datagram's: it returns numDropReasons if it fits, else the reason to
// poison the datagram.
func (t *fragTable) place(ent *fragEntry, first, end uint32, more bool) DropReason {
	if ent.total >= 0 && (int64(end) > ent.total || !more && int64(end) != ent.total) {
		return DropFragmentOverlap // beyond the end, or another end
	}
	for k := 0; k < ent.n; k++ {
		pc := &ent.pieces[k]
		if first < pc.end && pc.first < end {
			return DropFragmentOverlap // overlap or duplicate
		}
		if !more && pc.end > end {
			return DropFragmentOverlap // a piece beyond the new end
		}
	}
	return numDropReasons
}

// complete verifies entry i's datagram, whose last fragment is pkt, and
// hands all its fragments up, or drops them all. t.mu is held; it is
// released while the fragments go up.
func (t *fragTable) complete(e *Endpoint, i int32, proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer, f *fragInfo) {
	ent := &t.entries[i]
	if verifyFragmentSum(ent, f.src, f.dst) {
		ent.releasing = true
		t.unlink(listAge, i) // neither expired nor evicted meanwhile
		t.unlink(listHolding, i)
		t.mu.Unlock()
		for k := 0; k < ent.n; k++ {
			e.ctr.rxDelivered.Add(1)
			e.Endpoint.DeliverNetworkPacket(proto, ent.pieces[k].pkt)
		}
		e.ctr.rxDelivered.Add(1)
		e.Endpoint.DeliverNetworkPacket(proto, pkt)
		t.mu.Lock()
		t.release(i)
		return
	}
	e.dropN(DropBadChecksum, uint64(ent.n+1), -1, nil)
	t.release(i)
}

// poison drops entry i's held fragments and the current one for reason
// r, and every later fragment of its datagram until its deadline.
func (t *fragTable) poison(e *Endpoint, i int32, r DropReason) {
	ent := &t.entries[i]
	e.dropN(r, uint64(ent.n+1), -1, nil)
	t.unhold(ent)
	ent.poison = r
	t.unlink(listHolding, i)
}

// unhold releases the entry's held fragments.
func (t *fragTable) unhold(ent *fragEntry) {
	for k := 0; k < ent.n; k++ {
		ent.pieces[k].pkt.DecRef()
		ent.pieces[k] = fragPiece{}
	}
	t.held -= ent.held
	t.nheld -= ent.n
	ent.n, ent.held = 0, 0
}

// release frees entry i (its fragments released).
func (t *fragTable) release(i int32) {
	ent := &t.entries[i]
	t.unhold(ent)
	t.unlink(listAge, i)
	t.unlink(listHolding, i)
	delete(t.index, ent.key)
	ent.used, ent.releasing = false, false
	ent.nextFree, t.free = t.free, i
}

// discard drops entry i's held fragments for reason r and frees it.
func (t *fragTable) discard(e *Endpoint, i int32, r DropReason) {
	if n := t.entries[i].n; n > 0 {
		e.dropN(r, uint64(n), -1, nil)
	}
	t.release(i)
}

// expireDue frees every entry past its deadline (fragment_timeout),
// oldest first.
func (t *fragTable) expireDue(e *Endpoint, now int64) {
	for {
		i := t.oldest(listAge, noEntry)
		if i == noEntry || t.entries[i].deadline > now {
			return
		}
		t.discard(e, i, DropFragmentTimeout)
	}
}

// arm makes the timer fire by deadline (ns since epoch) at the latest.
func (t *fragTable) arm(now, deadline int64) {
	if t.armed && t.armedAt <= deadline {
		return
	}
	t.armed, t.armedAt = true, deadline
	t.timer.Reset(time.Duration(deadline - now))
}

// fire runs on the timer's goroutine: it frees the entries past their
// deadline and arms the timer for the next deadline, if any.
func (t *fragTable) fire(e *Endpoint) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.armed = false
	now := t.now()
	t.expireDue(e, now)
	if i := t.oldest(listAge, noEntry); i != noEntry {
		t.arm(now, t.entries[i].deadline)
	}
}

// alloc returns a free entry, evicting the one nearest its deadline if
// the table is full; noEntry if every entry is being released.
func (t *fragTable) alloc(e *Endpoint) int32 {
	if t.free == noEntry {
		i := t.oldest(listAge, noEntry)
		if i == noEntry {
			return noEntry
		}
		t.discard(e, i, DropFragmentTimeout)
	}
	i := t.free
	t.free = t.entries[i].nextFree
	return i
}

// evictOldest drops the entry nearest its deadline that holds fragments,
// other than keep, to make room; it reports false if there is none.
func (t *fragTable) evictOldest(e *Endpoint, keep int32) bool {
	i := t.oldest(listHolding, keep)
	if i == noEntry {
		return false
	}
	t.discard(e, i, DropFragmentTimeout)
	return true
}

// heldFragments returns the number of fragments held.
func (t *fragTable) heldFragments() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return uint64(t.nheld)
}

// close drops every held fragment (endpoint_closed), stops the timer and
// makes later fragments dropped too. An entry being released is freed by
// the goroutine releasing it.
func (t *fragTable) close(e *Endpoint) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
		t.armed = false
	}
	for i := range t.entries {
		if t.entries[i].used && !t.entries[i].releasing {
			t.discard(e, int32(i), DropEndpointClosed)
		}
	}
}

func isMulticastOrBroadcast(a tcpip.Address) bool {
	if a.Len() == header.IPv4AddressSize {
		return header.IsV4MulticastAddress(a) || a == header.IPv4Broadcast
	}
	return header.IsV6MulticastAddress(a)
}

// Close drops the packets the endpoint holds (fragments waiting for their
// datagram's checksum, TCP segments waiting for the end of their receive
// batch; endpoint_closed), and anything delivered to it later, and closes
// the lower link (stack.LinkEndpoint). It may be called more than once.
func (e *Endpoint) Close() {
	e.frag.close(e)
	e.groClose()
	e.lgroClose()
	e.Endpoint.Close()
}
